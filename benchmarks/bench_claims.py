"""What claims cost: ``serq prove``'s wall time, a claim's cost on a run, and a
program without claims against the commit before them.

    python benchmarks/bench_claims.py [--part a|b|c] [--repeat 5] [--base DIR]

(a) ``serq prove`` on each program under programs/papers with its default flags,
    and on the narrowed families docs/claims.md quotes: the wall time of one
    process, and each claim's verdict, paths and states (from ``--json``);
(b) ``serq run programs/single-turn/vllm_single_turn.sq`` as it is against a copy
    with one ``every iteration of engine`` claim (its monitor turns coalesced runs
    off on that stage): the median of ``--repeat`` runs each, alternating;
(c) a program without claims runs as fast as before them:
    ``serq run programs/single-turn/vllm_single_turn.sq`` and
    ``serq run programs/single-turn/mg1.sq --horizon 20000`` here against a
    checkout of 358ea73 (``--base DIR``, with its own ``.venv``:
    ``git worktree add DIR 358ea73``, then ``python -m venv DIR/.venv`` and
    ``DIR/.venv/bin/pip install -e DIR``), alternating, 7 runs each (``--repeat``):
    median and spread (max − min).

Each timing is a whole ``serq`` process (start-up included: about 0.1 s);
events/s is the report's event count over that wall time.  Timings on a shared
machine are noisy: alternate, take the median, and quote the spread with it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VLLM = "programs/single-turn/vllm_single_turn.sq"
MG1 = "programs/single-turn/mg1.sq"
NARROWED = [
    ["programs/papers/kong_svf.sq", "--set", "N=3", "--set", "smax=103", "--set", "omax=13", "--set", "M=300",
     "--set", "P=115"],
    ["programs/papers/bari_rad.sq", "--grid", "50000", "--instants", "3", "--sessions", "2", "--bound", "vd=1..3"],
]


def serq_of(root: Path) -> list[str]:
    """The ``serq`` console script of ``root``'s ``.venv`` (this Python's for this checkout)."""
    if root == ROOT:
        script = Path(sys.executable).parent / "serq"
        return [str(script)] if script.exists() else [sys.executable, "-m", "serq"]
    return [str(root / ".venv" / "bin" / "serq")]


def timed(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    t = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-400:]}")
    return wall, done.stdout


def part_a() -> None:
    print("(a) serq prove: wall time of one process; each claim's verdict, paths, states")
    runs = [[str(p.relative_to(ROOT))] for p in sorted((ROOT / "programs" / "papers").glob("*.sq"))] + NARROWED
    for args in runs:
        wall, out = timed([*serq_of(ROOT), "prove", *args, "--json"], ROOT, ok=(0, 4, 5))
        print(f"  serq prove {' '.join(args)}: {wall:.2f} s")
        for c in json.loads(out)["claims"]:
            at = "" if c["first"] is None else f" at {c['first']}"
            print(f"    {c['name']:<22} {c['verdict'] + at:<22} {c['paths']:>8,} path(s) {c['states']:>10,} state(s)")


def _events(report_json: str) -> int:
    return int(json.loads(report_json)["events"])


def alternate(cases: list[tuple[str, list[str], Path]], repeat: int) -> None:
    """Run each case ``repeat`` times, alternating; print median, spread and events/s."""
    walls: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    events: dict[str, int] = {}
    for _ in range(repeat):
        for name, argv, cwd in cases:
            wall, out = timed(argv, cwd)
            walls[name].append(wall)
            events[name] = _events(out)
    for name, _, _ in cases:
        w = walls[name]
        med = statistics.median(w)
        print(f"  {name:<44} median {med:.3f} s  spread {max(w) - min(w):.3f} s  "
              f"{events[name]:,} events  {events[name] / med:,.0f} events/s  (runs: {', '.join(f'{x:.3f}' for x in w)})")


def part_b(repeat: int) -> None:
    print(f"(b) a claim's cost on a run: {VLLM}, median of {repeat}, alternating")
    source = ROOT / VLLM
    steady = source.with_name(".bench_claims_steady.sq")  # beside it: its `use`s are found the same way
    clocked = source.with_name(".bench_claims_timed.sq")
    # one claim a decode run reads alike (runs stay coalesced), one that reads the clock (they do not)
    steady.write_text(source.read_text() + "\nclaim nonneg: every iteration of engine (tokens >= 0);\n")
    clocked.write_text(source.read_text() + "\nclaim rate: every iteration of engine (served <= 1e9 * now + 1e9);\n")
    try:
        alternate([("as it is", [*serq_of(ROOT), "run", VLLM, "--json"], ROOT),
                   ("with `tokens >= 0` (runs kept)", [*serq_of(ROOT), "run", str(steady), "--json"], ROOT),
                   ("with a claim on served and now", [*serq_of(ROOT), "run", str(clocked), "--json"], ROOT)],
                  repeat)
    finally:
        steady.unlink()
        clocked.unlink()


def part_c(repeat: int, base: Path) -> None:
    print(f"(c) no claims, this checkout against {base} (358ea73), {repeat} runs each, alternating")
    for args in ([VLLM], [MG1, "--horizon", "20000"]):
        print(f"  serq run {' '.join(args)}")
        alternate([("now", [*serq_of(ROOT), "run", *args, "--json"], ROOT),
                   ("358ea73", [*serq_of(base), "run", *args, "--json"], base)], repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=["a", "b", "c"], action="append", help="which parts (default: all)")
    ap.add_argument("--repeat", type=int, default=None, help="runs a case (default 5 in (b), 7 in (c))")
    ap.add_argument("--base", type=Path, default=Path("/work/wt/base358"), help="a checkout of 358ea73 with .venv")
    a = ap.parse_args()
    parts = a.part or ["a", "b", "c"]
    if "a" in parts:
        part_a()
    if "b" in parts:
        part_b(a.repeat or 5)
    if "c" in parts:
        part_c(a.repeat or 7, a.base)


if __name__ == "__main__":
    main()

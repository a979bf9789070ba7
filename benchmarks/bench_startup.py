"""Start-up time of the ``serq`` command, measured as whole processes.

    python benchmarks/bench_startup.py [--repeat 7] [--top 15]

Prints the wall time (best of ``--repeat``, each a fresh process) of

* ``serq --help``,
* ``serq check programs/single-turn/mg1.sq``,
* ``serq run programs/single-turn/mg1.sq --horizon 5 --warmup 0`` (a tiny horizon: almost
  all of it is start-up),
* the same run with NumPy imported first (``serq run`` does not import NumPy
  since issue 19: the difference is what that saves),
* ``serq check programs/multi-turn/vllm.sq``,
* ``serq run programs/multi-turn/vllm.sq --horizon 0.01 --warmup 0 --set Lambda=0.9``, with its
  parses kept (docs/frontend.md, "Kept parses") and with ``SERQ_CACHE_DIR=`` (every file parsed),
* ``python -c "import serq"``,

then the count of source compilations (``compile()``, ``exec``/``eval`` of a text, ``ast.parse``:
Python's ``compile`` audit event) in ``serq run`` of mg1.sq and vllm.sq, all and serq's
generated sources (``<serq …>``), and then the costliest imports of ``serq check`` (``python -X importtime``,
by their own time and by cumulative time).  Every module's bytecode is
written first (``compileall``), as a user's first run writes it, and the parses are kept in a
folder of the benchmark's own (the first process of each command fills it).  The ``serq`` used is the console
script next to this Python (``python -m serq`` if there is none).  Timings on
a shared machine are noisy: the best of several runs is the number to quote.

``--against DIR`` instead times four commands of this checkout beside another checkout's
``serq/`` (``git worktree add DIR COMMIT``), each a ``python -P -c`` process that runs
``serq.cli.console`` (what the console script runs) from its own ``PYTHONPATH``,
alternated, best of ``--repeat`` after one round that fills each side's kept parses.
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _interpreter  # (benchmarks/_interpreter.py: the script's folder is on the path)

ROOT = Path(__file__).resolve().parent.parent
MG1 = "programs/single-turn/mg1.sq"
VLLM = "programs/multi-turn/vllm.sq"

#: a ``serq`` process that counts the ``compile`` audit events (the count on stderr's last line)
_COUNTING = """\
import atexit, sys
seen = [0, 0]
def hook(event, args):
    if event == "compile":
        seen[0] += 1
        seen[1] += str(args[1]).startswith("<serq")
sys.addaudithook(hook)
atexit.register(lambda: print(f"@@compiles {seen[0]} {seen[1]}", file=sys.stderr))
from serq.cli import console
sys.argv[0] = "serq"
console()
"""


def compiles(argv: list[str]) -> tuple[int, int]:
    """(all, serq's generated sources) compile events of ``serq *argv``."""
    done = subprocess.run([sys.executable, "-c", _COUNTING, *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    m = re.search(r"@@compiles (\d+) (\d+)", done.stderr)
    if m is None:
        raise SystemExit(f"serq {' '.join(argv)} failed: {done.stderr[-400:]}")
    return int(m.group(1)), int(m.group(2))


def serq_command() -> list[str]:
    script = Path(sys.executable).parent / "serq"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "serq"]


def best_wall(argv: list[str], repeat: int, env: dict[str, str] | None = None) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        wall = time.perf_counter() - t
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-400:]}")
        best = min(best, wall)
    return best


_LINE = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def import_costs(argv: list[str]) -> list[tuple[int, int, int, str]]:
    """(self µs, cumulative µs, depth, module) for each import of ``argv``."""
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    done = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rows = []
    for line in done.stderr.splitlines():
        m = _LINE.match(line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    return rows


#: ``serq`` as its console script runs it (no interpreter teardown), from the ``PYTHONPATH``'s tree
_CONSOLE = "import sys; from serq.cli import console; sys.argv[0] = 'serq'; console()"


def side_by_side(other: Path, repeat: int) -> None:
    """``--against``: four commands, this checkout's ``serq/`` beside ``other``'s, alternated."""
    if not (other / "serq" / "cli.py").exists():
        raise SystemExit(f"bench_startup: {other} holds no serq/cli.py")
    compile_bytecode(other)
    commands = [["run", MG1, "--horizon", "5", "--warmup", "0"], ["check", MG1], ["check", VLLM],
                ["run", VLLM, "--horizon", "0.01", "--warmup", "0", "--set", "Lambda=0.9"]]
    trees = {"other": other.resolve(), "this": ROOT}
    best: dict[tuple[int, str], float] = {}
    for round_ in range(repeat + 1):
        for n, argv in enumerate(commands):
            for side, tree in trees.items():
                env = dict(os.environ, PYTHONPATH=str(tree))
                wall = best_wall([sys.executable, "-P", "-c", _CONSOLE, *argv], 1, env)
                if round_:  # (the first round fills each side's kept parses)
                    best[n, side] = min(best.get((n, side), math.inf), wall)
    print(f"whole-process wall time, best of {repeat}, alternated: {other} | this checkout")
    for n, argv in enumerate(commands):
        print(f"  {best[n, 'other'] * 1e3:7.1f} ms | {best[n, 'this'] * 1e3:7.1f} ms  serq {' '.join(argv)}")


def compile_bytecode(tree: Path) -> None:
    """Write the bytecode of ``tree``'s ``serq/``: with PYTHONDONTWRITEBYTECODE set (as on some
    machines) every process would compile each module edited since its .pyc was last written."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "serq")], cwd=ROOT,
                   stdout=subprocess.DEVNULL, env={k: v for k, v in os.environ.items()
                                                   if k != "PYTHONDONTWRITEBYTECODE"}, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="processes per command; the best is printed")
    ap.add_argument("--top", type=int, default=15, help="how many imports to list")
    ap.add_argument("--against", type=Path, help="another checkout to time four commands beside")
    args = ap.parse_args()
    serq = serq_command()
    compile_bytecode(ROOT)
    os.environ["SERQ_CACHE_DIR"] = tempfile.mkdtemp(prefix="serq-bench-parsed-")
    atexit.register(shutil.rmtree, os.environ["SERQ_CACHE_DIR"], True)
    if args.against is not None:
        side_by_side(args.against, args.repeat)
        return
    tiny = ["run", VLLM, "--horizon", "0.01", "--warmup", "0", "--set", "Lambda=0.9"]
    unkept = dict(os.environ, SERQ_CACHE_DIR="")  # (the cache off: every file parsed)
    cases: list[tuple[str, list[str], dict[str, str] | None]] = [
        ("serq --help", [*serq, "--help"], None),
        (f"serq check {MG1}", [*serq, "check", MG1], None),
        (f"serq run {MG1} --horizon 5 --warmup 0", [*serq, "run", MG1, "--horizon", "5", "--warmup", "0"], None),
        (f"serq check {VLLM}", [*serq, "check", VLLM], None),
        (f"serq {' '.join(tiny)}", [*serq, *tiny], None),
        ("the same, SERQ_CACHE_DIR= (no parse kept)", [*serq, *tiny], unkept),
        (f"serq run {MG1} --horizon 5 --warmup 0, NumPy imported first", [sys.executable, "-c",
         "import sys, numpy; from serq.cli import console; sys.argv[0] = 'serq'; console()",
         "run", MG1, "--horizon", "5", "--warmup", "0"], None),
        ('python -c "import serq"', [sys.executable, "-c", "import serq"], None),
        ('python -c "pass" (the interpreter alone)', [sys.executable, "-c", "pass"], None),
    ]
    print(_interpreter.describe())
    print(f"whole-process wall time, best of {args.repeat} ({' '.join(serq)}):")
    for label, argv, env in cases:
        print(f"  {best_wall(argv, args.repeat, env) * 1e3:7.1f} ms  {label}")

    print("\nsource compilations (all; of serq's generated sources):")
    for program in (MG1, VLLM):
        every, own = compiles(["run", program, "--horizon", "5", "--warmup", "0"])
        print(f"  {every:5d} ({own})  serq run {program} --horizon 5 --warmup 0")

    rows = import_costs([sys.executable, "-X", "importtime", "-m", "serq", "check", MG1])
    total = sum(r[0] for r in rows)
    print(f"\nimports of `serq check {MG1}`: {len(rows)} modules, {total / 1e3:.1f} ms in all (own times)")
    print(f"  top {args.top} by own time:")
    for own, cum, _, name in sorted(rows, reverse=True)[: args.top]:
        print(f"    {own / 1e3:6.1f} ms  (cumulative {cum / 1e3:6.1f} ms)  {name}")
    print(f"  top {args.top} top-level imports by cumulative time:")
    tops = sorted((r for r in rows if r[2] == 0), key=lambda r: r[1], reverse=True)
    for own, cum, _, name in tops[: args.top]:
        print(f"    {cum / 1e3:6.1f} ms  {name}")
    for label, argv in (("check", ["check", MG1]), ("run", ["run", MG1, "--horizon", "5", "--warmup", "0"])):
        rows = import_costs([sys.executable, "-X", "importtime", "-m", "serq", *argv])
        heavy = [name for name in ("pydantic", "tabulate", "serq.draw", "numpy", "rich")
                 if any(r[3] == name for r in rows)]
        print(f"  heavy packages imported by `serq {label}`: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    # piped into `head`: end quietly when the reader goes, as a shell command does
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()

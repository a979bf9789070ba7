"""What compiling part of the simulator with mypyc buys, measured rather than guessed.

    python benchmarks/bench_mypyc.py [--modules M.py ...] [--rounds R] [CASE ...]

The question behind it (docs/speed.md, "What the remaining targets of issue 21 would take"):
would compiling the hot modules as they are written — no rewrite — bring the
P/D programs under issue 23's 3 s?  The script copies this checkout's
``serq/``, ``programs/`` and ``lib/`` into a temporary folder, compiles the named modules
there with mypyc (the six below by default: the ones that compile as written
and hold the run planner, the run replay, the prefix cache, the statistics,
the flows and the gauges), and then, for each ``CASE`` (``PROGRAM[@HORIZON]``,
``programs/pd/llmd.sq@500`` by default, warm-up a tenth of the horizon):

* checks that the compiled copy prints the same report, byte for byte, as this
  checkout (``serq run PROGRAM --horizon H``);
* counts the instructions of both runs with valgrind, as
  ``bench_instructions.py`` does (the run to H minus the run to 1);
* times both, alternating fresh processes, best of ``--rounds`` (CPU seconds
  of the whole process; noisy on a shared machine, so read the count first).

mypyc is built with ``CFLAGS=-ffp-contract=off`` so that no compiler fuses a
multiply and an add (that would change a report on machines with FMA).  Needs
``mypyc`` (``pip install mypy``), a C compiler and ``valgrind``; says which is
missing and stops otherwise.  Compiling the six modules takes about 1.5 min.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_instructions import instructions, write_bytecode

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["serq/sim/stages/coalesce.py", "serq/sim/stages/decode_run.py", "serq/sim/cache.py",
           "serq/sim/stats.py", "serq/sim/flows.py", "serq/sim/gauges.py"]


def _missing() -> str | None:
    for tool, hint in (("mypyc", "pip install mypy"), ("cc", "a C compiler"), ("valgrind", "apt-get install valgrind")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed ({hint})"
    return None


def compile_copy(dest: Path, modules: list[str]) -> None:
    """``serq/``, ``programs/`` and ``lib/`` copied to ``dest``, ``modules`` compiled there in place."""
    ignore = shutil.ignore_patterns("__pycache__", "*.so")
    for part in ("serq", "programs", "lib"):
        shutil.copytree(ROOT / part, dest / part, ignore=ignore)
    env = dict(os.environ, CFLAGS="-ffp-contract=off")
    out = subprocess.run(["mypyc", "--ignore-missing-imports", *modules], check=False, cwd=dest, env=env,
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"mypyc failed:\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    built = {str(p.relative_to(dest)).split(".")[0] for p in (dest / "serq").rglob("*.so")}
    wanted = {m.removesuffix(".py") for m in modules}
    if wanted - built:
        sys.exit(f"mypyc built no extension for {sorted(wanted - built)}")


def _report(where: Path, prog: str, horizon: str) -> bytes:
    cmd = [sys.executable, "-m", "serq", "run", prog, "--horizon", horizon, "--warmup", str(float(horizon) / 10)]
    out = subprocess.run(cmd, check=False, cwd=where, env=dict(os.environ, PYTHONPATH=str(where)),
                         capture_output=True)
    if out.returncode:
        sys.exit(f"serq run {prog} failed in {where}:\n{out.stderr.decode()[-2000:]}")
    return out.stdout


def _cpu(where: Path, prog: str, horizon: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    _report(where, prog, horizon)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases", nargs="*", default=["programs/pd/llmd.sq@500"])
    ap.add_argument("--modules", nargs="+", default=MODULES)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    missing = _missing()
    if missing:
        sys.exit(f"bench_mypyc: {missing}")
    with tempfile.TemporaryDirectory(prefix="serq-mypyc-") as tmp:
        compiled = Path(tmp)
        compile_copy(compiled, args.modules)
        for where in (ROOT, compiled):
            write_bytecode(str(where))
        print(f"compiled with mypyc: {', '.join(args.modules)}")
        for case in args.cases:
            prog, _, horizon = case.partition("@")
            horizon = horizon or "500"
            same = _report(ROOT, prog, horizon) == _report(compiled, prog, horizon)
            counts = {side: instructions(str(where), prog, horizon) - instructions(str(where), prog, "1")
                      for side, where in (("python", ROOT), ("mypyc", compiled))}
            times: dict[str, list[float]] = {"python": [], "mypyc": []}
            for _ in range(args.rounds):
                for side, where in (("python", ROOT), ("mypyc", compiled)):
                    times[side].append(_cpu(where, prog, horizon))
            print(f"{case:32s} report {'same' if same else 'DIFFERENT'}  "
                  f"instructions {counts['python'] / 1e9:.3f}e9 -> {counts['mypyc'] / 1e9:.3f}e9 "
                  f"({counts['mypyc'] / counts['python']:.3f})  "
                  f"cpu s {min(times['python']):.2f} -> {min(times['mypyc']):.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Instructions executed by the same runs under two checkouts of serQ.

    python benchmarks/bench_instructions.py OLD NEW CASE...

``OLD`` and ``NEW`` are folders holding a checkout each (``git worktree add
/tmp/old COMMIT``); a ``CASE`` is ``PROGRAM[:NAME=VALUE,...][@HORIZON]``
(horizon 500 by default, warm-up a tenth of it; the ``NAME=VALUE`` pairs are
``--set`` values, as ``bench_ab.py`` takes them), the program's path relative
to the checkouts.  Each case runs ``serq.run`` in a fresh process under valgrind's
cachegrind (``--cache-sim=no``: it only counts) twice per checkout, at the
horizon and at a horizon of 1, and prints the difference — the instructions of
the simulated time, start-up, imports and parsing left out — for both and their
ratio.  Each checkout's modules are compiled to bytecode first (``compileall``),
so that no counted run compiles them.

A count is the same on every run of the same code, where CPU seconds on a
shared machine move by a third within an hour (docs/speed.md): it tells two
commits apart by under 1 %, which timing cannot here.  It is not a time —
cache misses and branches are not in it — so a change is judged by both: the
count says whether work went away, ``bench_ab.py`` and ``bench_pd.py`` what a
user waits.  A run takes about twenty times its plain time (23 s for
``programs/pd/llmd.sq`` at horizon 500, so about 1.5 min a case); needs
``valgrind`` (Debian's package of that name).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

CODE = r'''
import sys, serq
prog, horizon = sys.argv[1], float(sys.argv[2])
loaded = serq.load(prog, sets=[tuple(kv.split("=", 1)) for kv in sys.argv[3:]])
serq.run(loaded, seed=1, horizon=horizon, warmup=horizon / 10)
'''


#: What makes a count the same on every run of the same code: a fixed string hash (with a
#: random one, sets and dicts of strings take other orders), and NumPy's BLAS on one thread
#: (OpenBLAS starts a pool when numpy is imported, whose threads spin and are counted: a run
#: of the very long outputs moved by 3 % between processes; serQ never calls BLAS).
REPEATABLE = {"PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def write_bytecode(where: str) -> None:
    """Compile checkout ``where``'s modules to bytecode now: else the first counted
    run compiles them (a fresh checkout, or PYTHONDONTWRITEBYTECODE set) and its
    count holds about 0.9e9 instructions of compiling that the next run's has not
    (a run of ``vllm.sq`` to horizon 1 in a copy without ``__pycache__``: 1.858e9, then 0.956e9)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", "serq"], cwd=where, env=env, check=True,
                   stdout=subprocess.DEVNULL)


def warm(where: str, prog: str, sets: list[str]) -> None:
    """Run ``prog`` once, uncounted, in checkout ``where``: a first load keeps the linked
    program (serq/linked.py) and the next loads read it back, so without this the first
    counted run would hold the front end's instructions (about 0.1e9 for ``vllm.sq``) and
    the run at horizon 1 would not."""
    subprocess.run([sys.executable, "-c", CODE, prog, "1", *sets], cwd=where,
                   env={"PYTHONPATH": where, "PATH": "/usr/bin:/bin", **REPEATABLE}, check=True,
                   capture_output=True)


def instructions(where: str, prog: str, horizon: str, sets: list[str]) -> int:
    """The instructions a fresh process of checkout ``where`` executes running ``prog`` to ``horizon``
    with the ``NAME=VALUE`` values ``sets`` (call :func:`write_bytecode` on the checkout first)."""
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, "-c", CODE, prog, horizon, *sets], cwd=where,
                         env={"PYTHONPATH": where, "PATH": "/usr/bin:/bin", **REPEATABLE}, capture_output=True,
                         text=True)
    if out.returncode:
        sys.exit(out.stderr)
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        sys.exit(f"no instruction count in valgrind's output:\n{out.stderr}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.exit(__doc__)
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions: valgrind is not installed (apt-get install valgrind)")
    old, new = argv[0], argv[1]
    for where in (old, new):
        write_bytecode(where)
    for case in argv[2:]:
        spec, _, horizon = case.partition("@")
        horizon = horizon or "500"
        prog, _, given = spec.partition(":")
        sets = given.split(",") if given else []
        for where in (old, new):
            warm(where, prog, sets)
        counts = {side: instructions(where, prog, horizon, sets) - instructions(where, prog, "1", sets)
                  for side, where in (("old", old), ("new", new))}
        print(f"{case:40s} old {counts['old'] / 1e9:7.3f}e9  new {counts['new'] / 1e9:7.3f}e9  "
              f"new/old {counts['new'] / counts['old']:.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

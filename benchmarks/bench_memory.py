"""What a waiting session costs in memory, object by object.

    python benchmarks/bench_memory.py [--n 20000] [--program programs/multi-turn/closed.sq] [--top 14]

Runs ``--program`` with ``N`` set to ``--n`` (a closed population: every
session is created at time 0 and, in ``closed.sq``, all but one wait at the
server) for a horizon short enough that nobody finishes, takes a
``tracemalloc`` snapshot at the end of the run, and prints the bytes and
allocations per session of the lines that allocated most (each with the
frames that led there), then the total per session.  Interpreter and import
allocations are in the total too: with a large ``--n`` they vanish per
session.  For the whole process's peak, run ``/usr/bin/time -f "%e s %M KB"
serq run programs/multi-turn/closed.sq --set N=1e6 --horizon 10 --warmup 0``.
"""

from __future__ import annotations

import argparse
import tracemalloc
from pathlib import Path
from typing import Any

import serq
from serq.sim import simulator

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000, help="sessions (the program's N)")
    ap.add_argument("--program", default=str(ROOT / "programs/multi-turn/closed.sq"))
    ap.add_argument("--top", type=int, default=14, help="lines to list")
    args = ap.parse_args()

    program = serq.load(args.program, sets=[("N", str(args.n))])
    taken: list[Any] = []
    real_run = simulator.Simulator.run

    def run_then_snapshot(sim: Any) -> None:
        real_run(sim)
        taken.append(tracemalloc.take_snapshot())

    simulator.Simulator.run = run_then_snapshot  # type: ignore[method-assign]
    tracemalloc.start(4)
    try:
        serq.run(program, seed=1, horizon=1e-9, warmup=0.0)
    finally:
        simulator.Simulator.run = real_run  # type: ignore[method-assign]
        tracemalloc.stop()
    stats = taken[0].statistics("traceback")
    n = args.n
    print(f"{Path(args.program).name}, N = {n}: bytes and allocations per session, by allocating line")
    for st in stats[:args.top]:
        frames = [f"{Path(fr.filename).name}:{fr.lineno}" for fr in st.traceback]
        print(f"{st.size / n:8.1f} B {st.count / n:6.2f}  {' <- '.join(reversed(frames))}")
    print(f"{sum(st.size for st in stats) / n:8.1f} B in all per session")


if __name__ == "__main__":
    main()

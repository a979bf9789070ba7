"""The sweep's speed-up from one job to two (issue 10: >= 1.7x on two idle cores).

    python benchmarks/bench_sweep.py [--rounds 2] [--horizon 600]

A fixed sweep — programs/multi-turn/vllm.sq, Lambda 0.3:0.6:0.1 x seeds 1-6
(24 runs), horizon 600 s, warm-up 60 s — run through ``serq.sweep`` with
``jobs=1`` (in this process, one run after another) and ``jobs=2`` (a pool of
two spawned workers, their start-up included).  Prints each wall time (best
of ``--rounds``), the speed-up, and checks both gave the same rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import serq  # noqa: E402

PROGRAM = str(ROOT / "programs/multi-turn/vllm.sq")
GRID = {"Lambda": [0.3, 0.4, 0.5, 0.6]}
SEEDS = range(1, 7)


def timed(jobs: int, horizon: float, rounds: int) -> tuple[float, list[dict]]:
    best, rows = float("inf"), []
    for _ in range(rounds):
        start = time.perf_counter()
        result = serq.sweep(PROGRAM, GRID, seeds=SEEDS, horizon=horizon, warmup=horizon / 10, jobs=jobs)
        best = min(best, time.perf_counter() - start)
        rows = result.rows
    return best, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--horizon", type=float, default=600.0)
    args = parser.parse_args()
    runs = len(GRID["Lambda"]) * len(SEEDS)
    print(f"sweep: vllm.sq, Lambda 0.3:0.6:0.1 x seeds 1-6 ({runs} runs), horizon {args.horizon:g} s; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "")
    one, rows1 = timed(1, args.horizon, args.rounds)
    print(f"--jobs 1: {one:6.2f} s wall (best of {args.rounds}), {one / runs:.3f} s per run")
    two, rows2 = timed(2, args.horizon, args.rounds)
    print(f"--jobs 2: {two:6.2f} s wall (best of {args.rounds})")
    print(f"speed-up: {one / two:.2f}x (target >= 1.7x on two idle cores)")
    assert rows1 == rows2, "jobs 1 and jobs 2 gave different rows"
    print("rows: identical")


if __name__ == "__main__":
    main()

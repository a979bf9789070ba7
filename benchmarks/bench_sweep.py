"""The sweep's speed-up from one job to two (issue 10: >= 1.7x on two idle cores).

    python benchmarks/bench_sweep.py [--rounds 2] [--horizon 600]

A fixed sweep — programs/multi-turn/vllm.sq, Lambda 0.3:0.6:0.1 x seeds 1-6
(24 runs), horizon 600 s, warm-up 60 s — run through ``serq.sweep`` with
``jobs=1`` (in this process, one run after another) and ``jobs=2`` (a pool of
two spawned workers, their start-up included).  Prints each wall time (best
of ``--rounds``) and its CPU seconds (the workers' included), the speed-up, the
pool's CPU overhead (which bounds the speed-up on idle cores), and checks both
gave the same rows.
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


def cpu() -> float:
    """CPU seconds of this process and of its finished children (the pool's workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(jobs: int, horizon: float, rounds: int) -> tuple[float, float, list[dict]]:
    """Best wall time of ``rounds`` sweeps, the CPU seconds of that round, and the rows."""
    best, best_cpu, rows = float("inf"), 0.0, []
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), cpu()
        result = serq.sweep(PROGRAM, GRID, seeds=SEEDS, horizon=horizon, warmup=horizon / 10, jobs=jobs)
        wall = time.perf_counter() - start
        if wall < best:
            best, best_cpu = wall, cpu() - start_cpu
        rows = result.rows
    return best, best_cpu, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--horizon", type=float, default=600.0)
    args = parser.parse_args()
    runs = len(GRID["Lambda"]) * len(SEEDS)
    print(f"sweep: vllm.sq, Lambda 0.3:0.6:0.1 x seeds 1-6 ({runs} runs), horizon {args.horizon:g} s; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "")
    one, cpu1, rows1 = timed(1, args.horizon, args.rounds)
    print(f"--jobs 1: {one:6.2f} s wall (best of {args.rounds}), {cpu1:6.2f} s CPU")
    two, cpu2, rows2 = timed(2, args.horizon, args.rounds)
    print(f"--jobs 2: {two:6.2f} s wall (best of {args.rounds}), {cpu2:6.2f} s CPU (workers included)")
    print(f"speed-up: {one / two:.2f}x (target >= 1.7x on two idle cores)")
    # On a busy machine the wall times say little; the CPU seconds say what the
    # pool costs: with two idle cores the speed-up is at most 2 * cpu1 / cpu2.
    print(f"CPU overhead of the pool: {cpu2 / cpu1:.2f}x; on two idle cores at most {2 * cpu1 / cpu2:.2f}x")
    assert rows1 == rows2, "jobs 1 and jobs 2 gave different rows"
    print("rows: identical")


if __name__ == "__main__":
    main()

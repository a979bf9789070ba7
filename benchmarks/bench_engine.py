"""Wall time of the step engine on ``programs/multi-turn/vllm.sq``.

    python benchmarks/bench_engine.py [--horizons 300 2000] [--plain]

For each horizon: wall time, engine iterations, iterations per wall second,
report events per second and simulated seconds per wall second.  ``--plain``
also runs the engine iteration by iteration (no coalescing of decode runs),
which must give the same report, and says whether it did.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import serq
from serq.sim.stages import StepEngine

ROOT = Path(__file__).resolve().parent.parent


class PlainEngine(StepEngine):
    """The default scheduler, one event per iteration."""

    coalesce = False


def timed(program: serq.Program, horizon: float, engines: dict) -> tuple[float, "serq.Report"]:
    t = time.perf_counter()
    report = serq.run(program, seed=1, horizon=horizon, warmup=horizon / 10, engines=engines)
    return time.perf_counter() - t, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizons", type=float, nargs="+", default=[300.0, 2000.0])
    ap.add_argument("--plain", action="store_true", help="also run without coalescing and compare")
    args = ap.parse_args()
    program = serq.load(ROOT / "programs/multi-turn/vllm.sq")
    for horizon in args.horizons:
        wall, report = timed(program, horizon, {})
        iters = report.stage("engine").iterations
        print(f"vllm.sq horizon {horizon:g}: wall {wall:.2f} s, iterations {iters}, "
              f"{iters / wall / 1e3:.0f} k iterations/s, {report.events / wall / 1e3:.0f} k events/s, "
              f"{horizon / wall:.0f} simulated s per wall s")
        if args.plain:
            wall2, plain = timed(program, horizon, {"engine": PlainEngine})
            same = plain.to_json() == report.to_json()
            print(f"  iteration by iteration: wall {wall2:.2f} s ({wall2 / wall:.1f}x); "
                  f"report {'identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()

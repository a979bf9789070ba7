"""Events per second of the simulator core on ``programs/single-turn/mg1.sq``
(M/M/1 at ρ = 0.8), next to a raw SimPy timeout loop measured in the same run.

    python benchmarks/bench_core.py [--horizon 200000]

Prints wall time (best of three runs), the report's ``events`` (arrivals, job
ends, the end of warm-up), events per second, simulated seconds per wall
second, the SimPy events behind them (a customer also needs its process's
start and end, and a wake-up when it queued), and the ratio to the raw loop.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import simpy

import serq
from serq.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent


def raw_simpy(n: int) -> float:
    """Events per second of one SimPy process doing ``yield env.timeout(1)``."""
    env = simpy.Environment()

    def proc():
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(proc())
    t = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - t)


def handwritten_mm1(customers: int) -> float:
    """Spec events per second (an arrival and a service end per customer) of the
    idiomatic SimPy M/M/1: a process per customer, a ``Resource``, one shared
    ``random.Random`` — no language, statistics or keyed streams."""
    env = simpy.Environment()
    server = simpy.Resource(env, 1)
    rnd = random.Random(1)

    def customer():
        with server.request() as req:
            yield req
            yield env.timeout(rnd.expovariate(1.0))

    def source():
        for _ in range(customers):
            env.process(customer())
            yield env.timeout(rnd.expovariate(0.8))

    env.process(source())
    t = time.perf_counter()
    env.run()
    return 2 * customers / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=float, default=200_000.0)
    ap.add_argument("--warmup", type=float, default=1_000.0)
    args = ap.parse_args()
    program = serq.load(ROOT / "programs/single-turn/mg1.sq")
    wall = float("inf")
    for _ in range(3):
        sim = Simulator(program, seed=1, horizon=args.horizon, warmup=args.warmup)
        t = time.perf_counter()
        sim.run()
        wall = min(wall, time.perf_counter() - t)
    simpy_events = next(sim.env._eid)  # every event SimPy scheduled
    rate = sim.events / wall
    raw = max(raw_simpy(1_000_000) for _ in range(3))
    print(f"mg1.sq horizon {args.horizon:g}: wall {wall:.2f} s, events {sim.events}, "
          f"{rate / 1e3:.0f} k events/s, {args.horizon / wall:.0f} simulated s per wall s")
    print(f"  SimPy events behind them: {simpy_events} ({simpy_events / wall / 1e3:.0f} k/s)")
    print(f"raw SimPy timeout loop: {raw / 1e3:.0f} k events/s")
    hand = max(handwritten_mm1(100_000) for _ in range(3))
    print(f"hand-written SimPy M/M/1 (a process per customer, a Resource): {hand / 1e3:.0f} k events/s")
    print(f"ratio serq / raw SimPy: {rate / raw:.3f}; serq / hand-written M/M/1: {rate / hand:.2f}")


if __name__ == "__main__":
    main()

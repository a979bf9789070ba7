"""Events per second of the simulator core on the M/G/1 path
(``programs/single-turn/mg1.sq``, an M/M/1 at ρ = 0.8; ``ps.sq``;
``programs/multi-turn/closed.sq``), next to the idiomatic hand-written SimPy
M/M/1 and a raw SimPy timeout loop, measured in the same run.

    python benchmarks/bench_core.py [--horizon 200000] [--rounds 5] [--programs mg1,ps,closed]

The machine is shared and noisy, so each serq run alternates with a run of
the hand-written M/M/1 of the same number of customers, and each side keeps
its best of ``--rounds``; rates are per CPU second of the process (wall time
is printed too), which other work on the machine disturbs less.  Prints, per program: wall time, the report's
``events`` (arrivals, job ends, the end of warm-up), events per second,
simulated seconds per wall second, the SimPy events behind them; then the
ratio of serq's time per event to the hand-written M/M/1's (issue 9's target:
at most 1.3).
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
PROGRAMS = {
    "mg1": "programs/single-turn/mg1.sq",
    "ps": "programs/single-turn/ps.sq",
    "closed": "programs/multi-turn/closed.sq",
}


def raw_simpy(n: int) -> float:
    """Events per second of one SimPy process doing ``yield env.timeout(1)``."""
    env = simpy.Environment()

    def proc():
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(proc())
    c = time.process_time()
    env.run()
    return n / (time.process_time() - c)


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
    c = time.process_time()
    env.run()
    return 2 * customers / (time.process_time() - c)


def serq_run(program: object, horizon: float, warmup: float) -> tuple[float, float, Simulator]:
    """(wall seconds, CPU seconds, the simulator) of one run."""
    sim = Simulator(program, seed=1, horizon=horizon, warmup=warmup)  # type: ignore[arg-type]
    t, c = time.perf_counter(), time.process_time()
    sim.run()
    return time.perf_counter() - t, time.process_time() - c, sim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=float, default=200_000.0)
    ap.add_argument("--warmup", type=float, default=1_000.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--programs", default="mg1,ps,closed")
    args = ap.parse_args()
    raw = max(raw_simpy(1_000_000) for _ in range(3))
    print(f"raw SimPy timeout loop: {raw / 1e3:.0f} k events/s")
    for name in args.programs.split(","):
        program = serq.load(ROOT / PROGRAMS[name])
        wall, cpu, hand = float("inf"), float("inf"), 0.0
        sim = None
        for _ in range(args.rounds):
            w, c, sim = serq_run(program, args.horizon, args.warmup)
            wall, cpu = min(wall, w), min(cpu, c)
            hand = max(hand, handwritten_mm1(max(1, sim.events // 2)))
        assert sim is not None
        simpy_events = next(sim.env._eid)  # every event SimPy scheduled
        rate = sim.events / cpu
        print(f"{PROGRAMS[name]} horizon {args.horizon:g}: wall {wall:.3f} s (CPU {cpu:.3f} s), events {sim.events}, "
              f"{rate / 1e3:.0f} k events/s, {args.horizon / cpu:.0f} simulated s per CPU s, "
              f"SimPy events {simpy_events} ({simpy_events / cpu / 1e3:.0f} k/s)")
        print(f"  hand-written SimPy M/M/1 (a process per customer, a Resource): {hand / 1e3:.0f} k events/s; "
              f"serq time per event / hand-written: {hand / rate:.2f} (target <= 1.3); "
              f"serq / raw SimPy: {rate / raw:.3f}")


if __name__ == "__main__":
    main()

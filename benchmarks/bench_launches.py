"""The iterations a step engine launches one at a time, by kind (deterministic).

    python benchmarks/bench_launches.py [--horizon 2000] CASE...

A ``CASE`` is ``PROGRAM[:NAME=VALUE,...]`` (``--set`` values, as ``bench_ab.py``
takes them).  Each runs ``serq.run`` at seed 1 (warm-up a tenth of the
horizon) with every step engine's ``_launch`` counted, and prints, per kind of
launch — a prefill alone, prefills beside decodes ("mixed"), decodes only
that became a coalesced run, decodes only that ran alone — how many there
were and how many decoding residents they walked, beside the iterations the
engines ran and the turns the sessions started.  A launch is what a run costs
outside its coalesced stretches (the planning walk over the batch, the
iteration's cost, a timer, its end and commit): these counts say where the
per-turn work of docs/speed.md goes, on any machine, in a few seconds.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

import serq
from serq.sim.session import Session
from serq.sim.stages.step import StepEngine

KINDS = ("prefill alone", "mixed", "decodes, run", "decodes, alone")


def count(case: str, horizon: float) -> None:
    path, _, sets = case.partition(":")
    program = serq.load(path, sets=[tuple(kv.split("=", 1)) for kv in sets.split(",") if kv])
    launches: Counter[str] = Counter()
    walked: Counter[str] = Counter()
    turns = [0]
    launch, do_turn = StepEngine._launch, Session.do_turn

    def counted_launch(self: StepEngine, attention: float, preempted: bool, budget: float) -> bool:
        prefills = sum(1 for job, _t in self.assign if job.prefill)
        decodes = len(self.assign) - prefills
        out = launch(self, attention, preempted, budget)
        if prefills:
            kind = "mixed" if decodes else "prefill alone"
        else:
            kind = "decodes, run" if self.run_length > 1 else "decodes, alone"
        launches[kind] += 1
        walked[kind] += decodes
        return out

    def counted_turn(self: Session, *args: Any, **kwargs: Any) -> Any:
        turns[0] += 1
        return do_turn(self, *args, **kwargs)

    StepEngine._launch = counted_launch  # type: ignore[method-assign]
    Session.do_turn = counted_turn  # type: ignore[method-assign]
    try:
        report = serq.run(program, seed=1, horizon=horizon, warmup=horizon / 10)
    finally:
        StepEngine._launch, Session.do_turn = launch, do_turn  # type: ignore[method-assign]
    iterations = sum(st.iterations or 0 for st in report.stages if getattr(st, "iterations", None))
    total = sum(launches.values())
    print(f"{case}: {turns[0]:,} turns, {iterations:,} iterations, {total:,} launches "
          f"({total / max(turns[0], 1):.2f} a turn)")
    for kind in KINDS:
        print(f"    {kind:15s} {launches[kind]:>9,} launches  {walked[kind]:>10,} decoders walked")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--horizon", type=float, default=2000.0)
    args = ap.parse_args()
    for case in args.cases:
        count(case, args.horizon)


if __name__ == "__main__":
    main()

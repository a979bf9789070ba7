"""The iterations a step engine launches one at a time, by kind (deterministic).

    python benchmarks/bench_launches.py [--horizon 2000] [--times] CASE...

A ``CASE`` is ``PROGRAM[:NAME=VALUE,...]`` (``--set`` values, as ``bench_ab.py``
takes them).  Each runs ``serq.run`` at seed 1 (warm-up a tenth of the
horizon) with every step engine's ``_launch`` counted, and prints, per kind of
launch — a prefill alone, prefills beside decodes ("mixed"), decodes only
that became a coalesced run, decodes only that ran alone — how many there
were and how many decoding residents they walked, beside the iterations the
engines ran and the turns the sessions started; and how many mixed launches a
coalesced run could take in as its first iteration (each prefill in it ends
there with a chained decode, no decoder finishes, and the engine's next launch
is a run over the same residents).  A launch is what a run costs
outside its coalesced stretches (the planning walk over the batch, the
iteration's cost, a timer, its end and commit): these counts say where the
per-turn work of docs/speed.md goes, on any machine, in a few seconds.

``--times`` runs each case once more, without the counters, with the wall
seconds of the engine's parts added up (``time.perf_counter`` around each
call; a call inside another is counted in both): planning an iteration
(``start_iteration``, and in it the run planner's ``plan`` and the
admissions' ``admit_next``) and ending one (``_iter_end``, and in it a run's
``replay``), as shares of the whole ``serq.run``; and in another run, the
mixed launches' starts (with the admissions made in them) and ends.  These are times, so they
move with the machine; the wrappers add about 1 µs a call.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

import serq
from serq.sim.session import Session
from serq.sim.stages.coalesce import RunPlanner
from serq.sim.stages.decode_run import DecodeRun
from serq.sim.stages.step import StepEngine

KINDS = ("prefill alone", "mixed", "decodes, run", "decodes, alone")


#: (class, method) of the parts ``--times`` adds up, in the order printed
PARTS = ((StepEngine, "start_iteration"), (RunPlanner, "plan"), (StepEngine, "admit_next"),
         (StepEngine, "_iter_end"), (DecodeRun, "replay"))


def load(case: str) -> Any:
    path, _, sets = case.partition(":")
    return serq.load(path, sets=[tuple(kv.split("=", 1)) for kv in sets.split(",") if kv])


def count(case: str, horizon: float) -> None:
    program = load(case)
    launches: Counter[str] = Counter()
    walked: Counter[str] = Counter()
    turns = [0]
    launch, do_turn = StepEngine._launch, Session.do_turn
    # per engine, the residents after its last launch when that was a mixed one a run could take
    # in: its prefills all end in it with a chained decode, and no decoder finishes in it
    closed: dict[int, int] = {}
    folds = [0]

    def counted_launch(self: StepEngine, attention: float, preempted: bool, budget: float) -> bool:
        prefills = sum(1 for job, _t in self.assign if job.prefill)
        decodes = len(self.assign) - prefills
        whole = all((job.work <= t) == (job.prefill and job.then is not None) for job, t in self.assign)
        out = launch(self, attention, preempted, budget)
        if prefills:
            kind = "mixed" if decodes else "prefill alone"
        else:
            kind = "decodes, run" if self.run_length > 1 else "decodes, alone"
        launches[kind] += 1
        walked[kind] += decodes
        if kind == "decodes, run" and closed.get(id(self)) == len(self.residents):
            folds[0] += 1
        closed.pop(id(self), None)
        if kind == "mixed" and whole:
            closed[id(self)] = len(self.residents)
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
    iterations = sum(getattr(st, "iterations", None) or 0 for st in report.stages)
    total = sum(launches.values())
    print(f"{case}: {turns[0]:,} turns, {iterations:,} iterations, {total:,} launches "
          f"({total / max(turns[0], 1):.2f} a turn)")
    for kind in KINDS:
        print(f"    {kind:15s} {launches[kind]:>9,} launches  {walked[kind]:>10,} decoders walked")
    print(f"    mixed launches a run could take in: {folds[0]:,} (each prefill ends in it with a chained "
          "decode, no decoder finishes, and the next launch is a run over the same residents)")


def patched_run(program: Any, horizon: float, wrappers: list[tuple[type, str, Any]]) -> float:
    """The wall seconds of ``serq.run`` of ``program`` (seed 1, warm-up a tenth of
    ``horizon``, after a 5 s run for imports and first compiles), with each method
    ``(class, name, make)`` of ``wrappers`` replaced by ``make(original)`` for the run."""
    serq.run(program, seed=1, horizon=5.0, warmup=0.0)
    originals = [(cls, name, getattr(cls, name)) for cls, name, _make in wrappers]
    for (cls, name, fn), (_cls, _name, make) in zip(originals, wrappers):
        setattr(cls, name, make(fn))
    try:
        t0 = time.perf_counter()
        serq.run(program, seed=1, horizon=horizon, warmup=horizon / 10)
        return time.perf_counter() - t0
    finally:
        for cls, name, fn in originals:
            setattr(cls, name, fn)


def timed_run(program: Any, horizon: float, parts: tuple[tuple[type, str], ...]) -> tuple[float, dict[str, float]]:
    """:func:`patched_run` with the wall seconds of each ``(class, method)`` of ``parts``
    added up (a call inside another counts in both): the run's seconds and each part's,
    by method name."""
    spent = dict.fromkeys((name for _cls, name in parts), 0.0)

    def timed(name: str) -> Any:
        def make(fn: Any) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                t = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    spent[name] += time.perf_counter() - t
            return call
        return make

    total = patched_run(program, horizon, [(cls, name, timed(name)) for cls, name in parts])
    return total, spent


def times(case: str, horizon: float) -> None:
    program = load(case)
    total, spent = timed_run(program, horizon, PARTS)
    print(f"    run {total:.3f} s: " + ", ".join(f"{name} {x / total:.1%}" for name, x in spent.items()))
    total, mixed = mixed_times(program, horizon)
    print(f"    run {total:.3f} s: the mixed launches' starts {mixed[0] / total:.1%} (their admissions "
          f"{mixed[1] / total:.1%}), their ends {mixed[2] / total:.1%}")


def mixed_times(program: Any, horizon: float) -> tuple[float, list[float]]:
    """The wall seconds of a run (:func:`patched_run`), and of its mixed launches'
    ``start_iteration`` (prefills beside decodes), the admissions made in those, and
    their ``_iter_end``."""
    mixed: dict[int, bool] = {}  # engine → whether its launch in flight is a mixed one
    spent = [0.0, 0.0, 0.0]
    pending = [0.0]  # admissions of the start in progress

    def start(fn: Any) -> Any:
        def call(self: StepEngine, *args: Any, **kwargs: Any) -> Any:
            pending[0] = 0.0
            mixed[id(self)] = False  # (a start that launches nothing leaves it so)
            t = time.perf_counter()
            out = fn(self, *args, **kwargs)
            if mixed[id(self)]:
                spent[0] += time.perf_counter() - t
                spent[1] += pending[0]
            return out
        return call

    def admit(fn: Any) -> Any:
        def call(self: StepEngine, *args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(self, *args, **kwargs)
            finally:
                pending[0] += time.perf_counter() - t
        return call

    def launch(fn: Any) -> Any:
        def call(self: StepEngine, *args: Any, **kwargs: Any) -> Any:
            prefills = sum(1 for job, _t in self.assign if job.prefill)
            mixed[id(self)] = 0 < prefills < len(self.assign)
            return fn(self, *args, **kwargs)
        return call

    def end(fn: Any) -> Any:
        def call(self: StepEngine, *args: Any, **kwargs: Any) -> Any:
            was = mixed.get(id(self)) and self.run is None
            t = time.perf_counter()
            out = fn(self, *args, **kwargs)
            if was:
                spent[2] += time.perf_counter() - t
            return out
        return call

    total = patched_run(program, horizon, [(StepEngine, "start_iteration", start), (StepEngine, "admit_next", admit),
                                           (StepEngine, "_launch", launch), (StepEngine, "_iter_end", end)])
    return total, spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--horizon", type=float, default=2000.0)
    ap.add_argument("--times", action="store_true", help="also the engine's parts' share of the run's time")
    args = ap.parse_args()
    for case in args.cases:
        count(case, args.horizon)
        if args.times:
            times(case, args.horizon)


if __name__ == "__main__":
    main()

"""``serq.load``, ``serq.check`` and ``serq.run``: the library entry points.

They never print and never exit; errors are :class:`serq.SerqError`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .errors import SerqError
from .ir import Program, TraceDecl

if TYPE_CHECKING:
    from .report import Report
    from .sim.goodput import Target

Sets = Mapping[str, str] | Sequence[tuple[str, str]]


def _looks_like_source(text: str) -> bool:
    return "\n" in text or ";" in text or "{" in text


def load(program: str | os.PathLike[str], *, sets: Sets = (), trace: str | None = None) -> Program:
    """Read, check and link a program.

    ``program`` is a path to a ``.sq`` file, or program text (a string with a
    newline, ``;`` or ``{`` in it).  ``sets`` overrides ``let`` constants as
    ``--set NAME=EXPR`` does (values are expression text); ``trace`` replaces
    the workload's trace file (relative to the current folder).  A program
    whose workload names no trace file has none to replace: ``trace`` is then
    an error rather than silently ignored (nothing would read its columns)."""
    pairs = list(sets.items()) if isinstance(sets, Mapping) else list(sets)
    pairs = [(k, str(v)) for k, v in pairs]
    if isinstance(program, str) and _looks_like_source(program):
        from .frontend import load_program

        loaded = load_program(text=program, sets=pairs)
    else:
        loaded = _load_file(os.fspath(program), pairs)
    if trace is None:
        return loaded
    if loaded.trace is None:
        raise SerqError(
            f"--trace {trace}: the program's workload names no trace file, so there is none to replace",
            helps=['a program replays a trace when its workload says `trace "FILE.csv";` and reads '
                   "`new`, `out`, `think`, `forced` or `more`"],
        )
    # The replacement, as the front end's own `trace=` makes it: the path as given, the order kept.
    return dataclasses.replace(loaded, trace=TraceDecl(trace, loaded.trace.ordered))


def _load_file(path: str, pairs: list[tuple[str, str]]) -> Program:
    """The program in file ``path`` linked with ``pairs``: as kept, when the
    disk still holds what it was linked from (serq/linked.py), else through the
    front end, and kept."""
    from . import linked

    kept = linked.load(path, pairs)
    if kept is not None:
        return kept
    from .frontend import load_program

    with linked.recording() as found:
        loaded = load_program(path=path, sets=pairs)
    linked.store(path, pairs, loaded, found)
    return loaded


def check(program: str | os.PathLike[str], *, sets: Sets = ()) -> str:
    """Load a program and return the one-line summary ``serq check`` prints."""
    return load(program, sets=sets).summary()


def run(
    program: Program | str | os.PathLike[str],
    *,
    seed: int | None = None,
    horizon: float | None = None,
    warmup: float | None = None,
    arrivals: int | None = None,
    engines: Mapping[str, type] | None = None,
    max_live: int | None = None,
    steps: bool = False,
    progress: bool = False,
    max_events: int | None = None,
    goodput: "str | Sequence[Target] | None" = None,
    precision: float | None = None,
    precision_on: str | None = None,
    max_horizon: float | None = None,
    timeline: float | bool | None = None,
    sessions: "Sequence[Mapping[str, Any]] | None" = None,
) -> "Report":
    """Simulate a program and return its :class:`~serq.report.Report`.

    Unset arguments take the program's ``run { … }`` values (seed 1, warm-up
    0; the horizon must come from one or the other).  The horizon, warm-up and
    arrivals are numbers and the seed an integer ≥ 0 (NumPy's too); anything
    else is a :class:`~serq.SerqError` naming the argument.  ``engines`` maps a step
    stage's name to a :class:`serq.sim.stages.step.StepEngine` subclass.
    ``max_live`` caps the sessions live at once (default 1 000 000, or the
    environment variable ``SERQ_MAX_LIVE``): past it the run ends with an error.
    ``max_events`` bounds the events the run handles (default none, or the
    environment variable ``SERQ_MAX_EVENTS``): past it the run ends with an
    error, at the same point on every machine.
    ``steps=True`` records every iteration of every step stage in
    ``report.steps[STAGE]`` (:class:`~serq.report.StepLog`: ``time``,
    ``duration`` and the context variables of ``cost``, the input of ``serq
    fit``); those stages then run iteration by iteration rather than in
    coalesced runs, which is slower and gives the same report
    (docs/calibration.md).  ``progress=True`` shows the simulated time against
    the horizon on standard error once the run has lasted a second (``serq
    run`` does when standard error is a terminal).  ``goodput`` (``'ttft<=0.5,
    tpot<=0.05'``, seconds) adds the client row ``goodput``: per turn, 1 when it
    met every target (docs/report.md, "Goodput").  ``precision=REL`` doubles
    the horizon (and the warm-up with it) until the 95 % half-width of
    ``precision_on`` (default ``client.response.mean``) is within REL of its
    value, up to ``max_horizon`` (default 32 × the horizon); the report is the
    last run's, and ``report.precision`` says what was reached.  ``timeline=DT`` (seconds,
    finite and > 0; ``True``: the horizon / 200) keeps the pools' and stages'
    state every DT simulated seconds in ``report.timeline``
    (:class:`serq.timeline.Timeline`; docs/report.md, "Over time"); the
    report is otherwise the same bits.  ``sessions`` replaces the workload's arrivals
    with these sessions, each ``{"arrival": t, "attributes": {name: value}}`` (its
    attributes after ``init``): a counterexample of ``serq prove`` replays so
    (docs/claims.md)."""
    from .sim.goodput import parse_goodput
    from .sim.simulator import simulate

    targets = parse_goodput(goodput) if isinstance(goodput, str) else tuple(goodput or ())
    if not isinstance(program, Program):
        program = load(program)
    def once(h: float | None, w: float | None) -> "Report":
        return simulate(program, seed=seed, horizon=h, warmup=w, arrivals=arrivals, engines=engines or {},
                        max_live=max_live, steps=steps, progress=progress, max_events=max_events,
                        goodput=targets, timeline=timeline, sessions=sessions)

    if precision is None:
        return once(horizon, warmup)
    from .sim.precision import run_precise

    h, w = program.run.window(horizon, warmup)
    return run_precise(once, precision, precision_on, h, w, max_horizon)

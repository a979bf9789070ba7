"""Capacity search: ``--find-max``, the largest value of one axis, inside
the interval given, at which every SLO holds; ``--find-min``, the smallest.

``--find-max`` assumes the figures get worse as the value grows (load, rate):
it checks the top of the interval, then the bottom, then bisects, keeping
``lo`` where the SLOs hold and ``hi`` where they do not, until ``hi − lo ≤
tol`` (default: 1 % of the interval).  The answer is ``lo`` — a value that
was run and met the SLOs, never an interpolation.

``--find-min`` assumes the figures get better as the value grows (replicas,
servers, cache blocks): it checks the bottom, then the top, then bisects,
keeping ``hi`` where the SLOs hold and ``lo`` where they do not; the answer is
``hi``.  When both ends of the interval are whole numbers and no ``tol`` is
given, it searches the whole numbers only (a family's size): the bisection
ends when ``hi − lo = 1``, with ``hi`` the fewest that meets the SLOs.

By default a value meets an SLO when **every seed's run** meets it: the
conservative choice (a capacity that holds for each replication, not only on
average), and the one the issue asks for.  ``on="mean"`` compares the mean over
seeds instead (use it to compare with a closed form, which is a mean).  A run
whose figure has no value (no samples) does not meet the SLO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from ..errors import SerqError, UsageError, suggest
from ..report import decimal_exponent, shortest
from .grid import Axis, Slo
from .stats import across
from .sweep import make_plan, run_plan


@dataclass
class SearchResult:
    """The answer (``None``: not even the interval's low end meets the SLOs),
    the final bracket and every evaluation."""

    axis: str
    value: float | None
    lo: float
    hi: float
    tol: float
    on: str
    slos: list[Slo]
    steps: list[dict[str, Any]] = field(default_factory=list)
    goal: str = "max"  # or "min"
    whole: bool = False  # --find-min over whole numbers

    def to_dict(self) -> dict[str, Any]:
        return {"axis": self.axis, "goal": self.goal, "value": self.value, "bracket": [self.lo, self.hi],
                "tol": self.tol, "on": self.on, "slo": [str(s) for s in self.slos], "steps": self.steps}


def meets(rows: Sequence[dict[str, Any]], slos: Sequence[Slo], on: str) -> bool:
    """Whether ``rows`` (one point's runs) meet every SLO, on every seed or on
    the mean.  A run that did not settle (``settled`` 0) meets nothing: its
    figures describe a transient, not the design (docs/report.md)."""
    if not rows or unsettled(rows):
        return False
    for slo in slos:
        if on == "mean":
            iv = across(r.get(slo.figure) for r in rows)
            if iv.n < len(rows) or not slo.met(iv.mean):
                return False
        elif not all(slo.met(r.get(slo.figure)) for r in rows):
            return False
    return True


def unsettled(rows: Sequence[dict[str, Any]]) -> list[Any]:
    """The seeds of ``rows`` whose run did not settle."""
    return [r.get("seed") for r in rows if r.get("settled") == 0]


def horizon_advice(rows: Sequence[dict[str, Any]]) -> float | None:
    """The longest horizon the unsettled runs of ``rows`` suggest (NaN when
    none says); None if all settled."""
    bad = [r for r in rows if r.get("settled") == 0]
    if not bad:
        return None
    return max((float(r["settling.horizon"]) for r in bad if r.get("settling.horizon") is not None),
               default=math.nan)


def _midpoint(lo: float, hi: float, tol: float) -> float:
    """The middle, rounded to a decimal a digit finer than ``tol`` (0.5125
    rather than 0.51249999…), unless the rounding leaves the bracket."""
    mid = (lo + hi) / 2.0
    digits = max(0, 1 - decimal_exponent(tol)) if tol > 0 and math.isfinite(tol) else 15
    rounded = round(mid, min(digits, 15))
    return rounded if lo < rounded < hi else mid


def find_max(program: Any, axes: Sequence[Axis], name: str, slos: Sequence[Slo], seeds: Sequence[int],
             **kw: Any) -> SearchResult:
    """Bisect axis ``name`` (an interval ``START:STOP``, or any range: its
    first and last values) for the largest value meeting ``slos``; every
    other axis must have one value (keywords: :func:`search`)."""
    return search(program, axes, name, slos, seeds, goal="max", **kw)


def find_min(program: Any, axes: Sequence[Axis], name: str, slos: Sequence[Slo], seeds: Sequence[int],
             **kw: Any) -> SearchResult:
    """Bisect axis ``name`` for the smallest value meeting ``slos`` (whole
    numbers only when both ends are whole and no ``tol`` is given): the
    fewest replicas for an SLO (keywords: :func:`search`)."""
    return search(program, axes, name, slos, seeds, goal="min", **kw)


def search(
    program: Any,
    axes: Sequence[Axis],
    name: str,
    slos: Sequence[Slo],
    seeds: Sequence[int],
    *,
    goal: str = "max",
    on: str = "every",
    tol: float | None = None,
    run_options: dict[str, Any] | None = None,
    plan_options: dict[str, Any] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> SearchResult:
    """The search of ``--find-max`` (``goal="max"``) or ``--find-min``
    (``"min"``) over axis ``name``; ``on_step`` hears of every evaluation."""
    flag = f"--find-{goal}"
    if on not in ("every", "mean"):
        raise UsageError(f"invalid --slo-on `{on}`; expected every or mean")
    if not slos:
        raise UsageError(f"{flag} needs at least one --slo")
    target = [a for a in axes if a.name == name]
    if not target:
        known = [a.name for a in axes]
        best = suggest(name, known)
        raise UsageError(f"{flag} `{name}`: no such axis", helps=[f"did you mean `{best}`?"] if best else
                         [f"give its interval with --set {name}=START:STOP"])
    axis = target[0]
    others = [a for a in axes if a is not axis]
    for a in others:
        if len(a.values) != 1:
            raise UsageError(f"{flag} `{name}`: axis `{a.name}` has {len(a.values)} values; "
                             "every other axis must have one")
    if axis.kind != "set" or not all(isinstance(v, (int, float)) for v in axis.values):
        raise UsageError(f"{flag} `{name}`: the axis must be a numeric --set range START:STOP")
    lo, hi = float(min(axis.values)), float(max(axis.values))
    if not lo < hi:
        raise UsageError(f"{flag} `{name}`: the interval is empty; give --set {name}=START:STOP")
    whole = goal == "min" and tol is None and lo == int(lo) and hi == int(hi)
    tol = (1.0 if whole else (hi - lo) / 100.0) if tol is None else tol
    if not (math.isfinite(tol) and tol > 0):
        raise UsageError(f"invalid value for --tol: {tol:g} (must be finite and > 0)")
    result = SearchResult(name, None, lo, hi, tol, on, list(slos), goal=goal, whole=whole)
    run_options = dict(run_options or {})
    checked: list[bool] = []
    evaluated: dict[tuple[str, ...], dict[str, Any]] = {}
    plans: list[Any] = []

    def evaluate(value: float) -> bool:
        plan = make_plan(program, [*others, replace(axis, values=(value,), interval=None)], seeds,
                         **(plan_options or {}))
        plans.append(plan)
        rows = run_plan(plan, **run_options).rows
        evaluated.update((plan.row_key(r), r) for r in rows)
        run_options["resume"] = True  # later points keep the earlier ones' rows in the file
        if not checked:
            columns = list(dict.fromkeys(c for r in rows for c in r))
            for slo in slos:
                if slo.figure not in columns:
                    best = suggest(slo.figure, columns)
                    raise UsageError(f"--slo `{slo}`: the runs have no figure `{slo.figure}`",
                                     helps=[f"did you mean `{best}`?"] if best else
                                     ["the figures are the columns of a sweep's --out file"])
            checked.append(True)
        ok = meets(rows, slos, on)
        last[:] = rows
        return ok

    last: list[dict[str, Any]] = []

    def step(value: float, ok: bool) -> None:
        entry: dict[str, Any] = {"value": value, "met": ok, "lo": result.lo, "hi": result.hi}
        seeds_out = unsettled(last)
        if seeds_out:
            advice = horizon_advice(last)
            entry["unsettled"] = seeds_out
            entry["horizon"] = None if advice is None or not math.isfinite(advice) else advice
            entry["overloaded"] = any(r.get("settling.overloaded") for r in last if r.get("settled") == 0)
        result.steps.append(entry)
        if on_step is not None:
            on_step(entry)

    try:
        _bisect(result, evaluate, step)
    finally:
        if run_options.get("out") is not None and plans:
            _sort_file(run_options["out"], plans[-1], name, list(seeds), evaluated)
    return result


def _bisect(result: SearchResult, evaluate: Callable[[float], bool],
            step: Callable[[float, bool], None]) -> None:
    """Keep the end of the bracket that meets the SLOs (``lo`` for
    ``--find-max``, ``hi`` for ``--find-min``) and the one that does not,
    until they are ``tol`` apart; the answer is the end that meets.  The far
    end (``hi`` for max, ``lo`` for min) is tried first: if it meets, it is
    the answer; then the near end: if that fails, nothing is."""
    up = result.goal == "max"
    far, near = (result.hi, result.lo) if up else (result.lo, result.hi)
    if evaluate(far):
        result.value = far
        if up:
            result.lo = far
        else:
            result.hi = far
        step(far, True)
        return
    step(far, False)
    if not evaluate(near):
        step(near, False)
        return
    step(near, True)
    while result.hi - result.lo > result.tol:
        if result.whole:
            mid = float((int(result.lo) + int(result.hi)) // 2)
        else:
            mid = _midpoint(result.lo, result.hi, result.tol)
        ok = evaluate(mid)
        if ok == up:
            result.lo = mid
        else:
            result.hi = mid
        step(mid, ok)
    result.value = result.lo if up else result.hi


def _sort_file(out: Any, plan: Any, name: str, seeds: list[int], evaluated: dict[tuple[str, ...], Any]) -> None:
    """Rewrite the results file: the search's rows by value then seed, then
    any other rows it held, in their order (each evaluation's sweep put its
    own point first)."""
    from .journal import Journal

    journal = Journal(out)
    rows = journal.read()
    ours = [r for r in rows if plan.row_key(r) in evaluated]
    rest = [r for r in rows if plan.row_key(r) not in evaluated]
    ours.sort(key=lambda r: (float(r[name]), seeds.index(r["seed"]) if r.get("seed") in seeds else len(seeds)))
    journal.rewrite(ours + rest)


def describe(entry: dict[str, Any], name: str) -> str:
    """One line per evaluation: the value, met or not, the bracket after it."""
    verdict = "meets" if entry["met"] else "fails"
    line = (f"{name} = {shortest(entry['value'])} {verdict} the SLOs; "
            f"bracket [{shortest(entry['lo'])}, {shortest(entry['hi'])}]")
    if entry.get("unsettled"):
        seeds = ", ".join(str(s) for s in entry["unsettled"])
        if entry.get("overloaded"):
            why = "its backlog grew all through the run, an overload or a queue still filling"
            if entry.get("horizon") is not None:
                why += f": a horizon of {shortest(entry['horizon'])} would tell"
        elif entry.get("horizon") is not None:
            why = f"a horizon of {shortest(entry['horizon'])} would"
        else:
            why = "run longer"
        line += f" (not settled on seed {seeds}: {why})"
    return line


def no_answer(result: SearchResult) -> SerqError:
    """The error of a search that found no value: the end that failed, and what
    to change — a longer horizon first when that end's runs did not settle."""
    slos = ", ".join(str(s) for s in result.slos)
    end = result.hi if result.goal == "min" else result.lo
    last: dict[str, Any] = next((s for s in reversed(result.steps) if s["value"] == end), {})
    helps = []
    if last.get("unsettled"):
        seeds = ", ".join(str(s) for s in last["unsettled"])
        longer = f" --horizon {shortest(last['horizon'])}" if last.get("horizon") is not None else " a longer horizon"
        helps.append(f"its runs did not settle on seed {seeds}: try{longer} before changing the SLOs")
    if result.goal == "min":
        return SerqError(f"--find-min {result.axis}: even {shortest(result.hi)} (the interval's high end) "
                         f"does not meet {slos}",
                         helps=helps + [f"raise the end of the interval of {result.axis}, or relax the SLOs"])
    return SerqError(f"--find-max {result.axis}: even {shortest(result.lo)} (the interval's low end) "
                     f"does not meet {slos}",
                     helps=helps + [f"lower the start of the interval of {result.axis}, or relax the SLOs"])

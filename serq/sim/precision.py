"""``--precision REL``: run until a figure's 95 % half-width is within REL of it.

A run's answer is as good as its interval.  With ``precision=REL`` the run
is repeated with the horizon doubled — and the warm-up with it, the same
share of the run — until the figure's 95 % half-width is at most ``REL ×
|mean|``, or the horizon reaches the cap (by default 32 times the first).
Each attempt is a whole fresh run on the same seed, so the report is the
last attempt's, exactly as ``serq run --horizon H`` at that horizon gives it
(docs/report.md, "How long to run").

The figure is the mean of an observe or a client row (``client.response.mean``
by default): its half-width is the report's batch-means ``95% CI``.  Across
seeds (a sweep with several) any figure has a half-width, the Student-t
interval of :mod:`serq.experiments.stats`: the sweep reads this module's rule.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable

from ..errors import UsageError, suggest

#: The default cap: the horizon may grow to this many times the first.
CAP = 32.0


def precise(mean: float | None, half: float | None, rel: float) -> bool:
    """Whether ``half`` is within ``rel`` of ``|mean|`` (a missing or non-finite value is not)."""
    if mean is None or half is None or not (math.isfinite(mean) and math.isfinite(half)):
        return False
    return half <= rel * abs(mean)


def check_rel(rel: float) -> None:
    """``--precision`` is a share in (0, 1)."""
    if not (isinstance(rel, (int, float)) and math.isfinite(rel) and 0.0 < rel < 1.0):
        raise UsageError(f"invalid value for --precision: {rel!r} (a share of the figure, between 0 and 1: "
                         "0.05 asks for a half-width within 5 %)")


def interval(report: Any, figure: str) -> tuple[float, float]:
    """The mean and 95 % half-width of ``figure`` (``client.ROW.mean`` or
    ``observes.NAME.mean``, or ``NAME.mean`` for either) in one report."""
    head, _, stat = figure.rpartition(".")
    if stat != "mean" or not head:
        raise UsageError(f"--precision on `{figure}`: one run gives an interval only for a mean",
                         helps=["give a figure such as client.response.mean or client.ttft.mean; "
                                "a sweep with several seeds gives any figure an interval across seeds"])
    kind, _, name = head.partition(".")
    if kind == "client" and name in report.client:
        s = report.client[name]
    elif kind == "observes" and name in report.observes:
        s = report.observes[name]
    elif not name and head in report.observes:
        s = report.observes[head]
    elif not name and head in report.client:
        s = report.client[head]
    else:
        known = [f"client.{k}.mean" for k in report.client] + [f"observes.{k}.mean" for k in report.observes]
        if not known:  # (a run too short for anything to be observed)
            raise UsageError(f"--precision on `{figure}`: the report has no means; the run observed nothing",
                             helps=["a longer --horizon gives the report its figures"])
        best = suggest(figure, known)
        raise UsageError(f"--precision on `{figure}`: the report has no such mean",
                         helps=([f"did you mean `{best}`?"] if best else []) + ["the means are " + ", ".join(known)])
    return float(s.mean), float(s.ci)


def default_figure(report: Any) -> str:
    """``client.response.mean``, or in a program without a client its first observe's mean."""
    if "response" in report.client or not report.observes:
        return "client.response.mean"
    return f"observes.{next(iter(report.observes))}.mean"


def run_precise(run: Callable[[float, float], Any], rel: float, figure: str | None, horizon: float, warmup: float,
                cap: float | None = None) -> Any:
    """Run at ``(horizon, warmup)``, doubling both until ``figure`` is
    precise to ``rel`` or the horizon would pass ``cap`` (default
    :data:`CAP` × ``horizon``, at most the largest float); the last report, with ``report.precision``
    saying what was reached."""
    check_rel(rel)
    cap = min(CAP * horizon, sys.float_info.max) if cap is None else cap  # (a horizon near the largest
    # float: the default cap is the largest, not inf, which --max-horizon refuses)
    if not (math.isfinite(cap) and cap >= horizon):
        raise UsageError(f"invalid value for --max-horizon: {cap:g} (must be finite and at least the horizon "
                         f"{horizon:g})")
    share = warmup / horizon
    h, runs = horizon, 0
    while True:
        report = run(h, h * share if runs else warmup)
        runs += 1
        figure = figure or default_figure(report)
        mean, half = interval(report, figure)
        reached = precise(mean, half, rel)
        if reached or 2.0 * h > cap:
            report.precision = {"figure": figure, "rel": rel, "mean": mean, "half_width": half,
                                "reached": reached, "horizon": h, "runs": runs, "cap": cap}
            return report
        h *= 2.0


def note(p: dict[str, Any]) -> str:
    """The stderr line about a ``--precision`` run: reached at which horizon, or not by the cap."""
    from ..report import shortest

    share = p["half_width"] / abs(p["mean"]) if p["mean"] and math.isfinite(p["half_width"]) else math.inf
    got = f"{p['figure']} {p['mean']:.4g} ± {p['half_width']:.3g} ({100 * share:.3g} %)"
    if p["reached"]:
        return f"--precision {shortest(p['rel'])} reached at horizon {shortest(p['horizon'])} ({p['runs']} run(s)): {got}"
    return (f"--precision {shortest(p['rel'])} not reached by the cap, horizon {shortest(p['horizon'])} "
            f"({p['runs']} run(s); raise it with --max-horizon): {got}")

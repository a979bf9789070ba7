"""The sweep's summary: per point, each figure's mean over seeds and its 95 %
Student-t interval across seeds (:func:`serq.experiments.stats.across`).

Why across seeds: each seed is an independent replication, so the spread of
a figure over seeds measures how much the point's answer would move with
another set of random numbers — whatever the figure (a p99, a count of
preemptions), and including the bias of a short warm-up.  The within-run
``ci`` of the report is a batch-means interval for one run's mean only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..errors import UsageError, suggest
from .grid import value_text
from .stats import Interval, across

#: The figures the summary shows by default (each skipped when no row has it).
DEFAULT_SHOW = (
    "req_per_s", "client.ttft.mean", "client.ttft.p99", "client.response.mean",
    "pools.kv.preemptions", "pools.kv.stuck", "pools.kv.rejected",
)


@dataclass
class Summary:
    """Rows of (point values, {figure: Interval}) in plan order."""

    axes: list[str]
    figures: list[str]
    points: list[tuple[dict[str, Any], dict[str, Interval]]]

    def to_dict(self) -> dict[str, Any]:
        """``{"figures": […], "points": [{axis…, "runs": n, "FIGURE": {mean, ci, n}}]}``;
        an infinite or missing half-width is ``null``."""
        out = []
        for values, stats in self.points:
            entry: dict[str, Any] = dict(values)
            entry.update({f: stats[f].to_dict() for f in self.figures})
            out.append(entry)
        return {"figures": list(self.figures), "points": out}

    def text(self) -> str:
        """A table: the axis columns, then ``mean ± half-width`` per figure
        (``-`` for the half-width of a single seed)."""
        from tabulate import tabulate

        rows = []
        for values, stats in self.points:
            cells = [value_text(values[a]) for a in self.axes]
            cells += [_cell(stats[f]) for f in self.figures]
            rows.append(cells)
        return str(tabulate(rows, headers=[*self.axes, *self.figures], disable_numparse=True,
                            stralign="right", tablefmt="simple"))


def _num(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if x == 0 or (1e-4 <= abs(x) < 1e7):
        return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.0f}"
    return f"{x:.3e}"


def _cell(iv: Interval) -> str:
    if iv.n == 0:
        return "-"
    half = "-" if not math.isfinite(iv.half) else _num(iv.half)
    return f"{_num(iv.mean)} ± {half}"


def summarize(rows: Sequence[Mapping[str, Any]], axes: Sequence[str], show: Sequence[str] | None) -> Summary:
    """The summary of a sweep's ``rows`` (in plan order), one point per value of the
    ``axes``; ``show`` as :meth:`serq.experiments.sweep.SweepResult.summary` says."""
    columns = list(dict.fromkeys(c for r in rows for c in r))
    if show is None:
        figures = [f for f in DEFAULT_SHOW if any(r.get(f) is not None for r in rows)]
        if not figures:  # a program without client rows or a `kv` pool: its observes' means
            figures = [c for c in columns if c.startswith("observes.") and c.endswith(".mean")]
    else:
        figures = list(show)
        for f in figures:
            if f not in columns:
                best = suggest(f, columns)
                stem = f.rpartition(".")[0] + "."
                near = [c for c in columns if c.startswith(stem)] if stem != "." else []
                helps = ([f"did you mean `{best}`?"] if best
                         else [f"the figures `{stem}*`: {', '.join(near)}"] if near
                         else ["the figures are the columns of --out (see --json)"])
                raise UsageError(f"unknown figure `{f}` in the sweep's rows", helps=helps)
    points: list[tuple[dict[str, Any], dict[str, Interval]]] = []
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    order: list[tuple[str, ...]] = []
    for row in rows:
        key = tuple(value_text(row.get(a)) for a in axes)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(row)
    for key in order:
        group = groups[key]
        values = {a: group[0].get(a) for a in axes}
        values["runs"] = len(group)
        points.append((values, {f: across(r.get(f) for r in group) for f in figures}))
    return Summary([*axes, "runs"], figures, points)

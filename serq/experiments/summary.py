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
from ..units import describe
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
        (the mean alone for a single seed), each headed with its unit
        (``client.ttft.mean [s]``, :mod:`serq.units`)."""
        from tabulate import tabulate

        rows = []
        for values, stats in self.points:
            cells = [value_text(values[a]) for a in self.axes]
            cells += [_cell(stats[f]) for f in self.figures]
            rows.append(cells)
        return str(tabulate(rows, headers=[*self.axes, *(describe(f).header for f in self.figures)],
                            disable_numparse=True, stralign="right", tablefmt="simple"))


def _num(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if x == 0 or (1e-4 <= abs(x) < 1e7):
        return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.0f}"
    return f"{x:.3e}"


def _cell(iv: Interval) -> str:
    """``mean ± half-width``; the mean alone where there is no interval (one seed), ``-`` for no value."""
    if iv.n == 0:
        return "-"
    if not math.isfinite(iv.half):
        return _num(iv.mean)
    return f"{_num(iv.mean)} ± {_num(iv.half)}"


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
                raise UsageError(f"unknown figure `{f}` in the sweep's rows", helps=_figure_helps(f, columns))
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
        judged = [int(r["settled"]) for r in group if r.get("settled") is not None]
        values["settled"] = f"{sum(judged)}/{len(judged)}" if judged else "-"
        points.append((values, {f: across(r.get(f) for r in group) for f in figures}))
    return Summary([*axes, "runs", "settled"], figures, points)


@dataclass
class Paired:
    """Each design's paired difference from the baseline (``axis`` = ``value``):
    per point of the other axes and per other value of ``axis``, the figure
    minus the baseline's at the same seed and the same point, its mean over
    the seeds both ran and the 95 % Student-t half-width of that mean
    (``n`` the pairs).  Seeds draw the same sessions whatever the design (the
    streams are keyed by session and turn), so the difference's spread is the
    designs' own, not the seeds'."""

    axis: str
    value: Any
    axes: list[str]  # the other axes, then `axis` (the design compared)
    figures: list[str]
    points: list[tuple[dict[str, Any], dict[str, Interval]]]

    def to_dict(self) -> dict[str, Any]:
        """``{"baseline": {axis: value}, "figures": […], "points": [{axis…, "pairs": n, FIGURE: {mean, ci, n}}]}``."""
        out = []
        for values, stats in self.points:
            entry: dict[str, Any] = dict(values)
            entry.update({f: stats[f].to_dict() for f in self.figures})
            out.append(entry)
        return {"baseline": {self.axis: self.value}, "figures": list(self.figures), "points": out}

    def text(self) -> str:
        """A heading, then a table: the axis columns, the pairs, then ``Δ mean ± half-width``
        per figure, marked ``*`` where the interval excludes 0."""
        from tabulate import tabulate

        rows = []
        for values, stats in self.points:
            cells = [value_text(values[a]) for a in self.axes]
            cells.append(str(values["pairs"]))
            cells += [_delta(stats[f]) for f in self.figures]
            rows.append(cells)
        head = (f"paired differences from {self.axis}={value_text(self.value)} (same seed, same point; "
                "mean ± 95 % half-width; * the interval excludes 0)")
        table = tabulate(rows, headers=[*self.axes, "pairs", *(f"Δ {describe(f).header}" for f in self.figures)],
                         disable_numparse=True, stralign="right", tablefmt="simple")
        return head + "\n" + str(table)


def _delta(iv: Interval) -> str:
    if iv.n == 0:
        return "-"
    if iv.n == 1 or not math.isfinite(iv.half):
        return f"{iv.mean:+.4g}"
    mark = " *" if abs(iv.mean) > iv.half else ""
    return f"{iv.mean:+.4g} ± {_num(iv.half)}{mark}"


def paired(rows: Sequence[Mapping[str, Any]], axes: Sequence[str], figures: Sequence[str],
           axis: str, value: Any) -> Paired:
    """The paired differences of ``rows`` from the rows whose ``axis`` is
    ``value`` (see :class:`Paired`); ``axes`` are the sweep's axes, ``axis``
    one of them and ``value`` one of its values (checked by the caller)."""
    others = [a for a in axes if a != axis]
    base_key = value_text(value)
    base: dict[tuple[tuple[str, ...], Any], Mapping[str, Any]] = {}
    for row in rows:
        if value_text(row.get(axis)) == base_key:
            base[(tuple(value_text(row.get(a)) for a in others), row.get("seed"))] = row
    groups: dict[tuple[tuple[str, ...], str], list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    first: dict[tuple[tuple[str, ...], str], Mapping[str, Any]] = {}
    for row in rows:
        design = value_text(row.get(axis))
        if design == base_key:
            continue
        point = tuple(value_text(row.get(a)) for a in others)
        key = (point, design)
        first.setdefault(key, row)
        mate = base.get((point, row.get("seed")))
        groups.setdefault(key, [])
        if mate is not None:
            groups[key].append((row, mate))
    points: list[tuple[dict[str, Any], dict[str, Interval]]] = []
    for key, pairs in groups.items():
        values = {a: first[key].get(a) for a in (*others, axis)}
        values["pairs"] = len(pairs)
        stats = {}
        for f in figures:
            diffs = []
            for row, mate in pairs:
                x, y = _number(row.get(f)), _number(mate.get(f))
                if x is not None and y is not None:
                    diffs.append(x - y)
            stats[f] = across(diffs)
        points.append((values, stats))
    return Paired(axis, value, [*others, axis], list(figures), points)


def summary_csv(summary: Summary, pairs: Paired | None = None) -> str:
    """The summary as one CSV table: a row per point (the axes, ``runs``,
    ``settled`` as runs settled/runs judged), then
    per figure ``FIGURE.mean``, ``FIGURE.ci`` (the 95 % half-width across
    seeds) and ``FIGURE.n``; with ``pairs``, per figure ``FIGURE.diff``,
    ``FIGURE.diff_ci`` and ``FIGURE.pairs``, the design's paired difference
    from the baseline at its point (empty on the baseline's own rows).
    Numbers in shortest form; a missing or infinite value is an empty cell."""
    import csv
    import io

    from ..report import shortest

    def cells(iv: Interval | None) -> list[str]:  # mean, half-width, n; empty where there is none
        if iv is None:
            return ["", "", ""]
        return [shortest(x) if math.isfinite(x) else "" for x in (iv.mean, iv.half)] + [str(iv.n)]

    diffs: dict[tuple[str, ...], dict[str, Interval]] = {}
    if pairs is not None:
        for values, stats in pairs.points:
            diffs[tuple(value_text(values[a]) for a in pairs.axes)] = stats
    axes = [a for a in summary.axes if a not in ("runs", "settled")]
    header = [*axes, "runs", "settled"]
    for f in summary.figures:
        header += [f"{f}.mean", f"{f}.ci", f"{f}.n"]
    if pairs is not None:
        for f in pairs.figures:
            header += [f"{f}.diff", f"{f}.diff_ci", f"{f}.pairs"]
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(header)
    for values, stats in summary.points:
        row = [value_text(values[a]) for a in axes] + [str(values["runs"]), str(values.get("settled", "-"))]
        for f in summary.figures:
            row += cells(stats[f])
        if pairs is not None:
            got = diffs.get(tuple(value_text(values[a]) for a in pairs.axes))
            for f in pairs.figures:
                row += cells(got[f] if got is not None else None)
        out.writerow(row)
    return buf.getvalue()


def find_baseline(rows: Sequence[Mapping[str, Any]], axes: Sequence[str], spec: str) -> tuple[str, Any]:
    """The axis and value ``spec`` (``AXIS=VALUE``, or a value one axis alone
    has) names among the values the ``rows`` hold on ``axes``."""
    from .grid import Axis, parse_baseline

    found: dict[str, list[Any]] = {a: [] for a in axes}
    for row in rows:
        for a in axes:
            if all(value_text(v) != value_text(row.get(a)) for v in found[a]):
                found[a].append(row.get(a))
    return parse_baseline(spec, [Axis(a, tuple(vs)) for a, vs in found.items()])


def _number(x: Any) -> float | None:
    """A figure of a row as a finite number (rows read back from a CSV hold text), else None."""
    if x is None or x == "":
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


_STATS = ("count", "mean", "ci", "cv2", "p50", "p90", "p95", "p99")
_RUN = ("settled", "horizon", "end", "warmup", "seed", "events", "arrivals", "ended", "turns", "mean_live",
        "req_per_s", "settling.warmup", "settling.horizon", "settling.overloaded", "settling.reasons")


def report_columns(program: Any) -> dict[str, None]:
    """Every figure a run of ``program`` (a loaded :class:`serq.ir.Program`) can
    put in a sweep's row, known before any run: the run's numbers, each
    observe's and client row's statistics, each gauge's, each stage and pool
    member's row and each family's total (``pools.kv.preemptions`` and
    ``pools.kv.members`` of ``pool kv[N]``), and the task and replay sections when the program has them
    (``replay.…`` as a prefix), in the order of a row (a dict as an ordered set)."""
    from dataclasses import fields

    from ..report import PoolSummary, StageSummary, row_label

    out = dict.fromkeys(_RUN)
    for o in program.observes:
        out.update(dict.fromkeys(f"observes.{o.name}.{s}" for s in _STATS))
    for row in ("ttft", "tpot", "response"):
        out.update(dict.fromkeys(f"client.{row}.{s}" for s in _STATS))
    for g in program.gauges:
        out.update(dict.fromkeys(f"gauges.{g.name}.{s}" for s in ("mean", "ci", "min", "max")))
    for kind, decls, cls in (("stages", program.stages, StageSummary), ("pools", program.pools, PoolSummary)):
        names = [f.name for f in fields(cls) if f.name not in ("name", "index")]
        for d in decls:
            for i in range(d.members):
                label = row_label(d.name, i if d.size is not None else None)
                out.update(dict.fromkeys(f"{kind}.{label}.{n}" for n in names))
            if d.size is not None:  # the family's total (docs/report.md, "Families")
                out.update(dict.fromkeys(f"{kind}.{d.name}.{n}" for n in ("members", *names)))
    if program.handles:
        out["tasks.count"] = None
        for row in ("time", "sessions", "depth"):
            out.update(dict.fromkeys(f"tasks.{row}.{s}" for s in _STATS))
        out.update(dict.fromkeys(("tasks.open", "tasks.stuck")))
    if program.trace is not None:
        out["replay."] = None
    for c in program.claims:  # (docs/claims.md: 1 held, 0 did not)
        out.update(dict.fromkeys((f"claims.{c.name}", *(f"claims.{c.name}.{k}" for k in ("result", "first",
                                                                                           "checked")))))
    return out


def check_show(show: Sequence[str], known: Mapping[str, None], axes: Sequence[str]) -> None:
    """A ``--show`` figure no run can have is an error before the runs, with a did-you-mean."""
    names = {**dict.fromkeys(axes), **known}
    for f in show:
        if f in names or ("replay." in names and f.startswith("replay.")):
            continue
        columns = [c for c in names if c != "replay."]
        raise UsageError(f"unknown figure `{f}`: no run of this sweep has it", helps=_figure_helps(f, columns))


def nearest_figure(f: str, columns: Sequence[str]) -> tuple[str, str] | None:
    """The figure an unknown name ``f`` most likely meant, and the stem it
    was found by (``""`` when by the whole name): a column within two edits
    of ``f``; else, where ``f`` names a figure of several columns, or is
    within two edits of one (``gauge.kv_usage_max`` for
    ``gauges.kv_usage_max``), that figure's mean (or first column); None when
    nothing is that near."""
    best = suggest(f, list(columns))
    if best is not None:
        return best, ""
    stems: dict[str, str] = {}
    for c in columns:
        stem = c.rpartition(".")[0]
        if stem and (stem not in stems or c == stem + ".mean"):
            stems[stem] = c
    near = f if f in stems else suggest(f, list(stems))
    return (stems[near], near) if near is not None else None


def _figure_helps(f: str, columns: Sequence[str]) -> list[str]:
    """For an unknown figure ``f``: the one it most likely meant (and its
    stem's other figures), else the figures under its own stem."""
    got = nearest_figure(f, columns)
    if got is not None:
        best, stem = got
        helps = [f"did you mean `{best}`?"]
        if stem:
            helps.append(f"the figures `{stem}.*`: {', '.join(c for c in columns if c.startswith(stem + '.'))}")
        return helps
    stem = f.rpartition(".")[0] + "."
    near = [c for c in columns if c.startswith(stem)] if stem != "." else []
    return ([f"the figures `{stem}*`: {', '.join(near)}"] if near
            else ["the figures are the columns of --out (see --json)"])

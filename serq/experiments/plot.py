"""Plots (issue 10): a sweep's figures across its axis, and per-turn CDFs.

* :func:`plot_sweep` — a sweep's results (JSON Lines or CSV, one row per
  point and seed): the mean over seeds of one or more figures against an axis,
  with its 95 % Student-t interval **across seeds** as error bars, one line
  per value of a ``hue`` column, one panel per figure;
* :func:`plot_cdf` — the empirical CDF of the ``value`` column of one or
  more CSV files a run's ``--dump`` wrote (``client_ttft.csv``…), one curve
  each.

matplotlib is the extra ``serq[plot]``, imported only when a figure is drawn
(reading and checking the input does not need it).  Output is PNG or SVG by
the file's suffix, written atomically (:mod:`serq.files`); an SVG is byte
for byte the same for the same input (fixed ``svg.hashsalt``, no date).
A mistake in the options (an unknown column, a bad ``--slo``, ``--where`` or
``--baseline``) is a :class:`~serq.errors.UsageError` of one line (exit 2 from
the CLI, as in every command); an input that cannot be read or is not what it
should be (a missing file, a line that is not a row, a sample that is not a
number, no rows) and an output that cannot be written are a
:class:`~serq.errors.SerqError` (exit 1, as ``serq run`` gives for its
program).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import SerqError, UsageError, suggest
from ..report import shortest
from .stats import Interval, across
from .summary import nearest_figure

#: The output formats, by suffix.
FORMATS = {".png": "png", ".svg": "svg"}
#: A CDF curve is drawn through at most this many points (evenly spaced ranks,
#: the smallest and largest kept): a long run's hundreds of thousands of turns
#: would make a huge SVG that looks the same.
CDF_POINTS = 4000
#: The message when the extra is missing.
NO_MATPLOTLIB = "plotting needs matplotlib: install serq[plot] (pip install 'serq[plot]')"

# ---------------------------------------------------------------------------
# reading


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _cell(text: str) -> Any:
    """A CSV cell: empty is ``None``, number text a number, else the text."""
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _canon(v: Any) -> str:
    """A value as text for matching: numbers (and number text) in shortest form."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        v = _cell(v)
        if not _is_number(v):
            return str(v)
    return shortest(v) if _is_number(v) else str(v)


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a sweep's results file: ``.jsonl`` (one JSON object a
    line) or ``.csv`` (a header, then rows; empty cells are ``None``); ``-``
    reads standard input, JSON Lines when it starts with ``{``, else CSV."""
    shown = os.fspath(path)
    suffix = Path(shown).suffix.lower()
    if shown == "-":  # standard input: JSON Lines when it starts with `{`, else CSV
        text = _read_text(shown)
        suffix = ".jsonl" if text.lstrip().startswith("{") else ".csv"
        shown = "<stdin>"
    elif suffix not in (".jsonl", ".csv"):
        raise UsageError(f"cannot read `{shown}`: a sweep's results end in .jsonl or .csv")
    else:
        text = _read_text(shown)
    if suffix == ".csv":
        reader = csv.reader(io.StringIO(text))
        header = next(reader, None)
        if not header:
            raise SerqError(f"`{shown}` is empty")
        return [{k: _cell(c) for k, c in zip(header, cells)} for cells in reader if cells]
    from .journal import jsonl_rows

    return jsonl_rows(text, lambda n: SerqError(f"{shown}:{n}: not a row of a sweep (a JSON object on one line)"))


def _read_text(shown: str) -> str:
    try:
        if shown == "-":
            import sys

            return sys.stdin.buffer.read().decode("utf-8")
        return Path(shown).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, AttributeError) as err:
        raise SerqError(f"cannot read `{shown}`: {getattr(err, 'strerror', None) or err}") from None


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(k for row in rows for k in row))


def _need_column(name: str, columns: Sequence[str], source: str) -> None:
    if name in columns:
        return
    got = nearest_figure(name, columns)
    if got is not None:
        raise UsageError(f"unknown column `{name}` in {source}; did you mean `{got[0]}`?")
    head, dot, _ = name.rpartition(".")
    near = [c for c in columns if dot and c.startswith(head + dot)]  # client.ttft.p9: client.ttft.*
    listed = near or list(columns)
    what = f"columns starting `{head}.`" if near else "its columns"
    shown = ", ".join(f"`{c}`" for c in listed[:10])
    more = f" and {len(listed) - 10} more" if len(listed) > 10 else ""
    raise UsageError(f"unknown column `{name}` in {source}; {what}: {shown}{more}")


def _axes(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """A sweep's axis columns: those before ``seed`` in a row (a sweep writes
    the point's values, then the seed, then the figures)."""
    for row in rows:
        keys = list(row)
        if "seed" in keys:
            return keys[: keys.index("seed")]
    return []


# ---------------------------------------------------------------------------
# a sweep's figures


def plot_sweep(
    rows_or_path: Any,
    x: str,
    y: str | Sequence[str],
    hue: str | None = None,
    out: str | os.PathLike[str] | None = None,
    where: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    log_y: bool = False,
    slo: Sequence[str] = (),
    baseline: str | None = None,
) -> Any:
    """Plot figures of a sweep against one of its axes.

    ``rows_or_path``: a results file (``.jsonl`` or ``.csv``, as ``serq
    sweep --out`` writes), the :class:`~serq.experiments.sweep.SweepResult`
    that :func:`serq.sweep` returns, or rows (mappings).  Each row is one run: the point's axis
    values, ``seed``, and the report's figures flattened (``client.ttft.p99``).

    For each value of ``x`` (and of ``hue``), the rows' ``y`` values are
    averaged over seeds and drawn with their 95 % Student-t interval across
    seeds as error bars (none for a single seed); one line per ``hue`` value,
    with a legend; one panel per ``y`` (a name or a list), sharing the x axis.
    A numeric ``x`` is a numeric axis, anything else a category in order of
    appearance.

    ``where`` (``{"B": 4096}`` or ``["B=4096"]``) keeps only the matching rows.
    Every other axis (a column before ``seed``) must then have one value:
    otherwise the lines would mix points, and it is an error naming the axis.

    Each panel's label is the figure's name and unit (:mod:`serq.units`).  A
    figure that cannot be negative has its error bars cut at 0 (drawn
    asymmetric), and the title says so.  ``log_y`` puts y on a log scale;
    ``slo`` (``["client.ttft.p99<=0.5"]``, ``<=`` or ``>=``) draws each
    target as a dashed line on its figure's panel.  ``baseline``
    (``"policy=fcfs"``, or a value one axis alone has) plots, instead of each
    design's own figures, every other design's **paired difference** from it
    (same seed, same point) with its interval, and a line at 0: the lines are
    the values of the baseline's axis (``hue`` is that axis, or left out).

    ``out`` (``.png`` or ``.svg``) is written atomically; the figure is
    returned (a :class:`matplotlib.figure.Figure`).  Raises
    :class:`~serq.errors.UsageError` for a mistake in the arguments (an
    unknown column, a bad ``slo`` or ``baseline``, matplotlib missing) and
    :class:`~serq.errors.SerqError` for an input that cannot be read or holds
    no rows, and when ``out`` cannot be written."""
    ys = [y] if isinstance(y, str) else list(y)
    if not ys:
        raise UsageError("nothing to plot: give a figure with --y")
    fmt = _format(out)
    if isinstance(rows_or_path, (str, os.PathLike)):
        source = f"`{os.fspath(rows_or_path)}`"
        rows = read_rows(rows_or_path)
    else:
        source = "the rows"
        rows = [dict(r) for r in getattr(rows_or_path, "rows", rows_or_path)]
    if not rows:
        raise SerqError(f"no rows in {source}")
    columns = _columns(rows)
    filters = _filters(where)
    slos = parse_slos(slo, ys)
    for name in [x, *ys, *([hue] if hue else []), *filters]:
        _need_column(name, columns, source)
    if baseline is not None:
        from .summary import find_baseline

        b_axis, b_value = find_baseline(rows, _axes(rows), baseline)
        if hue is not None and hue != b_axis:
            raise UsageError(f"--baseline `{baseline}` compares the values of axis `{b_axis}`: "
                             f"they are the lines, so --hue must be `{b_axis}` (or left out), not `{hue}`")
        if x == b_axis:
            raise UsageError(f"--baseline `{baseline}` compares the values of axis `{b_axis}`, "
                             "which cannot also be --x: plot another axis across")
        if b_axis in filters:
            raise UsageError(f"--baseline `{baseline}` compares the values of axis `{b_axis}`, "
                             f"which --where {b_axis}=… would narrow to one: leave it out of --where")
        hue = b_axis
    for name, want in filters.items():
        rows = [r for r in rows if _canon(r.get(name)) == want]
        if not rows:
            raise UsageError(f"no rows in {source} have {name}={want}")
    varying = []
    for axis in _axes(rows):
        if axis in (x, hue) or axis in filters:
            continue
        seen = list(dict.fromkeys(_canon(r.get(axis)) for r in rows))
        if len(seen) > 1:
            varying.append(f"`{axis}` ({', '.join(seen[:6])}{', …' if len(seen) > 6 else ''})")
    if len(varying) == 1:
        axis = varying[0].split("`")[1]
        raise UsageError(f"the rows differ in axis {varying[0]}, which is neither --x nor --hue: "
                         f"keep one value with --where {axis}=VALUE, or plot it with --hue {axis}")
    if varying:
        raise UsageError(f"the rows differ in axes {', '.join(varying)}, which are neither --x nor --hue: "
                         "keep one value of each with --where COLUMN=VALUE, or plot one with --hue")
    for name in ys:
        bad = next((r[name] for r in rows if r.get(name) is not None and not _is_number(r[name])), None)
        if bad is not None:
            raise UsageError(f"column `{name}` is not a number (it holds `{bad}`)")
    if baseline is not None:
        assert hue is not None
        series = _paired_series(rows, x, ys, hue, b_value)
        title = (f"paired difference from {hue}={_canon(b_value)} (same seed, same point): "
                 f"mean over n = {_seeds(series)} pairs ± 95 % Student-t interval")
    else:
        series = _series(rows, x, ys, hue)
        title = _title(series, hue)
    if log_y:
        for name in ys:
            if not any(st[name].n and st[name].mean > 0 for points in series.values() for _, st in points):
                raise UsageError(f"`{name}` has no value above 0 to show on a log scale (--log-y)")
    style = Style(log_y=log_y, slos=slos, paired=baseline is not None)
    return _draw_sweep(series, x, ys, hue, out, fmt, title, style)


@dataclass(frozen=True)
class Style:
    """How :func:`_draw_sweep` draws: a log y axis, the SLO lines
    ``{figure: [(op, value)]}``, and whether the figures are paired differences
    (signed, with a line at 0)."""

    log_y: bool = False
    slos: Mapping[str, Sequence[tuple[str, float]]] = field(default_factory=dict)
    paired: bool = False


def parse_slos(specs: Sequence[str], ys: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
    """``--slo FIGURE<=X`` (or ``>=``) items as ``{figure: [(op, X)]}``; the
    figure must be one of the plotted ones and X a finite number."""
    out: dict[str, list[tuple[str, float]]] = {}
    for spec in specs:
        m = re.fullmatch(r"\s*([^<>=\s]+)\s*(<=|>=)\s*(\S+)\s*", str(spec))
        if m is None:
            raise UsageError(f"invalid --slo `{spec}`; expected FIGURE<=VALUE or FIGURE>=VALUE "
                             "(e.g. --slo client.ttft.p99<=0.5)")
        name, op, text = m.groups()
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise UsageError(f"invalid --slo `{spec}`: `{text}` is not a finite number")
        if name not in ys:
            best = suggest(name, list(ys))
            raise UsageError(f"--slo `{spec}`: `{name}` is not a plotted figure (--y "
                             f"{', '.join(ys)})" + (f"; did you mean `{best}`?" if best else ""))
        out.setdefault(name, []).append((op, value))
    return out


def _seeds(series: Any) -> str:
    """The number of seeds (or pairs) behind the points: ``5``, or ``3–5`` when they differ."""
    ns = [st.n for points in series.values() for _, stats in points for st in stats.values() if st.n]
    if not ns:
        return "0"
    return f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}–{max(ns)}"


def _title(series: Any, hue: str | None) -> str:
    """What each point is: a mean over seeds with its interval, or one run's value."""
    if hue == "seed":
        return "one line per seed: each run's value (no interval)"
    n = _seeds(series)
    if n == "1":
        return "one seed: each run's value (no interval)"
    return f"mean over seeds (n = {n}) ± 95 % Student-t interval"


def _paired_series(rows: list[dict[str, Any]], x: str, ys: list[str], axis: str, value: Any) -> Any:
    """``{design: [(x value, {y: Interval of the paired difference})]}`` for every
    value of ``axis`` but the baseline ``value``."""
    from .summary import paired

    def cell(v: Any) -> Any:
        return _cell(v) if isinstance(v, str) else v

    result = paired(rows, [x, axis], ys, axis, value)
    out: dict[Any, list[Any]] = {}
    for values, stats in result.points:
        out.setdefault(cell(values[axis]), []).append((cell(values[x]), stats))
    for h, points in out.items():
        order = _order([xv for xv, _ in points])
        out[h] = sorted(points, key=lambda p: order.index(p[0]))
    return out


def _filters(where: Mapping[str, Any] | Sequence[str] | None) -> dict[str, str]:
    if where is None:
        return {}
    if isinstance(where, Mapping):
        return {str(k): _canon(v) for k, v in where.items()}
    out = {}
    for item in where:
        name, eq, value = str(item).partition("=")
        if not eq or not name.strip():
            raise UsageError(f"invalid --where `{item}`; expected COLUMN=VALUE")
        out[name.strip()] = _canon(value.strip())
    return out


def _order(values: list[Any]) -> list[Any]:
    """Distinct values: numbers ascending, otherwise in order of appearance."""
    distinct = list(dict.fromkeys(values))
    if distinct and all(_is_number(v) for v in distinct):
        return sorted(distinct)
    return distinct


def _series(rows: list[dict[str, Any]], x: str, ys: list[str], hue: str | None) -> Any:
    """``{hue value: [(x value, {y: Interval})]}``, both in plot order."""
    def value(v: Any) -> Any:  # CSV gives numbers back as numbers; keep text as text
        return _cell(v) if isinstance(v, str) else v

    hues = _order([value(r.get(hue)) for r in rows]) if hue else [None]
    xs = _order([value(r.get(x)) for r in rows if r.get(x) is not None])
    out = {}
    for h in hues:
        points = []
        for xv in xs:
            group = [r for r in rows if value(r.get(x)) == xv and (hue is None or value(r.get(hue)) == h)]
            if group:
                points.append((xv, {name: across(r.get(name) for r in group) for name in ys}))
        out[h] = points
    return out


def _bar(iv: Interval) -> float:
    """An error bar's half-height: none (NaN) for a single seed, whose interval is infinite."""
    return iv.half if math.isfinite(iv.half) else math.nan


def _bars(ivs: Sequence[Interval], floor: bool) -> tuple[list[float], list[float], bool]:
    """The error bars below and above each mean; with ``floor`` (a figure that
    cannot be negative) the bar below stops at 0.  Also: whether one was cut."""
    below, above, cut = [], [], False
    for iv in ivs:
        half = _bar(iv)
        low = half
        if floor and half == half and iv.mean - half < 0.0:
            low, cut = max(iv.mean, 0.0), True
        below.append(low)
        above.append(half)
    return below, above, cut


def _draw_sweep(series: Any, x: str, ys: list[str], hue: str | None, out: Any, fmt: str | None,
                title: str, style: Style) -> Any:
    from ..units import describe

    Figure, rc_context = _matplotlib()
    all_x = [xv for points in series.values() for xv, _ in points]
    numeric = all(_is_number(v) for v in all_x)
    categories = list(dict.fromkeys(all_x)) if not numeric else []
    clipped = []
    with rc_context(_RC):
        fig = Figure(figsize=(6.4, 1.0 + 2.8 * len(ys)), layout="constrained")
        axes = fig.subplots(len(ys), 1, sharex=True, squeeze=False)[:, 0]
        # several lines: each shifted a little sideways so that their error bars stay apart
        span = (max(all_x) - min(all_x)) if numeric and all_x else 0.0
        dodge = 0.0 if len(series) < 2 else (0.08 if not numeric else 0.008 * (span or 1.0))
        for ax, name in zip(axes, ys):
            figure = describe(name)
            floor = not figure.signed and not style.paired
            for k, (h, points) in enumerate(series.items()):
                shift = (k - (len(series) - 1) / 2) * dodge
                px = [(xv if numeric else categories.index(xv)) + shift for xv, _ in points]
                mean = [stats[name].mean for _, stats in points]
                below, above, cut = _bars([stats[name] for _, stats in points], floor)
                if cut and name not in clipped:
                    clipped.append(name)
                label = _canon(h) if hue else None
                if all(b != b for b in above):  # no interval (one run a point): a plain line, no bar glyph
                    ax.plot(px, mean, marker="o", markersize=4, linewidth=1.5, label=label)
                else:
                    ax.errorbar(px, mean, yerr=[below, above], marker="o", markersize=4, capsize=3, linewidth=1.5,
                                label=label)
            if style.paired:
                ax.axhline(0.0, color="black", linewidth=0.8, zorder=1)
            for op, value in style.slos.get(name, ()):
                ax.axhline(value, color="tab:red", linestyle="--", linewidth=1.0,
                           label=f"SLO {'≤' if op == '<=' else '≥'} {shortest(value)}")
            if style.log_y:
                ax.set_yscale("log", nonpositive="clip")
            ax.set_ylabel(("Δ " if style.paired else "") + figure.axis_label)
            ax.grid(True, alpha=0.3)
            if style.slos.get(name) and (ax is not axes[0] or not hue):
                ax.legend(fontsize="small")
        if not numeric:
            axes[-1].set_xticks(range(len(categories)), [_canon(c) for c in categories])
        axes[-1].set_xlabel(describe(x).axis_label)
        if hue:
            axes[0].legend(title=hue, fontsize="small", title_fontsize="small")
        if clipped:
            title = f"{title}; bars cut at 0 (cannot be negative): {', '.join(describe(c).label for c in clipped)}"
        axes[0].set_title(title, fontsize="small", wrap=True)
        if out is not None:
            _save(fig, out, fmt)
    return fig


# ---------------------------------------------------------------------------
# CDFs of a dump's samples


def plot_cdf(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str] | None = None,
    log_x: bool = False,
) -> Any:
    """The empirical CDF of the ``value`` column of each CSV file in
    ``paths`` (as ``serq run --dump`` writes: ``client_ttft.csv``,
    ``client_response.csv``, an observe's ``NAME.csv``), one curve per file
    labelled with its name and sample count.

    The curve steps up by 1/n at each sample (NaN samples are left out); over
    :data:`CDF_POINTS` samples it is drawn through that many evenly spaced
    ranks.  ``log_x`` puts x on a log scale (samples ≤ 0 still count: the
    curve starts at their share).  ``out`` (``.png`` or ``.svg``) is written
    atomically; the figure is returned.  Errors as :func:`plot_sweep`."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise UsageError("nothing to plot: give one or more CSV files")
    fmt = _format(out)
    curves = []
    for path in items:
        shown = os.fspath(path)
        values = _samples(shown)
        if log_x and not any(v > 0 for v in values):
            raise UsageError(f"`{shown}` has no value above 0 to show on a log scale (--log-x)")
        curves.append((shown, values))
    stems = [Path(s).stem for s, _ in curves]
    labels = stems if len(set(stems)) == len(stems) else [s for s, _ in curves]
    return _draw_cdf(curves, labels, out, fmt, log_x)


def _samples(shown: str) -> list[float]:
    if Path(shown).suffix.lower() != ".csv":
        raise UsageError(f"cannot read `{shown}`: --cdf reads the CSV files of a dump (time,session,turn,value)")
    reader = csv.reader(io.StringIO(_read_text(shown)))
    header = next(reader, None) or []
    try:
        _need_column("value", header, f"`{shown}`")
    except UsageError as err:  # (the file is not a dump's: an input's fault, not the command line's)
        raise SerqError(err.message) from None
    col = header.index("value")
    values = []
    for n, cells in enumerate(reader, 2):
        if not cells:
            continue
        try:
            v = float(cells[col])
        except (ValueError, IndexError):
            raise SerqError(f"{shown}:{n}: `value` is not a number") from None
        if v == v:
            values.append(v)
    if not values:
        raise SerqError(f"`{shown}` has no samples")
    return sorted(values)


def _draw_cdf(curves: list[tuple[str, list[float]]], labels: list[str], out: Any, fmt: str | None,
              log_x: bool) -> Any:
    Figure, rc_context = _matplotlib()
    with rc_context(_RC):
        fig = Figure(figsize=(6.4, 4.0), layout="constrained")
        ax = fig.subplots()
        for (_shown, values), label in zip(curves, labels):
            n = len(values)
            ranks = range(n) if n <= CDF_POINTS else sorted({round(i * (n - 1) / (CDF_POINTS - 1))
                                                            for i in range(CDF_POINTS)})
            xs = [values[0]] + [values[i] for i in ranks]
            ps = [0.0] + [(i + 1) / n for i in ranks]
            ax.step(xs, ps, where="post", linewidth=1.5, label=f"{label} (n = {n})")
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel(labels[0] if len(labels) == 1 else "value")
        ax.set_ylabel("fraction of samples ≤ x")
        ax.set_ylim(0.0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="lower right")
        ax.set_title("empirical CDF", fontsize="small")
        if out is not None:
            _save(fig, out, fmt)
    return fig


# ---------------------------------------------------------------------------
# matplotlib and the output file

#: rcParams for every figure: SVG ids from a fixed salt (byte-identical output).
_RC = {"svg.hashsalt": "serq", "svg.fonttype": "path"}


def _matplotlib() -> Any:
    try:
        from matplotlib import rc_context
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError(NO_MATPLOTLIB) from None
    return Figure, rc_context


def _format(out: Any) -> str | None:
    """The format ``out`` names by its suffix; ``-`` (standard output) is SVG."""
    if out is None:
        return None
    if os.fspath(out) == "-":
        return "svg"
    fmt = FORMATS.get(Path(os.fspath(out)).suffix.lower())
    if fmt is None:
        raise UsageError(f"invalid --out `{os.fspath(out)}`: the name must end in .png or .svg")
    return fmt


def _save(fig: Any, out: Any, fmt: str | None) -> None:
    from ..files import write_bytes_atomic

    buf = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {}
    fig.savefig(buf, format=fmt, dpi=150, metadata=metadata)
    try:
        write_bytes_atomic(out, buf.getvalue())
    except BrokenPipeError:  # the reader of standard output went away: the command line ends quietly
        raise
    except OSError as err:
        raise SerqError(f"cannot write {os.fspath(out)}: {err.strerror or err}") from None


# ---------------------------------------------------------------------------
# the command line


def command(files: Sequence[str], x: str | None, y: Sequence[str], hue: str | None, where: Sequence[str],
            cdf: bool, log_x: bool, out: str, log_y: bool = False, slo: Sequence[str] = (),
            baseline: str | None = None, timeline: bool = False) -> None:
    """``serq plot``: a sweep's figures (``--x``, ``--y``), CDFs (``--cdf``) or
    a run's timeline (``--timeline``).  Every option is checked before any file is read."""
    ys = [f.strip() for item in y for f in item.split(",") if f.strip()]
    _format(out)
    if timeline:
        extra = [flag for flag, given in (("--x", x), ("--y", ys), ("--hue", hue), ("--where", where),
                                          ("--cdf", cdf), ("--log-x", log_x), ("--log-y", log_y), ("--slo", slo),
                                          ("--baseline", baseline)) if given]
        if extra:
            raise UsageError(f"--timeline draws the timeline.csv of serq run --timeline: {', '.join(extra)} "
                             "do not apply")
        if len(files) != 1:
            raise UsageError(f"--timeline draws one run's timeline (a folder or its timeline.csv), "
                             f"not {len(files)}")
        from .plot_timeline import plot_timeline

        plot_timeline(files[0], out=out)
        return
    if cdf:
        extra = [flag for flag, given in (("--x", x), ("--y", ys), ("--hue", hue), ("--where", where),
                                          ("--log-y", log_y), ("--slo", slo), ("--baseline", baseline)) if given]
        if extra:
            raise UsageError(f"--cdf plots the `value` column of dump files: {', '.join(extra)} do not apply")
        plot_cdf(files, out=out, log_x=log_x)
        return
    if log_x:
        raise UsageError("--log-x goes with --cdf (a sweep's axis across is as the sweep spaced it)")
    if len(files) != 1:
        raise UsageError(f"a sweep's plot reads one results file, not {len(files)} (several CSVs: add --cdf)")
    if x is None or not ys:
        raise UsageError("a sweep's plot needs --x COLUMN and --y COLUMN (or --cdf for a dump's CSV files)")
    _filters(where)
    parse_slos(slo, ys)
    plot_sweep(files[0], x=x, y=ys, hue=hue, out=out, where=list(where), log_y=log_y, slo=slo, baseline=baseline)

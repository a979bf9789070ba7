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
Every mistake in the input is a :class:`~serq.errors.UsageError` of one line
(exit 2 from the CLI); an output that cannot be written a
:class:`~serq.errors.SerqError` (exit 1).
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import SerqError, UsageError, suggest
from ..report import shortest
from .stats import Interval, across

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
    line) or ``.csv`` (a header, then rows; empty cells are ``None``)."""
    shown = os.fspath(path)
    suffix = Path(shown).suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise UsageError(f"cannot read `{shown}`: a sweep's results end in .jsonl or .csv")
    text = _read_text(shown)
    if suffix == ".csv":
        reader = csv.reader(io.StringIO(text))
        header = next(reader, None)
        if not header:
            raise UsageError(f"`{shown}` is empty")
        return [{k: _cell(c) for k, c in zip(header, cells)} for cells in reader if cells]
    from .journal import jsonl_rows

    return jsonl_rows(text, lambda n: UsageError(f"{shown}:{n}: not a row of a sweep (a JSON object on one line)"))


def _read_text(shown: str) -> str:
    try:
        return Path(shown).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read `{shown}`: {getattr(err, 'strerror', None) or err}") from None


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(k for row in rows for k in row))


def _need_column(name: str, columns: Sequence[str], source: str) -> None:
    if name in columns:
        return
    best = suggest(name, columns)
    if best is not None:
        raise UsageError(f"unknown column `{name}` in {source}; did you mean `{best}`?")
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

    ``out`` (``.png`` or ``.svg``) is written atomically; the figure is
    returned (a :class:`matplotlib.figure.Figure`).  Raises
    :class:`~serq.errors.UsageError` for a bad input (an unknown column, no
    rows, matplotlib missing) and :class:`~serq.errors.SerqError` when ``out``
    cannot be written."""
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
        raise UsageError(f"no rows in {source}")
    columns = _columns(rows)
    filters = _filters(where)
    for name in [x, *ys, *([hue] if hue else []), *filters]:
        _need_column(name, columns, source)
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
    series = _series(rows, x, ys, hue)
    return _draw_sweep(series, x, ys, hue, out, fmt)


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


def _draw_sweep(series: Any, x: str, ys: list[str], hue: str | None, out: Any, fmt: str | None) -> Any:
    Figure, rc_context = _matplotlib()
    all_x = [xv for points in series.values() for xv, _ in points]
    numeric = all(_is_number(v) for v in all_x)
    categories = list(dict.fromkeys(all_x)) if not numeric else []
    ns = [st.n for points in series.values() for _, stats in points for st in stats.values() if st.n]
    with rc_context(_RC):
        fig = Figure(figsize=(6.4, 1.0 + 2.8 * len(ys)), layout="constrained")
        axes = fig.subplots(len(ys), 1, sharex=True, squeeze=False)[:, 0]
        # several lines: each shifted a little sideways so that their error bars stay apart
        span = (max(all_x) - min(all_x)) if numeric and all_x else 0.0
        dodge = 0.0 if len(series) < 2 else (0.08 if not numeric else 0.008 * (span or 1.0))
        for ax, name in zip(axes, ys):
            for k, (h, points) in enumerate(series.items()):
                shift = (k - (len(series) - 1) / 2) * dodge
                px = [(xv if numeric else categories.index(xv)) + shift for xv, _ in points]
                mean = [stats[name].mean for _, stats in points]
                half = [_bar(stats[name]) for _, stats in points]
                label = _canon(h) if hue else None
                ax.errorbar(px, mean, yerr=half, marker="o", markersize=4, capsize=3, linewidth=1.5, label=label)
            ax.set_ylabel(name)
            ax.grid(True, alpha=0.3)
        if not numeric:
            axes[-1].set_xticks(range(len(categories)), [_canon(c) for c in categories])
        axes[-1].set_xlabel(x)
        if hue:
            axes[0].legend(title=hue, fontsize="small", title_fontsize="small")
        seeds = f"{min(ns)}" if ns and min(ns) == max(ns) else (f"{min(ns)}–{max(ns)}" if ns else "0")
        axes[0].set_title(f"mean over seeds (n = {seeds}) ± 95 % Student-t interval", fontsize="small")
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
    _need_column("value", header, f"`{shown}`")
    col = header.index("value")
    values = []
    for n, cells in enumerate(reader, 2):
        if not cells:
            continue
        try:
            v = float(cells[col])
        except (ValueError, IndexError):
            raise UsageError(f"{shown}:{n}: `value` is not a number") from None
        if v == v:
            values.append(v)
    if not values:
        raise UsageError(f"`{shown}` has no samples")
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
    if out is None:
        return None
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
    except OSError as err:
        raise SerqError(f"cannot write {os.fspath(out)}: {err.strerror or err}") from None


# ---------------------------------------------------------------------------
# the command line


def command(files: Sequence[str], x: str | None, y: Sequence[str], hue: str | None, where: Sequence[str],
            cdf: bool, log_x: bool, out: str) -> None:
    """``serq plot``: a sweep's figures (``--x``, ``--y``) or CDFs (``--cdf``)."""
    ys = [f.strip() for item in y for f in item.split(",") if f.strip()]
    if cdf:
        extra = [flag for flag, given in (("--x", x), ("--y", ys), ("--hue", hue), ("--where", where)) if given]
        if extra:
            raise UsageError(f"--cdf plots the `value` column of dump files: {', '.join(extra)} do not apply")
        plot_cdf(files, out=out, log_x=log_x)
        return
    if log_x:
        raise UsageError("--log-x goes with --cdf")
    if len(files) != 1:
        raise UsageError(f"a sweep's plot reads one results file, not {len(files)} (several CSVs: add --cdf)")
    if x is None or not ys:
        raise UsageError("a sweep's plot needs --x COLUMN and --y COLUMN (or --cdf for a dump's CSV files)")
    plot_sweep(files[0], x=x, y=ys, hue=hue, out=out, where=list(where))

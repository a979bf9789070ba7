"""``serq plot --timeline DIR``: a run over time (issue 39), from the
``timeline.csv`` that ``serq run --timeline DIR`` writes (:mod:`serq.timeline`).

One panel per figure and stage or pool — the queues, the pools' units used,
the stages' running jobs, the pools' holders, the step stages' tokens per
second — against simulated time; a family's members share their panel, one
line each (the units of two pools, KV tokens and request slots, never share
an axis).  A series that is 0 at every sample is left out, and a panel the
same line for line as one above it (a slots pool's ``used`` and its engine's
``running``): the panel kept names what it stands for.  matplotlib, the
output formats and the errors are :mod:`serq.experiments.plot`'s.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from ..errors import SerqError
from ..timeline import HEADER

#: The panels, top to bottom: (kind, figure, what it shows).
PANELS = (
    ("pool", "queue", "queue (holds waiting)"),
    ("stage", "queue", "queue (jobs waiting)"),
    ("pool", "used", "used (units)"),
    ("stage", "running", "running (jobs in service)"),
    ("pool", "holders", "holders (holds granted)"),
    ("stage", "tokens_per_s", "tokens per second"),
)


def read_timeline(path: str | os.PathLike[str]) -> dict[tuple[str, str, str], list[tuple[float, float]]]:
    """The series of a ``timeline.csv`` (or of a folder holding one):
    ``{(kind, name, figure): [(time, value)]}`` in the file's order."""
    shown = os.fspath(path)
    file = Path(shown)
    if file.is_dir():
        file = file / "timeline.csv"
        shown = os.fspath(file)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SerqError(f"cannot read `{shown}`: {getattr(err, 'strerror', None) or err}") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header != HEADER.strip().split(","):
        raise SerqError(f"`{shown}` is not a timeline: its header is not `{HEADER.strip()}` "
                        "(serq run --timeline DIR writes DIR/timeline.csv)")
    series: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for n, cells in enumerate(reader, 2):
        if not cells:
            continue
        try:
            t, kind, name, figure, v = cells
            point = (float(t), float(v))
        except ValueError:
            raise SerqError(f"{shown}:{n}: not a row of a timeline (time,kind,name,figure,value)") from None
        series.setdefault((kind, name, figure), []).append(point)
    if not series:
        raise SerqError(f"`{shown}` has no samples")
    return series


def _family(label: str) -> str:
    """``kv`` for ``kv[2]`` (a family's member) and for ``kv``."""
    return label.partition("[")[0]


def plot_timeline(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Any:
    """Draw the timeline in ``path`` (a folder or its ``timeline.csv``); write
    it to ``out`` (``.png`` or ``.svg``, atomically) when given; return the
    :class:`matplotlib.figure.Figure`."""
    from .plot import _RC, _format, _matplotlib, _save

    fmt = _format(out)
    series = read_timeline(path)
    panels: list[Any] = []  # [title, lines, series at 0 left out, the same panels left out]
    for kind, figure, what in PANELS:
        for family in dict.fromkeys(_family(n) for (k, n, f) in series if k == kind and f == figure):
            lines = [(name, pts) for (k, name, f), pts in series.items()
                     if k == kind and f == figure and _family(name) == family]
            drawn = [(name, pts) for name, pts in lines if any(v != 0.0 for _t, v in pts)]
            if not drawn:
                continue
            title = f"{kind} {family}: {what}"
            values = [[v for _t, v in pts] for _n, pts in drawn]
            same = next((p for p in panels if p[4] == values), None)
            if same is not None:  # (a slots pool's holders are its used, and its stage's running)
                same[3].append(f"{kind} {family} {figure}")
                continue
            panels.append([title, drawn, len(lines) - len(drawn), [], values])
    times = sorted({t for pts in series.values() for t, _v in pts})
    step = times[1] - times[0] if len(times) > 1 else 0.0
    Figure, rc_context = _matplotlib()
    with rc_context(_RC):
        fig = Figure(figsize=(7.0, 1.6 * len(panels) + 0.6), layout="constrained")
        axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        for ax, (title, drawn, zeros, alike, _values) in zip(axes, panels):
            for name, pts in drawn:
                # a state is a sample at each time; tokens/s hold over the interval before it
                ax.plot([t for t, _v in pts], [v for _t, v in pts], linewidth=1.2, label=name,
                        drawstyle="steps-pre" if title.endswith("per second") else "default")
            ax.set_title(title, fontsize="small", loc="left")
            notes = ([f"the same: {', '.join(alike)}"] if alike else []) + \
                ([f"{zeros} at 0 throughout not drawn"] if zeros else [])
            if notes:
                ax.set_title("; ".join(notes), fontsize="x-small", loc="right")
            ax.grid(True, alpha=0.3)
            ax.set_ylim(bottom=0.0)
            if len(drawn) > 1:
                ax.legend(fontsize="x-small", loc="upper left", ncol=max(1, min(4, (len(drawn) + 3) // 4)))
        axes[-1].set_xlabel("simulated time (s)")
        fig.suptitle(f"a run over time: the state every {step:g} s; tokens/s over the interval before each sample",
                     fontsize="small")
        if out is not None:
            _save(fig, out, fmt)
    return fig

"""A run over time (issue 39): its pools and stages sampled at a fixed
simulated interval, part of the report's data (``Report.timeline``).

The simulator records (:mod:`serq.sim.timeline`); this module holds what it
recorded and writes it.  A :class:`Timeline` has the sample times ``0, DT,
2·DT, …`` up to the run's end and, for every stage and pool (each member of
a family on its own, by its label), one value per sample time of each of its
figures:

========  ================  =====================================================
kind      figure            the value at time t
========  ================  =====================================================
stage     ``running``       jobs in service at the end of the instant t (a step
                            stage's residents; a ``fifo`` stage's busy servers;
                            every job of a ``ps``, ``delay`` or shared stage)
stage     ``queue``         jobs waiting for a server at the end of t (``fifo``
                            stages only: other stages keep nobody waiting; a step
                            stage's requests wait in its pools' ``queue``)
stage     ``tokens_per_s``  step stages only: the tokens its iterations served in
                            the interval (t − DT, t] over DT, an iteration's
                            tokens counted when it ends; 0 at t = 0
pool      ``queue``         holds waiting for the pool at the end of t
pool      ``holders``       holds granted (requests running on it) at the end of t
pool      ``used``          units in use at the end of t (KV tokens for a KV pool)
========  ================  =====================================================

"At the end of the instant" is the state once every event at time t has been
handled, as the report's time averages and a program's gauges see it.  The
CSV (:meth:`Timeline.csv`, ``timeline.csv``) has one row per sample, figure
and member: ``time,kind,name,figure,value``, ordered by time, then stages
before pools in declaration order, then figure.  That long ("tidy") form
reads in pandas as ``pd.read_csv(path).pivot_table(index="time",
columns=["kind", "name", "figure"], values="value")``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

#: The figures of each kind, in the CSV's order.
STAGE_FIGURES = ("running", "queue", "tokens_per_s")
POOL_FIGURES = ("queue", "holders", "used")
#: Samples when no interval is given: the horizon over this.
DEFAULT_SAMPLES = 200
#: The most sample times a timeline may have (a bound on its memory): an
#: interval finer than horizon / this is refused.
MAX_SAMPLES = 1_000_000
HEADER = "time,kind,name,figure,value\n"


@dataclass
class Series:
    """One figure of one stage or pool over the sample times."""

    kind: str  # "stage" or "pool"
    name: str  # the member's label: `engine`, `kv[2]`
    figure: str  # one of STAGE_FIGURES or POOL_FIGURES
    values: list[float]


@dataclass
class Timeline:
    """The samples of a run (see the module): ``times`` (``k·interval`` from 0
    to the end; the last is the end itself when ``k·interval`` falls on it
    within rounding) and ``series``, each with one value per time."""

    interval: float
    times: list[float]
    series: list[Series] = field(default_factory=list)

    def get(self, kind: str, name: str, figure: str) -> list[float]:
        """The values of one series (``get("pool", "kv", "used")``); KeyError when absent."""
        for s in self.series:
            if s.kind == kind and s.name == name and s.figure == figure:
                return s.values
        raise KeyError(f"no {kind} `{name}` figure `{figure}` in the timeline")

    def rows(self) -> Iterator[tuple[float, str, str, str, float]]:
        """``(time, kind, name, figure, value)`` in the CSV's order."""
        for i, t in enumerate(self.times):
            for s in self.series:
                yield t, s.kind, s.name, s.figure, s.values[i]

    def csv(self) -> str:
        """The CSV text: ``time,kind,name,figure,value`` (see the module)."""
        from .report import shortest

        return HEADER + "".join(f"{shortest(t)},{k},{n},{f},{shortest(v)}\n" for t, k, n, f, v in self.rows())

    def write(self, folder: str | os.PathLike[str]) -> None:
        """Write ``timeline.csv`` into ``folder`` (created if missing), through a
        rename; the CLI calls it inside :func:`serq.files.write_dir_atomic`."""
        from .files import write_text_atomic

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / "timeline.csv", self.csv())


def grid(interval: float, end: float) -> list[float]:
    """The sample times ``k·interval`` (k = 0, 1, …) up to ``end``; a last one
    within a millionth of the interval past ``end`` (rounding in ``k·interval``)
    is ``end`` itself."""
    n = int(math.floor(end / interval * (1.0 + 1e-12)))
    times = [k * interval for k in range(n + 1)]
    while len(times) > 1 and times[-1] > end:
        if times[-1] - end <= interval * 1e-6:
            times[-1] = end
            break
        times.pop()
    return times


def check_interval(interval: float, horizon: float) -> None:
    """A ValueError naming what is wrong with an interval (finite, > 0, not
    more than :data:`MAX_SAMPLES` samples in the horizon)."""
    if isinstance(interval, bool) or not isinstance(interval, (int, float)):
        raise ValueError(f"the timeline's interval must be a number of seconds, not {interval!r}")
    if not (math.isfinite(interval) and interval > 0):
        raise ValueError(f"the timeline's interval must be finite and > 0, not {interval:g}")
    if horizon / interval > MAX_SAMPLES:
        raise ValueError(f"a timeline interval of {interval:g} takes {horizon / interval:,.0f} samples "
                         f"over the horizon {horizon:g}; at most {MAX_SAMPLES:,} are kept: "
                         "give a longer interval")

"""Recording a run's timeline (issue 39; the data is :mod:`serq.timeline`).

The simulator only records: a :class:`Recorder`, made only when a timeline
is asked for, gives each pool and step stage a sink and each stage a
:class:`RecordedCount` in place of its presence count, so that a run without
a timeline does nothing more than one ``is not None`` per pool record and per
iteration end.  Nothing here schedules an event, draws, or reads state that a
coalesced run keeps virtual: the report is the same bits with or without it.

* A pool tells its sink every change it records, at the change's own time
  (``Pool.record``); a coalesced decode run's growths, committed when the run
  ends (or when something reads a pool a passing run grows), are told at their
  times, in order, with the same float additions the pool made
  (``Pool.allocate_run``).  A pool's changes reach it in time order: its time
  averages need the same.
* A stage's count of jobs present changes only at events (a coalesced run
  finishes jobs only at its last iteration, an event).
* A step stage tells its sink the tokens of the iterations an iteration-end
  event commits: one, or every iteration of a coalesced run, each at its end
  (``DecodeRun.end_list``; the tokens of every one but the last are the
  first's, the last's are the run's ``final`` when it has them).

A :class:`Trail` turns changes in time order into samples: the value at a
sample time t is the last one told at a time ≤ t (so the state at the end of
the instant t).  Tokens are binned by the interval their iteration ends in,
whole tokens as integers and fractions summed with ``math.fsum`` at the end,
so a sum does not depend on the order the iterations were told in (a
coalesced run tells them together).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Any

from ..timeline import Series, Timeline, grid
from .stats import CountAverage

if TYPE_CHECKING:
    from .simulator import Simulator


class Trail:
    """Samples of a piecewise-constant signal (a tuple of values) at the grid's
    times, from its changes told in time order."""

    __slots__ = ("times", "k", "last", "rows")

    def __init__(self, times: list[float], initial: tuple) -> None:
        self.times = times
        self.k = 0  # the next sample time to fill
        self.last = initial
        self.rows: list[tuple] = []

    def change(self, now: float, values: tuple) -> None:
        """The signal is ``values`` from ``now`` on."""
        times = self.times
        k = self.k
        if k < len(times) and times[k] < now:
            rows = self.rows
            last = self.last
            n = len(times)
            while k < n and times[k] < now:
                rows.append(last)
                k += 1
            self.k = k
        self.last = values

    def grew(self, used: float, needs: list[float], times: list[float], queue: int, holders: int) -> None:
        """A pool's growths ``needs`` at ``times`` from ``used`` (its queue and
        holders unchanged): ``used += need`` at each, as the pool adds them."""
        for need, now in zip(needs, times):
            used += need
            self.change(now, (used, queue, holders))

    def samples(self, n: int) -> list[tuple]:
        """The first ``n`` samples (those after the last change repeat it)."""
        rows = self.rows
        while len(rows) < n:
            rows.append(self.last)
        return rows[:n]


class RecordedCount(CountAverage):
    """A stage's count of jobs present (:class:`CountAverage`) that also tells a trail."""

    __slots__ = ("trail",)
    trail: Trail

    def set(self, now: float, value: int) -> None:
        CountAverage.set(self, now, value)
        self.trail.change(now, (value,))


class Tokens:
    """The tokens a step stage served, by the interval their iteration ended in."""

    __slots__ = ("times", "whole", "parts")

    def __init__(self, times: list[float]) -> None:
        self.times = times
        self.whole = [0] * len(times)  # bin k: iterations ending in (times[k-1], times[k]]
        self.parts: list[list[float]] = [[] for _ in times]

    def served(self, engine: Any, now: float) -> None:
        """The iteration(s) ending now (``StepEngine._iter_end``, before it commits)."""
        run = engine.run
        assign = engine.assign
        if run is None:
            self._add(now, [t for job, t in assign if not job.done], 1)
            return
        ends = run.end_list()
        if len(ends) > 1:  # iterations 1 … m−1: every job its token of the first's (replayed, not checked)
            each = [t for _job, t in assign]
            times = self.times
            i = 0
            while i < len(ends) - 1:  # the ends in one bin at a time
                k = bisect_left(times, ends[i])
                j = len(ends) - 1 if k >= len(times) else min(len(ends) - 1, _after(ends, times[k]))
                self._add(ends[i], each, j - i)
                i = j
        final = run.final
        last = [x for (job, _t), x in zip(assign, final)] if final is not None else [t for _j, t in assign]
        done = [job.done for job, _t in assign]
        self._add(now, [x for x, d in zip(last, done) if not d], 1)

    def _add(self, end: float, tokens: list[float], times_over: int) -> None:
        k = bisect_left(self.times, end)
        if k >= len(self.times) or times_over <= 0:
            return  # past the last sample time (the horizon): outside every interval
        whole = 0
        parts = self.parts[k]
        for t in tokens:
            if t == int(t):
                whole += int(t)
            else:
                parts.extend([t] * times_over)
        self.whole[k] += whole * times_over

    def rates(self, times: list[float]) -> list[float]:
        """Tokens per second of each interval ending at ``times[k]`` (0 at k = 0)."""
        out = [0.0]
        for k in range(1, len(times)):
            total = math.fsum([*self.parts[k], float(self.whole[k])])
            out.append(total / (times[k] - times[k - 1]))
        return out


def _after(ends: list[float], t: float) -> int:
    """The index of the first end after ``t``."""
    return bisect_right(ends, t)


class Recorder:
    """The sinks of one run (see the module)."""

    def __init__(self, sim: "Simulator", interval: float) -> None:
        self.interval = interval
        self.times = grid(interval, sim.horizon)
        self.stages: list[tuple[Any, Trail, Tokens | None]] = []
        self.pools: list[tuple[Any, Trail]] = []
        from .stages.step import StepEngine

        for members in sim.stages:
            for st in members:
                trail = Trail(self.times, (st.n,))
                old = st.presence
                count = RecordedCount(old.last)
                count.value, count.area, count.busy_area, count.start = old.value, old.area, old.busy_area, old.start
                count.trail = trail
                st.presence = count
                tokens = None
                if isinstance(st, StepEngine):
                    tokens = Tokens(self.times)
                    st.timeline = tokens
                self.stages.append((st, trail, tokens))
        for pools in sim.pools:
            for pool in pools:
                trail = Trail(self.times, (0.0, 0, 0))
                pool.timeline = trail
                self.pools.append((pool, trail))

    def finish(self, end: float) -> Timeline:
        """The timeline of the run that ended at ``end``."""
        from .stages.queueing import FifoStage

        times = [t for t in self.times if t <= end]
        n = len(times)
        series: list[Series] = []
        for st, trail, tokens in self.stages:
            counts = [float(c[0]) for c in trail.samples(n)]
            servers = st.servers if isinstance(st, FifoStage) else None
            if servers is None:
                series.append(Series("stage", st.label, "running", counts))
            else:
                series.append(Series("stage", st.label, "running", [min(c, float(servers)) for c in counts]))
                series.append(Series("stage", st.label, "queue", [max(0.0, c - servers) for c in counts]))
            if tokens is not None:
                series.append(Series("stage", st.label, "tokens_per_s", tokens.rates(times)))
        for pool, trail in self.pools:
            rows = trail.samples(n)
            series.append(Series("pool", pool.label, "queue", [float(r[1]) for r in rows]))
            series.append(Series("pool", pool.label, "holders", [float(r[2]) for r in rows]))
            series.append(Series("pool", pool.label, "used", [float(r[0]) for r in rows]))
        return Timeline(self.interval, times, series)

"""Gauges (language §2.9, §7.8): ``gauge NAME = expr;``, a function of the
deployment's state followed over time.

A gauge is read at the end of every instant — after the instant's events, the
ready sessions and the pool passes, once nothing more happens at that time —
so the states an instant passes through on its way (a hold released and
another granted at the same moment) are never a value.  Inside a coalesced
decode run the only state that changes is the run's pool, at each growth: the
run's replay reads the gauges at each growth's time (nothing else happens
while a run is in flight, so that is the state the instant ended with).

Each gauge keeps its change points (time, value) from time 0, which
``--dump`` writes; the report's figures come from them at the end: the time
average over [warm-up, end], a 95 % batch-means interval over 20 equal windows
of that span (Student t, 19 degrees of freedom, as the observes'), and the
least and greatest value held for a positive time inside the span.  Sums are
``math.fsum``, so the figures are the same bits on every machine.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

from ..report import GaugeSummary
from .stats import BATCHES, T_19

if TYPE_CHECKING:
    from .simulator import Simulator

NAN = math.nan


class Gauges:
    """The program's gauges, compiled, and their change points."""

    def __init__(self, sim: "Simulator", names: list[str], read: Callable[[Any], tuple]) -> None:
        self.sim = sim
        self.names = names
        #: every gauge at once, a tuple in the order of ``names`` (compiled as one function)
        self.read = read
        self.last: tuple | None = None  # the latest reading
        self.points: list[list[tuple[float, float]]] = [[] for _ in names]
        #: the engine replaying a coalesced run: read as iterating while its growths are sampled
        self.replaying: Any = None
        #: with ``always`` (a gauge reads a stage) every instant is read
        self.always = True
        #: what a gauge reads that changed since the latest reading (``Pool.record`` says so):
        #: None (nothing), the one pool that did, or this object itself (read every gauge:
        #: two or more pools did, or nothing was read yet)
        self.moved: Any = self
        #: the pools that changed since the term-keeping readers last looked (serq/sim/gauge_terms.py)
        self.movers: list[Any] = []
        #: while passing runs' growths are replayed run by run (serq/sim/lazy.py): the gauged
        #: pools' states after each growth, and before the first, kept to be read in time order
        self.capture: Any = None

    def sample(self, now: float) -> None:
        """Read every gauge on the state as it is, as the value from ``now`` on
        (nothing to do when no value moved since the latest reading; only the
        gauges that read it when one pool alone changed)."""
        moved, self.moved = self.moved, None
        if moved is None and not self.always:
            return  # nothing a gauge reads has changed: the values are the latest
        if moved is not None and moved is not self and not self.always and self.last is not None:
            self.sample_part(moved.gauge_any, now)
            return
        values = self._read(self.read)
        if values == self.last:  # (a NaN is never equal: it goes the long way)
            return
        self.last = values
        for x, pts in zip(values, self.points):
            _record(pts, float(x), now)

    def _read(self, read: Callable[[Any], tuple]) -> tuple:
        """``read``'s values; inside a run's replay the replaying engine reads
        as iterating (its iteration is in flight)."""
        engine = self.replaying
        if engine is None:
            return read(None)
        was = engine.iterating
        engine.iterating = True
        try:
            return read(None)
        finally:
            engine.iterating = was

    def sample_part(self, part: tuple[Callable[[Any], tuple], tuple[int, ...]], now: float) -> None:
        """:meth:`sample` after a growth in one pool: only the gauges that read
        it can have moved (``part``: those gauges compiled, and their indices)."""
        read, idx = part
        values = self._read(read)
        last = self.last
        if last is None:
            self.sample(now)
            return
        if len(idx) == 1:  # (the usual part: one gauge reads the pool)
            i = idx[0]
            x = values[0]
            if last[i] == x:
                return
            self.last = last[:i] + (x,) + last[i + 1:]
            _record(self.points[i], float(x), now)
            return
        if all(last[i] == x for i, x in zip(idx, values)):
            return
        merged = list(last)
        points = self.points
        for i, x in zip(idx, values):
            merged[i] = x
            _record(points[i], float(x), now)
        self.last = tuple(merged)

    def sample_growths(self, pool: Any, times: list[float], useds: list[float]) -> None:
        """:meth:`sample_part` after each growth of ``pool`` (the gauges read its
        ``used`` alone): ``used`` is ``useds[j]`` at ``times[j]``; the pool's
        ``used`` as it is now is put back at the end.  One gauge reading the
        pool (the usual case) is read in one loop."""
        part = pool.gauge_part
        read, idx = part
        d = pool.__dict__
        used = d["used"]
        engine = self.replaying
        was = engine.iterating if engine is not None else False
        if engine is not None:
            engine.iterating = True
        try:
            last = self.last
            if len(idx) != 1 or last is None:
                for now, u in zip(times, useds):
                    d["used"] = u
                    self.sample_part(part, now)
                return
            i = idx[0]
            pts = self.points[i]
            x0 = last[i]
            for now, u in zip(times, useds):
                d["used"] = u
                x = read(None)[0]
                if not x0 == x:  # (a NaN is never equal: recorded each time, as sample_part does)
                    _record(pts, float(x), now)
                    x0 = x
            if x0 is not last[i]:
                self.last = last[:i] + (x0,) + last[i + 1:]
        finally:
            d["used"] = used
            if engine is not None:
                engine.iterating = was

    def summaries(self, start: float, end: float) -> list[GaugeSummary]:
        return [summarize(name, pts, start, end) for name, pts in zip(self.names, self.points)]


def _record(pts: list[tuple[float, float]], v: float, now: float) -> None:
    """A gauge's reading ``v`` at ``now``: a change point unless it holds the
    value already; a later reading at the same instant replaces an earlier one."""
    if pts:
        t, last = pts[-1]
        if t == now:
            pts.pop()
            if pts and pts[-1][1] == v:
                return
            pts.append((now, v))
            return
        if last == v or (v != v and last != last):
            return
    pts.append((now, v))


def _fsum(terms: list[float]) -> float:
    try:
        return math.fsum(terms)
    except (ValueError, OverflowError):  # an infinite value, or inf − inf: the left-to-right sum
        acc = 0.0
        for x in terms:
            acc += x
        return acc


def summarize(name: str, pts: list[tuple[float, float]], start: float, end: float) -> GaugeSummary:
    """The figures of one gauge over [start, end] (see the module's docstring):
    each value's piece of area, cut at the 20 windows' edges, in one pass."""
    span = end - start
    frozen = tuple(pts)
    if not span > 0.0 or not pts:
        return GaugeSummary(name, NAN, math.inf, NAN, NAN, frozen)
    width = span / BATCHES
    edges = [start + i * width for i in range(BATCHES)] + [end]
    pieces: list[list[float]] = [[] for _ in range(BATCHES)]
    held: list[float] = []
    top_w = BATCHES - 1
    w = 0  # the window the piece starts in: the last edge ≤ its start (the starts only grow)
    nexts = [p[0] for p in pts]
    nexts[:-1] = nexts[1:]
    nexts[-1] = end
    for (t, v), hi in zip(pts, nexts):  # (a value holds until the next change point, or the end)
        lo = t if t > start else start
        if hi > end:
            hi = end
        if not hi > lo:
            continue
        held.append(v)
        while w < top_w and edges[w + 1] <= lo:
            w += 1
        k = w
        while True:  # the windows [lo, hi) meets
            top = edges[k + 1]
            if hi <= top or k == top_w:
                pieces[k].append(v * (hi - lo))
                break
            pieces[k].append(v * (top - lo))
            lo = top
            k += 1
    mean = _fsum([x for p in pieces for x in p]) / span
    widths = [edges[i + 1] - edges[i] for i in range(BATCHES)]
    if min(widths) > 0.0:
        means = [_fsum(p) / d for p, d in zip(pieces, widths)]
        m = _fsum(means) / BATCHES
        s2 = _fsum([(x - m) * (x - m) for x in means]) / (BATCHES - 1)
        ci = T_19 * math.sqrt(s2 / BATCHES) if s2 == s2 else NAN
    else:  # a span too short beside its start for 20 windows of it to be told apart: no interval
        ci = math.inf
    vals = [v for v in held if v == v]
    return GaugeSummary(name, mean, ci, min(vals) if vals else NAN, max(vals) if vals else NAN, frozen)

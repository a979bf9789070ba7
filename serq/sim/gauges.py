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

With many step engines (``LOG_ENGINES``) whose runs pass over other events
(serq/sim/lazy.py) and gauges that read only pools, the gauges are read from a
log instead (:meth:`Gauges.log_to`).  Each change of a pool a gauge reads is
logged with its time — the pool's ``used``, holders and queue at the end of an
instant, its ``used`` after a replayed growth — and the log is read in time
order later by the same gauges, compiled on stand-ins of the pools
(:class:`Shadow`).  A pool's own entries go in in its time order (a run's
growths there are replayed before anything else reads or changes it), so the
passing runs' growths need not be replayed before every instant for the
gauges to read them in time order with every other pool's changes; the
readings, and so the change points, are the same.  The log is read up to the
earliest growth still to be replayed whenever it is long, and to its end with
the report.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable

from ..report import GaugeSummary
from .stats import BATCHES, T_19

if TYPE_CHECKING:
    from .simulator import Simulator

NAN = math.nan

#: Off switch for comparisons (tests and benchmarks): the gauges are read as the run goes.
LOGGED = True
#: the log is kept from this many step engines on: with fewer, replaying the passing runs'
#: growths before every instant costs less than the log's own bookkeeping (docs/speed.md)
LOG_ENGINES = 8
#: read the log (up to the earliest growth still to be replayed) once it holds this many entries
LOG_READ = 8192
_time = _first = itemgetter(0)


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
        #: the log of the pools' changes (entries ``(time, shadow, used, holders, queued)``), when
        #: the gauges are read from one (:meth:`log_to`); None: they are read as the run goes
        self.log: list[tuple[float, Shadow, float, int, int]] | None = None
        self.shadows: dict[int, Shadow] = {}
        self.reader: Gauges | None = None  # the gauges compiled on the shadows, which read the log
        self.read_to = -math.inf  # the log is read up to here (its entries before it are gone)

    def mark(self, pool: Any) -> None:
        """``pool``, which a gauge reads, changed (``Pool.record``): read the
        gauges that read it at the end of the instant."""
        moved = self.moved
        if moved is not pool:
            self.moved = pool if moved is None else self
            self.movers.append(pool)  # (which ones: serq/sim/gauge_terms.py)

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

    # -- read from a log (see the module) -----------------------------------------------------

    def log_to(self, reader: "Gauges", shadows: dict[int, "Shadow"]) -> None:
        """Read the gauges from a log from now on: ``reader``, the gauges
        compiled on ``shadows`` (each gauge-read pool's stand-in, by the pool's
        id), reads it; its change points are these gauges'."""
        self.reader = reader
        self.shadows = shadows
        self.points = reader.points
        self.log = []
        self.sample = self._log_changes  # type: ignore[method-assign]

    def _log_changes(self, now: float) -> None:
        """:meth:`sample` into the log: the pools changed since the latest
        reading (every pool a gauge reads, at the first) as they are at ``now``."""
        moved, self.moved = self.moved, None
        if moved is None:
            return
        log = self.log
        assert log is not None
        shadows = self.shadows
        movers = self.movers
        if moved is not self:
            pools: Any = (moved,)
        elif movers:  # (a pool twice is logged twice at one time: the later stands)
            pools = tuple(movers)
        else:  # the first reading (`mark` makes `moved` this object only with two movers or more)
            pools = [sh.pool for sh in shadows.values()]
        movers.clear()
        for pool in pools:  # (`used` of a watched pool replays its runs' growths up to now first)
            log.append((now, shadows[id(pool)], pool.used, len(pool.holders), len(pool.put_queue)))
        if len(log) >= LOG_READ:
            self.read_log(self._readable(now))

    def log_growths(self, pool: Any, times: list[float], after: list[tuple[float, float]]) -> None:
        """A coalesced run's growths of ``pool`` at ``times`` into the log
        (``after``: its ``used`` and cached total after each; the holders and
        the queue do not change in a run)."""
        log = self.log
        assert log is not None
        log.extend(zip(times, repeat(self.shadows[id(pool)]), map(_first, after), repeat(len(pool.holders)),
                       repeat(len(pool.put_queue))))

    def _readable(self, now: float) -> float:
        """How far the log is complete: every entry before the result is in it.
        Only a run's growths are logged late, when they are replayed: the
        earliest growth not replayed yet of any run in flight, or ``now``."""
        bound = now
        for engine in self.sim.engines:
            run = engine.run
            if run is not None:
                g = run.grown
                if g < run.n_events():
                    t = run.event_start(g)
                    if t < bound:
                        bound = t
        return bound

    def read_log(self, upto: float) -> None:
        """Read the log's entries before ``upto``, in time order: each time's
        changes put on the shadows, then the gauges read once (as
        :meth:`sample` reads the pools at the end of an instant, or after a
        growth)."""
        log = self.log
        reader = self.reader
        assert log is not None and reader is not None
        log.sort(key=_time)  # (stable: one pool's entries at one time stay in the order logged)
        n = bisect_left(log, upto, key=_time)
        if not n:
            return
        if log[0][0] < self.read_to:  # (an entry logged after the log was read past its time)
            raise AssertionError(f"gauge log: an entry at {log[0][0]!r} after the log was read to {self.read_to!r}")
        entries = log[:n]
        del log[:n]
        sample = reader.sample
        mark = reader.mark
        points = reader.points
        i = 0
        while i < n:
            now, sh, used, nh, nq = entries[i]
            if (reader.moved is None and sh.gauged and (i + 1 == n or entries[i + 1][0] != now)
                    and len(sh.holders) == nh and len(sh.put_queue) == nq and reader.last is not None):
                # only the pool's `used` changed (a growth, mostly): the gauges that read it, as
                # `sample_part` reads them; one gauge (the usual) in `sample_growths`' loop, over
                # the pool's entries that follow alone at their times, each changing `used` alone
                # (written out: in a cluster those stretches are a growth or two, and a call of
                # `sample_growths` for each cost 2 % of `agents.sq`'s instructions at N = 32)
                part = sh.gauge_part
                idx = part[1]
                if len(idx) != 1:
                    sh.used = used
                    reader.sample_part(part, now)
                    i += 1
                    continue
                read = part[0]
                k = idx[0]
                pts = points[k]
                last = reader.last
                x0 = last[k]
                d = sh.__dict__
                while True:
                    d["used"] = used
                    x = read(None)[0]
                    if not x0 == x:  # (a NaN is never equal: recorded each time, as `sample_part`)
                        _record(pts, float(x), now)
                        x0 = x
                    i += 1
                    if i == n:
                        break
                    now, sh2, used, nh2, nq2 = entries[i]
                    if sh2 is not sh or nh2 != nh or nq2 != nq or (i + 1 < n and entries[i + 1][0] == now):
                        break
                if x0 is not last[k]:
                    reader.last = last[:k] + (x0,) + last[k + 1:]
                continue
            while i < n:
                t, sh, used, nh, nq = entries[i]
                if t != now:
                    break
                sh.used = used
                if len(sh.holders) != nh:
                    sh.holders = range(nh)
                if len(sh.put_queue) != nq:
                    sh.put_queue = range(nq)
                mark(sh)  # (as `Pool.record` does)
                i += 1
            sample(now)
        self.read_to = upto

    def summaries(self, start: float, end: float) -> list[GaugeSummary]:
        if self.log is not None:  # the rest of the log (a run ends by the horizon: its growths are in)
            self.read_log(math.inf)
        return [summarize(name, pts, start, end) for name, pts in zip(self.names, self.points)]


class Shadow:
    """A pool as the log says it was, for the gauges compiled on it: its
    ``used``, and its holders and queue (``range`` objects of their counts:
    a gauge reads only their lengths)."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.label = pool.label
        self.cap = pool.cap
        self.used = pool.used
        self.holders = range(len(pool.holders))
        self.put_queue = range(len(pool.put_queue))
        self.gauge_read = False
        self.gauged = False
        self.gauge_part: Any = None
        self.gauge_any: Any = None


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

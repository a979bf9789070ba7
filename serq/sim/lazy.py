"""Coalesced decode runs that pass over other engines' events.

With several step engines almost every event is another engine's, so a run
that had to end before the next event would be a few iterations long.  A
:class:`LazyRuns` lets a run be planned past those events and stay virtual —
iterations uncommitted, growths not made — until something outside reads a
pool it grows (its growths before now are replayed: :meth:`LazyRuns.read`,
:meth:`LazyRuns.catch_up`) or changes what it watches (it is cut to the
iteration in flight: :meth:`LazyRuns.changed`, :meth:`LazyRuns.cut`).  No
event may fall on a run's iteration end (:meth:`LazyRuns.admit`,
:meth:`LazyRuns.tie`), so ties keep the order one iteration at a time gives.
Watched pools are switched to :class:`WatchedPool` while watched, so the
unwatched path costs nothing.  The rules, why each keeps the report the same,
and which programs qualify (:func:`wanted`): docs/simulator.md, "Runs that
pass over other engines' events".
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from heapq import heapify, heappop, heappush
from itertools import islice, repeat
from typing import TYPE_CHECKING, Any

from .. import expr, ir
from .pool import Pool

if TYPE_CHECKING:
    from .simulator import Simulator
    from .stages.decode_run import DecodeRun
    from .stages.step import StepEngine

#: Off switch for comparisons (tests and benchmarks): the runs stop at the next event again.
ENABLED = True


def wanted(sim: "Simulator") -> bool:
    """Whether runs of this simulation may pass over other events (see the module)."""
    from .stages import hooks

    if not ENABLED or len(sim.engines) < 2:
        return False
    for engine in sim.engines:
        if not engine.coalesce or engine.step_log is not None or hooks.overridden(type(engine)):
            return False
    for pool in sim.all_pools:
        if pool.cache.spill is not None:  # a spill starts a link job when it evicts
            return False
        evict = getattr(pool.decl, "evict", "lru")
        if isinstance(evict, (list, tuple)):
            for e in evict:
                for x in expr.walk(e):
                    if isinstance(x, (ir.Attr, ir.Draw, ir.Probe)) or (
                            isinstance(x, ir.Ctx) and x.name not in ("size", "age", "last")):
                        return False
    return True


class LazyRuns:
    """The coalesced runs in flight that pass over other events (see the module)."""

    #: runs stop passing over events once this many plans cut another engine's run short, and
    #: they are over a fifth of all plans (engines that share pools)
    GIVE_UP = 100

    def __init__(self, sim: "Simulator") -> None:
        self.sim = sim
        self.env = sim.env
        #: at least the latest iteration end of any passing run (−inf with none): a timer
        #: set later than this cannot tie with one
        self.latest = -math.inf
        #: every iteration end of the passing runs, and whose run it is (no two runs share
        #: an end: :meth:`admit`), so a tie is one look-up, whatever the number of engines —
        #: but for the runs of ``unindexed``: a run's ends go in when another run is planned
        #: while it passes (most runs end first, and never pay for theirs), so at most one
        #: run, the latest, is out of it, and a tie asks that one itself
        self.at: dict[float, "StepEngine"] = {}
        self.unindexed: list["StepEngine"] = []
        #: no passing run has a growth to replay before this time
        self.soonest = math.inf
        #: the passing runs' next growths to replay, (time, count, index, run, engine): a heap,
        #: whose entries go stale as runs grow, are cut or end (:meth:`_due`)
        self.growths: list[tuple[float, int, int, "DecodeRun", "StepEngine"]] = []
        self.pushed = 0
        #: the order in which the passing runs' engines were registered (``engines``' order)
        self.order: dict["StepEngine", int] = {}
        #: engines whose run passes over other events now
        self.engines: list["StepEngine"] = []
        #: replaying: reads and changes of watched pools are the runs' own
        self.busy = False
        #: gauges read what growths change: the runs' growths are replayed
        #: together, in the order of their times; else each run's on its own
        self.merged = any(p.gauged for p in sim.all_pools)
        #: runs stop at the next event again from now on: engines that share pools kept cutting
        #: each other's runs short (each cut wastes a plan); the runs in flight end as planned
        self.off = False
        self.admitted = 0
        self.conflicts = 0

    def limit(self) -> float:
        """What a run may not pass: the end of the warm-up (the statistics restart there)."""
        sim = self.sim
        return sim.warmup if not sim.stats_on else math.inf

    # -- a run starts and ends ---------------------------------------------------------------

    def admit(self, engine: "StepEngine", run: "DecodeRun", now: float) -> "DecodeRun | None":
        """The planned ``run`` of ``engine``, cut before its first end that ties
        with an event in the queue or another passing run's end; None when
        that leaves one iteration.  Passing runs that share a pool with it are
        cut to their iteration in flight (each plans as if alone)."""
        tie = run.length  # the first end that ties: another passing run's end, or a queued time
        bound = run.end
        if self.unindexed:
            self._index()
        at = self.at
        ends = None  # (made when other runs pass; else a queued time's place is read off the segments)
        if at:
            ends = run.all_ends()
            if not at.keys().isdisjoint(ends):  # (one look-up an end, in C, most runs)
                for j, t in enumerate(ends):
                    if t in at:
                        tie = j
                        bound = ends[tie - 1] if tie > 0 else now
                        break
        # the queued times up to the run's last end that could still tie (a heap: every entry is
        # at least its parent, so the walk visits only those entries and their children)
        q = self.env.queue
        size = len(q)
        stack = [0] if size else []
        while stack:
            i = stack.pop()
            t = q[i][0]
            if t <= bound:
                if now < t:
                    j = bisect_left(ends, t) if ends is not None else run.end_index(t)
                    if 0 <= j < tie and (ends is None or ends[j] == t):
                        ends = run.all_ends()
                        tie = j
                        bound = ends[tie - 1] if tie > 0 else now
                i = 2 * i + 1
                if i < size:
                    stack.append(i)
                    if i + 1 < size:
                        stack.append(i + 1)
        if tie < run.length:
            if tie < 2:
                return None
            run.cut(tie, run.all_ends())
        run.passing = True
        grows, watch = self._pools(engine, run)
        self.admitted += 1
        for other in self._sharing(watch):
            orun = other.run
            if orun is not None and (grows & orun.watch or orun.grows & watch):
                self.catch_up(now)
                self.cut(other)
                self.conflicts += 1
        if self.conflicts > self.GIVE_UP and self.conflicts * 5 > self.admitted:
            # runs keep cutting each other short: from now on they stop at the next event again, and
            # the passing runs end with their iterations in flight (none has a growth after now)
            self.off = True
            self.catch_up(now)
            for other in self.engines[:]:
                self.cut(other)
            return None
        run.watch = watch
        run.grows = grows
        if run.end > self.latest:
            self.latest = run.end
        return run

    def _sharing(self, watch: frozenset[int]) -> list["StepEngine"]:
        """The passing runs' engines that watch a pool of ``watch``, in the order
        of ``engines`` (a run that grows a pool watches it: these are all those
        a run watching ``watch`` and growing part of it can conflict with)."""
        by_id = self.sim.pool_by_id
        found: set["StepEngine"] = set()
        for pid in watch:
            found.update(by_id[pid].watchers)
        if len(found) < 2:
            return list(found)
        return sorted(found, key=self.order.__getitem__)

    def _pools(self, engine: "StepEngine", run: "DecodeRun") -> tuple[frozenset[int], frozenset[int]]:
        """The ids of the pools the run grows, and of those it watches."""
        grows = _grown(engine)
        watch = set(run.watch) | grows
        watch.update(id(p) for p in engine.admit_pools)
        if engine.memory is not None:
            watch.add(id(engine.memory))
        head = run.head
        if head is not None:
            for req in getattr(head, "reqs", None) or [head]:
                watch.update(id(p) for p in req.pools)
        return grows, frozenset(watch)

    def register(self, engine: "StepEngine", run: "DecodeRun", entry: Any) -> None:
        """``run`` is in flight, its timer ``entry`` in the queue."""
        run.entry = entry
        assert run.passing  # (admit said so)
        self.engines.append(engine)
        self.unindexed.append(engine)  # (its ends go in `at` when another run is planned)
        self.pushed += 1
        self.order[engine] = self.pushed
        self._next_growth(engine, run)
        by_id = self.sim.pool_by_id
        for pid in run.watch:
            pool = by_id[pid]
            pool.watchers.append(engine)
            if type(pool) is Pool:
                pool.__class__ = WatchedPool

    def release(self, engine: "StepEngine") -> None:
        """``engine``'s run is over (at its end, or cut to one iteration): its
        pools are no longer watched for it."""
        run = engine.run
        assert run is not None and run.passing
        run.passing = False
        if engine in self.unindexed:
            self.unindexed.remove(engine)
        else:
            at = self.at
            deque(map(at.pop, run.all_ends(), repeat(None)), 0)  # (its ends out of `at`, in C)
        run.ends = None
        self.engines.remove(engine)
        self._latest()
        by_id = self.sim.pool_by_id
        for pid in run.watch:
            pool = by_id[pid]
            pool.watchers.remove(engine)
            if not pool.watchers:
                pool.__class__ = Pool

    def finish(self, engine: "StepEngine") -> None:
        """``engine``'s run ends now (its timer): released, its growths are
        replayed with it — after every passing run's growths before now when
        gauges read them (in the order of their times)."""
        if self.merged:
            self.catch_up(self.env.now)
        self.release(engine)

    # -- reading and changing what runs own ----------------------------------------------------

    def catch_up(self, t: float) -> None:
        """Replay the growths of every passing run that start before ``t``.
        When gauges read what growths change, they are read at each growth's
        time on the state of that moment: each run's growths are replayed on
        their own (a run reads only its own pools), with the gauged pools'
        states after each growth kept; then the pools go back to their states
        before, and move forward growth by growth in the order of their times
        (no two runs' growths are at one time: see the module), the gauges
        read after each."""
        if self.busy or not self.soonest < t:
            return
        self.busy = True
        due = self._due(t)
        try:
            gauges = self.sim.gauges
            if not self.merged or len(due) < 2:
                for engine in due:
                    if gauges is not None:
                        gauges.replaying = engine
                    self._grow(engine, t)
            else:
                states: list[tuple[float, int, Any, Any, float, float]] = []
                before: dict[int, tuple[Any, float, float]] = {}
                gauges.capture = (states, before)
                for engine in due:
                    gauges.replaying = engine
                    self._grow(engine, t)
                gauges.capture = None
                for pool, used, total in before.values():  # the states before the first growth …
                    pool.__dict__["used"] = used
                    pool.__dict__["cache"].total = total
                states.sort(key=_first_two)  # (each run's are in order: a merge)
                sample = gauges.sample_part
                for when, _n, pool, engine, used, total in states:  # … and after each, in time order
                    pool.__dict__["used"] = used
                    pool.__dict__["cache"].total = total
                    gauges.replaying = engine
                    sample(pool.gauge_part, when)
        finally:
            if self.sim.gauges is not None:
                self.sim.gauges.replaying = None
            self.busy = False
            heap = self.growths
            while heap and not _live(heap[0]):
                heappop(heap)
            self.soonest = heap[0][0] if heap else math.inf

    def _next_growth(self, engine: "StepEngine", run: "DecodeRun") -> None:
        """Queue ``run``'s next growth to replay, if it has one."""
        g = run.grown
        if g < run.n_events():
            t = run.event_start(g)
            self.pushed += 1
            heap = self.growths
            heappush(heap, (t, self.pushed, g, run, engine))
            if t < self.soonest:
                self.soonest = t
            if len(heap) > 64 + 4 * len(self.engines):  # stale entries (a run's replayed, cut or ended
                # growths) leave only when a catch-up passes their times, which without gauges read
                # before every instant may be long after: the live ones (one a run) are kept, and the
                # runs the stale ones hold are let go
                heap[:] = [e for e in heap if _live(e)]
                heapify(heap)

    def _due(self, t: float) -> list["StepEngine"]:
        """The engines whose passing runs have a growth to replay before ``t``,
        in the order they were registered (their entries leave the heap: their
        replay queues the next)."""
        heap = self.growths
        due = []
        while heap and heap[0][0] < t:
            entry = heappop(heap)
            if _live(entry):
                due.append(entry[4])
        if len(due) > 1:
            due.sort(key=self.order.__getitem__)
        return due

    def _grow(self, engine: "StepEngine", t: float) -> None:
        """Replay the growths of ``engine``'s run that start before ``t``, its
        pools plain meanwhile (the replay's own reads and changes)."""
        run = engine.run
        assert run is not None
        by_id = self.sim.pool_by_id
        grows = run.grows
        # (the usual run grows one pool: a tuple of it, not a comprehension; a cluster replays a
        # growth or two at a time, so this is hot)
        pools = (by_id[next(iter(grows))],) if len(grows) == 1 else [by_id[pid] for pid in grows]
        for pool in pools:
            pool.__class__ = Pool
        g = run.grown
        try:
            run.grow_until(engine, t)
        finally:
            for pool in pools:
                if pool.watchers:
                    pool.__class__ = WatchedPool
        if run.grown != g and run.passing:
            self._next_growth(engine, run)

    def read(self, pool: Pool) -> None:
        """Something outside the runs reads ``pool`` now: the growths there
        that start before now are replayed first (every run's when gauges
        read the pools; else the pool's own: no run reads another's pools)."""
        if self.busy:
            return
        now = self.env.now
        if self.merged:
            self.catch_up(now)
            return
        pid = id(pool)
        for engine in pool.watchers:
            run = engine.run
            if run.grown < run.n_events() and run.event_start(run.grown) < now and pid in run.grows:
                self.busy = True
                try:
                    self._grow(engine, now)
                finally:
                    self.busy = False

    def changed(self, pool: Pool) -> None:
        """Something outside the runs is about to change ``pool``: the runs
        that watch it end with their iteration in flight."""
        if self.busy:
            return
        self.read(pool)
        for engine in pool.watchers[:]:
            self.cut(engine)

    def cut_all(self) -> None:
        """Every passing run ends with its iteration in flight: something that
        every instant would retry (an idle engine with work, a request waiting
        in a pool without ``admit via``) must be retried at each iteration's
        end, as one iteration at a time does."""
        if self.busy or not self.engines:
            return
        self.catch_up(self.env.now)
        for engine in self.engines[:]:
            self.cut(engine)

    def cut(self, engine: "StepEngine") -> None:
        """End ``engine``'s passing run with the iteration in flight now (its
        growths before now replayed: the caller catches up first)."""
        run = engine.run
        assert run is not None and run.passing
        self._shorten(engine, run, self.committed(engine) + 1)

    def materialize(self, engine: "StepEngine") -> None:
        """Replay ``engine``'s passing run up to now: the iterations that ended
        are committed, the one in flight becomes an ordinary iteration."""
        assert not self.busy, "a replay changes no engine's residents"
        self.catch_up(self.env.now)
        self.cut(engine)
        run = engine.run
        if run is not None:  # (cut to one iteration, it already is one)
            self.release(engine)
            run.replay(engine, engine.assign)
            engine.run = None

    def tie(self, t: float) -> None:
        """A timer is about to be set at ``t``, one of a passing run's ends:
        the run is cut so that it ends before ``t``, or at ``t`` when that is
        the end of its iteration in flight (its timer, set first, comes first,
        as it would have one iteration at a time)."""
        engine = self.at.get(t)
        for engine in (engine,) if engine is not None else self.unindexed:  # (the latest run: asked itself)
            run = engine.run
            assert run is not None and run.passing
            j = run.end_index(t)  # (iteration j + 1 ends at t)
            if j >= 0:
                self._shorten(engine, run, max(self.committed(engine) + 1, j))
                return

    def _index(self) -> None:
        """Put the ends of the runs of ``unindexed`` in ``at``."""
        at = self.at
        for engine in self.unindexed:
            run = engine.run
            assert run is not None
            at.update(zip(run.all_ends(), repeat(engine)))
        self.unindexed.clear()

    def _latest(self) -> None:
        """``latest`` again, after a run ended or was cut: −inf once no run passes,
        else kept (a bound above the ends, which only costs a look-up in ``at``
        for a timer between; no scan of the runs at each end)."""
        if not self.engines:
            self.latest = -math.inf

    def _shorten(self, engine: "StepEngine", run: "DecodeRun", length: int) -> None:
        """Cut ``run`` to ``length`` iterations and move its timer to the new end."""
        if length >= run.length:
            return
        ends = run.all_ends()
        if engine not in self.unindexed:
            at = self.at
            deque(map(at.pop, islice(ends, length, None), repeat(None)), 0)
        run.cut(length, ends)
        self._latest()
        env = self.env
        env.unschedule(run.entry)
        epoch = run.entry[3].epoch
        if length == 1:  # an ordinary iteration now
            self.release(engine)
            engine.run = None
            entry = env.timer_entry(ends[0], [engine._iter_end])
        else:
            entry = env.timer_entry(ends[-1], [engine._iter_end])
            run.entry = entry
        entry[3].epoch = epoch  # type: ignore[attr-defined]

    # -- stage probes of an engine in a passing run --------------------------------------------

    def committed(self, engine: "StepEngine") -> int:
        """Iterations of ``engine``'s passing run that have ended by now (the
        next is in flight: no event falls on an iteration's end)."""
        run = engine.run
        assert run is not None and run.passing
        return bisect_left(run.all_ends(), self.env.now)


def _live(entry: tuple[float, int, int, "DecodeRun", "StepEngine"]) -> bool:
    """Whether a queued growth is still its run's next (not replayed, cut or ended)."""
    t, _n, g, run, engine = entry
    return engine.run is run and run.passing and run.grown == g and g < run.n_events() \
        and run.event_start(g) == t


def _first_two(state: tuple) -> tuple[float, int]:
    return state[0], state[1]


def _grown(engine: "StepEngine") -> frozenset[int]:
    """The ids of the pools the jobs of ``engine``'s batch hold and grow."""
    return frozenset(id(job.hold.pools[job.k]) for job, _t in engine.assign if job.hold is not None)


def _read_through(name: str) -> property:
    """A watched pool's attribute ``name`` (its cache, its trie): reading it
    replays the runs' growths there up to now first."""
    def get(self: Pool) -> Any:
        lazy = self.sim.lazy
        if not lazy.busy:
            lazy.read(self)
        return self.__dict__[name]

    def put(self: Pool, value: Any) -> None:
        self.__dict__[name] = value
    return property(get, put)


class WatchedPool(Pool):
    """A pool that a passing run watches (see the module): reading its state
    replays the runs' growths up to now; changing it cuts the runs that
    watch it first."""

    @property  # type: ignore[override]
    def used(self) -> float:
        lazy = self.sim.lazy
        if not lazy.busy:
            lazy.read(self)
        return self.__dict__["used"]  # type: ignore[no-any-return]

    @used.setter
    def used(self, value: float) -> None:
        d = self.__dict__
        if value != d["used"]:
            self.sim.lazy.changed(self)
        d["used"] = value

    cache = _read_through("cache")  # type: ignore[assignment]
    shared = _read_through("shared")  # type: ignore[assignment]

    def join(self, req: Any) -> None:
        self.sim.lazy.changed(self)
        Pool.join(self, req)  # (the cut may have made it a plain pool again)

    def cancel(self, req: Any) -> None:
        self.sim.lazy.changed(self)
        Pool.cancel(self, req)

"""Planning the coalesced decode runs of the step engine.

Most iterations of a loaded engine are alike: the same residents, each
decoding one token.  When an iteration is such, the engine's
:class:`RunPlanner` works out how many like it can follow back to back
before anything else could happen, and leaves them as a
:class:`~.decode_run.DecodeRun`, which the engine schedules as one event and
replays at its end with the same floating-point operations in the same order
as one by one, so the report is the same.  This is an optimisation of §4.3,
not a rule of it: ``--no-coalesce`` gives the same report.

The rules (docs/simulator.md, "Coalesced decode runs"): a run goes on while
each next iteration would be the same pure-decode batch, end before the next
event in the queue and by the horizon, finish no job, and grow only blocks
that fit without preempting; waiting requests do not stop it when none of
them can be admitted before the run ends (:mod:`.waiting`).

The planner plans at one of three speeds, the same algorithm each time:
iteration by iteration (:meth:`RunPlanner._plan_each`, for a position at
2^52 or past), from one growth to the next with the iterations between
folded at once (:meth:`RunPlanner._plan_by_growths`), and the same for a
batch of one job without a heap (:meth:`RunPlanner._plan_one`, the usual
run).  A run that may take a hundred growths or more is planned in arrays
instead (:mod:`.vector`), with the same result.
"""

from __future__ import annotations

import math
import sys
from bisect import bisect_left, bisect_right
from functools import reduce
from heapq import heapify, heappop, heappush
from itertools import accumulate, repeat
from operator import add
from typing import TYPE_CHECKING, Any

from ... import expr, ir
from ..cache import EPS
from ..stats import _SHORT, fold, fold_same
from .decode_run import _TWO52, _TWO53, DecodeRun, add_iters, exact_below, exact_steps, minus, plus_ones

if TYPE_CHECKING:
    from .step import StepEngine, StepView
    from .waiting import HeadAnalysis


#: A run that may take this many growths (its iterations allowed and with room before the next
#: event, times its jobs, over the block) is planned in arrays (serq/sim/stages/vector.py): 48
#: measured faster than 96, 64, 32 and 24 on the long-output programs (a run is often cut short
#: by an event, so fewer would rarely pay). Before numpy is imported a run must promise 96 to
#: count towards its import (`_WALK_FIRST`), so that the seed's programs, whose runs are short,
#: keep walking (docs/speed.md, "Fewer numpy calls a run").
MIN_ARRAY_GROWTHS = 48
_MIN_BEFORE_IMPORT = 96
#: The growths of long runs an engine walks before it imports numpy to plan them in arrays: the
#: import (~0.09 s) against 4–6 µs more a growth walked; 2 000 measured faster than 20 000 on the
#: long-output programs (docs/speed.md), and the seed's programs never reach it.
_WALK_FIRST = 2_000.0
#: `_plan_by_growths` takes a job as not growing in a run, without the first-growth search,
#: when its allocation passes its position by more than the run's cap and this margin; only
#: for caps and positions below these (the positions' rounding then cannot make up the margin)
_SKIP_MARGIN = 2.0
_CAP_SKIP = 1 << 20
_P_SKIP = 2.0 ** 30
#: ``RunPlanner.vcost`` before the first long run compiles it.
_UNCOMPILED = object()

#: The planner's state between runs: nothing (shared, never written).
_NONE: list = []
_NOTHING: frozenset[int] = frozenset()
_NO_POOLS: dict[int, float] = {}


class RunPlanner:
    """Plans the coalesced decode runs of one step engine.

    Made when the engine is prepared, with what the program says once:
    ``kv_tracked``, whether the cost reads the memory the decoders hold (then
    a growth in ``engine.memory`` changes the cost); ``state_pools``, the
    pools whose state ``budget``, ``chunk`` or ``cost`` read (a growth there
    ends a run before it); ``heads``, the analysis of the waiting requests;
    ``default_plan``, whether ``plan_tokens`` is the engine's own (then the
    iteration that finishes a job may join the run); ``view``, the engine's
    cost view when ``iteration_cost`` is its own.

    While it plans (:meth:`plan`), its fields are the state of the run so
    far: per job of the batch, the pool it grows (``False`` where a growth
    must end the run, ``None`` for a job without a hold), its position,
    allocation and memory the cost reads; the jobs that grow a hold
    (``idx``); each pool's ``used``; and the limits (``cap`` iterations, the
    next event ``limit``, the ``horizon``)."""

    __slots__ = ("engine", "sim", "kv_tracked", "kv_pool", "state_pools", "heads", "default_plan", "view",
                 "replayable", "vcost", "walked",
                 "run", "xheads", "recheck", "idx", "pools", "pos", "alloc", "kv", "used", "ceil", "cap", "limit",
                 "horizon", "drained", "known")

    def __init__(self, engine: "StepEngine", *, kv_tracked: bool, state_pools: frozenset[int],
                 heads: "HeadAnalysis", default_plan: bool, view: "StepView | None") -> None:
        self.engine = engine
        self.sim = engine.sim
        self.kv_tracked = kv_tracked
        self.kv_pool = engine.memory if kv_tracked else None  # the pool whose growths change the cost
        self.state_pools = state_pools
        self.heads = heads
        self.default_plan = default_plan
        self.view = view
        #: the pools whose evictions a replay does exactly (:func:`_replayable`)
        self.replayable = frozenset(id(p) for p in engine.sim.all_pools if _replayable(p))
        #: the cost over an array of kv_decode values (serq/sim/stages/vector.py), when the engine's
        #: own cost is computed in its view and reads nothing whose array form may round otherwise;
        #: compiled at the first long run (numpy is imported then, not by every run)
        self.vcost: Any = _UNCOMPILED
        self.walked = 0.0  # growths of long runs walked before numpy was imported (`_long`)
        self.cap = 0
        self.limit = self.horizon = 0.0
        self._clear()

    def _clear(self) -> None:
        """Forget the last run's state (it holds jobs and pools)."""
        self.run: DecodeRun | None = None
        self.xheads = False
        self.recheck: frozenset[int] = _NOTHING
        self.idx: list[int] = _NONE
        self.pools: list[Any] = _NONE
        self.pos: list[float] = _NONE
        self.alloc: list[float] = _NONE
        self.kv: list[float] = _NONE
        self.used: dict[int, float] = _NO_POOLS
        self.ceil: dict[int, float] = _NO_POOLS
        self.drained = False  # a ceiling lets the run evict part of the waiting head's prefix
        self.known = True  # every position p ≥ 0 with p + cap + 3 below 2^52 (`_state`)

    # -- a run ----------------------------------------------------------------------------------

    def plan(self, now: float, cost: float, budget: float, kvs: list[float] | None = None) -> DecodeRun | None:
        """The run of decode iterations of the engine's batch, this one (from
        ``now``, costing ``cost``, with ``budget`` tokens) first, that can run
        back to back before anything else could happen — every one ends before
        the next event and by the horizon; none finishes a job (but perhaps
        the last), lets a waiting request in, or needs a block that does not
        fit — or None when it is this iteration alone.  A growth that fits is
        planned here and replayed in place: it evicts cache and changes
        ``kv_decode``, hence the cost.  The ends are added one cost at a time
        from ``now``, as the iterations one by one would reach them.  ``kvs``:
        each job's memory held in ``engine.memory``, as the engine read it for
        this iteration's cost (read here when None and the cost reads it)."""
        engine = self.engine
        sim = self.sim
        t = now + cost
        lazy = sim.lazy
        if lazy is not None and not lazy.off:  # the run passes over other events (serq/sim/lazy.py):
            # only the warm-up's end stops it
            limit = lazy.limit()
            if not t < limit or t > sim.horizon:
                return None
        else:
            limit = engine.env.peek()
            if not t < limit or t > sim.horizon or sim.dirty_ps:
                return None
            for other in sim.engines:  # another engine that could start at a settle inside the run
                if other is not engine and not other.iterating and other.has_work():
                    return None
        cap = _whole_tokens(engine.assign)
        if cap < 1:
            return None  # the first iteration finishes a job, or takes a fraction of a token
        stop = self.state_pools
        run = DecodeRun(now, cost, budget, None, 0)
        if sim.queued_pools:  # (some pool has a queue: ``Pool.join``, ``Pool.unqueue``)
            terms = self.heads.terms()
            if terms is None:
                return None
            more, self.recheck, run.head, run.blocking, self.xheads, kept = terms
            stop = stop | more
        else:
            kept = _NOTHING
        run.watch = stop | self.recheck | kept
        self.run = run
        self.cap, self.limit, self.horizon = cap, limit, sim.horizon
        self._state(stop, kept, kvs)
        try:
            return self._plan(now, cost)
        finally:
            self._clear()

    def _plan(self, now: float, cost: float) -> DecodeRun | None:
        """:meth:`plan` once the state is read: at the speed the positions allow."""
        run = self.run
        assert run is not None
        cap = self.cap
        pos, idx = self.pos, self.idx
        if cap <= 1:
            cur = cost
        elif len(pos) == 1 and idx and self.known:
            cur = self._plan_one(cost)
        elif self.known:
            cur = self._plan_by_growths(cost)
        else:
            cur = self._plan_each(cost)
        if run.length == cap and self.default_plan:  # the iteration that finishes a job can end the run
            self._finishing(cur)
        _trim(run, now)
        return run if run.length > 1 else None

    def _state(self, stop: frozenset[int], kept: frozenset[int], kvs: list[float] | None) -> None:
        """Per job of the batch: the pool it grows, its position, allocation and
        the memory the cost reads (``kvs`` when the engine read it already);
        ``used`` of each pool a job grows, and the ``used`` a growth there may
        reach (``ceil``): its cap, or in a pool of ``kept``
        (:meth:`.waiting.HeadAnalysis.changing`) what :meth:`_kept_ceil`
        allows, so that its evictions leave the waiting head blocked."""
        engine = self.engine
        assign = engine.assign
        memory = engine.memory
        tracked = memory is not None and self.kv_tracked
        if memory is not None and tracked:
            kv = kvs if kvs is not None else [job.session.held_in(memory) for job, _t in assign]
        else:
            kv = [0.0] * len(assign)
        pools: list[Any] = []
        pos: list[float] = []
        alloc: list[float] = []
        idx: list[int] = []
        used: dict[int, float] = {}
        ceil: dict[int, float] = {}
        # every position p ≥ 0 with p + (cap + 3) below 2^52: `plus_ones` of it up to cap + 2
        # steps takes one addition a binade (the planners but `_plan_each` count on it)
        known = True
        c3 = self.cap + 3
        last: Any = None  # the last pool looked at, and whether its growths may be planned
        replayable = False
        for i, (job, _t) in enumerate(assign):
            req = job.hold
            if req is None:
                pools.append(None)
                pos.append(0.0)
                alloc.append(0.0)
            else:
                idx.append(i)
                k = job.k
                pool = req.pools[k]
                a = req.alloc[k]
                if pool is not last:
                    last = pool
                    replayable = id(pool) in self.replayable and id(pool) not in stop
                # a growth's eviction must be one the replay can do at its time, and
                # the memory a cost reads must be this hold's allocation alone
                if replayable and (not tracked or pool is not memory or kv[i] == a):
                    pools.append(pool)
                    pid = id(pool)
                    if pid not in used:
                        used[pid] = pool.used
                        ceil[pid] = pool.cap + EPS
                else:
                    pools.append(False)
                p = req.pos[k]
                if not (p >= 0.0 and p + c3 < _TWO52):
                    known = False
                pos.append(p)
                alloc.append(a)
        self.pools, self.pos, self.alloc, self.idx, self.kv = pools, pos, alloc, idx, kv
        self.used, self.ceil, self.known = used, ceil, known
        for pid in kept:
            if pid in ceil:
                ceil[pid] = min(ceil[pid], self._kept_ceil(self.sim.pool_by_id[pid]))

    def _kept_ceil(self, pool: Any) -> float:
        """The ``used`` a run's growths may reach in ``pool``, a cache holding
        the waiting head's prefix that its blocking amount reads: while the
        evictions take only the entries ahead of that prefix, a block short
        of it (:meth:`PrefixCache.ahead_of`).  When the head's entry goes
        first and by whole blocks (:meth:`PrefixCache.drained_first`), further:
        while the amount, read at each prefix the evictions leave it
        (:meth:`.waiting.HeadAnalysis.need_with`), still does not fit beside
        the least ``used`` that leaves that prefix (``used`` only grows in a run)."""
        run = self.run
        assert run is not None
        cache, block = pool.cache, pool.block or 0.0
        head = run.head
        req, k = head.blocking[0]  # type: ignore[union-attr]
        serial = req.session.serial
        used = self.used[id(pool)]
        # the units a run's growths may take: a block more than its tokens per job, and one. Its
        # tokens: the iterations it may take, no more than the first cost fits before the next
        # event (and two). A cost that falls could fit more; the run then stops at this ceiling,
        # never above the true one, and the next plan goes on (the walk below reads the head's
        # amount a block at a time: on long outputs, thousands of readings a plan without this)
        room = self._room(run.cost) + 2.0
        iters = room if room < self.cap else self.cap
        enough = (iters + block) * len(self.idx) + block
        size = cache.drained_first(serial, used, pool.cap)
        if size is None or not all(float(self.alloc[i]).is_integer() for i in self.idx if self.pools[i] is pool):
            # a growth evicts what passes cap − used − total, block by block from the tail
            # of the oldest entry: at most a block more than that (whole entries without blocks)
            return pool.cap - cache.total + cache.ahead_of(serial, enough) - block
        base = pool.cap - cache.total  # the pool grows to this without evicting
        cap = pool.cap + EPS
        j = 0  # blocks of the head's prefix the run may evict
        while base + j * block < used + enough:
            p = size - (j + 1) * block  # its prefix once `used` passes base + j·block
            if p < 0.0:
                p = 0.0
            # (read anew at each plan: it may read `holders`, `queued`, … which change between runs)
            fit = self.heads.need_with(req, k, head.left, pool, p)  # type: ignore[union-attr]
            low = base + j * block
            if fit is None or not (low if low > used else used) + fit > cap:
                break  # it would fit (or be an error) there: the run stops before
            j += 1
            if p == 0.0:
                return cap  # the prefix stays 0 from here, and `used` only grows
        if j:
            self.drained = True
        return base + j * block

    # -- the three speeds -----------------------------------------------------------------------

    def _plan_each(self, cost: float) -> float:
        """Plan iterations 2, 3, … one at a time (positions that a token more
        could round): the jobs that need a block grow, in serving order.  The
        cost of the last iteration planned."""
        run = self.run
        assert run is not None
        idx, pos, alloc, kv = self.idx, self.pos, self.alloc, self.kv
        cap = self.cap
        kv_cost = self._kv_coster() if self.kv_tracked else None
        left = self.engine.left
        t = run.first
        cur = cost
        m = 1
        while m < cap:
            growths: list[tuple[int, float]] = []
            again = False
            for i in idx:
                units = pos[i] + 1.0 - alloc[i]
                if units > EPS:
                    grew = self._grow(i, units, growths)
                    if grew is None:
                        break  # it would preempt or stall: the run stops before
                    again = again or grew
                pos[i] += 1.0
            else:
                if growths and kv_cost is not None:
                    cur = kv_cost(kv)
                    if not (cur > 0.0 and math.isfinite(cur)):
                        break
                t2 = self._append(m, t, cur, growths, left if again else None)
                if t2 is None:
                    break
                t = t2
                m += 1
                continue
            break
        run.length, run.end = m, t
        return cur

    def _plan_by_growths(self, cost: float) -> float:
        """:meth:`_plan_each` when positions step exactly: from one growth to
        the next, the iterations between (same cost) are added in one fold and
        cut at the first end that is not before the next event or is past the
        horizon.  ``_grow`` and ``_append`` are written out in its loop (the same
        tests and operations in the same order), and ``_exact`` is asked only when
        a position's room in its binade is shorter than the run may be."""
        run = self.run
        assert run is not None
        idx, pos, alloc, kv = self.idx, self.pos, self.alloc, self.kv
        cap, limit, horizon = self.cap, self.limit, self.horizon
        kv_cost = self._kv_coster() if self.kv_tracked else None
        left = self.engine.left
        segs, events = run.segs, run.events
        last = cap + 1
        # the next growth of each job, (iteration, its index in idx): popped in serving order
        ex: list[float] = []
        nxt: list[tuple[int, int]] = []  # (only the growths within the run: a later one is `last`)
        # a job whose allocation is more than the run's iterations past its position does not
        # grow in it (`_first_growth` gives `last`): with p below 2^30 and cap below 2^20 the
        # positions' rounding (at most cap ulps of 2^-22 each) is far below the margin
        skip = cap + _SKIP_MARGIN if cap < _CAP_SKIP else math.inf
        for n, i in enumerate(idx):
            p = pos[i]
            a = alloc[i]
            if a - p > skip and p < _P_SKIP:
                ex.append(0.0)  # (never read: the job is not popped)
                continue
            # `_exact(p, cap)`: the steps a run takes (fewer than cap) are below exact_below(p) when
            # it is at least cap, whatever exact_steps says
            e: float = exact_below(p)
            if e < cap:
                e = _exact(p, cap)
            ex.append(e)
            g = _first_growth(p, a, 2, cap, e)
            if g <= cap:
                nxt.append((g, n))
        if self._long(cost):  # a long run: in arrays (serq/sim/stages/vector.py)
            firsts = [last] * len(idx)  # each job's first growth (`last`: none in the run)
            for g, n in nxt:
                firsts[n] = g
            got = self._arrays().plan(self, cost, self.vcost if kv_cost is not None else None, self.view, firsts)
            if got is not None:
                return got
        heapify(nxt)
        p0 = [pos[i] for i in idx]
        period = [-1] * len(idx)  # each job's `_period`, once it grows (-1: not asked yet)
        pools, used, ceils, recheck, kv_pool = self.pools, self.used, self.ceil, self.recheck, self.kv_pool
        # `kv_cost(kv)` folds every job's kv_decode (`reduce(add, kv, 0.0)`) at each growth: while
        # they are whole numbers and their sum stays below 2^53 every partial sum is exact, so the
        # fold is the sum before plus the growth (kv_sum; None: the fold each time)
        kv_sum = self._kv_sum(kv) if kv_cost is not None and self.view is not None else None
        view: Any = self.view  # (set when kv_sum is)
        cost_fn = self.engine.cost_fn
        t = run.first
        cur = cost
        m = 1
        while m < cap:
            g = nxt[0][0] if nxt else last
            free = (g if g <= cap else last) - (m + 1)  # iterations without a growth
            if free > 0:
                c, t, cut = _fold_free(segs, t, cur, free, limit, horizon)
                m += c
                if cut:
                    break
            if m >= cap:
                break
            # iteration g = m + 1: the jobs whose token needs memory grow, in serving order
            growths: list[tuple[int, float]] = []
            again = False
            stopped = False
            while nxt and nxt[0][0] == g:
                n = heappop(nxt)[1]
                i = idx[n]
                p, e = p0[n], ex[n]
                a = alloc[i]
                # `_grow(i, units, growths)`: None (the run stops before) when it cannot
                pool = pools[i]
                if not pool:
                    stopped = True
                    break
                b = pool.block
                per = period[n]
                if per < 0:  # (asked at the job's first growth in the run)
                    per = period[n] = _period(p, a, g, b, cap, e)
                if per:
                    need = b  # type: ignore[assignment]  # (per > 0: b set)
                else:
                    x = ((p + (g - 2)) if g - 2 < e else plus_ones(p, g - 2)) + 1.0 - a  # the units past a
                    x = a + x  # `pool.round_up(a + x)` inline (x is finite: a ceil past the floats is x)
                    q = x / b - EPS if b is not None else math.inf
                    need = (math.ceil(q) * b if q < math.inf else x) - a
                if need > 0.0:
                    pid = id(pool)
                    u = used[pid]
                    if u + need > ceils[pid] or (pool.cache.spill is not None
                                                 and u + pool.cache.total + need > pool.cap + EPS):
                        stopped = True  # it would preempt or stall, or evict and spill
                        break
                    used[pid] = u + need
                    a = alloc[i] = a + need
                    growths.append((i, need))
                    if pool is kv_pool:
                        if kv_sum is not None:  # (the job's term goes from kv[i] to a, both whole)
                            kv_sum = kv_sum + (a - kv[i]) if a % 1.0 == 0.0 and kv_sum + a < _TWO53 else None
                        kv[i] = a
                    if pid in recheck:
                        again = True
                it = g + per if per else _first_growth(p, a, g + 1, cap, e)
                if it <= cap:
                    heappush(nxt, (it, n))
            if stopped:
                break
            if growths and kv_cost is not None:
                if kv_sum is not None:
                    view.kv_decode = kv_sum  # (`kv_cost(kv)` with the fold's value)
                    cur = cost_fn(view)
                else:
                    cur = kv_cost(kv)
                if not (cur > 0.0 and math.isfinite(cur)):
                    break
            t2 = t + cur  # `_append(m, t, cur, growths, left if again else None)`
            if not t2 < limit or t2 > horizon:
                break
            if growths or again:
                events.append((m - 1, growths, left if again else None, t))
            if segs and segs[-1][0] == cur:  # `add_iters(segs, cur, 1, t, t2)`
                seg = segs[-1]
                seg[1] += 1
                seg[3] = t2
            else:
                segs.append([cur, 1, t, t2])
            t = t2
            m += 1
        if m == cap:  # the positions before the next iteration, as `_plan_each` leaves them (only
            d = m - 1  # `_finishing` reads them, and only after a run of `cap`)
            for n, i in enumerate(idx):
                p = p0[n]
                pos[i] = (p + d) if d < ex[n] else plus_ones(p, d)
        run.length, run.end = m, t
        return cur

    def _plan_one(self, cost: float) -> float:
        """:meth:`_plan_by_growths` for a batch of one job that holds memory
        (the usual run): no heap, the job's state in locals, ``kv_decode`` the
        fold of one value (``0.0 + kv``); the same operations in the same order."""
        run = self.run
        assert run is not None
        cap, limit, horizon = self.cap, self.limit, self.horizon
        segs, events = run.segs, run.events
        pool = self.pools[0]
        p0, a, kv0 = self.pos[0], self.alloc[0], self.kv[0]
        kv_view, cost_of_kv = self._one_coster()
        grows_kv = self.kv_tracked and pool is self.engine.memory
        u, pcap, b, left, spilled = self._one_pool(pool)
        t = run.first
        cur = cost
        m = 1
        exact = _exact(p0, cap)  # p0 + d is p0 plus 1.0 d times in turn for d below this
        g = _first_growth(p0, a, 2, cap, exact)
        if g <= cap and self._long(cost):  # a long run: in arrays (serq/sim/stages/vector.py)
            got = self._arrays().plan(self, cost, self.vcost if cost_of_kv is not None else None, kv_view, [g])
            if got is not None:
                return got
        # Iterations m + 1 … m + n all cost `cur`: the first may be a growth (its event `ev`), the
        # others need no memory. They are added in one fold, cut at the first end that is not
        # before the next event or is past the horizon (then the run ends there). The common
        # steps are written out here (`_fold_free`, `add_iters`): this loop is the fast path's
        # hottest. Growths a block apart (`_period`, the usual run) need neither the round-up
        # nor the search for the next one.
        n = (g if g <= cap else cap + 1) - 2
        ev: tuple | None = None
        period = _period(p0, a, g, b, cap, exact)  # (growths every `period` iterations, a block each)
        block = b if b is not None else 0.0  # (each one's need then: b is set)
        while True:
            if n > 0:
                t_end = fold(repeat(cur, n), t) if n < _SHORT else fold_same(cur, n, t)  # the last decides
                if not (t_end < limit and not t_end > horizon):  # the run ends among these
                    c, t, _cut = _fold_free(segs, t, cur, n, limit, horizon)
                    if c > 0 and ev is not None:
                        events.append(ev)
                    m += c
                    break
                if ev is not None:
                    events.append(ev)
                if segs and segs[-1][0] == cur:
                    seg = segs[-1]
                    seg[1] += n
                    seg[3] = t_end
                else:
                    segs.append([cur, n, t, t_end])
                m += n
                t = t_end
            if m >= cap or not pool:
                break
            # iteration g = m + 1: the job's token needs memory
            if period:
                need = block
                grew = True
            else:
                x = a + (((p0 + (g - 2)) if g - 2 < exact else plus_ones(p0, g - 2)) + 1.0 - a)  # pool.round_up(x)
                q = x / b - EPS if b is not None else math.inf  # inline
                need = (math.ceil(q) * b if q < math.inf else x) - a  # type: ignore[operator]  # (q < inf: b set)
                grew = need > 0.0
            if grew:
                if u + need > pcap or (spilled is not None and u + spilled + need > pcap):
                    break  # it would preempt, stall or spill: the run stops before
                u += need
                a = a + need
                if grows_kv:
                    kv0 = a
                if cost_of_kv is not None:  # the cost of one decoder holding kv0 (`_one_coster`)
                    if kv_view is not None:
                        kv_view.kv_decode = 0.0 + kv0
                    cur = cost_of_kv(kv0 if kv_view is None else kv_view)
                    if not (cur > 0.0 and math.isfinite(cur)):
                        break
            nx = g + period if period else _first_growth(p0, a, g + 1, cap, exact)  # the next growth
            ev = (m - 1, [(0, need)], left, t) if grew else None
            n = (nx if nx <= cap else cap + 1) - g  # iteration g and those up to the next growth
            g = nx
        self._one_end(m, t, u, a, kv0)
        return cur

    def _room(self, cost: float) -> float:
        """The iterations of ``cost`` each that fit between the run's first end
        and the next event or the horizon (a run whose cost grows takes no more)."""
        run = self.run
        assert run is not None
        return (min(self.limit, self.horizon) - run.first) / cost

    def _long(self, cost: float) -> bool:
        """Whether the run may be long enough to plan in arrays: growths
        enough in the iterations allowed and with room before the next event."""
        pool = self.pools[self.idx[0]] if self.idx else None
        block = pool.block if pool else None
        if block is None or not block > 0.0:
            return False
        n = len(self.idx)
        if self.cap * n / block < MIN_ARRAY_GROWTHS:  # (`growths` below is at most this)
            return False
        room = self._room(cost)
        free = self.ceil[id(pool)] - self.used[id(pool)]
        if pool and pool.cache.spill is not None:  # (a growth that evicts from a pool that spills ends the run)
            free -= pool.cache.total
        growths = min(min(self.cap, room) * n / block,  # (and the blocks that fit before the
                      free / block + 1.0)  # run must end)
        if growths < MIN_ARRAY_GROWTHS:
            return False
        if self.vcost is _UNCOMPILED and "serq.sim.stages.vector" not in sys.modules:
            # (programs of short decodes never import numpy)
            if growths < _MIN_BEFORE_IMPORT:
                return False
            self.walked += growths
            return self.walked >= _WALK_FIRST
        return True

    def _arrays(self) -> Any:
        """serq/sim/stages/vector.py, imported (with numpy) at the first long
        run, and the engine's cost compiled for it then."""
        from . import vector
        if self.vcost is _UNCOMPILED:
            self.vcost = (vector.compile_cost(self.engine.decl.step.cost)
                          if self.view is not None and self.kv_tracked else None)
        return vector

    def _one_pool(self, pool: Any) -> tuple[float, float, float | None, float | None, float | None]:
        """For :meth:`_plan_one`: the pool's ``used``, its cap (with ε), its
        block, the budget left a growth there re-reads the waiting head's
        header with (None when the header does not read it), and its cached
        total when it spills (else None)."""
        if not pool:
            return 0.0, 0.0, None, None, None
        pid = id(pool)
        # a pool that spills ends the run before a growth that evicts (the spill's link job
        # starts at the eviction, and a replay happens later): the test `make_room` makes
        spilled = pool.cache.total if pool.cache.spill is not None else None
        return (self.used[pid], self.ceil[pid], pool.block, self.engine.left if pid in self.recheck else None,
                spilled)

    def _one_end(self, m: int, t: float, u: float, a: float, kv0: float) -> None:
        """For :meth:`_plan_one`, whose job's state is in locals: the run is
        ``m`` iterations ending at ``t``, the job's pool has ``u`` used, its
        allocation is ``a``, the memory its cost reads ``kv0`` — the fields as
        :meth:`_plan_each` leaves them."""
        self.pos[0] = plus_ones(self.pos[0], m - 1)  # the position before the next iteration
        pool = self.pools[0]
        if pool:
            self.used[id(pool)] = u
        self.alloc[0] = a
        self.kv[0] = kv0
        run = self.run
        assert run is not None
        run.length, run.end = m, t

    # -- the last iteration, a growth, the cost ------------------------------------------------

    def _finishing(self, cur: float) -> None:
        """Plan iteration m + 1, in which a job takes its last token (a fraction
        of one, perhaps), as ``start_iteration`` would: each job's wish given
        the budget, its growth, the cost of those tokens, the admission attempt
        with the budget they leave.  It joins the run, as its last, when it
        can: the engine's ``_iter_end`` commits it with these tokens
        (``run.final`` when not all 1) and finishes the jobs."""
        run = self.run
        assert run is not None
        engine = self.engine
        assign = engine.assign
        m = run.length
        toks = []
        for job, _t in assign:
            w = job.work  # the work left after m commits: `minus(w, 1.0, m)`, its one subtraction inline
            r = w - m if w >= m and w < _TWO53 else minus(w, 1.0, m)
            toks.append(1.0 if r > 1.0 else r)
        special = toks.count(1.0) != len(toks)  # (a token that is not 1.0: a NaN is not counted either)
        left = _left_after(run.budget, toks)
        if left is None:
            return
        attempt = left > 0.0 and engine.has_waiting()
        # with a fraction of a token, the attempt reads another budget_left: a header elsewhere
        # may read it, and the run's head must still be blocked (with none, the run tried none)
        if special and (self.xheads or attempt and (run.head is None or self.drained
                                                    or not self.heads.still_blocked(run.head, run.blocking, left))):
            return
        growths: list[tuple[int, float]] = []
        again = attempt and run.head is not None and special
        pos, alloc = self.pos, self.alloc
        for i in self.idx:
            units = pos[i] + toks[i] - alloc[i]
            if units > EPS:
                grew = self._grow(i, units, growths)
                if grew is None:
                    return
                again = again or grew
        if special or (growths and self.kv_tracked):
            n = float(len(toks))
            cost = engine.cost_of(reduce(add, toks, 0.0), 0.0, n, reduce(add, self.kv, 0.0), 0.0, 0.0)
            if not (cost > 0.0 and math.isfinite(cost)):
                return
        else:
            cost = cur
        t2 = self._append(m, run.end, cost, growths, left if again else None)
        if t2 is None:
            return
        if special:
            run.final = toks
        run.length, run.end = m + 1, t2

    def _append(self, m: int, t: float, cost: float, growths: list[tuple[int, float]],
                again: float | None) -> float | None:
        """Iteration m + 1, its growths planned, joins the run: it costs
        ``cost`` from the end ``t``, must end before the next event and by the
        horizon, and is a growth event when it grew a hold or its admission
        attempt reads what grew (``again``: the budget left it reads).  Its
        end, or None when it cannot join."""
        t2 = t + cost
        if not t2 < self.limit or t2 > self.horizon:
            return None
        run = self.run
        assert run is not None
        run.add_last(cost, t, t2, (m - 1, growths, again, t) if growths or again is not None else None)
        return t2

    def _grow(self, i: int, units: float, growths: list[tuple[int, float]]) -> bool | None:
        """Job ``i``'s token needs ``units`` past its allocation: grow its hold
        by the blocks that takes, as the iteration one by one would (noted in
        ``growths``; ``kv[i]`` follows when the pool is the one the cost
        reads).  None when it cannot (a pool that must end the run, or a growth
        that would preempt or stall), else whether the grown pool is one the
        waiting head's header reads (``recheck``)."""
        pool = self.pools[i]
        if not pool:
            return None
        alloc = self.alloc
        a = alloc[i]
        need = pool.round_up(a + units) - a
        if need > 0.0:
            used = self.used
            pid = id(pool)
            if used[pid] + need > self.ceil[pid]:
                return None
            if pool.cache.spill is not None and used[pid] + pool.cache.total + need > pool.cap + EPS:
                return None  # it would evict and spill: the spill's job starts then (not in a replay)
            used[pid] += need
            alloc[i] = a + need
            growths.append((i, need))
            if pool is self.kv_pool:
                self.kv[i] = alloc[i]
            return pid in self.recheck
        return False

    @staticmethod
    def _kv_sum(kv: list[float]) -> float | None:
        """``reduce(add, kv, 0.0)`` when every value is a whole number, none
        negative, and the sum is below 2^52: every partial sum is then exact,
        and so is the sum after a value changes to another whole one (while
        it stays below 2^53); else None."""
        total = 0.0
        for x in kv:
            if not (x >= 0.0 and x % 1.0 == 0.0):  # (inf % 1.0 and a NaN fail)
                return None
            total += x
        return total if total < _TWO52 else None

    def _kv_coster(self) -> Any:
        """The cost of a decode iteration of the batch with the allocations
        ``kv`` (a list, one per job): the view filled once with what stays the
        same (the batch, its tokens, no prefill), only ``kv_decode`` set per
        call, the same values as ``StepEngine.cost_of`` gives it.  Nothing
        else uses the view while a run is planned."""
        engine = self.engine
        view = self.view
        if view is None:  # a subclass's iteration_cost may keep its view: the engine's own way
            def by_engine(kv: list[float]) -> float:
                n = float(len(kv))  # 1.0 added n times
                return engine.cost_of(n, 0.0, n, reduce(add, kv, 0.0), 0.0, 0.0)
            return by_engine
        self._fill_view()
        fn = engine.cost_fn

        def cost(kv: list[float]) -> float:
            view.kv_decode = reduce(add, kv, 0.0)
            return fn(view)  # type: ignore[no-any-return]
        return cost

    def _fill_view(self) -> None:
        """The engine's cost view, filled with what stays the same in a run
        (the batch, its tokens, no prefill): only ``kv_decode`` is set per cost."""
        engine = self.engine
        view = self.view
        assert view is not None
        n = float(len(engine.assign))
        view.srng = engine.srng
        view.tokens, view.prefilled, view.decoders = n, 0.0, n
        view.kv_prefill = 0.0
        view.residents = float(len(engine.residents))
        view.attention = 0.0

    def _one_coster(self) -> tuple[Any, Any]:
        """:meth:`_kv_coster` for a batch of one job (``reduce(add, [kv], 0.0)``
        is ``0.0 + kv``): ``(view, cost_fn)`` when the engine's view is used
        (the caller sets ``view.kv_decode = 0.0 + kv`` and calls ``cost_fn(view)``),
        ``(None, cost)`` of the allocation otherwise, ``(None, None)`` when the
        cost reads no memory."""
        if not self.kv_tracked:
            return None, None
        if self.view is None:
            kv_cost = self._kv_coster()
            return None, lambda kv0: kv_cost([kv0])
        self._fill_view()
        return self.view, self.engine.cost_fn


# -- helpers of the planner ---------------------------------------------------------------------

def _replayable(pool: Any) -> bool:
    """Whether the replay of a run evicts from ``pool`` exactly as growths one
    by one would: LRU, or ``evict by`` keys that read the entry (``size``,
    ``age``, ``last``, ``waiting``), its owner's attributes, draws (the
    eviction stream is drawn in the same order) and ``cachedin`` — nothing a
    run changes otherwise; the replay reads them at each growth's time."""
    evict = getattr(pool.decl, "evict", "lru")
    if not isinstance(evict, (list, tuple)):
        return True
    return not any(isinstance(x, ir.Probe) and x.fn != "cachedin" for e in evict for x in expr.walk(e))


#: The work left of a job in a run stays below this: a token off it is exact
#: (and so are the differences a ``serve by remaining`` compares, :func:`.waiting.run_ordered`).
_EXACT_WORK = 2.0**52


#: The most iterations one coalesced run stands for.  A longer stretch of identical decodes is
#: several runs, one after another, with the same times (each iteration's end is added to the
#: last as it is iteration by iteration): a run's ends may be listed one by one, and a decode
#: of 1e9 tokens at a cost of 1e-9 s listed a billion of them (a MemoryError), past any event
#: budget, which is read between events.
MAX_RUN = 1 << 16


def _whole_tokens(assign: list) -> int:
    """Iterations of one token per job that finish none of them (0 when a job
    is not taking one whole token now, or has an amount of work a token off
    which might round), at most :data:`MAX_RUN`."""
    low = _EXACT_WORK  # the least work: ceil(w − ε) − 1 grows with w (each step rounds monotonically)
    for job, tk in assign:
        w = job.work
        if tk != 1.0 or not w < _EXACT_WORK:
            return 0
        if w < low:
            low = w
    if not assign:
        return MAX_RUN
    c = math.ceil(low - EPS) - 1  # whole tokens that do not finish it
    return c if c < MAX_RUN else MAX_RUN


def _left_after(budget: float, toks: list[float]) -> float | None:
    """The budget left once each job takes its tokens in turn (§4.3 c/d:
    tokens = min(wish, left), stop when none are left), or None when a job
    would get less than it wishes."""
    left = budget
    last = len(toks) - 1
    for j, tok in enumerate(toks):
        if not tok < left and tok != left:
            return None
        left = left - tok
        if left <= 0.0 and j < last:
            return None
    return left


def _trim(run: DecodeRun, now: float) -> None:
    """Shorten ``run`` until its end is exactly ``now + (end − now)``, the time
    the engine's timer reaches (only ever when the clock is close to 0)."""
    m, t = run.length, run.end
    if not (m > 1 and now + (t - now) != t):
        return
    segs, events = run.segs, run.events
    while m > 1 and now + (t - now) != t:
        seg = segs[-1]
        seg[1] -= 1
        if seg[1]:
            seg[3] = fold_same(seg[0], seg[1], seg[2])
        else:
            segs.pop()
        run.final = None  # the last iteration, if it was the finishing one, is gone
        m -= 1
        if events and events[-1][0] == m - 1:
            events.pop()
        t = segs[-1][3] if segs else run.first
    run.length, run.end = m, t


def _fold_free(segs: list[list], t: float, cur: float, free: int, limit: float,
               horizon: float) -> tuple[int, float, bool]:
    """Add ``free`` iterations of cost ``cur`` without a growth after the end
    ``t`` in one fold, or as many as end before ``limit`` and by ``horizon``:
    ``(how many, the last end, whether cut short)``."""
    t_end = fold(repeat(cur, free), t) if free < _SHORT else fold_same(cur, free, t)  # the last decides
    if t_end < limit and not t_end > horizon:
        add_iters(segs, cur, free, t, t_end)
        return free, t_end, False
    ts = list(accumulate(repeat(cur, free), add, initial=t))
    c = min(bisect_left(ts, limit, 1), bisect_right(ts, horizon, 1)) - 1
    if c > 0:
        add_iters(segs, cur, c, t, ts[c])
        return c, ts[c], True
    return 0, t, True


def _exact(p: float, cap: int) -> float:
    """The steps ``d`` for which ``p + d`` is ``p`` plus 1.0 ``d`` times in
    turn, whatever ``d`` below this: all of a run's (``cap`` iterations) when
    every step is exact, else those that stay in ``p``'s binade."""
    return math.inf if exact_steps(p, cap) else exact_below(p)


def _period(p: float, a: float, g: int, b: float | None, cap: int, exact: float) -> int:
    """The block ``b`` as a whole number of iterations when one job's growths
    from iteration ``g`` on (position ``p`` before iteration 2, allocation
    ``a``) come every ``b`` iterations and take one block each, as
    ``_plan_one``'s search and round-up would find them one by one; 0 when
    that is not sure.  The conditions are those of
    :func:`.vector.growths` for its one-block case: every ``p + d`` up to the
    run's cap exact (one addition for ``d`` below ``exact``), ``b`` a power of
    two, ``a`` a whole number of blocks and each growth's units past the
    allocation the same float, between ``10^-6`` and one block
    (tests/sim/stages/test_coalesce_runs.py holds the two ways equal)."""
    if g > cap or b is None or exact < cap + 2 or not 1.0 <= b < 2.0**31:
        return 0
    bi = int(b)
    if bi != b or bi & (bi - 1) or a % b != 0.0:
        return 0
    units = ((p + float(g - 2)) + 1.0) - a
    if not units > EPS or ((p + float(g + bi - 3)) + 1.0) - (a + b) > EPS:
        return 0  # (no growth at g, or one between two the period predicts)
    f = units / b
    if not (1e-6 <= f <= 1.0 and a / b + ((cap - g) // bi + 1) < 2.0**30):
        return 0
    return bi


def _first_growth(p: float, a: float, frm: int, last: int, exact: float) -> int:
    """The first iteration ``it`` in ``frm … last`` (iteration 2 is the first
    planned; the position before its token is ``p`` plus 1.0 ``it - 2`` times,
    one addition for fewer than ``exact`` steps) whose token needs memory past
    ``a``, as ``_plan_each`` tests it; ``last + 1`` if none.  The test is
    monotone in ``it``: a guess, then steps to the exact edge."""
    guess = a - p + 2.0  # (the first iteration past a whole allocation: no step to take)
    it = frm if not guess > frm else (last + 1 if guess > last + 1 else int(guess))
    while it > frm and ((p + (it - 3)) if it - 3 < exact else plus_ones(p, it - 3)) + 1.0 - a > EPS:
        it -= 1
    while it <= last and not ((p + (it - 2)) if it - 2 < exact else plus_ones(p, it - 2)) + 1.0 - a > EPS:
        it += 1
    return it

"""Coalesced decode runs of the step engine.

Most iterations of a loaded engine are alike: the same residents, each
decoding one token.  When an iteration is such, :func:`run_length` works out
how many like it can follow back to back before anything else could happen,
and the engine schedules one event for all of them; at that event
:func:`replay` commits and plans each of them in turn with the same
floating-point operations in the same order as one by one, so the report is
the same.  The functions take the engine as ``self``: they are its methods,
kept apart because they are an optimisation of §4.3, not a rule of it.

The rules (docs/simulator.md, "Coalesced decode runs"): a run goes on while
each next iteration would be the same pure-decode batch, end before the next
event in the queue and by the horizon, finish no job, and grow only blocks
that fit without preempting; waiting requests do not stop it when none of
them can be admitted before the run ends (:mod:`.waiting`).
"""

from __future__ import annotations

import math
import sys
from math import fmod, frexp, ulp
from bisect import bisect_left, bisect_right
from heapq import heapify, heappop, heappush
from functools import reduce
from itertools import accumulate, islice, repeat
from operator import add, sub
from typing import TYPE_CHECKING, Any

from ..cache import EPS
from ..stats import _SHORT, fold, fold_same

if TYPE_CHECKING:
    from .base import Job
    from .step import StepEngine

_NORMAL = sys.float_info.min  # the smallest positive normal float



#: A growth event of a planned run: the iteration's index, the growths
#: (job index, units) it makes, the budget left to re-read the waiting
#: head's header with (None when nothing it reads moved), and the time it
#: starts.
RunEvent = tuple[int, list[tuple[int, float]], "float | None", float]
#: The plan of a run: the end of its first iteration, iterations 2 … m as
#: runs ``[cost, how many in a row, the end before the first, the end of the
#: last]`` (each end the previous plus the cost, :func:`_add_iters`), and the
#: growth events (the index of the iteration's start among the ends, the
#: growths, the budget left to re-read the head with, the start's time).
Plan = tuple[float, list[list], list[tuple]]
#: A planned run: its length, the end of its last iteration, the plan, and
#: the cost of the last iteration.
PlanResult = tuple[int, float, Plan, float]


def run_length(self: "StepEngine", now: float, cost: float) -> tuple[int, float]:
    """How many decode iterations of this batch, this one first, can run
    back to back before anything else could happen: every one ends before
    the next event and by the horizon; none finishes a job, lets a waiting
    request in, or needs a block that does not fit (a growth that fits is
    planned here and replayed in place: it evicts cache and changes
    ``kv_decode``, hence the cost).  The ends are added one cost at a time
    from ``now``, as the iterations one by one would reach them.  Leaves the
    plan in ``self._plan`` (:data:`Plan`): the end of iteration 1, runs of
    iterations 2 … m of one cost, and for those that grow, ``(index of its
    start among the ends, growths, whether the waiting head's header is
    evaluated again, the start's time)``."""
    t = now + cost
    sim = self.sim
    limit = self.env.peek()
    horizon = sim.horizon
    if not t < limit or t > horizon or sim.dirty_ps:
        return 1, t
    for other in sim.engines:  # another engine that could start at a settle inside the run
        if other is not self and not other.iterating and other.has_work():
            return 1, t
    assign = self.assign
    cap = 1 << 30
    for job, tk in assign:
        if tk != 1.0:
            return 1, t
        c = math.ceil(job.work - EPS) - 1  # whole tokens that do not finish it
        if c < cap:
            cap = c
    if cap < 1:
        return 1, t  # the first iteration finishes a job
    stop: frozenset[int] = self._state_pools
    recheck: frozenset[int] = frozenset()
    self._head = None
    self._final = None
    self._xheads = False
    if any(p.put_queue for p in sim.all_pools):
        terms = self._heads.terms()  # type: ignore[union-attr]
        if terms is None:
            return 1, t
        more, recheck, self._head, self._blocking, self._xheads = terms
        stop = stop | more
    memory = self.memory
    kv_tracked = self._kv_needed
    pools: list[Any] = []  # the pool a job grows; False where a growth must end the run
    pos: list[float] = []
    alloc: list[float] = []
    idx: list[int] = []  # the jobs that grow a hold
    tracked = memory is not None and kv_tracked
    kv = ([job.session.held_in(memory) for job, _t in assign] if memory is not None and tracked
          else [0.0] * len(assign))
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
            # a growth in the run must not need keys that read the clock, and
            # the memory a cost reads must be this hold's allocation alone
            growable = pool.cache.keys is None and id(pool) not in stop and (
                not tracked or pool is not memory or kv[i] == a)
            pools.append(pool if growable else False)
            pos.append(req.pos[k])
            alloc.append(a)
    used = {id(p): p.used for p in pools if p}
    plan: Plan
    if cap <= 1:
        m, cur, plan = 1, cost, (t, [], [])
    elif len(assign) == 1 and idx and _exact_steps(pos[0], cap):
        m, t, plan, cur = _plan_one(self, pools, pos, alloc, kv, used, recheck, t, cost, cap, limit, horizon)
    elif all(_exact_steps(pos[i], cap) for i in idx):
        m, t, plan, cur = _plan_by_growths(self, idx, pools, pos, alloc, kv, used, recheck, t, cost, cap, limit,
                                           horizon)
    else:
        m, t, plan, cur = _plan_each(self, idx, pools, pos, alloc, kv, used, recheck, t, cost, cap, limit, horizon)
    first, segs, events = plan
    if m == cap and self._default_plan:  # the iteration that finishes a job can end the run
        t2 = _finishing(self, assign, m, idx, pools, pos, alloc, kv, used, recheck, t, cur, limit, horizon, plan)
        if t2 is not None:
            t = t2
            m += 1
    while m > 1 and now + (t - now) != t:  # the timeout's time must be exactly the m-th end
        seg = segs[-1]  # (only ever when the clock is close to 0)
        seg[1] -= 1
        if seg[1]:
            seg[3] = fold_same(seg[0], seg[1], seg[2])
        else:
            segs.pop()
        self._final = None  # the last iteration, if it was the finishing one, is gone
        m -= 1
        if events and events[-1][0] == m - 1:
            events.pop()
        t = segs[-1][3] if segs else first
    self._plan = plan
    return m, t


def _plan_each(self: "StepEngine", idx: list[int], pools: list[Any], pos: list[float], alloc: list[float],
               kv: list[float], used: dict[int, float], recheck: frozenset[int], t: float, cost: float,
               cap: int, limit: float, horizon: float) -> PlanResult:
    """Plan iterations 2, 3, … one at a time (positions that a token more
    could round): the jobs that need a block grow, in serving order."""
    kv_tracked = self._kv_needed
    kv_pool = self.memory if kv_tracked else None  # the pool whose growths change the cost
    first = t
    segs: list[list] = []
    events: list[tuple] = []
    kv_cost: Any = _kv_coster(self) if kv_tracked else None
    cur = cost
    m = 1
    while m < cap:
        growths: list[tuple[int, float]] = []
        again = False
        ok = True
        for i in idx:
            units = pos[i] + 1.0 - alloc[i]
            if units > EPS:
                grew = _grow(i, units, pools, alloc, kv, used, recheck, growths, kv_pool)
                if grew is None:
                    ok = False  # it would preempt or stall: the run stops before
                    break
                if grew:
                    again = True
            pos[i] += 1.0
        if not ok:
            break
        if growths and kv_tracked:
            cur = kv_cost(kv)
            if not (cur > 0.0 and math.isfinite(cur)):
                break
        t2 = t + cur
        if not t2 < limit or t2 > horizon:
            break
        if growths or again:
            events.append((m - 1, growths, self.left if again else None, t))
        _add_iters(segs, cur, 1, t, t2)
        t = t2
        m += 1
    return m, t, (first, segs, events), cur


def _add_iters(segs: list[list], cur: float, n: int, t: float, t_end: float) -> None:
    """``n`` more iterations of cost ``cur`` after the end ``t``, the last
    ending at ``t_end`` (``t`` plus ``cur``, ``n`` times in turn)."""
    if segs and segs[-1][0] == cur:  # (costs are > 0: equal is the same float; segs[-1][3] is t)
        seg = segs[-1]
        seg[1] += n
        seg[3] = t_end
    else:
        segs.append([cur, n, t, t_end])


def _minus(w: float, tokens: float, k: int) -> float:
    """``w`` less ``tokens`` ``k`` times in turn (one subtraction when every
    step is exact: whole tokens off a float of at most 53 bits that stays ≥ 0)."""
    if tokens == 1.0 and w >= k and w < 9007199254740992.0:  # (a finite w ≥ 1 below 2**53 is
        return w - k  # at most 53 bits: its numerator as_integer_ratio() is below 2**53)
    return reduce(sub, repeat(tokens, k), w)


def _plus_ones(p: float, k: int) -> float:
    """``p + 1.0`` ``k`` times in turn (one addition when every step is exact)."""
    if _exact_steps(p, k):
        return p + k
    return reduce(add, repeat(1.0, k), p)


def _exact_steps(p: float, cap: int) -> bool:
    """Whether ``p + 1.0`` repeated up to ``cap + 2`` times is exact (every
    ``p + d`` a float), so the position at any iteration is one addition."""
    if not (p >= 0.0 and p < 2.0 ** 51):
        return False
    num, den = p.as_integer_ratio()
    return num + (cap + 2) * den < 1 << 53


def _grow(i: int, units: float, pools: list[Any], alloc: list[float], kv: list[float], used: dict[int, float],
          recheck: frozenset[int], growths: list[tuple[int, float]], kv_pool: Any) -> bool | None:
    """Job ``i``'s token needs ``units`` past its allocation: grow its hold by
    the blocks that takes, as the iteration one by one would (noted in
    ``growths``; ``kv[i]`` follows when ``kv_pool`` is the pool the cost
    reads).  None when it cannot (a pool that must end the run, or a growth
    that would preempt or stall), else whether the grown pool is one the
    waiting head's header reads (``recheck``)."""
    pool = pools[i]
    if not pool:
        return None
    a = alloc[i]
    need = pool.round_up(a + units) - a
    if need > 0.0:
        pid = id(pool)
        if used[pid] + need > pool.cap + EPS:
            return None
        used[pid] += need
        alloc[i] = a + need
        growths.append((i, need))
        if pool is kv_pool:
            kv[i] = alloc[i]
        return pid in recheck
    return False


def _fold_free(segs: list[list], t: float, cur: float, free: int, limit: float,
               horizon: float) -> tuple[int, float, bool]:
    """Add ``free`` iterations of cost ``cur`` without a growth after the end
    ``t`` in one fold, or as many as end before ``limit`` and by ``horizon``:
    ``(how many, the last end, whether cut short)``."""
    t_end = fold(repeat(cur, free), t) if free < _SHORT else fold_same(cur, free, t)  # the last decides
    if t_end < limit and not t_end > horizon:
        _add_iters(segs, cur, free, t, t_end)
        return free, t_end, False
    ts = list(accumulate(repeat(cur, free), add, initial=t))
    c = min(bisect_left(ts, limit, 1), bisect_right(ts, horizon, 1)) - 1
    if c > 0:
        _add_iters(segs, cur, c, t, ts[c])
        return c, ts[c], True
    return 0, t, True


def _first_growth(p: float, a: float, frm: int, last: int) -> int:
    """The first iteration ``it`` in ``frm … last`` (iteration 2 is the first
    planned; the position before its token is ``p + (it - 2)``) whose token
    needs memory past ``a``, as ``_plan_each`` tests it; ``last + 1`` if none.
    The test is monotone in ``it``: a guess, then steps to the exact edge."""
    guess = a - p - 1.0 + 2.0
    it = frm if not guess > frm else (last + 1 if guess > last + 1 else int(guess))
    while it > frm and (p + (it - 3)) + 1.0 - a > EPS:
        it -= 1
    while it <= last and not (p + (it - 2)) + 1.0 - a > EPS:
        it += 1
    return it


def _plan_by_growths(self: "StepEngine", idx: list[int], pools: list[Any], pos: list[float],
                     alloc: list[float], kv: list[float], used: dict[int, float], recheck: frozenset[int],
                     t: float, cost: float, cap: int, limit: float, horizon: float) -> PlanResult:
    """``_plan_each`` when positions step exactly: from one growth to the next,
    the iterations between (same cost) are added in one fold and cut at the
    first end that is not before the next event or is past the horizon."""
    kv_tracked = self._kv_needed
    kv_pool = self.memory if kv_tracked else None  # the pool whose growths change the cost
    first = t
    segs: list[list] = []
    events: list[tuple] = []
    # the next growth of each job, (iteration, its index in idx): popped in serving order
    nxt = [(_first_growth(pos[i], alloc[i], 2, cap), n) for n, i in enumerate(idx)]
    heapify(nxt)
    p0 = [pos[i] for i in idx]
    kv_cost: Any = _kv_coster(self) if kv_tracked else None
    cur = cost
    m = 1
    while m < cap:
        g = nxt[0][0] if nxt else cap + 1
        free = (g if g <= cap else cap + 1) - (m + 1)  # iterations without a growth
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
        ok = True
        while nxt and nxt[0][0] == g:
            n = heappop(nxt)[1]
            i = idx[n]
            grew = _grow(i, (p0[n] + (g - 2)) + 1.0 - alloc[i], pools, alloc, kv, used, recheck, growths, kv_pool)
            if grew is None:
                ok = False  # it would preempt or stall: the run stops before
                break
            if grew:
                again = True
            nx = _first_growth(p0[n], alloc[i], g + 1, cap)
            if nx <= cap:
                heappush(nxt, (nx, n))
        if not ok:
            break
        if growths and kv_tracked:
            cur = kv_cost(kv)
            if not (cur > 0.0 and math.isfinite(cur)):
                break
        t2 = t + cur
        if not t2 < limit or t2 > horizon:
            break
        if growths or again:
            events.append((m - 1, growths, self.left if again else None, t))
        _add_iters(segs, cur, 1, t, t2)
        t = t2
        m += 1
    for n, i in enumerate(idx):  # the positions before the next iteration, as `_plan_each` leaves them
        pos[i] = p0[n] + (m - 1)
    return m, t, (first, segs, events), cur


def _plan_one(self: "StepEngine", pools: list[Any], pos: list[float], alloc: list[float], kv: list[float],
              used: dict[int, float], recheck: frozenset[int], t: float, cost: float, cap: int, limit: float,
              horizon: float) -> PlanResult:
    """``_plan_by_growths`` for a batch of one job that holds memory (the
    usual run): no heap, the job's state in locals, ``kv_decode`` the fold of
    one value (``0.0 + kv``); the same operations in the same order."""
    memory = self.memory
    kv_tracked = self._kv_needed
    first = t
    segs: list[list] = []
    events: list[tuple] = []
    pool = pools[0]
    p0 = pos[0]
    a = alloc[0]
    kv0 = kv[0]
    view = self._view
    fn = self.cost_fn
    kv_cost: Any = None
    if kv_tracked:
        if view is None:
            kv_cost = _kv_coster(self)
        else:
            _kv_coster(self)  # fills the view once
    grows_kv = kv_tracked and pool is memory
    if pool:
        pid = id(pool)
        u = used[pid]
        pcap = pool.cap + EPS
        b = pool.block
        rechecked = pid in recheck
    cur = cost
    m = 1
    g = _first_growth(p0, a, 2, cap)
    # Iterations m + 1 … m + n all cost `cur`: the first may be a growth (its event `ev`), the
    # others need no memory. They are added in one fold (`_fold_free` inline), cut at the first
    # end that is not before the next event or is past the horizon (then the run ends there).
    n = (g if g <= cap else cap + 1) - 2
    ev: tuple | None = None
    left = self.left
    while True:
        if n > 0:
            t_end = fold(repeat(cur, n), t) if n < _SHORT else fold_same(cur, n, t)  # the last decides
            if not (t_end < limit and not t_end > horizon):
                ts = list(accumulate(repeat(cur, n), add, initial=t))
                n = min(bisect_left(ts, limit, 1), bisect_right(ts, horizon, 1)) - 1
                if n > 0:
                    if ev is not None:
                        events.append(ev)
                    _add_iters(segs, cur, n, t, ts[n])
                    m += n
                    t = ts[n]
                break
            if ev is not None:
                events.append(ev)
            if segs and segs[-1][0] == cur:  # _add_iters(segs, cur, n, t, t_end)
                seg = segs[-1]
                seg[1] += n
                seg[3] = t_end
            else:
                segs.append([cur, n, t, t_end])
            m += n
            t = t_end
        if m >= cap:
            break
        # iteration g = m + 1: the job's token needs memory
        if not pool:
            break
        x = a + ((p0 + (g - 2)) + 1.0 - a)  # pool.round_up(x) inline
        need = (math.ceil(x / b - EPS) * b if b is not None and x != math.inf else x) - a
        grew = need > 0.0
        if grew:
            if u + need > pcap:
                break  # it would preempt or stall: the run stops before
            u += need
            a = a + need
            if grows_kv:
                kv0 = a
        # the job's next growth: _first_growth(p0, a, g + 1, cap) inline
        frm = g + 1
        guess = a - p0 - 1.0 + 2.0
        nx = frm if not guess > frm else (cap + 1 if guess > cap + 1 else int(guess))
        while nx > frm and (p0 + (nx - 3)) + 1.0 - a > EPS:
            nx -= 1
        while nx <= cap and not (p0 + (nx - 2)) + 1.0 - a > EPS:
            nx += 1
        if grew and kv_tracked:
            if kv_cost is None:
                view.kv_decode = 0.0 + kv0  # type: ignore[union-attr]  # reduce(add, [kv0], 0.0)
                cur = fn(view)
            else:
                cur = kv_cost([kv0])
            if not (cur > 0.0 and math.isfinite(cur)):
                break
        ev = (m - 1, [(0, need)], left if rechecked else None, t) if grew else None
        n = (nx if nx <= cap else cap + 1) - g  # iteration g and those up to the next growth
        g = nx
    pos[0] = p0 + (m - 1)  # the position before the next iteration, as `_plan_each` leaves it
    if pool:
        used[pid] = u
    alloc[0] = a
    kv[0] = kv0
    return m, t, (first, segs, events), cur


def _finishing(self: "StepEngine", assign: list, m: int, idx: list[int], pools: list[Any], pos: list[float],
               alloc: list[float], kv: list[float], used: dict[int, float], recheck: frozenset[int], t: float,
               cur: float, limit: float, horizon: float, plan: tuple) -> float | None:
    """Plan iteration m + 1, in which a job takes its last token (a fraction
    of one, perhaps), as start_iteration would: each job's wish given the
    budget, its growth, the cost of those tokens, the admission attempt with
    the budget they leave.  Its end, or None when it cannot join the run.
    It is the run's last: ``_iter_end`` commits it with these tokens and
    finishes the jobs."""
    toks = []
    for job, _t in assign:
        r = _minus(job.work, 1.0, m)  # the work left after m commits
        toks.append(1.0 if r > 1.0 else r)
    special = any(x != 1.0 for x in toks)
    left = self._budget_now
    last = len(toks) - 1
    for j, tok in enumerate(toks):  # §4.3 c/d: tokens = min(wish, left); stop when none are left
        if not tok < left and tok != left:
            return None
        left = left - tok
        if left <= 0.0 and j < last:
            return None
    head = self._head
    attempt = left > 0.0 and self._admittable()
    if special:
        if attempt and head is None:
            return None  # the run tried no admission (no budget left) and this iteration would
        if self._xheads:
            return None  # a header elsewhere may read budget_left, which these wishes change
        if attempt and not self._heads.still_blocked(head, self._blocking, left):  # type: ignore[union-attr]
            return None
    growths: list[tuple[int, float]] = []
    again = attempt and head is not None and special
    kv_tracked = self._kv_needed
    kv_pool = self.memory if kv_tracked else None
    for i in idx:
        units = pos[i] + toks[i] - alloc[i]
        if units > EPS:
            grew = _grow(i, units, pools, alloc, kv, used, recheck, growths, kv_pool)
            if grew is None:
                return None
            if grew:
                again = True
    if special or (growths and kv_tracked):
        n = float(len(toks))
        cost = self._cost(reduce(add, toks, 0.0), 0.0, n, reduce(add, kv, 0.0), 0.0, 0.0)
        if not (cost > 0.0 and math.isfinite(cost)):
            return None
    else:
        cost = cur
    t2 = t + cost
    if not t2 < limit or t2 > horizon:
        return None
    _first, segs, events = plan
    if growths or again:
        events.append((m - 1, growths, left if again else None, t))
    _add_iters(segs, cost, 1, t, t2)
    if special:
        self._final = toks
    return t2


def _kv_coster(self: "StepEngine") -> Any:
    """``decode_cost`` for the iterations of one planned run: the engine's own
    view filled once with what stays the same (the batch, its tokens, no
    prefill), only ``kv_decode`` set per call, the same values as ``_cost``
    gives it.  Nothing else uses the view while a run is planned."""
    view = self._view
    if view is None:
        return lambda kv: decode_cost(self, kv)
    n = float(len(self.assign))
    view.srng = self.srng
    view.tokens, view.prefilled, view.decoders = n, 0.0, n
    view.kv_prefill = 0.0
    view.residents = float(len(self.residents))
    view.attention = 0.0
    fn = self.cost_fn

    def cost(kv: list[float]) -> float:
        view.kv_decode = reduce(add, kv, 0.0)
        return fn(view)  # type: ignore[no-any-return]
    return cost


def decode_cost(self: "StepEngine", kv: list[float]) -> float:
    """The cost of a decode iteration of the same batch with other allocations
    (as ``_launch`` computes it: its sums in its order)."""
    n = float(len(kv))  # 1.0 added n times
    return self._cost(n, 0.0, n, reduce(add, kv, 0.0), 0.0, 0.0)


def _fold_runs(runs: list[list], acc: float) -> float:
    """``acc`` plus each ``x`` of the runs ``[x, count]``, ``count`` times in turn."""
    for r in runs:  # ([x, count, …]: the plan's runs of costs too)
        x = r[0]
        c = r[1]
        acc = fold(repeat(x, c), acc) if c < _SHORT else fold_same(x, c, acc)
    return acc


def _fold_runs2(runs: list[list], a: float, b: float) -> tuple[float, float]:
    """``_fold_runs`` of the same runs into two sums, in one loop."""
    for r in runs:
        x = r[0]
        c = r[1]
        if c < _SHORT:
            a = fold(repeat(x, c), a)
            b = fold(repeat(x, c), b)
        else:
            a = fold_same(x, c, a)
            b = fold_same(x, c, b)
    return a, b


def _length_runs(segs: list[list]) -> list[list]:
    """The lengths (end minus the end before) of a planned run's iterations
    2 … m as runs ``[length, count]``, in order.  The iterations of one run of
    ``segs`` (cost ``c``, from the end ``t0`` to ``t1``) have one length when
    ``t0`` and ``t1`` lie in one binade ``[2^p, 2^(p+1))`` and ``c`` is not
    halfway between two multiples of its ulp ``u``: each end is ``fl(e + c)``
    with ``e`` a multiple of ``u``, which is ``e`` plus the multiple of ``u``
    nearest ``c`` (the same for every ``e``), and the difference of two floats
    of one binade is exact (:func:`serq.sim.stats.fold_same`).  Else the ends
    are added again one by one and each length is computed."""
    out: list[list] = []
    for c, n, t0, t1 in segs:
        if n > 1:
            u = ulp(t0)
            if not (t0 >= _NORMAL and frexp(t0)[1] == frexp(t1)[1] and fmod(c, u) * 2.0 != u):
                ends = list(accumulate(repeat(c, n), add, initial=t0))
                out.extend([x, 1] for x in map(sub, islice(ends, 1, None), ends))
                continue
        out.append([(t0 + c) - t0, n])
    return out


def replay(self: "StepEngine", assign: list[tuple["Job", float]], m: int) -> None:
    """Iterations 1 … m−1 of a coalesced run, exactly as one by one: commit
    each at its end (a token per job, as ``_iter_end`` and
    ``Session.decode_token`` do), then plan the next at that time (its
    growths, a token of position per job) and account for it (as
    ``_account``).  The same float operations in the same order give the same
    floats; what repeats is folded in C (``accumulate``, ``reduce``)."""
    sim = self.sim
    first, segs, events = self._plan  # the first iteration's end; runs of one cost
    k = m - 1  # commits replayed here; the m-th is `_iter_end`'s
    nf = float(len(assign))
    stats = sim.stats_on
    c, n, t0, t_last = segs[-1]
    before_last = t0 if n == 1 else fold_same(c, n - 1, t0)  # the end of iteration k
    # -- commits: a token per job per iteration ------------------------------------------------
    itl = self.itl
    for job, tokens in assign:
        job.work = _minus(job.work, tokens, k)
        s = job.session
        if s.first_tok is None:
            s.first_tok = first
            s.n_after += k - 1
        else:
            if stats:
                itl.add(first - s.last_tok)
            s.n_after += k
        s.last_tok = before_last
    final = self._final
    for i, (job, _tokens) in enumerate(assign):
        req = job.hold
        if req is not None:
            if final is None:
                req.pos[job.k] = _plus_ones(req.pos[job.k], k)
            else:  # the last iteration's tokens may be a fraction
                req.pos[job.k] = _plus_ones(req.pos[job.k], k - 1) + final[i]
    # the iterations' lengths, k of them, as [length, how many in a row]: from the second commit
    # on, every job's gap
    lengths = _length_runs(segs)
    lo: float | None = None  # the smallest of the first k − 1, when taken
    if stats and k > 1:
        last = lengths[-1]
        gaps = lengths[:-1]
        if last[1] > 1:
            gaps.append([last[0], last[1] - 1])
        lo = min([x for x, _c in gaps])
        itl.add_runs(gaps, len(assign), lo)
    # -- growths of iterations 2 … m at their starts ---------------------------------------------
    head = self._head
    if len(assign) == 1 and head is None:  # one job: its hold and pool looked up once
        job = assign[0][0]
        req = job.hold
        if req is not None:
            kk = job.k
            ra = req.alloc  # type: ignore[union-attr]
            a = ra[kk]
            needs: list[float] = []
            times: list[float] = []
            for _j, growths, _again, start in events:  # (no head: no admission attempt is evaluated)
                if growths:
                    need = growths[0][1]
                    needs.append(need)
                    times.append(start)
                    a = a + need
            ra[kk] = a
            req.pools[kk].allocate_run(needs, times)  # type: ignore[union-attr]
        events = []
    # growths in one pool, in turn, go to Pool.allocate_run together, up to an admission
    # attempt that reads them or a growth in another pool
    pending: Any = None
    needs = []
    times = []
    for _j, growths, again, end in events:
        if growths:
            for i, need in growths:
                job = assign[i][0]
                req = job.hold
                kk = job.k
                pool = req.pools[kk]  # type: ignore[union-attr]
                if pool is not pending:
                    if needs:
                        pending.allocate_run(needs, times)
                        needs = []
                        times = []
                    pending = pool
                needs.append(need)
                times.append(end)
                req.alloc[kk] = req.alloc[kk] + need  # type: ignore[union-attr]
        if again is not None:  # the admission attempt of that iteration reads what changed
            if needs:
                pending.allocate_run(needs, times)
                needs = []
                times = []
            self.admitting_left = again  # (its budget_left)
            try:
                head.spec.amounts(head.session)
            finally:
                self.admitting_left = None
    if needs:
        pending.allocate_run(needs, times)
    # -- statistics of iterations 2 … m (as `_account`) ------------------------------------------
    # span = min(end, horizon) − max(start, warm-up), added when positive; a run
    # ends by the horizon, and one that starts after the warm-up spans its lengths
    if first >= sim.warmup:
        spans = lengths  # as runs
        smin = min(lo, lengths[-1][0]) if lo is not None else min([x for x, _c in spans])
    elif t_last <= sim.warmup:  # every span ≤ end − warm-up ≤ 0: none is added
        spans = []
        smin = 0.0
    else:
        ends = [first]  # ends[j]: the end of iteration j + 1
        for c, n, t0, _t1 in segs:
            ends.extend(islice(accumulate(repeat(c, n), add, initial=t0), 1, None))
        spans = [[x, 1] for x in map(sub, map(min, ends[1:], repeat(sim.horizon)),
                                     map(max, ends[:k], repeat(sim.warmup)))]
        smin = min([x for x, _c in spans]) if spans else 0.0
    if spans and not smin > 0.0:
        spans = [r for r in spans if r[0] > 0.0]
    if spans:
        if nf == 1.0:  # (x * 1.0 is x for every float: one decoder adds the spans themselves)
            self.t_decode_only, self.t_decoders = _fold_runs2(spans, self.t_decode_only, self.t_decoders)
        else:
            self.t_decode_only = _fold_runs(spans, self.t_decode_only)
            self.t_decoders = _fold_runs([[nf * x, c] for x, c in spans], self.t_decoders)
    if stats:
        self.dec_iters += k
        d = self.dec_sum  # whole numbers: one addition is exact below 2**53
        self.dec_sum = d + k * nf if d.is_integer() and d + k * nf < 2.0 ** 52 else reduce(add, repeat(nf, k), d)
        self.dec_cost = _fold_runs(segs, self.dec_cost)
    self.iterations += k
    sim.events += k
    if final is not None:  # `_iter_end` commits the last iteration with its own tokens
        assign[:] = [(job, x) for (job, _t), x in zip(assign, final)]
        self._final = None
    self._plan = (0.0, [], [])
    self._head = None

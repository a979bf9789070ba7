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
them can be admitted before the run ends (:func:`_waiting`).
"""

from __future__ import annotations

import dataclasses
import math
from functools import reduce
from itertools import accumulate, repeat
from operator import add, sub
from typing import TYPE_CHECKING, Any

from ... import expr, ir

if TYPE_CHECKING:
    from .base import Job
    from .step import StepEngine

EPS = 1e-9

#: Context variables a `serve by` key may read and still order a run's
#: residents the same way at every iteration of it.
_RUN_CONSTANT_CTX = frozenset({"decoding", "admission", "residents", "decoders"})


# -- what an expression reads --------------------------------------------------------------

def reads(e: ir.Expr, sim: Any, engine: "StepEngine") -> frozenset[int] | None:
    """What a header (or `queue by` key) expression reads that a decode run of
    ``engine`` can change: the ids of the pools whose ``used``/``free``/
    ``cachedin`` it reads (a run grows pools and evicts their cache), or None
    when it reads something that changes at every iteration or has an effect
    (a draw, the clock or any context variable, a stage's ``work``, another
    stage's ``budget_left``).  Session attributes, constants, ``queued`` and
    ``holders`` (queues and holders do not change inside a run), a stage's
    ``queue`` and ``busy``, and ``budget_left`` of the engine itself (its
    budget is the same at every iteration of a run, and every resident wishes
    one token) stay the same."""
    out: set[int] = set()
    for x in expr.walk(e):
        if isinstance(x, (ir.Draw, ir.Ctx)):
            return None
        if isinstance(x, ir.Probe):
            t = x.target
            if isinstance(t, ir.PoolRef):
                if x.fn in ("used", "free", "cachedin"):
                    out.update(id(p) for p in sim.pools[t.pool])
            elif x.fn == "work":
                return None
            elif x.fn == "budget_left" and any(st is not engine for st in sim.stages[t.stage]):
                return None
    return frozenset(out)


def state_pools(e: ir.Expr, sim: Any, memory: Any) -> set[int]:
    """For ``budget``, ``chunk`` and ``cost`` (already known steady): the pools
    whose state they read — a growth in one ends a run before it."""
    out: set[int] = set()
    for x in expr.walk(e):
        if isinstance(x, ir.Probe) and isinstance(x.target, ir.PoolRef) and x.fn in ("used", "free", "cachedin"):
            out.update(id(p) for p in sim.pools[x.target.pool])
        elif isinstance(x, ir.Ctx) and x.name in ("kv_decode", "kv_prefill") and memory is not None:
            out.add(id(memory))
    return out


def constant_keys(keys: Any) -> bool:
    """`serve by` keys that order a run's residents the same way at each of
    its iterations: no draw, no probe, no clock, no ``remaining`` nor held memory."""
    for k in keys:
        for x in expr.walk(k):
            if isinstance(x, (ir.Draw, ir.Probe)):
                return False
            if isinstance(x, ir.Ctx) and x.name not in _RUN_CONSTANT_CTX:
                return False
    return True


def _holds(x: Any, out: dict[int, ir.Hold]) -> None:
    """Every ``hold`` statement in ``x`` (a block, a statement), by id."""
    if isinstance(x, tuple):
        for y in x:
            _holds(y, out)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        if isinstance(x, ir.Hold):
            out[x.id] = x
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            if isinstance(v, tuple) or (dataclasses.is_dataclass(v) and not isinstance(v, ir.HoldPool)):
                _holds(v, out)


def header(self: "StepEngine", spec: Any) -> list[frozenset[int] | None]:
    """Per pool of a hold, what its units and reserve read (:func:`reads`)."""
    cache = self._headers
    found = cache.get(spec.id)
    if found is None:
        if not self._hold_ir:
            _holds(self.sim.program.session, self._hold_ir)
        st = self._hold_ir.get(spec.id)
        if st is None:
            found = [None]
        else:
            found = []
            for hp in st.pools:
                r = reads(hp.units, self.sim, self)
                if r is not None and hp.reserve is not None:
                    r2 = reads(hp.reserve, self.sim, self)
                    r = None if r2 is None else r | r2
                found.append(r)
        cache[spec.id] = found
    return found


def _head(self: "StepEngine", pool: Any) -> Any:
    """The request ``pool.select()`` picks at every iteration of a run, or None
    when that choice could change (``queue by`` keys that read what changes)."""
    q = pool.put_queue
    if pool.queue_keys is None or q[0].front:
        return q[0]
    for k in pool.decl.queue:
        r = reads(k, self.sim, self)
        if r is None or r:
            return None
    return pool.select()


def _waiting(self: "StepEngine") -> tuple[frozenset[int], frozenset[int], Any] | None:
    """Whether a run may go on with requests waiting, and on what terms:
    ``(stop, recheck, head)``, or None when it may not.

    * A request in the queue of a pool without ``admit via`` is tried at every
      settle: its header must read nothing a run changes, so it fails as it
      just did (pools only fill up inside a run).
    * The head this engine tries after each iteration's residents (while
      tokens are left) must have a pool whose amount reads nothing the run
      changes before its end and does not fit now: it cannot fit later, as
      ``used`` only grows.  A growth in a pool that amount reads ends the run
      before it (``stop``).  Its other amounts are evaluated again at each
      iteration whose growths changed a pool they read (``recheck``), as the
      one-by-one attempt would (an error there is the same error)."""
    sim = self.sim
    stop: frozenset[int] = frozenset()
    for pool in sim.all_pools:
        if pool.put_queue and pool.admit_via is None:
            req = _head(self, pool)
            if req is None:
                return None
            for r in header(self, req.spec):
                if r is None or r:
                    return None
        elif pool.put_queue and pool not in self.admit_pools:
            return None  # another engine's: it is iterating or has no work (checked before)
    if not (self.left > 0.0 and self._admittable()):
        return stop, frozenset(), None  # no admission attempt in the run
    if not self._default_admit:
        return None
    pool = next(p for p in self.admit_pools if p.put_queue)
    req = _head(self, pool)
    if req is None:
        return None
    rs = header(self, req.spec)
    if any(r is None for r in rs):
        return None
    spec, s = req.spec, req.session
    blocking = None
    self.admitting_left = self.left
    try:
        for k in sorted(range(len(rs)), key=lambda k: len(rs[k])):  # pure amounts first
            u = spec.units[k](s)
            need = u
            r_fn = spec.reserve[k]
            if r_fn is not None:
                r = r_fn(s)
                need = max(u, r)
            if not (u >= 0.0 and need >= 0.0):
                return None
            p = req.pools[k]
            if p.used + p.round_up(need) > p.cap + EPS:
                blocking = k
                break
    finally:
        self.admitting_left = None
    if blocking is None:
        return None
    rest: set[int] = set()
    for k, r in enumerate(rs):
        if k != blocking:
            rest |= r  # type: ignore[arg-type]
    return stop | rs[blocking], frozenset(rest), req  # type: ignore[operator]


# -- a run ----------------------------------------------------------------------------------

def run_length(self: "StepEngine", now: float, cost: float) -> tuple[int, float]:
    """How many decode iterations of this batch, this one first, can run
    back to back before anything else could happen: every one ends before
    the next event and by the horizon; none finishes a job, lets a waiting
    request in, or needs a block that does not fit (a growth that fits is
    planned here and replayed in place: it evicts cache and changes
    ``kv_decode``, hence the cost).  The ends are added one cost at a time
    from ``now``, as the iterations one by one would reach them.  Leaves the
    plan in ``self._plan``: per iteration after the first, its growths, its
    cost and whether the waiting head's header is evaluated again."""
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
    if cap <= 1:
        return 1, t
    stop: frozenset[int] = self._state_pools
    recheck: frozenset[int] = frozenset()
    self._head = None
    if any(p.put_queue for p in sim.all_pools):
        terms = _waiting(self)
        if terms is None:
            return 1, t
        more, recheck, self._head = terms
        stop = stop | more
    memory = self.memory
    kv_tracked = self._kv_needed
    reqs: list[Any] = []
    pools: list[Any] = []  # the pool a job grows; False where a growth must end the run
    pos: list[float] = []
    alloc: list[float] = []
    kv: list[float] = []
    for job, _t in assign:
        req = job.hold
        reqs.append(req)
        if req is None:
            pools.append(None)
            pos.append(0.0)
            alloc.append(0.0)
        else:
            k = job.k
            pool = req.pools[k]
            # a growth in the run must not need keys that read the clock, and
            # the memory a cost reads must be this hold's allocation alone
            growable = pool.cache.keys is None and id(pool) not in stop and (
                memory is None or not kv_tracked or pool is not memory
                or job.session.held_in(memory) == req.alloc[k])
            pools.append(pool if growable else False)
            pos.append(req.pos[k])
            alloc.append(req.alloc[k])
        kv.append(job.session.held_in(memory) if memory is not None and kv_tracked else 0.0)
    used = {id(p): p.used for p in pools if p}
    idx = [i for i in range(len(assign)) if reqs[i] is not None]
    plan: list[tuple[list[tuple[int, float]], float, bool]] = []
    cur = cost
    m = 1
    while m < cap:
        growths: list[tuple[int, float]] = []
        again = False
        for i in idx:
            if pos[i] + 1.0 - alloc[i] > EPS:
                break
        else:
            i = -1
        if i >= 0:  # some job grows this iteration: plan each in serving order
            ok = True
            for i in idx:
                units = pos[i] + 1.0 - alloc[i]
                if units > EPS:
                    pool = pools[i]
                    if not pool:
                        ok = False
                        break
                    need = pool.round_up(alloc[i] + units) - alloc[i]
                    if need > 0.0:
                        pid = id(pool)
                        if used[pid] + need > pool.cap + EPS:
                            ok = False  # it would preempt or stall: the run stops before
                            break
                        used[pid] += need
                        alloc[i] = alloc[i] + need
                        growths.append((i, need))
                        if pid in recheck:
                            again = True
                        if kv_tracked and pool is memory:
                            kv[i] = alloc[i]
                pos[i] += 1.0
            if not ok:
                break
            if growths and kv_tracked:
                cur = decode_cost(self, kv)
                if not (cur > 0.0 and math.isfinite(cur)):
                    break
        else:
            for i in idx:
                pos[i] += 1.0
        t2 = t + cur
        if not t2 < limit or t2 > horizon:
            break
        plan.append((growths, cur, again))
        t = t2
        m += 1
    while m > 1 and now + (t - now) != t:  # the timeout's time must be exactly the m-th end
        plan.pop()  # (only ever when the clock is close to 0)
        m -= 1
        t = now + cost
        for _g, c, _a in plan:
            t = t + c
    self._plan = plan
    return m, t


def decode_cost(self: "StepEngine", kv: list[float]) -> float:
    """The cost of a decode iteration of the same batch with other allocations
    (as ``_launch`` computes it: its sums in its order)."""
    n = float(len(kv))  # 1.0 added n times
    return self._cost(n, 0.0, n, reduce(add, kv, 0.0), 0.0, 0.0)


def replay(self: "StepEngine", assign: list[tuple["Job", float]], m: int) -> None:
    """Iterations 1 … m−1 of a coalesced run, exactly as one by one: commit
    each at its end (a token per job, as ``_iter_end`` and
    ``Session.decode_token`` do), then plan the next at that time (its
    growths, a token of position per job) and account for it (as
    ``_account``).  The same float operations in the same order give the same
    floats; what repeats is folded in C (``accumulate``, ``reduce``)."""
    sim = self.sim
    plan = self._plan
    k = m - 1  # commits replayed here; the m-th is `_iter_end`'s
    nf = float(len(assign))
    stats = sim.stats_on
    costs = [c for _g, c, _a in plan]
    # ends[j]: the end of iteration j + 1 (ends[0] is the first's)
    ends = list(accumulate(costs, add, initial=self._run_start + self.run_cost))
    first = ends[0]
    # -- commits: a token per job per iteration ------------------------------------------------
    itl = self.itl
    for job, tokens in assign:
        job.work = reduce(sub, repeat(tokens, k), job.work)
        s = job.session
        if s.first_tok is None:
            s.first_tok = first
            s.n_after += k - 1
        else:
            if stats:
                itl.add(first - s.last_tok)
            s.n_after += k
        s.last_tok = ends[k - 1]
        req = job.hold
        if req is not None:
            req.pos[job.k] = reduce(add, repeat(1.0, k), req.pos[job.k])
    if stats:
        n = len(assign)
        prev = first
        for end in ends[1:k]:
            itl.add_repeat(end - prev, n)
            prev = end
    # -- growths of iterations 2 … m at their starts ---------------------------------------------
    head = self._head
    for j, (growths, _c, again) in enumerate(plan):
        if growths:
            end = ends[j]
            for i, need in growths:
                job = assign[i][0]
                req = job.hold
                kk = job.k
                pool = req.pools[kk]  # type: ignore[union-attr]
                pool.make_room(need)
                pool.used += need
                req.alloc[kk] = req.alloc[kk] + need  # type: ignore[union-attr]
                pool.record(end)
            if again:  # the admission attempt of that iteration reads what changed
                self.admitting_left = self.left
                try:
                    head.spec.amounts(head.session)
                finally:
                    self.admitting_left = None
    # -- statistics of iterations 2 … m (as `_account`) ------------------------------------------
    warmup, horizon = sim.warmup, sim.horizon
    t_dec, t_decs = self.t_decode_only, self.t_decoders
    for j in range(k):
        lo = ends[j]
        if not lo > warmup:
            lo = warmup
        hi = ends[j + 1]
        if hi > horizon:
            hi = horizon
        span = hi - lo
        if span > 0.0:
            t_dec += span
            t_decs += nf * span
    self.t_decode_only, self.t_decoders = t_dec, t_decs
    if stats:
        self.dec_iters += k
        self.dec_sum = reduce(add, repeat(nf, k), self.dec_sum)
        self.dec_cost = reduce(add, costs, self.dec_cost)
    self.iterations += k
    sim.events += k
    self._plan = []
    self._head = None

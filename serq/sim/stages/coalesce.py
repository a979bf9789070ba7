"""Coalesced decode runs of the step engine.

Most iterations of a loaded engine are alike: the same residents, each
decoding one token.  When an iteration is such, :func:`run_length` works out
how many like it can follow back to back before anything else could happen,
and the engine schedules one event for all of them; at that event
:func:`replay` commits and plans each of them in turn with the same
floating-point operations in the same order as one by one, so the report is
the same.  The functions take the engine as ``self``: they are its methods,
kept apart because they are an optimisation of §4.3, not a rule of it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Job
    from .step import StepEngine

EPS = 1e-9


def run_length(self: "StepEngine", now: float, cost: float) -> tuple[int, float]:
    """How many decode iterations of this batch, this one first, can run
    back to back before anything else could happen: every one ends before
    the next event and by the horizon; none finishes a job, meets a
    waiting request, or needs a block that does not fit (a growth that
    fits is planned here and replayed in place: it evicts LRU cache and
    changes ``kv_decode``, hence the cost).  The ends are added one cost
    at a time from ``now``, as the iterations one by one would reach them.
    Leaves the plan in ``self._plan``: per iteration after the first, its
    growths and its cost."""
    if self._admittable():
        return 1, now + cost
    t = now + cost
    limit = self.env.peek()
    horizon = self.sim.horizon
    if not t < limit or t > horizon:
        return 1, t
    assign = self.assign
    cap = 1 << 30
    for job, _t in assign:
        cap = min(cap, math.ceil(job.work - EPS) - 1)  # whole tokens that do not finish it
    if cap <= 1:
        return 1, t
    memory = self.memory
    kv_tracked = self._kv_needed
    n = len(assign)
    reqs: list[Any] = []
    ks: list[int] = []
    pools: list[Any] = []  # the pool a job grows; False where a growth must end the run
    pos: list[float] = []
    alloc: list[float] = []
    kv: list[float] = []
    for job, _t in assign:
        req = job.hold
        reqs.append(req)
        ks.append(job.k)
        if req is None:
            pools.append(None)
            pos.append(0.0)
            alloc.append(0.0)
        else:
            pool = req.pools[job.k]
            # a growth in the run must not need keys that read the clock, and
            # the memory a cost reads must be this hold's allocation alone
            growable = pool.cache.keys is None and (
                memory is None or not kv_tracked or pool is not memory
                or job.session.held_in(memory) == req.alloc[job.k])
            pools.append(pool if growable else False)
            pos.append(req.pos[job.k])
            alloc.append(req.alloc[job.k])
        kv.append(job.session.held_in(memory) if memory is not None and kv_tracked else 0.0)
    used = {id(p): p.used for p in pools if p}
    plan: list[tuple[list[tuple[int, float]], float]] = []
    cur = cost
    m = 1
    while m < cap:
        growths: list[tuple[int, float]] = []
        for i in range(n):
            if reqs[i] is None:
                continue
            units = pos[i] + 1.0 - alloc[i]
            if units > EPS:
                pool = pools[i]
                if not pool:
                    break
                need = pool.round_up(alloc[i] + units) - alloc[i]
                if need > 0.0:
                    if used[id(pool)] + need > pool.cap + EPS:
                        break  # it would preempt or stall: the run stops before
                    used[id(pool)] += need
                    alloc[i] = alloc[i] + need
                    growths.append((i, need))
                    if kv_tracked and pool is memory:
                        kv[i] = alloc[i]
            pos[i] += 1.0
        else:
            if growths and kv_tracked:
                cur = decode_cost(self, kv)
                if not (cur > 0.0 and math.isfinite(cur)):
                    break
            t2 = t + cur
            if not t2 < limit or t2 > horizon:
                break
            plan.append((growths, cur))
            t = t2
            m += 1
            continue
        break
    while m > 1 and now + (t - now) != t:  # the timeout's time must be exactly the m-th end
        plan.pop()  # (only ever when the clock is close to 0)
        m -= 1
        t = now + cost
        for _g, c in plan:
            t = t + c
    self._plan = plan
    return m, t

def decode_cost(self: "StepEngine", kv: list[float]) -> float:
    """The cost of a decode iteration of the same batch with other allocations
    (as ``_launch`` computes it)."""
    n = tokens = kv_d = 0.0
    for held in kv:  # the sums `_launch` makes, in its order
        tokens += 1.0
        n += 1.0
        kv_d += held
    return self._cost(tokens, 0.0, n, kv_d, 0.0, 0.0)


def replay(self: "StepEngine", assign: list[tuple["Job", float]], m: int) -> None:
    """Iterations 1 … m−1 of a coalesced run, exactly as one by one: commit
    each at its end (a token per job, as ``_iter_end`` and
    ``Session.decode_token`` do), then plan the next at that time (its
    growths, a token of position per job) and account for it (as
    ``_account``).  Same operations, same order: the same floats."""
    sim = self.sim
    n = float(len(assign))
    stats = sim.stats_on
    warmup, horizon = sim.warmup, sim.horizon
    add = self.itl.add
    t_dec, t_decs = self.t_decode_only, self.t_decoders
    dec_iters, dec_sum, dec_cost = self.dec_iters, self.dec_sum, self.dec_cost
    holds = [(job.hold, job.k) for job, _t in assign]
    end = self._run_start
    cost = self.run_cost
    for growths, next_cost in self._plan:
        end = end + cost
        cost = next_cost
        for job, tokens in assign:
            job.work -= tokens
            s = job.session
            if s.first_tok is None:
                s.first_tok = s.last_tok = end
                continue
            if stats:
                add(end - s.last_tok)
            s.n_after += 1
            s.last_tok = end
        for i, need in growths:
            req, k = holds[i]
            pool = req.pools[k]  # type: ignore[union-attr]
            pool.make_room(need)
            pool.used += need
            req.alloc[k] = req.alloc[k] + need  # type: ignore[union-attr]
            pool.record(end)
        for req, k in holds:
            if req is not None:
                req.pos[k] += 1.0
        lo = end if end > warmup else warmup
        hi = end + cost
        if hi > horizon:
            hi = horizon
        span = hi - lo
        if span > 0.0:
            t_dec += span
            t_decs += n * span
        if stats:
            dec_iters += 1
            dec_sum += n
            dec_cost += cost
    self.t_decode_only, self.t_decoders = t_dec, t_decs
    self.dec_iters, self.dec_sum, self.dec_cost = dec_iters, dec_sum, dec_cost
    self.iterations += m - 1
    sim.events += m - 1
    self._plan = []

"""Holds on pools: joining, admission, release, growth and preemption
(semantics §2.2–§2.7, §4.5)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from simpy.events import Event

from .. import ir
from .cache import EPS
from .order import ascending
from ..errors import SerqRuntimeError
from .pool import GRANTED, LEASED, REJECTED, RELEASED, WAITING, HoldRequest, Pool
from .session import Preemption, Session

if TYPE_CHECKING:
    from .simulator import Simulator
    from .stages.step import StepEngine


class Holds:
    """The pool side of a run: what sessions and step engines call when a
    hold joins, is admitted, grows, is preempted or ends.  The simulator owns
    one (``sim.holds``); it keeps the admission and release sequence numbers
    and counts preemptions into the simulator's report counters."""

    def __init__(self, sim: "Simulator") -> None:
        self.sim = sim
        self.env = sim.env
        self.next_adm = 0  # the order of admissions (a session's ``adm_seq``: vLLM's `running` order)
        self.next_release = 0  # the order of releases (an LRU cache entry's age)
        self.probing: HoldRequest | None = None  # a hold whose header `enqueue` reads (a shared cache's `cachedin`)
        self.stalled = 0  # the stalled growths in every pool's `growers` (none: a pass skips them)
        #: the pools whose queue a pass admits from (no ``admit via``), in declaration order (the
        #: simulator sets it once the pools are made)
        self.passed: list[Pool] = []
        #: the places in ``passed`` of the pools a request joined since a pass found their queues
        #: empty (a pass looks at those alone); ``joins`` counts the joins
        self.queued: set[int] = set()
        self.joins = 0

    # -- holds: join, admit, release (§2.2–§2.6) ----------------------------------------------

    def enqueue(self, req: HoldRequest) -> None:
        """A hold joins its first pool's queue, unless some pool can never fit it."""
        s = req.session
        self.probing = req  # `cachedin` of a shared-cache pool reads its chain
        amounts = req.spec.amounts(s)
        self.probing = None
        for pool, (_u, need) in zip(req.pools, amounts):
            if not pool.can_ever_hold(need):
                pool.rejected += 1
                req.state = REJECTED
                return
        if s.holds:
            s.holds.append(req)
        else:
            s.holds = [req]
        req.pools[0].join(req)

    def admit(self, req: HoldRequest, amounts: list[tuple[float, float]]) -> None:
        """Grant every pool of a hold at once (§2.5) and wake its session."""
        s = req.session
        spec = req.spec
        reuse = None
        if spec.reuse is not None:
            reuse = spec.reuse(s)
            reuse = reuse if reuse > 0.0 else 0.0
        own_max = 0.0
        for k, pool in enumerate(req.pools):
            need = pool.round_up(amounts[k][0])
            own = 0.0
            if pool.shared is not None and spec.cache is not None:
                own = self.admit_shared(req, k, need, reuse)
            else:
                if spec.cache is not None:
                    entry = pool.cache.take(s.serial)
                    if entry is not None:
                        own = entry.size
                        if reuse is not None:
                            bound = pool.round_down(reuse)
                            if own > bound:
                                pool.cache.put_dead(entry, own - bound)
                                own = bound
                pool.make_room(need)
                pool.used += need
            if own > own_max:
                own_max = own
            pool.holders.append(req)
            pool.admissions += 1
            req.alloc[k] = need
            req.pos[k] = own
            req.held[k] = True
            pool.record()
        first = req.pools[0]
        if self.sim.stats_on:
            first.wait_sum += self.env.now - req.joined
            first.wait_count += 1
        s.adm_seq = self.next_adm
        self.next_adm += 1
        s.a[ir.CACHED] = own_max
        s.queued_at = None
        if self.sim.kept_caches:  # (`waiting_changed` has nothing to do without them)
            self.sim.waiting_changed(s)
        req.state = GRANTED
        self.env.make_ready(req)  # its session wakes (every pool recorded its change above)

    def release_hold(self, req: HoldRequest, completed: bool) -> None:
        """Give back every pool of a hold, caching per its clause (§2.6).  A
        hold that completed normally also resets ``computed`` and retries
        admissions at once."""
        for k in range(len(req.pools)):
            if req.held[k]:
                self.release_part(req, k)
        req.state = RELEASED
        if completed:
            self.completed(req)

    def completed(self, req: HoldRequest) -> None:
        """A hold's body ended normally: its preemption positions and ``computed``
        are forgotten, and admissions are retried at once."""
        s = req.session
        if s.preempt_pos:
            for pool in req.pools:
                s.preempt_pos.pop(pool, None)
        s.a[ir.COMPUTED] = 0.0
        self.try_admit_all()

    # -- leases (docs/pd.md, "Leases") -------------------------------------------------------

    def lease(self, req: HoldRequest) -> None:
        """A hold with ``lease P (T)`` ends its scope normally: every other pool is
        given back (cached per the clause), P's allocation stays the session's —
        counted in ``used`` and ``holders``, neither evictable nor a preemption
        victim — until ``release P``, T clock units (read now) or the session's end."""
        s = req.session
        k, time_fn, label = req.spec.lease  # type: ignore[misc]
        if not req.held[k]:  # a `release P` in the body gave it back already: nothing is leased
            self.release_hold(req, completed=True)
            return
        t = time_fn(s)
        if not t >= 0.0:
            shown = f"{t:g}" if t == t else "NaN"
            raise SerqRuntimeError(f"{label}: the time is {shown}, not a number of clock units ≥ 0", at=label)
        for j in range(len(req.pools)):
            if j != k and req.held[j]:
                self.release_part(req, j)
        req.state = LEASED
        if s.leases is None:
            s.leases = []
        s.leases.append(req)
        if t < math.inf:
            timer = self.env.timer(t, [self._lease_due])
            timer.req = req  # type: ignore[attr-defined]
        self.completed(req)

    def _lease_due(self, timer: Any) -> None:
        self.sim.events += 1
        req = timer.req
        if req.state == LEASED:
            self.end_lease(req)
            self.try_admit_all()

    def end_lease(self, req: HoldRequest) -> None:
        """A lease ends (its time, a ``release`` or its session's end): the hold's
        ``cache`` applies now, read with the session's attributes as they are."""
        k = req.spec.lease[0]  # type: ignore[index]
        self.release_part(req, k)
        req.state = RELEASED
        req.session.leases.remove(req)  # type: ignore[union-attr]

    def end_leases(self, s: Session) -> None:
        """The session ends: its leases end too, oldest first (after its holds)."""
        while s.leases:
            self.end_lease(s.leases[0])

    def admit_shared(self, req: HoldRequest, k: int, need: float, reuse: float | None) -> float:
        """One pool of an admission on a shared prefix cache (docs/simulator.md,
        "Shared prefix cache"): the hold reads the first ``r`` units of its chain
        (the cached prefix, at most ``need`` and the ``reuse`` bound), whose nodes
        count in ``used`` once, and allocates the ``need − r`` units beyond; ``r``."""
        s = req.session
        pool = req.pools[k]
        sh = pool.shared
        assert sh is not None
        segs = sh.segments(req.spec.chain(s), s.serial)
        r, _delta = sh.cost(segs, need, pool.round_down(reuse) if reuse is not None else None)
        nodes, moved = sh.lock(segs, r, s.serial)
        pool.used += moved
        pool.make_room(need - r)  # the nodes read are no longer evictable
        pool.used += need - r
        if req.shares is None:
            req.shares = {}
        req.shares[pool] = (segs, nodes, r)
        return r

    def release_shared(self, req: HoldRequest, k: int) -> None:
        """``release_part`` on a shared prefix cache: the hold's own units go, the
        nodes it read return to ``cached`` with their last reader, and ``cache``
        writes ``min(cache, computed)`` units of its chain, rounded down to blocks."""
        s = req.session
        pool = req.pools[k]
        sh = pool.shared
        assert sh is not None and req.shares is not None
        segs, nodes, r = req.shares[pool]
        alloc = req.alloc[k]
        now = self.env.now
        seq = self.next_release
        self.next_release += 1
        snap = list(s.a)
        pool.used -= alloc - r
        pool.give_back(sh.unlock(nodes, now, seq, snap, s))
        pool.holders.remove(req)
        req.held[k] = False
        want = req.spec.cache(s)  # type: ignore[misc]
        want = want if want > 0.0 else 0.0
        computed = req.pos[k] if req.grown else alloc
        keep = pool.round_down(want if want < computed else computed)
        sh.write(segs, keep, now, seq, snap, s)
        pool.record()

    def release_part(self, req: HoldRequest, k: int) -> None:
        """Give back one pool of a hold: ``min(cache, computed)`` stays cached,
        rounded down to blocks; computed is the position if a growing run
        advanced the hold, else the allocation."""
        s = req.session
        pool = req.pools[k]
        if pool.shared is not None and req.spec.cache is not None:
            self.release_shared(req, k)
            return
        alloc = req.alloc[k]
        pool.give_back(alloc)
        pool.holders.remove(req)
        req.held[k] = False
        cache = req.spec.cache
        if cache is not None:
            want = cache(s)
            want = want if want > 0.0 else 0.0
            computed = req.pos[k] if req.grown else alloc
            keep = pool.round_down(want if want < computed else computed)
            if keep > 0.0:
                pool.cache.put(s.serial, keep, self.env.now, self.next_release, list(s.a), s)
                self.next_release += 1
        pool.record()

    def try_admit_all(self) -> None:
        """A pass over every pool in declaration order: stalled growers, then
        its queue, unless a step stage admits it (§1.3 step 2)."""
        if not self.stalled:  # only the queues of pools without `admit via`: those joined
            queued = self.queued
            if not queued:
                return
            passed = self.passed
            for i in ascending(queued, self, "joins"):  # a pool joined later in the order: this pass
                pool = passed[i]
                if pool.put_queue:
                    pool._trigger_put()
                if not pool.put_queue:
                    queued.discard(i)
            return
        for pool in self.sim.all_pools:
            if pool.growers:
                self.retry_growers(pool)
            if pool.put_queue and pool.admit_via is None:
                pool._trigger_put()

    # -- growth and preemption (§2.7, §4.5) ----------------------------------------------------

    def grow(self, s: Session, req: HoldRequest, k: int, units: float, engine: StepEngine | None = None) -> Any:
        """Grow a hold's allocation on one pool by ``units`` (rounded up to
        blocks).  True when done; a :class:`Preemption` when ``s`` itself was
        preempted; otherwise ``s`` stalls until a pool pass finds room, and
        the result is the event that wakes it (None inside an iteration)."""
        pool = req.pools[k]
        alloc = req.alloc[k]
        need = pool.round_up(alloc + units) - alloc
        if need <= 0.0:
            return True
        while True:
            if pool.has_room(need):
                pool.allocate(need)  # evicts first: eviction keys see the old allocation
                req.alloc[k] = alloc + need
                return True
            victim = None
            if pool.lifo:
                victim = engine.choose_victim(pool, s) if engine is not None else self.lifo_victim(pool)
            if victim is None:
                ev = None if engine is not None else Event(self.env)
                s.stall = (pool, req, k, units, ev)
                pool.growers.append(s)
                self.stalled += 1
                return ev
            cause = self.preempt(victim, pool)
            if victim is s:
                return cause

    def lifo_victim(self, pool: Pool) -> Session | None:
        """vLLM's ``running[-1]``: among the holders of the pool that are
        residents of a step stage whose memory it is, the latest admitted;
        for a pool that is no stage's memory, its latest holder."""
        if pool.engines:
            best = None
            for req in pool.holders:
                s = req.session
                if (req.state == GRANTED and s.job is not None and s.job[0] in pool.engines
                        and (best is None or s.adm_seq > best.adm_seq)):
                    best = s
            return best
        for req in reversed(pool.holders):  # a lease is no victim
            if req.state == GRANTED:
                return req.session
        return None

    def preempt(self, victim: Session, pool: Pool) -> Preemption:
        """Preempt ``victim``'s innermost hold on ``pool``: its job leaves its
        stage, its holds from that one inwards are released (cached), and the
        hold re-queues at the head of its first pool (§4.5)."""
        found = victim.innermost(pool)
        assert found is not None, "a victim holds the pool"
        req, k = found
        computed = req.pos[k]
        if victim.preempt_pos is None:
            victim.preempt_pos = {}
        prev = victim.preempt_pos.get(pool)
        if prev is not None and computed <= prev + EPS and not victim.stuck:
            victim.stuck = True
            pool.stuck += 1
        victim.preempt_pos[pool] = computed
        victim.a[ir.COMPUTED] = computed
        self.detach(victim)
        i = victim.holds.index(req)
        for h in reversed(victim.holds[i:]):
            if h.state == GRANTED:
                self.release_hold(h, completed=False)
            elif h.state == WAITING:
                h.pools[0].cancel(h)
        del victim.holds[i:]
        pool.preemptions += 1
        self.sim.preemptions += 1
        new = HoldRequest(victim, req.spec, req.spec.pools(victim), front=True)
        self.enqueue(new)
        victim.requeued = new
        victim.resumed = True
        cause = Preemption(req)
        if self.env.active_process is not victim.proc:
            self.env.throw(victim.proc, cause)
        return cause

    def detach(self, s: Session) -> None:
        """Take a session out of the stage job or stalled growth it waits in."""
        if s.job is not None:
            stage, job = s.job
            stage.remove(job)
            s.job = None
        if s.stall is not None:
            pool = s.stall[0]
            if s in pool.growers:
                pool.growers.remove(s)
                self.stalled -= 1
            s.stall = None

    def retry_growers(self, pool: Pool) -> None:
        """Stalled growths in stall order; the first that still does not fit stops."""
        while pool.growers:
            s = pool.growers[0]
            stall = s.stall
            if stall is None:
                pool.growers.pop(0)
                self.stalled -= 1
                continue
            _pool, req, k, units, ev = stall
            alloc = req.alloc[k]
            need = pool.round_up(alloc + units) - alloc
            if not pool.has_room(need):
                break
            pool.growers.pop(0)
            self.stalled -= 1
            pool.allocate(need)
            req.alloc[k] = alloc + need
            s.stall = None
            if ev is not None:
                self.env.make_ready(ev)

"""Pools: counted resources with an admission queue and a prefix cache
(semantics §2).

A :class:`Pool` is a SimPy resource: its ``put_queue`` holds the waiting
:class:`HoldRequest` events, and ``_do_put`` decides one admission; the one
bit it returns separates head-of-line blocking (stop the scan) from going on
(SimPy ``resources/base.py``).  Unlike a SimPy resource, a pool does not try
to admit when a request joins: admissions happen when the simulator settles
an instant (§1.3 step 2), or inside a step stage's iteration for a pool with
``admit via`` (§4.3e).

A :class:`HoldRequest` is one attempt at a ``hold``: it waits in the queue
of its first pool, is granted the units of every pool at once, and releases
them at the end of its block.  Like SimPy's ``Request`` it is a context
manager: leaving the ``with`` block releases (applying ``cache``) or, if
never granted, cancels.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, Callable

from simpy.events import Event
from simpy.exceptions import Interrupt
from simpy.resources.base import BaseResource

from ..errors import SerqRuntimeError
from .cache import EPS, PrefixCache
from .order import total_key
from .prefix import SharedCache
from .stats import TimeAverage

#: A run's growths of one pool this many or more are replayed in arrays (stages/vector.py: grow_pool),
#: once numpy is imported (128 until 2026-12-06; 32 took 1-5 % off the long-output programs and
#: 16 measured as 32: docs/speed.md).
_ARRAY_GROWTHS = 32

if TYPE_CHECKING:
    from .session import Session
    from .simulator import Simulator

WAITING, GRANTED, RELEASED, REJECTED, CANCELLED, LEASED = range(6)


def bad_amount(label: str, value: float) -> SerqRuntimeError:
    shown = f"{value:g}" if value == value else "NaN"
    return SerqRuntimeError(f"{label}: the amount is {shown}, not a number of units, tokens or seconds", at=label)


class HoldSpec:
    """A compiled ``hold``: how to find its pools and evaluate its header.

    ``pools`` resolves the pool references for a session; ``units`` and
    ``reserve`` are per-pool callables of the session (moment Admit);
    ``cache`` (moment Session) is None without a ``cache`` clause."""

    def __init__(
        self,
        id: int,
        label: str,
        pools: Callable[["Session"], list["Pool"]],
        units: list[Callable[[Any], float]],
        reserve: list[Callable[[Any], float] | None],
        reuse: Callable[[Any], float] | None,
        cache: Callable[[Any], float] | None,
        prefix: list[tuple[Callable[[Any], float], Callable[[Any], float], str]] | None = None,
        lease: tuple[int, Callable[[Any], float], str] | None = None,
        labels: list[tuple[str, str]] | None = None,
    ) -> None:
        self.id = id
        self.label = label
        #: per pool, the labels of its units and its reserve (run-time errors say which amount, and where)
        self.labels = labels or [(label, label)] * len(units)
        self.pools = pools
        self.units = units
        self.reserve = reserve
        self.reuse = reuse
        self.cache = cache
        self.prefix = prefix or []  # (key, length, label) per listed segment
        self.lease = lease  # `lease P (T)`: (P's position among the pools, T, its label)

    def chain(self, s: "Session") -> list[tuple[float, float]]:
        """The listed segments of the chain, (key, length) each, evaluated now (moment Admit)."""
        out = []
        for key_fn, len_fn, label in self.prefix:
            key = key_fn(s)
            if key != key:
                raise SerqRuntimeError(f"{label}: the key is NaN, which names no content")
            length = len_fn(s)
            if not 0.0 <= length < math.inf:
                raise bad_amount(label, length)
            out.append((key, length))
        return out

    def amounts(self, s: "Session") -> list[tuple[float, float]]:
        """(units, units that must fit) per pool, evaluated now; an amount
        that is not a number ≥ 0 is an error."""
        out = []
        for k, (u_fn, r_fn) in enumerate(zip(self.units, self.reserve)):  # `need(k, s)`, inline
            u = u_fn(s)
            if not u >= 0.0:
                raise bad_amount(self.labels[k][0], u)
            if r_fn is None:
                out.append((u, u))
                continue
            r = r_fn(s)
            if not r >= 0.0:
                raise bad_amount(self.labels[k][1], r)
            out.append((u, r if r > u else u))
        return out

    def need(self, k: int, s: "Session") -> tuple[float, float | None, float]:
        """Pool ``k``'s units, its ``reserve`` (None without one) and the units
        that must fit — the larger of the two (§2.2) — evaluated now, unchecked."""
        u = self.units[k](s)
        r_fn = self.reserve[k]
        if r_fn is None:
            return u, None, u
        r = r_fn(s)
        return u, r, (r if r > u else u)


class HoldRequest(Event):
    """One attempt at a hold, from joining the queue to the release."""

    def __init__(self, session: "Session", spec: HoldSpec, pools: list["Pool"], front: bool = False) -> None:
        super().__init__(session.sim.env)
        self.session = session
        self.spec = spec
        self.pools = pools
        self.front = front  # a preempted hold: tried first whatever the keys
        self.state = WAITING
        self.alloc = [0.0] * len(pools)
        self.pos = [0.0] * len(pools)  # computed tokens per pool, from the consumed prefix
        self.held = [False] * len(pools)
        self.grown = False  # a growing run advanced a position: positions, not allocations, were computed
        self.shares: dict[Pool, tuple[Any, Any, float]] | None = None  # shared-cache pools: (segments, nodes read, r)
        self.joined = self.env.now

    def __enter__(self) -> "HoldRequest":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        s = self.session
        if exc_type is not None and not isinstance(exc, Interrupt):  # only a preemption unwinds a hold
            return  # the run is failing; leave the state as it is
        if self.state == GRANTED:
            completed = exc_type is None and not s.ending
            if completed and self.spec.lease is not None:
                s.sim.holds.lease(self)  # the leased pool stays allocated past the scope
            else:
                s.sim.holds.release_hold(self, completed=completed)
        elif self.state == WAITING:
            self.pools[0].cancel(self)
        s.forget_hold(self)

    def index_of(self, pool: "Pool") -> int:
        for k, p in enumerate(self.pools):
            if p is pool and self.held[k]:
                return k
        return -1


class Pool(BaseResource):
    """One pool (or one member of a pool array)."""

    #: the timeline's sink (``serq.sim.timeline.Trail``), told every change ``record`` makes;
    #: None (no timeline asked for): nothing is told
    timeline: Any = None

    def __init__(self, sim: "Simulator", decl: Any, label: str, index: int | None) -> None:
        super().__init__(sim.env, decl.cap)
        self.sim = sim
        self.decl = decl
        self.label = label
        self.name = decl.name
        self.index = index
        self.cap: float = decl.cap
        self.block: float | None = decl.block
        self.used = 0.0
        self.holders: list[HoldRequest] = []
        self.growers: list[Any] = []  # stalled growths, in stall order
        self.lifo = decl.preempt == "lifo"
        self.admit_via = decl.admit_via
        self.queue_keys: Callable[[Any], tuple] | None = None  # `queue by`, set by the simulator
        self.cache = PrefixCache(self.block, None, None)
        self.shared: SharedCache | None = None  # the trie, for a pool some hold names with `prefix`
        self.engines: list[Any] = []  # step stages whose `memory` this pool is
        self.gauged = False  # a gauge reads its `used`, `free` or `cached`: what a growth changes (``Gauges``)
        self.gauge_read = False  # a gauge reads it at all
        self.gauge_part: Any = None  # (the gauges that read it, compiled; their indices), when gauged
        self.gauge_any: Any = None  # (the same of every gauge that reads it at all), when gauge_read
        #: the routers' indices that keep keys read from it, and its candidate in each
        #: (serq/sim/choose_index.py): told of every change ``record`` follows
        self.keyed: tuple[tuple[Any, int], ...] = ()
        self.watchers: list[Any] = []  # engines whose passing runs watch it (serq/sim/lazy.py)
        self.admitters: list[int] = []  # the places in ``sim.engines`` of the engines it is `admit via`
        self.pass_no = -1  # its place in ``Holds.passed`` (without `admit via`), else −1
        # statistics (§2.8)
        now = sim.env.now
        self.used_avg = TimeAverage(now, 0.0)
        self.cached_avg = TimeAverage(now, 0.0)
        self.queue_avg = TimeAverage(now, 0.0)
        self.holders_avg = TimeAverage(now, 0.0)
        self._averages = (self.used_avg, self.cached_avg, self.queue_avg, self.holders_avg)  # `record` sets them
        self.wait_sum = 0.0
        self.wait_count = 0
        self.admissions = 0
        self.preemptions = 0
        self.rejected = 0
        self.stuck = 0
        self.spills = 0

    # -- probes (language §6.5) ----------------------------------------------

    @property
    def cached(self) -> float:
        return self.cache.total

    def cached_of(self, s: "Session | None") -> float:
        return self.cache.size_of(s.serial) if s is not None else 0.0

    # -- the shared prefix cache (docs/simulator.md, "Shared prefix cache") ---------

    def make_shared(self, keys: Callable[[Any], tuple] | None, stream: Any) -> None:
        """Give the pool a trie instead of the per-session cache (decided at
        compile time: some hold names the pool with ``prefix``)."""
        self.shared = SharedCache(self.block, keys, stream)
        self.cache = self.shared  # type: ignore[assignment]  # PrefixCache's interface, where a pool reads it
        self.cached_of = self._shared_cached_of  # type: ignore[method-assign]

    def cached_along(self, s: "Session | None", flat: tuple[float, ...]) -> float:
        """``cachedin(P, k1, n1, …)``: the longest cached prefix along the chain
        ``k1: n1, …`` then the session's own segment, as a hold naming that
        chain with ``prefix`` would find it; a pool without a shared cache
        gives the session's own entry, as ``cachedin(P)``."""
        if s is None:
            return 0.0
        sh = self.shared
        if sh is None:
            return self.cache.size_of(s.serial)
        chain = []
        for i in range(0, len(flat), 2):
            key, length = flat[i], flat[i + 1]
            if key != key:
                raise SerqRuntimeError(f"`cachedin({self.label}, …)`: key {i // 2 + 1} of the chain is NaN, "
                                       "which names no content")
            if not 0.0 <= length < math.inf:
                raise bad_amount(f"`cachedin({self.label}, …)` (length {i // 2 + 1} of the chain)", length)
            chain.append((key, length))
        return sh.match(sh.segments(chain, s.serial))[0]

    def segments_of(self, req: HoldRequest) -> list[tuple[Any, float, float]]:
        """The chain of ``req`` on this pool: fixed at its admission, else evaluated now."""
        got = req.shares.get(self) if req.shares is not None else None
        if got is not None:
            return got[0]
        s = req.session
        return self.shared.segments(req.spec.chain(s), s.serial)  # type: ignore[union-attr]

    def _shared_cached_of(self, s: "Session | None") -> float:
        """``cachedin(P)``: the longest cached prefix along the chain of the
        session's innermost hold on the pool (the one joining, waiting or held;
        the session's own segment alone when there is none)."""
        if s is None:
            return 0.0
        sh = self.shared
        assert sh is not None
        req = self.sim.holds.probing
        if req is None or req.session is not s or self not in req.pools:
            req = None
            for h in reversed(s.holds):
                if self in h.pools:
                    req = h
                    break
        segs = self.segments_of(req) if req is not None else sh.segments([], s.serial)
        return sh.match(segs)[0]

    def shared_extra(self, req: HoldRequest, need: float) -> float:
        """What admitting ``req`` with ``need`` units adds to ``used``: the part beyond
        its shared prefix, plus the shared nodes no live hold reads yet."""
        sh = self.shared
        assert sh is not None
        need = self.round_up(need)
        bound = None
        if req.spec.reuse is not None:
            rho = req.spec.reuse(req.session)
            bound = self.round_down(rho if rho > 0.0 else 0.0)
        r, delta = sh.cost(self.segments_of(req), need, bound)
        return need - r + delta

    # -- amounts -------------------------------------------------------------

    def round_up(self, x: float) -> float:
        b = self.block
        if b is None or x == math.inf:
            return x
        try:
            return math.ceil(x / b - EPS) * b
        except OverflowError:  # x / b past the largest float: x is a whole number of blocks to its precision
            return x

    def round_down(self, x: float) -> float:
        b = self.block
        if b is None or x == math.inf:
            return x
        try:
            return math.floor(x / b + EPS) * b
        except OverflowError:  # (as round_up)
            return x

    def record(self, now: float | None = None) -> None:
        """Sample the time-averaged signals (after any change)."""
        if now is None:
            now = self.sim.env.now
        if self.gauge_read:  # (`Gauges.mark`, written out: it is hot)
            gauges = self.sim.gauges
            moved = gauges.moved
            if moved is not self:
                gauges.moved = self if moved is None else gauges
                gauges.movers.append(self)  # (which ones: serq/sim/gauge_terms.py)
        if self.keyed:
            for index, j in self.keyed:
                index.mark(j)
        # `set(now, value)` of the four time averages, written out: it is hot
        u, c, q, h = self._averages
        u.integral += u.value * (now - u.last)
        u.last = now
        u.value = self.used
        c.integral += c.value * (now - c.last)
        c.last = now
        c.value = self.cache.total
        q.integral += q.value * (now - q.last)
        q.last = now
        q.value = len(self.put_queue)
        h.integral += h.value * (now - h.last)
        h.last = now
        h.value = len(self.holders)
        trail = self.timeline
        if trail is not None:
            trail.change(now, (u.value, q.value, h.value))

    def make_room(self, need: float, now: float | None = None) -> None:
        """Evict cached units until ``need`` more fit beside what is used (§3.3),
        ``evict by`` keys read at ``now`` (default: the clock)."""
        cache = self.cache
        if self.used + cache.total + need > self.cap + EPS:
            cache.make_room(self.used, need, self.cap, self.sim.env.now if now is None else now)

    def allocate(self, need: float, now: float | None = None) -> None:
        """A growth's pool side at ``now`` (default: the clock): ``make_room(need)``,
        ``used += need``, ``record(now)``."""
        self.make_room(need, now)  # its own test: nothing to do while it all fits
        self.used += need
        self.record(now)

    def allocate_blocks(self, need: float, times: Any) -> None:
        """:meth:`allocate_run` of ``len(times)`` growths of ``need`` units each, at
        ``times`` (a numpy array: a run planned in arrays, serq/sim/stages/vector.py)."""
        n = len(times)
        if n >= _ARRAY_GROWTHS and sys.modules["serq.sim.stages.vector"].grow_blocks(self, need, times):
            return
        self.allocate_run([need] * n, times.tolist())

    def allocate_run(self, needs: list[float], times: list[float]) -> None:
        """``allocate(need, now)`` for each pair of ``needs`` and ``times`` in
        turn (the growths of a coalesced run; nothing else touches the pool
        between them): the same float operations in the same order, in one
        loop.  The queue and the holders do not change, and the four time
        averages share their last change (``record`` sets them together).
        Under LRU with whole amounts the cache drains its oldest entries by
        whole blocks, for every growth in one call (:meth:`PrefixCache.make_room_whole`); under ``evict by``
        keys that stay right through a run (``cache.lasting``), one heap of
        victims serves every growth (:meth:`PrefixCache.victims`)."""
        if not needs:
            return
        vector = sys.modules.get("serq.sim.stages.vector") if len(needs) >= _ARRAY_GROWTHS else None
        if vector is not None and vector.grow_pool(self, needs, times):  # a long run's, in arrays (once
            return  # the planner has imported numpy) where they are whole blocks
        ua, ca, qa, ha = self.used_avg, self.cached_avg, self.queue_avg, self.holders_avg
        last = ua.last
        if not (ca.last == last and qa.last == last and ha.last == last) or self.cache.spill is not None:
            for need, now in zip(needs, times):
                prior = (self.used, self.cache.total)
                self.allocate(need, now)
                if self.gauged:
                    self._gauge_growths([now], [(self.used, self.cache.total)], prior)
            return
        # the gauges that read the pool are read after each growth, at its time: they read its
        # `used` alone (a gauge's `cachedin` is 0), so the states after each growth are kept
        after: list[tuple[float, float]] | None = [] if self.gauged else None
        before = (self.used, self.cache.total)
        cache = self.cache
        cap = self.cap
        limit = cap + EPS
        used = first = self.used
        ui, uv = ua.integral, ua.value
        ci, cv = ca.integral, ca.value
        qi, qv = qa.integral, qa.value
        hi, hv = ha.integral, ha.value
        qn, hn = len(self.put_queue), len(self.holders)
        totals = cache.make_room_whole(used, needs, cap) if cache.whole_blocks(used, needs, cap) else None
        if totals is None and cache.lasting and len(needs) > 1:
            totals = cache.drain_run(used, needs, cap, times)
        victims = None  # the heap of a lasting keyed cache, made at the first eviction
        for j, (need, now) in enumerate(zip(needs, times)):
            if totals is not None:
                total = totals[j]
            elif used + cache.total + need > limit:  # make_room(need)
                if cache.lasting:
                    if victims is None:
                        victims = cache.victims(now)
                    cache.drain_by_keys(victims, used, need, cap, now)
                    total = cache.total
                else:
                    self.used = used
                    self.make_room(need, now)
                    total = cache.total
            else:
                total = cache.total
            used += need
            # record(now), inline
            dt = now - last
            ui += uv * dt
            uv = used
            ci += cv * dt
            cv = total
            qi += qv * dt
            qv = qn
            hi += hv * dt
            hv = hn
            last = now
            if after is not None:
                after.append((used, total))
        trail = self.timeline
        if trail is not None:  # (the growths at their times: `used += need` from where the run began)
            trail.grew(first, needs, times, qn, hn)
        self.used = used
        ua.integral, ua.last, ua.value = ui, last, uv
        ca.integral, ca.last, ca.value = ci, last, cv
        qa.integral, qa.last, qa.value = qi, last, qv
        ha.integral, ha.last, ha.value = hi, last, hv
        if after is not None:  # (read at each growth: the instant's end has nothing more to read)
            self._gauge_growths(times, after, before)

    def _gauge_growths(self, times: list[float], after: list[tuple[float, float]],
                       before: tuple[float, float]) -> None:
        """The gauges that read this pool, read after its growths at ``times``
        (``after``: its ``used`` and cached total after each; ``before``: before
        the first).  While passing runs' growths are replayed run by run
        (serq/sim/lazy.py) the states are kept, to be read later in time order
        with other runs'; else they are read now, each on the pool's ``used`` as
        it was then (:meth:`Gauges.sample_growths`)."""
        gauges = self.sim.gauges
        if gauges.log is not None:  # (read from a log, later: serq/sim/gauges.py)
            gauges.log_growths(self, times, after)
            return
        capture = gauges.capture
        if capture is not None:
            states, first = capture
            if id(self) not in first:
                first[id(self)] = (self, *before)
            engine = gauges.replaying
            for now, (used, total) in zip(times, after):
                states.append((now, len(states), self, engine, used, total))
            return
        gauges.sample_growths(self, times, [u for u, _total in after])

    # -- the queue -------------------------------------------------------------

    def join(self, req: HoldRequest) -> None:
        lazy = self.sim.lazy
        if lazy is not None and self.admit_via is None:  # tried at every settle, so at every passing
            lazy.cut_all()                               # run's iteration end as well (serq/sim/lazy.py)
        q = self.put_queue
        if not q:
            self.sim.queued_pools += 1
        if req.front:
            q.insert(0, req)
        else:
            q.append(req)
        req.session.queued_at = req.joined
        if self.pass_no >= 0:  # a pass looks at its queue
            holds = self.sim.holds
            holds.queued.add(self.pass_no)
            holds.joins += 1
        if self.admitters:  # those engines may start at the next settle
            sim = self.sim
            sim.stirred.update(self.admitters)
            sim.stirs += 1
        if self.sim.kept_caches:  # (`waiting_changed` has nothing to do without them)
            self.sim.waiting_changed(req.session)
        self.record()

    def cancel(self, req: HoldRequest) -> None:
        if req in self.put_queue:
            self.unqueue(req)
        req.state = CANCELLED
        req.session.queued_at = None
        self.sim.waiting_changed(req.session)
        self.record()

    def fits(self, req: HoldRequest) -> list[tuple[float, float]] | None:
        """The amounts of ``req`` if every pool of it has room now (§2.3), else None."""
        amounts = req.spec.amounts(req.session)
        for pool, (_u, need) in zip(req.pools, amounts):
            if not pool.admits(req, need):
                return None
        return amounts

    # -- the fit rules: the one place each is written --------------------------------------

    def has_room(self, need: float) -> bool:
        """Whether ``need`` more units fit beside those in use (a growth, §2.7).
        Cached units never block: they are evicted to make room."""
        return self.used + need <= self.cap + EPS

    def admits(self, req: HoldRequest, need: float) -> bool:
        """Whether an admission of ``req`` needing ``need`` units (before
        rounding to blocks) fits this pool now (§2.3): the units rounded up
        beside those in use — on a shared prefix cache, only the part of its
        chain not already in use by other holds counts."""
        if self.used + self.round_up(need) <= self.cap + EPS:
            return True
        return self.shared is not None and req.spec.cache is not None and \
            self.used + self.shared_extra(req, need) <= self.cap + EPS

    def give_back(self, units: float) -> None:
        """``units`` in use are released (a residue within rounding of 0 is 0)."""
        used = self.used - units
        if used < EPS and used > -EPS:
            used = 0.0
        self.used = used

    def can_ever_hold(self, need: float) -> bool:
        """Whether ``need`` units (rounded up to blocks) fit the pool at all."""
        return self.round_up(need) <= self.cap + EPS

    def select(self) -> HoldRequest | None:
        """The waiting hold to try next: the head, or under ``queue by`` the
        smallest keys (ties in queue order); a preempted hold at the front first."""
        q = self.put_queue
        if not q:
            return None
        if self.queue_keys is None or q[0].front:
            return q[0]
        now = self.sim.env.now
        best, best_key = None, None
        for req in q:
            key = total_key(self.queue_keys(_SelectView(req, now)))
            if best_key is None or key < best_key:
                best, best_key = req, key
        return best

    def _do_put(self, req: HoldRequest) -> bool:
        """Admit ``req`` if it fits; whether the scan goes on."""
        amounts = self.fits(req)
        if amounts is None:
            return False
        self.unqueue(req)
        self.sim.holds.admit(req, amounts)
        return True

    def unqueue(self, req: HoldRequest) -> None:
        """``req`` leaves the queue (``Simulator.queued_pools`` counts the pools with a queue)."""
        q = self.put_queue
        q.remove(req)
        if not q:
            self.sim.queued_pools -= 1

    def _trigger_put(self, get_event: Any = None) -> None:
        """Admit from the queue while the selected hold fits (head-of-line blocking)."""
        while True:
            req = self.select()
            if req is None or not self._do_put(req):
                return


class _SelectView:
    """What a ``queue by`` key reads (moment Select): the waiting session's
    attributes and ``waited``."""

    __slots__ = ("a", "waited", "srng", "session")

    def __init__(self, req: HoldRequest, now: float) -> None:
        s = req.session
        self.a = s.a
        self.srng = s.srng
        self.session = s
        self.waited = now - req.joined

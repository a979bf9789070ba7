"""What a coalesced decode run knows of the waiting requests.

A run of decode iterations (:mod:`.coalesce`) may go on while requests wait
only if none of them could be admitted before the run's next change.  A
:class:`HeadAnalysis`, one per coalescing engine, works that out.  When the
engine is prepared it reads the program once: what each hold's header reads
(:func:`reads`, per pool of the hold), which pools' ``queue by`` keys read
nothing a run changes, and for each hold and blocking pool which caches its
other amounts read.  At each planned run (:meth:`HeadAnalysis.terms`) it
finds which amount of the waiting head blocks it and what would unblock it,
the same for every waiting request when a user's ``select_waiting`` or
``admit_next`` chooses (:class:`HeadSet`), and whether the head is still
blocked with another budget left (:meth:`HeadAnalysis.still_blocked`).
:func:`state_pools` and :func:`run_ordered` are the same analysis of the
stage's own ``budget``, ``chunk``, ``cost`` and ``serve by`` keys
(docs/simulator.md, "Coalesced decode runs").
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ... import expr, ir
from ...node import record

if TYPE_CHECKING:
    from .step import StepEngine


#: Context variables a `serve by` key may read and still order a run's
#: residents the same way at every iteration of it.
_RUN_CONSTANT_CTX = frozenset({"decoding", "admission", "residents", "decoders"})


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
    one token) stay the same.  A member of a family named by an index reads
    the whole family here (:class:`Picked` resolves it for one request)."""
    found = _reads(e, sim, engine)
    return found if found is None else found.fixed


@record(frozen=True)
class Picked:
    """What a header reads when some of it names family members by an index
    (``cachedin(kv[j])``, ``budget_left(engine[j])``): ``fixed``, the pools it
    reads whatever the request; ``pools`` and ``stages``, per indexed probe
    the family and its index as a function of the session.  A waiting
    request's session is suspended in the hold, so an index that reads only
    its attributes and constants names the same member until it is admitted
    (:meth:`of`).  ``room`` and the flag of each indexed pool: the pools it
    reads through ``used``, ``free`` or a chain's ``cachedin`` — the others
    it reads only through the session's own ``cachedin`` (:meth:`room_of`)."""

    fixed: frozenset[int]
    pools: tuple[tuple[list[Any], Callable[[Any], float], bool], ...] = ()
    stages: tuple[tuple[list[Any], Callable[[Any], float]], ...] = ()
    room: frozenset[int] = frozenset()

    def of(self, session: Any, engine: "StepEngine") -> frozenset[int] | None:
        """The pools the header reads for a request of ``session``, or None
        when its index names another engine's ``budget_left``, or is not a
        member (the attempt itself then raises the error)."""
        for family, index in self.stages:
            if _member(family, index(session)) is not engine:
                return None
        out = set(self.fixed)
        for family, index, _room in self.pools:
            member = _member(family, index(session))
            if member is None:
                return None
            out.add(id(member))
        return frozenset(out)

    def room_of(self, session: Any) -> frozenset[int]:
        """Of the pools :meth:`of` gives, those read through ``used``,
        ``free`` or a chain's ``cachedin`` (:meth:`of` checked the indices)."""
        if not any(room for _f, _i, room in self.pools):
            return self.room
        return self.room | {id(family[int(index(session))]) for family, index, room in self.pools if room}


def _member(family: list[Any], i: float) -> Any:
    """The member of ``family`` at index ``i``, or None when ``i`` is not a
    whole number in range (``compile.member``'s test, without its error)."""
    return family[int(i)] if i == i and 0 <= i < len(family) and float(i).is_integer() else None


def _by_attributes(index: ir.Expr) -> bool:
    """An index that reads only session attributes and constants."""
    return not any(isinstance(x, (ir.Draw, ir.Ctx, ir.Probe, ir.Agg)) for x in expr.walk(index))


def _reads(e: ir.Expr, sim: Any, engine: "StepEngine", index_fn: Callable[[ir.Expr], Callable[[Any], float]] | None = None
           ) -> Picked | None:
    """:func:`reads`, and with ``index_fn`` (which compiles an index) a
    member of a family named by the session's attributes as that member
    alone, resolved per request (:class:`Picked`)."""
    fixed: set[int] = set()
    room: set[int] = set()
    pools: list[tuple[list[Any], Callable[[Any], float], bool]] = []
    stages: list[tuple[list[Any], Callable[[Any], float]]] = []
    for x in expr.walk(e):
        if isinstance(x, (ir.Draw, ir.Ctx)):
            return None
        if isinstance(x, ir.Probe):
            t = x.target
            if isinstance(t, ir.PoolRef):
                if x.fn in ("used", "free", "cachedin"):
                    family = sim.pools[t.pool]
                    by_room = x.fn != "cachedin" or bool(x.args)
                    if index_fn is not None and t.index is not None and len(family) > 1 and _by_attributes(t.index):
                        pools.append((family, index_fn(t.index), by_room))
                    else:
                        fixed.update(id(p) for p in family)
                        if by_room:
                            room.update(id(p) for p in family)
            elif x.fn == "work":
                return None
            elif x.fn == "budget_left" and any(st is not engine for st in sim.stages[t.stage]):
                if index_fn is None or t.index is None or not _by_attributes(t.index):
                    return None
                stages.append((sim.stages[t.stage], index_fn(t.index)))
    return Picked(frozenset(fixed), tuple(pools), tuple(stages), frozenset(room))


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


def run_ordered(keys: Any) -> bool:
    """`serve by` keys that order a run's residents the same way at each of
    its iterations.  Each key reads nothing a run changes (no draw, no probe,
    no clock, no held memory, no ``remaining``), or is ``remaining`` itself
    or its negation: inside a run every resident's ``remaining`` falls by one
    whole token per iteration, exactly (the planner keeps to amounts below
    2**52), so the differences between residents, hence every comparison,
    stay what they were.  Other uses of ``remaining`` (scaled, offset, …)
    can reorder residents mid-run; their engine runs iteration by iteration."""
    for k in keys:
        while isinstance(k, ir.Unary) and k.op == "-":
            k = k.x
        if isinstance(k, ir.Ctx) and k.name == "remaining":
            continue
        if not run_constant(k):
            return False
    return True


def run_constant(e: ir.Expr) -> bool:
    """An expression read per resident that has the same value for each
    resident at every iteration of a run: it reads only ``decoding``,
    ``admission``, ``residents``, ``decoders``, attributes and constants."""
    for x in expr.walk(e):
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


#: What a hold the program does not contain reads: something that blocks a run.
_UNKNOWN: list[frozenset[int] | None] = [None]
#: :meth:`HeadAnalysis.terms`: (pools whose growth ends the run, pools whose growth makes the
#: head's header be evaluated again, the head, its blocking pool, whether requests wait in a
#: pool without `admit via`, pools where the run may grow only while its evictions stop short
#: of the head's cached prefix, which its blocking amount reads)
Terms = tuple[frozenset[int], frozenset[int], Any, int, bool, frozenset[int]]


class HeadAnalysis:
    """What the waiting requests let a coalesced run of ``engine`` do.

    Built when the engine is prepared: ``headers``, per hold (by id), what
    each pool's amount (units and reserve) reads (:class:`Picked`: a member
    of a family named by the session's attributes is resolved per waiting
    request, so in a cluster a request waiting for replica ``j`` reads
    ``kv[j]`` and ``budget_left(engine[j])``, not every replica's);
    ``steady_queues``, the pools whose ``queue by`` keys read
    nothing a run changes (so ``select()`` picks the same head at every
    iteration).  ``default_select`` and ``default_admit``: whether the
    engine's ``select_waiting`` and ``admit_next`` are its own."""

    __slots__ = ("engine", "sim", "default_select", "default_admit", "headers", "fixed", "steady_queues")

    def __init__(self, engine: "StepEngine", default_select: bool, default_admit: bool) -> None:
        self.engine = engine
        sim = self.sim = engine.sim
        self.default_select = default_select
        self.default_admit = default_admit
        holds: dict[int, ir.Hold] = {}
        _holds(sim.program.session, holds)
        indices: dict[ir.Expr, Callable[[Any], float]] = {}

        def index_fn(index: ir.Expr) -> Callable[[Any], float]:
            if index not in indices:
                indices[index] = expr.compile_expr(index, expr.Frame(sim.ns, attrs="c.a"))
            return indices[index]

        self.headers: dict[int, list[Picked | None]] = {
            hid: _header(st, sim, engine, index_fn) for hid, st in holds.items()}
        # (the holds whose headers name no member by an index: the same for every request)
        self.fixed = {hid: [None if r is None else r.fixed for r in rs] for hid, rs in self.headers.items()
                      if not any(r is not None and (r.pools or r.stages) for r in rs)}
        self.steady_queues = frozenset(
            id(p) for p in sim.all_pools if p.queue_keys is not None
            and all(r is not None and not r for r in (reads(k, sim, engine) for k in p.decl.queue)))

    def header(self, req: Any) -> list[frozenset[int] | None]:
        """Per pool of a waiting request's hold, what its units and reserve
        read (:func:`reads`, with the members its session's indices name)."""
        hid = req.spec.id
        fixed = self.fixed.get(hid)
        if fixed is not None:
            return fixed
        found = self.headers.get(hid)
        if found is None:
            return _UNKNOWN
        return [None if r is None else r.of(req.session, self.engine) for r in found]

    def changing(self, req: Any, k: int, reads_k: frozenset[int]) -> tuple[frozenset[int], frozenset[int]]:
        """Of the pools ``reads_k`` that the ``k``-th amount of the waiting
        ``req`` reads, those a run can change it through: ``(ends, kept)``.
        ``ends``: read through ``used``, ``free`` or a chain's ``cachedin``,
        or a cache a run cannot predict (shared, spilling, `evict by`): a
        growth there ends the run.  ``kept``: an LRU cache holding a prefix
        of its session, read only through its ``cachedin``: a run may grow
        there while its evictions take only entries ahead of that prefix
        (:meth:`PrefixCache.ahead_of`), or eat into it while the amount read
        at each prefix left still does not fit (:meth:`need_with`).  A pool where the session has no
        prefix is in neither: a prefix of 0 stays 0 while it waits (only its
        own release puts to its entry, and inside a run entries only shrink)."""
        if not reads_k:
            return reads_k, reads_k
        found = self.headers[req.spec.id][k]
        assert found is not None
        room = found.room_of(req.session)
        serial = req.session.serial
        by_id = self.sim.pool_by_id
        ends: set[int] = set()
        kept: set[int] = set()
        for pid in reads_k:
            pool = by_id[pid]
            cache = pool.cache
            if pid in room or pool.shared is not None:
                ends.add(pid)
            elif cache.size_of(serial) > 0.0:
                (kept if cache.keys is None and cache.spill is None else ends).add(pid)
        return frozenset(ends), frozenset(kept)

    def watch(self, req: Any, k: int, own: set[int]) -> list[Any] | None:
        """The pools whose ``cachedin`` the amounts of ``req`` other than the
        ``k``-th read (``own``: the pools they read), or None when they read a
        pool's ``used`` or ``free`` (or a chain's, or a shared cache's, ``cachedin``)."""
        header = self.headers[req.spec.id]
        if any(r is None or r.room_of(req.session) for j, r in enumerate(header) if j != k):
            return None
        found = [self.sim.pool_by_id[pid] for pid in own]  # (in any order: each is compared with itself)
        if any(p.shared is not None for p in found):
            return None  # a shared cache's `cachedin` moves with other sessions' releases
        return found

    def _head(self, pool: Any) -> Any:
        """The request ``pool.select()`` picks at every iteration of a run, or None
        when that choice could change (``queue by`` keys that read what changes)."""
        q = pool.put_queue
        if pool.queue_keys is None or q[0].front:
            return q[0]
        if id(pool) not in self.steady_queues:
            return None
        return pool.select()

    def terms(self) -> Terms | None:
        """Whether a run may go on with requests waiting, and on what terms
        (:data:`Terms`), or None when it may not.

        * A request in the queue of a pool without ``admit via`` is tried at every
          settle: its header must read nothing a run changes, so it fails as it
          just did (pools only fill up inside a run).
        * The head this engine tries after each iteration's residents (while
          tokens are left) must have a pool whose amount reads nothing the run
          changes before its end and does not fit now: it cannot fit later, as
          ``used`` only grows.  A growth in a pool that amount reads ends the run
          before it (``stop``).  Its other amounts are evaluated again at each
          iteration whose growths changed a pool they read (``recheck``), as the
          one-by-one attempt would (an error there is the same error).
        * With a user's ``select_waiting`` (the head not a preempted request) or
          ``admit_next``, every request it may choose must be so
          (:meth:`_none_admissible`): none can be admitted, whichever is chosen."""
        engine = self.engine
        stop: frozenset[int] = frozenset()
        xheads = False
        for pool in self.sim.all_pools:
            if pool.put_queue and pool.admit_via is None:
                xheads = True
                req = self._head(pool)
                if req is None:
                    return None
                for r in self.header(req):
                    if r is None or r:
                        return None
            elif pool.put_queue and pool not in engine.admit_pools and (self.sim.lazy is None or self.sim.lazy.off):
                return None  # another engine's: it is iterating or has no work (checked before)
                # (with runs that pass over other events, that engine's admissions are its own events)
        if not (engine.left > 0.0 and any(p.put_queue for p in engine.admit_pools)):
            return stop, frozenset(), None, 0, xheads, frozenset()  # no admission attempt in the run
        pool = next(p for p in engine.admit_pools if p.put_queue)
        if not self.default_admit:  # a user's admit_next: no waiting request may fit
            return self._none_admissible([r for p in engine.admit_pools for r in p.put_queue], xheads)
        if not self.default_select and not pool.put_queue[0].front:  # a user's select_waiting
            return self._none_admissible(pool.put_queue, xheads)
        req = self._head(pool)
        if req is None:
            return None
        header_reads = self.header(req)
        rs = [r for r in header_reads if r is not None]
        if len(rs) != len(header_reads):
            return None
        blocking = self._blocking_pool(req, rs)
        if blocking is None:
            return None
        rest: set[int] = set()  # (a pool the other amounts read only through a prefix of 0: never)
        for k, r in enumerate(rs):
            if k != blocking:
                moved, kept = self.changing(req, k, r)
                rest |= moved | kept
        ends, kept = self.changing(req, blocking, rs[blocking])
        # the head as a set of one: its other amounts are evaluated again only when what they read moved
        head = HeadSet(engine, [(req, blocking, self.watch(req, blocking, rest))])
        return stop | ends, frozenset(rest), head, 0, xheads, kept

    def _none_admissible(self, queue: Sequence[Any], xheads: bool) -> Terms | None:
        """:meth:`terms` when a user's ``select_waiting`` (or ``admit_next``)
        chooses among ``queue``: the run may go on only while none of them
        could be admitted, whichever the hook would choose.  Each must have a
        blocking amount as the default head must (pure, and not fitting now);
        a growth in a pool any blocking amount reads ends the run before it;
        the other amounts of all of them are evaluated again where the head's
        would be (:class:`HeadSet`)."""
        stop: set[int] = set()
        rest: set[int] = set()
        watched = []
        for req in queue:
            rs = self.header(req)
            if any(r is None for r in rs):
                return None
            k = self._blocking_pool(req, rs)
            if k is None:
                return None
            own: set[int] = set()
            for j, r in enumerate(rs):
                if j == k:
                    ends, kept = self.changing(req, k, r)  # type: ignore[arg-type]
                    stop |= ends | kept
                else:
                    own.update(r)  # type: ignore[arg-type]
            rest |= own
            watched.append((req, k, self.watch(req, k, own)))
        return frozenset(stop), frozenset(rest), HeadSet(self.engine, watched), 0, xheads, frozenset()

    def _blocking_pool(self, req: Any, rs: list[Any]) -> int | None:
        """The pool of ``req`` whose amount reads least and does not fit now
        (read with ``budget_left`` = the tokens left), or None."""
        engine = self.engine
        spec, s = req.spec, req.session
        engine.admitting_left = engine.left
        try:
            for k in sorted(range(len(rs)), key=lambda k: len(rs[k])):  # pure amounts first
                u, _r, need = spec.need(k, s)
                if not (u >= 0.0 and need >= 0.0):
                    return None
                if not req.pools[k].admits(req, need):
                    return k
        finally:
            engine.admitting_left = None
        return None

    def still_blocked(self, head: Any, blocking: int, left: float) -> bool:
        """Whether the head's ``blocking`` pool (pure amount, :meth:`terms`)
        still does not fit when the attempt reads ``budget_left = left`` (for
        a user's hook, every request's)."""
        if isinstance(head, HeadSet):
            return all(self._blocked_at(r, k, left) for r, k in head.blocking)
        return self._blocked_at(head, blocking, left)

    def need_with(self, req: Any, k: int, left: float, pool: Any, prefix: float) -> float | None:
        """The units the ``k``-th amount of ``req`` must fit in ``pool`` (rounded
        up to its blocks) were its session's cached prefix there ``prefix``
        (at most its entry's size now) and ``budget_left`` ``left``: that
        amount reads ``pool`` only through its ``cachedin`` (:meth:`changing`,
        ``kept``), and nothing else a run changes.  None when it is not a number
        ≥ 0 or its evaluation fails: one iteration at a time says so there."""
        entry = pool.cache.entries[req.session.serial]
        size = entry.size
        entry.size = prefix  # (what `cachedin` reads: put back before anything else runs)
        try:
            need = self._need(req, k, left)
        except Exception:  # noqa: BLE001  (the same evaluation at its time raises it to the user)
            return None
        finally:
            entry.size = size
        return None if need is None else pool.round_up(need)  # type: ignore[no-any-return]

    def _blocked_at(self, req: Any, k: int, left: float) -> bool:
        need = self._need(req, k, left)
        return need is not None and not req.pools[k].admits(req, need)

    def _need(self, req: Any, k: int, left: float) -> float | None:
        """The ``k``-th amount of ``req`` as its admission attempt reads it,
        with ``budget_left`` ``left``; None when it is not a number ≥ 0 (the
        attempt itself, at its time, reports that)."""
        engine = self.engine
        engine.admitting_left = left
        try:
            u, _r, need = req.spec.need(k, req.session)
        finally:
            engine.admitting_left = None
        return need if u >= 0.0 and need >= 0.0 else None


def _header(st: ir.Hold, sim: Any, engine: "StepEngine", index_fn: Callable[[ir.Expr], Callable[[Any], float]]
            ) -> list[Picked | None]:
    """Per pool of the hold ``st``, what its units and reserve read (:func:`_reads`)."""
    found: list[Picked | None] = []
    for hp in st.pools:
        r = _reads(hp.units, sim, engine, index_fn)
        if r is not None and hp.reserve is not None:
            r2 = _reads(hp.reserve, sim, engine, index_fn)
            r = None if r2 is None else Picked(r.fixed | r2.fixed, r.pools + r2.pools, r.stages + r2.stages,
                                               r.room | r2.room)
        found.append(r)
    return found


class HeadSet:
    """The waiting requests a user's hook chooses among, standing for the
    run's head: where a growth changed what their headers read, the replay
    evaluates ``head.spec.amounts(head.session)`` — here the amounts of every
    one whose inputs changed, in queue order, so an amount that became
    invalid is an error as when it is the one chosen (docs/simulator.md,
    "Coalesced decode runs").  A request whose other amounts read only its
    session's ``cachedin`` (besides what a run does not change) is evaluated
    again only when an eviction changed that (a prefix only shrinks inside a
    run: one of 0 never changes); one that reads ``used`` or ``free``, at
    every such event."""

    __slots__ = ("engine", "left", "blocking", "reqs", "always", "watched", "spec", "session", "caches", "totals")

    def __init__(self, engine: "StepEngine", watched: list[tuple[Any, int, list[Any] | None]]) -> None:
        self.engine = engine
        self.left = engine.left  # the budget_left the run's attempts read (a last iteration's may differ)
        self.blocking = [(req, k) for req, k, _pools in watched]
        self.reqs = [req for req, _k, _pools in watched]
        self.always = [i for i, (_r, _k, pools) in enumerate(watched) if pools is None]
        # (queue index, request, pools, their cached prefixes of its session) where one is > 0
        self.watched = []
        for i, (req, _k, pools) in enumerate(watched):
            if pools is not None:
                sizes = _cached(req, pools)
                if any(sizes):
                    self.watched.append((i, req, pools, sizes))
        self.spec = self
        self.session = None
        # an entry shrinks only by eviction inside a run, which lowers its cache's total
        self.caches = list({id(p.cache): p.cache for _i, _r, pools, _s in self.watched for p in pools}.values())
        self.totals = [c.total for c in self.caches]

    def amounts(self, _s: Any) -> None:
        reqs = self.reqs
        if self.engine.admitting_left != self.left:  # another budget_left: every one reads it anew
            for req in reqs:
                req.spec.amounts(req.session)
            return
        due = list(self.always)
        totals = [c.total for c in self.caches]
        if totals != self.totals:
            self.totals = totals
            watched = self.watched
            for n, (i, req, pools, seen) in enumerate(watched):
                now = _cached(req, pools)
                if now != seen:
                    due.append(i)
                    watched[n] = (i, req, pools, now)
            due.sort()
        for i in due:
            req = reqs[i]
            req.spec.amounts(req.session)


def _cached(req: Any, pools: list[Any]) -> list[float]:
    serial = req.session.serial
    return [p.cache.size_of(serial) for p in pools]

"""What a coalesced decode run knows of the waiting requests.

A run of decode iterations (:mod:`.coalesce`) may go on while requests wait
only if none of them could be admitted before the run's next change.  This
module works that out: which pools an expression reads (:func:`reads`,
:func:`state_pools`), which amount of the waiting head blocks it and what
would unblock it (:func:`_waiting`, :func:`_blocking_pool`), the same for
every waiting request when a user's ``select_waiting`` or ``admit_next``
chooses (:func:`_none_admissible`, :class:`_Heads`), and whether the head is
still blocked when a growth changed what its header reads
(:func:`_still_blocked`).  The functions take the engine as ``self``, as
:mod:`.coalesce`'s do (docs/simulator.md, "Coalesced decode runs").
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence

from ... import expr, ir

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
      one-by-one attempt would (an error there is the same error).
    * With a user's ``select_waiting`` (the head not a preempted request) or
      ``admit_next``, every request it may choose must be so
      (:func:`_none_admissible`): none can be admitted, whichever is chosen."""
    sim = self.sim
    stop: frozenset[int] = frozenset()
    self._xheads = False
    for pool in sim.all_pools:
        if pool.put_queue and pool.admit_via is None:
            self._xheads = True
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
    pool = next(p for p in self.admit_pools if p.put_queue)
    if not self._default_admit:  # a user's admit_next: no waiting request may fit
        return _none_admissible(self, [r for p in self.admit_pools for r in p.put_queue])
    if not self._default_select and not pool.put_queue[0].front:  # a user's select_waiting
        return _none_admissible(self, pool.put_queue)
    req = _head(self, pool)
    if req is None:
        return None
    header_reads = header(self, req.spec)
    rs = [r for r in header_reads if r is not None]
    if len(rs) != len(header_reads):
        return None
    blocking = _blocking_pool(self, req, rs)
    if blocking is None:
        return None
    self._blocking = blocking
    rest: set[int] = set()
    for k, r in enumerate(rs):
        if k != blocking:
            rest |= r  # type: ignore[arg-type]
    return stop | rs[blocking], frozenset(rest), req  # type: ignore[operator]


def _none_admissible(self: "StepEngine", queue: Sequence[Any]) -> tuple[frozenset[int], frozenset[int], Any] | None:
    """:func:`_waiting`'s terms when a user's ``select_waiting`` (or
    ``admit_next``) chooses among ``queue``: the run may go on only while
    none of them could be admitted, whichever the hook would choose.  Each
    must have a blocking amount as the default head must (pure, and not
    fitting now); a growth in a pool any blocking amount reads ends the run
    before it; the other amounts of all of them are evaluated again where
    the head's would be (:class:`_Heads`)."""
    stop: set[int] = set()
    rest: set[int] = set()
    watched = []
    for req in queue:
        rs = header(self, req.spec)
        if any(r is None for r in rs):
            return None
        k = _blocking_pool(self, req, rs)
        if k is None:
            return None
        own: set[int] = set()
        for j, r in enumerate(rs):
            (stop if j == k else own).update(r)  # type: ignore[arg-type]
        rest |= own
        watched.append((req, k, _watch(self, req.spec, k, own)))
    return frozenset(stop), frozenset(rest), _Heads(self, watched)


def _watch(self: "StepEngine", spec: Any, k: int, ids: set[int]) -> list[Any] | None:
    """The pools whose ``cachedin`` the amounts of ``spec`` other than the
    ``k``-th read, or None when they read a pool's ``used`` or ``free``."""
    key = (spec.id, k)
    found = self._watch_pools.get(key, False)
    if found is False:
        st = self._hold_ir[spec.id]
        room = any(isinstance(x, ir.Probe) and isinstance(x.target, ir.PoolRef) and x.fn in ("used", "free")
                   for j, hp in enumerate(st.pools) if j != k
                   for e in (hp.units, hp.reserve) if e is not None for x in expr.walk(e))
        found = None if room else [p for p in self.sim.all_pools if id(p) in ids]
        if found and any(p.shared is not None for p in found):
            found = None  # a shared cache's `cachedin` moves with other sessions' releases
        self._watch_pools[key] = found
    return found  # type: ignore[return-value]


def _blocking_pool(self: "StepEngine", req: Any, rs: list[Any]) -> int | None:
    """The pool of ``req`` whose amount reads least and does not fit now
    (read with ``budget_left`` = the tokens left), or None."""
    spec, s = req.spec, req.session
    self.admitting_left = self.left
    try:
        for k in sorted(range(len(rs)), key=lambda k: len(rs[k])):  # pure amounts first
            u, _r, need = spec.need(k, s)
            if not (u >= 0.0 and need >= 0.0):
                return None
            if not req.pools[k].admits(req, need):
                return k
    finally:
        self.admitting_left = None
    return None


class _Heads:
    """The waiting requests a user's hook chooses among, standing for the
    run's head: where a growth changed what their headers read, ``replay``
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


# -- a run ----------------------------------------------------------------------------------

def _still_blocked(self: "StepEngine", req: Any, left: float) -> bool:
    """Whether the head's blocking pool (pure amount, :func:`_waiting`) still
    does not fit when the attempt reads ``budget_left = left`` (for a user's
    hook, every request's)."""
    if isinstance(req, _Heads):
        return all(_blocked_at(self, r, k, left) for r, k in req.blocking)
    return _blocked_at(self, req, self._blocking, left)


def _blocked_at(self: "StepEngine", req: Any, k: int, left: float) -> bool:
    self.admitting_left = left
    try:
        u, _r, need = req.spec.need(k, req.session)
    finally:
        self.admitting_left = None
    if not (u >= 0.0 and need >= 0.0):
        return False
    return not req.pools[k].admits(req, need)

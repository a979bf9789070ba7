"""A router's ``choose`` without reading every replica at every request.

``choose j in n by (outstanding(reqs[j]), ~uniform(0, 1))`` evaluates its
first key for every candidate: N key reads a request, so a cluster's routing
costs N² over a run.  When the keys before a random last key (or all the keys,
when none draws) read nothing but ``holders`` and ``queued`` of pool members
indexed by the candidate itself (``reqs[j]``), candidate ``j``'s keys change
only when those members change, and every change of a pool's holders or queue
is followed by its ``Pool.record`` (serq/sim/pool.py).  An :class:`Index` keeps
each candidate's keys, the candidates grouped by keys (a bucket each) and a
heap of the keys present; a pool's ``record`` marks its candidates stale, and a
choice reads again only the stale ones, then takes the bucket of the smallest
keys.  Ties go as the candidate-by-candidate loop sends them
(:meth:`Session.choose`, serq/sim/choose.py): to the smallest last key drawn
from the session's stream (the ``j``-th value for candidate ``j``; the stream
moved on by ``n``), equal draws to the smaller ``j``; with no random key, to
the smallest ``j``.  The index serves only a choice over the whole family
(``n`` its size) on keys that are never NaN; anything else is the loop.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any, Callable

from .. import expr, ir
from .choose import _nth
from .rng import _GAMMA, _M, _UNIT, _mix_array

if TYPE_CHECKING:
    from .simulator import Simulator

#: probes whose value depends on the pool alone and changes only with its holders or queue
LOCAL_PROBES = ("holders", "queued")
#: tied candidates from this many on have their draws worked out in NumPy
ARRAY_TIES = 24
#: tests: every indexed choice is checked against the loop (the same candidate and stream)
CHECK = False


def build(sim: "Simulator", program: ir.Program) -> dict[int, tuple[Any, "Index"]]:
    """The indexed ``choose`` statements, by ``id`` of their label (with the
    label): those whose keys :func:`_families` accepts, with the plan of their
    random last key (``sim.choose_plans``) or no draw at all.  Statements with
    the same keys share one index; a label two statements of different keys
    share is left out."""
    found: dict[int, tuple[Any, Any]] = {}
    shared: dict[tuple, Index] = {}
    for block in (program.init, program.turn or (), program.session):
        for st in ir.walk_blocks(block):
            if not isinstance(st, ir.Choose):
                continue
            key = id(st.label)
            got = _index(sim, st, shared)
            if key in found and (found[key][1] is None or got is not found[key][1]):
                got = None
            found[key] = (st.label, got)
    return {k: (label, ix) for k, (label, ix) in found.items() if ix is not None}


def _index(sim: "Simulator", st: ir.Choose, shared: dict[tuple, "Index"]) -> "Index | None":
    planned = sim.choose_plans.get(id(st.label))
    plan = planned[1] if planned is not None and planned[0] is st.label else None
    keys = st.keys[:-1] if plan is not None else st.keys
    if not keys or (plan is None and any(expr.draws(k) for k in keys)):
        return None
    fams: set[int] = set()
    for k in keys:
        got = _families(k, st.slot)
        if got is None:
            return None
        fams |= got
    if not fams:
        return None  # (keys that read no pool: constants, nothing to keep)
    sizes = {len(sim.pools[f]) for f in fams}
    if len(sizes) != 1:
        return None
    sig = (st.slot, keys, plan)
    ix = shared.get(sig)
    if ix is None:
        members = [sim.pools[f] for f in sorted(fams)]
        ix = shared[sig] = Index(sizes.pop(), members, plan)
    return ix


def _families(e: ir.Expr, slot: int) -> set[int] | None:
    """The pool families whose member ``[j]`` (``j`` the choice's slot) ``e``
    reads with a :data:`LOCAL_PROBES` probe, or None when ``e`` reads anything
    else (another attribute, a context value, a draw, a stage, another member)."""
    if isinstance(e, ir.Num):
        return set()
    if isinstance(e, ir.Probe):
        t = e.target
        if e.fn not in LOCAL_PROBES or e.args or not isinstance(t, ir.PoolRef) \
                or not (isinstance(t.index, ir.Attr) and t.index.slot == slot):
            return None
        return {t.pool}
    if isinstance(e, (ir.Unary, ir.Binary, ir.Cond, ir.Call)):
        out: set[int] = set()
        for sub in expr.children(e):
            got = _families(sub, slot)
            if got is None:
                return None
            out |= got
        return out
    return None


class Index:
    """Each candidate's keys, kept (see the module)."""

    def __init__(self, n: int, families: list[list[Any]], plan: tuple[float, float] | None) -> None:
        self.n = n
        self.plan = plan
        self.values: list[Any] = [None] * n
        #: keys → the candidates that have them
        self.buckets: dict[Any, set[int]] = {}
        #: the keys of the buckets, and of buckets emptied since (dropped when they reach the top)
        self.heap: list[Any] = []
        self.in_heap: set[Any] = set()
        #: candidates whose keys may have changed since they were read (all, at first)
        self.stale: list[int] = list(range(n))
        self.is_stale = bytearray(b"\x01") * n
        self.nans = 0  # candidates whose keys hold a NaN: the loop decides while any does
        for members in families:
            for j, pool in enumerate(members):
                pool.keyed += ((self, j),)

    def mark(self, j: int) -> None:
        """Candidate ``j``'s pool changed (``Pool.record``)."""
        if not self.is_stale[j]:
            self.is_stale[j] = 1
            self.stale.append(j)

    def spoil(self) -> None:
        """Every candidate stale (a reading failed half way)."""
        self.stale = list(range(self.n))
        self.is_stale = bytearray(b"\x01") * self.n

    def _refresh(self, s: Any, keys: tuple[Callable[[Any], float], ...], slot: int) -> None:
        a = s.a
        values = self.values
        buckets = self.buckets
        one = keys[0] if len(keys) == 1 else None
        stale = self.stale
        while stale:
            j = stale[-1]
            a[slot] = float(j)
            k: Any = one(s) if one is not None else tuple([f(s) for f in keys])
            old = values[j]
            stale.pop()
            self.is_stale[j] = 0
            if old is not None and (old == k and not _has_nan(old)):
                continue
            if old is not None:
                if _has_nan(old):
                    self.nans -= 1
                else:
                    b = buckets[old]
                    b.discard(j)
                    if not b:
                        del buckets[old]
            values[j] = k
            if _has_nan(k):
                self.nans += 1
                continue
            got = buckets.get(k)
            if got is None:
                buckets[k] = {j}
                if k not in self.in_heap:
                    self.in_heap.add(k)
                    heappush(self.heap, k)
            else:
                got.add(j)

    def choose(self, s: Any, n: int, keys: tuple[Callable[[Any], float], ...], slot: int) -> float | None:
        """The candidate :meth:`Session.choose` would pick, the stream moved on
        as it would be; None when the index does not serve this choice (``n``
        is not the family's size, or a key is NaN): the loop decides."""
        if n != self.n or n == 0:
            return None
        plan = self.plan
        firsts = keys[:-1] if plan is not None else keys
        if self.stale:
            try:
                self._refresh(s, firsts, slot)
            except Exception:  # (the loop raises it, at the candidate it reaches first)
                self.spoil()
                return None
        if self.nans:
            return None
        heap, buckets = self.heap, self.buckets
        while heap[0] not in buckets:
            self.in_heap.discard(heappop(heap))
        tied = buckets[heap[0]]
        if plan is None:
            return float(min(tied))
        g = s.srng
        s0 = g._s
        if s0 < 0:  # (a stream keyed on its first draw: keyed now, as the loop keys it)
            g.random()
            s0 = (g._s - _GAMMA) & _M
        g._s = (s0 + n * _GAMMA) & _M  # (the stream as after n draws)
        if len(tied) == 1:
            for j in tied:
                return float(j)
        return float(_first_least(s0, sorted(tied), plan))


def _has_nan(k: Any) -> bool:
    if type(k) is tuple:
        return any(x != x for x in k)
    return k != k  # type: ignore[no-any-return]


def _first_least(s0: int, js: list[int], plan: tuple[float, float]) -> int:
    """Of candidates ``js`` (ascending), the first whose draw ``lo + (hi − lo)·u_j``
    is the least, compared as the loop compares them (``u < best`` moves on)."""
    lo, hi = plan
    width = hi - lo
    if len(js) >= ARRAY_TIES and -1e308 < lo < 1e308 and -1e308 < width < 1e308:
        import numpy as np  # (a cluster's: imported at its first wide tie)

        u = np.uint64
        z = (np.array(js, dtype=np.uint64) + u(1)) * u(_GAMMA) + u(s0)  # (wraps modulo 2^64, as & _M)
        x = (_mix_array(z, u) >> u(11)).astype(np.float64) * _UNIT  # (53-bit integers: exact)
        return js[int(np.argmin(lo + width * x))]  # (the first least; no NaN from finite bounds)
    best_j = js[0]
    best_u = lo + width * _nth(s0, best_j)
    for j in js[1:]:
        u_j = lo + width * _nth(s0, j)
        if u_j < best_u:
            best_j, best_u = j, u_j
    return best_j


"""The per-session prefix cache of one pool (semantics §3).

One entry per (pool, session serial) at most; entries outlive their session.
An entry remembers its size, its release time and a release sequence number
(which breaks ties between releases at one instant), the owner (while it
lives) and a snapshot of the owner's attributes at release, which eviction
keys read once the owner has ended.  *Dead* entries are the part of a
consumed prefix past a ``reuse`` bound: nobody can read them back, they are
only evicted.

Eviction takes from the entry with the smallest key, tail first: one block at
a time when the pool has ``block``, the whole entry otherwise (§3.3).  Under
LRU the key is (release time, release sequence); since both only grow,
insertion order *is* LRU order for live entries, and the oldest entry is the
first of the dict.  Dead entries keep the key of the entry they came from, so
they are kept in a heap of their own keys.

:meth:`PrefixCache.make_room` gives the same result as taking one block at a
time and searching the victim again after each (:meth:`evict_one`), but
faster: a victim's key does not change while blocks are taken from it (unless
an ``evict by`` key reads ``size``), so it is drained until the shortfall is
covered, in one step when every amount is an integer (then ``k`` subtractions
of a block equal one subtraction of ``k`` blocks exactly) and block by block
otherwise; the next victim comes from the dict's head and the dead heap (LRU)
or from a heap of the keys evaluated once per call (``evict by``).  Keys that
draw, or read ``cachedin``, are evaluated for every entry before every block,
as the rule is written.
"""

from __future__ import annotations

import math
from math import fmod, ulp
from heapq import heapify, heappop, heappush, heapreplace
from typing import TYPE_CHECKING, Any, Callable

from .order import total_key

if TYPE_CHECKING:
    from .session import Session
    from .spill import Spiller

EPS = 1e-9
_BIG = 2.0**50  # integers up to this size: sums of three stay exact in a float
_DEAD = 1 << 62  # a dead entry's scan order: after every live one

# how `evict by` keys may be evaluated (see `classify`)
LRU, STABLE, SIZED, SCAN = "lru", "stable", "sized", "scan"


class Entry:
    __slots__ = ("size", "last", "seq", "snap", "owner", "memo", "order")

    def __init__(self, size: float, last: float, seq: int, snap: list[float], owner: "Session | None",
                 order: int = 0) -> None:
        self.size = size
        self.last = last
        self.seq = seq
        self.snap = snap
        self.owner = owner
        #: its `evict by` key with the size and `waiting` it was read at (``PrefixCache.memo``);
        #: None once it left the cache
        self.memo: tuple[float, float, tuple] | None = None
        #: its place in the scan of the cache (live entries in release order, then dead ones)
        self.order = order


class EvictView:
    """What an ``evict by`` key reads (moment Evict): the entry's ``size``,
    ``age``, ``last``, ``waiting`` and its owner's attributes (live values, or
    the snapshot taken at release once the owner has ended)."""

    __slots__ = ("a", "size", "age", "last", "waiting", "srng")

    def __init__(self, entry: Entry, now: float, stream: Any) -> None:
        owner = entry.owner
        self.a = owner.a if owner is not None and not owner.ended else entry.snap
        self.waiting = _waiting(owner)
        self.size = entry.size
        self.last = entry.last
        self.age = now - entry.last
        self.srng = stream


def _waiting(owner: "Session | None") -> float:
    """``waiting`` of an entry: 1 while its owner (alive) waits in a pool's queue."""
    return 1.0 if owner is not None and not owner.ended and owner.queued_at is not None else 0.0


def classify(exprs: Any) -> str:
    """How the ``evict by`` keys ``exprs`` (IR expressions) may be evaluated
    during one :meth:`PrefixCache.make_room`, where nothing but the cache
    changes: ``STABLE`` — each entry's key is fixed; ``SIZED`` — only the
    victim's key changes, as it reads ``size``; ``SCAN`` — a key draws (every
    evaluation moves the eviction stream) or reads ``cachedin`` (another
    entry's size): every key is evaluated before every block."""
    from .. import ir
    from ..expr import walk

    kind = STABLE
    for e in exprs:
        for x in walk(e):
            if isinstance(x, ir.Draw) or (isinstance(x, ir.Probe) and x.fn == "cachedin"):
                return SCAN
            if isinstance(x, ir.Ctx) and x.name == "size":
                kind = SIZED
    return kind


def _reads(exprs: Any, name: str) -> list[int]:
    """The indices of the expressions that read the context variable ``name``."""
    from .. import ir
    from ..expr import walk

    return [j for j, e in enumerate(exprs) if any(isinstance(x, ir.Ctx) and x.name == name for x in walk(e))]


def _reads_only(exprs: Any, names: tuple[str, ...]) -> bool:
    """Whether the keys ``exprs`` read nothing of the entry or the run but the
    context variables ``names``: no attribute, draw, probe or other variable."""
    from .. import ir
    from ..expr import walk

    for e in exprs:
        for x in walk(e):
            if isinstance(x, (ir.Attr, ir.Draw, ir.Probe)) or (isinstance(x, ir.Ctx) and x.name not in names):
                return False
    return True


def size_direction(exprs: Any) -> int:
    """+1 when exactly one of the ``evict by`` keys ``exprs`` reads ``size`` and
    never falls as ``size`` grows, −1 when it never rises, 0 otherwise.  A key
    built from ``size`` by negation, adding or subtracting what does not read
    it, and multiplying or dividing by a number is monotone, in floats too
    (rounding is monotone)."""
    from .. import ir

    def reads(e: Any) -> bool:
        return bool(_reads([e], "size"))

    def direction(e: Any) -> int:
        if isinstance(e, ir.Ctx) and e.name == "size":
            return 1
        if isinstance(e, ir.Unary) and e.op == "-":
            return -direction(e.x)
        if isinstance(e, ir.Binary) and e.op in ("+", "-"):
            if reads(e.a) and not reads(e.b):
                return direction(e.a)
            if reads(e.b) and not reads(e.a):
                return direction(e.b) * (1 if e.op == "+" else -1)
        if isinstance(e, ir.Call) and e.fn == "sum":  # an aggregate: the one term that reads size
            sized = [x for x in e.args if reads(x)]
            return direction(sized[0]) if len(sized) == 1 else 0
        if isinstance(e, ir.Binary) and e.op in ("*", "/") and isinstance(e.b, ir.Num) and math.isfinite(e.b.value):
            return direction(e.a) * (1 if e.b.value > 0 else -1 if e.b.value < 0 else 0)
        if isinstance(e, ir.Binary) and e.op == "*" and isinstance(e.a, ir.Num) and math.isfinite(e.a.value):
            return direction(e.b) * (1 if e.a.value > 0 else -1 if e.a.value < 0 else 0)
        return 0

    sized = _reads(exprs, "size")
    return direction(exprs[sized[0]]) if len(sized) == 1 else 0


def _exact(x: float) -> bool:
    """``x`` is an integer small enough that sums of three such stay exact."""
    return -_BIG <= x <= _BIG and x == int(x)


def _whole(xs: list[float]) -> bool:
    """Every ``x`` of ``xs`` (floats) is an integer."""
    try:
        return all(map(float.is_integer, xs))
    except TypeError:  # not floats
        return all(map(_exact, xs))


class PrefixCache:
    """The entries of one pool and the order in which they go."""

    def __init__(self, block: float | None, keys: Callable[[EvictView], tuple] | None, stream: Any,
                 kind: str | None = None) -> None:
        self.block = block
        self._int_block = block is not None and 0.0 < block <= _BIG and _exact(block)
        # every size put so far, and `total` after it, an integer up to _BIG (sticky): then every
        # size, piece, `total` and `evict(u)` (while ≤ _BIG) is an integer, exactly
        self._ints = True
        #: every size put so far a whole number of blocks (sticky): then with `_ints` every piece an
        #: eviction takes is a whole block, every size and `total` stays on the block's grid
        self._grid = self._int_block
        self._cap = math.nan  # the last cap seen, and whether it is an integer up to _BIG
        self._cap_exact = False
        self.keys = keys  # None: LRU
        self.stream = stream
        # LRU, or how `evict by` keys are evaluated; None: not known yet (the pool classifies its keys)
        self.kind = LRU if keys is None else kind
        #: a heap of the entries by the keys may serve the growths of a whole run (:meth:`by_keys`)
        self.lasting = False
        #: under SIZED keys, how the one key element that reads ``size`` moves with it (+1, −1; 0:
        #: unknown, or several read it): :func:`size_direction`; and (its index, its function)
        self.size_dir = 0
        self.size_key: tuple[int, Callable[[EvictView], float]] | None = None
        #: that element is ``-size`` itself: entries drain a round at a time (:meth:`_rounds`)
        self.neg_size = False
        #: the keys read nothing but ``size``, ``waiting`` and ``last``: an entry's key is kept
        #: with the size and ``waiting`` it was read at, and read again only when one changed;
        #: then one heap of victims lasts from one eviction to the next (:meth:`victims`): an
        #: entry put, or whose owner starts or stops waiting (:meth:`touch`), is keyed again
        #: at the next eviction, and an item whose entry was keyed since is dropped when it surfaces
        self.memo = False
        self._heap: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]] = []
        #: the members of the last drain's round (:meth:`_rounds`), keyed anew, in their order, kept
        #: out of the heap they belong to (``_level_of``) until the next drain takes them up again
        self._level: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]] | None = None
        self._level_of: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]] | None = None
        self._dirty: list[tuple[dict[int, Entry], int]] = []
        self._puts = 0  # live entries put so far: their scan order
        self.entries: dict[int, Entry] = {}  # serial → entry, in release order
        self.dead: dict[int, Entry] = {}  # in insertion order
        self._dead_heap: list[tuple[float, int, int]] = []  # LRU: (last, seq, id) of dead entries, lazily deleted
        self._next_dead = 0
        self.total = 0.0  # `cached`: the sum of the sizes, dead entries included
        self.evicted_entries = 0
        self.evicted_units = 0.0
        #: the pool's ``spill`` (``Spiller``): told of every live piece evicted, one at a time
        self.spill: Spiller | None = None

    @classmethod
    def by_keys(cls, block: float | None, exprs: Any, fns: list[Callable[[EvictView], float]],
                keys: Callable[[EvictView], tuple], stream: Any) -> "PrefixCache":
        """The cache of a pool with ``evict by`` keys: ``exprs`` (IR), each
        compiled (``fns``) and together (``keys``), read once here: how they
        may be evaluated (:func:`classify`); whether a heap of entries by them
        stays right across a decode run's growths (``lasting``: not ``SCAN``
        and no ``age``, the clock moving between the growths while nothing
        else a key reads changes inside a run); and the one key that reads
        ``size``, if one alone does, with its direction (:func:`size_direction`)."""
        kind = classify(exprs)
        cache = cls(block, keys, stream, kind)
        cache.lasting = kind != SCAN and not _reads(exprs, "age")
        cache.memo = _reads_only(exprs, ("size", "waiting", "last"))
        sized = _reads(exprs, "size")
        if len(sized) == 1:
            from .. import ir

            cache.size_key = (sized[0], fns[sized[0]])
            cache.size_dir = size_direction(exprs)
            e = exprs[sized[0]]
            cache.neg_size = (isinstance(e, ir.Unary) and e.op == "-" and isinstance(e.x, ir.Ctx)
                              and e.x.name == "size")
        return cache

    def size_of(self, serial: int) -> float:
        e = self.entries.get(serial)
        return e.size if e is not None else 0.0

    def ahead_of(self, serial: int, enough: float) -> float:
        """Under LRU, the units of the live entries evicted before any unit of
        ``serial``'s — or a part of them of at least ``enough`` units, the
        scan stopping there (0 under `evict by` keys, or without an entry).
        Dead entries with smaller keys go first too; they are not counted."""
        if self.keys is not None or serial not in self.entries:
            return 0.0
        total = 0.0
        for k, e in self.entries.items():
            if k == serial or total >= enough:
                break
            total += e.size
        return total

    def drained_first(self, serial: int, used: float, cap: float) -> float | None:
        """The size of ``serial``'s entry when growths from ``used`` (whole
        units) under ``cap`` evict it first and by whole blocks in exact sums:
        an LRU cache with nothing dead or spilling, every amount an integer,
        that entry the oldest.  Then a pool grown to ``u`` holds
        ``size − b·⌈(u + total − cap) / b⌉`` of it (none when that is not
        positive), whatever the growths in between (:meth:`_take_blocks`
        takes the blocks covering each shortfall).  None otherwise."""
        entries = self.entries
        if not (self.keys is None and self.spill is None and not self._dead_heap and self._ints
                and self._int_block and _exact(cap) and _exact(used) and used + self.total <= cap
                and self.evicted_units + self.total <= _BIG and entries and next(iter(entries)) == serial):
            return None
        return entries[serial].size

    def put(self, serial: int, size: float, now: float, seq: int, snap: list[float], owner: "Session") -> None:
        """The entry of ``serial`` becomes ``size`` units released now."""
        entries = self.entries
        old = entries.pop(serial, None)
        if old is not None:
            self.total -= old.size
            old.memo = None
        entries[serial] = Entry(size, now, seq, snap, owner, self._puts)
        self._puts += 1
        if self.memo:
            self._dirty.append((entries, serial))
        self._added(size)

    def _added(self, size: float) -> None:
        """``size`` units joined the cache (an entry put, or a dead part): the
        total, and whether every amount is still an integer (``_ints``) and
        every size still whole blocks (``_grid``)."""
        self.total += size
        if self._ints and not (_exact(size) and _exact(self.total)):
            self._ints = False
        if self._grid and fmod(size, self.block) != 0.0:  # type: ignore[arg-type]
            self._grid = False

    def append(self, serial: int, piece: float, now: float, seq: int, like: Entry) -> None:
        """A spilled ``piece`` of ``like`` (another pool's entry) joins the entry
        of ``serial`` here, which is released now: the owner's, with its
        attributes as they were at the first piece (docs/offload.md)."""
        old = self.entries.get(serial)
        size = piece if old is None else old.size + piece
        snap = like.snap if old is None else old.snap
        self.put(serial, size, now, seq, snap, like.owner)  # type: ignore[arg-type]

    def take(self, serial: int) -> Entry | None:
        """Remove and return the entry of ``serial`` (consumption or ``drop``)."""
        e = self.entries.pop(serial, None)
        if e is not None:
            self.total -= e.size
            e.memo = None
        return e

    def touch(self, serial: int) -> None:
        """The owner of ``serial``'s entry starts or stops waiting: under kept
        keys (``memo``) its key is read again at the next eviction."""
        if serial in self.entries:
            self._dirty.append((self.entries, serial))

    def put_dead(self, like: Entry, size: float) -> None:
        """Units past a ``reuse`` bound: cached, evictable, readable by nobody."""
        k = self._next_dead
        self.dead[k] = Entry(size, like.last, like.seq, like.snap, None, _DEAD + k)
        if self.keys is None:
            heappush(self._dead_heap, (like.last, like.seq, k))
        elif self.memo:
            self._dirty.append((self.dead, k))
        self._next_dead += 1
        self._added(size)

    # -- eviction -----------------------------------------------------------

    def _lru_victim(self) -> tuple[dict[int, Entry], int] | None:
        """The live entry first in the dict, unless a dead entry's key is
        smaller (a live one wins a tie, as the scan it replaces did)."""
        heap = self._dead_heap
        dead = self.dead
        while heap and heap[0][2] not in dead:
            heappop(heap)
        entries = self.entries
        if entries:
            serial = next(iter(entries))
            if heap:
                e = entries[serial]
                top = heap[0]
                if (top[0], top[1]) < (e.last, e.seq):
                    return dead, top[2]
            return entries, serial
        if heap:
            return dead, heap[0][2]
        return None

    def _victim(self, now: float) -> tuple[dict[int, Entry], int] | None:
        if self.keys is None:
            return self._lru_victim()
        best = None
        best_key2: tuple | None = None
        for store in (self.entries, self.dead):
            for k, e in store.items():
                key = total_key((*self.keys(EvictView(e, now, self.stream)), e.seq))
                if best_key2 is None or key < best_key2:
                    best, best_key2 = (store, k), key
        return best

    def _take_piece(self, store: dict[int, Entry], key: int, e: Entry) -> bool:
        """Evict one piece (a block, or the whole entry) of ``e``; whether it is gone."""
        piece = min(self.block, e.size) if self.block is not None else e.size
        e.size -= piece
        gone = e.size <= EPS
        if gone:
            del store[key]
            e.memo = None
            self.evicted_entries += 1
        self.total -= piece
        self.evicted_units += piece
        return gone

    def evict_one(self, now: float) -> bool:
        """Evict one piece (a block, or a whole entry); False if nothing is cached."""
        found = self._victim(now)
        if found is None:
            return False
        self._take_piece(found[0], found[1], found[0][found[1]])
        return True

    def _drain(self, store: dict[int, Entry], key: int, e: Entry, used: float, need: float, cap: float) -> bool:
        """Take pieces of ``e`` while ``used + cached + need > cap + ε``, as
        :meth:`evict_one` would with ``e`` the victim each time; whether ``e``
        is gone.  With integer amounts, ``k`` blocks go in one subtraction."""
        b = self.block
        if b is None:
            return self._take_piece(store, key, e)
        total = self.total
        eu = self.evicted_units
        if cap != self._cap:
            self._cap = cap
            self._cap_exact = _exact(cap)
        if (self._ints and self._int_block and self._cap_exact and eu <= _BIG
                and -_BIG <= used <= _BIG and used == int(used) and -_BIG <= need <= _BIG and need == int(need)):
            # every sum below is exact; used + cached + need > cap + ε  ⇔  > cap for integers
            return self._take_blocks(store, key, e, int(used + total + need - cap))
        limit = cap + EPS
        while True:
            if self._take_piece(store, key, e):
                return True
            if not used + self.total + need > limit:
                return False

    def _take_blocks(self, store: dict[int, Entry], key: int, e: Entry, short: int) -> bool:
        """The whole blocks of ``e`` that cover an integer shortfall ``short`` >
        0, or all of ``e``, in one subtraction (every amount an integer whose
        sums are exact: the caller checked); whether ``e`` is gone."""
        b = self.block
        s = e.size
        bi = int(b)  # type: ignore[arg-type]
        k = -(-short // bi)  # blocks that cover the shortfall
        if k * bi < s:  # they leave part of the entry
            taken = k * b  # type: ignore[operator]
            e.size = s - taken
            self.total -= taken
            self.evicted_units += taken
            return False
        e.size = 0.0  # s − (the pieces, in turn) is exactly 0
        del store[key]
        e.memo = None
        self.evicted_entries += 1
        self.total -= s
        self.evicted_units += s
        return True

    def whole_blocks(self, used: float, needs: list[float], cap: float) -> bool:
        """Whether growths of ``needs`` in turn from ``used`` under ``cap`` can
        all make room by :meth:`make_room_whole`: no spill, LRU with no dead entry, and
        every size, block, ``cap``, ``used`` and need a whole number whose sums
        stay exact (``used`` stays an integer ≤ _BIG as whole needs are added)."""
        if not (self.kind == LRU and self.spill is None and not self._dead_heap and self._ints and self._int_block
                and _exact(cap) and _exact(used)):
            return False
        # (one growth, as a cluster replays them, without `min` and `fsum`)
        least, total = (needs[0], needs[0]) if len(needs) == 1 else (min(needs), math.fsum(needs))
        if not (least >= 0.0 and used + total <= _BIG and _whole(needs)):
            return False
        self._cap = cap
        self._cap_exact = True
        return True

    def make_room_whole(self, used: float, needs: list[float], cap: float) -> list[float]:
        """:meth:`make_room` for each growth of ``needs`` in turn from ``used``,
        once :meth:`whole_blocks` said yes: the oldest entries drained by whole
        blocks (:meth:`_take_blocks`), with no dead entry to compare against.
        The cached total after each.

        A full pool (``used + cached`` is ``cap``) whose growths are all one
        whole number of blocks ``d``, with an oldest entry larger than their
        sum, loses ``d`` of that entry at each (the usual run on a full pool):
        the totals ``total − d·j`` are those the drain reaches, exactly."""
        entries = self.entries
        limit = cap + EPS
        b = self.block
        n = len(needs)
        if n > 1 and entries:
            d = needs[0]
            total = self.total
            if used + total == cap and d > 0.0 and math.fmod(d, b) == 0.0 and needs.count(d) == n:  # type: ignore[arg-type]
                e = entries[next(iter(entries))]
                run = n * d
                if e.size > run and self.evicted_units + run <= _BIG:  # (each step's test of the drain below)
                    e.size -= run
                    self.total = total - run
                    self.evicted_units += run
                    return [total - d * j for j in range(1, n + 1)]
        out = []
        bi = int(b)  # type: ignore[arg-type]
        for need in needs:
            while used + self.total + need > limit and entries:
                key = next(iter(entries))
                e = entries[key]
                if self.evicted_units > _BIG:  # the sums may no longer be exact: piece by piece
                    self._drain(entries, key, e, used, need, cap)
                    continue
                short = int(used + self.total + need - cap)
                k = -(-short // bi)
                if k * bi < e.size:  # part of the oldest entry covers it (`_take_blocks`, inline: it is hot)
                    taken = k * b  # type: ignore[operator]
                    e.size -= taken
                    self.total -= taken
                    self.evicted_units += taken
                else:
                    self._take_blocks(entries, key, e, short)
            out.append(self.total)
            used += need
        return out

    def drain_run(self, used: float, needs: list[float], cap: float, times: list[float]) -> list[float] | None:
        """:meth:`make_room` for each growth of ``needs`` in turn from ``used``,
        under ``evict by`` keys that last through a run (``lasting``), when
        every growth is one block and every amount is on the block's grid in
        exact integers (``_grid``, ``_ints``): each growth past the slack then
        evicts exactly one block, the victims those one drain of them all takes
        (each piece a block off the entry first by its keys, read again as it
        shrinks, in :meth:`drain_by_keys`), so the cached total after growth
        ``j`` is ``total − (used + (j + 1)·b + total − cap)`` once that is
        positive.  Those totals, or None (nothing done) otherwise."""
        b = self.block
        n = len(needs)
        total = self.total
        if b is None or not (self.lasting and self.spill is None and self._grid and self._ints  # (_grid: b whole)
                             and needs.count(b) == n and _exact(cap) and _exact(used) and fmod(cap, b) == 0.0
                             and fmod(used, b) == 0.0 and used + n * b <= _BIG
                             and self.evicted_units + total <= _BIG):
            return None
        over = used + total - cap  # (≤ 0: minus the slack the first growths take without evicting)
        if over + n * b > total:
            return None  # the cache runs dry: the growths one by one find out where
        out = [total - (over + j * b) if over + j * b > 0.0 else total for j in range(1, n + 1)]
        if over + n * b > 0.0:
            first = times[max(0, int(-over // b))]  # (the time of the first growth that evicts)
            self.drain_by_keys(self.victims(first), used, n * b, cap, first)
        return out

    def make_room(self, used: float, need: float, cap: float, now: float) -> None:
        """Evict until ``used + cached + need ≤ cap + ε`` or nothing is cached (§3.3)."""
        limit = cap + EPS
        if not used + self.total + need > limit:
            return
        if self.spill is not None:
            self._make_room_spilling(used, need, limit, now)
            return
        kind = self.kind
        if kind == LRU:
            entries = self.entries
            while True:
                if entries and not self._dead_heap:  # the oldest live entry
                    key = next(iter(entries))
                    self._drain(entries, key, entries[key], used, need, cap)
                else:
                    found = self._lru_victim()
                    if found is None:
                        return
                    store, key = found
                    self._drain(store, key, store[key], used, need, cap)
                if not used + self.total + need > limit:
                    return
        if kind == SCAN or kind is None:
            while used + self.total + need > limit:
                if not self.evict_one(now):
                    return
            return
        self.drain_by_keys(self.victims(now), used, need, cap, now)

    def _make_room_spilling(self, used: float, need: float, limit: float, now: float) -> None:
        """:meth:`make_room` as the rule is written, a piece at a time, each live
        piece told to the pool's spill as it goes (a dead remainder past a
        ``reuse`` bound is nobody's to read back: it does not spill)."""
        spill = self.spill
        assert spill is not None
        entries = self.entries
        while used + self.total + need > limit:
            found = self._victim(now)
            if found is None:
                break
            store, key = found
            e = store[key]
            piece = min(self.block, e.size) if self.block is not None else e.size  # as _take_piece takes
            self._take_piece(store, key, e)
            if store is entries:
                spill(key, e, piece, now)
        spill.flush(now)

    def victims(self, now: float) -> list[tuple[Any, int, dict[int, Entry], int, Entry, Any]]:
        """Every entry, live and dead, in a heap by its ``evict by`` keys read
        at ``now``, the scan's order (``Entry.order``) breaking ties (the
        release sequence in the keys rules them out but between a live entry
        and its dead part).  The keys stay right while nothing but eviction
        changes the cache and, unless they read ``age``, the clock moves (a
        decode run's growths: ``Pool.allocate_run``).  Items are ``(key,
        order, store, id, entry, memo)``; under kept keys (``memo``) the heap
        is the cache's own, brought up to date here, and an item whose
        ``memo`` is no longer its entry's is stale (:meth:`_top` drops it)."""
        keys = self.keys
        assert keys is not None
        stream = self.stream
        if self.memo:
            return self._synced(now)
        heap = []
        for store in (self.entries, self.dead):
            for k, e in store.items():
                heap.append((total_key((*keys(EvictView(e, now, stream)), e.seq)), e.order, store, k, e, None))
        heapify(heap)
        return heap

    def _synced(self, now: float) -> list[tuple[Any, int, dict[int, Entry], int, Entry, Any]]:
        """The lasting heap under kept keys, every entry put or touched since
        the last eviction keyed again (when what it reads changed); rebuilt
        from the entries' keys once stale items outnumber the live ones."""
        heap = self._heap
        dirty = self._dirty
        if dirty:
            keys = self.keys
            assert keys is not None
            stream = self.stream
            for store, k in dirty:
                e = store.get(k)
                if e is None:
                    continue
                w = _waiting(e.owner)
                m = e.memo
                if m is not None and m[0] == e.size and m[1] == w:
                    continue
                key = total_key((*keys(EvictView(e, now, stream)), e.seq))
                m = e.memo = (e.size, w, key)
                heappush(heap, (key, e.order, store, k, e, m))
            dirty.clear()
        if len(heap) > 2 * (len(self.entries) + len(self.dead)) + 16:
            heap = self._heap = [(e.memo[2], e.order, store, k, e, e.memo)  # type: ignore[index]
                                 for store in (self.entries, self.dead) for k, e in store.items()]
            heapify(heap)
        return heap

    @staticmethod
    def _top(heap: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]]) -> bool:
        """Drop the stale items at the top of ``heap``; whether one is left."""
        while heap:
            item = heap[0]
            m = item[5]
            if m is None or item[4].memo is m:
                return True
            heappop(heap)
        return False

    def drain_by_keys(self, heap: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]], used: float, need: float,
                      cap: float, now: float) -> None:
        """Evict from the top of :meth:`victims`' ``heap`` until ``used + cached
        + need ≤ cap + ε`` (``STABLE`` and ``SIZED`` keys: only the victim's
        key can change, as it shrinks: read again, only its element that
        reads ``size`` when one alone does; one whose key grows with ``size``
        stays first as it shrinks, and is drained in one go).  A drain that
        ends on a round (:meth:`_rounds`) leaves its members out of ``heap``
        (``_level``): the next drain of the same heap takes them up from there."""
        limit = cap + EPS
        sized = self.kind == SIZED
        # under `-size`, whole rounds are tried until one attempt finds none (a level is kept only then)
        rounds = sized and self.neg_size and not self.size_dir > 0
        top = self._top
        level = self._level if self._level_of is heap else None
        self._level = self._level_of = None
        while True:
            if rounds:  # from the first in line, and the last round's members kept out of the heap
                level = self._rounds(heap, used, need, cap, now, level or [])
                if level is not None:
                    if not used + self.total + need > limit:
                        self._level, self._level_of = level, heap
                        return
                    continue
                rounds = False
            if not top(heap):
                return
            _key, i, store, k, e, m = heap[0]
            if sized:
                if self.size_dir > 0:  # its key only falls as it shrinks: it stays first to the end
                    gone = self._drain(store, k, e, used, need, cap)
                else:
                    gone = self._take_piece(store, k, e)
                if gone:
                    heappop(heap)
                else:
                    key = self._resized_key(_key, e, now)
                    if m is not None:
                        m = e.memo = (e.size, m[1], key)
                    item = (key, i, store, k, e, m)
                    if len(heap) == 1 or item < min(heap[1:3]):
                        heap[0] = item  # still first: the heap stands as it is
                    else:
                        heapreplace(heap, item)
            elif self._drain(store, k, e, used, need, cap):
                heappop(heap)
            if not used + self.total + need > limit:
                return

    def _rounds(self, heap: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]], used: float, need: float,
                cap: float, now: float, level: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]]
                ) -> list[tuple[Any, int, dict[int, Entry], int, Entry, Any]] | None:
        """The drain by a key ``-size`` (after the same leading elements), by
        rounds in one step.  One block at a time, the largest entry gives a
        block and, smaller now than the others within a block of its size, goes
        behind them: the ``k`` entries above ``size − block`` of the first give
        a block each, in their order, round after round (the cached entries sit
        at one level and are lowered together).  The ``T`` blocks taken here
        are whole rounds and the first ``T mod k`` entries of one more: every
        block leaves its entry alive, the pool is short before the last block,
        and the next entry in line (``heap[0]`` once they are out) comes after
        every member at the start of each round; the rest goes one block at a
        time.  Every size, the cached total and ``evict(u)`` is a multiple of
        the block's grid (checked), so ``t`` blocks off are ``x − t·b``
        exactly, the floats the blocks one by one leave.  The first in line is
        the first of ``heap`` and ``level`` (the last round's members, out of
        the heap, in their order).  The members keyed anew, in their order (out
        of the heap); None, with ``level`` back in the heap, when not one block
        can go so."""
        b = self.block
        sk = self.size_key
        if b is None or sk is None or not 0.0 < b < _BIG or not used + self.total + need - cap - EPS > b:
            # (short by one block or less: nothing to round)
            for item in level:
                heappush(heap, item)
            return None
        p = sk[0]
        members = self._pop_level(heap, p, b, level)
        if not members:
            return None
        vs = [m[4].size for m in members]
        v1 = vs[0]
        total = self.total
        full = part = 0
        # b a whole number of ulps of every size and of the total (each below _BIG): t blocks off are exact
        # (so when every size and the total are whole numbers up to _BIG, and b is one too)
        exact = self._ints and self._int_block  # every size, b and `evict(u)` integers: sums exact
        if exact or (v1 < _BIG and total < _BIG and all(fmod(b, ulp(v)) == 0.0 for v in vs)
                     and fmod(b, ulp(total)) == 0.0):
            # (the count's closures live there: CPython makes their variables' cells on every call of
            # the function that holds them, even one that returns at a guard above)
            full, part = self._round_count(heap, members, b, used, need, cap, now, exact)
        if not (full or part):
            for item in members:  # back in the heap: the drain goes on a block at a time
                heappush(heap, item)
            return None
        return self._take_rounds(members, vs, p, b, full, part)

    def _pop_level(self, heap: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]], p: int, b: float,
                   level: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]]
                   ) -> list[tuple[Any, int, dict[int, Entry], int, Entry, Any]]:
        """For :meth:`_rounds`: the members of the level, in their order, out of
        ``heap`` and ``level`` (a sorted run of items out of it, stale ones
        among them): the first in line, and the items after it whose key has
        its ``p`` leading elements and whose entry is larger than its size
        less ``b`` — under the key ``-size`` there, the items before a point
        of the order, so each side is taken while its next item is in, and
        the two compared only when both are.  The rest of ``level`` goes back
        into ``heap``."""
        live = self._top
        j, n = 0, len(level)
        members: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]] = []
        pre: Any = None  # (none yet: the first in line is in)
        low = 0.0
        hv: Any = heap[0] if live(heap) else None  # the heap's first live item, and the level's next
        lv: Any
        h_in = hv is not None
        while True:
            lv = None  # (a stale one was keyed since, or is gone)
            while j < n:
                lv = level[j]
                m = lv[5]
                if m is None or lv[4].memo is m:
                    break
                j += 1
                lv = None
            l_in = lv is not None and (pre is None or lv[0][:p] == pre and lv[4].size > low)
            if h_in and (not l_in or hv < lv):
                item = heappop(heap)
                hv = heap[0] if live(heap) else None
            elif l_in:
                item = lv
                j += 1
                if pre is not None:
                    members.append(item)
                    continue
            else:
                break
            if pre is None:
                pre, low = item[0][:p], item[4].size - b
            members.append(item)
            h_in = hv is not None and hv[0][:p] == pre and hv[4].size > low
        for item in level[j:]:
            heappush(heap, item)  # (stale ones too: the heap drops them when they surface)
        return members

    def _round_count(self, heap: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]],
                     members: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]], b: float, used: float,
                     need: float, cap: float, now: float, exact: bool) -> tuple[int, int]:
        """For :meth:`_rounds`, the level's sizes on the block's grid: the
        blocks that go by rounds, as ``(full, part)`` — ``full`` whole rounds,
        then a block off each of the first ``part`` members — the least of
        three bounds: every block leaves its entry alive, the pool is short
        before the last, the next in line (``heap[0]``) comes after each
        round's members; ``(0, 0)`` when ``evict(u)`` would not stay exact.
        ``exact``: every amount an integer (then the first bound and that
        check are closed forms)."""
        k = len(members)
        v_min = members[-1][4].size  # the level's smallest (it goes last)
        # rounds whose blocks each leave every entry alive (the smallest first): v − r·b ≥ b, v − (r+1)·b > ε,
        # so r < v/b − 1, the guess (in integers, with ε < 1, the count itself; else checked, and the
        # search made when it is off)
        whole = int(v_min / b)
        alive = whole - 1 if whole * b == v_min else whole
        if not exact:
            alive = _first_near(0, whole + 1, lambda r: not (v_min - r * b >= b and v_min - (r + 1) * b > EPS), alive)
        elif alive < 0:
            alive = 0
        limit = cap + EPS
        total = self.total
        # blocks after which the pool is no longer short (one by one, the drain stops there)
        stop = _first_near(1, alive * k, lambda t: not used + (total - t * b) + need > limit,
                           math.ceil((used + total + need - limit) / b))
        full, part = divmod(min(stop, alive * k), k)
        if (full or part) and self._top(heap):  # the next in line must come after the members, each round
            last_key, last_i, _store, _k, e, _m = members[-1]
            last = full if part else full - 1  # the last round's start, in rounds done
            # (under the key -size, the next in line's size below the last member's there puts it after)
            if not heap[0][4].size < v_min - last * b:
                nxt = heap[0][:2]

                def late(r: int) -> bool:  # the last member, r rounds down, comes after the next in line
                    e.size = v_min - r * b
                    return (self._resized_key(last_key, e, now), last_i) > nxt

                if late(last):  # fewer rounds, all whole: the next in line joins the level
                    # (the last member passes the next's size a block at a time: a tie at the guess)
                    d = (v_min - heap[0][4].size) / b
                    full, part = _first_near(0, last, late, math.ceil(d) if -_BIG < d < _BIG else 0), 0
                e.size = v_min  # (`late` tried sizes on the entry itself)
        if full or part:
            eu = self.evicted_units
            eu_new = eu + (full * k + part) * b
            if not (eu_new < _BIG and (exact or fmod(b, ulp(eu_new)) == 0.0 and fmod(eu, ulp(eu_new)) == 0.0)):
                return 0, 0
        return full, part

    def _take_rounds(self, members: list[tuple[Any, int, dict[int, Entry], int, Entry, Any]], vs: list[float],
                     p: int, b: float, full: int, part: int
                     ) -> list[tuple[Any, int, dict[int, Entry], int, Entry, Any]]:
        """For :meth:`_rounds`: ``full`` rounds of a block off each member (sizes
        ``vs``) and one more off the first ``part``, in one step — the cache's
        counts, then each member keyed again: their items, in order."""
        taken = (full * len(members) + part) * b
        self.total = self.total - taken
        self.evicted_units = self.evicted_units + taken
        after = p + 1
        pre = members[0][0][:p]  # (the level's leading elements, the same in every member)
        out = []
        for j, (item, v) in enumerate(zip(members, vs)):  # keyed again: the element is -size, negated exactly
            key, i, store, kk, e, m = item
            x = v - (full + 1 if j < part else full) * b
            e.size = x
            key = (*pre, (0, -x), *key[after:])
            if m is not None:
                m = e.memo = (x, m[1], key)
            out.append((key, i, store, kk, e, m))
        if part:  # (the first `part` went a block further down: two runs, each in order)
            out.sort()
        return out

    def _resized_key(self, key: tuple, e: Entry, now: float) -> tuple:
        """The key of ``e`` after it shrank, from its last ``key``: only the
        element that reads ``size`` is read again when one alone does
        (``size_key``), else the whole key."""
        sk = self.size_key
        if sk is None:
            keys = self.keys
            assert keys is not None
            return total_key((*keys(EvictView(e, now, self.stream)), e.seq))
        p, fn = sk
        x = -e.size if self.neg_size else fn(EvictView(e, now, self.stream))  # (`-size` itself: no view)
        return (*key[:p], (1, 0.0) if x != x else (0, x), *key[p + 1:])


def _first_near(lo: int, hi: int, pred: Callable[[int], bool], guess: int) -> int:
    """:func:`_first`, trying ``guess`` first (brought into ``lo … hi + 1``),
    then the step on the side ``pred`` points to there: the answer when it
    is ``guess`` or a step off it (a guess off by one at a tie), in two or
    three calls of ``pred``; else the search, from there."""
    g = lo if guess < lo else hi + 1 if guess > hi + 1 else guess
    if g > hi or pred(g):  # the answer is g or before
        if g == lo or not pred(g - 1):
            return g
        if g - 1 == lo or not pred(g - 2):
            return g - 1
        return _first(lo, g - 3, pred)
    if g + 1 > hi or pred(g + 1):  # after g
        return g + 1
    return _first(g + 2, hi, pred)


def _first(lo: int, hi: int, pred: Callable[[int], bool]) -> int:
    """The least ``t`` in ``lo … hi`` where the monotone ``pred`` holds (false
    before, true from there on), or ``hi + 1`` where it holds nowhere."""
    while lo <= hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid - 1
        else:
            lo = mid + 1
    return lo

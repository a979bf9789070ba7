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
they are compared separately.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .order import total_key

if TYPE_CHECKING:
    from .session import Session

EPS = 1e-9


class Entry:
    __slots__ = ("size", "last", "seq", "snap", "owner")

    def __init__(self, size: float, last: float, seq: int, snap: list[float], owner: "Session | None") -> None:
        self.size = size
        self.last = last
        self.seq = seq
        self.snap = snap
        self.owner = owner


class EvictView:
    """What an ``evict by`` key reads (moment Evict): the entry's ``size``,
    ``age``, ``last``, ``waiting`` and its owner's attributes (live values, or
    the snapshot taken at release once the owner has ended)."""

    __slots__ = ("a", "size", "age", "last", "waiting", "srng")

    def __init__(self, entry: Entry, now: float, stream: Any) -> None:
        owner = entry.owner
        if owner is not None and not owner.ended:
            self.a = owner.a
            self.waiting = 1.0 if owner.queued_at is not None else 0.0
        else:
            self.a = entry.snap
            self.waiting = 0.0
        self.size = entry.size
        self.last = entry.last
        self.age = now - entry.last
        self.srng = stream


class PrefixCache:
    """The entries of one pool and the order in which they go."""

    def __init__(self, block: float | None, keys: Callable[[EvictView], tuple] | None, stream: Any) -> None:
        self.block = block
        self.keys = keys  # None: LRU
        self.stream = stream
        self.entries: dict[int, Entry] = {}  # serial → entry, in release order
        self.dead: dict[int, Entry] = {}
        self._next_dead = 0
        self.total = 0.0  # `cached`: the sum of the sizes, dead entries included
        self.evicted_entries = 0
        self.evicted_units = 0.0

    def size_of(self, serial: int) -> float:
        e = self.entries.get(serial)
        return e.size if e is not None else 0.0

    def put(self, serial: int, size: float, now: float, seq: int, snap: list[float], owner: "Session") -> None:
        """The entry of ``serial`` becomes ``size`` units released now."""
        old = self.entries.pop(serial, None)
        if old is not None:
            self.total -= old.size
        self.entries[serial] = Entry(size, now, seq, snap, owner)
        self.total += size

    def take(self, serial: int) -> Entry | None:
        """Remove and return the entry of ``serial`` (consumption or ``drop``)."""
        e = self.entries.pop(serial, None)
        if e is not None:
            self.total -= e.size
        return e

    def put_dead(self, like: Entry, size: float) -> None:
        """Units past a ``reuse`` bound: cached, evictable, readable by nobody."""
        self.dead[self._next_dead] = Entry(size, like.last, like.seq, like.snap, None)
        self._next_dead += 1
        self.total += size

    # -- eviction -----------------------------------------------------------

    def _victim(self, now: float) -> tuple[dict[int, Entry], int] | None:
        if self.keys is None:
            best: tuple[dict[int, Entry], int] | None = None
            best_key: tuple[float, int] | None = None
            if self.entries:
                serial = next(iter(self.entries))
                e = self.entries[serial]
                best, best_key = (self.entries, serial), (e.last, e.seq)
            for k, e in self.dead.items():
                if best_key is None or (e.last, e.seq) < best_key:
                    best, best_key = (self.dead, k), (e.last, e.seq)
            return best
        best = None
        best_key2: tuple | None = None
        for store in (self.entries, self.dead):
            for k, e in store.items():
                key = total_key((*self.keys(EvictView(e, now, self.stream)), e.seq))
                if best_key2 is None or key < best_key2:
                    best, best_key2 = (store, k), key
        return best

    def evict_one(self, now: float) -> bool:
        """Evict one piece (a block, or a whole entry); False if nothing is cached."""
        found = self._victim(now)
        if found is None:
            return False
        store, key = found
        e = store[key]
        piece = min(self.block, e.size) if self.block is not None else e.size
        e.size -= piece
        if e.size <= EPS:
            del store[key]
            self.evicted_entries += 1
        self.total -= piece
        self.evicted_units += piece
        return True

"""The shared prefix cache of one pool: a trie of segments (issue 14;
docs/simulator.md, "Shared prefix cache").

A hold's *chain* is the segments its ``prefix`` lists, then one implicit
segment that is the session's own (keyed by its serial, unbounded).  Content
is shared by full blocks, as vLLM's chained block hashes share it
(``kv_cache_utils.py``: a block's hash covers its parent's): a block belongs
to the segment its last unit falls in, so a block that straddles a segment
boundary is shared only by chains that agree on both segments.  With
boundaries ``B₁ < B₂ < …`` (the running sums of the lengths) a segment's
blocks span ``[⌊B₍ᵢ₋₁₎/b⌋·b, ⌊Bᵢ/b⌋·b)`` of the chain — two chains that agree
on a 1 000-token first segment and differ after it share 992 tokens with
blocks of 16.

A :class:`Node` is a key under its parent, the span ``[start, end)`` of its
segment's blocks (fixed when the node is made) and the units cached from
``start`` (``size``).  A node has children only when it is full, and only
leaves lose units, tail first (no cached suffix outlives its prefix).  Live
holds that read a node are its ``readers`` (SGLang's ``lock_ref``), each with
the units it read of it; the first ``held_len`` units (the most any reader
read) are in use — in the pool's ``used`` once, however many holds read
them (``held``) — and never evicted; the rest of the node is cached
(``total``) and, on a leaf, evictable, as vLLM's free blocks are.  With its
last reader a node's units all return to ``cached``.

Eviction takes the leaf with the smallest key — (release time, release
sequence) under LRU, the ``evict by`` keys otherwise — one block at a time
(the whole node without a block size) down to what its readers read, and
searches again when it is gone: its parent may have become a leaf.  Under
LRU the candidates are kept in a heap, checked lazily (a node's key changes
when a release touches it).
"""

from __future__ import annotations

import math
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any, Callable

from .cache import EPS, EvictView
from .order import total_key

if TYPE_CHECKING:
    from .session import Session

#: What a pool with this cache reports as its ``kind`` (not one of cache.py's:
#: the pool's fast paths for the per-session cache do not apply).
TRIE = "trie"
OWN = "own"  # the tag of a session's own segment key: (OWN, serial)

Segs = list[tuple[Any, float, float]]  # (key, start, end) per segment of a chain, in chain units


class Node:
    __slots__ = ("key", "parent", "kids", "start", "end", "size", "readers", "reads", "held_len", "last", "seq",
                 "snap", "owner", "solo", "alive")

    def __init__(self, key: Any, parent: "Node | None", start: float, end: float) -> None:
        self.key = key
        self.parent = parent
        self.kids: dict[Any, Node] = {}
        self.start = start
        self.end = end
        self.size = 0.0
        self.readers = 0
        self.reads: list[float] = []  # the units each live reader read of it
        self.held_len = 0.0  # max(reads): the units in use
        self.last = 0.0
        self.seq = -1
        self.snap: list[float] = []
        self.owner: "Session | None" = None
        self.solo = -1  # the serial of the one session that read or wrote it, -1 when several
        self.alive = True

    @property
    def full(self) -> bool:
        return self.size >= self.end - self.start - EPS


class SharedCache:
    """The trie of one pool, with :class:`~serq.sim.cache.PrefixCache`'s
    interface where a pool or the report reads it (``total``, ``kind``,
    ``keys``, ``evicted_*``, ``make_room``, ``evict_one``, ``take``)."""

    kind = TRIE
    lasting = False  # a run's growths make room one by one (:meth:`make_room`)
    spill = None  # a pool whose holds share prefixes does not spill (the linker says so)

    def __init__(self, block: float | None, keys: Callable[[EvictView], tuple] | None, stream: Any) -> None:
        self.block = block
        self.keys = keys  # None: LRU
        self.stream = stream
        self.root = Node(None, None, 0.0, 0.0)
        self.total = 0.0  # `cached`: units of nodes no live hold reads
        self.held = 0.0  # units of nodes live holds read (in the pool's `used`)
        self.evicted_entries = 0
        self.evicted_units = 0.0
        self._heap: list[tuple[float, int, int, Node]] = []  # LRU candidates, lazily checked
        self._n = 0  # heap tie-breaker

    # -- chains ----------------------------------------------------------------

    def whole_blocks(self, used: float, needs: list[float], cap: float) -> bool:
        """A run's growths make room the general way here (:meth:`make_room`)."""
        return False

    def down(self, x: float) -> float:
        b = self.block
        if b is None or x == math.inf:
            return x
        try:
            return math.floor(x / b + EPS) * b
        except OverflowError:  # x / b past the largest float (Pool.round_up)
            return x

    def segments(self, chain: list[tuple[float, float]], serial: int) -> Segs:
        """The spans of a chain's segments, the session's own last."""
        out: Segs = []
        bound = 0.0
        start = 0.0
        for key, length in chain:
            bound += length
            end = self.down(bound)
            out.append((key, start, end))
            start = end
        out.append(((OWN, serial), start, math.inf))
        return out

    def match(self, segs: Segs) -> tuple[float, list[Node]]:
        """The longest cached prefix along ``segs`` (chain units) and the nodes it runs through."""
        node = self.root
        m = 0.0
        path: list[Node] = []
        for key, start, end in segs:
            child = node.kids.get(key)
            if child is None:
                break
            if child.end != end:  # the key with another length: the blocks both have
                common = min(end, child.end) - start
                if common > 0.0 and child.size > 0.0:
                    m = start + min(child.size, common)
                    path.append(child)
                break
            path.append(child)
            m = start + child.size
            if not child.full:
                break
            node = child
        return m, path

    def cost(self, segs: Segs, need: float, bound: float | None) -> tuple[float, float]:
        """(r, δ) of an admission asking ``need`` units: ``r`` the shared part it
        reads (the match, at most ``need`` and the ``reuse`` bound), ``δ`` the
        units of the nodes it reads that no live hold reads yet (they move from
        ``cached`` to ``used``)."""
        m, path = self.match(segs)
        r = min(m, need)
        if bound is not None and bound < r:
            r = bound
        delta = 0.0
        for n in path:
            if n.start < r:
                amt = min(n.size, r - n.start)
                if amt > n.held_len:
                    delta += amt - n.held_len
        return r, delta

    # -- holds -----------------------------------------------------------------

    def lock(self, segs: Segs, r: float, serial: int) -> tuple[list[tuple[Node, float]], float]:
        """A hold reads the first ``r`` units of its chain: the nodes it runs
        through with the units it read of each, and the units that moved
        from ``cached`` to ``used``."""
        if r <= 0.0:
            return [], 0.0
        _m, path = self.match(segs)
        locked = []
        moved = 0.0
        for n in path:
            if n.start >= r:
                break
            amt = min(n.size, r - n.start)
            if amt > n.held_len:
                moved += amt - n.held_len
                n.held_len = amt
            n.reads.append(amt)
            n.readers += 1
            if n.solo != serial:
                n.solo = -1
            locked.append((n, amt))
        self.total -= moved
        self.held += moved
        return locked, moved

    def unlock(self, nodes: list[tuple[Node, float]], now: float, seq: int, snap: list[float],
               owner: "Session") -> float:
        """A hold's reads end (at its release): the units that return to ``cached``."""
        moved = 0.0
        for n, amt in nodes:
            n.reads.remove(amt)
            n.readers -= 1
            n.last, n.seq, n.snap, n.owner = now, seq, snap, owner
            new = max(n.reads) if n.reads else 0.0
            if new < n.held_len:
                moved += n.held_len - new
                n.held_len = new
            if not n.kids:
                self._push(n)
        self.held -= moved
        self.total += moved
        return moved

    def write(self, segs: Segs, keep: float, now: float, seq: int, snap: list[float], owner: "Session") -> None:
        """``cache (ℓ)`` at a release: the first ``keep`` units of the chain
        (blocks) are cached, extending or making nodes (past what any reader
        read: the new units are cached); the session's own node becomes
        exactly its part of ``keep`` (as the per-session cache replaces an
        entry), never below what a live hold reads of it."""
        node = self.root
        serial = owner.serial
        for key, start, end in segs:
            if keep <= start + EPS:
                break
            want = min(keep, end) - start
            child = node.kids.get(key)
            if child is None:
                child = Node(key, node, start, end)
                child.solo = serial
                node.kids[key] = child
            elif child.end != end:
                want = min(want, min(end, child.end) - start)
                end = -1.0  # written up to the blocks both have, no further
            add = want - child.size
            if add > 0.0:
                child.size = want
                self.total += add
            elif add < 0.0 and isinstance(key, tuple) and not child.kids:
                cut = child.size - max(want, child.held_len)  # the session's own segment
                child.size -= cut
                self.total -= cut
            child.last, child.seq, child.snap, child.owner = now, seq, snap, owner
            if child.solo != serial:
                child.solo = -1
            stop = end < 0.0 or not child.full
            if not child.kids:
                if stop and child.size <= EPS and child.readers == 0:
                    self._remove(child)  # a node written empty (`cache (0)` on the own segment)
                    return
                self._push(child)
            if stop:
                return
            node = child
        if node is not self.root and not node.kids and node.size <= EPS and node.readers == 0:
            self._remove(node)  # an empty segment (shorter than a block) with nothing written past it

    # -- eviction --------------------------------------------------------------

    def _push(self, n: Node) -> None:
        if self.keys is None:
            self._n += 1
            heappush(self._heap, (n.last, n.seq, self._n, n))

    def _evictable(self, n: Node) -> bool:
        return n.alive and not n.kids and n.size > n.held_len + EPS and n is not self.root

    def _lru_victim(self) -> Node | None:
        heap = self._heap
        while heap:
            last, seq, _i, n = heap[0]
            if self._evictable(n) and n.last == last and n.seq == seq:
                return n
            heappop(heap)
        return None

    def leaves(self) -> list[Node]:
        """Every evictable leaf, in a fixed order (depth first, children in insertion order)."""
        out = []
        stack = [self.root]
        while stack:
            n = stack.pop()
            if self._evictable(n):
                out.append(n)
            stack.extend(reversed(list(n.kids.values())))
        return out

    def _victim(self, now: float) -> Node | None:
        if self.keys is None:
            return self._lru_victim()
        best, best_key = None, None
        for n in self.leaves():
            key = total_key((*self.keys(EvictView(n, now, self.stream)), n.seq))  # type: ignore[arg-type]
            if best_key is None or key < best_key:
                best, best_key = n, key
        return best

    def _remove(self, n: Node) -> None:
        """Take a leaf out of the trie; a parent left an empty leaf goes too."""
        while True:
            self.total -= n.size
            n.size = 0.0
            n.alive = False
            parent = n.parent
            assert parent is not None
            del parent.kids[n.key]
            if parent is self.root or parent.kids:
                return
            if parent.readers or parent.size > EPS:
                self._push(parent)  # a leaf now: its unread tail can go
                return
            n = parent  # an empty node (a segment shorter than a block) that is now a leaf

    def _take(self, n: Node, short: float) -> None:
        """Evict from leaf ``n``: blocks covering ``short`` units, tail first (or
        the whole node), never what a live hold reads of it."""
        b = self.block
        free = n.size - n.held_len
        piece = free
        if b is not None:
            q = short / b - EPS
            piece = min(free, max(math.ceil(q), 1) * b) if q < math.inf else free
        if piece >= n.size - EPS and n.readers == 0:
            self.evicted_units += n.size
            self.evicted_entries += 1
            self._remove(n)
        else:
            n.size -= piece
            self.total -= piece
            self.evicted_units += piece

    def evict_one(self, now: float) -> bool:
        """Evict one block (a whole node without a block size); False if no leaf can go."""
        n = self._victim(now)
        if n is None:
            return False
        self._take(n, 0.0)
        return True

    def make_room(self, used: float, need: float, cap: float, now: float) -> None:
        """Evict leaves until ``used + cached + need ≤ cap + ε`` or none can go."""
        limit = cap + EPS
        if self.keys is not None:
            while used + self.total + need > limit:
                n = self._victim(now)
                if n is None:
                    return
                self._take(n, 0.0)  # keys may read `size`: search again after every block
            return
        heap = self._heap
        while used + self.total + need > limit:
            while heap:  # _lru_victim, inline
                last, seq, _i, n = heap[0]
                if n.alive and not n.kids and n.size > n.held_len + EPS and n.last == last and n.seq == seq:
                    break
                heappop(heap)
            else:
                return
            self._take(n, used + self.total + need - cap)

    # -- `drop` and the probes ---------------------------------------------------

    def take(self, serial: int) -> None:
        """``drop P``: the leaves the session alone read and wrote go, then any
        parent that becomes such a leaf; nothing another session shares."""
        order: list[Node] = []  # parents before children
        stack = list(self.root.kids.values())
        while stack:
            n = stack.pop()
            order.append(n)
            stack.extend(n.kids.values())
        for n in reversed(order):  # children before parents
            if n.alive and not n.kids and n.readers == 0 and n.solo == serial:
                parent = n.parent
                self.total -= n.size
                n.size = 0.0
                n.alive = False
                assert parent is not None
                del parent.kids[n.key]
                if parent is self.root or parent.kids or (parent.readers == 0 and parent.solo == serial):
                    continue  # not a leaf, or a leaf this pass takes next
                if parent.readers or parent.size > EPS:
                    self._push(parent)  # a leaf now: its unread tail can go (another hold may read its head)
                else:
                    self._remove(parent)

    def size_of(self, serial: int) -> float:
        """Not meaningful for a trie (the cached prefix depends on the chain); see ``Pool.shared_cached_of``."""
        return 0.0

    # -- checks (tests) ------------------------------------------------------------

    def nodes(self) -> list[Node]:
        out = []
        stack = list(self.root.kids.values())
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.kids.values())
        return out

"""Random streams keyed by what they are for (semantics §6).

Every draw names its stream: ``(session serial, turn, kind)`` for a
session's workload draws (re-keyed at every ``turn;``) and for its own
statements, ``(kind,)`` for the streams no session owns (arrivals, the
engine's own expressions, eviction keys, the choice of a trace session).
Changing the order of events never hands one session's draws to another,
and the same (seed, session, turn) draws the same values under any design.

The run's seed is expanded once by NumPy's ``SeedSequence`` algorithm (written
out here, the same integers, so a run need not import NumPy) into a 64-bit
root; a stream's key mixes the root with its key parts, SplitMix64-style
(the mixing of semantics §6.1), and the stream is the SplitMix64 sequence
from that key (Steele, Lea & Flood 2014: period 2^64, passes BigCrush).
Building a NumPy generator per (session, turn) costs about 9 µs — more than
a whole M/M/1 customer — so streams are this small pure-Python generator,
a few hundred nanoseconds to build and to draw from.
"""

from __future__ import annotations

import sys
from typing import Any

# kinds (the last part of a key)
WORKLOAD = 1  # a session's init (turn 0) and turn blocks
SESSION = 2  # a session's own statements, server included
CHILD = 3  # a spawned child: (parent's prefix, child index, CHILD) is the child's prefix
ARRIVAL = 10
MACHINE = 11  # cost, budget, chunk, ps capacity, serve keys
EVICTION = 12  # eviction keys
TRACE = 13  # which trace session an unordered trace replays

_M = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_UNIT = 2.0**-53


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M
    return z ^ (z >> 31)


_M32 = 0xFFFFFFFF


def _hashmix(value: int, h: list[int]) -> int:
    """SeedSequence's ``hashmix``: ``h[0]`` is the running hash constant."""
    value ^= h[0]
    h[0] = (h[0] * 0x931E8875) & _M32
    value = (value * h[0]) & _M32
    return value ^ (value >> 16)


def _mix32(x: int, y: int) -> int:
    r = (0xCA01F9DD * x - 0x4973F715 * y) & _M32
    return r ^ (r >> 16)


def root_key(seed: int) -> int:
    """The 64-bit root of a run's streams, from its seed: exactly
    ``numpy.random.SeedSequence(seed).generate_state(1, numpy.uint64)[0]``
    (NumPy's algorithm, NEP 19's stable one: a pool of four 32-bit words mixed
    from the seed's 32-bit words, then two output words), in pure Python."""
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"a seed is a non-negative integer, not {seed}")
    words = []
    while True:  # the seed's little-endian 32-bit words ([0] for 0)
        words.append(seed & _M32)
        seed >>= 32
        if not seed:
            break
    h = [0x43B0D7E5]
    pool = [_hashmix(words[i] if i < len(words) else 0, h) for i in range(4)]
    for i in range(4):
        for j in range(4):
            if i != j:
                pool[j] = _mix32(pool[j], _hashmix(pool[i], h))
    for w in words[4:]:
        for j in range(4):
            pool[j] = _mix32(pool[j], _hashmix(w, h))
    out = []
    c = 0x8B51F9DD
    for i in range(2):
        v = pool[i] ^ c
        c = (c * 0x58F38DED) & _M32
        v = (v * c) & _M32
        out.append(v ^ (v >> 16))
    return out[0] | (out[1] << 32)


def key(root: int, *parts: int) -> int:
    """Mix key parts into the root, one SplitMix64 step each (``_mix`` inline)."""
    x = root
    for v in parts:
        z = (x + _GAMMA + v) & _M
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M
        x = z ^ (z >> 31)
    return x


class Stream:
    """The SplitMix64 sequence from one key.  ``Stream(root, *parts)`` mixes
    the key on the first draw (most sessions' own streams are never drawn
    from); :func:`keyed` makes one from a key already mixed."""

    __slots__ = ("_s", "_parts")

    def __init__(self, root: int, *parts: int) -> None:
        self._s = -1
        self._parts = (root, parts)

    def random(self, _g: int = _GAMMA, _m: int = _M, _u: float = _UNIT) -> float:
        """One uniform draw in [0, 1), 53 bits."""
        s = self._s
        if s < 0:
            root, parts = self._parts
            s = key(root, *parts)
        s = (s + _g) & _m
        self._s = s
        z = ((s ^ (s >> 30)) * 0xBF58476D1CE4E5B9) & _m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _m
        return ((z ^ (z >> 31)) >> 11) * _u

    def integers(self, n: int) -> int:
        """One uniform integer in [0, n)."""
        return min(int(self.random() * n), n - 1)


class KeyedStream(Stream):
    """A stream whose key is already mixed (``_s`` holds it from the start)."""

    __slots__ = ()

    def __init__(self, k: int) -> None:
        self._s = k


def keyed(k: int) -> Stream:
    """The stream of an already mixed key ``k`` (``key(root, *parts)``)."""
    return KeyedStream(k)


def session_stream(root: int, serial: int) -> Stream:
    return Stream(root, serial, 0, SESSION)


def workload_stream(root: int, serial: int, turn: int) -> Stream:
    return Stream(root, serial, turn, WORKLOAD)


def child_keys(parent_prefix: int, index: int) -> tuple[int, int, int]:
    """A spawned child's keys, as :meth:`SessionKeys.get` gives a root's: the
    prefix ``(…parent…, index, CHILD)`` its turns continue from, and the keys
    of ``(prefix, 0, SESSION)`` and ``(prefix, 0, WORKLOAD)``.  A child's keys
    follow from its place in the tree (root serial, then the index of each
    child among its parent's children), never from a counter roots share, so
    no root's keys move when a design spawns more or fewer children."""
    prefix = key(parent_prefix, index, CHILD)
    return prefix, key(prefix, 0, SESSION), key(prefix, 0, WORKLOAD)


def global_stream(root: int, kind: int) -> Stream:
    return Stream(root, kind)


#: Sessions whose keys :class:`SessionKeys` mixes at once.
KEY_BLOCK = 512
#: Serials below this are mixed in pure Python, unless NumPy is imported already; later
#: blocks with NumPy (imported then).  A block takes about 0.9 ms in Python and 0.06 ms with
#: NumPy, whose import takes 50–110 ms: a run pays for it only past some 30 000 sessions.
PURE_SERIALS = 64 * KEY_BLOCK


def _mix_array(z: Any, u: Any) -> Any:
    """``_mix`` on every element of a NumPy uint64 array (``u`` is
    ``numpy.uint64``): uint64 arithmetic wraps modulo 2^64, as ``& _M`` does."""
    z = (z ^ (z >> u(30))) * u(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> u(27))) * u(0x94D049BB133111EB)
    return z ^ (z >> u(31))


class SessionKeys:
    """The keys of sessions' streams, mixed a block of serials at a time
    (serials are handed out in order): per serial, the key of ``(serial,)``
    (the prefix a turn's workload key continues from), of ``(serial, 0,
    SESSION)`` and of ``(serial, 0, WORKLOAD)`` — exactly the integers
    :func:`key` gives.  The first :data:`PURE_SERIALS` in Python (with NumPy
    when something imported it already), the rest with NumPy at a tenth of the
    cost (three mixes of 64-bit products per session)."""

    __slots__ = ("root", "base", "prefix", "own", "work")

    def __init__(self, root: int) -> None:
        self.root = root
        self.base = -1
        self.prefix: list[int] = []
        self.own: list[int] = []
        self.work: list[int] = []

    def get(self, serial: int) -> tuple[int, int, int]:
        """(key of (serial,), key of (serial, 0, SESSION), key of (serial, 0, WORKLOAD))."""
        i = serial - self.base
        if not (0 <= i < KEY_BLOCK) or self.base < 0:
            self._fill(serial)
            i = serial - self.base
        return self.prefix[i], self.own[i], self.work[i]

    def _fill(self, serial: int) -> None:
        base = serial - serial % KEY_BLOCK
        self.base = base
        if base < PURE_SERIALS and "numpy" not in sys.modules:
            self._fill_python(base)
        else:
            self._fill_numpy(base)

    def _fill_python(self, base: int) -> None:
        """The block of serials from ``base``, mixed in Python."""
        root = self.root
        self.prefix = [key(root, s) for s in range(base, base + KEY_BLOCK)]
        turn0 = [key(x, 0) for x in self.prefix]
        self.own = [key(x, SESSION) for x in turn0]
        self.work = [key(x, WORKLOAD) for x in turn0]

    def _fill_numpy(self, base: int) -> None:
        """The block of serials from ``base``, mixed with NumPy (the same integers)."""
        import numpy as np

        u = np.uint64
        gamma = u(_GAMMA)
        with np.errstate(over="ignore"):
            x1 = _mix_array(u(self.root) + gamma + np.arange(base, base + KEY_BLOCK, dtype=np.uint64), u)
            x2 = _mix_array(x1 + gamma, u)  # turn 0
            own = _mix_array(x2 + gamma + u(SESSION), u)
            work = _mix_array(x2 + gamma + u(WORKLOAD), u)
        self.prefix = x1.tolist()
        self.own = own.tolist()
        self.work = work.tolist()

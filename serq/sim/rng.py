"""Random streams keyed by what they are for (semantics §6).

Every draw names its stream: ``(session serial, turn, kind)`` for a
session's workload draws (re-keyed at every ``turn;``) and for its own
statements, ``(kind,)`` for the streams no session owns (arrivals, the
engine's own expressions, eviction keys, the choice of a trace session).
Changing the order of events never hands one session's draws to another,
and the same (seed, session, turn) draws the same values under any design.

The run's seed is expanded once by NumPy's ``SeedSequence`` into a 64-bit
root; a stream's key mixes the root with its key parts, SplitMix64-style
(the mixing of semantics §6.1), and the stream is the SplitMix64 sequence
from that key (Steele, Lea & Flood 2014: period 2^64, passes BigCrush).
Building a NumPy generator per (session, turn) costs about 9 µs — more than
a whole M/M/1 customer — so streams are this small pure-Python generator,
a few hundred nanoseconds to build and to draw from.
"""

from __future__ import annotations

import numpy as np

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


def root_key(seed: int) -> int:
    """The 64-bit root of a run's streams, from its seed through ``SeedSequence``."""
    return int(np.random.SeedSequence(int(seed)).generate_state(1, np.uint64)[0])


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

_U = np.uint64


def _mix_array(z: np.ndarray) -> np.ndarray:
    """``_mix`` on every element: uint64 arithmetic wraps modulo 2^64, as ``& _M`` does."""
    z = (z ^ (z >> _U(30))) * _U(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U(27))) * _U(0x94D049BB133111EB)
    return z ^ (z >> _U(31))


class SessionKeys:
    """The keys of sessions' streams, mixed with NumPy for a block of serials
    at a time (serials are handed out in order): per serial, the key of
    ``(serial,)`` (the prefix a turn's workload key continues from), of
    ``(serial, 0, SESSION)`` and of ``(serial, 0, WORKLOAD)``.  Exactly the
    integers :func:`key` gives, at a tenth of the cost of mixing them one by
    one in Python (three mixes of 64-bit products per session)."""

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
        gamma = _U(_GAMMA)
        with np.errstate(over="ignore"):
            x1 = _mix_array(_U(self.root) + gamma + np.arange(base, base + KEY_BLOCK, dtype=np.uint64))
            x2 = _mix_array(x1 + gamma)  # turn 0
            own = _mix_array(x2 + gamma + _U(SESSION))
            work = _mix_array(x2 + gamma + _U(WORKLOAD))
        self.base = base
        self.prefix = x1.tolist()
        self.own = own.tolist()
        self.work = work.tolist()

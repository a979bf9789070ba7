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
    """Mix key parts into the root, one SplitMix64 step each."""
    x = root
    for v in parts:
        x = _mix((x + _GAMMA + v) & _M)
    return x


class Stream:
    """The SplitMix64 sequence from one key, built on the first draw (most
    sessions' own streams are never drawn from)."""

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


def session_stream(root: int, serial: int) -> Stream:
    return Stream(root, serial, 0, SESSION)


def workload_stream(root: int, serial: int, turn: int) -> Stream:
    return Stream(root, serial, turn, WORKLOAD)


def global_stream(root: int, kind: int) -> Stream:
    return Stream(root, kind)

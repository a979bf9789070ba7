"""How key tuples compare: ascending, element by element, NaN above every
number (as Rust's ``f64::total_cmp`` orders a positive NaN).  Used by queue
keys, eviction keys and serve keys alike."""

from __future__ import annotations


from itertools import repeat
from math import isnan

_ZERO = repeat(0)  # (endless: zip takes from it what it needs)


def total_key(key: tuple[float, ...]) -> tuple[tuple[int, float], ...]:
    """A tuple Python compares in that order: ``(0, x)`` for a number ``x``,
    ``(1, 0.0)`` for NaN (the common case, no NaN, built in C)."""
    if any(map(isnan, key)):
        return tuple((1, 0.0) if x != x else (0, x) for x in key)
    return tuple(zip(_ZERO, key))

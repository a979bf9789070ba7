"""How key tuples compare: ascending, element by element, NaN above every
number (as Rust's ``f64::total_cmp`` orders a positive NaN).  Used by queue
keys, eviction keys and serve keys alike.  And :func:`ascending`, the order a
pass takes over marked places (pools, engines) that the pass may mark more of."""

from __future__ import annotations


from itertools import repeat
from math import isnan
from typing import Iterator

_ZERO = repeat(0)  # (endless: zip takes from it what it needs)


def total_key(key: tuple[float, ...]) -> tuple[tuple[int, float], ...]:
    """A tuple Python compares in that order: ``(0, x)`` for a number ``x``,
    ``(1, 0.0)`` for NaN (the common case, no NaN, built in C)."""
    if any(map(isnan, key)):
        return tuple((1, 0.0) if x != x else (0, x) for x in key)
    return tuple(zip(_ZERO, key))


def ascending(marked: set[int], owner: object, counter: str) -> Iterator[int]:
    """The members of ``marked`` in ascending order, read as the caller goes:
    when ``owner``'s count ``counter`` moved while the caller handled one (it
    marked more), the members after that one are read again, so a place
    marked later in the order is visited in this pass, one marked earlier at
    the next.  (The count is read with ``getattr``, a call into C: the passes
    are hot.)"""
    order = sorted(marked)
    j = 0
    while j < len(order):
        i = order[j]
        j += 1
        before = getattr(owner, counter)
        yield i
        if getattr(owner, counter) != before:
            order = sorted(x for x in marked if x > i)
            j = 0

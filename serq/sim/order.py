"""How key tuples compare: ascending, element by element, NaN above every
number (as Rust's ``f64::total_cmp`` orders a positive NaN).  Used by queue
keys, eviction keys and serve keys alike."""

from __future__ import annotations


def total_key(key: tuple[float, ...]) -> tuple[tuple[int, float], ...]:
    """A tuple Python compares in that order."""
    return tuple((1, 0.0) if x != x else (0, x) for x in key)

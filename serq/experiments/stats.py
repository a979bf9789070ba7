"""Statistics across seeds: Student-t quantiles and intervals, without scipy.

A sweep runs each point with several seeds; each run is one independent
observation of a figure (its mean response time, its preemptions…).  The
interval a sweep reports is the classical one for the mean of ``n``
independent, roughly normal observations::

    mean ± t(0.975, n−1) · s / √n        (s: the sample standard deviation)

:func:`t_quantile` computes ``t(p, df)`` from the Student-t distribution
function, written with the regularized incomplete beta function (continued
fraction, Numerical Recipes §6.4) and inverted by bisection: no table to
keep, any ``df``, ~1e-12 accuracy (``tests/experiments/test_sweep_stats.py`` checks
12.706 at df 1, 2.262 at df 9, 2.093 at df 19 and the normal limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from .. import fpmath


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 ≤ x ≤ 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = fpmath.lgamma(a + b) - fpmath.lgamma(a) - fpmath.lgamma(b) + a * fpmath.log(x) + b * fpmath.log1p(-x)
    front = fpmath.exp(ln)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@lru_cache(maxsize=None)
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` ≥ 1 degrees of freedom
    (``t_quantile(0.975, 9)`` = 2.2622…)."""
    if df < 1:
        raise ValueError("t_quantile needs df >= 1")
    if not 0.0 < p < 1.0:
        raise ValueError("t_quantile needs 0 < p < 1")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:  # df 1, p 0.9995: 636.6
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class Interval:
    """The mean of ``n`` observations and the half-width of its 95 % Student-t
    interval; ``half`` is ``inf`` for one observation, ``nan`` for none."""

    mean: float
    half: float
    n: int

    def to_dict(self) -> dict[str, float | int | None]:
        """``{mean, ci, n}``; non-finite numbers are ``None`` (JSON has no inf)."""
        fin = lambda x: x if math.isfinite(x) else None  # noqa: E731
        return {"mean": fin(self.mean), "ci": fin(self.half), "n": self.n}


def across(values: Iterable[float | int | None], level: float = 0.95) -> Interval:
    """Mean and Student-t interval of the finite values (a figure that is
    ``None``/NaN in a run — no samples — does not count towards ``n``)."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return Interval(math.nan, math.nan, 0)
    mean = math.fsum(xs) / n
    if n == 1:
        return Interval(mean, math.inf, 1)
    var = math.fsum((x - mean) * (x - mean) for x in xs) / (n - 1)
    return Interval(mean, t_quantile(0.5 + level / 2.0, n - 1) * math.sqrt(var / n), n)

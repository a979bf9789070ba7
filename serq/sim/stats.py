"""Statistics of a run (semantics §8): sample summaries, time averages, log histograms.

Three small tools the simulator feeds while it runs and :mod:`serq.sim.results`
reads at the end:

* :func:`summarize` — count, mean, batch-means CI, cv2 and p99 of an ``observe``
  (or a client row) over its samples after warm-up (§8.3, §8.5);
* :class:`TimeAverage` — the time average of a piecewise-constant signal over
  [warmup, end] (§8.2); updated on every change of state, so kept tiny;
* :class:`LogHistogram` — inter-token gaps in 1 % relative buckets (§8.4).
"""

from __future__ import annotations

import math
import sys
from math import fmod, frexp, log as _clog, ulp
from functools import reduce
from collections import Counter
from itertools import chain, repeat
from operator import add
from typing import Any, Callable, Iterable, Sequence

from ..fpmath import exp as _exp, log as _log, log1p as _log1p
from ..report import ObserveSummary

NAN = math.nan
INF = math.inf


def _reduce_add(xs: Iterable[Any], start: Any) -> Any:
    return reduce(add, xs, start)


#: ``fold(xs, start)`` is ``reduce(add, xs, start)``: the additions one at a
#: time, left to right.  CPython before 3.12 sums floats that way in a C
#: double, without a float object per step (the same IEEE additions, five
#: times faster); 3.12 made ``sum`` compensated (Neumaier), so there and on
#: other interpreters it is the ``reduce``.
fold: Callable[[Iterable[Any], Any], Any] = (
    sum if sys.implementation.name == "cpython" and sys.version_info < (3, 12) else _reduce_add)

_NORMAL = sys.float_info.min  # the smallest positive normal float
#: Below this many terms `fold` of a `repeat` costs less than `fold_same`'s tests.
_SHORT = 48


def fold_same(x: float, n: int, acc: float) -> float:
    """``acc`` plus ``x``, ``n`` times in turn: ``fold(repeat(x, n), acc)``,
    in one multiplication and one addition where that is exact.  With ``acc``
    a positive normal float in the binade ``[2^p, 2^(p+1))`` (a multiple of
    its ulp ``u``) and ``x`` not halfway between two multiples of ``u``, each
    ``fl(a + x)`` that stays in the binade is ``a`` plus the multiple ``s`` of
    ``u`` nearest ``x`` (the same for every ``a``), so the sum is ``acc + n·s``
    — exact while it stays in the binade, which the result's exponent shows
    (a product or sum that leaves it is at least ``2^(p+1)``, rounded or not)."""
    if n > 2 and 0.0 < x < INF and acc >= _NORMAL and acc < INF:  # (n ≤ 2: `fold` is no slower)
        u = ulp(acc)
        if fmod(x, u) * 2.0 != u:
            step = (acc + x) - acc  # s, when acc + x stays in the binade
            out = acc + n * step
            if frexp(out)[1] == frexp(acc)[1]:
                return out
    return fold(repeat(x, n), acc)


#: Batch means (§8.3): 20 batches, Student t quantile for 19 degrees of freedom.
BATCHES = 20
T_19 = 2.093
#: Below this many samples an observe has no CI (half-width +inf; decision 7).
CI_MIN_SAMPLES = 40


def summarize(values: Sequence[float]) -> ObserveSummary:
    """The §8.3 statistics of ``values`` (samples in recording order).

    * ``mean``: the arithmetic mean of all samples (correctly rounded sum / n);
    * ``ci``: half-width of the 95 % batch-means CI — 20 batches of ``n // 20``
      consecutive samples (the last ``n mod 20`` dropped), their sample variance
      s² (divisor 19), ``2.093 * sqrt(s² / 20)``; ``inf`` when n < 40;
    * ``cv2``: sample variance (divisor n − 1) / mean²; NaN for n < 2 or mean 0;
    * ``p99``: nearest rank, the sorted sample of rank ceil(0.99 n) in [1, n];
      ``p50``, ``p90``, ``p95`` the same with 0.50, 0.90, 0.95.

    Every float field is NaN for n = 0 (``ci`` stays ``inf``).  Each sum is a
    correctly rounded ``math.fsum`` (or, past the float range, a left-to-right
    fold) and each product and quotient one IEEE operation, so the figures are
    the same bits on every machine (docs/simulator.md, "The same report on
    every machine")."""
    x = [float(v) for v in values]
    n = len(x)
    if n == 0:
        return ObserveSummary(count=0, mean=NAN, ci=INF, cv2=NAN, p99=NAN, p50=NAN, p90=NAN, p95=NAN)
    mean = exact_sum(x) / n
    # §8.3 cv2: two-pass sample variance (divisor n - 1) over the squared mean
    if n < 2 or mean == 0.0 or not math.isfinite(mean):
        cv2 = NAN
    else:
        var = sum_of_squares(x, mean) / (n - 1)
        m2 = mean * mean
        cv2 = var / m2 if m2 > 0.0 else (INF if var > 0.0 else NAN)  # m2 can underflow
    # §8.3 CI: batch means over 20 batches of floor(n/20) samples, recording order
    if n < CI_MIN_SAMPLES:
        ci = INF
    else:
        size = n // BATCHES
        means = [exact_sum(x[b * size:(b + 1) * size]) / size for b in range(BATCHES)]
        s2 = sum_of_squares(means, exact_sum(means) / BATCHES) / (BATCHES - 1)
        ci = T_19 * math.sqrt(s2 / BATCHES)
    # §8.3 p99: nearest rank ceil(0.99 n), computed exactly as ceil(99 n / 100);
    # p50, p90, p95 by the same rule.  NaN sorts last, as Rust's total order puts it.
    ordered = sorted(v for v in x if v == v)
    ordered += [NAN] * (n - len(ordered))
    p50, p90, p95, p99 = (ordered[min(max(-(-q * n // 100), 1), n) - 1] for q in (50, 90, 95, 99))
    return ObserveSummary(count=n, mean=mean, ci=ci, cv2=cv2, p99=p99, p50=p50, p90=p90, p95=p95)


def exact_sum(xs: list[float]) -> float:
    """The correctly rounded sum (``math.fsum``); past the float range, where
    fsum raises, the left-to-right sum (``inf``, ``-inf`` or NaN)."""
    try:
        return math.fsum(xs)
    except (ValueError, OverflowError):  # inf - inf, or a sum beyond the float range
        return _reduce_add(xs, 0.0)


def sum_of_squares(xs: list[float], mean: float) -> float:
    """Σ (x − mean)², each term one subtraction and one multiplication."""
    return exact_sum([(v - mean) * (v - mean) for v in xs])


class TimeAverage:
    """The time average of a piecewise-constant signal (§8.2, §2.8).

    ``set(now, value)`` says the signal is ``value`` from ``now`` on; the
    integral of the previous value up to ``now`` is added first.  It is called
    after every change of a pool's or stage's state, so it does three float
    operations and nothing else.  ``reset(now)`` at the end of warm-up (§8.1)
    restarts the integral and keeps the current value."""

    __slots__ = ("value", "last", "integral", "start")

    def __init__(self, now: float = 0.0, value: float = 0.0) -> None:
        self.value = value  # the signal's current value
        self.last = now  # when it took that value (or the last reset)
        self.integral = 0.0  # of the signal over [start, last]
        self.start = now  # construction or last reset

    def set(self, now: float, value: float) -> None:
        """The signal is ``value`` from ``now`` on."""
        self.integral += self.value * (now - self.last)
        self.last = now
        self.value = value

    def add(self, now: float, delta: float) -> None:
        """The signal changes by ``delta`` at ``now`` (``set``, written out: it is hot)."""
        v = self.value
        self.integral += v * (now - self.last)
        self.last = now
        self.value = v + delta

    def reset(self, now: float) -> None:
        """Restart the integral at ``now`` (end of warm-up); the value is kept."""
        self.integral = 0.0
        self.last = now
        self.start = now

    def area(self, end: float) -> float:
        """∫ signal dt from the last reset (or construction) to ``end`` ≥ the last change."""
        return self.integral + self.value * (end - self.last)

    def mean(self, end: float, start: float | None = None) -> float:
        """∫ over [start, end] / (end − start); ``start`` defaults to the last
        reset, which it should be.  NaN when the span is empty."""
        s = self.start if start is None else start
        span = end - s
        if not span > 0.0:
            return NAN
        return self.area(end) / span


class CountAverage:
    """A stage's count of jobs present and two time averages of it (§5): the
    count itself (``number``) and whether it is positive (``util``).  One
    ``set`` updates both (a stage's count changes at every job's start and
    end, so this is kept to one call); the same float operations as two
    :class:`TimeAverage` of the count and of ``1.0 if count else 0.0``."""

    __slots__ = ("value", "last", "area", "busy_area", "start")

    def __init__(self, now: float = 0.0) -> None:
        self.value = 0  # the count now
        self.last = now  # when it took that value (or the last reset)
        self.area = 0.0  # ∫ count dt over [start, last]
        self.busy_area = 0.0  # ∫ [count > 0] dt over [start, last]
        self.start = now

    def set(self, now: float, value: int) -> None:
        """The count is ``value`` from ``now`` on."""
        dt = now - self.last
        n = self.value
        self.area += n * dt
        self.busy_area += (1.0 if n else 0.0) * dt
        self.last = now
        self.value = value

    def reset(self, now: float) -> None:
        """Restart both integrals at ``now`` (end of warm-up); the count is kept."""
        self.area = self.busy_area = 0.0
        self.last = self.start = now

    def means(self, end: float, start: float) -> tuple[float, float]:
        """(mean count, fraction of time busy) over [start, end] (NaN for an empty span)."""
        span = end - start
        if not span > 0.0:
            return NAN, NAN
        dt = end - self.last
        n = self.value
        return (self.area + n * dt) / span, (self.busy_area + (1.0 if n else 0.0) * dt) / span


#: §8.4: buckets of 1 % relative width, bucket k holds [1.01^k, 1.01^(k+1)).
_LOG_W = _log1p(0.01)


def _bucket(x: float) -> int:
    """The log bucket of a positive finite ``x``: ``floor(log(x) / _LOG_W)``
    with serQ's own logarithm (:mod:`serq.fpmath`), the same on every machine.
    The platform's ``math.log`` (within a few ulps of it on any libm) answers
    first, and serQ's decides whenever the quotient lies within 1e-9 of a
    bucket edge, so the key never depends on the platform (the quotient's ulp
    is below 2e-11 over the whole float range, |quotient| < 75 000)."""
    y = _clog(x) / _LOG_W
    k = math.floor(y)
    if 1e-9 < y - k < 0.999999999:
        return k
    return math.floor(_log(x) / _LOG_W)


#: Zero (and, defensively, negative and NaN values) share one bucket below all others.
_ZERO_KEY = -(1 << 62)
#: +inf gets a bucket above all others.
_INF_KEY = 1 << 62


class LogHistogram:
    """A distribution kept as counts in 1 %-wide logarithmic buckets (§8.4).

    Its cost is the range of the values, not their number.  ``quantile(q)``
    is the bucket of the ``ceil(q n)``-th smallest value, reported as the
    bucket's geometric middle clamped to the smallest and largest value that
    bucket saw — so within 0.5 % of the true order statistic, and exact when
    the bucket holds one distinct value.  ``mean`` is exact.

    A bucket's count, smallest and largest do not depend on the order its
    values came in, so a coalesced run's gaps (serq/sim/stages/vector.py) may
    be put in the buckets later, many runs' at once: ``_later`` holds them
    (the count and the total are kept up to date), and whatever reads the
    buckets counts them in first (:meth:`_counted`)."""

    __slots__ = ("count", "total", "_buckets", "_last_x", "_last_b", "_later", "_held")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        # bucket key -> [count, smallest, largest]
        self._buckets: dict[int, list[float]] = {}
        # the last value added and its bucket: a step engine adds the same gap
        # again and again (every decoder of an iteration), so skip the logarithm
        self._last_x = NAN
        self._last_b: list[float] = []
        # stretches of values (none a NaN or negative) not counted into the buckets yet:
        # (values, counts, n), each value counts × n times (serq/sim/stages/vector.py)
        self._later: list[tuple[Any, Any, int]] = []
        self._held = 0  # the values in `_later`

    def add(self, x: float) -> None:
        """Record one value (a gap in seconds, ≥ 0)."""
        self.count += 1
        self.total += x
        if x == self._last_x:
            b = self._last_b
            b[0] += 1
            return
        if x > 0.0:
            k = _bucket(x) if x != INF else _INF_KEY
        else:
            k = _ZERO_KEY
        found = self._buckets.get(k)
        if found is None:
            b = self._buckets[k] = [0, x, x]
        else:
            b = found
        b[0] += 1
        if x < b[1]:
            b[1] = x
        elif x > b[2]:
            b[2] = x
        self._last_x = x
        self._last_b = b

    def add_repeat(self, x: float, n: int) -> None:
        """Record ``x`` ``n`` times: the state of ``n`` calls of :meth:`add` —
        the first one made (its bucket looked up), the others counted into
        that bucket, the total adding ``x`` to it in turn."""
        if n > 0:
            self.add(x)
            if n > 1:
                m = n - 1
                self.count += m
                self.total = fold(repeat(x, m), self.total) if m < _SHORT else fold_same(x, m, self.total)
                self._last_b[0] += m

    def add_many(self, xs: list[float], n: int = 1, lo: float | None = None) -> None:
        """Record each value of ``xs`` ``n`` times, in order: the same state as
        the calls of :meth:`add` (the total takes the same additions in the
        same order, folded in C; bucket counts, smallest and largest do not
        depend on the order).  ``lo``, when given, is ``min(xs)``."""
        if not xs or n <= 0:
            return
        if n == 1:
            self.total = fold(xs, self.total)
        else:
            self.total = fold(chain.from_iterable(map(repeat, xs, repeat(n, len(xs)))), self.total)
        self.count += n * len(xs)
        if lo is None:
            lo = min(xs)
        self._fill(lambda: Counter(xs).items(), n, lo, max(xs), len(xs), xs[-1])

    def add_runs(self, runs: list[list], n: int, lo: float) -> None:
        """:meth:`add_many` of the values of ``runs``, each ``[x, count]``
        standing for ``count`` values ``x`` in a row, each recorded ``n``
        times; ``lo`` is the smallest ``x``.  The same state: the total takes
        the same additions in the same order."""
        if not runs or n <= 0:
            return
        total = self.total
        m = 0
        for x, c in runs:
            cn = c * n
            total = fold(repeat(x, cn), total) if cn < _SHORT else fold_same(x, cn, total)
            m += c
        self.add_summed(runs, n, lo, max([x for x, _c in runs]), m, total)

    def add_summed(self, runs: list[list], n: int, lo: float, hi: float, m: int, total: float) -> None:
        """:meth:`add_runs` with its sums made by the caller: ``m`` values in
        ``runs`` (none empty), the smallest ``lo``, the largest ``hi``, and
        ``total``, the total with each added ``n`` times in turn."""
        self.total = total
        self.count += n * m
        self._fill(lambda: runs, n, lo, hi, m, runs[-1][0])

    def _fill(self, pairs: Callable[[], Iterable[Any]], n: int, lo: float, hi: float, m: int,
              last_x: float) -> None:
        """Count into the buckets the values ``pairs()`` gives as ``(x,
        count)``, each recorded ``n`` times: ``m`` values in all, the smallest
        ``lo``, the largest ``hi``, the last recorded ``last_x``."""
        buckets = self._buckets
        if lo > 0.0 and hi != INF and self.total == self.total:  # (a NaN makes min and max unreliable)
            k = _bucket(lo)
            if _bucket(hi) == k:  # one bucket holds them all (the usual case)
                one = buckets.get(k)
                if one is None:
                    one = buckets[k] = [0, lo, hi]
                one[0] += n * m
                if lo < one[1]:
                    one[1] = lo
                if hi > one[2]:
                    one[2] = hi
                self._last_x = last_x
                self._last_b = one
                return
        last: list[float] = []
        x = NAN
        for x, c in pairs():
            if x > 0.0:
                k = _bucket(x) if x != INF else _INF_KEY
            else:
                k = _ZERO_KEY
            b = buckets.get(k)
            if b is None:
                b = buckets[k] = [0, x, x]
            b[0] += c * n
            if x < b[1]:
                b[1] = x
            elif x > b[2]:
                b[2] = x
            last = b
        self._last_x = x  # (any value and its bucket will do: `add` skips the logarithm for it)
        self._last_b = last

    @classmethod
    def merged(cls, parts: Iterable["LogHistogram"]) -> "LogHistogram":
        """One histogram of every value of ``parts`` (a family's gaps, in member
        order): the bucket counts add, each bucket's smallest and largest are
        the parts' least and greatest, the total is their sum — the same
        quantiles as one histogram fed all the values, and a mean within a
        rounding of theirs."""
        out = cls()
        buckets = out._buckets
        for h in parts:
            out.count += h.count
            out.total += h.total
            for k, (c, lo, hi) in h._counted().items():
                b = buckets.get(k)
                if b is None:
                    buckets[k] = [c, lo, hi]
                else:
                    b[0] += c
                    b[1] = min(b[1], lo)
                    b[2] = max(b[2], hi)
        return out

    @property
    def mean(self) -> float:
        """The exact mean of the recorded values (NaN when empty)."""
        return self.total / self.count if self.count else NAN

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0 < q ≤ 1) as described above; NaN when empty."""
        n = self.count
        if n == 0:
            return NAN
        rank = min(max(math.ceil(q * n), 1), n)
        seen = 0.0  # a bucket is a list[float]: [count, smallest, largest]
        buckets = self._counted()
        for k in sorted(buckets):
            c, lo, hi = buckets[k]
            seen += c
            if seen >= rank:
                return min(max(_middle(k), lo), hi)
        raise AssertionError("the bucket counts add up to the count")  # pragma: no cover

    def buckets(self) -> list[tuple[float, float, int]]:
        """``(smallest, largest, count)`` of each non-empty bucket, in order."""
        return [(b[1], b[2], int(b[0])) for _k, b in sorted(self._counted().items())]

    def _counted(self) -> dict[int, list[float]]:
        """The buckets, with the values left for later counted in."""
        if self._later:
            from .stages.vector import count_later  # (values are left only once it is imported)
            count_later(self)
        return self._buckets


def _middle(k: int) -> float:
    """The geometric middle of bucket ``k``: 1.01^(k + 1/2)."""
    if k == _ZERO_KEY:
        return 0.0
    if k == _INF_KEY:
        return INF
    return _exp((k + 0.5) * _LOG_W)  # inf for the topmost finite bucket


class Estimator:
    """A stage's online estimates (``est_lambda``, ``est_rho``, ``est_wait``,
    ``price``; docs/offload.md): exponentially weighted averages, weight
    :attr:`ALPHA`, of the gap between the service starts of successive
    completions, the service time and the wait, fed at every completion
    (warm-up or not).  The first service and wait are taken as they are, the
    first gap too; until there is a gap the arrival rate and the utilisation
    read 0."""

    __slots__ = ("last_start", "gap", "service", "wait", "seen")

    ALPHA = 0.01
    RHO_CAP = 0.99

    def __init__(self) -> None:
        self.last_start: float | None = None
        self.gap: float | None = None
        self.service = 0.0
        self.wait = 0.0
        self.seen = 0

    def observe(self, start: float, wait: float, service: float) -> None:
        """A job that started service at ``start`` after waiting ``wait`` completed after ``service``."""
        a = self.ALPHA
        if self.seen == 0:
            self.service, self.wait = service, wait
        else:
            self.service = (1.0 - a) * self.service + a * service
            self.wait = (1.0 - a) * self.wait + a * wait
        last = self.last_start
        if last is not None:
            g = self.gap
            self.gap = start - last if g is None else (1.0 - a) * g + a * (start - last)
        self.last_start = start
        self.seen += 1

    def rates(self) -> tuple[float, float, float]:
        """``(λ̂, ρ̂, Ŵ)``: ``λ̂ = 1 / gap``, ``ρ̂ = min(λ̂ ŝ, 0.99)``; 0 and 0 without a positive gap."""
        g = self.gap
        if g is None or not g > 0.0:
            return 0.0, 0.0, self.wait
        lam = 1.0 / g
        rho = lam * self.service
        return lam, rho if rho < self.RHO_CAP else self.RHO_CAP, self.wait

    def price(self, s_hit: float, ds: float) -> float:
        """The price of a miss that lengthens a hit's service ``s_hit`` by ``ds``:
        ``ds + λ (s_m² − s_hit²) / (2 (1 − ρ)) + λ W ds / (1 − ρ)``, ``s_m = s_hit + ds``
        (the M/G/1 waiting time a longer service adds, over everyone behind it)."""
        lam, rho, w = self.rates()
        s_m = s_hit + ds
        return ds + lam * (s_m * s_m - s_hit * s_hit) / (2.0 * (1.0 - rho)) + lam * w * ds / (1.0 - rho)

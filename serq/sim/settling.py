"""Did the run settle?  A run's own judgement of its steady state (issue 39).

Two signals are read, each the way the simulation literature reads it:

* the **response series** — the turns' response times after warm-up, in the
  order they ended (the client's ``response`` row; the first observe with
  samples when the program has no client);
* the **backlog** — the number of live sessions, as time averages over equal
  windows of the whole run from time 0 (:class:`WindowSeries`: the widths
  double as the run goes on, so there are never more than 512 windows).

and five signals are read (docs/report.md, "Did the run settle?"):

1. **enough data**: at least :data:`MIN_SAMPLES` samples of the response series;
2. **MSER-5** (White 1997; Hoad, Robinson & Davies 2010) on the response
   series: the batch means of 5, and the truncation ``d`` in the first half
   that minimises ``Σ_{j>d} (z_j − z̄_d)² / (m − d)²``; a minimum at the
   bound of the search says the series is still moving.  The same rule on the
   backlog's windows gives a warm-up in time units;
3. **drift**: over the measured window, the slope of 20 batch means (of the
   response series, and of the backlog) by least squares, its t on 18 degrees
   of freedom corrected for correlated residuals; drift when |t| > 2.878
   (two-sided 1 %) and the fitted change is more than a tenth of the mean;
4. **exchangeable batch means**: the lag-1 autocorrelation of the response
   series' 20 batch means above 0.47 (its 1 % bound for independent means)
   says the batches are shorter than the system's memory.

A run has not settled when it has too few samples, when one trend is beyond
doubt (:data:`T_ALONE`, or :data:`T_PLAIN` uncorrected with a large change),
or when two signals fire: one weak signal alone is chance about one run in
thirty.  A backlog still growing over the later half as fast as over the
whole, with the response time rising too, is what an overload looks like —
and a queue still filling: the verdict says so and suggests a run four times
as long, which tells them apart.

The suggested warm-up is the later of the two MSER-5 truncations.  A run of
``batch`` arrivals drains a fixed set of sessions: it has no steady state to
reach and is not judged (``settled`` is ``None``).

Everything here is a handful of IEEE operations on the run's own numbers, in
a fixed order: the verdict is the same on every machine.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Sequence

from ..report import Settling, shortest
from .stats import exact_sum, sum_of_squares

#: Samples the response series needs before it is judged (20 batches of 5).
MIN_SAMPLES = 100
#: Batches of the drift and correlation tests (as the report's batch means, §8.3).
BATCHES = 20
#: Two-sided 1 % point of Student's t with 18 degrees of freedom.
T_18_995 = 2.878
#: A trend this strong (|t| past the two-sided 0.1 % point of t with 18 degrees of freedom) is
#: drift on its own; a weaker one (or any other signal) counts only with a second signal.
T_ALONE = 3.922
#: An uncorrected |t| this large, with a change of more than half the mean, is drift beyond doubt.
T_PLAIN = 5.0
#: A fitted change over the window below this share of the mean is not drift.
MATERIAL = 0.1
#: The lag-1 autocorrelation of 20 independent batch means exceeds this with probability 1 %.
LAG1_BOUND = -1.0 / BATCHES + 2.326 / math.sqrt(BATCHES)
#: MSER's truncation at or past this share of the data (its search stops at a half) is not settled.
NEAR_HALF = 0.45
#: At most this many windows are kept (pairs merge when there would be more).
MAX_WINDOWS = 512


class WindowSeries:
    """Time averages of a piecewise-constant signal over equal windows from
    time 0: window ``i`` covers ``[i·width, (i+1)·width)``.  When the run
    passes :data:`MAX_WINDOWS` windows, neighbours merge in pairs and the
    width doubles, so memory stays bounded whatever the horizon.  ``set`` is
    called when the signal changes (a session starts or ends)."""

    __slots__ = ("width", "areas", "value", "last", "edge")

    def __init__(self, width: float) -> None:
        if not (width > 0.0 and math.isfinite(width)):  # (a window of 0 never ends: `_advance` would loop)
            raise ValueError(f"a window's width must be finite and > 0, not {width!r}")
        self.width = width
        self.areas: list[float] = [0.0]
        self.value = 0.0
        self.last = 0.0
        self.edge = width  # the end of the current window

    def set(self, now: float, value: float) -> None:
        """The signal is ``value`` from ``now`` on (called at every session's start and end: kept short)."""
        if now < self.edge:
            self.areas[-1] += self.value * (now - self.last)
            self.last = now
        else:
            self._advance(now)
        self.value = value

    def _advance(self, now: float) -> None:
        width, areas, v = self.width, self.areas, self.value
        t = self.last
        k = len(areas) - 1  # the window ``t`` is in
        while True:
            edge = (k + 1) * width
            if now < edge:
                areas[k] += v * (now - t)
                break
            areas[k] += v * (edge - t)
            t = edge
            k += 1
            if k >= MAX_WINDOWS:
                self._merge()
                width, areas = self.width, self.areas
                k = len(areas)
            areas.append(0.0)
        self.last = now
        self.edge = len(self.areas) * self.width

    def _merge(self) -> None:
        a = self.areas
        self.areas = [a[i] + (a[i + 1] if i + 1 < len(a) else 0.0) for i in range(0, len(a), 2)]
        self.width *= 2.0

    def means(self, end: float) -> tuple[float, list[float]]:
        """The width and the mean of every whole window before ``end``."""
        if end > self.last:
            self._advance(end)
        whole = int(end // self.width) if self.width > 0 else 0
        return self.width, [a / self.width for a in self.areas[:whole]]


def start_width(horizon: float) -> float:
    """The first window width: a 512th of a finite horizon (the horizon
    itself where that share rounds to 0: a horizon of a few subnormal
    seconds), else a millisecond."""
    if math.isfinite(horizon) and horizon > 0:
        width = horizon / MAX_WINDOWS
        return width if width > 0.0 else horizon
    return 1e-3


# ---------------------------------------------------------------------------
# the rules


def mser(values: Sequence[float]) -> int:
    """The MSER truncation of ``values``: the ``d`` in the first half,
    ``[0, len // 2]``, that minimises the variance of the mean of
    ``values[d:]`` (the marginal standard error rule: ``Σ (x − x̄)² / (n −
    d)²``), the first on a tie.  The search stops at the half, as White's
    rule does: a minimum at the bound says the series has not settled."""
    n = len(values)
    best, best_d = math.inf, 0
    # suffix sums of x and x², from the end (one pass, a fixed order)
    s = q = 0.0
    suffix: list[tuple[float, float]] = [(0.0, 0.0)] * (n + 1)
    for i in range(n - 1, -1, -1):
        x = values[i]
        s += x
        q += x * x
        suffix[i] = (s, q)
    for d in range(0, n // 2 + 1):
        k = n - d
        s, q = suffix[d]
        ss = max(q - s * s / k, 0.0)
        stat = ss / (k * k)
        if stat < best:
            best, best_d = stat, d
    return best_d


def batch_means(values: Sequence[float], batches: int) -> list[float]:
    """Means of ``batches`` consecutive equal batches (the remainder dropped)."""
    size = len(values) // batches
    return [exact_sum(list(values[b * size:(b + 1) * size])) / size for b in range(batches)] if size else []


def slope(ys: Sequence[float]) -> tuple[float, float]:
    """The least-squares slope of ``ys`` against 0, 1, …, k−1 (per batch) and
    its t statistic corrected for correlated residuals (:func:`fit`)."""
    b, t, _ = fit(ys)
    return b, t


def fit(ys: Sequence[float]) -> tuple[float, float, float]:
    """The least-squares slope of ``ys`` against 0, 1, …, k−1 and its t
    statistic twice: corrected for correlated residuals — with ``r`` their
    lag-1 autocorrelation (when positive), the effective number of points is
    ``k (1 − r) / (1 + r)`` and t shrinks by ``√((1 − r) / (1 + r))`` (Santer
    et al. 2000) — and plain.  ``inf`` when the residuals vanish and the slope
    does not."""
    k = len(ys)
    xbar = (k - 1) / 2.0
    ybar = exact_sum(list(ys)) / k
    sxx = sum_of_squares([float(i) for i in range(k)], xbar)
    sxy = exact_sum([(i - xbar) * (y - ybar) for i, y in enumerate(ys)])
    b = sxy / sxx
    resid = [y - ybar - b * (i - xbar) for i, y in enumerate(ys)]
    se = math.sqrt(exact_sum([e * e for e in resid]) / (k - 2) / sxx)
    if se == 0.0:
        t = 0.0 if b == 0.0 else math.inf
        return b, t, t
    r = max(lag1(resid), 0.0)
    return b, (b / se * math.sqrt((1.0 - r) / (1.0 + r)) if r < 1.0 else 0.0), b / se


def lag1(ys: Sequence[float]) -> float:
    """The lag-1 autocorrelation of ``ys`` (0 for a constant series)."""
    k = len(ys)
    m = exact_sum(list(ys)) / k
    den = sum_of_squares(list(ys), m)
    if den == 0.0:
        return 0.0
    return exact_sum([(ys[i] - m) * (ys[i + 1] - m) for i in range(k - 1)]) / den


def _drift(ys: Sequence[float], span: float) -> tuple[float, float, bool, bool]:
    """Per-time slope, its t, whether it is drift (significant and material),
    and whether it is drift beyond doubt: a corrected |t| past
    :data:`T_ALONE`, or a trend that moves the series by more than half its
    mean with an uncorrected |t| past :data:`T_PLAIN` (a backlog growing
    without end wanders about its line, and the correction for correlated
    residuals, made for a stationary series, then hides the trend)."""
    b, t, plain = fit(ys)
    mean = exact_sum(list(ys)) / len(ys)
    change = b * (len(ys) - 1)
    material = abs(change) > MATERIAL * abs(mean) if mean != 0.0 else change != 0.0
    per_time = b * len(ys) / span if span > 0 else math.nan
    sure = material and (abs(t) > T_ALONE or (abs(plain) > T_PLAIN and abs(change) > 0.5 * abs(mean)))
    drift = sure or (abs(t) > T_18_995 and material)
    return per_time, t, drift, sure


# ---------------------------------------------------------------------------
# the verdict


def judge(*, series: Sequence[tuple[float, float]], series_name: str, backlog: WindowSeries | None,
          warmup: float, end: float, arrival_kind: str) -> Settling:
    """The verdict on one run: ``series`` is the response series as (time,
    value) after warm-up, in recording order; ``backlog`` the live-session
    windows from time 0."""
    if arrival_kind == "batch":
        return Settling(settled=None, reasons=["a `batch` workload drains a fixed set of sessions: "
                                               "there is no steady state to judge"],
                        warmup=math.nan, horizon=math.nan, evidence={})
    reasons: list[str] = []  # the signals that fired: weak ones count only together
    strong = False  # one signal strong enough alone: too few samples, or a trend with |t| > T_ALONE
    evidence: dict[str, Any] = {}
    suggested = warmup
    overloaded = rising = False
    measured = end - warmup
    values = [v for _, v in series if v == v]
    n = len(values)
    resp: dict[str, Any] = {"figure": series_name, "count": n}
    evidence["response"] = resp
    if n < MIN_SAMPLES:
        reasons.append(f"too few samples to judge: {n} of `{series_name}` after warm-up ({MIN_SAMPLES} needed)")
        strong = True
    else:
        fives = batch_means(values, n // 5)
        m = len(fives)
        d = mser(fives)
        cut_time = series[min(5 * d, n) - 1][0] if d > 0 else warmup
        resp["mser5_batches"] = m
        resp["mser5_truncation"] = d
        resp["mser5_warmup"] = cut_time
        suggested = max(suggested, cut_time)
        if d >= NEAR_HALF * m:
            reasons.append(f"MSER-5 truncates {5 * d} of {n} samples of `{series_name}`")
        means = batch_means(values, BATCHES)
        _, t, drift, sure = _drift(means, measured)
        rising = drift and t > 0
        r1 = lag1(means)
        resp.update(first=means[0], last=means[-1], slope_per_batch_t=t, lag1=r1)
        if drift:
            reasons.append(f"`{series_name}` drifts: batch means {_g(means[0])} to {_g(means[-1])}")
            strong = strong or sure
        if r1 > LAG1_BOUND:
            reasons.append(f"batch means of `{series_name}` correlated (lag-1 {_g(r1)})")
    if backlog is not None and end > 0:
        width, windows = backlog.means(end)
        first = int(math.ceil(warmup / width)) if width > 0 else 0
        inside = windows[first:]
        back: dict[str, Any] = {"window": width, "windows": len(windows)}
        evidence["backlog"] = back
        if len(windows) >= 10:
            d = mser(windows)
            cut_time = d * width
            back["mser_warmup"] = cut_time
            suggested = max(suggested, cut_time)
            if d >= NEAR_HALF * len(windows) and cut_time > warmup:
                reasons.append(f"backlog still moving (MSER warm-up {shortest(_round(cut_time))}, half the run)")
        if len(inside) >= BATCHES:
            means = batch_means(inside, BATCHES)
            span = len(means) * (len(inside) // BATCHES) * width
            per, t, drift, sure = _drift(means, span)
            back.update(first=means[0], last=means[-1], growth_per_s=per, slope_t=t)
            if drift:
                reasons.append(f"backlog {'grows' if per > 0 else 'shrinks'}: {_g(means[0])} to {_g(means[-1])} "
                               "live sessions")
                strong = strong or sure
            if drift and per > 0 and (rising or n < MIN_SAMPLES):
                # the backlog and the response time both rising, the backlog still growing over the
                # later half, significantly and nearly as fast: the load exceeds what is served
                # (a backlog filling towards a level slows down)
                half = means[BATCHES // 2:]
                late, late_t, late_plain = fit(half)
                overloaded = ((late_t > T_18_995 or late_plain > T_PLAIN)
                              and late >= 0.75 * (per * span / len(means)))
    settled = not (strong or len(reasons) >= 2 or overloaded)
    evidence["signals"] = list(reasons)
    if settled:
        reasons = []
        advice = math.nan
    elif overloaded:  # growing all through: an overload, or a queue still filling; four times longer tells
        advice = _round(min(4.0 * end, _LONGEST))
    else:  # (past the largest float, the largest: a horizon `serq run` takes)
        advice = _round(min(max(2.0 * end, suggested + 2.0 * measured, 5.0 * suggested), _LONGEST))
    evidence["overloaded"] = overloaded
    return Settling(settled=settled, reasons=reasons, warmup=_round(suggested), horizon=advice,
                    evidence=evidence)


def _g(x: float) -> str:
    return f"{x:.3g}"


#: The longest horizon a suggestion gives: the largest float (a finite horizon is all a run takes).
_LONGEST = sys.float_info.max


def _round(x: float) -> float:
    """A suggestion in three significant digits (a time to type, not to compare),
    or ``x`` itself where those digits would round past the largest float."""
    if not math.isfinite(x) or x == 0.0:
        return x
    r = float(f"{x:.3g}")
    return r if math.isfinite(r) else x

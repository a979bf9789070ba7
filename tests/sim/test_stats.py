"""Statistics (semantics §8): summaries of samples, time averages, the ITL histogram.

Every expected number is worked out by hand in a comment next to it."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serq.sim.stats import LogHistogram, TimeAverage, summarize


# -- summarize: mean, cv2, batch-means CI, p99 (§8.3) ------------------------------------


def test_no_samples_give_nan_fields_and_an_infinite_ci():
    s = summarize([])
    assert s.count == 0
    assert math.isnan(s.mean) and math.isnan(s.cv2) and math.isnan(s.p99)
    assert s.ci == math.inf


def test_one_sample_has_a_mean_a_p99_and_no_cv2():
    s = summarize([2.5])
    assert (s.count, s.mean, s.p99) == (1, 2.5, 2.5)
    assert math.isnan(s.cv2)
    assert s.ci == math.inf


def test_cv2_is_the_sample_variance_over_the_squared_mean():
    # 1, 2, 3, 4: mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5,
    # sample variance 5/3, cv2 = (5/3) / 6.25 = 4/15
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert s.mean == 2.5
    assert s.cv2 == pytest.approx(4 / 15, rel=1e-15)


def test_cv2_is_nan_for_a_zero_mean():
    assert math.isnan(summarize([0.0] * 50).cv2)  # a constant 0: 0/0
    assert math.isnan(summarize([-1.0, 1.0]).cv2)  # mean 0, variance 2


def test_a_constant_has_cv2_zero_and_ci_zero():
    s = summarize([3.0] * 100)
    assert (s.mean, s.cv2, s.ci, s.p99) == (3.0, 0.0, 0.0, 3.0)


def test_below_40_samples_the_ci_is_infinite():
    assert summarize(list(range(39))).ci == math.inf
    assert math.isfinite(summarize(list(range(40))).ci)


def test_the_ci_is_over_20_batch_means_of_consecutive_samples():
    # 40 samples 0,0,1,1,…,19,19: 20 batches of 2 with means 0…19;
    # their sample variance is 20·21/12 = 35, half-width 2.093·sqrt(35/20)
    xs = [float(i // 2) for i in range(40)]
    s = summarize(xs)
    assert s.ci == pytest.approx(2.093 * math.sqrt(1.75), rel=1e-12)  # 2.76877…
    assert s.mean == 9.5


def test_the_last_n_mod_20_samples_are_left_out_of_the_ci_but_not_the_mean():
    # 45 samples: batches of 45 // 20 = 2, the last 5 (huge) are dropped from the
    # CI; the mean is over all 45: (2·(0+…+19) + 5·1000) / 45 = (380 + 5000) / 45
    xs = [float(i // 2) for i in range(40)] + [1000.0] * 5
    s = summarize(xs)
    assert s.ci == pytest.approx(2.093 * math.sqrt(1.75), rel=1e-12)
    assert s.mean == pytest.approx(5380 / 45, rel=1e-15)


def test_batches_keep_recording_order():
    # 0,1,…,19,0,1,…,19 in batches of 2: (0,1), (2,3), …, (18,19) twice → means
    # 0.5, 2.5, …, 18.5 twice; around 9.5 the squared deviations sum to
    # 2·(81+49+25+9+1+1+9+25+49+81) = 660, s² = 660/19, half-width 2.093·sqrt(33/19).
    # Sorted, the same values give batch means 0…19 and half-width 2.093·sqrt(1.75).
    inter = [float(i % 20) for i in range(40)]
    assert summarize(inter).ci == pytest.approx(2.093 * math.sqrt(33 / 19), rel=1e-12)
    assert summarize(sorted(inter)).ci == pytest.approx(2.093 * math.sqrt(1.75), rel=1e-12)


def test_p99_is_the_nearest_rank_of_the_sorted_samples():
    xs = list(range(1, 101))
    random.Random(7).shuffle(xs)
    assert summarize(xs).p99 == 99.0  # rank ceil(0.99·100) = 99
    assert summarize(list(range(1, 102))).p99 == 100.0  # rank ceil(99.99) = 100
    assert summarize(list(range(1, 51))).p99 == 50.0  # rank ceil(49.5) = 50: the largest
    assert summarize(list(range(1, 201))).p99 == 198.0  # rank ceil(198.0) = 198


def test_the_mean_is_correctly_rounded():
    # a naive running sum loses the small terms next to 1e16
    xs = [1e16, 1.0, -1e16, 1.0]
    assert summarize(xs).mean == 0.5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=2, max_size=300))
def test_summarize_agrees_with_the_textbook_formulas(xs):
    n = len(xs)
    s = summarize(xs)
    mean = math.fsum(xs) / n
    assert s.count == n
    assert s.mean == pytest.approx(mean, rel=1e-12, abs=1e-9)
    assert s.p99 == sorted(xs)[min(max(math.ceil(0.99 * n), 1), n) - 1]
    if n < 40:
        assert s.ci == math.inf
    else:
        b = n // 20
        means = [math.fsum(xs[k * b : (k + 1) * b]) / b for k in range(20)]
        m = math.fsum(means) / 20
        s2 = math.fsum((x - m) ** 2 for x in means) / 19
        assert s.ci == pytest.approx(2.093 * math.sqrt(s2 / 20), rel=1e-6, abs=1e-6)


# -- TimeAverage (§8.2) ---------------------------------------------------------------------


def test_time_average_of_a_step_signal():
    # 0 on [0, 1), 2 on [1, 3), 0 on [3, 4]: ∫ = 4 over 4 → 1
    t = TimeAverage(0.0, 0.0)
    t.set(1.0, 2.0)
    t.set(3.0, 0.0)
    assert t.mean(4.0, 0.0) == 1.0


def test_the_current_value_holds_up_to_the_end():
    # 5 on [0, 2), then 1 until the end 10: (10 + 8) / 10
    t = TimeAverage(0.0, 5.0)
    t.set(2.0, 1.0)
    assert t.mean(10.0, 0.0) == 1.8


def test_reset_at_the_end_of_warm_up_restarts_the_integral_and_keeps_the_value():
    # 5 on [0, 2), 1 from 2; reset at 4 (value 1 kept); 3 from 6; measured on [4, 8]:
    # (1·2 + 3·2) / 4 = 2
    t = TimeAverage(0.0, 5.0)
    t.set(2.0, 1.0)
    t.reset(4.0)
    t.set(6.0, 3.0)
    assert t.mean(8.0, 4.0) == 2.0
    assert t.mean(8.0) == 2.0  # start defaults to the reset time


def test_add_changes_the_value_by_a_delta():
    # 1 on [0, 1), 3 on [1, 2), 2 on [2, 4]: (1 + 3 + 4) / 4 = 2
    t = TimeAverage(0.0, 1.0)
    t.add(1.0, 2.0)
    t.add(2.0, -1.0)
    assert t.value == 2.0
    assert t.mean(4.0, 0.0) == 2.0


def test_several_changes_at_one_instant_count_only_the_last():
    t = TimeAverage(0.0, 0.0)
    t.set(1.0, 9.0)
    t.set(1.0, 4.0)  # 9 held for no time
    assert t.mean(2.0, 0.0) == 2.0  # (0 + 4) / 2


def test_an_empty_span_has_a_nan_time_average():
    t = TimeAverage(3.0, 7.0)
    assert math.isnan(t.mean(3.0, 3.0))


def test_time_average_is_a_slotted_class():
    t = TimeAverage(0.0, 0.0)
    with pytest.raises(AttributeError):
        t.other = 1  # type: ignore[attr-defined]


# -- LogHistogram (§8.4) --------------------------------------------------------------------


def test_an_empty_histogram_has_nan_mean_and_quantiles():
    h = LogHistogram()
    assert h.count == 0
    assert math.isnan(h.mean) and math.isnan(h.quantile(0.5))


def test_values_alone_in_their_bucket_are_reported_exactly():
    # 1, 2, …, 100 are ≥ 1 % apart, so each has a bucket of its own:
    # median = the 50th smallest = 50; p99 = the 99th = 99; mean 50.5
    h = LogHistogram()
    for x in range(1, 101):
        h.add(float(x))
    assert h.count == 100
    assert h.mean == 50.5
    assert h.quantile(0.5) == 50.0
    assert h.quantile(0.99) == 99.0
    assert h.quantile(1.0) == 100.0
    assert h.quantile(0.0) == 1.0  # rank clamped to 1


def test_a_shared_bucket_reports_its_geometric_middle():
    # bucket 462 is [1.01^462, 1.01^463) = [99.187…, 100.179…); 99.3 and 100.1 are
    # both in it, so both ranks report its middle 1.01^462.5 = 99.682…
    h = LogHistogram()
    h.add(99.3)
    h.add(100.1)
    middle = 1.01**462.5
    assert h.quantile(0.5) == pytest.approx(middle, rel=1e-12)
    assert h.quantile(1.0) == pytest.approx(middle, rel=1e-12)
    assert 99.3 < middle < 100.1
    assert h.mean == pytest.approx(99.7, rel=1e-15)  # the mean stays exact


def test_the_middle_is_clamped_to_the_values_the_bucket_saw():
    # 100.0 and 100.1 share bucket 462 whose middle 99.68 is below both: the
    # smallest seen, 100.0, is reported (within 0.5 % of 100.1)
    h = LogHistogram()
    h.add(100.1)
    h.add(100.0)
    assert h.quantile(1.0) == 100.0
    assert h.buckets() == [(100.0, 100.1, 2)]


def test_zero_has_a_bucket_below_every_other():
    # 0, 0, 0, 1: rank 2 of 4 is a zero; the mean is 1/4
    h = LogHistogram()
    for x in (0.0, 1.0, 0.0, 0.0):
        h.add(x)
    assert h.quantile(0.5) == 0.0
    assert h.quantile(0.75) == 0.0
    assert h.quantile(1.0) == 1.0
    assert h.mean == 0.25


def test_the_itl_gold_example_of_the_spec():
    # §8.4 gold: under `exclusive prefill` A's gaps are 1, 2, 1 → mean 4/3, p99 2;
    # by default they are 1, 1, 1 → mean 1, p99 1
    h = LogHistogram()
    for gap in (1.0, 2.0, 1.0):
        h.add(gap)
    assert h.mean == pytest.approx(4 / 3, rel=1e-15)
    assert h.quantile(0.99) == 2.0
    assert h.quantile(0.5) == 1.0
    d = LogHistogram()
    for gap in (1.0, 1.0, 1.0):
        d.add(gap)
    assert (d.mean, d.quantile(0.99)) == (1.0, 1.0)


def test_a_value_recorded_n_times_at_once_is_n_values_recorded_one_by_one():
    """``add_repeat(x, n)`` (an iteration's decoders share one gap) against ``n``
    calls of ``add``, single adds in between: the same count, total to the bit
    (``n`` additions in turn, past 48 in one step where that is exact),
    buckets and quantiles; ``n = 0`` records nothing."""
    import struct

    rng = random.Random(11)
    pool = [0.0, 1e-3, 1e-3, 0.0125, 0.0125 + 2**-60, 3.0, 7e5, math.inf, math.nan, 1e-300]
    for _ in range(300):
        one, many = LogHistogram(), LogHistogram()
        for _ in range(rng.randint(1, 12)):
            x = rng.choice(pool) if rng.random() < 0.7 else rng.random() * rng.choice([0.05, 1.0])
            n = rng.choice([0, 1, 2, 3, 14, 40, 47, 48, 49, 300])
            if rng.random() < 0.3:
                one.add(x)
                many.add(x)
            for _ in range(n):
                one.add(x)
            many.add_repeat(x, n)
        assert many.count == one.count
        assert struct.pack("<d", many.total) == struct.pack("<d", one.total)
        assert many._buckets == one._buckets or (math.isnan(many.total) and
                                                 repr(many._buckets) == repr(one._buckets))
        assert repr(many.buckets()) == repr(one.buckets())
        for q in (0.5, 0.9, 0.99):
            a, b = many.quantile(q), one.quantile(q)
            assert a == b or (a != a and b != b)


def test_tiny_huge_and_infinite_gaps_do_not_break_the_histogram():
    h = LogHistogram()
    for x in (5e-324, 1e-9, 1.7e308, math.inf):
        h.add(x)
    assert h.quantile(0.25) == 5e-324
    assert h.quantile(0.75) == 1.7e308
    assert h.quantile(1.0) == math.inf


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(min_value=1e-7, max_value=1e4), min_size=1, max_size=200),
    st.sampled_from([0.01, 0.25, 0.5, 0.9, 0.99, 1.0]),
)
def test_quantiles_are_within_half_a_percent_of_the_exact_order_statistic(xs, q):
    h = LogHistogram()
    for x in xs:
        h.add(x)
    n = len(xs)
    exact = sorted(xs)[min(max(math.ceil(q * n), 1), n) - 1]
    assert abs(h.quantile(q) - exact) <= 0.005 * exact
    assert h.mean == pytest.approx(sum(xs) / n, rel=1e-9)


@pytest.mark.parametrize("skew", [0.0, 3e-16, -3e-16])
def test_the_histogram_bucket_is_serqs_logarithm_at_every_edge(skew: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_bucket`` asks the C library's log first and serQ's near an edge: the
    key is serQ's ``floor(log(x) / W)`` for values on and next to every edge
    from 1e-12 to 1e9 s, and for random values over the float range — also
    when the C library's log is off by a couple of ulps either way (``skew``,
    as another libm may be). Without the fallback the skewed runs fail."""

    from serq import fpmath
    from serq.sim import stats
    from serq.sim.stats import _LOG_W, _bucket

    monkeypatch.setattr(stats, "_clog", lambda x: math.log(x) * (1.0 + skew))

    def exact(x: float) -> int:
        return math.floor(fpmath.log(x) / _LOG_W)

    xs = []
    for k in range(math.floor(math.log(1e-12) / _LOG_W), math.ceil(math.log(1e9) / _LOG_W)):
        edge = fpmath.exp(k * _LOG_W)
        xs += [edge, math.nextafter(edge, 0.0), math.nextafter(edge, math.inf),
               math.nextafter(math.nextafter(edge, 0.0), 0.0)]
    rng = random.Random(7)
    xs += [math.ldexp(rng.random() + 0.5, rng.randrange(-1070, 1020)) for _ in range(20000)]
    xs += [5e-324, 2.2250738585072014e-308, 1.0, 1.01, 1.7976931348623157e308]
    wrong = [x for x in xs if _bucket(x) != exact(x)]
    assert not wrong, wrong[:5]

"""Across-seed statistics (serq/experiments/stats.py): Student-t quantiles
without scipy, and the interval a sweep's summary shows."""

from __future__ import annotations

import math

import pytest

from serq.experiments.stats import across, betainc, t_cdf, t_quantile


@pytest.mark.parametrize("df, expected", [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (19, 2.093),
                                          (29, 2.045), (120, 1.980)])
def test_t_quantiles_match_the_printed_tables(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=5e-4)


def test_t_quantiles_tend_to_the_normal_one() -> None:
    assert t_quantile(0.975, 100_000) == pytest.approx(1.959964, abs=1e-4)


def test_the_t_distribution_function_inverts_the_quantile_and_is_symmetric() -> None:
    for df in (1, 3, 9, 50):
        for p in (0.6, 0.9, 0.975, 0.995):
            assert t_cdf(t_quantile(p, df), df) == pytest.approx(p, abs=1e-10)
            assert t_quantile(1 - p, df) == pytest.approx(-t_quantile(p, df))
    # df 1 is the Cauchy law: P(T <= 1) = 3/4
    assert t_cdf(1.0, 1) == pytest.approx(0.75, abs=1e-12)


def test_the_incomplete_beta_function_at_known_points() -> None:
    assert betainc(1, 1, 0.3) == pytest.approx(0.3)  # uniform
    assert betainc(2, 3, 0.4) == pytest.approx(0.5248)  # 1 - (1-x)^4 - 4x(1-x)^3... = 0.5248
    assert betainc(2, 2, 0.5) == pytest.approx(0.5)


def test_the_interval_across_seeds_is_the_hand_computed_one() -> None:
    # values 1, 2, 3, 4: mean 2.5, s² = (2.25+0.25+0.25+2.25)/3 = 5/3,
    # half-width = t(0.975, 3) · sqrt(5/3 / 4) = 3.182446 · 0.645497 = 2.054260
    iv = across([1, 2, 3, 4])
    assert iv.mean == 2.5 and iv.n == 4
    assert iv.half == pytest.approx(3.182446305 * math.sqrt(5 / 12), rel=1e-9)
    assert iv.half == pytest.approx(2.054260, abs=1e-6)


def test_one_seed_has_no_interval_and_missing_values_do_not_count() -> None:
    one = across([3.0])
    assert (one.mean, one.half, one.n) == (3.0, math.inf, 1)
    assert one.to_dict() == {"mean": 3.0, "ci": None, "n": 1}
    iv = across([None, 1.0, float("nan"), 3.0])
    assert (iv.mean, iv.n) == (2.0, 2)
    none = across([None])
    assert none.n == 0 and math.isnan(none.mean)


def test_equal_values_have_a_zero_half_width() -> None:
    assert across([5, 5, 5]).half == 0.0

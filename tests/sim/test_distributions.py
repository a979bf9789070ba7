"""Every distribution of the language (serq/expr.py ``DISTRIBUTIONS``; docs/language.md
§21) has the mean and the variance the page gives it, tightly enough that a draw 1 %
too long fails — and a program's draws are those functions on the documented streams.

Issue 26: a `~exp` 1 % long was caught only by golden snapshots.

How tight.  ``n`` draws from one of the run's SplitMix64 streams (serq/sim/rng.py);
the sample mean has the standard error ``σ/√n`` and the sample variance (for large
``n``) ``sqrt((μ₄ − σ⁴)/n)``, with ``μ₄`` the fourth central moment, worked out below
per law.  The tolerance of a mean is 1/3 of 1 % of it, and ``n`` is chosen so that this
is at least 3 standard errors (checked: a correct draw fails with probability below
0.3 %, and a draw 1 % off is at least 6.7 standard errors out).  A 1 % longer draw
moves the variance by 2 %; the tolerance of a variance is 1.2 % of it, and ``n`` makes
that at least 3 of its standard errors too.  Draws are deterministic, so a pass is a
pass for good; the seconds this takes (about 15 on one core) are the price of that
tightness.  (The h2 variance of this stream is 3.1 standard errors high, inside its
3.19; twelve other streams of 300 000 draws each put it 1.45 combined standard errors
high, and its mean 0.94: no bias.)"""

from __future__ import annotations

import math
from math import factorial

import pytest

import serq
from serq.expr import DISTRIBUTIONS
from serq.sim import rng

MEAN_TOL = 1 / 300  # relative: 1/3 of 1 %
VAR_TOL = 0.012  # relative: a variance 2 % off (a draw 1 % long) must fail
ROOT = rng.root_key(26)  # the streams of a run with seed 26


def _h2(m: float, cv2: float) -> tuple[float, float, float]:
    """Mean, variance and fourth central moment of ``~h2(m, cv2)``: with probability
    ``p`` an exponential of mean ``m/(2p)``, else of mean ``m/(2(1−p))`` (balanced
    means), ``p = (1 + sqrt((v−1)/(v+1)))/2`` with ``v = max(cv2, 1)``; raw moments
    ``E[Xᵏ] = k!·(p·aᵏ + (1−p)·bᵏ)``."""
    v = max(cv2, 1.0)
    p = 0.5 * (1.0 + math.sqrt((v - 1.0) / (v + 1.0)))
    a, b = m / (2 * p), m / (2 * (1 - p))
    raw = [factorial(k) * (p * a**k + (1 - p) * b**k) for k in range(5)]
    mean = raw[1]
    var = raw[2] - mean**2
    mu4 = raw[4] - 4 * mean * raw[3] + 6 * mean**2 * raw[2] - 3 * mean**4
    return mean, var, mu4


# name, arguments, draws, (mean, variance, fourth central moment)
CASES = [
    # exponential of mean m: variance m², μ₄ = 9m⁴
    ("exp", (2.0,), 1_000_000, (2.0, 4.0, 9 * 2.0**4)),
    # uniform on [lo, hi): mean (lo+hi)/2, variance w²/12, μ₄ = w⁴/80 (w = hi − lo); lo ≠ 0
    # so that a bias of either bound shows
    ("uniform", (1.0, 3.0), 300_000, (2.0, 4 / 12, 16 / 80)),
    # Erlang, k = 4 phases of mean m/k: mean m, variance m²/k, excess kurtosis 6/k
    ("erlang", (4.0, 2.0), 230_000, (2.0, 1.0, 1.0 * (3 + 6 / 4))),
    # balanced hyperexponential, mean m, cv² 1.5: variance 1.5 m²
    ("h2", (2.0, 1.5), 1_250_000, _h2(2.0, 1.5)),
    # Bernoulli(p): mean p, variance pq, μ₄ = pq(1 − 3pq)
    ("bernoulli", (0.8,), 300_000, (0.8, 0.16, 0.16 * (1 - 3 * 0.16))),
]


@pytest.mark.parametrize("name, args, n, moments", CASES, ids=[c[0] for c in CASES])
def test_a_draws_mean_and_variance(name: str, args: tuple[float, ...], n: int,
                                   moments: tuple[float, float, float]) -> None:
    mean, var, mu4 = moments
    se_mean = math.sqrt(var / n)
    se_var = math.sqrt((mu4 - var * var) / n)
    # the design: the tolerances are ≥ 3 standard errors, and tight enough to catch 1 %
    assert 3 * se_mean <= MEAN_TOL * mean, f"{name}: {n} draws are too few for a mean within 1/3 %"
    var_tol = VAR_TOL * var
    assert 3 * se_var <= var_tol, f"{name}: {n} draws are too few for a variance within 1.2 %"
    draw = DISTRIBUTIONS[name][1]
    g = rng.global_stream(ROOT, 100)
    xs = [draw(g, *args) for _ in range(n)]
    m = math.fsum(xs) / n
    v = math.fsum([(x - m) * (x - m) for x in xs]) / (n - 1)
    assert abs(m - mean) <= MEAN_TOL * mean, f"{name}{args}: mean {m}, not {mean} ± {MEAN_TOL * mean} (se {se_mean:.3g})"
    assert abs(v - var) <= var_tol, f"{name}{args}: variance {v}, not {var} ± {var_tol:.3g} (se {se_var:.3g})"


def test_det_is_its_argument() -> None:
    draw = DISTRIBUTIONS["det"][1]
    g = rng.global_stream(ROOT, 100)
    assert {draw(g, 2.5) for _ in range(1000)} == {2.5}
    assert g.random() == rng.global_stream(ROOT, 100).random()  # and draws nothing


def test_the_uniform_stream_has_the_moments_of_a_uniform() -> None:
    # the stream under every draw: mean 1/2, variance 1/12 (se 2.9e-4 and 1.3e-4 at 10^6)
    g = rng.global_stream(ROOT, 101)
    n = 1_000_000
    us = [g.random() for _ in range(n)]
    assert min(us) >= 0.0 and max(us) < 1.0
    m = math.fsum(us) / n
    v = math.fsum([(u - m) * (u - m) for u in us]) / (n - 1)
    assert abs(m - 0.5) <= 3 * math.sqrt(1 / 12 / n)
    assert abs(v - 1 / 12) <= 3 * math.sqrt((1 / 80 - 1 / 144) / n)


def test_a_programs_draws_are_the_table_on_the_documented_stream() -> None:
    # docs/simulator.md, "Random numbers": a session's `init` draws come from its workload
    # stream, keyed (serial, turn 0, WORKLOAD); each `~NAME(args)` is DISTRIBUTIONS[NAME]
    # with its arguments in order, so the values are those of the draws tested above
    program = serq.load("""
stage d : delay;
workload {
  arrive batch(200);
  init {
    set a = ~exp(2);
    set b = ~det(2.5);
    set c = ~uniform(1, 3);
    set e = ~erlang(4, 2);
    set f = ~h2(2, 1.5);
    set g = ~bernoulli(0.8);
    observe a = a; observe b = b; observe c = c; observe e = e; observe f = f; observe g = g;
  }
}
session { run d (1); }
run { horizon 10; }
""")
    report = serq.run(program, seed=7)
    root = rng.root_key(7)
    laws = [("a", "exp", (2.0,)), ("b", "det", (2.5,)), ("c", "uniform", (1.0, 3.0)), ("e", "erlang", (4.0, 2.0)),
            ("f", "h2", (2.0, 1.5)), ("g", "bernoulli", (0.8,))]
    got = {name: {s.session: s.value for s in report.samples[name]} for name, _, _ in laws}
    assert all(len(v) == 200 for v in got.values())
    for serial in range(200):
        g = rng.workload_stream(root, serial, 0)
        for name, law, args in laws:
            assert got[name][serial] == DISTRIBUTIONS[law][1](g, *args), (serial, name)


@pytest.mark.parametrize("k", ["0", "-1 / 0", "1e9", "0 / 0"])
def test_an_erlang_draw_has_between_zero_and_ten_thousand_phases(k: str) -> None:
    # k = 0 divided by zero, -inf had no whole part, 1e9 drew for minutes (issue 38)
    import serq

    constant = f"stage s : delay;\nworkload {{ arrive batch(1); }}\nsession {{ run s (~erlang({k}, 1)); }}\nrun {{ horizon 5; }}\n"
    with pytest.raises(serq.SerqError, match="an Erlang draw has more than 0 and at most 10,000"):
        serq.load(constant)  # a constant k: when checking
    drawn = constant.replace("arrive batch(1); }", f"arrive batch(1); init {{ set k = {k}; }} }}").replace(
        f"~erlang({k}, 1)", "~erlang(k, 1)")
    with pytest.raises(serq.SerqError, match="phases; an Erlang draw has more than 0 and at most 10,000"):
        serq.run(serq.load(drawn))

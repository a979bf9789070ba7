"""`--precision REL` (issue 39): the run lengthens until the figure's 95 %
half-width is within REL of its value, checked on the M/M/1 queue, whose
mean response 1/(μ − λ) is known."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import serq
from serq.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
MG1 = ROOT / "programs" / "single-turn" / "mg1.sq"  # law 1: M/M/1, mean service 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_precision_reaches_the_half_width_asked_and_the_closed_form_is_inside(seed: int) -> None:
    # λ = 0.5, μ = 1: the mean response is 2; the mean of a run of n responses has an asymptotic
    # variance of about 29/n (the M/M/1 integrated autocorrelation at load 0.5), so a half-width
    # of 5 % (0.1) needs some 11 000 responses: a horizon near 22 000 from 1 000, four doublings
    program = serq.load(MG1, sets={"lam": "0.5"})
    report = serq.run(program, seed=seed, horizon=1_000, warmup=100, precision=0.05)
    p = report.precision
    assert p["reached"] is True and p["figure"] == "observes.response.mean"
    s = report.observe("response")
    assert s.ci <= 0.05 * s.mean and (p["mean"], p["half_width"]) == (s.mean, s.ci)
    assert p["horizon"] == report.horizon == 1_000 * 2 ** (p["runs"] - 1)
    assert report.warmup == report.horizon / 10  # the warm-up grows with the run, the same share
    assert 8_000 <= report.horizon <= 64_000
    assert abs(s.mean - 2.0) <= 2 * s.ci  # the closed form, within two half-widths


def test_the_report_is_the_plain_run_at_the_horizon_reached() -> None:
    program = serq.load(MG1, sets={"lam": "0.5"})
    report = serq.run(program, seed=1, horizon=1_000, warmup=100, precision=0.05)
    plain = serq.run(program, seed=1, horizon=report.horizon, warmup=report.warmup)
    assert report.text() == plain.text()


def test_the_cap_stops_the_doubling_and_says_so() -> None:
    program = serq.load(MG1, sets={"lam": "0.9"})
    report = serq.run(program, seed=1, horizon=1_000, warmup=100, precision=0.001, max_horizon=4_000)
    p = report.precision
    assert p["reached"] is False and p["runs"] == 3 and report.horizon == 4_000 and p["cap"] == 4_000


def test_serq_run_notes_the_horizon_reached_on_stderr() -> None:
    done = subprocess.run([sys.executable, "-m", "serq", "run", str(MG1), "--set", "lam=0.5", "--horizon", "1000",
                           "--warmup", "100", "--precision", "0.05", "--json"], capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stderr.startswith("note: --precision 0.05 reached at horizon ")
    done = subprocess.run([sys.executable, "-m", "serq", "run", str(MG1), "--set", "lam=0.9", "--horizon", "1000",
                           "--warmup", "100", "--precision", "0.001", "--max-horizon", "2000"],
                          capture_output=True, text=True)
    assert done.returncode == 0
    assert "warning: --precision 0.001 not reached by the cap, horizon 2000 (2 run(s)" in done.stderr


@pytest.mark.parametrize("kw, words", [
    (dict(precision=0.0), "invalid value for --precision"),
    (dict(precision=1.5), "invalid value for --precision"),
    (dict(precision=float("nan")), "invalid value for --precision"),
    (dict(precision=0.1, precision_on="observes.response.p99"), "one run gives an interval only for a mean"),
    (dict(precision=0.1, precision_on="observes.respons.mean"), "did you mean `observes.response.mean`?"),
    (dict(precision=0.1, max_horizon=10.0), "invalid value for --max-horizon"),
])
def test_bad_precision_settings_are_usage_errors(kw: dict, words: str) -> None:
    with pytest.raises(UsageError) as err:
        serq.run(serq.load(MG1), horizon=100, warmup=10, **kw)
    assert words in err.value.render()


def test_a_sweep_lengthens_each_run_and_its_rows_say_the_horizon() -> None:
    result = serq.sweep(MG1, {"lam": [0.3, 0.5]}, seeds=[1], horizon=1_000, warmup=100, jobs=1, precision=0.05)
    for r in result.rows:  # each run went past the horizon given until its mean was within 5 %
        assert r["horizon"] > 1_000 and r["horizon"] == r["warmup"] * 10
        assert r["observes.response.ci"] <= 0.05 * r["observes.response.mean"]


def test_a_horizon_near_the_largest_float_has_a_cap_it_can_take() -> None:
    # the default cap, 32 × the horizon, was inf past the largest float, and the run stopped with
    # "invalid value for --max-horizon: inf", an option never given; it is the largest float then
    prog = serq.load(MG1, sets={"lam": "0.5"})
    report = serq.run(prog, horizon=1e308, warmup=0.0, arrivals=200, precision=1e-4)
    assert report.precision["cap"] == sys.float_info.max
    assert report.precision["runs"] == 1 and report.precision["reached"] is False  # (2e308 is past it)
    with pytest.raises(UsageError, match="max-horizon"):  # (one given is still checked)
        serq.run(prog, horizon=1e308, warmup=0.0, arrivals=200, precision=1e-4, max_horizon=float("inf"))


def test_a_run_that_observed_nothing_says_so() -> None:
    # a trace's program over a horizon too short for a session: the report has no mean at all,
    # and the help listed "the means are " and nothing
    prog = serq.load(ROOT / "programs" / "cluster" / "vidur.sq")
    with pytest.raises(UsageError, match="the report has no means; the run observed nothing") as err:
        serq.run(prog, horizon=1e-320, warmup=0.0, precision=0.1)
    assert "the means are" not in err.value.render() and "longer --horizon" in err.value.render()

"""`--find-max` (serq/experiments/search.py): bisection for the largest value
meeting every SLO, checked against the M/M/1 closed form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from frontend_util import cli_main, cli_streams

from serq.experiments.grid import Slo
from serq.experiments.search import _midpoint, meets

# M/M/1: Poisson arrivals at rate lam, exponential service of rate mu = 1.
# The mean response is R = 1/(mu - lam), so the largest lam with R <= r is
# mu - 1/r: with r = 2, lam* = 0.5 (load 0.5).
MM1 = """
let lam = 0.3;      // arrival rate
let mu = 1.0;       // service rate
stage svc : fifo;
workload {
  arrive poisson(lam);
  init { set t0 = now; set s = ~exp(1 / mu); }
}
session {
  run svc (s);
  observe response = now - t0;
}
run { horizon 20000; warmup 500; seed 1; }
"""


@pytest.fixture()
def mm1(tmp_path: Path) -> str:
    path = tmp_path / "mm1.sq"
    path.write_text(MM1)
    return str(path)


def test_find_max_on_m_m_1_finds_mu_minus_one_over_r(mm1: str, tmp_path: Path) -> None:
    # Statistical tolerance: over 20 seeds of this horizon the mean response at
    # lam = 0.5 has a standard deviation of about 0.059 per seed, so the mean
    # of 4 seeds is within ±0.03 (one s.e.); dR/dlam = 1/(mu-lam)^2 = 4 there,
    # so lam moves by 0.03/4 = 0.0074 per s.e.  4 s.e. plus the bisection's
    # tolerance (0.01): |lam - 0.5| <= 0.04.
    code, out, err = cli_streams("sweep", mm1, "--set", "lam=0.1:0.9", "--find-max", "lam", "--slo",
                                 "observes.response.mean<=2", "--slo-on", "mean", "--seeds", "1-4", "--tol", "0.01",
                                 "--jobs", "2")
    assert code == 0, out + err
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lam = ")  # the answer alone on standard output
    found = float(lines[0].split("=")[1])
    assert abs(found - 0.5) <= 0.04
    # a bracket line per evaluation on standard error, narrowing to the tolerance
    steps = err.splitlines()
    assert all("bracket [" in line for line in steps)
    assert steps[0].startswith("lam = 0.9 fails the SLOs; bracket [0.1, 0.9]")  # (it may not settle either)
    assert steps[1] == "lam = 0.1 meets the SLOs; bracket [0.1, 0.9]"
    lo, hi = (float(x) for x in steps[-1].split("[")[1].rstrip("]").split(", "))
    assert hi - lo <= 0.01 and lo == found


def test_every_seed_is_at_most_the_mean_s_answer_and_json_has_the_steps(mm1: str) -> None:
    answers = {}
    for on in ("every", "mean"):
        code, out = cli_main("sweep", mm1, "--set", "lam=0.1:0.9", "--find-max", "lam", "--slo",
                             "observes.response.mean<=2", "--slo-on", on, "--seeds", "1-4", "--horizon", "5000",
                             "--warmup", "200", "--jobs", "2", "--quiet", "--json")
        assert code == 0, out
        data = json.loads(out)
        assert data["axis"] == "lam" and data["on"] == on and data["slo"] == ["observes.response.mean<=2"]
        assert data["tol"] == pytest.approx(0.008)  # 1 % of the interval
        assert data["bracket"][0] == data["value"]
        assert data["bracket"][1] - data["bracket"][0] <= 0.008
        assert [s["value"] for s in data["steps"][:2]] == [0.9, 0.1]
        answers[on] = data["value"]
    assert answers["every"] <= answers["mean"]


def test_the_top_of_the_interval_is_the_answer_when_it_meets_the_slo(mm1: str) -> None:
    code, out = cli_main("sweep", mm1, "--set", "lam=0.1:0.3", "--find-max", "lam", "--slo",
                         "observes.response.mean<=10", "--horizon", "2000", "--warmup", "0", "--quiet")
    assert code == 0, out
    assert out.strip().splitlines()[-1] == "lam = 0.3"


def test_no_value_meeting_the_slo_is_an_error(mm1: str) -> None:
    code, out = cli_main("sweep", mm1, "--set", "lam=0.5:0.9", "--find-max", "lam", "--slo",
                         "observes.response.mean<=1", "--horizon", "2000", "--warmup", "0", "--quiet")
    assert code == 1
    assert "even 0.5 (the interval's low end) does not meet observes.response.mean<=1" in out


@pytest.mark.parametrize("argv, message", [
    (["--set", "lam=0.1:0.9", "--find-max", "lam", "--slo", "observes.respons.mean<=2"],
     "did you mean `observes.response.mean`?"),
    (["--set", "lam=0.1:0.9", "--find-max", "lamb", "--slo", "x<=2"], "no such axis"),
    (["--set", "lam=0.1:0.9", "--set", "mu=1,2", "--find-max", "lam", "--slo", "x<=2"], "every other axis"),
    (["--set", "lam=0.1:0.9", "--find-max", "lam", "--slo", "x<=2", "--slo-on", "median"], "--slo-on"),
    (["--set", "lam=0.1:0.9", "--find-max", "lam", "--slo", "x<=2", "--tol", "0"], "--tol"),
    (["--set", "lam=0.1:0.9", "--set", "mu=0.5:1", "--find-max", "lam", "--slo", "x<=2"], "START:STOP:STEP"),
])
def test_bad_searches_are_usage_errors(mm1: str, argv: list[str], message: str) -> None:
    code, out = cli_main("sweep", mm1, *argv, "--horizon", "500", "--warmup", "0", "--quiet")
    assert code == 2, out
    assert message in out and "Traceback" not in out


def test_meeting_an_slo_on_every_seed_or_on_the_mean() -> None:
    slo = Slo("x", "<=", 1.0)
    rows = [{"x": 0.5}, {"x": 1.4}]
    assert not meets(rows, [slo], "every")
    assert meets(rows, [slo], "mean")  # mean 0.95
    assert not meets([{"x": 0.5}, {"x": None}], [slo], "mean")  # a run without the figure fails
    assert not meets([], [slo], "every")


def test_midpoints_are_rounded_a_digit_finer_than_the_tolerance() -> None:
    assert _midpoint(0.5, 0.525, 0.008) == 0.5125
    assert _midpoint(0.5, 0.5125, 0.008) == 0.5062
    assert _midpoint(0.1, 0.9, 0.008) == 0.5
    assert 0.5 < _midpoint(0.5, 0.50001, 0.008) < 0.50001  # rounding would leave the bracket


def search_writes_every_point_and_resumes(argv: tuple[str, ...], out: Path, axis: str) -> None:
    """Run a search of seeds 1-2 with ``--json --out OUT`` (in ``argv``): every
    evaluation's rows are in the file, sorted by value then seed, and the same
    command with ``--resume`` gives the same search and leaves the file as it was."""
    code, first = cli_main(*argv)
    assert code == 0, first
    steps = json.loads(first)["steps"]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * len(steps)  # every evaluation's seeds, none lost between evaluations
    assert {r[axis] for r in rows} == {s["value"] for s in steps}
    # sorted by value, then seed, at the end
    assert [(r[axis], r["seed"]) for r in rows] == sorted((s["value"], seed) for s in steps for seed in (1, 2))
    before = out.read_bytes()
    code, again = cli_main(*argv, "--resume")
    assert code == 0 and json.loads(again) == json.loads(first)
    assert out.read_bytes() == before


def test_a_search_writes_every_evaluated_point_and_resumes_from_them(mm1: str, tmp_path: Path) -> None:
    out = tmp_path / "search.jsonl"
    argv = ("sweep", mm1, "--set", "lam=0.1:0.9", "--find-max", "lam", "--slo", "observes.response.mean<=2",
            "--seeds", "1-2", "--horizon", "2000", "--warmup", "100", "--tol", "0.05", "--quiet", "--json",
            "--out", str(out))
    search_writes_every_point_and_resumes(argv, out, "lam")

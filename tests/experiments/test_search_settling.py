"""A capacity search never counts a run that did not settle as meeting an SLO
(issue 39): a short run of an overloaded system can have a mean below the
bound while its queue is still growing."""

from __future__ import annotations

import json
from pathlib import Path

from frontend_util import cli_streams
from test_sweep_find_min import REPLICAS

from serq.experiments.grid import Slo
from serq.experiments.search import horizon_advice, meets

ROOT = Path(__file__).resolve().parents[2]

# REPLICAS: N FIFO replicas of rate 1 behind a random router, Poisson arrivals at 3 a second
# (test_sweep_find_min.py): N = 1 and 2 are overloaded (load 3 and 1.5), their backlog grows by 2
# and 1 a second; from N = 4 each replica is an M/M/1 queue at load 3/N.


def test_an_overloaded_short_run_under_the_bound_is_not_a_meet(tmp_path: Path) -> None:
    path = tmp_path / "replicas.sq"
    path.write_text(REPLICAS.format(lib=ROOT / "lib" / "routers.sq"))
    out = tmp_path / "rows.jsonl"
    code, stdout, stderr = cli_streams("sweep", str(path), "--set", "N=1:8", "--find-min", "N", "--slo",
                                       "observes.response.mean<=150", "--seeds", "1-2", "--horizon", "300",
                                       "--warmup", "30", "--quiet", "--json", "--out", str(out))
    assert code == 0, stdout + stderr
    data = json.loads(stdout)
    first = data["steps"][0]
    assert first["value"] == 1 and first["met"] is False
    assert first["unsettled"] == [1, 2] and first["overloaded"] is True and first["horizon"] == 1200
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    one = [r for r in rows if r["N"] == 1]
    # the figure alone would have met the SLO: the verdict is what refused it
    assert all(r["observes.response.mean"] <= 150 and r["settled"] == 0 for r in one)
    assert data["value"] >= 3
    answer = [r for r in rows if r["N"] == data["value"]]
    assert all(r["settled"] == 1 for r in answer)


def test_meets_refuses_a_point_with_an_unsettled_seed() -> None:
    slo = Slo("x", "<=", 1.0)
    assert meets([{"x": 0.5, "settled": 1}, {"x": 0.5, "settled": 1}], [slo], "every")
    assert not meets([{"x": 0.5, "settled": 1}, {"x": 0.5, "settled": 0}], [slo], "every")
    assert not meets([{"x": 0.5, "settled": 0}], [slo], "mean")
    assert meets([{"x": 0.5, "settled": None}], [slo], "every")  # not judged (a batch): the figure decides


def test_the_advice_is_the_longest_suggested_horizon_or_none_for_an_overload() -> None:
    assert horizon_advice([{"settled": 1}]) is None
    assert horizon_advice([{"settled": 0, "settling.horizon": 600, "settling.overloaded": 0},
                           {"settled": 0, "settling.horizon": 900, "settling.overloaded": 0}]) == 900
    assert horizon_advice([{"settled": 0, "settling.horizon": 1200, "settling.overloaded": 1}]) == 1200


def test_a_search_whose_end_did_not_settle_says_to_run_longer(tmp_path: Path) -> None:
    path = tmp_path / "replicas.sq"
    path.write_text(REPLICAS.format(lib=ROOT / "lib" / "routers.sq"))
    # N = 1 and 2 are overloaded: a search over them alone has no answer, and its runs did not settle
    code, stdout, stderr = cli_streams("sweep", str(path), "--set", "N=1:2", "--find-min", "N", "--slo",
                                       "observes.response.mean<=150", "--seeds", "1-2", "--horizon", "300",
                                       "--warmup", "30", "--quiet")
    assert code == 1, stdout + stderr
    assert "even 2 (the interval's high end) does not meet observes.response.mean<=150" in stderr
    assert "help: its runs did not settle on seed 1, 2: try --horizon 1200 before changing the SLOs" in stderr

"""Paired differences from a baseline (`serq sweep --baseline`, `SweepResult.paired`,
serq/experiments/summary.py): worked by hand, on a two-axis sweep against the
differences computed seed by seed, in the text and JSON of the command, and a
bad baseline refused before any run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from frontend_util import cli_main

import serq
from serq.errors import SerqError
from serq.experiments.stats import across, t_quantile
from serq.experiments.summary import paired

MG1 = "programs/single-turn/mg1.sq"


def test_paired_differences_worked_by_hand() -> None:
    # design b minus a on seeds 1-3 at two loads: differences 1, 2, 3 at load 1 (mean 2, sd 1)
    # and 0.5, 0.5 at load 2 (seed 3 of b missing: 2 pairs, sd 0)
    rows = [
        {"load": 1, "d": "a", "seed": 1, "x": 10.0}, {"load": 1, "d": "a", "seed": 2, "x": 20.0},
        {"load": 1, "d": "a", "seed": 3, "x": 30.0}, {"load": 1, "d": "b", "seed": 1, "x": 11.0},
        {"load": 1, "d": "b", "seed": 2, "x": 22.0}, {"load": 1, "d": "b", "seed": 3, "x": 33.0},
        {"load": 2, "d": "a", "seed": 1, "x": 5.0}, {"load": 2, "d": "a", "seed": 2, "x": 7.0},
        {"load": 2, "d": "a", "seed": 3, "x": 9.0}, {"load": 2, "d": "b", "seed": 1, "x": 5.5},
        {"load": 2, "d": "b", "seed": 2, "x": 7.5},
    ]
    p = paired(rows, ["load", "d"], ["x"], "d", "a")
    assert [(v["load"], v["d"], v["pairs"]) for v, _ in p.points] == [(1, "b", 3), (2, "b", 2)]
    one, two = (s["x"] for _, s in p.points)
    assert one.mean == 2.0 and one.half == pytest.approx(t_quantile(0.975, 2) * 1.0 / math.sqrt(3), rel=1e-12)
    assert two.mean == 0.5 and two.half == 0.0
    text = p.text()
    assert text.splitlines()[0].startswith("paired differences from d=a (same seed, same point;")
    assert "+2 ± 2.484\n" in text  # t(0.975, 2) = 4.303, × 1 / √3: the interval covers 0
    assert text.endswith("+0.5 ± 0 *")  # the same difference on both seeds: it excludes 0
    assert p.to_dict()["points"][1] == {"load": 2, "d": "b", "pairs": 2, "x": {"mean": 0.5, "ci": 0.0, "n": 2}}


def test_a_two_axis_sweep_pairs_each_point_with_its_own_baseline() -> None:
    result = serq.sweep(MG1, grid={"lam": [0.5, 0.7], "law": [0, 1, 3]}, seeds=[1, 2, 3], horizon=300,
                        warmup=20, jobs=1)
    fig = "observes.response.mean"
    p = result.paired("law=0", show=[fig])
    assert [(v["lam"], v["law"]) for v, _ in p.points] == [(0.5, 1), (0.5, 3), (0.7, 1), (0.7, 3)]
    by = {(r["lam"], r["law"], r["seed"]): r[fig] for r in result.rows}
    for values, stats in p.points:
        d = [by[values["lam"], values["law"], s] - by[values["lam"], 0, s] for s in (1, 2, 3)]
        assert stats[fig] == across(d)
        assert values["pairs"] == 3


def test_the_command_prints_the_paired_table_and_json(tmp_path: Path) -> None:
    args = ("sweep", MG1, "--set", "lam=0.5,0.7", "--set", "law=0,1", "--seeds", "1-2", "--horizon", "100",
            "--warmup", "10", "--jobs", "1", "--quiet", "--show", "observes.response.mean", "--baseline", "law=0")
    code, text = cli_main(*args)
    assert code == 0, text
    table = text.split("\n\n")[1].splitlines()
    assert table[0].startswith("paired differences from law=0")
    assert table[1].split() == ["lam", "law", "pairs", "Δ", "observes.response.mean"]  # (an observe: no unit)
    assert [line.split()[:3] for line in table[3:]] == [["0.5", "1", "2"], ["0.7", "1", "2"]]
    code, text = cli_main(*args, "--json")
    data = json.loads(text)
    assert data["paired"]["baseline"] == {"law": 0}
    assert [(p["lam"], p["law"], p["pairs"]) for p in data["paired"]["points"]] == [(0.5, 1, 2), (0.7, 1, 2)]
    # --csv: one table, a row per point, with each design's paired difference beside its own mean
    code, text = cli_main(*args, "--csv")
    assert code == 0, text
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(text)))
    fig = "observes.response.mean"
    assert list(rows[0]) == ["lam", "law", "runs", "settled", f"{fig}.mean", f"{fig}.ci", f"{fig}.n",
                             f"{fig}.diff", f"{fig}.diff_ci", f"{fig}.pairs"]
    assert [(r["lam"], r["law"], r[f"{fig}.pairs"]) for r in rows] == \
        [("0.5", "0", ""), ("0.5", "1", "2"), ("0.7", "0", ""), ("0.7", "1", "2")]
    for r, p in zip((rows[1], rows[3]), data["paired"]["points"]):
        assert float(r[f"{fig}.diff"]) == p[fig]["mean"] and float(r[f"{fig}.diff_ci"]) == p[fig]["ci"]
    assert [float(r[f"{fig}.mean"]) for r in rows] == [p[fig]["mean"] for p in data["points"]]
    code, text = cli_main(*args, "--csv", "--json")
    assert code == 2 and "--csv and --json: give one of them" in text


@pytest.mark.parametrize("baseline, message", [
    ("lawz=0", "--baseline `lawz=0`: no axis `lawz`"),
    ("law=7", "--baseline `law=7`: `7` is not a value of axis `law`"),
    ("lam=0.5", "--baseline `lam=0.5`: axis `lam` has one value, so there is nothing to compare with it"),
    ("9", "--baseline `9`: no axis has the value `9`"),
])
def test_a_bad_baseline_is_refused_before_any_run(baseline: str, message: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # a long sweep: refused at once, not after its runs — a run started first would stop at the
    # budget of one event and the sweep would end with exit 1, not 2 (no clock is read)
    monkeypatch.setenv("SERQ_MAX_EVENTS", "1")
    code, text = cli_main("sweep", MG1, "--set", "lam=0.5", "--set", "law=0,1", "--seeds", "1-50",
                          "--horizon", "1e6", "--jobs", "1", "--quiet", "--baseline", baseline)
    assert code == 2 and message in text, text


def test_a_bare_value_names_the_one_axis_that_has_it() -> None:
    result = serq.sweep(MG1, grid={"law": [0, 1]}, seeds=[1, 2], horizon=100, warmup=10, jobs=1)
    assert result.paired("0").to_dict()["baseline"] == {"law": 0}
    with pytest.raises(SerqError, match="no axis `laws`") as info:
        result.paired("laws=0")
    assert info.value.helps == ["did you mean `law`?"]


# two sessions at t = 0 on a fifo of `servers` servers, works 3 (s0) and `w1` (s1); no draw, so
# every seed gives the same figures and a difference from the baseline is exact on every seed
TWO_JOBS = """
let servers = 1;
let w1 = 1;
stage svc : fifo(servers);
workload { arrive batch(2); init { set w = serial == 0 ? 3 : w1; } }
session { run svc (w); observe response = now; end; }
run { horizon 10; }
"""


def test_a_significant_negative_difference_is_marked_and_a_null_one_is_not(tmp_path: Path) -> None:
    # The mean response by hand (each session's response is its completion time, all arrive at 0):
    #   w1 = 1, servers = 1: s0 runs 0-3, s1 waits and runs 3-4      -> (3 + 4) / 2 = 3.5
    #   w1 = 1, servers = 2: s0 runs 0-3, s1 runs 0-1 beside it      -> (3 + 1) / 2 = 2
    #   w1 = 0: s1's run of no work completes at once (0), s0 ends at 3, whatever the servers
    #                                                                -> (3 + 0) / 2 = 1.5
    # Paired differences from servers = 1, the same on each of the 3 seeds:
    #   w1 = 1: 2 - 3.5 = -1.5 on every seed: sd 0, half-width 0; |-1.5| > 0, the interval
    #           [-1.5, -1.5] excludes 0                              -> "-1.5 ± 0 *"
    #   w1 = 0: 1.5 - 1.5 = 0 on every seed: [0, 0] does not exclude 0 -> "+0 ± 0", no mark
    program = tmp_path / "two_jobs.sq"
    program.write_text(TWO_JOBS)
    fig = "observes.response.mean"
    args = ("sweep", str(program), "--set", "w1=1,0", "--set", "servers=1,2", "--seeds", "1-3", "--jobs", "1",
            "--quiet", "--show", fig, "--baseline", "servers=1")
    code, text = cli_main(*args)
    assert code == 0, text
    table = text.split("\n\n")[1].splitlines()
    assert table[0].startswith("paired differences from servers=1")
    assert [line.split() for line in table[3:]] == [["1", "2", "3", "-1.5", "±", "0", "*"],
                                                    ["0", "2", "3", "+0", "±", "0"]]
    code, text = cli_main(*args, "--json")
    assert code == 0, text
    points = json.loads(text)["paired"]["points"]
    assert [(p["w1"], p[fig]) for p in points] == [(1, {"mean": -1.5, "ci": 0.0, "n": 3}),
                                                   (0, {"mean": 0.0, "ci": 0.0, "n": 3})]
    # A negative difference whose interval covers 0 is not marked: differences -3 and +1 on two
    # seeds, mean -1, sd sqrt(((-2)² + 2²) / 1) = 2·sqrt(2), half-width t(0.975, 1) · 2·sqrt(2) / sqrt(2)
    # = 12.706 · 2 = 25.41 > |-1|; beside it -1 and -1 (sd 0) is marked.
    rows = [{"d": "a", "seed": 1, "x": 10.0}, {"d": "a", "seed": 2, "x": 20.0},
            {"d": "b", "seed": 1, "x": 7.0}, {"d": "b", "seed": 2, "x": 21.0},
            {"d": "c", "seed": 1, "x": 9.0}, {"d": "c", "seed": 2, "x": 19.0}]
    p = paired(rows, ["d"], ["x"], "d", "a")
    b, c = (s["x"] for _, s in p.points)
    assert b.mean == -1.0 and b.half == pytest.approx(2 * t_quantile(0.975, 1), rel=1e-12)
    assert c.mean == -1.0 and c.half == 0.0
    assert [line.split() for line in p.text().splitlines()[3:]] == [["b", "2", "-1", "±", "25.41"],
                                                                    ["c", "2", "-1", "±", "0", "*"]]

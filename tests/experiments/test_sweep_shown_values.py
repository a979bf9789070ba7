"""What a sweep shows in an axis's column (serq/experiments/grid.py
``shown_value``, issue 39): a constant set to an expression shows the value it
took (`--set BwD=BwP` shows 200000, not `BwP`) in the summary's text, JSON and
CSV and in the --out rows; a choice set by name keeps its name."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from frontend_util import cli_main, cli_streams

import serq
from serq.experiments.grid import Axis, shown_value

# Each session observes the two constants, so a row says what its run got:
# observes.bw.mean is BwD exactly, observes.place.mean the place of `pick`.
PROGRAM = """\
let BwP = 2e5;         // bytes a second out of a sender
let BwD = 2e5;         // bytes a second into a receiver
let pick = b in (a, b, c);
stage svc : fifo;
workload { arrive poisson(1); }
session {
  run svc (~exp(0.5));
  observe bw = BwD;
  observe place = pick;
}
run { horizon 40; warmup 0; seed 1; }
"""


@pytest.fixture()
def program(tmp_path: Path) -> str:
    path = tmp_path / "bw.sq"
    path.write_text(PROGRAM)
    return str(path)


def test_a_constant_set_to_another_shows_the_value_it_took(program: str) -> None:
    # BwP = 2e5, so BwD=BwP is 200000 and BwD=BwP*2 is 400000
    code, out, err = cli_streams("sweep", program, "--set", "BwD=BwP,BwP*2", "--show", "observes.bw.mean")
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].split() == ["BwD", "runs", "settled", "observes.bw.mean"]
    assert [line.split()[0] for line in lines[2:]] == ["200000", "400000"]
    assert [line.split()[-1] for line in lines[2:]] == ["200000", "400000"]  # what the runs got


def test_the_json_csv_and_rows_hold_the_value_too(program: str, tmp_path: Path) -> None:
    args = ("sweep", program, "--set", "BwD=BwP*2", "--set", "BwP=1e5,3e5", "--show", "observes.bw.mean")
    code, out = cli_main(*args, "--json", "--out", str(tmp_path / "rows.jsonl"))
    assert code == 0, out
    # BwD is worked out at each point: 2 × 1e5, then 2 × 3e5
    points = json.loads(out)["points"]
    assert [(p["BwP"], p["BwD"]) for p in points] == [(100000, 200000), (300000, 600000)]
    assert [p["observes.bw.mean"]["mean"] for p in points] == [200000, 600000]
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [(r["BwP"], r["BwD"]) for r in rows] == [(100000, 200000), (300000, 600000)]
    code, out = cli_main(*args, "--csv", "--out", str(tmp_path / "rows.csv"))
    assert code == 0, out
    table = list(csv.DictReader(out.splitlines()))
    assert [t["BwD"] for t in table] == ["200000", "600000"]
    with open(tmp_path / "rows.csv", newline="") as f:
        assert [r["BwD"] for r in csv.DictReader(f)] == ["200000", "600000"]


def test_a_choice_set_by_name_keeps_its_name(program: str) -> None:
    # `pick` is worth its choice's place: a 0, b 1, c 2; a place given as a number stays a number
    code, out = cli_main("sweep", program, "--set", "pick=c,a,1", "--show", "observes.place.mean", "--json")
    assert code == 0, out
    points = json.loads(out)["points"]
    assert [p["pick"] for p in points] == ["c", "a", 1]
    assert [p["observes.place.mean"]["mean"] for p in points] == [2, 0, 1]


def test_two_values_that_come_to_the_same_are_one_point_refused(program: str) -> None:
    code, out = cli_main("sweep", program, "--set", "BwD=BwP,2e5")
    assert code == 2, out
    assert "the grid has the point `BwD=200000` twice: `BwD=BwP` and `BwD=200000` give it" in out
    assert "Traceback" not in out


def test_a_baseline_may_name_the_expression_or_its_value(program: str) -> None:
    for spec in ("BwD=BwP", "BwD=200000"):
        code, out = cli_main("sweep", program, "--set", "BwD=BwP,BwP*2", "--show", "observes.bw.mean",
                             "--baseline", spec)
        assert code == 0, out
        assert "paired differences from BwD=200000" in out
        assert out.splitlines()[-1].split() == ["400000", "1", "+2e+05"]  # 400000 − 200000, one pair
    code, out = cli_main("sweep", program, "--set", "BwP=1e5,3e5", "--set", "BwD=BwP,7e5", "--baseline", "BwD=BwP")
    assert code == 2, out
    assert "`BwP` gives BwD the values 100000, 300000 at different points" in out


def test_the_python_sweep_rows_hold_the_value(program: str) -> None:
    result = serq.sweep(program, {"BwD": ["BwP*2"], "pick": ["c"]})
    assert [(r["BwD"], r["pick"], r["observes.bw.mean"]) for r in result.rows] == [(400000, "c", 400000)]


def test_only_an_expression_is_replaced_by_its_value() -> None:
    constants = {"BwP": 2e5, "BwD": 4e5, "pick": 2.0}
    assert shown_value(Axis("BwD", (), "set", "BwD"), "BwP*2", constants) == 4e5
    assert shown_value(Axis("BwD", (), "set", "BwD"), 5, constants) == 5  # a number as given
    assert shown_value(Axis("pick", (), "set", "pick"), "c", constants) == "c"  # a choice's name: no `let`
    assert shown_value(Axis("BwD", (), "set", "BwD"), "inf", {"BwD": float("inf")}) == "inf"
    assert shown_value(Axis("policy", ("sjf",), "policy", "svc"), "sjf", constants) == "sjf"

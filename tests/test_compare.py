"""`serq compare A.sq B.sq` (serq/experiments/compare.py): two programs on common
seeds, their paired differences B − A through the sweep's own runner and
statistics — the same numbers as `serq sweep --baseline` where one sweep holds
both designs, exactly 0 for a program against itself, worked by hand on a
program without draws, and bad input refused in one line before any run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from bounds import EVENTS

import serq
from frontend_util import cli_main, cli_streams

from serq.experiments.compare import compare_rows, split_sets
from serq.experiments.stats import t_quantile
from serq.errors import UsageError

MG1 = "programs/single-turn/mg1.sq"
RUN = ("--horizon", "100", "--warmup", "10", "--jobs", "1", "--quiet")


@pytest.fixture(autouse=True)
def _bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # every run of this file stops with an error past the suite's event budget (tests/bounds.py)
    monkeypatch.setenv("SERQ_MAX_EVENTS", str(EVENTS))


def _json(*args: str) -> dict:
    code, text, err = cli_streams("compare", *args, "--json")
    assert code == 0, text + err
    return json.loads(text)


def _copy_with(tmp_path: Path, name: str, let: str) -> str:
    """MG1 with one `let` line replaced (`let lam = 0.8;` → `let lam = 0.7;`), as FILE.sq."""
    text = Path(MG1).read_text()
    start = text.index(f"let {name} = ")
    end = text.index(";", start)
    out = tmp_path / f"{let.replace(' ', '').replace('let', '').replace('=', '_')}.sq"
    out.write_text(text[:start] + let + text[end:])
    return str(out)


def test_compare_gives_the_sweeps_paired_differences_bit_for_bit(tmp_path: Path) -> None:
    # the sweep runs lam 0.5 and 0.7 on seeds 1-3 and pairs 0.7 with 0.5; compare runs a copy of
    # mg1.sq with `let lam = 0.5` against one with `let lam = 0.7`: the same runs, so the same numbers
    shown = ["observes.response.mean", "observes.wait.p99", "events"]
    a, b = _copy_with(tmp_path, "lam", "let lam = 0.5"), _copy_with(tmp_path, "lam", "let lam = 0.7")
    got = _json(a, b, "--seeds", "1-3", *RUN, *(x for f in shown for x in ("--show", f)))
    code, text, _ = cli_streams("sweep", MG1, "--set", "lam=0.5,0.7", "--seeds", "1-3", *RUN, "--show",
                                ",".join(shown), "--baseline", "lam=0.5", "--json")
    assert code == 0, text
    sweep = json.loads(text)
    (diff,) = sweep["paired"]["points"]
    low, high = sweep["points"]
    assert [r["key"] for r in got["rows"]] == shown
    for row in got["rows"]:
        f = row["key"]
        assert (row["diff"], row["half_width"], row["n"]) == (diff[f]["mean"], diff[f]["ci"], 3)
        assert (row["a"], row["b"]) == (low[f]["mean"], high[f]["mean"])
    # and --set-b on the program itself is the same comparison
    same = _json(MG1, MG1, "--set", "lam=0.5", "--set-b", "lam=0.7", "--seeds", "1-3", *RUN,
                 *(x for f in shown for x in ("--show", f)))
    assert same["rows"] == got["rows"]
    assert (same["a"], same["b"]) == (f"{MG1} (lam=0.5)", f"{MG1} (lam=0.7)")
    # and from Python, with the values as numbers
    result = serq.compare(MG1, MG1, sets={"lam": 0.5}, sets_b={"lam": 0.7}, seeds=range(1, 4), horizon=100,
                          warmup=10, jobs=1, show=shown)
    assert json.loads(json.dumps(result.to_dict()))["rows"] == got["rows"]


def test_a_program_against_itself_differs_by_exactly_zero() -> None:
    data = _json(MG1, MG1, "--seeds", "1-4", *RUN)
    # a kernel program (no client rows, no kv pool): every observe's mean, as the sweep's default
    assert [r["key"] for r in data["rows"]] == ["observes.response.mean", "observes.wait.mean",
                                                "observes.service.mean"]
    for row in data["rows"]:
        assert row["diff"] == 0.0 and row["half_width"] == 0.0 and row["n"] == 4
        assert row["a"] == row["b"] and row["a"] > 0


def test_the_json_has_a_row_per_figure_with_both_means_and_the_difference() -> None:
    data = _json(MG1, MG1, "--set-b", "law=0", "--seeds", "1,5", *RUN, "--show", "observes.service.mean")
    assert list(data) == ["a", "b", "seeds", "settled", "rows"]
    assert data["seeds"] == [1, 5] and data["b"] == f"{MG1} (law=0)"
    (row,) = data["rows"]
    assert list(row) == ["key", "a", "b", "diff", "half_width", "n"]
    # law = 0 serves every customer in exactly mean_s = 1
    assert row["key"] == "observes.service.mean" and row["b"] == 1.0 and row["n"] == 2
    assert row["diff"] == pytest.approx(1.0 - row["a"], rel=1e-12)


def test_the_differences_worked_by_hand() -> None:
    # B − A on seeds 1-3: 1, 2, 3 (mean 2, sd 1: half-width t(0.975, 2) / √3 = 2.484, covers 0);
    # y: 0.5 on every seed (sd 0: half-width 0, and [0.5, 0.5] excludes 0)
    rows_a = [{"seed": s, "x": x, "y": 1.0} for s, x in ((1, 10.0), (2, 20.0), (3, 30.0))]
    rows_b = [{"seed": s, "x": x, "y": 1.5} for s, x in ((1, 11.0), (2, 22.0), (3, 33.0))]
    c = compare_rows(rows_a, rows_b, ["x", "y"], ["a.sq", "b.sq"])
    assert (c.means_a["x"].mean, c.means_b["x"].mean, c.diffs["x"].mean) == (20.0, 22.0, 2.0)
    assert c.diffs["x"].half == pytest.approx(t_quantile(0.975, 2) / math.sqrt(3), rel=1e-12)
    lines = c.text().splitlines()
    assert lines[:3] == ["A = a.sq", "B = b.sq", "paired differences B − A on 3 common seeds "
                         "(mean ± 95 % half-width; * the interval excludes 0)"]
    assert lines[3].split() == ["figure", "A", "B", "B", "−", "A", "n"]
    assert lines[5].split() == ["x", "20", "22", "+2", "±", "2.484", "3"]
    assert lines[6].split() == ["y", "1", "1.5", "+0.5", "±", "0", "*", "3"]
    assert c.csv().splitlines()[1:] == [f"x,20,22,2,{c.diffs['x'].half!r},3", "y,1,1.5,0.5,0,3"]


# two sessions at t = 0 on a fifo of `servers` servers, works 3 and 1, no draw: the figures are
# the same on every seed
TWO_JOBS = """
let servers = 1;
stage svc : fifo(servers);
workload { arrive batch(2); init { set w = serial == 0 ? 3 : 1; } }
session { run svc (w); observe response = now; end; }
run { horizon 10; }
"""


def test_the_table_marks_a_difference_whose_interval_excludes_zero(tmp_path: Path) -> None:
    # one server: s0 runs 0-3, s1 waits and runs 3-4: mean response (3 + 4) / 2 = 3.5;
    # two: s1 runs 0-1 beside s0: (3 + 1) / 2 = 2. B − A = -1.5 on each seed: "-1.5 ± 0 *"
    program = tmp_path / "two_jobs.sq"
    program.write_text(TWO_JOBS)
    code, text = cli_main("compare", str(program), str(program), "--set-b", "servers=2", "--seeds", "1-3",
                          "--quiet", "--show", "observes.response.mean,stages.svc.utilization")
    assert code == 0, text
    lines = text.splitlines()
    assert lines[1] == f"B = {program} (servers=2)"
    assert lines[5].split() == ["observes.response.mean", "3.5", "2", "-1.5", "±", "0", "*", "3"]
    # utilization has a unit: the figure carries it as the sweep's headers do
    assert lines[6].split()[:2] == ["stages.svc.utilization", "[fraction]"]


def test_set_goes_to_each_program_that_has_the_constant() -> None:
    a, b = split_sets([("Lambda", "1.2"), ("N", "8")], [], [("thr", "1")], ["N", "Lambda"], ["Lambda", "thr"])
    assert a == [("Lambda", "1.2"), ("N", "8")] and b == [("Lambda", "1.2"), ("thr", "1")]
    a, b = split_sets([("Lambda", "1")], [("Lambda", "2")], [], ["Lambda"], ["Lambda"])  # --set-a wins for A
    assert (a, b) == ([("Lambda", "2")], [("Lambda", "1")])
    with pytest.raises(UsageError, match="unknown constant `Lamda`: neither program has it") as info:
        split_sets([("Lamda", "1")], [], [], ["N", "Lambda"], ["Lambda", "thr"])
    assert info.value.helps == ["did you mean `Lambda`?",
                                "--set overrides a `let` of either program; A has `N`, `Lambda`",
                                "--set overrides a `let` of either program; B has `Lambda`, `thr`"]
    with pytest.raises(UsageError, match="--set-b: unknown constant `N` in B"):
        split_sets([], [], [("N", "8")], ["N"], ["Lambda"])
    with pytest.raises(UsageError, match="--set: constant `N` is given twice"):
        split_sets([("N", "1"), ("N", "2")], [], [], ["N"], ["N"])


def test_the_default_figures_are_those_both_programs_have(tmp_path: Path) -> None:
    # mg1.sq observes response, wait and service; two_jobs only response: only it is compared
    program = tmp_path / "two_jobs.sq"
    program.write_text(TWO_JOBS)
    data = _json(MG1, str(program), "--seeds", "1-2", "--horizon", "100", "--warmup", "0", "--jobs", "1", "--quiet")
    assert [r["key"] for r in data["rows"]] == ["observes.response.mean"]
    # two_jobs' sessions end by t = 4: after a warm-up of 10 neither has a value, and nothing is left
    code, text = cli_main("compare", MG1, str(program), "--seeds", "1", *RUN)
    assert code == 1 and text.startswith("no figure has a value in both programs' runs"), text


@pytest.mark.parametrize("args, code, message", [
    (("nope.sq", MG1), 1, "cannot read `nope.sq`"),
    ((MG1, MG1, "--seeds", "1-x"), 2, "error: invalid --seeds `1-x`: `1-x` is not a seed or a range A-B"),
    ((MG1, MG1, "--show", "observes.respons.mean"), 2,
     "error: unknown figure `observes.respons.mean`: programs/single-turn/mg1.sq has no such figure\n"
     "help: did you mean `observes.response.mean`?"),
    ((MG1, "TWO", "--show", "observes.wait.mean"), 2, "error: unknown figure `observes.wait.mean`: TWO has no"),
    ((MG1, MG1, "--set", "lamb=1"), 2, "error: unknown constant `lamb`: neither program has it\n"
     "help: did you mean `lam`?"),
    ((MG1, MG1, "--set-a", "x"), 2, "error: invalid --set `x`; expected NAME=EXPR"),
    ((MG1, "TWO", "--set", "servers=lam"), 2, "error: TWO: --set servers: `lam` is not a constant"),
    ((MG1, MG1, "--horizon", "-1"), 2, "error: invalid value for --horizon: -1 (must be finite and > 0)"),
    ((MG1, MG1, "--json", "--csv"), 2, "error: --csv and --json: give one of them"),
    (("-", "-"), 2, "error: both programs read standard input"),
])
def test_bad_input_is_refused_in_one_line_before_any_run(args: tuple[str, ...], code: int, message: str,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a run started first would stop at the budget of one event and exit 1 with another message
    monkeypatch.setenv("SERQ_MAX_EVENTS", "1")
    program = tmp_path / "two_jobs.sq"
    program.write_text(TWO_JOBS)
    args = tuple(str(program) if a == "TWO" else a for a in args)
    message = message.replace("TWO", str(program))
    long = [*(() if "--seeds" in args else ("--seeds", "1-50")), *(() if "--horizon" in args else ("--horizon", "1e6"))]
    got, text = cli_main("compare", *args, *long, "--jobs", "1", "--quiet")
    assert got == code and text.startswith(message), text
    assert "Traceback" not in text


def test_a_failed_run_names_its_program(monkeypatch: pytest.MonkeyPatch) -> None:
    # B's runs stop at a budget of 50 events, A's do not: B's error says it is B's
    monkeypatch.setenv("SERQ_MAX_EVENTS", "50")
    code, text = cli_main("compare", MG1, MG1, "--set-b", "lam=0.9", "--seeds", "1", "--horizon", "1e6",
                          "--jobs", "1", "--quiet")
    assert code == 1 and text.startswith(f"{MG1}: the run at seed 1 failed"), text


def test_two_windows_are_warned_of(tmp_path: Path) -> None:
    # mg1.sq runs to 1e5 by its `run` block, two_jobs to 10: the means are over different windows
    program = tmp_path / "two_jobs.sq"
    program.write_text(TWO_JOBS)
    short = _copy_with(tmp_path, "lam", "let lam = 0.5")
    Path(short).write_text(Path(short).read_text().replace("horizon 1e5; warmup 1e3;", "horizon 20; warmup 0;"))
    code, text = cli_main("compare", short, str(program), "--seeds", "1", "--quiet")
    assert code == 0, text
    assert "warning: A runs to 20 s from warm-up 0 s and B to 10 s from 0 s; give --horizon and --warmup" in text


def test_a_figure_one_programs_runs_lack_is_an_error_naming_that_program() -> None:
    # (a `replay.…` figure passes the check before the runs, which knows only its prefix)
    rows_a = [{"seed": 1, "replay.arrived": 3, "x": 1.0}]
    rows_b = [{"seed": 1, "x": 2.0}]
    with pytest.raises(UsageError, match="unknown figure `replay.arrived`: the runs of b.sq have no such figure"):
        compare_rows(rows_a, rows_b, ["x", "replay.arrived"], ["a.sq", "b.sq"])
    with pytest.raises(UsageError) as info:
        compare_rows(rows_a, rows_b, ["latency"], ["a.sq", "b.sq"])
    assert info.value.helps == ["the figures are the keys of `serq run --json`, joined with dots (client.ttft.p99)"]
    assert compare_rows(rows_a, rows_b, ["x"]).to_dict()["rows"] == [
        {"key": "x", "a": 1.0, "b": 2.0, "diff": 1.0, "half_width": None, "n": 1}]  # one seed: no interval


def test_the_comparison_says_how_many_runs_of_each_program_settled(tmp_path: Path) -> None:
    # load 0.5 settles in 20 000 s; load 1.2 never does (its queue grows by 0.2 a second)
    a, b = _copy_with(tmp_path, "lam", "let lam = 0.5"), _copy_with(tmp_path, "lam", "let lam = 1.2")
    code, out, err = cli_streams("compare", a, b, "--seeds", "1-2", "--horizon", "20000", "--warmup", "1000",
                                 "--quiet", "--json")
    assert code == 0, err
    assert json.loads(out)["settled"] == {"a": "2/2", "b": "0/2"}
    assert err.startswith(f"warning: {b} did not settle on seed 1, 2: its figures describe a run still moving")

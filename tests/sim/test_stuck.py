"""A step stage whose budget lets it schedule nothing while work waits
(issue 8, B8): the run keeps its report and exit code 0, and ends with a
warning on stderr (``Report.warnings()``) naming the stage, the budget and
since when; a budget that is 0 only for a while, or fractional, is no
warning; a NaN budget is a run-time error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import serq
from serq.errors import SerqRuntimeError

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
let B = 100;
pool reqs { cap 4; admit via engine; }
stage engine : step { budget BUDGET; cost 1; }
workload { arrive ARRIVE; }
session {
  hold reqs (1) { run engine prefill (50); run engine decode (5); }
  end;
}
run { horizon 50; }
"""


def program(budget: str = "B", arrive: str = "batch(3)", admit: bool = True, **sets: str) -> serq.Program:
    text = PROGRAM.replace("BUDGET", budget).replace("ARRIVE", arrive)
    if not admit:
        text = text.replace(" admit via engine;", "")
    return serq.load(text, sets=sets)


def starved(report: serq.Report) -> list[str]:
    return [w for w in report.warnings() if w.startswith("stage `engine`")]


@pytest.mark.parametrize("b", ["0", "-2"])
def test_a_budget_that_never_schedules_a_token_is_a_warning(b: str) -> None:
    report = serq.run(program(B=b))
    assert report.ended == 0 and report.stage("engine").iterations == 0
    assert starved(report) == [
        f"stage `engine` scheduled nothing from time 0 to the end: its budget was {b}, so no token could be "
        "scheduled, while 0 resident(s) and 3 request(s) queued for admission waited"]
    # the report itself keeps the seed's layout: the warning is for stderr only
    assert "budget" not in report.text() and "budget" not in report.to_json()


def test_residents_admitted_without_the_engine_wait_too() -> None:
    report = serq.run(program(admit=False, B="0"))
    assert starved(report) and "3 resident(s) and 0 request(s)" in starved(report)[0]


def test_a_budget_that_is_zero_only_for_a_while_is_no_warning() -> None:
    # nothing runs before time 5; arrivals go on, and the stage serves them after
    report = serq.run(program(budget="now < 5 ? 0 : 100", arrive="poisson(0.5)"))
    assert report.ended > 0 and starved(report) == []
    # … unless it is 0 again when the run ends with work waiting: since when it is
    late = serq.run(program(budget="now < 30 ? 100 : 0", arrive="poisson(0.5)"))
    assert len(starved(late)) == 1 and "from time 3" in starved(late)[0]


def test_a_fractional_budget_schedules_fractional_tokens() -> None:
    report = serq.run(program(B="0.5"), horizon=400)
    assert report.ended == 3 and starved(report) == []


def test_a_budget_of_half_a_token_takes_two_iterations_a_token() -> None:
    # budget 0.5, cost 1 s: the prefill of 2 tokens is 4 iterations (ends at 4), the decode of
    # 3 tokens 6 more (ends at 10), iteration by iteration and in coalesced runs alike
    src = """
pool kv { cap 100; }
stage e : step { budget 0.5; cost 1; memory kv; }
workload { arrive batch(1); }
session { hold kv (4) { run e prefill (2) growing kv; observe t1 = now; run e decode (3) growing kv; observe t2 = now; } }
run { horizon 100; }
"""
    for steps in (False, True):
        report = serq.run(serq.load(src), steps=steps)
        assert (report.observe("t1").mean, report.observe("t2").mean) == (4.0, 10.0)


def test_no_work_no_warning() -> None:
    text = PROGRAM.replace("BUDGET", "0").replace("ARRIVE", "batch(1)").replace(
        "hold reqs (1) { run engine prefill (50); run engine decode (5); }", "")
    assert serq.run(serq.load(text)).warnings() == []


def test_a_nan_budget_is_a_run_time_error() -> None:
    # a budget of NaN would schedule NaN tokens: nothing ever finishes, silently
    with pytest.raises(SerqRuntimeError, match="stage `engine`: the budget is NaN"):
        serq.run(program(budget="residents > 0 ? 0 * (1 / (residents - residents)) : 100"))


def test_the_cli_prints_the_report_then_the_warning_and_exits_0() -> None:
    prog = ROOT / "programs/multi-turn/vllm.sq"
    out = subprocess.run([sys.executable, "-m", "serq", "run", str(prog), "--set", "B=0", "--horizon", "300"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ended 0" in out.stdout.splitlines()[0]
    assert out.stderr.startswith("warning: stage `engine` scheduled nothing from time 0 to the end: its budget was 0")
    ok = subprocess.run([sys.executable, "-m", "serq", "run", str(prog), "--horizon", "300", "--warmup", "30"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stderr == ""
    # the same columns as a run that serves, and no line the seed's layout lacks
    def headers(text: str) -> list[list[str]]:
        return [line.split() for line in text.splitlines() if line.startswith(("stage ", "pool "))]
    assert headers(out.stdout) == headers(ok.stdout)
    assert "budget" not in out.stdout

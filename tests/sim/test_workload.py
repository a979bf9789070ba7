"""The client side: arrival processes, traces, distributions and keyed random
streams (semantics §6, §7)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

import serq

ROOT = Path(__file__).resolve().parents[2]


def run_text(text: str, **kw) -> serq.Report:
    return serq.run(serq.load(text), **kw)


@pytest.mark.parametrize("draw, mean, cv2", [
    ("~exp(2)", 2.0, 1.0),
    ("~det(3)", 3.0, 0.0),
    ("~uniform(1, 3)", 2.0, (4 / 12) / 4),
    ("~erlang(4, 2)", 2.0, 0.25),
    ("~h2(2, 9)", 2.0, 9.0),
    ("~bernoulli(0.25)", 0.25, 0.75 / 0.25),
])
def test_each_distribution_has_its_mean_and_cv2(draw: str, mean: float, cv2: float) -> None:
    report = run_text(f"""
workload {{ arrive batch(20000); init {{ observe x = {draw}; }} }}
run {{ horizon 1; }}
""")
    x = report.observe("x")
    assert x.count == 20000
    assert x.mean == pytest.approx(mean, rel=0.03, abs=0.005)
    if cv2 == 0:
        assert x.cv2 == 0
    else:
        assert x.cv2 == pytest.approx(cv2, rel=0.1)


def test_poisson_arrivals_start_at_zero_and_renewal_arrivals_one_gap_later() -> None:
    poisson = run_text("workload { arrive poisson(2); init { observe at = now; } }\nrun { horizon 5000; }")
    assert poisson.samples["at"][0].time == 0.0
    assert poisson.arrivals == pytest.approx(10000, rel=0.03)
    renewal = run_text("workload { arrive renewal(~uniform(0.5, 1.5)); init { observe at = now; } }\nrun { horizon 5000; }")
    assert 0.5 <= renewal.samples["at"][0].time <= 1.5
    assert renewal.arrivals == pytest.approx(5000, rel=0.03)


def test_a_renewal_gap_that_is_not_a_positive_time_stops_the_run() -> None:
    with pytest.raises(serq.SerqError, match="interarrival time is 0"):
        run_text("workload { arrive renewal(~det(0)); }\nrun { horizon 5; }")


def test_no_arrivals_is_the_default() -> None:
    report = run_text("stage s : delay;\nsession { run s (1); }\nrun { horizon 5; }")
    assert report.arrivals == 0 and report.events == 0


def test_a_sessions_workload_draws_do_not_depend_on_the_deployment() -> None:
    # the same (session, turn) draws the same n under a fast and a slow engine
    program = ROOT / "programs/multi-turn/vllm.sq"
    draws = {}
    for budget in ("8192", "256"):
        report = serq.run(serq.load(program, sets={"B": budget}), seed=5, horizon=120, warmup=0)
        draws[budget] = {(s.session, s.turn): s.value for s in report.samples["prefill_tokens"] if s.turn == 1}
    common = set(draws["8192"]) & set(draws["256"])
    assert len(common) > 20
    # a first turn misses the cache, so it prefills exactly its n
    assert all(draws["8192"][k] == draws["256"][k] for k in common)


TRACE = "session,turn,new,out,think\n# a comment\n7,1,100,5,1\n7,2,50,4,0\n\n9,1,30,2,0\n"


def replay(trace_name: str, ordered: str = "ordered") -> str:
    return f"""
stage think : delay;
workload {{
  arrive batch(3);
  trace "{trace_name}" {ordered};
  session {{ turn; loop {{ request; branch (more) {{ run think (think); turn; }} else {{ end; }} }} }}
}}
server {{ observe new_tokens = new; observe outs = out; }}
run {{ horizon 10; }}
"""


def test_an_ordered_trace_replays_its_sessions_in_turn_and_cycles(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(TRACE)
    (tmp_path / "p.sq").write_text(replay("t.csv"))
    report = serq.run(serq.load(tmp_path / "p.sq"))
    got = sorted((s.session, s.turn, s.value) for s in report.samples["new_tokens"])
    # sessions 0 and 2 replay trace session 7 (two turns), session 1 trace session 9
    assert got == [(0, 1, 100), (0, 2, 50), (1, 1, 30), (2, 1, 100), (2, 2, 50)]
    assert report.turns == 5


def test_trace_on_the_command_line_replaces_the_programs_file(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(TRACE)
    (tmp_path / "other.csv").write_text("0,1,11,1,0\n")
    (tmp_path / "p.sq").write_text(replay("t.csv"))
    out = subprocess.run([sys.executable, "-m", "serq", "run", "p.sq", "--trace", "other.csv", "--json"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert '"new_tokens":{"count":3,"mean":11' in out.stdout


@pytest.mark.parametrize("content, message", [
    ("0,1,100,5\n", "t.csv:1: expected 5 or 6 fields, got 4"),
    ("0,1,100,5,1\n0,2,x,5,1\n", "t.csv:2: column 3 (new): invalid number `x`"),
    ("# nothing\n", "empty trace"),
])
def test_a_malformed_trace_is_a_one_line_error_with_its_line(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "t.csv").write_text(content)
    (tmp_path / "p.sq").write_text(replay("t.csv"))
    out = subprocess.run([sys.executable, "-m", "serq", "run", "p.sq"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 1
    assert message in out.stderr and "Traceback" not in out.stderr


def test_an_unordered_trace_picks_sessions_at_random_but_the_same_for_a_seed(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("".join(f"{i},1,{10 * i},1,0\n" for i in range(1, 30)))
    (tmp_path / "p.sq").write_text(replay("t.csv", ordered="").replace("batch(3)", "batch(40)"))
    program = serq.load(tmp_path / "p.sq")
    a = [s.value for s in serq.run(program, seed=1).samples["new_tokens"]]
    b = [s.value for s in serq.run(program, seed=1).samples["new_tokens"]]
    c = [s.value for s in serq.run(program, seed=2).samples["new_tokens"]]
    assert a == b and a != c
    assert a != sorted(a) and len(set(a)) > 10


def test_observing_a_test_that_is_always_false_earns_a_note() -> None:
    report = serq.run(serq.load(ROOT / "programs/single-turn/vllm_single_turn.sq"), horizon=60, warmup=10)
    assert report.observe("hit").mean == 0
    assert any(n.startswith("observe hit is constant 0 over") for n in report.notes)
    assert "note: observe hit is constant 0 over" in report.text()


def test_the_python_api_loads_text_or_paths_and_reads_the_report() -> None:
    program = serq.load("stage s : fifo;\nworkload { arrive poisson(0.5); init { set x = ~exp(1); } }\n"
                        "session { set t = now; run s (x); observe r = now - t; }\nrun { horizon 2000; }",
                        sets={})
    report = serq.run(program, seed=7)
    assert report.observe("r").count == report.stage("s").completed
    assert math.isfinite(report.observe("r").mean)
    with pytest.raises(serq.SerqError, match="unknown observe"):
        report.observe("rr")
    assert serq.check(ROOT / "programs/multi-turn/vllm.sq").startswith("OK: 2 pool(s), 2 stage(s)")
    vllm = serq.load(ROOT / "programs/multi-turn/vllm.sq", sets={"Lambda": "0.6"})
    assert vllm.constants["Lambda"] == 0.6

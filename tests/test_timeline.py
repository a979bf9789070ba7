"""A run over time (issue 39, item 6): ``serq.run(…, timeline=DT)``, ``serq run
--timeline DIR [--timeline-every DT]`` and ``serq plot --timeline DIR``.

The samples are checked against small programs worked out by hand (a FIFO
queue fed once a second, one request on a step engine whose iterations last
1 s each), against the engine run iteration by iteration (the fast path off),
and the report is held to the same bits with and without a timeline.  Runs
are bounded by events (tests/bounds.py)."""

from __future__ import annotations

import csv
import io
import math
import subprocess
import sys
from pathlib import Path

import pytest
from bounds import env
from frontend_util import cli_streams

import serq
from serq.errors import SerqError
from serq.sim import lazy
from serq.sim.stages import decode_run
from serq.timeline import MAX_SAMPLES, grid

ROOT = Path(__file__).resolve().parent.parent
VLLM = ROOT / "programs/multi-turn/vllm.sq"
CLUSTER = ROOT / "programs/cluster/agents.sq"
EVENTS = 2_000_000

# A FIFO stage with one server, a customer at t = 1, 2, 3, … each served 2.5 s.
# Departures at 3.5, 6, 8.5: jobs present at t = 1 … 10 are 1, 2, 3, 3, 4, 4, 5, 6, 6, 7
# (arrivals by t minus departures by t, both counted at t itself), one of them running.
FIFO = """
stage svc : fifo;
workload { arrive renewal(~det(1)); }
session { run svc (2.5); }
run { horizon 10; }
"""


def one_request(o: float, horizon: float) -> str:
    """One request on a step engine: a 10-token prompt, then o − 1 tokens of
    decode; each iteration costs 1 s, KV in blocks of 16 tokens."""
    return f"""
pool reqs {{ cap 16; admit via engine; }}
pool kv {{ cap 160; block 16; evict lru; preempt lifo; }}
stage engine : step {{ budget 100; chunk 0; cost 1; memory kv; }}
workload {{ arrive batch(1); }}
session {{
  hold reqs (1), kv (10) {{
    run engine prefill (10) growing kv;
    run engine decode ({o} - 1) growing kv;
  }}
  end;
}}
run {{ horizon {horizon}; }}
"""


def serq_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`serq ARGS`, its run bounded by events (tests/bounds.py)."""
    return subprocess.run([sys.executable, "-m", "serq", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env())


def values(report: serq.Report) -> dict[tuple[str, str, str], list[float]]:
    assert report.timeline is not None
    return {(s.kind, s.name, s.figure): s.values for s in report.timeline.series}


# -- samples worked out by hand ------------------------------------------------


def test_a_fifo_queue_fed_once_a_second_has_the_counts_worked_out_by_hand() -> None:
    report = serq.run(serq.load(FIFO), timeline=1)
    tl = report.timeline
    assert tl.times == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert tl.get("stage", "svc", "running") == [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    assert tl.get("stage", "svc", "queue") == [0, 0, 1, 2, 2, 3, 3, 4, 5, 5, 6]
    assert [s.figure for s in tl.series] == ["running", "queue"]  # a fifo stage has no tokens


def test_kv_used_steps_up_at_the_growths_inside_a_coalesced_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # The prefill ends at 1 (position 10, one block: 16 units); decode iteration s
    # runs [s, s + 1] and grows at its start when 10 + s > the blocks held: to 32
    # at s = 7, to 48 at s = 23; the last token ends at 30 and the hold goes.
    replays = []
    original = decode_run.DecodeRun.replay
    monkeypatch.setattr(decode_run.DecodeRun, "replay",
                        lambda self, *a: (replays.append(self.length), original(self, *a))[1])
    program = serq.load(one_request(30, horizon=40))
    report = serq.run(program, timeline=1)
    assert replays and max(replays) > 10  # the decode ran as coalesced runs, growths replayed at their ends
    used = report.timeline.get("pool", "kv", "used")
    assert used == [16.0] * 7 + [32.0] * 16 + [48.0] * 7 + [0.0] * 11
    assert report.timeline.get("pool", "kv", "holders") == [1.0] * 30 + [0.0] * 11
    assert report.timeline.get("stage", "engine", "running") == [1.0] * 30 + [0.0] * 11
    monkeypatch.setattr(decode_run.DecodeRun, "replay", original)
    plain = serq.run(program, timeline=1, steps=True)  # every iteration its own event
    assert values(plain) == values(report)


def test_tokens_per_second_counts_each_iteration_in_the_interval_it_ends_in() -> None:
    # o = 6.5: the prefill's 10 tokens end at 1, then o − 1 = 5.5 tokens of decode,
    # 1, 1, 1, 1, 1, 0.5, end at 2 … 7. Every 2 s: (0, 2] holds 11 tokens, (2, 4] and
    # (4, 6] 2 each, (6, 8] the last half: 5.5, 1, 1 and 0.25 tokens a second.
    report = serq.run(serq.load(one_request(6.5, horizon=10)), timeline=2)
    assert report.timeline.times == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert report.timeline.get("stage", "engine", "tokens_per_s") == [0.0, 5.5, 1.0, 1.0, 0.25, 0.0]
    every_second = serq.run(serq.load(one_request(6.5, horizon=10)), timeline=1)
    assert every_second.timeline.get("stage", "engine", "tokens_per_s") == [0, 10, 1, 1, 1, 1, 1, 0.5, 0, 0, 0]


# -- the same report, the same samples either way -------------------------------


@pytest.mark.parametrize("path, horizon, warmup", [(VLLM, 300, 30), (CLUSTER, 100, 10)])
def test_the_report_is_the_same_bits_with_and_without_a_timeline(path: Path, horizon: float, warmup: float) -> None:
    program = serq.load(path)
    without = serq.run(program, horizon=horizon, warmup=warmup, max_events=EVENTS)
    with_ = serq.run(program, horizon=horizon, warmup=warmup, max_events=EVENTS, timeline=0.7)
    assert without.timeline is None and with_.timeline is not None
    assert with_.events == without.events
    assert with_.to_json() == without.to_json()
    assert with_.text() == without.text()


def test_the_samples_are_the_same_with_the_fast_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # the cluster's four engines run coalesced runs that pass over each other's events
    # (serq/sim/lazy.py); steps=True runs every iteration as its own event
    program = serq.load(CLUSTER)
    fast = serq.run(program, horizon=80, warmup=10, max_events=EVENTS, timeline=0.5)
    plain = serq.run(program, horizon=80, warmup=10, max_events=EVENTS, timeline=0.5, steps=True)
    monkeypatch.setattr(lazy, "ENABLED", False)
    not_passing = serq.run(program, horizon=80, warmup=10, max_events=EVENTS, timeline=0.5)
    assert values(fast) == values(plain) == values(not_passing)
    assert any(v > 0 for v in fast.timeline.get("pool", "kv[0]", "used"))


def test_tokens_per_second_integrate_to_the_tokens_the_iterations_served() -> None:
    # the step log (steps=True) has every iteration's start, cost and tokens
    program = serq.load(VLLM)
    report = serq.run(program, horizon=200, warmup=0, max_events=EVENTS, timeline=True, steps=True)
    tl = report.timeline
    rates = tl.get("stage", "engine", "tokens_per_s")
    served = math.fsum(r * (t1 - t0) for r, t0, t1 in zip(rates[1:], tl.times, tl.times[1:]))
    log = report.steps["engine"]
    total = math.fsum(row.tokens for row in log if row.time + row.duration <= tl.times[-1])
    assert total > 10_000
    assert served == pytest.approx(total, rel=1e-12)


def test_the_default_interval_is_the_horizon_over_200_and_ends_at_the_horizon() -> None:
    report = serq.run(serq.load(VLLM), horizon=30, warmup=0, max_events=EVENTS, timeline=True)
    assert report.timeline.interval == 0.15
    assert len(report.timeline.times) == 201
    assert report.timeline.times[-1] == 30.0  # (200 × 0.15 is 30.000000000000004)
    assert grid(0.1, 0.3) == [0.0, 0.1, 0.2, 0.3]


def test_a_run_that_ends_before_the_horizon_is_sampled_to_its_end() -> None:
    program = serq.load(FIFO.replace("horizon 10", "horizon 1000"))
    report = serq.run(program, arrivals=3, timeline=2)
    # three customers at 1, 2, 3 leave at 3.5, 6, 8.5: the run ends at 8.5
    assert report.end == 8.5
    assert report.timeline.times == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert report.timeline.get("stage", "svc", "queue") == [0, 1, 1, 0, 0]


def test_a_run_without_a_timeline_gives_no_pool_or_stage_a_sink() -> None:
    from serq.sim.simulator import Simulator
    from serq.sim.stats import CountAverage

    program = serq.load(CLUSTER)
    plain = Simulator(program, seed=1, horizon=10, warmup=0)
    assert plain.timeline is None
    assert all(p.timeline is None for p in plain.all_pools) and all(e.timeline is None for e in plain.engines)
    assert all(type(st.presence) is CountAverage for members in plain.stages for st in members)
    kept = Simulator(program, seed=1, horizon=10, warmup=0, timeline=1.0)
    assert all(p.timeline is not None for p in kept.all_pools) and all(e.timeline is not None for e in kept.engines)


# -- the CSV --------------------------------------------------------------------


def test_the_csv_has_a_row_per_time_member_and_figure_in_long_form() -> None:
    report = serq.run(serq.load(FIFO), timeline=5)
    assert report.timeline.csv() == (
        "time,kind,name,figure,value\n"
        "0,stage,svc,running,0\n0,stage,svc,queue,0\n"
        "5,stage,svc,running,1\n5,stage,svc,queue,3\n"
        "10,stage,svc,running,1\n10,stage,svc,queue,6\n")


def test_serq_run_timeline_writes_the_csv_and_prints_the_same_report(tmp_path: Path) -> None:
    args = ("run", str(VLLM), "--horizon", "60", "--warmup", "10")
    plain = serq_cli(*args)
    out = serq_cli(*args, "--timeline", str(tmp_path / "tl"), "--timeline-every", "0.5")
    assert plain.returncode == 0 and out.returncode == 0, out.stderr
    assert out.stdout == plain.stdout
    rows = list(csv.DictReader(io.StringIO((tmp_path / "tl/timeline.csv").read_text())))
    assert list(rows[0]) == ["time", "kind", "name", "figure", "value"]
    names = list(dict.fromkeys((r["kind"], r["name"], r["figure"]) for r in rows))
    assert names == [("stage", "engine", "running"), ("stage", "engine", "tokens_per_s"), ("stage", "tool", "running"),
                     ("pool", "kv", "queue"), ("pool", "kv", "holders"), ("pool", "kv", "used"),
                     ("pool", "reqs", "queue"), ("pool", "reqs", "holders"), ("pool", "reqs", "used")]
    times = list(dict.fromkeys(float(r["time"]) for r in rows))
    assert times == [k * 0.5 for k in range(121)]
    assert len(rows) == 121 * len(names)


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf"])
def test_an_interval_that_is_not_finite_and_positive_is_a_usage_error(bad: str, tmp_path: Path) -> None:
    out = serq_cli("run", str(VLLM), "--horizon", "10", "--warmup", "0", "--timeline", str(tmp_path / "tl"),
                   "--timeline-every", bad)
    assert out.returncode == 2
    assert out.stderr.startswith("error: invalid value for --timeline-every") and "Traceback" not in out.stderr
    assert not (tmp_path / "tl").exists()
    with pytest.raises(SerqError, match="finite and > 0"):
        serq.run(serq.load(FIFO), timeline=float(bad))


def test_too_fine_an_interval_and_an_interval_without_a_folder_are_usage_errors(tmp_path: Path) -> None:
    fine = serq_cli("run", str(VLLM), "--horizon", "10", "--warmup", "0", "--timeline", str(tmp_path / "tl"),
                    "--timeline-every", "1e-9")
    assert fine.returncode == 2 and f"at most {MAX_SAMPLES:,}" in fine.stderr
    alone = serq_cli("run", str(VLLM), "--horizon", "10", "--warmup", "0", "--timeline-every", "1")
    assert alone.returncode == 2 and "--timeline-every needs --timeline DIR" in alone.stderr


# -- the plot -------------------------------------------------------------------


def test_serq_plot_timeline_draws_the_folder_a_run_wrote(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = serq_cli("run", str(CLUSTER), "--horizon", "40", "--warmup", "0", "--timeline", str(tmp_path / "tl"))
    assert run.returncode == 0, run.stderr
    # the plots in this process (`serq plot`'s own main, its exit code and streams): what is checked is
    # the files drawn, and a `serq plot` process each paid Python's and matplotlib's start-up again
    code, _, err = cli_streams("plot", "--timeline", str(tmp_path / "tl"), "--out", str(tmp_path / "tl.svg"))
    assert code == 0, err
    svg = (tmp_path / "tl.svg").read_text()
    assert "<svg" in svg and "stage engine: tokens per second" in svg and "pool kv: used (units)" in svg
    code, _, err = cli_streams("plot", "--timeline", str(tmp_path / "tl/timeline.csv"), "--out",
                               str(tmp_path / "again.svg"))
    assert code == 0 and (tmp_path / "again.svg").read_text() == svg, err
    code, _, err = cli_streams("plot", "--timeline", str(tmp_path / "tl"), "--out", str(tmp_path / "tl.png"))
    assert code == 0 and (tmp_path / "tl.png").read_bytes()[:4] == b"\x89PNG", err


def test_serq_plot_timeline_refuses_a_sweeps_options_and_a_folder_without_a_timeline(tmp_path: Path) -> None:
    mixed = serq_cli("plot", "--timeline", str(tmp_path), "--x", "Lambda", "--out", str(tmp_path / "f.svg"))
    assert mixed.returncode == 2 and "--x do not apply" in mixed.stderr
    missing = serq_cli("plot", "--timeline", str(tmp_path), "--out", str(tmp_path / "f.svg"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr and "timeline.csv" in missing.stderr
    assert "Traceback" not in missing.stderr + mixed.stderr

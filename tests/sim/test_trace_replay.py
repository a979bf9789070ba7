"""Trace replay (issue 12, item 1; docs/replay.md): named trace columns, the
`arrival` column, `arrive trace` and `arrive trace(rate)`, the end of a replay,
and its errors; the bundled replay programs; the Azure conversation trace when
`../shared/data` holds it."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

import serq
from serq import SerqError
from serq.traces.reader import TraceTurn, parse_trace, read_trace

ROOT = Path(__file__).resolve().parents[2]
AZURE = ROOT.parent / "shared" / "data" / "azure-llm-2023"

# A delay stage: each turn takes `think` seconds, so a session that arrives at
# `a` ends at `a` plus the sum of its rows' `think`, exactly.
DELAY = """\
stage d : delay;
let rate = 1;
workload { arrive trace(rate); trace "t.csv"; }
session {
  set t0 = now;
  turn;
  loop {
    run d (think);
    branch (more) { turn; } else { observe start = t0; observe stop = now; end; }
  }
}
run { horizon 100; }
"""

# session 7 arrives last but is listed first: the replay sorts by arrival
TRACE = """\
# a tiny trace: columns by name, in no particular order
arrival,session,new,out,think
3.5,7,1,1,1.25
3.5,7,1,1,0.5
0.25,1,1,1,2.5
1.75,2,10,20,4
"""


def program(tmp_path: Path, trace: str = TRACE, source: str = DELAY) -> Path:
    (tmp_path / "t.csv").write_text(trace)
    path = tmp_path / "p.sq"
    path.write_text(source)
    return path


def starts_and_stops(report: serq.Report) -> list[tuple[int, float, float]]:
    """(session serial, arrival, end) per session, by serial."""
    starts = {s[1]: s[3] for s in report.samples["start"]}
    stops = {s[1]: s[3] for s in report.samples["stop"]}
    return sorted((k, starts[k], stops[k]) for k in starts)


# ---------------------------------------------------------------- named columns
def test_named_columns_in_any_order_select_by_name() -> None:
    c = parse_trace("out,think,new,session,arrival,turn,forced\n5,0.5,100,3,2.5,1,1\n6,0,200,3,9,2,0\n", "t.csv")
    assert c.sessions == ((TraceTurn(100, 5, 0.5, 1), TraceTurn(200, 6, 0, 0)),)
    assert c.arrivals == (2.5,)  # the first row's; the second row's 9 is read and not used


def test_think_and_forced_default_to_0_and_arrival_is_optional() -> None:
    c = parse_trace("session,new,out\n0,10,5\n1,20,6\n", "t.csv")
    assert c.sessions == ((TraceTurn(10, 5, 0, 0),), (TraceTurn(20, 6, 0, 0),))
    assert c.arrivals is None


def test_a_named_trace_is_read_as_the_same_positional_trace() -> None:
    rows = "0,1,100,5,2\n0,2,30,6,0\n1,1,70,7,1\n"
    positional = parse_trace(rows, "t.csv")
    assert parse_trace("session,turn,new,out,think\n" + rows, "t.csv") == positional
    shuffled = "think,out,new,turn,session\n" + "".join(
        ",".join(reversed(r.split(","))) + "\n" for r in rows.splitlines())
    assert parse_trace(shuffled, "t.csv").sessions == positional.sessions


@pytest.mark.parametrize("text", [
    "0,1,100,5,2\n0,2,30,6,0,1\n1,1,70,7,1\n",  # headerless, five and six fields mixed
    "session,turn,new,out,think\n0,1,100,5,2\n0,2,30,6,0,1\nsession,again\n1,1,70,7,1\n",  # the seed's header
    "# c\n\nsession,turn,new,out,think,forced\n0,1,100,5,2,0\n0,2,30,6,0,1\n1,1,70,7,1,0\n",
])
def test_positional_traces_keep_their_old_reading(text: str) -> None:
    c = parse_trace(text, "t.csv")
    assert c.arrivals is None
    assert c.sessions == ((TraceTurn(100, 5, 2, 0), TraceTurn(30, 6, 0, 1)), (TraceTurn(70, 7, 1, 0),))


@pytest.mark.parametrize("text, where, message, help_", [
    ("session,new,out,arival\n0,1,1,0\n", "t.csv:1:17", "unknown trace column `arival`", "did you mean `arrival`?"),
    ("sesion,new,out\n", "t.csv:1:1", "unknown trace column `sesion`", "did you mean `session`?"),
    ("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,374,44\n", "t.csv:1:1",
     "unknown trace column `arrived_at`", "serq trace import splitwise"),
    ("session, new,out,new\n", "t.csv:1:18", "the header names the column `new` twice", None),
    ("session,,out\n", "t.csv:1:9", "the header's column 2 has no name", None),
    ("session,new,arrival\n", "t.csv:1:1", "the header has no `out` column", None),
    ("session,new,out\n0,1\n", "t.csv:2", "expected 3 fields, got 2", "names the columns session,new,out"),
    ("session,new,out\n0,1,1\n0, x,1\n", "t.csv:3:3", "column `new`: invalid number `x`", None),
    ("session,new,out,arrival\n0,1,1,-2\n", "t.csv:2:7", "column `arrival`: the arrival time -2 is not a finite time",
     None),
    ("session,new,out,arrival\n0,1,1,inf\n", "t.csv:2:7", "column `arrival`", None),
    ("# only a header\nsession,new,out,arrival\n", "t.csv", "empty trace", None),
])
def test_named_trace_errors(text: str, where: str, message: str, help_: str | None) -> None:
    with pytest.raises(SerqError) as err:
        parse_trace(text, "t.csv")
    assert err.value.headline().startswith(f"{where}: {message}"), err.value.headline()
    if help_ is not None:
        assert any(help_ in h for h in err.value.helps), err.value.helps


def test_the_positional_errors_are_unchanged() -> None:
    with pytest.raises(SerqError) as err:
        parse_trace("0,1,2,3\n", "t.csv")
    assert err.value.headline() == "t.csv:1: expected 5 or 6 fields, got 4"
    with pytest.raises(SerqError) as err:
        parse_trace("0,1,x,3,4\n", "t.csv")
    assert err.value.headline() == "t.csv:1: column 3 (new): invalid number `x`"


# ---------------------------------------------------------------- arrive trace
def test_sessions_arrive_exactly_at_the_trace_times_and_replay_their_own_rows(tmp_path: Path) -> None:
    report = serq.run(serq.load(program(tmp_path)))
    # serials in arrival order: the trace's session 1 (0.25), 2 (1.75), then 7 (3.5, two rows)
    assert starts_and_stops(report) == [(0, 0.25, 2.75), (1, 1.75, 5.75), (2, 3.5, 5.25)]
    assert (report.arrivals, report.ended, report.turns, report.end) == (3, 3, 4, 5.75)
    assert report.replay == {"sessions": 3, "arrived": 3, "live": 0, "exhausted": True, "end": 5.75}
    assert report.replay_note() == "the trace ended: its 3 sessions arrived and ended by time 5.75, before the horizon 100"


def test_arrival_times_are_exact_not_sums_of_gaps(tmp_path: Path) -> None:
    times = [0.1 * k for k in range(1, 40)]  # 0.1 + 0.1 + 0.1 != 0.30000000000000004
    rows = "".join(f"{k},1,1,0,{t!r}\n" for k, t in enumerate(times))
    report = serq.run(serq.load(program(tmp_path, "session,new,out,think,arrival\n" + rows)))
    assert [s[2] for s in starts_and_stops(report)] == times


def test_rate_divides_the_arrival_times_and_not_the_work(tmp_path: Path) -> None:
    path = program(tmp_path)
    report = serq.run(serq.load(path, sets={"rate": "2"}))
    assert starts_and_stops(report) == [(0, 0.125, 2.625), (1, 0.875, 4.875), (2, 1.75, 3.5)]
    report = serq.run(serq.load(path, sets={"rate": "0.5"}))
    assert [s[1] for s in starts_and_stops(report)] == [0.5, 3.5, 7.0]


def test_arrive_trace_without_a_rate_is_rate_1(tmp_path: Path) -> None:
    path = program(tmp_path, source=DELAY.replace("arrive trace(rate);", "arrive trace;"))
    assert serq.load(path).arrival == serq.ir.Arrival("trace", rate=1.0)
    assert starts_and_stops(serq.run(serq.load(path)))[0] == (0, 0.25, 2.75)


def test_the_horizon_can_end_the_replay_first(tmp_path: Path) -> None:
    report = serq.run(serq.load(program(tmp_path)), horizon=4)
    assert (report.arrivals, report.ended, report.end) == (3, 1, 4)
    assert report.replay == {"sessions": 3, "arrived": 3, "live": 2, "exhausted": False, "end": 4}
    assert report.replay_note() == "the horizon 4 ended the replay: 3 of the trace's 3 sessions arrived, 2 still live"
    report = serq.run(serq.load(program(tmp_path)), horizon=1)
    assert (report.arrivals, report.replay["arrived"], report.replay["exhausted"]) == (1, 1, False)


def test_an_arrival_at_the_horizon_arrives(tmp_path: Path) -> None:
    assert serq.run(serq.load(program(tmp_path)), horizon=1.75).arrivals == 2


def test_arrivals_n_replays_the_first_n_sessions_then_drains(tmp_path: Path) -> None:
    report = serq.run(serq.load(program(tmp_path)), arrivals=2)
    assert starts_and_stops(report) == [(0, 0.25, 2.75), (1, 1.75, 5.75)]
    assert report.replay["exhausted"] and report.replay["sessions"] == 2
    with pytest.raises(SerqError, match=r"--arrivals 4: the trace `.*t.csv` has only 3 sessions"):
        serq.run(serq.load(program(tmp_path)), arrivals=4)


def test_the_run_block_may_say_arrivals_for_a_trace(tmp_path: Path) -> None:
    path = program(tmp_path, source=DELAY.replace("run { horizon 100; }", "run { horizon 100; arrivals 1; }"))
    assert serq.run(serq.load(path)).arrivals == 1


def test_the_trace_is_not_cycled_and_no_session_is_drawn(tmp_path: Path) -> None:
    a, b = (serq.run(serq.load(program(tmp_path)), seed=s) for s in (1, 2))
    assert starts_and_stops(a) == starts_and_stops(b)


def test_ordered_changes_nothing_under_arrive_trace(tmp_path: Path) -> None:
    source = DELAY.replace('trace "t.csv";', 'trace "t.csv" ordered;')
    assert starts_and_stops(serq.run(serq.load(program(tmp_path, source=source)))) == [
        (0, 0.25, 2.75), (1, 1.75, 5.75), (2, 3.5, 5.25)]


def test_dash_dash_trace_swaps_the_file(tmp_path: Path) -> None:
    path = program(tmp_path)
    other = tmp_path / "other.csv"
    other.write_text("session,new,out,think,arrival\n0,1,1,1,10\n")
    report = serq.run(serq.load(path, trace=str(other)))
    assert starts_and_stops(report) == [(0, 10.0, 11.0)]


def test_a_trace_ending_before_the_warmup_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SerqError, match="the trace ended at time 5.75, at or before the warm-up 10"):
        serq.run(serq.load(program(tmp_path)), warmup=10)


def test_warmup_leaves_the_early_sessions_unmeasured(tmp_path: Path) -> None:
    report = serq.run(serq.load(program(tmp_path)), warmup=3)
    assert report.observe("stop").count == 2  # the sessions ending after 3 (at 5.75 and 5.25)
    assert report.turns == 2  # the turns taken after 3: the two of the session arriving at 3.5


# ---------------------------------------------------------------- errors
def test_arrive_trace_needs_a_trace_clause() -> None:
    src = "stage d : delay;\nworkload { arrive trace; }\nsession { run d (1); end; }\nrun { horizon 10; }\n"
    with pytest.raises(SerqError) as err:
        serq.load(src)
    assert err.value.headline() == (
        "<text>:2:19: `arrive trace` replays a trace's arrival times, and the workload names no trace")


@pytest.mark.parametrize("arg, message", [("0", "must be positive"), ("-1", "must be positive"),
                                          ("x", "is not a constant")])
def test_the_replay_rate_is_a_positive_constant(tmp_path: Path, arg: str, message: str) -> None:
    with pytest.raises(SerqError, match=message):
        serq.load(program(tmp_path, source=DELAY.replace("trace(rate)", f"trace({arg})")))


def test_a_trace_without_an_arrival_column_is_a_run_time_error_naming_the_file(tmp_path: Path) -> None:
    path = program(tmp_path, "session,turn,new,out,think\n0,1,1,1,1\n")
    with pytest.raises(SerqError) as err:
        serq.run(serq.load(path))
    assert "`arrive trace`: the trace `" in err.value.message and "t.csv` has no `arrival` column" in err.value.message
    path = program(tmp_path, "0,1,1,1,1\n")
    with pytest.raises(SerqError, match="has no `arrival` column"):
        serq.run(serq.load(path))


def test_an_error_in_the_trace_names_file_line_and_column_on_the_command_line(tmp_path: Path) -> None:
    path = program(tmp_path, "session,new,out,think,arrivl\n0,1,1,1,1\n")
    done = subprocess.run([sys.executable, "-m", "serq", "run", str(path)], capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "t.csv:1:23: unknown trace column `arrivl`" in done.stderr
    assert "help: did you mean `arrival`?" in done.stderr


def test_the_cli_notes_how_the_replay_ended_on_stderr(tmp_path: Path) -> None:
    path = program(tmp_path)
    done = subprocess.run([sys.executable, "-m", "serq", "run", str(path)], capture_output=True, text=True)
    assert done.returncode == 0
    # (three sessions are too few to judge a steady state: issue 39's warning comes first)
    assert done.stderr.splitlines()[-1] == ("note: the trace ended: its 3 sessions arrived and ended by time 5.75, "
                                            "before the horizon 100")
    assert all(line.startswith("warning: the run did not settle (") for line in done.stderr.splitlines()[:-1])
    assert done.stdout.startswith("run: horizon 100 end 5.75 ")
    done = subprocess.run([sys.executable, "-m", "serq", "run", str(path), "--horizon", "4", "--json"],
                          capture_output=True, text=True)
    assert json.loads(done.stdout)["replay"] == {"sessions": 3, "arrived": 3, "live": 2, "exhausted": False, "end": 4}
    assert done.stderr.splitlines()[-1] == "note: the horizon 4 ended the replay: 3 of the trace's 3 sessions arrived, 2 still live"


def test_other_arrivals_have_no_replay_in_their_report() -> None:
    report = serq.run(serq.load(ROOT / "programs/single-turn/mg1.sq"), horizon=50, warmup=0)
    assert report.replay is None and report.replay_note() is None and "replay" not in report.to_dict()


# ---------------------------------------------------------------- the bundled programs
def test_the_bundled_replay_program_replays_its_own_trace() -> None:
    program_ = serq.load(ROOT / "programs/replay/vllm_replay.sq")
    corpus = read_trace(program_.trace.path)
    assert program_.arrival == serq.ir.Arrival("batch", n=333) and len(corpus.sessions) == 333
    report = serq.run(program_, horizon=600)  # sessions start every 3.5 s (the `gate` stagger)
    assert report.arrivals == 333 and report.observe("sent").count > 0
    assert report.observe("sent").p99 <= 600


def test_the_bundled_azure_sample_replays_every_request_before_the_horizon() -> None:
    program_ = serq.load(ROOT / "programs/replay/azure_conv.sq")
    corpus = read_trace(program_.trace.path)
    assert corpus.arrivals is not None and all(len(s) == 1 for s in corpus.sessions)
    h = 60.0
    report = serq.run(program_, horizon=h)
    assert report.arrivals == sum(1 for t in corpus.arrivals if t <= h)


# ---------------------------------------------------------------- the real Azure conversation trace
def convert(src: Path, dst: Path) -> int:
    """Vidur's `arrived_at,num_prefill_tokens,num_decode_tokens` to serQ's trace: one session per row."""
    with open(src, newline="") as fin, open(dst, "w") as fout:
        fout.write("session,turn,new,out,think,arrival\n")
        rows = 0
        for i, row in enumerate(csv.DictReader(fin)):
            fout.write(f"{i},1,{row['num_prefill_tokens']},{row['num_decode_tokens']},0,{row['arrived_at']}\n")
            rows += 1
    return rows


@pytest.mark.skipif(not (AZURE / "conv.csv").exists(), reason="../shared/data/azure-llm-2023/conv.csv is absent")
def test_the_azure_conversation_trace_replays_every_request_before_the_horizon(tmp_path: Path) -> None:
    trace = tmp_path / "conv.csv"
    assert convert(AZURE / "conv.csv", trace) == 19366
    h = 120
    with open(AZURE / "conv.csv", newline="") as fh:
        before = sum(1 for row in csv.DictReader(fh) if float(row["arrived_at"]) < h)
    done = subprocess.run([sys.executable, "-m", "serq", "run", "programs/replay/azure_conv.sq", "--trace", str(trace),
                           "--horizon", str(h)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    run_line = done.stdout.splitlines()[0]
    assert f" arrivals {before} " in run_line, (run_line, before)
    assert done.stderr.startswith(f"note: the horizon {h} ended the replay: {before:,} of the trace's 19,366 sessions")

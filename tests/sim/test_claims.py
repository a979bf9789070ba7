"""Claims on the path a run takes (issue 40; serq/sim/claims.py): iteration by
iteration with values worked out by hand, `at end` over the observations'
aggregates, `given`, the report's table and JSON, `serq run --check-claims`
and a sweep's `claims.NAME` column.  A claim reads and never acts: a program
with claims gives the same report otherwise as without them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import serq
from tests.frontend_util import cli_streams

# Two sessions at time 0 on one step stage, budget 4 tokens an iteration, each iteration
# costing 1 + tokens.  Session 0 has a prompt of 3, session 1 of 4 (p = 3 + serial); each
# then decodes 2 tokens.  Worked out by hand (the residents are served in admission order):
#
#   it  start  batch                                   tokens  cost  demand  served  used(kv)
#   1     0    s0 prefill 3, s1 prefill 1 (of 4)           4     5   3+4 = 7     0    3+4 = 7
#   2     5    s0 decode 1, s1 prefill 3 (the rest)        4     5   1+3 = 4     4    4+4 = 8
#   3    10    s0 decode 1, s1 decode 1                    2     3   1+1 = 2     8    5+5 = 10
#   4    13    s1 decode 1 (s0 ended at 13)                1     2         1    10    6
#
# (demand: a prefilling resident's remaining prompt, a decoding one 1, read before the
# iteration's tokens are served; served: the tokens of the earlier iterations; a decode's
# token grows its hold as the iteration starts, so used(kv) counts it.)  Session 0 ends at
# 10 + 3 = 13, session 1 at 13 + 2 = 15.  Both arrived before the first iteration.
ENGINE = """\
pool kv { cap 100; }
stage engine : step { budget 4; cost 1 + tokens; memory kv; }
workload { arrive batch(2); init { set p = 3 + serial; } }
session {
  hold kv (p) { run engine prefill (p) growing kv; run engine decode (2) growing kv; }
  observe response = now;
}
run { horizon 100; }
"""


def claims(src: str, **kw) -> dict[str, serq.report.ClaimResult]:
    report = serq.run(serq.load(src), max_events=100_000, **kw)
    return {c.name: c for c in report.claims}


def one(src: str, claim: str, **kw) -> serq.report.ClaimResult:
    """The result of the one claim ``claim`` (text that may begin with a `let`) adds to ``src``."""
    name = re.search(r"\bclaim (\w+)", claim).group(1)  # type: ignore[union-attr]
    return claims(src + claim + "\n", **kw)[name]


def test_the_hand_worked_iterations_are_what_the_step_log_records() -> None:
    # the derivation above, against the engine's own log (the claims below read the same rows)
    report = serq.run(serq.load(ENGINE), steps=True, max_events=100_000)
    log = report.steps["engine"]
    assert log.column("time") == [0, 5, 10, 13]
    assert log.column("tokens") == [4, 4, 2, 1]
    assert log.column("duration") == [5, 5, 3, 2]
    assert [s.value for s in report.samples["response"]] == [13, 15]


def test_an_every_claim_fails_at_the_first_failing_iteration_and_counts_the_failures() -> None:
    # tokens == 4 holds in iterations 1 and 2, fails at 10 (2 tokens) and 13 (1 token)
    c = one(ENGINE, "claim full: every iteration of engine (tokens == 4);")
    assert (c.result, c.first, c.checked, c.note) == ("fails", 10, 4, "2 of 4 iterations fail")
    assert c.kind == "every" and c.stage == "engine" and not c.passed


def test_an_every_claim_that_no_iteration_breaks_holds_over_all_four() -> None:
    c = one(ENGINE, "claim fits: every iteration of engine (tokens <= 4 && tokens >= 1);")
    assert (c.result, c.first, c.checked, c.note) == ("holds", None, 4, "")
    assert c.passed


def test_an_every_claim_true_only_from_the_second_iteration_fails_at_time_0_once() -> None:
    c = one(ENGINE, "claim late: every iteration of engine (now > 0);")
    assert (c.result, c.first, c.checked, c.note) == ("fails", 0, 4, "1 of 4 iterations fail")


def test_a_some_claim_is_witnessed_at_the_first_iteration_that_satisfies_it() -> None:
    # one resident left only in the fourth iteration, at 13: four iterations read, then no more
    c = one(ENGINE, "claim drains: some iteration of engine (residents == 1);")
    assert (c.result, c.first, c.checked) == ("witnessed", 13, 4)
    # a decoder and a prefill together: the second iteration, at 5
    c = one(ENGINE, "claim mixed: some iteration of engine (decoders == 1 && prefilled == 3);")
    assert (c.result, c.first, c.checked) == ("witnessed", 5, 2)
    assert c.passed


def test_a_some_claim_that_no_iteration_satisfies_is_not_witnessed_after_reading_all() -> None:
    c = one(ENGINE, "claim idle: some iteration of engine (tokens == 0 || tokens == 3);")
    assert (c.result, c.first, c.checked, c.note) == ("not witnessed", None, 4, "")
    assert not c.passed


@pytest.mark.parametrize("name, expr", [
    ("demand", "now == 0 && demand == 7 || now == 5 && demand == 4 || now == 10 && demand == 2 "
               "|| now == 13 && demand == 1"),
    ("served", "now == 0 && served == 0 || now == 5 && served == 4 || now == 10 && served == 8 "
               "|| now == 13 && served == 10"),
    ("arrived", "arrived == 2"),
    ("kv", "now == 0 && used(kv) == 7 || now == 5 && used(kv) == 8 || now == 10 && used(kv) == 10 "
           "|| now == 13 && used(kv) == 6"),
    ("queue", "queue(engine) == residents && (now < 13 && residents == 2 || now == 13 && residents == 1)"),
])
def test_each_iteration_variable_has_its_hand_worked_value(name: str, expr: str) -> None:
    c = one(ENGINE, f"claim {name}: every iteration of engine ({expr});")
    assert (c.result, c.checked) == ("holds", 4)


@pytest.mark.parametrize("name, expr, first", [
    ("demand", "demand == 7", 5), ("served", "served <= 4", 10), ("arrived", "arrived == 1", 0),
    ("kv", "used(kv) != 10", 10), ("queue", "queue(engine) == 2", 13),
])
def test_each_iteration_variable_off_by_its_value_fails_where_the_derivation_says(name, expr, first) -> None:
    # the same variables, each claim true until the hand-worked value differs: the claims can fail
    c = one(ENGINE, f"claim {name}: every iteration of engine ({expr});")
    assert (c.result, c.first) == ("fails", first)


# Two replicas: session s runs on engine[s] with kv[s].  engine[1] serves session 1 (prompt 4):
# iterations at 0 (4 tokens, cost 5), 5 (1 decode token, cost 2) and 7 (cost 2): it ends at 9.
# engine[0] serves session 0 (prompt 3): 0 (cost 4), 4 and 6 (cost 2 each): it ends at 8.
FAMILY = """\
pool kv[2] { cap 100; }
stage engine[2] : step { budget 4; cost 1 + tokens; memory kv; }
workload { arrive batch(2); init { set p = 3 + serial; } }
session {
  hold kv[serial] (p) { run engine[serial] prefill (p) growing kv[serial];
                        run engine[serial] decode (2) growing kv[serial]; }
  observe response = now;
}
run { horizon 100; }
"""


def test_a_claim_on_a_member_of_a_stage_family_reads_only_that_members_iterations() -> None:
    c = one(FAMILY, "claim big: every iteration of engine[1] (tokens == 4 || now == 5);")
    assert (c.result, c.first, c.checked, c.stage) == ("fails", 7, 3, "engine[1]")
    assert c.what == "every iteration of engine[1]"
    # at 7 engine[1]'s hold is 4 + 2 decode tokens, and engine[0] is in its last iteration (6 to 8)
    c = one(FAMILY, "let k = 1;\nclaim both: some iteration of engine[k] (used(kv[k]) == 6 && queue(engine[0]) == 1);")
    assert (c.result, c.first, c.checked) == ("witnessed", 7, 3)
    c = one(FAMILY, "claim zero: every iteration of engine[0] (now != 4 || served == 3);")
    assert (c.result, c.checked) == ("holds", 3)


# ---------------------------------------------------------------- at end

# Three sessions at 0 on a delay stage, of 3, 1 and 2 s: they end at 1, 2 and 3, each
# observing its end time.  total 6, count 3, largest 3, smallest 1; prefix_total sorts the
# samples (1, 2, 3) and sums the prefix sums 1 + 3 + 6 = 10 (the Rust serQ's own case).
DELAYS = """\
stage s : delay;
workload { arrive batch(3); init { set d = serial == 0 ? 3 : serial; } }
session { run s (d); observe response = now; }
run { horizon 100; }
"""


@pytest.mark.parametrize("agg, value", [("total", 6), ("count", 3), ("largest", 3), ("smallest", 1),
                                        ("prefix_total", 10)])
def test_an_aggregate_at_end_has_its_hand_worked_value(agg: str, value: float) -> None:
    c = one(DELAYS, f"claim a: at end ({agg}(response) == {value});")
    assert (c.result, c.first, c.checked, c.kind, c.stage) == ("holds", None, 3, "end", "")
    c = one(DELAYS, f"claim a: at end ({agg}(response) != {value});")
    assert c.result == "fails"


def test_a_failing_claim_at_end_is_dated_by_the_last_sessions_end() -> None:
    c = one(DELAYS, "claim fast: at end (largest(response) < 3 && now > 0);")
    assert (c.result, c.first, c.checked, c.note) == ("fails", 3, 3, "")
    c = one(DELAYS, "claim when: at end (now == 3);")
    assert c.result == "holds"


def test_the_aggregates_at_end_read_only_the_samples_after_the_warm_up() -> None:
    # warm-up 1.5: the sample at 1 is left out, 2 and 3 remain
    c = one(DELAYS.replace("horizon 100;", "horizon 100; warmup 1.5;"),
            "claim w: at end (count(response) == 2 && total(response) == 5 && prefix_total(response) == 7);")
    assert c.result == "holds"


def test_a_claim_at_end_is_not_evaluated_when_the_horizon_stops_live_sessions() -> None:
    c = one(DELAYS.replace("horizon 100;", "horizon 2.5;"), "claim e: at end (count(response) == 2);")
    assert (c.result, c.first, c.note) == ("not evaluated", None, "1 session(s) still live at the end")
    assert c.passed


OPEN = """\
stage s : delay;
workload {{ arrive {arrive}; }}
session {{ run s (1); observe response = now; }}
run {{ horizon 35; }}
claim e: at end (count(response) >= 0);
"""


def test_a_claim_at_end_is_not_evaluated_while_a_renewal_workload_is_still_arriving() -> None:
    # sessions arrive at 10, 20, 30 and end a second later: none is live at 35, but the
    # workload would bring another at 40
    c = claims(OPEN.format(arrive="renewal(10)"))["e"]
    assert (c.result, c.first, c.checked) == ("not evaluated", None, 0)
    assert c.note == ("the workload was still arriving at the end: give it an end (`batch`, --arrivals N or "
                      "run { arrivals N; })")


def test_a_claim_at_end_is_not_evaluated_under_poisson_arrivals_without_an_end() -> None:
    c = claims(OPEN.format(arrive="poisson(0.5)"))["e"]
    assert (c.result, c.first) == ("not evaluated", None)


def test_a_claim_at_end_is_evaluated_when_arrivals_are_told_to_stop() -> None:
    # renewal(10): sessions arrive at 10, 20, 30 (the first after one gap) and each ends 1 s
    # later; with three arrivals the last ends at 31
    src = """\
stage s : delay;
workload { arrive renewal(10); }
session { run s (1); observe response = now; }
run { horizon 1000; }
claim three: at end (count(response) == 3 && total(response) == 63);
claim late: at end (now < 31);
"""
    got = claims(src, arrivals=3)
    assert (got["three"].result, got["three"].checked) == ("holds", 3)
    assert (got["late"].result, got["late"].first) == ("fails", 31)
    got = claims(src.replace("horizon 1000;", "horizon 1000; arrivals 3;"))  # the program's own end
    assert (got["three"].result, got["late"].result, got["late"].first) == ("holds", "fails", 31)


# ---------------------------------------------------------------- given

def test_a_claim_is_out_of_scope_when_a_session_fails_its_given() -> None:
    # p is 3 then 4: session 1 fails p < 4
    c = one(ENGINE, "claim small given (p < 4): every iteration of engine (tokens == 4);")
    assert (c.result, c.first, c.note) == ("out of scope", None, "session 1 (arrived at 0) fails `given`")
    assert c.passed
    c = one(ENGINE, "claim small given (p < 4): at end (count(response) == 2);")
    assert (c.result, c.checked) == ("out of scope", 0)


def test_a_claim_whose_given_every_session_passes_is_decided_as_without_it() -> None:
    c = one(ENGINE, "claim all given (p >= 3 && p <= 4): every iteration of engine (tokens == 4);")
    assert (c.result, c.first, c.checked) == ("fails", 10, 4)
    c = one(DELAYS, "claim all given (d >= 1 && serial < 3): at end (prefix_total(response) == 10);")
    assert c.result == "holds"


def test_a_given_reads_the_attribute_init_sets_as_each_session_starts() -> None:
    # d is 3, 1, 2: session 0 is the first to fail d < 3
    c = one(DELAYS, "claim g given (d < 3): at end (1);")
    assert c.note == "session 0 (arrived at 0) fails `given`"
    c = one(DELAYS, "claim g given (d != 2): at end (1);")
    assert c.note == "session 2 (arrived at 0) fails `given`"


# ---------------------------------------------------------------- the report

BOTH = ENGINE + """\
claim full: every iteration of engine (tokens == 4);
claim drains: some iteration of engine (residents == 1);
claim e: at end (total(response) == 28);
claim small given (p < 4): at end (1);
"""


def test_the_report_text_has_a_claims_table_and_a_line_per_note() -> None:
    text = serq.run(serq.load(BOTH), max_events=100_000).text()
    lines = text.splitlines()
    head = lines.index(next(ln for ln in lines if ln.startswith("claim ") and "kind" in ln))
    assert lines[head].split() == ["claim", "kind", "result", "first", "checked"]
    rows = [ln.split() for ln in lines[head + 2:head + 6]]
    assert rows == [["full", "every", "iteration", "of", "engine", "fails", "10", "4"],
                    ["drains", "some", "iteration", "of", "engine", "witnessed", "13", "4"],
                    ["e", "at", "end", "holds", "2"],
                    ["small", "at", "end", "out", "of", "scope", "0"]]
    assert lines[head + 6:head + 8] == ["claim full: 2 of 4 iterations fail",
                                        "claim small: session 1 (arrived at 0) fails `given`"]


def test_the_json_report_lists_each_claim_with_its_fields() -> None:
    d = json.loads(json.dumps(serq.run(serq.load(BOTH), max_events=100_000).to_dict()))
    assert d["claims"] == [
        {"name": "full", "kind": "every", "stage": "engine", "result": "fails", "first": 10, "checked": 4,
         "note": "2 of 4 iterations fail"},
        {"name": "drains", "kind": "some", "stage": "engine", "result": "witnessed", "first": 13, "checked": 4,
         "note": ""},
        {"name": "e", "kind": "end", "result": "holds", "first": None, "checked": 2, "note": ""},
        {"name": "small", "kind": "end", "result": "out of scope", "first": None, "checked": 0,
         "note": "session 1 (arrived at 0) fails `given`"},
    ]


def test_a_program_without_claims_has_no_claim_table_and_no_claims_key() -> None:
    plain = serq.run(serq.load(ENGINE), max_events=100_000)
    assert plain.claims == []
    assert "claims" not in plain.to_dict()
    assert not any(ln.startswith("claim") for ln in plain.text().splitlines())


def _without_claims(text: str) -> str:
    """The report's text less its claims: the blank line, the table and the notes."""
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("claim ") and " kind " in ln)
    end = lines.index("", head)
    return "\n".join(lines[:head - 1] + lines[end:])


# A busier run than ENGINE: a random workload, chunked prefills and decodes together,
# preemption when memory is short; the claims read the engine, the pool and the workload.
BUSY = """\
pool kv { cap 60; }
stage engine : step { budget 6; cost 0.5 + 0.1 * tokens; memory kv; }
stage s : fifo;
workload { arrive poisson(0.4); init { set p = ceil(~uniform(2, 9)); set o = ceil(~uniform(1, 5)); } }
session {
  run s (~exp(0.5));
  hold kv (p) { run engine prefill (p) growing kv; run engine decode (o) growing kv; }
  observe response = now;
}
run { horizon 60; }
"""
BUSY_CLAIMS = """\
claim fills given (p <= 9): every iteration of engine (tokens == min(6, demand) && used(kv) <= 60);
claim pair: some iteration of engine (decoders >= 2 && queue(s) == 0 && est_wait(s) >= 0);
claim done: at end (count(response) > 0);
"""


@pytest.mark.parametrize("src", [ENGINE, BUSY])
def test_claims_read_and_never_act_the_report_is_the_same_without_them(src: str) -> None:
    kw = dict(max_events=1_000_000, steps=True)
    plain = serq.run(serq.load(src), **kw)
    claimed = serq.run(serq.load(src + (BUSY_CLAIMS if src is BUSY else BOTH[len(ENGINE):])), **kw)
    assert claimed.claims and all(c.checked > 0 for c in claimed.claims if c.kind != "end")
    d = claimed.to_dict()
    d.pop("claims")
    assert json.dumps(d) == json.dumps(plain.to_dict())
    for name, log in plain.steps.items():  # the step log, row for row
        assert claimed.steps[name].csv() == log.csv()
    assert _without_claims(claimed.text()) == plain.text()


def test_a_claim_on_a_stage_gives_the_same_report_as_the_plain_coalesced_run() -> None:
    # without --steps the engine may coalesce its decode-only iterations; a claim makes it
    # run them one by one, which gives the same report (docs/simulator.md)
    plain = serq.run(serq.load(BUSY), max_events=1_000_000)
    claimed = serq.run(serq.load(BUSY + BUSY_CLAIMS), max_events=1_000_000)
    d = claimed.to_dict()
    assert d.pop("claims")[0]["result"] in ("holds", "fails")
    assert json.dumps(d) == json.dumps(plain.to_dict())


# ---------------------------------------------------------------- the command line

def _write(tmp_path: Path, src: str, name: str = "p.sq") -> str:
    path = tmp_path / name
    path.write_text(src)
    return str(path)


def test_check_claims_exits_4_and_names_each_failing_claim_on_stderr(tmp_path: Path) -> None:
    path = _write(tmp_path, ENGINE + """\
claim full: every iteration of engine (tokens == 4);
claim idle: some iteration of engine (tokens == 0);
claim fits: every iteration of engine (tokens <= 4);
claim e: at end (largest(response) < 15);
""")
    code, out, err = cli_streams("run", path, "--check-claims")
    assert code == 4
    assert err.splitlines() == ["claim full: fails at 10", "claim idle: not witnessed", "claim e: fails at 15"]
    assert ["full", "every", "iteration", "of", "engine", "fails", "10", "4"] in [ln.split() for ln in out.splitlines()]
    code, out, err = cli_streams("run", path)  # without the flag, a failing claim is only reported
    assert (code, err) == (0, "")


def test_check_claims_exits_0_when_every_claim_holds_or_is_witnessed(tmp_path: Path) -> None:
    path = _write(tmp_path, ENGINE + """\
claim fits: every iteration of engine (tokens <= 4);
claim drains: some iteration of engine (residents == 1);
claim e: at end (count(response) == 2);
claim small given (p < 4): at end (0);
""")
    code, out, err = cli_streams("run", path, "--check-claims")
    assert (code, err) == (0, "")
    assert "out of scope" in out


def test_check_claims_passes_a_claim_that_was_not_evaluated(tmp_path: Path) -> None:
    path = _write(tmp_path, DELAYS + "claim e: at end (0);\n")
    code, out, err = cli_streams("run", path, "--check-claims", "--horizon", "2.5")
    assert (code, err) == (0, "")
    assert "not evaluated" in out
    assert cli_streams("run", path, "--check-claims")[0] == 4  # run to the end, it fails


def test_check_claims_on_a_program_without_claims_warns_and_exits_0(tmp_path: Path) -> None:
    code, out, err = cli_streams("run", _write(tmp_path, ENGINE), "--check-claims")
    assert (code, err) == (0, "warning: --check-claims: the program states no claim\n")


def test_a_sweep_shows_a_claim_as_1_where_it_holds_and_0_where_it_fails(tmp_path: Path) -> None:
    # budget B: with 4 the first iteration takes 4 tokens, with 8 it takes all 7 of the prompts
    path = _write(tmp_path, "let B = 4;\n" + ENGINE.replace("budget 4;", "budget B;")
                  + "claim four: some iteration of engine (tokens == 4);\n")
    code, out, err = cli_streams("sweep", path, "--set", "B=4,8", "--show", "claims.four", "--quiet", "--json")
    assert code == 0, err
    points = json.loads(out)["points"]
    assert [(p["B"], p["claims.four"]["mean"], p["claims.four"]["n"]) for p in points] == [(4, 1, 1), (8, 0, 1)]
    code, out, err = cli_streams("sweep", path, "--set", "B=4,8", "--show", "claims.four", "--quiet")
    assert [ln.split() for ln in out.splitlines()[2:]] == [["4", "1", "-", "1"], ["8", "1", "-", "0"]]


def test_a_sweep_row_gives_a_claim_1_0_or_empty_beside_its_result() -> None:
    from serq.experiments.sweep import flatten

    report = serq.run(serq.load(BOTH), max_events=100_000).to_dict()
    row = flatten(report)
    assert (row["claims.full"], row["claims.drains"], row["claims.e"], row["claims.small"]) == (0, 1, 1, None)
    assert (row["claims.full.result"], row["claims.full.first"], row["claims.full.checked"]) == ("fails", 10, 4)
    assert row["claims.small.result"] == "out of scope"

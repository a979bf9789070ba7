"""`serve only (P)` on a step stage, on scenarios worked out by hand
(semantics §4.3 step 2b, docs/language.md "The step engine"): a resident for
which P is 0 takes no token this iteration, stays a resident and is asked
again at the next one.  The step log (``steps=True``, what ``serq run --dump
DIR --steps`` writes) gives every iteration's start, duration and tokens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bounds import EVENTS, env

import serq
from serq.errors import SerqRuntimeError
from serq.sim.stages import StepEngine
from tests.sim.stages.test_coalesce_runs import Counting, Plain

FT = "serve only (decoders > 0 ? decoding : !decoding);"
RAD = "serve only (decoders >= bcol || decoders == residents ? decoding : !decoding);"


def two_requests(serve: str) -> str:
    """r0 at 0 and r1 at 2, each a 3-token prompt then 4 decode tokens, each
    holding one of two slots admitted by the engine; an iteration costs
    1 + tokens and has no budget cap."""
    return f"""
pool slots {{ cap 2; admit via e; }}
stage e : step {{ cost 1 + tokens; {serve} }}
stage gate : delay;
workload {{ arrive batch(2); init {{ set at = serial == 0 ? 0 : 2; }} }}
session {{
  run gate (at);
  hold slots (1) {{
    observe admitted = now;
    run e prefill (3);
    observe first = now;
    run e decode (4);
  }}
  observe done = now;
  end;
}}
run {{ horizon 100; warmup 0; }}
"""


def by_session(report: serq.Report, name: str) -> list[float]:
    return [s.value for s in sorted(report.samples[name], key=lambda s: s.session)]


def log(report: serq.Report, stage: str = "e") -> list[tuple[float, ...]]:
    """(time, duration, tokens, decoders, prefilled, residents) of each iteration."""
    return [(r.time, r.duration, r.tokens, r.decoders, r.prefilled, r.residents) for r in report.steps[stage]]


def test_fastertransformer_holds_a_prefill_back_until_the_decodes_are_done() -> None:
    # [0,4]: r0's prompt (3 tokens, cost 4).  r1 arrives at 2 and waits for its slot.
    # At 4, r0 decodes (decoders = 1), so the iteration serves decodes only: r0's token
    # (cost 2); the admission step then admits r1 (its slot at 4, admission unchanged),
    # whose prefill P passes over (decoding = 0).  So [4,6] [6,8] [8,10] [10,12]: r0's four
    # tokens, r1 resident and unserved.  At 12 nobody decodes: r1's prompt [12,16], its
    # tokens [16,18] … [22,24].
    report = serq.run(serq.load(two_requests(FT)), steps=True, max_events=EVENTS)
    assert log(report) == [
        (0, 4, 3, 0, 3, 1),
        (4, 2, 1, 1, 0, 2), (6, 2, 1, 1, 0, 2), (8, 2, 1, 1, 0, 2), (10, 2, 1, 1, 0, 2),
        (12, 4, 3, 0, 3, 1),
        (16, 2, 1, 1, 0, 1), (18, 2, 1, 1, 0, 1), (20, 2, 1, 1, 0, 1), (22, 2, 1, 1, 0, 1),
    ]
    assert by_session(report, "admitted") == [0, 4]
    assert by_session(report, "first") == [4, 16]
    assert by_session(report, "done") == [12, 24]
    e = report.stage("e")
    assert (e.prefill_only, e.decode_only, e.mixed) == (8 / 100, 16 / 100, 0.0)


def test_the_cli_step_log_shows_the_prefill_waiting_for_the_decodes(tmp_path: Path) -> None:
    # the same run through `serq run --dump DIR --steps`: e.steps.csv, one row an iteration
    program = tmp_path / "ft.sq"
    program.write_text(two_requests(FT))
    out = subprocess.run([sys.executable, "-m", "serq", "run", str(program), "--dump", str(tmp_path / "d"),
                          "--steps"], capture_output=True, text=True, env=env())
    assert out.returncode == 0, out.stderr
    rows = [line.split(",") for line in (tmp_path / "d" / "e.steps.csv").read_text().splitlines()[1:]]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("0", "4", "3", "0"), ("4", "2", "1", "1"), ("6", "2", "1", "1"), ("8", "2", "1", "1"),
        ("10", "2", "1", "1"), ("12", "4", "3", "0"), ("16", "2", "1", "1"), ("18", "2", "1", "1"),
        ("20", "2", "1", "1"), ("22", "2", "1", "1")]


def test_without_serve_only_the_same_requests_share_an_iteration() -> None:
    # At 4: r0's token and r1's prompt in one mixed iteration of 4 tokens, [4,9]; then both
    # decode, 2 tokens a step of cost 3: r0's last token ends at 18; r1's fourth runs alone
    # (cost 2), [18,20].
    report = serq.run(serq.load(two_requests("")), steps=True, max_events=EVENTS)
    assert log(report)[:3] == [(0, 4, 3, 0, 3, 1), (4, 5, 4, 1, 3, 2), (9, 3, 2, 2, 0, 2)]
    assert by_session(report, "first") == [4, 9]
    assert by_session(report, "done") == [18, 20]


def rad(serve: str) -> str:
    """Three requests at 0: prompts 4, 2, 2 and 3 decode tokens each, budget and
    chunk `bcol` = 2, cost 1 (the clock counts iterations)."""
    return f"""
let bcol = 2;
stage e : step {{ budget bcol; chunk bcol; cost 1; {serve} }}
workload {{ arrive batch(3); init {{ set p = serial == 0 ? 4 : 2; }} }}
session {{
  run e prefill (p);
  observe first = now;
  run e decode (3);
  observe done = now;
  end;
}}
run {{ horizon 100; warmup 0; }}
"""


def test_rad_prefills_until_bcol_requests_decode_then_decodes_them() -> None:
    # Prefill mode while fewer than bcol = 2 decode and some prefill is left: [0,1] [1,2]
    # r0's prompt in chunks of 2; at 2 r0 decodes (1 < 2, 1 ≠ 3 residents): still prefill
    # mode, [2,3] r1's prompt (the budget is spent, r2 waits).  At 3 two decode: decode mode,
    # [3,4] [4,5] [5,6] r0 and r1 one token each, both done at 6.  At 6 r2 alone prefills
    # (0 ≠ 1 resident) [6,7], then decodes alone (1 = 1) [7,8] [8,9] [9,10].
    report = serq.run(serq.load(rad(RAD)), steps=True, max_events=EVENTS)
    assert log(report) == [
        (0, 1, 2, 0, 2, 3), (1, 1, 2, 0, 2, 3), (2, 1, 2, 0, 2, 3),
        (3, 1, 2, 2, 0, 3), (4, 1, 2, 2, 0, 3), (5, 1, 2, 2, 0, 3),
        (6, 1, 2, 0, 2, 1),
        (7, 1, 1, 1, 0, 1), (8, 1, 1, 1, 0, 1), (9, 1, 1, 1, 0, 1),
    ]
    assert by_session(report, "first") == [2, 3, 7]
    assert by_session(report, "done") == [6, 6, 10]
    # every batch is a full tile, but when every resident decodes and fewer than bcol do
    assert all(tokens == 2 or decoders == residents for _t, _d, tokens, decoders, _p, residents in log(report))


def test_rad_keeps_a_prefill_out_of_a_decode_batch_that_the_default_mixes_in() -> None:
    # serve admission alone: [0,1] [1,2] r0's prompt, [2,3] r1's, [3,4] r2's (residents in
    # admission order, r0's decode job after them); from 4 the three decode, two a step.
    report = serq.run(serq.load(rad("")), steps=True, max_events=EVENTS)
    assert by_session(report, "first") == [2, 3, 4]
    assert [r[3] for r in log(report)[:4]] == [0, 0, 0, 0]


def test_serve_only_zero_schedules_nothing_and_the_run_ends_at_the_horizon() -> None:
    # Nobody is ever served: no iteration is started, the engine waits for the next
    # arrival each time, and the run ends at the horizon with every session live.
    program = serq.load("""
stage e : step { cost 1; serve only (0); }
workload { arrive poisson(1); }
session { run e prefill (3); run e decode (4); end; }
run { horizon 200; warmup 0; }
""")
    report = serq.run(program, max_events=10_000)
    assert report.end == 200
    assert report.ended == 0
    assert report.stage("e").iterations == 0
    assert report.arrivals > 100
    assert any("`serve only` passed over its residents" in w and "scheduled nothing from time" in w
               for w in report.warnings())


def test_a_passed_over_prefill_keeps_no_decode_out_under_exclusive_prefill() -> None:
    # r0: 1-token prompt and 9 decode tokens from 0; r1 arrives at 2 with a 4-token prompt;
    # cost 1.  `serve exclusive prefill` alone runs r1's prompt alone in [2,3]: r0 ends at 11.
    # With P = "no one decodes, or this one decodes", r1's prompt is passed over while r0
    # decodes, so it keeps no decode out: r0 ends at 10, r1's prompt runs in [10,11].
    def program(serve: str) -> serq.Program:
        return serq.load(f"""
stage e : step {{ cost 1; {serve} }}
stage gate : delay;
workload {{ arrive batch(2); init {{ set at = serial == 0 ? 0 : 2; set p = serial == 0 ? 1 : 4; }} }}
session {{ run gate (at); run e prefill (p); observe first = now; run e decode (9); observe done = now; end; }}
run {{ horizon 100; warmup 0; }}
""")
    alone = serq.run(program("serve exclusive prefill;"), max_events=EVENTS)
    assert by_session(alone, "first") == [1, 3]
    assert by_session(alone, "done")[0] == 11
    both = serq.run(program("serve exclusive prefill; serve only (decoders == 0 || decoding);"), max_events=EVENTS)
    assert by_session(both, "first") == [1, 11]
    assert by_session(both, "done") == [10, 20]


def test_the_order_clause_orders_the_residents_serve_only_keeps() -> None:
    # Three 2-token prompts at 0, budget 2, cost 1; P keeps serials 1 and 2 (`id` is an
    # attribute).  In admission order r1 is served first ([0,1], first at 1), then r2
    # ([1,2]); ordered by descending serial (`by (-id)`) r2 comes first.  r0 is never
    # served, so it is never done: the run ends at the horizon.
    def firsts(serve: str) -> list[float]:
        report = serq.run(serq.load(f"""
stage e : step {{ budget 2; cost 1; {serve} }}
workload {{ arrive batch(3); init {{ set id = serial; }} }}
session {{ run e prefill (2); observe first = now; end; }}
run {{ horizon 50; warmup 0; }}
"""), max_events=EVENTS)
        return [s.value for s in sorted(report.samples["first"], key=lambda s: s.session)]

    assert firsts("serve only (id > 0);") == [1, 2]
    assert firsts("serve only (id > 0) by (-id);") == [2, 1]
    assert firsts("serve by (-id); serve only (id > 0);") == [2, 1]


class Reversed(StepEngine):
    """Serves the latest admitted first, and notes whom `plan_tokens` is asked about."""

    asked: set[int] = set()

    def order_residents(self):  # type: ignore[no-untyped-def]
        return list(reversed(self.residents))

    def plan_tokens(self, job, chunk):  # type: ignore[no-untyped-def]
        Reversed.asked.add(job.session.serial)
        return super().plan_tokens(job, chunk)


def test_a_subclass_order_is_walked_and_plan_tokens_is_not_asked_about_the_passed_over() -> None:
    # as above, with the order from `order_residents`: r2 first, then r1; r0 is never asked
    Reversed.asked = set()
    report = serq.run(serq.load("""
stage e : step { budget 2; cost 1; serve only (id > 0); }
workload { arrive batch(3); init { set id = serial; } }
session { run e prefill (2); observe first = now; end; }
run { horizon 50; warmup 0; }
"""), engines={"e": Reversed}, max_events=EVENTS)
    assert by_session(report, "first") == [2, 1]
    assert Reversed.asked == {1, 2}


def test_budget_left_counts_only_the_residents_serve_only_serves() -> None:
    # budget 10; r0's 5-token prompt is resident from 0 and never served (P = decoding);
    # r1 reads budget_left(e) at 1: the prompt asks for nothing, 10 are left (5 without P)
    def left(serve: str) -> float:
        report = serq.run(serq.load(f"""
stage e : step {{ budget 10; cost 1; {serve} }}
stage gate : delay;
workload {{ arrive batch(2); }}
session {{ run gate (serial); observe left = budget_left(e); run e prefill (5); end; }}
run {{ horizon 20; warmup 0; }}
"""), max_events=EVENTS)
        return [s.value for s in report.samples["left"] if s.session == 1][0]

    assert left("serve only (decoding);") == 10
    assert left("") == 5


def test_a_predicate_that_is_not_0_or_1_stops_the_run_at_the_clause() -> None:
    program = serq.load("""
stage e : step { cost 1;
  serve only (remaining); }
workload { arrive batch(1); }
session { run e prefill (3); end; }
run { horizon 10; }
""")
    with pytest.raises(SerqRuntimeError) as info:
        serq.run(program, max_events=EVENTS)
    err = info.value
    assert err.message == "stage `e`: `serve only` is 3 for a resident, not 0 or 1"
    assert (err.line, err.col) == (3, 15)


# 100 s: ~150 requests ended, and every coalesced run of FT's (its held-back prefills pile up later,
# each asked at every iteration)
LOADED = """
let bcol = 16;
pool kv {{ cap 40000; block 16; evict lru; preempt lifo; }}
stage e : step {{ budget 64; chunk bcol; cost 0.01 + 1e-4 * tokens; memory kv; {serve} }}
workload {{ arrive poisson(2); init {{ set p = 16 * ceil(~uniform(1, 8)); set o = ceil(~exp(60)); }} }}
session {{
  hold kv (p) {{
    run e prefill (p) growing kv;
    observe first = now;
    run e decode (o) growing kv;
  }}
  end;
}}
run {{ horizon 100; warmup 10; }}
"""


@pytest.mark.parametrize("serve, runs", [
    (FT, True),
    (RAD, True),
    ("serve only (decoders == residents ? decoding : !decoding) by (-admission);", True),
    ("serve only (remaining > 0.5 || decoding);", False),  # reads what a decode changes
    ("serve only (kv_decode >= 0);", False),
])
def test_coalesced_runs_give_the_report_of_one_iteration_at_a_time(serve: str, runs: bool) -> None:
    program = serq.load(LOADED.format(serve=serve))
    Counting.inside = 0
    fast = serq.run(program, seed=3, engines={"e": Counting}, max_events=EVENTS)
    slow = serq.run(program, seed=3, engines={"e": Plain}, max_events=EVENTS)
    assert fast.to_json() == slow.to_json()
    assert (Counting.inside > 0) == runs

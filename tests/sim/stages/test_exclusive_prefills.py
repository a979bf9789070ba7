"""`serve exclusive prefills` (vLLM v0 without chunking, Vidur's `vllm` scheduler) beside
`serve exclusive prefill`, on small scenarios worked out by hand iteration by iteration
from the step log.  Cost ``1 + prefilled``: a decode-only iteration lasts 1, a prefill
iteration 1 plus its prompt tokens."""

from __future__ import annotations

import serq
from tests.bounds import EVENTS


def program(prompts: list[int], serve: str, *, budget: int = 8, out: int = 2) -> str:
    """Requests at 0 with these prompts and `out` output tokens each; 16 slots admitted by the engine."""
    pick = str(prompts[-1])
    for i in range(len(prompts) - 2, -1, -1):
        pick = f"serial == {i} ? {prompts[i]} : ({pick})"
    return f"""
pool reqs {{ cap 16; admit via engine; }}
stage engine : step {{ budget {budget}; cost 1 + prefilled; {serve} }}
workload {{ arrive batch({len(prompts)}); init {{ set p = {pick}; }} }}
session {{
  hold reqs (1) {{
    run engine prefill (p);
    observe first = now;
    run engine decode ({out - 1});
  }}
  observe done = now;
  end;
}}
run {{ horizon 100; }}
"""


def log(report: serq.Report) -> list[tuple]:
    """(start, duration, tokens, decoders, prefilled) per iteration."""
    return [(r.time, r.duration, r.tokens, r.decoders, r.prefilled) for r in report.steps["engine"]]


def by_session(report: serq.Report, name: str) -> list[float]:
    return [s.value for s in sorted(report.samples[name], key=lambda s: s.session)]


def test_every_waiting_prompt_that_fits_prefills_in_one_batch_and_the_first_that_does_not_stops_it() -> None:
    # Prompts 3, 4, 5 at 0, budget 8.  [0,8]: 3 + 4 = 7 tokens (5 > the 1 left stops
    # the batch), cost 1 + 7.  [8,14]: the 5 alone (the two decodes wait), cost 1 + 5.
    # [14,15]: the three decodes.
    report = serq.run(serq.load(program([3, 4, 5], "serve exclusive prefills;")), steps=True, max_events=EVENTS)
    assert log(report) == [(0, 8, 7, 0, 7), (8, 6, 5, 0, 5), (14, 1, 3, 3, 0)]
    assert by_session(report, "first") == [8, 8, 14]
    assert by_session(report, "done") == [15, 15, 15]


def test_exclusive_prefill_runs_the_same_prompts_one_at_a_time() -> None:
    # The same program with one prefill an iteration: [0,4] the 3; [4,9] the 4 (r0's
    # decode leaves the batch); [9,15] the 5 (two decodes leave); [15,16] three decodes.
    report = serq.run(serq.load(program([3, 4, 5], "serve exclusive prefill;")), steps=True, max_events=EVENTS)
    assert log(report) == [(0, 4, 3, 0, 3), (4, 5, 4, 0, 4), (9, 6, 5, 0, 5), (15, 1, 3, 3, 0)]
    assert by_session(report, "first") == [4, 9, 15]
    assert by_session(report, "done") == [16, 16, 16]


def test_a_first_prompt_longer_than_the_budget_runs_in_pieces_and_later_prompts_join_its_last() -> None:
    # Prompts 10 and 3, budget 8: [0,9] 8 of the 10 (the budget is spent); [9,15] its last
    # 2 and the whole 3 (5 ≤ 8); [15,16] both decode.
    report = serq.run(serq.load(program([10, 3], "serve exclusive prefills;")), steps=True, max_events=EVENTS)
    assert log(report) == [(0, 9, 8, 0, 8), (9, 6, 5, 0, 5), (15, 1, 2, 2, 0)]
    assert by_session(report, "first") == [15, 15]


def test_two_prompts_that_fit_share_one_batch_where_exclusive_prefill_takes_two() -> None:
    # Prompts 2 and 2 with 4 outputs, budget 8, both at 0: [0,5] both prompts; [5,6] [6,7]
    # [7,8] the decodes.  Same under `exclusive prefill`, but one prompt an iteration:
    # [0,3], then [3,6] r1's prompt while r0's decode waits.
    many = serq.run(serq.load(program([2, 2], "serve exclusive prefills;", out=4)), steps=True, max_events=EVENTS)
    one = serq.run(serq.load(program([2, 2], "serve exclusive prefill;", out=4)), steps=True, max_events=EVENTS)
    assert log(many)[:2] == [(0, 5, 4, 0, 4), (5, 1, 2, 2, 0)]
    assert log(one)[:3] == [(0, 3, 2, 0, 2), (3, 3, 2, 0, 2), (6, 1, 2, 2, 0)]
    assert by_session(many, "done") == [8, 8] and by_session(one, "done") == [9, 9]

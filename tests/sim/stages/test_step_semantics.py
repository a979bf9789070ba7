"""The step engine on small scenarios worked out by hand (semantics §4, §8.4,
§11.4): growth and preemption, head-of-line blocking, the request cap,
exclusive prefill, the self-preemption livelock, the step table, inter-token
gaps.  Cost 1: the clock counts iterations."""

from __future__ import annotations

import pytest

import serq


def engine_program(requests: list[tuple[float, float, float]], *, kv_blocks: int, budget: int,
                   slots: int = 16, chunk: int = 0, serve: str = "", cost: str = "1",
                   admit: str = "admit via engine;", horizon: float = 100) -> str:
    """Requests (prompt, o, arrive); each holds a slot and min(prompt, budget left)
    KV, prefills growing and decodes o − 1 growing; no prefix cache."""
    def pick(vals: list[float]) -> str:
        e = str(vals[-1])
        for i in range(len(vals) - 2, -1, -1):
            e = f"serial == {i} ? {vals[i]} : ({e})"
        return e

    prompts, outs, arrives = (list(x) for x in zip(*requests))
    return f"""
pool reqs {{ cap {slots}; {admit} }}
pool kv {{ cap {kv_blocks * 16}; block 16; evict lru; preempt lifo; }}
stage engine : step {{ budget {budget}; chunk {chunk}; cost {cost}; memory kv; {serve} }}
stage gate : delay;
workload {{
  arrive batch({len(requests)});
  init {{ set prompt = {pick(prompts)}; set o = {pick(outs)}; set at = {pick(arrives)}; }}
}}
session {{
  run gate (at);
  hold reqs (1), kv (min(prompt, budget_left(engine))) {{
    observe admitted = now;
    run engine prefill (prompt) growing kv;
    observe first = now;
    run engine decode (o - 1) growing kv;
  }}
  observe done = now;
  end;
}}
run {{ horizon {horizon}; }}
"""


def per_session(report: serq.Report, name: str) -> list[float]:
    return [s.value for s in sorted(report.samples[name], key=lambda s: (s.session, s.time))]


def test_a_growth_that_does_not_fit_preempts_the_last_admitted() -> None:
    # 10 blocks, two 80-token prompts, budget 100: r1 is admitted with the 20
    # tokens left, its next chunk needs a block that is not free; it was admitted
    # last and preempts itself.  r0 (20 outputs) is done at 20.
    report = serq.run(serq.load(engine_program([(80, 20, 0), (80, 3, 0)], kv_blocks=10, budget=100)))
    assert report.pool("kv").preemptions == 1
    done = {s.session: s.value for s in report.samples["done"]}
    assert done[0] == 20 and done[1] > 20


def test_head_of_line_blocking_keeps_a_small_request_waiting() -> None:
    # 96 + 96 tokens fill 10 blocks; the 16-token request behind them is not admitted at 0
    report = serq.run(serq.load(engine_program([(96, 10, 0), (96, 10, 0), (16, 3, 0)], kv_blocks=10, budget=1024)))
    admitted = {s.session: s.value for s in report.samples["admitted"]}
    assert admitted[0] == 0 and admitted[2] > 0


def test_a_long_prompt_takes_one_iteration_per_budget() -> None:
    # 3000 tokens, budget 1024: ceil(3000 / 1024) = 3 iterations to the first token
    report = serq.run(serq.load(engine_program([(3000, 2, 0)], kv_blocks=999, budget=1024)))
    assert per_session(report, "first") == [3]
    chunked = serq.run(serq.load(engine_program([(3000, 2, 0)], kv_blocks=999, budget=4096, chunk=1000)))
    assert per_session(chunked, "first") == [3]


def test_the_request_cap_admits_two_at_a_time() -> None:
    # two slots, four 16-token requests with 5 outputs: admitted at 0, 0, 5, 5
    report = serq.run(serq.load(engine_program([(16, 5, 0)] * 4, kv_blocks=999, budget=1024, slots=2, admit="")))
    assert per_session(report, "admitted") == [0, 0, 5, 5]


@pytest.mark.parametrize("serve, done", [("", 10), ("serve exclusive prefill;", 12)])
def test_exclusive_prefill_runs_a_prefill_alone(serve: str, done: float) -> None:
    # a 1-token request with 10 outputs beside a 2048-token one, budget 1024:
    # sharing, its 9 decodes run from step 2 (done at 10); exclusive, the long
    # prefill runs alone in steps 2 and 3 (done at 12)
    report = serq.run(serq.load(engine_program([(1, 10, 0), (2048, 2, 0)], kv_blocks=999, budget=1024, serve=serve)))
    assert {s.session: s.value for s in report.samples["done"]}[0] == done


@pytest.mark.parametrize("cost, preemptions, admissions, iterations", [("1", 6, 7, 401), ("tokens", 2, 3, None)])
def test_a_request_that_can_never_grow_to_its_need_is_stuck(cost: str, preemptions: int, admissions: int,
                                                            iterations: int | None) -> None:
    # cap 160 = 10 blocks; 100-token prompt, 100 decodes: it needs 200.  Each
    # cycle is 1 prefill + 60 decodes + 1 step that only preempts (62 steps);
    # its second preemption at position 160 marks it stuck.  With `cost tokens`
    # the preempting step takes no time.
    report = serq.run(serq.load(engine_program([(100, 101, 0)], kv_blocks=10, budget=1024, cost=cost,
                                               admit="", horizon=400)))
    kv = report.pool("kv")
    assert (kv.preemptions, kv.admissions, kv.stuck) == (preemptions, admissions, 1)
    assert report.ended == 0
    if iterations is not None:
        assert report.stage("engine").iterations == iterations
    assert any("stuck" in w for w in report.warnings())


@pytest.mark.parametrize("serve, table", [
    # prefill only, decode only, mixed, decodes, decode batch, decode step
    ("serve exclusive prefill;", (0.1, 0.1, 0.0, 0.1, 1.0, 1.0)),
    ("", (0.05, 0.0, 0.1, 0.1, 1.0, 1.0)),
])
def test_the_step_table_counts_iteration_kinds(serve: str, table: tuple) -> None:
    # r0: prompt 2, 2 decodes from 0; r1: prompt 4 from 1; budget 4, chunk 4, 20 s.
    # Default: [0,1] prefill; [1,2] and [2,3] mixed.  Exclusive: [0,1] and [1,2]
    # prefill only (r1's prefill drops r0's decode), [2,3] and [3,4] decode only.
    report = serq.run(serq.load(engine_program([(2, 3, 0), (4, 1, 1)], kv_blocks=99, budget=4, chunk=4,
                                               serve=serve, horizon=20)))
    e = report.stage("engine")
    got = (e.prefill_only, e.decode_only, e.mixed, e.mean_decodes, e.mean_decode_batch, e.mean_decode_step)
    assert got == pytest.approx(table)


@pytest.mark.parametrize("serve, mean, p99", [("serve exclusive prefill;", 4 / 3, 2.0), ("", 1.0, 1.0)])
def test_inter_token_gaps_show_a_prefill_that_runs_alone(serve: str, mean: float, p99: float) -> None:
    # A: prompt 2, 3 decodes from 0; B: prompt 4 from 2.  Exclusive: A's tokens
    # at 1, 2, 4, 5 (B's prefill runs alone in [2,3]): gaps 1, 2, 1.
    report = serq.run(serq.load(engine_program([(2, 4, 0), (4, 1, 2)], kv_blocks=99, budget=4, chunk=4,
                                               serve=serve, horizon=20)))
    e = report.stage("engine")
    assert e.mean_itl == pytest.approx(mean)
    assert e.itl_p99 == pytest.approx(p99, rel=0.01)

"""The vLLM scheduler oracle (semantics §11.3): exact first- and last-token
times and preemption counts of six small scenarios on a unit step clock.

Each scenario is one program: requests `(prompt, o, arrive)` as sessions of a
batch, each released at `arrive` by a delay stage, then one hold of a slot and
KV blocks, a growing prefill and `o - 1` growing decodes.  `cost 1`: the clock
counts iterations.
"""

from __future__ import annotations

import pytest

import serq


def pick(values: list[float]) -> str:
    """An expression giving session `serial` its own value."""
    expr = str(values[-1])
    for i in range(len(values) - 2, -1, -1):
        expr = f"serial == {i} ? {values[i]} : ({expr})"
    return expr


def oracle(kv_cap: int, budget: int, slots: int, chunk: int, requests: list[tuple[int, int, int]], horizon: int) -> str:
    prompts, outs, arrives = zip(*requests)
    return f"""
let bs = 16;           // block_size
let B = {budget};      // max_num_batched_tokens
let max_seqs = {slots};
let chunk_cap = {chunk};
pool reqs {{ cap max_seqs; admit via engine; }}
pool kv {{ cap {kv_cap}; block bs; evict lru; preempt lifo; }}
stage engine : step {{ budget B; chunk chunk_cap; cost 1; memory kv; }}
stage gate : delay;
workload {{
  arrive batch({len(requests)});
  init {{ set prompt = {pick(list(prompts))}; set o = {pick(list(outs))}; set arrive = {pick(list(arrives))}; }}
}}
session {{
  run gate (arrive);
  hold reqs (1), kv (min(known, budget_left(engine))) reserve (known)
       at admission (known = computed < prompt ? prompt : computed + 1) {{
    run engine prefill (known) growing kv;
    branch (known == prompt) {{ observe first = now; }}
    run engine decode (o - 1 - (known - prompt)) growing kv;
  }}
  observe done = now;
  end;
}}
run {{ horizon {horizon}; }}
"""


def by_session(report: serq.Report, name: str) -> list[float]:
    return [s.value for s in sorted(report.samples[name], key=lambda s: s.session)]


SCENARIOS = {
    # name: (kv cap, B, slots, chunk, requests, H, first, done, preemptions)
    # chunked: t0 r0 prefills 1024, t1 1024, t2 its last 952 and r1 (admitted with
    # the 72 left) 72; t3 r0's first token, r0 decodes, r1 prefills 628, r2 100;
    # t4 r0 done, r1 and r2 first tokens; r2 done at 6, r1 at 8.
    "chunked": (15984, 1024, 16, 0, [(3000, 2, 0), (700, 5, 1), (100, 3, 1)], 13, [3, 4, 4], [4, 8, 6], 0),
    # hol: 96 + 96 tokens fill the 160-token pool; the 16-token request waits
    # behind the second 96, which cannot be admitted before the first is done.
    "hol": (160, 1024, 16, 0, [(96, 10, 0), (96, 10, 0), (16, 3, 0)], 25, [1, 11, 11], [10, 20, 13], 0),
    # longchunk: a 1000-token chunk cap, 3000 tokens each: three iterations.
    "longchunk": (15984, 4096, 16, 1000, [(3000, 2, 0)] * 2, 9, [3, 3], [4, 4], 0),
    "mixed": (624, 512, 4, 0, [(300, 40, 0), (200, 30, 2), (250, 20, 3), (150, 60, 3), (400, 10, 5), (100, 25, 9)],
              105, [1, 3, 33, 41, 53, 63], [40, 32, 52, 100, 62, 87], 0),
    # preempt: the second request is admitted with a 20-token chunk, its next
    # chunk needs a block that is not free, it is the latest admitted and
    # preempts itself; it runs after the first: steps (1, 30) and (31, 60).
    "preempt": (160, 100, 16, 0, [(80, 30, 0)] * 2, 65, [1, 31], [30, 60], 1),
    # grower: both prefill at t0 and fill the nine blocks; at t1 r0's first
    # decode needs a fifth block, so r1 (admitted last) is preempted and r0
    # grows and decodes in the same iteration (its token counts: done at 10).
    # r1 resumes at 10 with its 71 known tokens and decodes its last 8: 19.
    "grower": (144, 1000, 16, 0, [(64, 10, 0), (70, 10, 0)], 25, [1, 1], [10, 19], 1),
    # seqcap: two slots, four requests of one budget each.
    "seqcap": (15984, 1024, 2, 0, [(1024, 5, 0)] * 4, 18, [1, 3, 7, 9], [5, 7, 11, 13], 0),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_step_engine_reproduces_the_vllm_oracle(name: str) -> None:
    cap, budget, slots, chunk, requests, horizon, first, done, preemptions = SCENARIOS[name]
    report = serq.run(serq.load(oracle(cap, budget, slots, chunk, requests, horizon)))
    assert by_session(report, "first") == first
    assert by_session(report, "done") == done
    assert report.pool("kv").preemptions == preemptions


def test_a_preempted_request_is_admitted_again_and_counted_at_both_pools() -> None:
    report = serq.run(serq.load(oracle(160, 100, 16, 0, [(80, 30, 0)] * 2, 65)))
    # two first admissions and the re-admission after the preemption
    assert report.pool("reqs").admissions == 3
    assert report.pool("kv").admissions == 3
    assert report.pool("kv").stuck == 0

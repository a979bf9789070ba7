"""A request preempted inside its last, fractional token (issue 8, A2).

Token counts are real numbers (decision 3): the vLLM programs draw
`o = ~exp(200) + 1`.  A request preempted with a fraction f < 1 of a token
left to decode used to resume with `known = computed + 1` and a decode of
`o - 1 - (known - prompt) = f - 1 < 0`, and the run stopped with "the amount
is -0.5".  `lib/vllm.sq` now decodes `max(0, …)`: the resumed request
recomputes the tokens it has, the end of that prefill samples its last token,
and nothing is left to decode.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import serq

ROOT = Path(__file__).resolve().parents[3]
LIB = ROOT / "lib" / "vllm.sq"

# The kernel: A (prompt 63, o 20) and B (prompt 62, o 2.5) arrive together on
# 8 KV blocks of 16 tokens, budget 1000, no chunk cap, `cost 1` (the clock
# counts iterations), `preempt lifo`, and the server block of lib/vllm.sq.
KERNEL = """
use "{lib}";
let bs = 16;
pool reqs {{ cap 16; admit via engine; }}
pool kv {{ cap 8 * bs; block bs; evict lru; preempt lifo; }}
stage engine : step {{ budget 1000; chunk 0; cost 1; memory kv; }}
server {{ vllm_request(reqs, kv, engine, prompt, o); }}
workload {{
  arrive batch(2);
  init {{ set prompt = serial == 0 ? 63 : 62; set o = serial == 0 ? 20 : 2.5; }}
  session {{ request; observe done = now; end; }}
}}
run {{ horizon 100; }}
"""

# Worked by hand (the same for both variants: `reserve (known)` never asks
# for more than the units here, as every admission's units are `known`):
#  t0  A is admitted with its 63 tokens (4 blocks), B with 62 (4 blocks): the
#      pool is full. Both prefill; at t1 both have their first token.
#  t1  both decode: A to position 64 (still 4 blocks), B to 63. At t2 B has
#      decoded 1 of its o - 1 = 1.5 tokens: 0.5 left.
#  t2  A's next decode needs a fifth block and none is free: B, the latest
#      admitted, is preempted at position 63 with 0.5 of a token left. Its
#      computed full blocks go to the cache (48 tokens, 3 blocks). A grows
#      into the free block and decodes; nothing is admitted in this
#      iteration. B re-queues at the front with known = 63 + 1 = 64.
#  t3… B needs 4 blocks on top of A's 5 (6 from A's 18th decode, which evicts
#      one block of B's entry: 32 left): it waits until A is done. A decodes
#      its 19 tokens in the iterations ending at t2 … t20: done at 20.
#  t20 A leaves (its 80 computed tokens go to the cache); B is admitted with
#      its 32-token hit (an LRU block of A's entry is evicted for B's 4),
#      prefills 64 - 32 = 32 tokens and at t21 samples its last token; its
#      decode is max(0, 2.5 - 1 - (64 - 62)) = 0, a run that ends at once:
#      done at 21.
# B's output tokens are committed at 1 (first), 2 (decode) and 21 (end of the
# re-prefill): three, ceil(2.5), as an unpreempted B would have (1, 2 and 3),
# so its tpot is (21 - 1) / 2 = 10 and A's is 19 / 19 = 1.


def _with_reserve(tmp_path: Path) -> Path:
    """lib/vllm.sq with the hold of `vllm_request` written `… kv (…) reserve (known)`
    (the first of the library's two such holds; `vllm_request_prefix` has the other)."""
    text = LIB.read_text()
    hold = "kv (min(known, hit + budget_left(engine)))"
    assert text.index("def vllm_request(") < text.index(hold) < text.index("def vllm_request_prefix(")
    lib = tmp_path / "vllm_reserve.sq"
    lib.write_text(text.replace(hold, hold + " reserve (known)", 1))
    return lib


@pytest.mark.parametrize("variant", ["library", "reserve"])
def test_a_request_preempted_inside_its_last_token_resumes_and_finishes(variant: str, tmp_path: Path) -> None:
    lib = LIB if variant == "library" else _with_reserve(tmp_path)
    program = tmp_path / "kernel.sq"
    program.write_text(KERNEL.format(lib=lib.as_posix()))
    report = serq.run(serq.load(program))
    done = [s.value for s in sorted(report.samples["done"], key=lambda s: s.session)]
    assert done == [20, 21]
    kv = report.pool("kv")
    assert kv.preemptions == 1
    assert kv.admissions == 3
    assert kv.evicted_units == 32
    assert [s.value for s in report.samples["prefill_tokens"]] == [63, 62, 32]
    assert report.client["ttft"].mean == 1
    assert report.client["tpot"].count == 2 and report.client["tpot"].mean == 5.5
    assert report.client["response"].mean == 20.5


def test_the_library_never_decodes_a_negative_amount() -> None:
    decode = re.findall(r"decode on engine \((.*)\) growing kv;", LIB.read_text())
    assert decode and all(d.startswith("max(0, ") for d in decode)


def test_the_multi_turn_agent_on_3000_blocks_runs_through_its_preemptions() -> None:
    # Seed 1 stopped at "the amount is -0.368982" before the fix, within the
    # first 100 seconds.
    program = serq.load(ROOT / "programs" / "multi-turn" / "vllm.sq", sets=[("blocks", "3000")])
    report = serq.run(program, seed=1, horizon=100, warmup=0)
    assert report.end == 100
    assert report.pool("kv").preemptions > 0


def test_a_programs_own_negative_decode_stays_a_clear_error(tmp_path: Path) -> None:
    # The same kernel with the hold written out and the old decode amount: the
    # simulator does not clamp a program's work, it stops with a clear error.
    program = tmp_path / "kernel.sq"
    text = KERNEL.format(lib=LIB.as_posix()).replace(
        "server { vllm_request(reqs, kv, engine, prompt, o); }",
        """server {
  hold reqs (1), kv (min(known, budget_left(engine))) reserve (known)
       at admission (known = computed < prompt ? prompt : computed + 1) {
    prefill on engine (known) growing kv;
    decode on engine (o - 1 - (known - prompt)) growing kv;
  }
}""",
    )
    assert "vllm_request" not in text
    program.write_text(text)
    with pytest.raises(serq.SerqError, match=r"the amount is -0\.5, not a number of units, tokens or seconds"):
        serq.run(serq.load(program))

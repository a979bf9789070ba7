"""lib/h100.sq: the H100 profiles are the roofline's constants, and a program using each checks and runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import serq
from serq.calibration import roofline as rl

ROOT = Path(__file__).resolve().parents[2]
LIB = (ROOT / "serq" / "lib" / "h100.sq").read_text()

# One vLLM engine under a closed load of 4 users, each sending one request after another
# (prompt 512, 64 output tokens, no think time).
PROGRAM = """
use "std/vllm";
use "std/h100";
pool kv { cap 100000; block 16; evict lru; preempt lifo; }
pool reqs { cap 16; admit via engine; }
stage engine : step { budget 8192; cost PROFILE(); memory kv; }
server { vllm_request(reqs, kv, engine, 512, o); }
workload {
  arrive closed(4);
  hidden o;
  turn { set o = 64; }
  session { loop { turn; request; } }
}
run { horizon 60; warmup 10; }
"""

PROFILES = {
    "llama31_8b_h100": rl.compute(model_name="Llama-3.1-8B", gpu_name="H100-SXM"),
    "llama31_70b_h100_tp4": rl.compute(model_name="Llama-3.1-70B", gpu_name="H100-SXM", tp=4),
}


def _body(name: str) -> str:
    m = re.search(rf"def {name}\(\) = (.*?);", LIB, re.S)
    assert m, name
    return " ".join(m.group(1).split())


@pytest.mark.parametrize("name", list(PROFILES))
def test_a_profile_is_the_cost_its_roofline_command_prints(name: str) -> None:
    r = PROFILES[name]
    assert "cost " + _body(name) + ";" == r.cost()
    cmd = "serq roofline --model Llama-3.1-8B --gpu H100-SXM\n" if r.tp == 1 else \
        "serq roofline --model Llama-3.1-70B --gpu H100-SXM --tp 4\n"
    assert cmd in LIB


@pytest.mark.parametrize("name", list(PROFILES))
def test_a_program_using_a_profile_checks_and_runs(name: str) -> None:
    src = PROGRAM.replace("PROFILE", name)
    assert serq.check(src).startswith("OK")
    report = serq.run(src, max_events=2_000_000)
    r = PROFILES[name]
    # 4 decoders, each holding about 512 + 32 KV tokens on average: the memory roof,
    # omega + beta * kv (+ the all-reduces under TP), a few ms above omega.
    tpot = report.client["tpot"].mean
    floor = r.omega + r.c0 + 4 * r.gamma
    assert floor < tpot < floor * 1.1


def test_the_published_setting_replays_on_the_8b_profile_as_docs_calibration_says() -> None:
    # docs/examples/lambda_h100_8b.sq: Lambda's 10 prompts (1369 input tokens in all) sent at once.
    # They fit one 2048-token step, compute-bound: TTFT = a * 1369 = 1.62321e-5 * 1369 = 0.0222217 s
    # for every request. A decode step is omega + beta * kv with kv at most 1369 + 1867 tokens:
    # between 4.794 ms and 4.794 + 3.9126e-8 * 3236 = 4.921 ms.
    report = serq.run(ROOT / "docs" / "examples" / "lambda_h100_8b.sq", max_events=100_000)
    ttft, tpot = report.client["ttft"], report.client["tpot"]
    assert ttft.count == 10 and ttft.mean == pytest.approx(1.62321e-5 * 1369, rel=1e-9)
    assert 0.00479403 < tpot.mean < 0.00479403 + 3.9126e-08 * 3236
    assert round(tpot.mean * 1e3, 2) == 4.83  # the figure docs/calibration.md compares with vLLM's 7.56 ms

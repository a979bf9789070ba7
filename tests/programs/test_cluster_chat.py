"""The A100 profile (lib/a100.sq, issue 41) and the chat on four replicas of it
(programs/cluster/chat.sq): the profile prices an iteration as Vidur's fit does,
and the chat runs on it with Vidur's deployment and a real 7B deployment's TPOT."""

from __future__ import annotations

from pathlib import Path

import pytest

import serq
from serq import ir
from tests.bounds import EVENTS

ROOT = Path(__file__).resolve().parents[2]
CHAT = ROOT / "programs" / "cluster" / "chat.sq"

# the fit's constants (../shared/data/engines/README.md), as lib/a100.sq writes them
K_C, K_DECODERS, K_KV_DECODE, K_PREFILLED, K_ATTENTION = (
    0.005513383045, 9.330145329e-05, 3.1962715e-07, 6.556394925e-05, 1.321326245e-08)

ONE_REQUEST = """
use "std/a100";
pool kv { cap 7424 * 16; block 16; }
pool reqs { cap 16; admit via engine; }
stage engine : step { budget 4096; cost llama2_7b_a100(); memory kv; }
workload { arrive poisson(0.001); init { set p = 100; set o = 3; } }
session { hold reqs (1), kv (p + o) { prefill on engine (p); decode on engine (o); } }
run { horizon 10; }
"""


def test_the_a100_profile_prices_an_iteration_as_vidurs_fit_does():
    # one request of a 100-token prompt and 3 output tokens, alone on the engine
    rows = serq.run(serq.load(ONE_REQUEST), steps=True, max_events=1000).steps["engine"]
    assert len(rows) == 4  # the prefill, then three decode iterations
    # the prefill: 100 tokens on no context, attention 100 * (0 + 100 / 2) = 5 000
    assert (rows[0].prefilled, rows[0].decoders, rows[0].attention) == (100, 0, 5000)
    assert rows[0].duration == pytest.approx(0.005513383045 + 0.006556394925 + 0.00006606631225, rel=1e-12)
    assert rows[0].duration == pytest.approx(K_C + 100 * K_PREFILLED + 5000 * K_ATTENTION, rel=1e-12)
    # a decode: one decoder holding its 103 tokens' 7 blocks of 16 = 112 KV tokens
    for row in rows[1:]:
        assert (row.decoders, row.kv_decode, row.prefilled) == (1, 112, 0)
        assert row.duration == pytest.approx(0.005513383045 + 0.00009330145329 + 0.0000357982408, rel=1e-12)
        assert row.duration == pytest.approx(K_C + K_DECODERS + 112 * K_KV_DECODE, rel=1e-12)


def test_the_chat_runs_on_the_a100_profile_with_vidurs_deployment():
    program = serq.load(CHAT)
    kv, reqs = program.pools
    # Vidur's deployment on four replicas: 7 424 KV blocks of 16 tokens, 16 requests, 4 096 tokens a batch
    assert (kv.name, kv.size, kv.cap, kv.block) == ("kv", 4, 7424 * 16, 16)
    assert (reqs.name, reqs.size, reqs.cap) == ("reqs", 4, 16)
    engine = program.stages[0]
    assert (engine.name, engine.size, engine.step.budget, engine.step.chunk) == ("engine", 4, ir.Num(4096), ir.Num(0))
    # the cost is lib/a100.sq's profile, expanded: its five constants on its five context variables
    profile = serq.load(ONE_REQUEST)  # the profile on its own
    assert engine.step.cost == profile.stages[0].step.cost
    numbers = [n.value for n in walk(engine.step.cost) if isinstance(n, ir.Num)]
    contexts = [n.name for n in walk(engine.step.cost) if isinstance(n, ir.Ctx)]
    assert numbers == [K_C, K_DECODERS, K_KV_DECODE, K_PREFILLED, K_ATTENTION]
    assert contexts == ["decoders", "kv_decode", "prefilled", "attention"]


def walk(e):
    """An expression's nodes, left to right."""
    if isinstance(e, ir.Binary):
        yield from walk(e.a)
        yield from walk(e.b)
    else:
        yield e


def test_the_chat_reports_a_tpot_of_tens_of_milliseconds_and_settles():
    # a decode step of Llama-2-7B on an A100 is 5.5 ms alone (k_c); with a batch of about six
    # conversations of some 1 500 KV tokens each it is about 5.5 + 6 * (0.09 + 0.48) = 9 ms,
    # and the prefills that share iterations with the decodes lengthen it further
    report = serq.run(serq.load(CHAT), max_events=EVENTS)
    tpot = report.to_dict()["client"]["tpot"]
    assert 0.010 < tpot["mean"] < 0.100
    assert 0.010 < tpot["p99"] < 0.100
    assert report.settled

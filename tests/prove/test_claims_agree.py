"""The simulator's claim monitor and ``serq prove`` agree on the path they share.

A deterministic program with a finite workload has one path: the run reads its
claims on it (serq/sim/claims.py), and the explorer decides them on the exact
machine (serq/prove).  On random programs of that kind, a claim that holds on
the run is proved, one that fails at t is refuted at t, and the same for
witnesses — the two semantics held together on the claims themselves.
"""

from __future__ import annotations

import random

import pytest

import serq
from serq.prove.verdicts import prove

VERDICT_OF = {"holds": "proved", "fails": "refuted", "witnessed": "witnessed", "not witnessed": "no witness"}

SHAPES = [
    # (engine clauses, session body, pool declaration)
    ("budget {B}; cost 3 + 2 * tokens;", "run engine prefill (p); run engine decode (o);", ""),
    ("budget {B}; chunk {C}; cost 1 + tokens + decoders;", "run engine prefill (p); run engine decode (o);", ""),
    ("budget {B}; cost 2 + tokens; serve decode first;", "run engine prefill (p); run engine decode (o);", ""),
    ("budget {B}; cost 1 + ceil(tokens / 4); serve exclusive prefill;",
     "run engine prefill (p); run engine decode (o);", ""),
    ("budget {B}; cost 1 + tokens;", "hold kv (p + o) {{ run engine prefill (p); run engine decode (o); }}",
     "pool kv {{ cap {CAP}; queue by (p); }}"),
    ("budget {B}; cost 1 + tokens; memory kv;", "hold reqs (1) {{ run engine prefill (p); run engine decode (o); }}",
     "pool kv {{ cap 1000; }} pool reqs {{ cap 2; admit via engine; }}"),
]

CLAIMS = [
    "claim c0: every iteration of engine (tokens <= {B});",
    "claim c1: every iteration of engine (demand < {B} || tokens == {B});",
    "claim c2: every iteration of engine (served <= {K} * now);",
    "claim c3: some iteration of engine (tokens == 1);",
    "claim c4: some iteration of engine (decoders >= 2 && prefilled > 0);",
    "claim c5: every iteration of engine (arrived * 3 <= served + {K} * residents + 20);",
    "claim c6: at end (largest(response) <= {T});",
    "claim c7: at end (total(response) * 2 <= prefix_total(response) + {T});",
]


def _program(rng: random.Random) -> str:
    engine, body, pools = rng.choice(SHAPES)
    n = rng.randint(2, 4)
    vals = {"B": rng.randint(2, 8), "C": rng.randint(1, 4), "CAP": rng.randint(8, 14), "K": rng.randint(1, 3),
            "T": rng.randint(10, 40)}
    pm, om = rng.randint(2, 7), rng.randint(2, 5)
    ap, ao = rng.randint(2, 7), rng.randint(1, 5)
    return "\n".join([
        pools.format(**vals),
        f"stage engine : step {{ {engine.format(**vals)} }}",
        f"workload {{ arrive batch({n}); init {{ set t0 = now; "
        f"set p = 1 + serial * {ap} - {pm} * floor(serial * {ap} / {pm}); "  # 1 + (serial * ap) mod pm
        f"set o = 1 + serial * {ao} - {om} * floor(serial * {ao} / {om}); }} }}",
        f"session {{ {body.format(**vals)} observe response = now - t0; }}",
        *[c.format(**vals) for c in CLAIMS],
        "run { horizon 100000; }",
    ])


@pytest.mark.parametrize("seed", range(40))
def test_the_run_and_the_proof_agree_on_a_deterministic_programs_claims(tmp_path, seed):
    rng = random.Random(seed)
    text = _program(rng)
    path = tmp_path / "p.sq"
    path.write_text(text)
    program = serq.load(path)
    report = serq.run(program, max_events=200_000)
    proof = prove(program)
    assert len(report.claims) == len(proof.verdicts) == len(CLAIMS)
    for got, v in zip(report.claims, proof.verdicts):
        assert got.name == v.name
        assert VERDICT_OF[got.result] == v.verdict, (text, got, v)
        if got.first is not None:
            assert float(v.first) == got.first, (text, got, v)


STEADY_CLAIMS = [CLAIMS[0], CLAIMS[1], CLAIMS[3], CLAIMS[4],
                 "claim c8: every iteration of engine (decoders < 3 || demand == residents);"]


@pytest.mark.parametrize("seed", range(20))
def test_a_claim_read_alike_over_a_decode_run_gives_the_same_results_with_the_runs_coalesced(tmp_path, seed):
    """Claims that read only what a run of decode iterations keeps leave the stage's coalesced
    runs on; their results, first times, counts and notes are those of one iteration at a time."""
    from tests.sim.stages.test_coalesce_runs import Counting, Plain

    rng = random.Random(1000 + seed)
    vals = {"B": rng.randint(4, 16), "K": 1, "T": 100}
    n = rng.randint(2, 5)
    text = "\n".join([
        f"stage engine : step {{ budget {vals['B']}; cost 1 + tokens; }}",
        f"workload {{ arrive renewal({rng.randint(5, 40)}); init {{ set p = 1 + floor(~uniform(0, 6)); "
        f"set o = 5 + floor(~uniform(0, 40)); }} }}",
        "session { run engine prefill (p); run engine decode (o); }",
        *[c.format(**vals) for c in STEADY_CLAIMS],
        f"run {{ horizon 100000; arrivals {n * 10}; seed {seed + 1}; }}",
    ])
    path = tmp_path / "p.sq"
    path.write_text(text)
    program = serq.load(path)
    Counting.inside = 0
    fast = serq.run(program, engines={"engine": Counting}, max_events=200_000)
    slow = serq.run(program, engines={"engine": Plain}, max_events=200_000)
    assert Counting.inside > 0  # runs were coalesced
    assert [c.to_dict() for c in fast.claims] == [c.to_dict() for c in slow.claims]
    assert fast.to_json() == slow.to_json()

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
    for got, v in zip(report.claims, proof.verdicts):
        assert got.name == v.name
        assert VERDICT_OF[got.result] == v.verdict, (text, got, v)
        if got.first is not None:
            assert float(v.first) == got.first, (text, got, v)

"""``serq prove``: verdicts over every path, worked out by hand (docs/claims.md)."""

from __future__ import annotations

import json
import random
import shlex
from fractions import Fraction
from pathlib import Path

import pytest

import serq
from serq import ir
from serq.prove.exact import shown
from serq.prove.explore import Limits
from serq.prove.family import Bound, Finite, Unbounded, _products_at_least, support
from serq.prove.periodic import Nonlinear, repetitions_to_check
from serq.prove.verdicts import prove
from tests.frontend_util import cli_streams

ROOT = Path(__file__).resolve().parents[2]

# One request every 10 s: a prefill of 3 tokens (cost 1 + 3 = 4: 10 → 14), then two decode
# iterations of 1 token (cost 2 each: 14 → 16 → 18); the engine is idle until the next
# arrival at 20, so the state at every arrival is the same, shifted by 10.
PERIODIC = """
let gap = 10;
stage engine : step { budget 4; cost 1 + tokens; }
workload { arrive renewal(gap); init { set t0 = now; } }
session { run engine prefill (3); run engine decode (2); observe response = now - t0; }
claim small: every iteration of engine (tokens <= 4);
claim early: every iteration of engine (now < 100);
claim rate: every iteration of engine (served * 10 <= 5 * now);
claim fast: every iteration of engine (served * 10 <= 4 * now + 20);
claim busy: some iteration of engine (tokens == 4);
claim idle: some iteration of engine (tokens == 1);
run { horizon 1000; }
"""

# Two sessions at time 0, prompts p in 1..4 and outputs 1 or 4 tokens, budget 4, cost 1 + tokens.
FAMILY = """
let B = 4;
stage engine : step { budget B; cost 1 + tokens; }
workload { arrive batch(2); init { set t0 = now; set p = 1 + floor(~uniform(0, 4)); set long = ~bernoulli(0.5); } }
session { run engine prefill (p); run engine decode (1 + 3 * long); observe response = now - t0; }
claim full: every iteration of engine (demand < B || tokens == B);
claim short given (long == 0): every iteration of engine (now < 9);
claim bounded: at end (largest(response) <= 25);
claim tight: at end (largest(response) <= 19);
run { horizon 1000; }
"""


def _prog(tmp_path: Path, text: str, name: str = "p.sq") -> serq.Program:
    path = tmp_path / name
    path.write_text(text)
    return serq.load(path)


def _verdicts(proof) -> dict[str, object]:
    return {v.name: v for v in proof.verdicts}


def test_a_periodic_deterministic_program_is_proved_for_all_time_and_a_false_claim_refuted_at_its_time(tmp_path):
    v = _verdicts(prove(_prog(tmp_path, PERIODIC)))
    assert (v["small"].verdict, v["small"].period) == ("proved", 10)
    # the first iteration at or after 100 is the arrival at 100's prefill
    assert (v["early"].verdict, v["early"].first) == ("refuted", 100)
    # 5 tokens a period of 10 against 5 tokens of capacity: equal, so it holds in every period
    assert v["rate"].verdict == "proved"
    # request k arrives at 10k; its iterations start at 10k (served 5(k - 1)), 10k + 4 (served
    # 5(k - 1) + 3) and 10k + 6 (5(k - 1) + 4). At 10k + 4: 50k - 20 <= 40k + 36 only while k <= 5.6;
    # at 10k: k <= 7; at 10k + 6: k <= 5.4. The first failure is k = 6's first decode, at 64.
    assert v["fast"].verdict == "refuted"
    assert v["fast"].first == 64
    assert v["busy"].verdict == "no witness"  # 3 or 1 tokens, never 4
    assert (v["idle"].verdict, v["idle"].first) == ("witnessed", 14)
    assert v["small"].paths == 1 and v["small"].states > 0


def test_the_refutation_of_a_deterministic_program_replays_with_serq_run_to_the_same_time(tmp_path):
    program = _prog(tmp_path, PERIODIC)
    proof = prove(program)
    early = _verdicts(proof)["early"]
    command = proof.replay(early)
    assert command is not None and "--replay" not in command  # the program's own path
    words = shlex.split(command)
    horizon = float(words[words.index("--horizon") + 1])
    report = serq.run(program, horizon=horizon)
    got = {c.name: c for c in report.claims}
    assert (got["early"].result, got["early"].first) == ("fails", 100.0)
    assert (got["fast"].result, got["fast"].first) == ("fails", 64.0)


def test_a_two_session_family_refutes_a_claim_with_a_counterexample_that_replays_to_the_failure(tmp_path):
    program = _prog(tmp_path, FAMILY)
    proof = prove(program)
    v = _verdicts(proof)
    short = v["short"]
    # Depth first, session 0's choices before session 1's, p before long. With long = 0 (one
    # decode token) the schedules are: prompts (1, 1) … (2, 3) end their last iteration's start
    # at 8 or earlier; prompts (2, 4): 0 → 5 (2 + 2 prefill tokens), 5 → 9 (session 0's decode
    # and session 1's last 2 prompt tokens, cost 1 + 3), and at 9 session 1 decodes: now = 9.
    assert short.verdict == "refuted"
    assert short.first == 9
    assert [(x["serial"], x["arrival"], x["attributes"]["p"], x["attributes"]["long"]) for x in short.sessions] == [
        (0, 0, 2, 0), (1, 0, 4, 0)]
    replay = [{"arrival": s["arrival"], "attributes": s["attributes"]} for s in short.sessions]
    report = serq.run(program, sessions=replay)
    got = {c.name: c for c in report.claims}
    assert (got["short"].result, got["short"].first) == ("fails", 9.0)


def test_a_claim_is_proved_over_the_whole_family_when_no_workload_breaks_it(tmp_path):
    v = _verdicts(prove(_prog(tmp_path, FAMILY)))
    assert v["full"].verdict == "proved"  # a batch is full whenever its residents could fill it
    assert v["bounded"].verdict == "proved"
    # (p, long) has 8 values a session, two sessions: 64 workloads
    assert v["full"].paths == 64
    assert "`p` in {1, 2, 3, 4}" in v["full"].family and "`long` in {0, 1}" in v["full"].family


def test_an_at_end_claim_is_refuted_with_the_workload_whose_last_response_is_too_long(tmp_path):
    v = _verdicts(prove(_prog(tmp_path, FAMILY)))
    tight = v["tight"]
    assert tight.verdict == "refuted"
    # replay: the largest response of that workload is above 19, and the claim fails at its end
    program = _prog(tmp_path, FAMILY)
    report = serq.run(program, sessions=[{"arrival": s["arrival"], "attributes": s["attributes"]}
                                         for s in tight.sessions])
    assert max(x.value for x in report.samples["response"]) > 19
    got = {c.name: c for c in report.claims}
    assert got["tight"].result == "fails" and Fraction(got["tight"].first) == tight.first


def test_bounds_narrow_the_family_and_the_verdict_names_it(tmp_path):
    proof = prove(_prog(tmp_path, FAMILY), bounds=[Bound.parse("p=1..2")])
    v = _verdicts(proof)
    assert "`p` in {1, 2}" in v["full"].family
    assert v["full"].paths == 16


def test_a_bound_outside_what_init_draws_is_refused_rather_than_proving_an_empty_family(tmp_path):
    v = _verdicts(prove(_prog(tmp_path, FAMILY), bounds=[Bound.parse("p=7..9")]))
    assert all(x.verdict == "unknown" for x in v.values())
    assert "none of its values" in v["full"].reason


def test_a_given_no_workload_satisfies_leaves_the_claim_unknown(tmp_path):
    text = FAMILY.replace("claim short given (long == 0)", "claim short given (long == 2)")
    v = _verdicts(prove(_prog(tmp_path, text)))
    assert v["short"].verdict == "unknown"
    assert "no workload of the family satisfies" in v["short"].reason


def test_outside_the_fragment_every_claim_is_unknown_naming_the_construct(tmp_path):
    text = """
    stage net : ps(1);
    stage engine : step { cost 1 + tokens; }
    workload { arrive batch(1); }
    session { run net (1); run engine prefill (2); }
    claim c: every iteration of engine (tokens <= 2);
    run { horizon 10; }
    """
    v = _verdicts(prove(_prog(tmp_path, text)))
    assert v["c"].verdict == "unknown" and "`ps` stage" in v["c"].reason


def test_an_unbounded_draw_asks_for_a_bound_and_poisson_arrivals_take_a_grid(tmp_path):
    unbounded = FAMILY.replace("set long = ~bernoulli(0.5);", "set long = ~exp(1);")
    v = _verdicts(prove(_prog(tmp_path, unbounded)))
    assert v["full"].verdict == "unknown" and "--bound long=LO..HI" in v["full"].reason
    poisson = FAMILY.replace("arrive batch(2);", "arrive poisson(0.5);")
    # by default the instants are 0, 2, 4, 6 (the mean gap 1 / rate): two sessions, 10 multisets of
    # instants, 8 × 8 attribute choices each
    v = _verdicts(prove(_prog(tmp_path, poisson, "q.sq")))
    assert v["full"].verdict == "proved" and "mean gap" in v["full"].family
    assert "4 instants 0, 2, 4, 6" in v["full"].family
    assert v["full"].paths <= 10 * 64
    v = _verdicts(prove(_prog(tmp_path, poisson, "q.sq"), grid=Fraction(3), instants=2, sessions=2))
    assert v["full"].verdict == "proved" and "2 instants 0, 3;" in v["full"].family
    assert v["full"].paths <= 3 * 64
    renewal = FAMILY.replace("arrive batch(2);", "arrive renewal(~exp(1));")
    v = _verdicts(prove(_prog(tmp_path, renewal, "r.sq")))
    assert v["full"].verdict == "unknown" and "--grid" in v["full"].reason


def test_a_family_larger_than_the_limit_is_unknown_without_exploring_it(tmp_path):
    v = _verdicts(prove(_prog(tmp_path, FAMILY), limits=Limits(max_paths=10)))
    assert all(x.verdict == "unknown" and "--max-paths" in x.reason for x in v.values())
    assert v["full"].paths == 0


def test_an_at_end_claim_of_an_endless_workload_is_unknown(tmp_path):
    text = PERIODIC + "claim total_ok: at end (count(response) >= 0);\n"
    v = _verdicts(prove(_prog(tmp_path, text)))
    assert v["total_ok"].verdict == "unknown" and "never ends" in v["total_ok"].reason


def test_the_repetitions_to_check_cover_every_change_of_an_affine_claim():
    # served + 5k <= 4 (now + 10k) / 10 + 2 with served 3, now 14: 3 + 5k <= 7.6 + 4k  ⇔  k <= 4.6
    from serq import ir

    expr = ir.Binary("<=", ir.Binary("*", ir.Ctx("served"), ir.Num(10.0)),
                     ir.Binary("+", ir.Binary("*", ir.Num(4.0), ir.Ctx("now")), ir.Num(20.0)))
    base = {"served": 3, "now": 14}

    def value(x):
        return base[x.name] if isinstance(x, ir.Ctx) else Fraction(str(x.value))

    ks = repetitions_to_check(expr, value, {"now": 10, "served": 5, "arrived": 1})
    # the comparison changes at k = (56 + 20 - 30) / (50 - 40) = 4.6: 3, 4, 5 and 6 are checked, and 0
    assert {0, 4, 5}.issubset(ks) and max(ks) > 5
    with pytest.raises(Nonlinear):
        repetitions_to_check(ir.Binary("<=", ir.Binary("*", ir.Ctx("served"), ir.Ctx("now")), ir.Num(1.0)),
                             value, {"now": 10, "served": 5, "arrived": 1})


def test_sarathi_in_dai_et_al_is_work_conserving_for_all_time():
    program = serq.load(ROOT / "programs/papers/dai_sarathi.sq")
    v = _verdicts(prove(program))
    for name in ("work_conserving", "bounded"):
        assert (v[name].verdict, v[name].period) == ("proved", 46750), name
    # Theorem 2(a) for every workload: an iteration of t <= 128 tokens lasts 1128 + 3547 ceil(t / 128)
    # >= 4675 t / 128, and nothing is served before the first
    assert (v["token_rate"].verdict, v["token_rate"].family) == ("proved", "every workload, every path")
    assert "by induction" in v["token_rate"].reason


RATE = """
stage engine : step {{ budget 8; cost {cost}; }}
workload {{ arrive batch(2); init {{ set p = 1 + 3 * serial; }} }}
session {{ run engine prefill (p); run engine decode (2); }}
claim rate: every iteration of engine (served <= 2 * now + {slack});
run {{ horizon 100; }}
"""


@pytest.mark.parametrize("cost, slack, how", [
    ("1 + 2 * ceil(tokens / 4)", 0, "induction"),   # t <= 4 costs 3 >= t/2, t <= 8 costs 5 >= t/2: pays
    ("tokens / 2", 0, "induction"),                 # exactly t/2: equality all the way
    ("1 + tokens / 4", 0, "explored"),              # 8 tokens cost 3 < 4: does not pay, the path decides
    ("1 + tokens * tokens / 16", 0, "explored"),    # not linear between steps: not by this argument
    ("2 * tokens + decoders", 0, "explored"),       # reads more than tokens
])
def test_a_rate_claim_is_proved_for_every_workload_only_when_every_iteration_pays_for_its_tokens(
        tmp_path, cost, slack, how):
    v = _verdicts(prove(_prog(tmp_path, RATE.format(cost=cost, slack=slack))))["rate"]
    if how == "induction":
        assert (v.verdict, v.family) == ("proved", "every workload, every path")
    else:
        assert v.family != "every workload, every path"
        assert v.verdict in ("proved", "refuted")


def test_an_infinite_constant_in_a_rate_claim_is_unknown_with_its_reason_not_an_internal_error(tmp_path):
    # `serq prove programs/papers/dai_fastertransformer.sq --set c=inf` ended in exit 3 (an Unsupported
    # from the induction's linear form); the claim is now left to the exploration, which says why
    for slack in ("inf", "-inf"):
        v = _verdicts(prove(_prog(tmp_path, RATE.format(cost="tokens / 2", slack=slack))))["rate"]
        assert v.verdict == "unknown"
        assert f"outside the exact fragment: the number {slack}" in v.reason
    code, out, _err = cli_streams("prove", str(ROOT / "programs/papers/dai_fastertransformer.sq"), "--set", "c=inf")
    assert code == 5 and "outside the exact fragment: the number inf" in out, out


def test_a_huge_bound_in_the_induction_reason_is_given_in_six_digits_not_three_hundred(tmp_path):
    # `serq prove programs/papers/dai_fastertransformer.sq --set c=1e308` printed the rate as an integer of
    # 306 digits
    text = RATE.format(cost="1e300 * tokens", slack=0).replace("served <= 2 * now", "1e300 * served <= 2 * now")
    v = _verdicts(prove(_prog(tmp_path, text)))["rate"]
    assert (v.verdict, v.family) == ("proved", "every workload, every path")
    assert "lasts at least 5e+299·t" in v.reason and len(v.reason) < 300, v.reason


@pytest.mark.parametrize("value", ["1e-320", "1e300"])
def test_constants_past_the_floats_give_verdicts_in_six_digits(value):
    # `serq prove programs/papers/bari_rad.sq --set bcol=1e-320` ended in an internal error (the
    # induction's rate 1/1e-320 past the largest float), and `bcol=1e300` described `vp` with integers
    # of 301 digits
    code, out, _err = cli_streams("prove", str(ROOT / "programs/papers/bari_rad.sq"), "--max-states", "2000",
                                  "--max-paths", "40", "--set", f"bcol={value}")
    assert code == 5, out
    assert "claim token_rate (every iteration of E): proved" in out
    assert f"up to the budget {value.replace('e3', 'e+3')})" in out
    assert max(len(line) for line in out.splitlines()) < 400, out


def test_a_support_too_large_to_list_is_counted_not_listed():
    # `serq prove programs/papers/bari_rad.sq --set vpmax=1e300` listed the 1e300 values of
    # `bcol * floor(~uniform(1, vpmax + 1))` to find there were too many: it never ended
    code, out, _err = cli_streams("prove", str(ROOT / "programs/papers/bari_rad.sq"), "--max-states", "2000",
                                  "--max-paths", "40", "--set", "vpmax=1e300")
    assert code == 5, out
    assert "the family has no bound: `vp` (1e+300 values): bound it with --bound vp=LO..HI" in out
    code, out, _err = cli_streams("prove", str(ROOT / "programs/papers/bari_rad.sq"), "--max-states", "2000",
                                  "--max-paths", "40", "--set", "vpmax=1e5")
    assert "the family has no bound: `vp` (100000 values)" in out


def test_min_and_max_of_two_listed_supports_are_found_without_their_pairs():
    # the values a pair's min (max) takes: each side's values the other reaches up (down) to; the
    # same set as listing every pair, which for two attributes of 4000 values each took a minute
    rnd = random.Random(3)
    for _ in range(500):
        a, b = (tuple(sorted({Fraction(rnd.randint(-20, 20), rnd.choice([1, 2, 3])) for _ in range(rnd.randint(1, 9))}))
                for _ in range(2))
        for fn, f in (("min", min), ("max", max)):
            got = support(ir.Call(fn, [ir.Attr(20, "a"), ir.Attr(21, "b")]), {20: Finite(a), 21: Finite(b)})
            assert isinstance(got, Finite) and got.values == tuple(sorted({f(x, y) for x in a for y in b}))


def test_a_sum_difference_or_product_of_two_large_supports_is_refused_by_its_count_not_its_pairs():
    # `1 + a + b` with a and b each of 4000 values: 16 million pairs were listed (80 s) to find more
    # than 4096 sums; m + n − 1 of them at least tells it at once
    big = Finite(tuple(Fraction(v) for v in range(4000)))
    for op in ("+", "-"):
        with pytest.raises(Unbounded, match="at least 7999 values"):
            support(ir.Binary(op, ir.Attr(20, "a"), ir.Attr(21, "b")), {20: big, 21: big})
    # a product too: m positive numbers times n positive ones take at least m + n − 1 values (as sums
    # of their logarithms); with a sign each, the most of the four counts
    positive = Finite(tuple(Fraction(v) for v in range(1, 4001)))
    with pytest.raises(Unbounded, match="at least 7999 values"):
        support(ir.Binary("*", ir.Attr(20, "a"), ir.Attr(21, "b")), {20: positive, 21: positive})
    signed = Finite(tuple(Fraction(v) for v in range(-3, 4)))  # (7 values: 3 negative, a zero, 3 positive)
    got = support(ir.Binary("*", ir.Attr(20, "a"), ir.Attr(21, "b")), {20: signed, 21: signed})
    assert isinstance(got, Finite) and got.values == tuple(sorted({x * y for x in signed.values for y in signed.values}))
    rnd = random.Random(5)
    for _ in range(300):  # the bound never exceeds the products' count
        a, b = (tuple(sorted({Fraction(rnd.randint(-9, 9), rnd.choice([1, 2])) for _ in range(rnd.randint(1, 8))}))
                for _ in range(2))
        assert _products_at_least(a, b) <= len({x * y for x in a for y in b})
    small = Finite(tuple(Fraction(v) for v in range(3)))
    got = support(ir.Binary("+", ir.Attr(20, "a"), ir.Attr(21, "b")), {20: small, 21: small})
    assert isinstance(got, Finite) and got.values == tuple(Fraction(v) for v in range(5))


@pytest.mark.parametrize("x, plain, exactly", [
    (Fraction(5), "5", "5"),
    (Fraction(1, 3), "0.333333", "1/3 (≈ 0.333333)"),
    (Fraction(10**15), "1e+15", "1000000000000000"),
    (Fraction(1, 10), "0.1", "1/10 (≈ 0.1)"),
    (Fraction(1234567, 1024), "1205.63", "1234567/1024 (≈ 1205.63)"),  # (a float, but not its six digits)
    (Fraction(10**39), "1e+39", str(10**39)),  # (forty digits: exact)
    (Fraction(10) ** 320, "1e+320", "≈ 1e+320"),  # (longer: six digits)
    (-Fraction(10) ** 320 / 7, "-1.42857e+319", "≈ -1.42857e+319"),
    (Fraction(1, 10**320), "1e-320", "≈ 1e-320"),
    (Fraction(47063, 5) + Fraction(1, 10**320), "9412.6", "≈ 9412.6"),  # dai_fastertransformer.sq, a=1e-320
    (Fraction(9999995) * Fraction(10) ** 315, "1e+322", "≈ 1e+322"),  # (a tie, to even)
])
def test_a_number_is_shown_whole_or_in_six_digits_past_the_floats_too(x, plain, exactly):
    assert shown(x) == plain
    assert shown(x, exact=True) == exactly


def test_serq_prove_exits_0_proved_4_refuted_5_unknown_and_prints_json(tmp_path):
    proved = tmp_path / "ok.sq"
    proved.write_text(PERIODIC.replace("claim early", "// claim early").replace("claim fast", "// claim fast")
                      .replace("claim busy", "// claim busy"))
    code, out, _err = cli_streams("prove", str(proved))
    assert code == 0, out
    assert "claim small (every iteration of engine): proved, for all time (the path repeats every 10)" in out
    refuted = tmp_path / "bad.sq"
    refuted.write_text(PERIODIC)
    code, out, _err = cli_streams("prove", str(refuted), "--json")
    assert code == 4
    data = json.loads(out)
    early = next(c for c in data["claims"] if c["name"] == "early")
    assert (early["verdict"], early["first"], early["kind"], early["stage"]) == ("refuted", 100, "every", "engine")
    assert early["replay"].startswith("serq run ")
    unknown = tmp_path / "unk.sq"
    unknown.write_text(FAMILY.replace("set long = ~bernoulli(0.5);", "set long = ~exp(1);"))
    code, out, _err = cli_streams("prove", str(unknown))
    assert code == 5 and "unknown" in out
    code, out, err = cli_streams("prove", str(unknown), "--bound", "long=1..x")
    assert code == 2 and "--bound" in err

"""``serq prove`` and ``serq run --replay`` on every program they may meet: the bundled
ones, generated ones over the language's shapes, and bad flags.

Bad input gets a clear one-line error naming the flag (exit 2; 1 for a program's
own error), never a traceback; a proof that cannot finish ends, bounded by
``--max-states``/``--max-paths``, and says ``unknown`` with its reason; and where
``serq prove`` decides a claim of a deterministic program with a finite workload,
``serq run`` of the same program reads the same result at the same time.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import serq
from tests.frontend_util import cli_streams

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "programs").rglob("*.sq"))
PAPERS = [p for p in BUNDLED if p.startswith("programs/papers/")]
#: small bounds: every proof below ends after at most this many machine steps and workloads
LIMITS = ("--max-states", "1500", "--max-paths", "200")
VERDICTS = ("proved", "refuted", "witnessed", "no witness", "unknown")


def _prove(path: Path | str, *flags: str) -> tuple[int, str, str]:
    return cli_streams("prove", str(path), *LIMITS, *flags)


def _assert_verdicts(code: int, out: str, err: str, where: str) -> list[dict]:
    """Exit 0, 4 or 5 with a verdict a claim; an unknown one says why."""
    assert code in (0, 4, 5), (where, code, err)
    assert "internal error" not in err and "Traceback" not in err, (where, err)
    claims = json.loads(out)["claims"]
    assert claims, where
    for c in claims:
        assert c["verdict"] in VERDICTS, (where, c)
        if c["verdict"] == "unknown":
            assert c["reason"], (where, c)
    return claims


# --------------------------------------------------------------------------- the bundled programs


@pytest.mark.parametrize("path", [p for p in BUNDLED if p not in PAPERS])
def test_a_bundled_program_without_claims_says_so_and_exits_0(path):
    code, out, err = _prove(ROOT / path)
    assert (code, out.strip(), err) == (0, "no claims: the program states none (docs/claims.md)", "")


@pytest.mark.parametrize("path", PAPERS)
def test_a_paper_program_gets_a_verdict_for_each_of_its_claims_within_the_bounds(path):
    code, out, err = _prove(ROOT / path, "--json")
    program = serq.load(ROOT / path)
    claims = _assert_verdicts(code, out, err, path)
    assert [c["name"] for c in claims] == [c.name for c in program.claims]
    assert all(c["states"] <= 1500 and c["paths"] <= 200 for c in claims)


def _with_a_claim(path: str) -> str:
    """The program with one claim more: over its first step stage, else at its end."""
    program = serq.load(ROOT / path)
    step = next((s for s in program.stages if s.kind == "step"), None)
    if step is None:
        return "claim c: at end (now >= 0);"
    name = step.name if step.size is None else f"{step.name}[0]"
    return f"claim c: every iteration of {name} (tokens >= 0);"


@pytest.mark.parametrize("path", BUNDLED)
def test_a_bundled_program_with_a_claim_added_gets_a_verdict_or_unknown_with_a_reason(path, tmp_path):
    # (a copy beside the original: its `use`s and trace files are found as the original's are)
    source = ROOT / path
    copy = source.with_name(f".robust_{tmp_path.name}_{source.name}")
    copy.write_text(source.read_text() + "\n" + _with_a_claim(path) + "\n")
    try:
        code, out, err = _prove(copy, "--json")
    finally:
        copy.unlink()
    claims = _assert_verdicts(code, out, err, path)
    c = claims[-1]
    assert c["name"] == "c"
    # tokens ≥ 0 and now ≥ 0 hold on every path: never refuted, never without witness
    assert c["verdict"] in ("proved", "unknown"), (path, c)


# --------------------------------------------------------------------------- generated programs

#: whole numbers ≥ 1 a session's `init` draws, over every distribution and floor/ceil/min/max of them
DRAWS = ["1 + floor(~uniform(0, 3))", "ceil(~uniform(0.5, 2.5))", "1 + ~bernoulli(0.5)", "2 + 2 * ~bernoulli(0.25)",
         "1 + min(floor(~exp(1)), 2)", "max(1, min(floor(~erlang(2, 1)), 3))", "1 + min(floor(~h2(1, 0.5)), 1)",
         "max(floor(~uniform(1, 3)), ceil(~uniform(1, 2)))", "1 + floor(~exp(2))", "~det(2)",
         "1 + floor(~uniform(0, 2)) * 2"]
#: the same, without a draw
FIXED = ["1 + serial * 3 - 4 * floor(serial * 3 / 4)", "2", "1 + serial", "3 - serial * 0"]
SERVES = ["serve decode first;", "serve by (remaining);", "serve exclusive prefill;", "serve admission;",
          "serve only (decoders > 0 ? decoding : !decoding);", "serve only (decoding || residents < 2);",
          "serve only (remaining > 0) by (decoding ? 0 : 1);"]


def generate(rng: random.Random) -> tuple[str, bool]:
    """A small program with claims, and whether it has one path that ends (deterministic, finite)."""
    c = rng.choice
    det = rng.random() < 0.4
    arrive = c(["batch", "batch", "renewal", "poisson"])
    finite = arrive == "batch" or (arrive == "renewal" and rng.random() < 0.7)
    lines = [f"let B = {rng.randint(2, 6)};"]
    pool, reqs = rng.random() < 0.5, rng.random() < 0.3
    if pool:
        clauses = [f"cap {rng.randint(6, 20)};"]
        if rng.random() < 0.3:
            clauses.append(f"block {c([1, 2, 4])};")
        if rng.random() < 0.3:
            clauses.append("preempt lifo;")
        if rng.random() < 0.3:
            clauses.append(c(["queue by (p);", "queue by (-o, p);", "queue fifo;"]))
        if not reqs and rng.random() < 0.3:
            clauses.append("admit via engine;")
        lines.append("pool kv { " + " ".join(clauses) + " }")
    if reqs:
        lines.append(f"pool reqs {{ cap {rng.randint(1, 3)}; admit via engine; }}")
    engine = ["budget B;", c(["cost 1 + tokens;", "cost 2 + tokens + decoders;", "cost 1 + ceil(tokens / 2);",
                             "cost max(1, tokens);"])]
    if rng.random() < 0.3:
        engine.append(f"chunk {rng.randint(1, 3)};")
    if rng.random() < 0.5:
        engine.append(c(SERVES))
    if pool and rng.random() < 0.5:
        engine.append("memory kv;")
    lines.append("stage engine : step { " + " ".join(engine) + " }")
    other = c([None, None, None, "delay", "delay", "fifo", "ps(2)"])
    if other:
        lines.append(f"stage net : {other};")
    arr = {"batch": f"batch({rng.randint(1, 3)})", "renewal": f"renewal({c(['5', '0.5', '3'])})",
           "poisson": f"poisson({c(['0.5', '2'])})"}[arrive]
    p_expr, o_expr = (c(FIXED), c(FIXED)) if det else (c(DRAWS), c(DRAWS + FIXED))
    turn = rng.random() < 0.2
    lines.append(f"workload {{ arrive {arr}; init {{ set t0 = now; set p = {p_expr}; set o = {o_expr}; set k = 0; }}"
                 + (" turn { set q = p + 1; }" if turn else "") + " }")
    grow = " growing kv" if pool and rng.random() < 0.4 else ""
    core = f"run engine prefill (p){grow}; run engine decode (o){grow};"
    if pool:
        core = f"hold kv ({'p' if grow else 'p + o'}) {{ {core} }}"
    if reqs:
        core = f"hold reqs (1) {{ {core} }}"
    body = ["turn;"] if turn else []
    if other:
        body.append(c(["run net (1);", "run net (p);"]))
    shape = c(["plain", "plain", "branch", "loop"])
    if shape == "branch":
        body.append(f"branch (p >= 2) {{ {core} }} else {{ run engine prefill (1); }}")
    elif shape == "loop":
        body.append(f"loop {{ {core} set k = k + 1; branch (k >= {rng.randint(1, 2)}) {{ end; }} }}")
    else:
        body.append(core)
    lines.append("session { " + " ".join(body) + " observe response = now - t0; }")
    claims = [
        "claim c0: every iteration of engine (tokens <= B);",
        "claim c1: every iteration of engine (demand < B || tokens == B);",
        f"claim c2: every iteration of engine (served <= {rng.randint(1, 3)} * now + {rng.randint(0, 5)});",
        "claim c3: some iteration of engine (decoders >= 2);",
        f"claim c4: some iteration of engine (tokens == {rng.randint(1, 3)});",
        f"claim c5: at end (largest(response) <= {rng.randint(5, 40)});",
        f"claim c6 given (p >= 2): every iteration of engine (now < {rng.randint(3, 30)});",
        "claim c7: at end (count(response) >= 1);",
    ]
    lines += rng.sample(claims, rng.randint(1, 4))
    arrivals = f"arrivals {rng.randint(1, 3)}; " if arrive == "renewal" and finite else ""
    lines.append(f"run {{ horizon 1000000; {arrivals}}}")
    return "\n".join(lines) + "\n", det and finite


#: The run's result for each verdict of `serq prove`.
RESULT_OF = {"proved": "holds", "refuted": "fails", "witnessed": "witnessed", "no witness": "not witnessed"}
SETTINGS = dict(deadline=None, derandomize=True, phases=[Phase.explicit, Phase.reuse, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=80, **SETTINGS)
@given(st.integers(0, 2**32 - 1))
def test_a_generated_program_gets_verdicts_and_a_decided_one_agrees_with_the_run(seed):
    text, one_path = generate(random.Random(seed))
    path = ROOT / "tests" / "prove" / f".robust_{seed}.sq"
    path.write_text(text)
    try:
        code, out, err = _prove(path, "--json")
    finally:
        path.unlink()
    claims = _assert_verdicts(code, out, err, text)
    if not one_path:
        return
    try:
        report = serq.run(serq.load(text), max_events=50_000)
    except serq.SerqError:
        return  # (a run past the event budget: nothing to hold the verdicts to)
    got = {r.name: r for r in report.claims}
    for c in claims:
        if c["verdict"] == "unknown":
            continue
        r = got[c["name"]]
        assert (r.result, r.first) == (RESULT_OF[c["verdict"]], c["first"]), (text, c, r)


# --------------------------------------------------------------------------- bad flags

SMALL = """
stage engine : step { budget 4; cost 1 + tokens; }
workload { arrive batch(2); init { set t0 = now; set p = 1 + floor(~uniform(0, 4)); } }
session { run engine prefill (p); run engine decode (2); observe response = now - t0; }
claim small: every iteration of engine (tokens <= 4);
run { horizon 1000; }
"""

BAD_PROVE = [
    (["--bound", "p=1"], "--bound"),  # no `..`
    (["--bound", "p=3..1"], "--bound"),  # LO > HI
    (["--bound", "p=a..3"], "--bound"),
    (["--bound", "p=1..3:0"], "--bound"),
    (["--bound", "=1..3"], "--bound"),
    (["--bound", "pp=1..3"], "--bound"),  # no such attribute (did you mean `p`?)
    (["--bound", "t0=1..3"], "--bound"),  # not drawn: `set t0 = now`
    (["--bound", "p=1..5000"], "--bound"),  # more than 4096 values
    (["--bound", "p=0..1e12"], "--bound"),  # a trillion values: counted, not listed
    (["--bound", "p=1..3:1e-9"], "--bound"),
    (["--grid", "0"], "--grid"),
    (["--grid", "-1"], "--grid"),
    (["--grid", "x"], "--grid"),
    (["--grid", "nan"], "--grid"),
    (["--grid", "1/0"], "--grid"),
    (["--instants", "0"], "--instants"),
    (["--sessions", "0"], "--sessions"),
    (["--max-states", "0"], "--max-states"),
    (["--max-paths", "x"], "--max-paths"),
]


def _assert_usage_error(code: int, out: str, err: str, flag: str) -> None:
    assert code == 2, (code, err)
    assert out == ""
    first = err.strip().splitlines()[0]
    assert flag in first, err
    assert "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("flags, flag", BAD_PROVE, ids=[" ".join(f) for f, _ in BAD_PROVE])
def test_a_bad_flag_of_serq_prove_is_a_usage_error_naming_it(flags, flag, tmp_path):
    program = tmp_path / "small.sq"
    program.write_text(SMALL)
    code, out, err = cli_streams("prove", str(program), *flags)
    _assert_usage_error(code, out, err, flag)
    if flags[1] == "pp=1..3":
        assert "did you mean `p`?" in err
    if flags[1] == "p=0..1e12":
        assert "1,000,000,000,001 values, at most 4096" in err


BAD_REPLAY = [
    "[",  # not JSON
    "{}", '"sessions"', "[1]",  # not a list of sessions
    '[{"arrival": 0, "attributes": {"pp": 1}}]',  # an attribute the program does not have
    '[{"arrival": 0, "attributes": {"arrival": 3}}]',  # a built-in one
    '[{"arrival": 5}, {"arrival": 1}]',  # out of order
    '[{"arrival": -1}]', '[{"arrival": NaN}]', '[{"arrival": Infinity}]', '[{"arrival": true}]',
    '[{"arrival": "0"}]', '[{"arrival": 1' + "0" * 400 + "}]",  # past the floats: an OverflowError before
    '[{"arrival": 0, "attributes": {"p": true}}]', '[{"arrival": 0, "attributes": {"p": 1' + "0" * 400 + "}}]",
    '[{"arrival": 0, "attributes": []}]', '[{"arrival": 0, "when": 1}]',
]


@pytest.mark.parametrize("spec", BAD_REPLAY, ids=range(len(BAD_REPLAY)))
def test_a_bad_replay_is_a_usage_error_naming_the_flag(spec, tmp_path):
    program = tmp_path / "small.sq"
    program.write_text(SMALL)
    code, out, err = cli_streams("run", str(program), "--replay", spec)
    _assert_usage_error(code, out, err, "--replay")
    if "pp" in spec:
        assert "did you mean `p`?" in err


def test_a_replay_file_that_cannot_be_read_or_is_not_json_is_a_usage_error(tmp_path):
    program = tmp_path / "small.sq"
    program.write_text(SMALL)
    bad = tmp_path / "bad.json"
    bad.write_text('[{"arrival": 1}')
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    for spec in (str(tmp_path / "missing.json"), str(tmp_path), str(bad), str(binary)):
        code, out, err = cli_streams("run", str(program), "--replay", spec)
        _assert_usage_error(code, out, err, "--replay")


def test_a_counterexample_of_serq_prove_replays_with_its_serials_as_it_prints_it(tmp_path):
    program = tmp_path / "small.sq"
    program.write_text(SMALL.replace("tokens <= 4", "now < 5"))
    code, out, _ = cli_streams("prove", str(program), "--json")
    (c,) = json.loads(out)["claims"]
    assert code == 4 and c["verdict"] == "refuted"
    sessions = json.dumps(c["counterexample"]["sessions"])  # with "serial", as the replay command has it
    code, out, err = cli_streams("run", str(program), "--replay", sessions, "--check-claims")
    assert code == 4 and f"claim small: fails at {c['first']:g}" in err

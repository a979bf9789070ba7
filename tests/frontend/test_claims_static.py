"""The static rules of claims (issue 40; frontend link.py `claims`, resolve.py
`claim_aggregate` and `claim_probe`): each error's text, line and column, the
caret on the token at fault, and the help or note it gives."""

from __future__ import annotations

import pytest
from frontend_util import fails, load, where

from serq.errors import SerqError

# lines 1 to 7; a claim added below is on line 8
PROGRAM = """\
pool kv { cap 100; }
stage engine : step { budget 4; cost 1 + tokens; memory kv; }
stage f : fifo;
stage d : delay;
workload { arrive batch(2); init { set p = 3 + serial; } }
session { hold kv (p) { run engine prefill (p) growing kv; } set q = 1; observe response = now; }
run { horizon 100; }
"""
# a family of two replicas: a claim is on line 6
FAMILY = """\
pool kv[2] { cap 100; }
stage engine[2] : step { budget 4; cost 1 + tokens; memory kv; }
workload { arrive batch(2); }
session { hold kv[serial] (3) { run engine[serial] prefill (3) growing kv[serial]; } observe response = now; }
run { horizon 100; }
"""

NO_DRAW = "claim `c`: a claim may not draw: it states a property of the run, and reading it must not change it"
AT_END_STATE = ("claim `c`: a claim `at end` reads `now`, constants and aggregates of observations, not the state "
                "of pools and stages (every session has ended)")
GIVEN_STATE = "claim `c`: a claim's `given` reads a session's attributes and constants, not the state of pools and stages"
ONLY_AT_END = "claim `c`: `{fn}(…)` aggregates an observation over the whole run: only a claim `at end` reads it"
INDEX = ("claim `c`: index `{i}`: a claim's index is a number in range, not read from the state (one read could "
         "leave the array while the run goes on)")
OLD = "a claim states `every iteration of STAGE (E)`, `some iteration of STAGE (E)` or `at end (E)`"


def case(name: str, claim: str, message: str, line: int, col: int, base: str = PROGRAM):
    return pytest.param(base + claim, message, line, col, id=name)


CASES = [
    case("a claim over iterations may not draw", "claim c: every iteration of engine (~exp(1) > 0);",
         NO_DRAW, 8, 37),
    case("a claim at end may not draw", "claim c: at end (~uniform(0, 1) > 0);",
         NO_DRAW, 8, 18),
    case("a given may not draw", "claim c given (p > ~exp(1)): at end (1);", NO_DRAW, 8, 20),
    case("every iteration of a fifo stage is refused at the stage's name", "claim c: every iteration of f (1);",
         "claim `c`: `every iteration of f`: stage `f` is a `fifo` stage; only a `step` stage iterates", 8, 29),
    case("some iteration of a delay stage is refused at the stage's name", "claim c: some iteration of d (1);",
         "claim `c`: `some iteration of d`: stage `d` is a `delay` stage; only a `step` stage iterates", 8, 28),
    case("an unknown stage", "claim c: every iteration of engin (1);", "claim `c`: unknown stage `engin`", 8, 29),
    case("a given may not read now", "claim c given (p > 0 && now > 0): at end (1);",
         "claim `c`: a claim's `given` may not read `now`: it restricts the workload (each session's attributes "
         "after `init`), not a moment of the run", 8, 25),
    case("an aggregate in an iteration claim", "claim c: every iteration of engine (tokens < total(response));",
         ONLY_AT_END.format(fn="total"), 8, 46),
    case("an aggregate in a given", "claim c given (p > 0 && count(response) > 0): at end (1);",
         ONLY_AT_END.format(fn="count"), 8, 25),
    case("an aggregate of an unknown observation", "claim c: at end (now > 0 && total(respons) > 0);",
         "claim `c`: unknown observation `respons`", 8, 35),
    case("an aggregate of an expression", "claim c: at end (largest(response + 1) > 0);",
         "claim `c`: `largest` takes the name of one observation, as in `largest(response)`", 8, 18),
    case("an iteration claim reading a session attribute", "claim c: every iteration of engine (tokens > p);",
         "claim `c`: `p` is a session attribute, but a claim over iterations, read as an iteration starts, "
         "has no session", 8, 46),
    case("a claim at end reading a session attribute", "claim c: at end (p > 0);",
         "claim `c`: `p` is a session attribute, but a claim `at end`, read when the last session has ended, "
         "has no session", 8, 18),
    case("a claim at end reading used(kv) is refused at the call", "claim c: at end (now > 0 && used(kv) == 0);",
         AT_END_STATE, 8, 29),
    case("a claim at end reading an iteration variable", "claim c: at end (demand > 0);",
         "claim `c`: `demand` is read in a claim `at end`, read when the last session has ended, but it exists "
         "only in a claim over iterations, read as an iteration starts", 8, 18),
    case("a given reading a stage is refused at the call", "claim c given (p > 0 && queue(f) == 0): at end (1);",
         GIVEN_STATE, 8, 25),
    case("a given reading an attribute the session sets after init", "claim c given (p > 0 && q > 0): at end (1);",
         "claim `c`: `q` is not set by `init`, and a claim's `given` reads each session's attributes right after "
         "`init`", 8, 25),
    case("an iteration claim reading cachedin", "claim c: every iteration of engine (cachedin(kv) == 0);",
         "claim `c`: `cachedin` reads a session's own cache, but a claim over iterations has no session", 8, 37),
    case("an iteration claim reading budget_left", "claim c: some iteration of engine (budget_left(engine) > 0);",
         "claim `c`: a claim may not read `budget_left(…)`: it plans the stage's next iteration, whose `budget` "
         "and `chunk` may draw, and a claim reads the run without changing it", 8, 36),
    case("a duplicate claim name is refused at the second", "claim c: at end (1);\nclaim c: every iteration of engine (1);",
         "`claim c` is declared twice", 9, 7),
    case("the old form without a quantifier", "claim c : response < 1;", OLD, 8, 11),
    case("every without iteration of", "claim c: every (1);", OLD, 8, 10),
    case("a stage index that is not constant", "claim c: every iteration of engine[arrived] (1);",
         INDEX.format(i="arrived"), 6, 36, FAMILY),
    case("a pool index that is not constant", "claim c: every iteration of engine[0] (used(kv[arrived - 2]) >= 0);",
         INDEX.format(i="arrived - 2"), 6, 48, FAMILY),
    case("a member of a family out of range", "claim c: every iteration of engine[2] (1);",
         "claim `c`: index `2` is 2: a member of an array of 2 is 0 to 1", 6, 36, FAMILY),
    case("a stage family without its index", "claim c: every iteration of engine (1);",
         "claim `c`: stage `engine` is an array; index it", 6, 29, FAMILY),
]


def check(text: str, message: str, line: int, col: int) -> SerqError:
    err = fails(text)
    assert err.message == message
    assert where(err) == (line, col), err.render()
    return err


@pytest.mark.parametrize("text, message, line, col", CASES)
def test_a_claim_breaking_a_static_rule_is_refused_where_it_breaks_it(text, message, line, col):
    check(text, message, line, col)


def _caret(err: SerqError) -> str:
    """The source text the rendered error's carets sit under."""
    lines = err.render().splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.lstrip().startswith("^") or "| " in ln and "^" in ln)
    src, marks = lines[i - 1].split("| ", 1)[1], lines[i].split("| ", 1)[1]
    start = marks.index("^")
    return src[start:start + marks.count("^")]


def test_the_caret_sits_under_the_token_at_fault() -> None:
    assert _caret(fails(PROGRAM + "claim c: at end (now > 0 && used(kv) == 0);")) == "used"
    assert _caret(fails(PROGRAM + "claim c: every iteration of f (1);")) == "f"
    assert _caret(fails(PROGRAM + "claim c given (p > 0 && q > 0): at end (1);")) == "q"
    assert _caret(fails(PROGRAM + "claim c: every iteration of engine (tokens < total(response));")) == "total"
    assert _caret(fails(PROGRAM + "claim c: at end (now > 0 && total(respons) > 0);")) == "respons"
    assert _caret(fails(FAMILY + "claim c: every iteration of engine[arrived] (1);")) == "arrived"
    assert _caret(fails(PROGRAM + "claim c: at end (1);\nclaim c: at end (2);")) == "c"


def test_a_misspelt_stage_or_observation_gets_a_did_you_mean() -> None:
    err = fails(PROGRAM + "claim c: every iteration of engin (1);")
    assert "did you mean stage `engine`?" in err.render()
    err = fails(PROGRAM + "claim c: at end (prefix_total(respons) > 0);")
    assert "did you mean observation `response`?" in err.render()


def test_a_stage_that_does_not_iterate_is_refused_naming_the_step_stages() -> None:
    assert "help: name a step stage: engine" in fails(PROGRAM + "claim c: every iteration of f (1);").render()


def test_a_duplicate_claim_names_the_first() -> None:
    err = fails(PROGRAM + "claim c: at end (1);\nclaim c: at end (2);")
    assert "note: the first is at 8:7" in err.render()


def test_the_old_form_says_what_a_claim_states() -> None:
    assert "as in `claim fills: every iteration of engine" in fails(PROGRAM + "claim c : response < 1;").render()


def test_the_rules_allow_what_each_moment_reads() -> None:
    # iteration: the cost's variables, demand, served, arrived, now, pools and stages by constant index, estimates;
    # at end: now, constants and aggregates; given: attributes init sets, serial and constants
    program = load(PROGRAM + """\
let K = 2;
claim a: every iteration of engine (tokens + prefilled + decoders + residents + kv_decode + kv_prefill
  + attention + demand + served + arrived + now + used(kv) + free(kv) + queue(engine) + busy(f)
  + work(d) + est_wait(f) >= 0);
claim b given (p >= 3 && serial < K): some iteration of engine (tokens == 4);
claim e: at end (now + K + total(response) + count(response) + largest(response) + smallest(response)
  + prefix_total(response) > 0);
""")
    assert [(c.name, c.kind, c.given is not None) for c in program.claims] == [
        ("a", "every", False), ("b", "some", True), ("e", "end", False)]
    family = load(FAMILY + "let k = 1;\nclaim m: every iteration of engine[k] (used(kv[1 - k]) >= 0);")
    stage = family.claims[0].stage
    assert stage is not None and stage.index.value == 1  # type: ignore[union-attr]


def test_the_words_of_a_claim_are_still_names_elsewhere() -> None:
    # `claim`, `given`, `every`, `some`, `iteration`, `of` and the aggregates' names are
    # keywords only where a claim is written: a program may still name attributes so
    program = load(PROGRAM.replace("set q = 1;", "set every = 1; set some = 2; set iteration = 3; set of = 4; "
                                   "set given = 5; set claim = 6; set total = 7; set count = 8;"))
    assert {"every", "some", "iteration", "of", "given", "claim", "total", "count"} <= set(program.attributes)
    assert program.claims == ()

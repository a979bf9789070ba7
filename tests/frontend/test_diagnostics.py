"""Every diagnostic of language §7 (and decisions.md §4): its text, line and column.

Each case is a tiny program, the expected message (exact unless it ends with
`…`, then a prefix), and where the caret goes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from frontend_util import fails, where

from serq.errors import SerqError

ENGINE = "pool kv { cap 100; block 4; }\nstage e : step { cost 1; memory kv; }\nstage d : delay;\n"


def case(name: str, text: str, message: str, line: int, col: int):
    return pytest.param(text, message, line, col, id=name)


def check(text: str, message: str, line: int, col: int) -> SerqError:
    err = fails(text)
    if message.endswith("…"):
        assert err.message.startswith(message[:-1]), err.message
    else:
        assert err.message == message
    assert where(err) == (line, col), err.render()
    return err


# ---------------------------------------------------------------- lexical (§1)
LEXICAL = [
    case("an unterminated block comment is reported at its start", "let a = 1;\n  /* no end\n", "unterminated block comment", 2, 3),
    case("an unterminated string is reported at its quote", 'use "lib.sq;\n', "unterminated string", 1, 5),
    case("a number with two dots is a bad number", "let a = 1.2.3;", "bad number `1.2.3`", 1, 9),
    case("a character outside the language is unexpected", "let a = 1 % 2;", "unexpected character `%`", 1, 11),
    case("a control character is named by its code point", "let a\x01 = 1;", "unexpected character U+0001", 1, 6),
    case("brackets nested more than forty deep are refused", "let a = " + "(" * 41 + "1" + ")" * 41 + ";",
         "the program is nested too deeply", 1, 49),
]


@pytest.mark.parametrize("text, message, line, col", LEXICAL)
def test_lexical_errors(text, message, line, col):
    check(text, message, line, col)


# ---------------------------------------------------------------- parse (§7.2)
PARSE = [
    case("a missing semicolon is expected", "let a = 1 2;", "expected `;`, found `2`", 1, 11),
    case("a missing semicolon at the end of input", "let a = 1", "expected `;`, found end of input", 1, 10),
    case("an expression is expected after =", "let a = ;", "expected an expression, found `;`", 1, 9),
    case("an identifier is expected after let", "let 3 = 1;", "expected identifier, found `3`", 1, 5),
    case("a string is expected after use", "use lib;", "expected string, found `lib`", 1, 5),
    case("a keyword is expected where the grammar needs it", "pool kv { admit engine; }", "expected `via` after `admit`, found `engine`", 1, 17),
    case("an unknown word at top level is unexpected", "let a = 1;\nfoo bar;", "unexpected `foo` at top level", 2, 1),
    case("a number at top level is unexpected", "42;", "unexpected `42` at top level", 1, 1),
    case("a second workload is a duplicate", "workload { }\nworkload { }", "duplicate workload", 2, 1),
    case("a second server is a duplicate", "server { }\nserver { }", "duplicate server", 2, 1),
    case("a second top-level session is a duplicate", "session { }\nsession { }", "duplicate session", 2, 1),
    case("an unknown workload clause is unexpected", "workload {\n  arive poisson(1);\n}", "unexpected `arive` in workload", 2, 3),
    case("a second session in one workload is a duplicate",
         "workload { session { request; } session { request; } }\nserver { }", "duplicate session in workload", 1, 33),
    case("an unknown pool option is named", "pool kv { size 4; }", "unknown pool option `size`", 1, 11),
    case("an unknown step option is named", "stage e : step { cost 1; batch 4; }", "unknown step option `batch`", 1, 26),
    case("an unknown run option is named", "run { horizon 10; duration 5; }", "unknown run option `duration`", 1, 19),
    case("an unknown stage kind is named", "stage s : queue;", "unknown stage kind `queue`", 1, 11),
    case("an array size must be a positive integer", "pool kv[2.5] { }", "array size must be a positive integer, found `2.5`", 1, 9),
    case("a step stage needs cost", "stage e : step { budget 8; }", "stage `e`: a step stage needs `cost`", 1, 7),
    case("a step stage serves in one way",
         "stage e : step { cost 1; serve admission; serve decode first; }",
         "a step stage serves its residents in one way: `serve` is given twice", 1, 43),
    case("the old exclusive prefill is refused", "stage e : step { cost 1; exclusive prefill; }", "write `serve exclusive prefill;`", 1, 26),
    case("the old decode first is refused", "stage e : step { cost 1; decode first; }", "write `serve decode first;`", 1, 26),
    case("evict takes lru or by", "pool kv { evict fifo; }", "expected `lru` or `by` after `evict`, found `fifo`", 1, 17),
    case("preempt takes lifo or none", "pool kv { preempt all; }", "expected `lifo` or `none` after `preempt`, found `all`", 1, 19),
    case("queue takes fifo or by", "pool kv { queue lru; }", "expected `fifo` or `by` after `queue`, found `lru`", 1, 17),
    case("serve takes a known order", "stage e : step { cost 1; serve fifo; }",
         "expected `admission`, `decode first`, `exclusive prefill`, `exclusive prefills`, `by (keys)` or `only (P)` after `serve`, found `fifo`", 1, 32),
    case("at must be followed by admission", "pool kv { cap 9; }\nsession { hold kv (1) at entry (x = 1) { } }",
         "expected `admission` after `at`, found `entry`", 2, 26),
    case("an unknown statement is named", "session { wait 3; }", "unknown statement `wait`", 1, 11),
    case("a token that cannot start a statement", "session { 3; }", "expected a statement, found `3`", 1, 11),
    case("comparisons do not chain", "let a = 1 < 2 < 3;", "comparisons do not chain", 1, 15),
    case("an unmatched closing bracket", "let a = (1 + 2));", "unmatched `)`", 1, 16),
    case("an unclosed bracket at the end of input", "session {\n  turn;\n",
         "expected a statement, found end of input", 2, 8),
    case("an arrival must be a known process", "workload { arrive uniform(1); }",
         "expected an arrival process (`poisson(rate)`, `renewal(gap)`, `closed(n)`, `batch(n)`, `trace` or `none`), "
         "found `uniform`", 1, 19),
]


@pytest.mark.parametrize("text, message, line, col", PARSE)
def test_parse_errors(text, message, line, col):
    check(text, message, line, col)


RETIRED = [
    case("enter is now hold", "session { enter kv (1) { } }", "`enter` is now `hold`", 1, 11),
    case("keep is now cache", "pool kv { cap 1; }\nsession { hold kv (1) { } keep (1); }", "`keep` is now `cache`", 2, 27),
    case("where is now at admission", "pool kv { cap 1; }\nsession { hold kv (x) where x = 1 { } }",
         "`where x = e` is now `at admission (x = e)`", 2, 23),
    case("fits is now reserve", "pool kv { cap 1; }\nsession { hold kv (1) fits (2) { } }", "`fits` is now `reserve`", 2, 23),
    case("fit is gone", "session { fit; }", "`fit` is gone: the pools of a `hold` are the condition", 1, 11),
    case("admit as a statement is now a hold", "session { admit if x; }", "`admit if … fit where x = e { … } keep (ℓ)` is now …", 1, 11),
    case("a retired word names nothing", "let keep = 1;",
         "`keep` is a retired word and names nothing: `keep` is now `cache`", 1, 5),
]


@pytest.mark.parametrize("text, message, line, col", RETIRED)
def test_retired_words_say_what_to_write_now(text, message, line, col):
    check(text, message, line, col)


def test_a_retired_word_as_a_declared_name_names_nothing():
    err = fails("pool where { cap 1; }")
    assert err.message == "`where` is a retired word and names nothing: `where x = e` is now `at admission (x = e)`"
    assert where(err) == (1, 6)
    err = fails("session { set fit = 1; }")
    assert err.message == "`fit` is a retired word and names nothing: `fit` is gone: the pools of a `hold` are the condition"


# ---------------------------------------------------------------- sides and the two-sided assembly (§2.7, §5.1)
SIDES = [
    case("turn is the session's", "server { turn; }\nworkload { session { request; } }", "`turn` is the session's, not the server's", 1, 10),
    case("end is the session's", "server { end; }\nworkload { session { request; } }",
         "`end` is the session's; a server is done when its block is", 1, 10),
    case("a server does not request itself", "server { request; }\nworkload { session { request; } }",
         "a server does not request itself", 1, 10),
    case("request belongs to the workload session", "session { request; }",
         "`request` is a statement of the `session` inside `workload`", 1, 11),
    case("init may only set and observe", "stage d : delay;\nworkload { init { run d (1); } }",
         "init: workload blocks may only `set` and `observe`", 2, 19),
    case("turn blocks may only set and observe", "workload { turn { turn; } }",
         "turn: workload blocks may only `set` and `observe`", 1, 19),
    case("a workload session needs a server", "workload { session { request; } }",
         "a `session` inside `workload` is written against a `server` block; without one, write `session` at top level", 1, 12),
    case("a server needs a workload session", "server { }", "`server` needs a `session` inside `workload` that says `request;`", 1, 1),
    case("one session only", "server { }\nworkload { session { request; } }\nsession { }",
         "a program has one session, inside `workload` with a `server` or at top level, not both", 3, 1),
    case("a server that is never requested", "server { }\nworkload { session { turn; } }", "`server` is never requested", 1, 1),
]


@pytest.mark.parametrize("text, message, line, col", SIDES)
def test_side_rules(text, message, line, col):
    check(text, message, line, col)


# ---------------------------------------------------------------- serving forms (§5.6)
SERVING = [
    case("a tool needs a tool stage above", "session { tool 3; }\nstage tool : delay;", "no stage declared above plays `tool`", 1, 11),
    case("several step stages make prefill ambiguous", "stage a : step { cost 1; }\nstage b : step { cost 1; }\nsession { prefill 3; }",
         "several stages play `prefill` (a, b): write `prefill on STAGE (...)`", 3, 11),
    case("on names a stage declared above", "stage engine : step { cost 1; }\nsession { prefill on engin 3; }",
         "`prefill on engin`: no stage `engin` is declared above", 2, 22),
    case("tool on a step stage has no mode", "stage e : step { cost 1; }\nsession { tool on e 3; }",
         "session: `prefill`/`decode` are required on a step stage and not allowed elsewhere", 2, 11),
]


@pytest.mark.parametrize("text, message, line, col", SERVING)
def test_serving_form_errors(text, message, line, col):
    check(text, message, line, col)


def test_a_misspelt_stage_after_on_gets_a_did_you_mean():
    err = fails("stage engine : step { cost 1; }\nsession { prefill on engin 3; }")
    assert err.helps == ["did you mean stage `engine`?"] and err.notes == ["`engine` declared at 1:7"]


# ---------------------------------------------------------------- link (§7.3)
LINK = [
    case("an unknown name", "session { set x = 1;\n  set y = z + 1; }", "session: unknown name `z`", 2, 11),
    case("an unknown pool", ENGINE + "session { hold kz (1) { } }", "session: unknown pool `kz`", 4, 16),
    case("an unknown stage", ENGINE + "session { run dd (1); }", "session: unknown stage `dd`", 4, 15),
    case("an unknown function", "session { set x = sqr(2); }", "session: unknown function `sqr`", 1, 19),
    case("a function's arity", "session { set x = max(1, 2, 3); }", "session: `max` takes 2 argument(s), got 3", 1, 19),
    case("an unknown distribution", "session { set x = ~normal(1); }", "session: unknown distribution `normal`", 1, 20),
    case("a distribution's arity", "session { set x = ~uniform(1); }", "session: `~uniform` takes 2 argument(s)", 1, 20),
    case("a probe needs a pool", ENGINE + "session { set x = used(d); }", "session: `used` expects a pool name here", 4, 24),
    case("a probe needs a stage", ENGINE + "session { set x = busy(kv); }", "session: `busy` expects a stage name here", 4, 24),
    case("a duplicate pool", "pool kv { }\npool kv { }", "duplicate pool `kv`", 2, 6),
    case("a duplicate stage", "stage s : delay;\nstage s : fifo;", "duplicate stage `s`", 2, 7),
    case("a let that is also an attribute", "let K = 1;\nsession { set K = 2; }", "`K` is both a `let` constant and a session attribute", 1, 5),
    case("an array used without an index", "pool kv[2] { }\nsession { hold kv (1) { } }", "session: pool `kv` is an array; index it", 2, 16),
    case("a constant index out of range", "stage s[2] : delay;\nsession { run s[2] (1); }",
         "session: index `2` is 2: a member of an array of 2 is 0 to 1", 2, 17),
    case("families pair one for one or one for all", "pool kv[3] { }\nstage e[2] : step { cost 1; memory kv; }",
         "stage `e`: `memory kv` names a family of 3, and `e` is a family of 2: it must be one for one, or one for all", 2, 36),
    case("admit via needs a step stage", "stage d : delay;\npool r { admit via d; }",
         "pool `r`: `admit via d` needs a step stage; `d` is a delay stage", 2, 20),
    case("a cap that is NaN", "pool kv { cap 0 / 0; }", "pool `kv`: cap is NaN", 1, 15),
    case("a poisson rate that is NaN", "workload { arrive poisson(inf - inf); }", "the poisson rate is NaN", 1, 27),
    case("a closed population that is not whole", "workload { arrive closed(2.5); }",
         "the closed population must be a positive integer, found 2.5", 1, 26),
    case("a batch size that is not positive", "workload { arrive batch(0); }", "the batch size must be a positive integer, found 0", 1, 25),
    case("a horizon that is NaN", "run { horizon 0 / 0; }", "the horizon is NaN", 1, 15),
    case("a warmup that is NaN", "run { horizon 9; warmup 0 / 0; }", "the warmup is NaN", 1, 25),
    case("a seed that is NaN", "run { seed 0 / 0; }", "the seed is NaN", 1, 12),
    case("arrivals that are NaN", "run { arrivals 0 / 0; }", "arrivals is NaN", 1, 16),
    case("a block must be positive", "pool kv { block 0; }", "pool `kv`: block must be positive", 1, 17),
    # a subnormal block has an infinite reciprocal: its block rounding overflowed (issue 38)
    # an eviction takes a block at a time: 6.4e11 of them drained inside one event (issue 38)
    case("a pool of too many blocks", "pool kv { cap 640; block 1e-9; }",
         "pool `kv`: cap 640 in blocks of 1e-09 is 6.4e+11 blocks: at most 16,777,216", 1, 26),
    case("a block must be a normal number", "let bs = 1e-320;\npool kv { block bs; }",
         "pool `kv`: block `bs` = 1e-320 is below the smallest normal number (2.2e-308): amounts cannot be counted "
         "in such blocks", 2, 17),
    case("fifo servers must be a positive integer", "stage svc : fifo(0);", "stage `svc`: fifo servers must be a positive integer, found 0", 1, 18),
    case("a step stage requires a mode", ENGINE + "session { run e (1); }",
         "session: `prefill`/`decode` are required on a step stage and not allowed elsewhere", 4, 11),
    case("a plain stage refuses a mode", ENGINE + "session { run d decode (1); }",
         "session: `prefill`/`decode` are required on a step stage and not allowed elsewhere", 4, 11),
    case("growing needs a step stage", ENGINE + "session { hold kv (1) { run d (1) growing kv; } }", "session: `growing` needs a step stage", 4, 43),
    case("release outside a hold", ENGINE + "session { release kv; }", "session: `release kv` outside a hold of `kv`", 4, 19),
    case("release of another member", "pool kv[2] { }\nsession { hold kv[0] (1) { release kv[1]; } }",
         "session: `release kv[1]` outside a hold of `kv[1]`", 2, 36),
    case("a renamed context variable", "session { set x = ntok; }", "session: the context variable `ntok` is now `tokens`", 1, 19),
    case("a pool is not a value", ENGINE + "session { set x = kv + 1; }", "session: pool `kv` is not a value", 4, 19),
    case("a let reading a later let", "let a = b;\nlet b = 1;", "`b` is not a constant", 1, 9),
    case("a let that samples", "let a = ~exp(1);", "`let a`: a constant cannot sample", 1, 9),
    case("a let that is NaN", "let a = 0 / 0;", "`let a` is NaN", 1, 9),
    case("a let that reads blocksize", ENGINE + "let b = blocksize(kv);", "`blocksize` is not a constant", 4, 9),
    case("a let that reads live state", ENGINE + "let b = used(kv);", "`used` with 1 argument(s) is not a constant function", 4, 9),
    case("a let that reads an attribute", "let a = serial;", "`serial` is not a constant", 1, 9),
    case("a cap that samples", "pool kv { cap ~exp(9); }", "pool `kv`: a constant cannot sample", 1, 15),
    case("blocksize of a pool without block", "pool kv { }\nsession { set b = blocksize(kv); }",
         "session: `blocksize(kv)`: pool `kv` has no `block`", 2, 29),
    case("blocksize takes one pool", ENGINE + "session { set b = blocksize(kv, kv); }",
         "session: `blocksize` takes one pool, got 2 argument(s)", 4, 19),
    case("blocksize takes a pool, not an expression", ENGINE + "session { set b = blocksize(2 * 8); }",
         "session: `blocksize` takes a pool, not an expression", 4, 29),
    case("a blocksize index may not draw", "pool kv[2] { block 4; }\nsession { set b = blocksize(kv[~bernoulli(0.5)]); }",
         "session: `blocksize(kv[~bernoulli(0.5)])`: the index draws a sample, and the folded number would drop the draw", 2, 29),
    case("a constant hold above the cap", "pool kv { cap 10; block 4; }\nsession { hold kv (9) { } }",
         "session: `hold kv (9)` waits for 9 units (12 in blocks of 4), more than its cap 10", 2, 20),
    case("a constant reserve above the cap", "pool kv { cap 10; }\nsession { hold kv (1) reserve (11) { } }",
         "session: `hold kv (1)` waits for 11 units, more than its cap 10", 2, 20),
    case("a pool named twice in one hold", "pool kv { cap 10; }\nsession { hold kv (1), kv (2) { } }",
         "session: this `hold` names pool `kv` twice", 2, 24),
    case("a constant negative amount", ENGINE + "session { run d (1 - 6); }",
         "session: `run d (1 - 6)`: the amount is -5, not a number of units, tokens or seconds", 4, 18),
    case("reuse without cache", ENGINE + "session { hold kv (4) reuse (4) { } }",
         "session: `reuse` needs a `cache` clause: a hold without `cache` consumes none of the session's cached prefix", 4, 30),
]


@pytest.mark.parametrize("text, message, line, col", LINK)
def test_link_errors(text, message, line, col):
    check(text, message, line, col)


def test_an_unknown_pool_suggests_the_nearest_with_where_it_is_declared():
    err = fails(ENGINE + "session { hold kz (1) { } }")
    assert err.helps == ["did you mean pool `kv`?"] and err.notes == ["`kv` declared at 1:6"]


def test_an_unknown_name_suggests_a_let_or_an_attribute():
    err = fails("let alpha = 1;\nsession { set beta = 2; set x = alpah + bta; }")
    assert err.helps == ["did you mean `alpha`?"] and err.notes == ["`alpha` declared at 1:5"]
    err = fails("session { set prompt = 2; set x = promt; }")
    assert err.helps == ["did you mean `prompt`?"]


def test_a_suggestion_must_be_unique_and_close():
    # `ab` is 1 away from both `aa` and `bb`: no suggestion, the general help
    err = fails("let aa = 1; let bb = 2; session { set x = ab; }")
    assert err.helps == ["declare a `let` constant, or assign a session attribute with `set` before using it"]
    # a 3-letter name may be 1 edit away, not 2
    assert fails("let abc = 1; session { set x = axy; }").notes == []


def test_an_unknown_set_constant_lists_the_available_ones():
    err = fails("let lam = 1;\nlet mu = 2;", sets=[("Lam", "3")])
    assert err.message == "unknown --set constant `Lam`" and err.span is None
    assert err.helps == ["did you mean `lam`?", "`--set` overrides a declared `let`; available constants: `lam`, `mu`"]
    err = fails("session { }", sets=[("x", "1")])
    assert err.helps == ["`--set` overrides a declared `let`; available constants: (none)"]


def test_errors_inside_a_set_expression_are_prefixed_and_have_no_location():
    err = fails("let a = 1;\nlet b = 2;", sets=[("b", "c + 1")])
    assert err.message == "--set b: `c` is not a constant" and err.span is None
    err = fails("let a = 1;", sets=[("a", "~exp(1)")])
    assert err.message == "--set a: `let a`: a constant cannot sample"
    err = fails("let a = 1;", sets=[("a", "1 +")])
    assert err.message == "--set a: invalid expression in set `a = 1 +`: expected an expression, found end of input"


@pytest.mark.parametrize("value", ["random", "c + 1", "1 +", "~exp(1)"])
def test_a_set_value_that_is_not_a_constant_is_a_command_line_error(value: str, tmp_path) -> None:
    # README's exit codes: a malformed --set value is a bad command line, exit 2 (issue 38: it was 1)
    from frontend_util import cli_main

    program = tmp_path / "p.sq"
    program.write_text("let a = 1;\nsession { }\n")
    code, printed = cli_main("check", str(program), "--set", f"a={value}")
    assert code == 2 and printed.startswith("error: --set a: "), printed


# ---------------------------------------------------------------- validation: moments, draws, hidden (§7.4, §7.5)
VALIDATE = [
    case("a context variable outside its moment", "session { set x = tokens; }",
         "session: `tokens` is read in a session statement, a run or a hold's cache, but it exists only in a step stage's cost, after the iteration", 1, 19),
    case("waited exists only in queue keys", "stage s : ps(waited);",
         "stage `s`: `waited` is read in a ps stage's capacity, but it exists only in a pool's queue keys, read before selecting a waiting session", 1, 14),
    case("a queue key may not draw", "pool kv { queue by (~exp(1)); }", "pool `kv`: a queue key may not draw; sample into an attribute first", 1, 21),
    case("a serve key may not draw", "stage e : step { cost 1; serve by (~exp(1)); }",
         "stage `e`: a serve key may not draw: it is read for every resident at every iteration", 1, 36),
    case("a hold header may not draw", "pool kv { }\nsession { hold kv (1 + ~exp(1)) { } }",
         "session: a hold's header may not draw: it is read again at every admission attempt; sample into an attribute with `set` first", 2, 24),
    case("a renewal gap may use only constants and draws", "workload { arrive renewal(~exp(1) * serial); }",
         "workload: renewal arrival may use only constants and sampled distributions", 1, 37),
    case("arrivals must be positive", "workload { arrive poisson(1); }\nrun { horizon 9; arrivals 0; }",
         "run: arrivals must be a positive whole number, found 0", 2, 27),
    case("arrivals must be whole", "workload { arrive poisson(1); }\nrun { horizon 9; arrivals 1.5; }",
         "run: arrivals must be a positive whole number, found 1.5", 2, 27),
    case("the seed must be whole", "run { horizon 9; seed 1.9; }", "the seed must be an unsigned integer, found 1.9", 1, 23),
    case("arrivals need an open workload", "workload { arrive closed(2); }\nrun { horizon 9; arrivals 5; }",
         "run: arrivals applies only to poisson, renewal or trace workloads", 2, 27),
    case("the warmup is below the horizon", "run { horizon 10; warmup 10; }", "warmup must be below the horizon", 1, 26),
    case("the warmup is not negative", "run { horizon 10; warmup -1; }", "run: need 0 <= warmup < horizon", 1, 26),
    case("the horizon is finite", "run { horizon inf; }", "the horizon must be finite and positive", 1, 15),
    case("a cost reads no session attribute", "stage e : step { cost x; }\nsession { set x = 1; }",
         "stage `e`: `x` is a session attribute, but a step stage's cost, after the iteration, has no session", 1, 23),
    case("a budget reads no session attribute", "stage e : step { cost 1; budget x; }\nsession { set x = 1; }",
         "stage `e`: `x` is a session attribute, but a step stage's budget or chunk, planned before the iteration, has no session", 1, 33),
    case("a ps capacity reads no session attribute", "stage s : ps(x);\nsession { set x = 1; }",
         "stage `s`: `x` is a session attribute, but a ps stage's capacity, has no session", 1, 14),
]


@pytest.mark.parametrize("text, message, line, col", VALIDATE)
def test_validation_errors(text, message, line, col):
    check(text, message, line, col)


HIDDEN = [
    case("a hidden name must be an attribute", "workload { hidden o; }", "hidden `o`: no `set` or `choose` makes it a session attribute", 1, 19),
    case("cached cannot be hidden", "workload { hidden cached; }",
         "`cached` cannot be hidden: the scheduler sets it, so it cannot be hidden from the scheduler", 1, 19),
    case("a hidden name given twice", "workload { hidden o, o; turn { set o = 1; } }", "hidden `o` twice", 1, 22),
    case("hidden in a hold header", "pool kv { }\nworkload { hidden o; turn { set o = 1; } }\nsession { turn; hold kv (o) { } }",
         "session: `o` is hidden from the scheduler, but is read in a hold's header, read at admission", 3, 26),
    case("hidden in a queue key", "pool kv { queue by (o); }\nworkload { hidden o; turn { set o = 1; } }",
         "pool `kv`: `o` is hidden from the scheduler, but is read in a pool's queue keys, read before selecting a waiting session", 1, 21),
    case("hidden in an eviction key", "pool kv { evict by (o); }\nworkload { hidden o; turn { set o = 1; } }",
         "pool `kv`: `o` is hidden from the scheduler, but is read in an eviction key or spill clause", 1, 21),
    case("hidden in serve keys", "stage e : step { cost 1; serve by (o); }\nworkload { hidden o; turn { set o = 1; } }",
         "stage `e`: `o` is hidden from the scheduler, but is read in a step stage's serve keys or `serve only`", 1, 36),
    case("hidden through a substituted binding", "pool kv { }\nworkload { hidden o; turn { set o = 1; } }\n"
         "session { turn; hold kv (1) reserve (need) at admission (need = 2 + o) { } }",
         "session: `o` is hidden from the scheduler, but is read in a hold's header, read at admission", 3, 69),
]


@pytest.mark.parametrize("text, message, line, col", HIDDEN)
def test_hidden_attributes(text, message, line, col):
    check(text, message, line, col)


def test_a_hidden_attribute_may_be_read_by_session_statements_runs_and_cache():
    from frontend_util import load

    load(ENGINE + "workload { hidden o; turn { set o = 5; } }\n"
                  "session { turn; set k = o + 1; hold kv (1) { decode on e (o - 1) growing kv; } cache (o); }")


# ---------------------------------------------------------------- decisions §4
DECISIONS = [
    case("a let named like a context variable", "let tokens = 1;", "`tokens` is a context variable; a `let` may not take its name", 1, 5),
    case("an attribute named like a context variable", "session { set now = 1; }",
         "`now` is a context variable; a session attribute may not take its name", 1, 15),
    case("a let named inf", "let inf = 1;", "`inf` is a name the language supplies; a `let` may not take it", 1, 5),
    case("a repeated arrive", "workload { arrive none; arrive poisson(1); }", "`arrive` is given twice in the workload", 1, 25),
    case("a repeated trace", 'workload { trace "a.csv"; trace "b.csv"; }', "`trace` is given twice in the workload", 1, 27),
    case("a repeated init", "workload { init { }\n init { } }", "`init` is given twice in the workload", 2, 2),
    case("a repeated turn", "workload { turn { } turn { } }", "`turn` is given twice in the workload", 1, 21),
    case("a repeated pool clause", "pool kv { cap 1; cap 2; }", "`cap` is given twice in pool `kv`", 1, 18),
    case("a repeated step clause", "stage e : step { cost 1; cost 2; }", "`cost` is given twice in stage `e`", 1, 26),
    case("a let declared twice", "let a = 1;\nlet a = 2;", "`let a` is declared twice", 2, 5),
]


@pytest.mark.parametrize("text, message, line, col", DECISIONS)
def test_decisions_refusals(text, message, line, col):
    check(text, message, line, col)


# ---------------------------------------------------------------- lints (§7.6)
def test_a_set_from_live_state_read_by_a_later_hold_header_is_stale():
    err = check(ENGINE + "session { set h = cachedin(kv);\n  hold kv (h + 1) { } }",
                "session: `h` is set from `cachedin(kv)` when the session reaches the `set`, but the header of the hold "
                "on `kv` reads it at admission, when that state may have changed", 5, 3)
    assert err.helps == ["bind it in the hold instead: `at admission (h = …)`"]
    assert err.notes == ["`h` is set at 4:11"]


def test_a_stale_read_is_cleared_by_a_later_plain_set():
    from frontend_util import load

    load(ENGINE + "session { set h = cachedin(kv); set h = 2; hold kv (h) { } }")


def test_a_stale_read_reaches_into_nested_blocks():
    check(ENGINE + "session { set h = used(kv); loop { branch (1) { hold kv (h) { } } } }",
          "session: `h` is set from `used(kv)` when the session reaches the `set`, but the header of the hold on `kv` "
          "reads it at admission, when that state may have changed", 4, 49)


def test_a_constant_guard_between_0_and_1_is_a_probability():
    err = check("let q = 0.3;\nsession { branch (q) { } }",
                "session: `branch (q)`: the guard is the constant 0.3, which is not a test: a constant strictly between "
                "0 and 1 is a probability", 2, 11)
    assert err.helps == ["write `branch with (0.3)` to draw it"]


def test_a_constant_guard_other_than_0_or_1_is_not_a_guard():
    check("session { branch (2) { } }", "session: `branch (2)`: a guard is 0 or 1, and this one is always 2", 1, 11)


# ---------------------------------------------------------------- refused features
REFUSED = [
    case("fn main", "fn main() { }", "`fn` (an explicit entry point) is not supported in this version", 1, 1),
    case("claims", "claim c : response < 1;", "a claim states `every iteration of STAGE (E)`, `some iteration of "
         "STAGE (E)` or `at end (E)`", 1, 11),
    case("devices", "device gpu { }", "`device` is not supported in this version", 1, 1),
    case("engines on devices", "engine vllm on gpu { }", "`engine … on` declarations is not supported in this version", 1, 1),
    case("while", "session { while (1) { } }", "`while` is not supported in this version", 1, 11),
]


# the offload tier and the online estimates (docs/offload.md): once refused, now checked
OFFLOAD = [
    case("spill", "pool kv { spill t via l (size) when (1); }", "pool `kv`: unknown pool `t`", 1, 17),
    case("spill to itself", "stage l : fifo;\npool kv { spill kv via l (1) when (1); }",
         "pool `kv`: `spill kv`: a pool spills to another pool, its tier", 2, 17),
    case("spill over a step stage", "pool h { } stage e : step { cost 1; }\npool kv { spill h via e (1) when (1); }",
         "pool `kv`: `spill … via e`: a spill's link runs a job with no session, and step stage `e` serves "
         "sessions' requests", 2, 23),
    case("spill cycle", "stage l : fifo;\npool kv { spill h via l (1) when (1); }\npool h { spill kv via l (1) when (1); }",
         "pool `kv`: spills go down tiers, and `kv` → `h` → `kv` comes back: each eviction would spill for ever", 2, 11),
    case("spill families", "stage l : fifo; pool h[3] { }\npool kv[2] { spill h via l (1) when (1); }",
         "pool `kv`: `spill h` names a family of 3, and `kv` is a family of 2: a spill's tier and link are one per "
         "member of the pool, or one for all of them", 2, 20),
    # a tier and a link of other sizes than one pool's: no member of the tier or link would be used but the first
    case("one pool spills to a family", "stage d2h[3] : fifo; pool host[2] { }\npool kv { spill host via d2h (1) when (1); }",
         "pool `kv`: `spill host` names a family of 2, and `kv` is one pool: a spill's tier and link are one per "
         "member of the pool, or one for all of them", 2, 17),
    case("one pool spills over a family", "stage d2h[3] : fifo; pool host { }\npool kv { spill host via d2h (1) when (1); }",
         "pool `kv`: `spill … via d2h` names a family of 3, and `kv` is one pool: a spill's tier and link are one per "
         "member of the pool, or one for all of them", 2, 26),
    case("spill without when", "stage l : fifo; pool h { }\npool kv { spill h via l (1); }", "expected `when`, found `;`", 2, 28),
    case("spill reads a step's context", "stage l : fifo; pool h { }\npool kv { spill h via l (tokens) when (1); }",
         "pool `kv`: `tokens` is read in an eviction key or spill clause, but it exists only in a step stage's cost, "
         "after the iteration", 2, 26),
    case("online estimates", "stage s : delay;\nsession { set x = est_rho(q); }", "session: unknown stage `q`", 2, 27),
    case("an estimate of a pool", "pool p { }\nsession { set x = est_wait(p); }", "session: `est_wait` expects a stage name here", 2, 28),
    case("price's arguments", "stage s : delay;\nsession { set x = price(s, 1); }", "session: `price` takes 3 argument(s), got 2", 2, 19),
    case("an estimate is no constant", "let a = est_rho(s);\nstage s : delay;", "`est_rho` with 1 argument(s) is not a constant function", 1, 9),
]


@pytest.mark.parametrize("text, message, line, col", OFFLOAD)
def test_the_offload_tier_and_the_estimates_are_checked_at_their_location(text, message, line, col):
    check(text, message, line, col)


# the P/D kernel (docs/pd.md): once refused, now checked like any statement
PD_KERNEL = [
    case("share alone", "share maxmin;", "`share maxmin`: no run in this program holds several stages", 1, 1),
    case("load", "session { load kv (3); }", "session: unknown pool `kv`", 1, 16),
    case("transfer", "session { transfer 3 from a to b (1); }", "no stage declared above plays `transfer`", 1, 11),
    case("multi-stage runs", "session { run a, b (1); }", "session: unknown stage `a`", 1, 15),
    case("serving forms on several stages", "session { prefill on a, b 1; }", "`prefill on` names one stage", 1, 25),
    case("queue stations", "queue q[2] : gateway { serve fifo; }", "a gateway is one queue, not a family: the requests enter it", 1, 7),
    case("pull relations", "d pull p share maxmin;", "`d pull p`: no queue `d` is declared above", 1, 1),
    case("mark", "session { mark first; }", "`mark` is a queue entry's statement: it names a moment the caller reads as `Q.x`", 1, 11),
    case("queue calls", "session { q[0].route(1); }", "`q.route`: no queue `q` is declared", 1, 11),
    case("request to a gateway", "session { request gw; }", "`request` is a statement of the `session` inside `workload`", 1, 19),
]


@pytest.mark.parametrize("text, message, line, col", PD_KERNEL)
def test_the_pd_kernel_is_checked_at_its_location(text, message, line, col):
    check(text, message, line, col)


@pytest.mark.parametrize("text, message, line, col", REFUSED)
def test_refused_features_say_so_at_their_location(text, message, line, col):
    check(text, message, line, col)


# ---------------------------------------------------------------- rendering (§7.1)
def test_an_error_renders_path_line_column_source_carets_and_help(tmp_path):
    path = tmp_path / "p.sq"
    path.write_text("pool kv { cap 10; }\nsession {\n  hold kz (1) { }\n}\n")
    err = fails(path=str(path))
    assert err.render() == (
        f"{path}:3:8: session: unknown pool `kz`\n"
        "  |\n"
        "3 |   hold kz (1) { }\n"
        "  |        ^^\n"
        "help: did you mean pool `kv`?\n"
        "note: `kv` declared at 1:6"
    )


def test_deep_unary_chains_are_refused_without_a_traceback():
    err = fails("let a = " + "-" * 5000 + "1;")
    assert err.message == "the program is nested too deeply to check"


# ---------------------------------------------------------------- long lines (issue 19, item 5)
WINDOW = 100  # characters of a long source line a diagnostic shows (docs/frontend.md)


def rows(err: SerqError) -> tuple[str, str]:
    """The source row and the caret row of a rendered diagnostic, gutters removed."""
    lines = err.render().split("\n")
    source, carets = lines[2], lines[3]
    return source[source.index(" | ") + 3:], carets[carets.index(" | ") + 3:]


def under_carets(err: SerqError) -> str:
    source, carets = rows(err)
    first = carets.index("^")
    return source[first:first + carets.count("^")]


def test_a_long_line_is_cut_to_a_window_around_the_column():
    err = fails("let a = 1;\nlet x = " + "1" * 5000 + " + yy + " + "2" * 5000 + ";")
    assert err.render() == (
        "<text>:2:5012: `yy` is not a constant\n"
        "  |\n"
        "2 | ..." + "1" * 37 + " + yy + " + "2" * 55 + "...\n"
        "  | " + " " * 43 + "^^\n"
        "help: a constant reads numbers, `inf` and the `let`s above it"
    )


def test_the_example_of_docs_frontend_long_lines():
    err = fails("let a = 1;\nlet x = 1" + "0" * 120_000 + " + yy;")
    page = (Path(__file__).resolve().parents[2] / "docs" / "frontend.md").read_text(encoding="utf-8")
    assert f"```text\n{err.render().replace('<text>:', 'p.sq:')}\n```" in page


def test_the_window_keeps_the_line_end_in_view_near_it():
    err = fails("let x = " + "1" * 5000 + " + yy;")
    assert err.col == 5012
    source, carets = rows(err)
    assert source == "..." + "1" * 94 + " + yy;"
    assert carets == " " * 100 + "^^"


def test_the_window_keeps_the_line_start_in_view_near_it():
    err = fails("let x = yy + " + "1" * 5000 + ";")
    source, carets = rows(err)
    assert source == "let x = yy + " + "1" * 87 + "..."
    assert carets == " " * 8 + "^^"


@pytest.mark.parametrize("before", [0, 1, 30, 40, 41, 60, 91, 92, 93, 200, 119_990])
@pytest.mark.parametrize("after", [0, 1, 50, 86, 87, 88, 200, 5000])
def test_the_window_is_bounded_and_the_carets_under_the_offending_name(before, after):
    line = "let x = 1" + "1" * before + " + yy + 2" + "2" * after + ";"
    err = fails(line)
    assert err.col == len("let x = 1") + before + len(" + ") + 1  # the headline keeps the true column
    source, _ = rows(err)
    shown = source.removeprefix("...").removesuffix("...")
    assert len(shown) == min(len(line), WINDOW)
    assert (source == line) == (len(line) <= WINDOW)  # short lines are shown whole, as always
    assert under_carets(err) == "yy"


def test_a_line_of_exactly_the_window_is_shown_whole():
    line = "let x = " + "1" * (WINDOW - len("let x = ") - len(" + yy;")) + " + yy;"
    assert len(line) == WINDOW
    source, _ = rows(fails(line))
    assert source == line
    source, _ = rows(fails(line[:8] + "1" + line[8:]))
    assert source.startswith("...") and len(source) == WINDOW + 3


def test_a_token_longer_than_the_window_has_carets_up_to_the_cut():
    err = fails("let x = 1.2." + "3" * 5000 + ";")
    source, carets = rows(err)
    assert source == "let x = 1.2." + "3" * 88 + "..."
    assert carets == " " * 8 + "^" * 92


def test_tabs_and_wide_characters_in_the_window_count_one_column_each_as_in_short_lines():
    short = fails("let x = \t1 + 中yy;")
    assert rows(short) == ("let x = \t1 + 中yy;", " " * 13 + "^^^")  # as the renderer always did
    err = fails("let x = " + "1" * 5000 + "\t+\t中yy + 1;")
    source, carets = rows(err)
    assert source == "..." + "1" * 89 + "\t+\t中yy + 1;"
    assert under_carets(err) == "中yy" and carets == " " * 95 + "^^^"

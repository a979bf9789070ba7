"""Definitions and libraries (language §2.2, §2.3): expansion at the use site,
the rules checked when a `def` is read and where it is used."""

from __future__ import annotations

import os
from pathlib import Path

from frontend_util import attr, fails, load, where

from serq import ir
from serq.frontend import load_program
from serq.ir import Attr, Binary, Call, Num, PoolRef, StageRef


def test_an_expression_definition_is_its_body_with_the_arguments_in_place():
    p = load("def reusable(x, bs) = floor((x - 1) / bs) * bs; let r = reusable(100, 16);")
    assert p.constants["r"] == 96.0  # floor(99 / 16) * 16


def test_an_expression_argument_keeps_its_grouping():
    # `twice(a + 1)` is `(a + 1) * 2`, not `a + 1 * 2`
    p = load("def twice(x) = x * 2; let a = 3; let b = twice(a + 1);")
    assert p.constants["b"] == 8.0


def test_an_expression_body_keeps_its_grouping_at_the_use_site():
    # `sum(1, 2) * 3` is `(1 + 2) * 3`
    p = load("def sum(x, y) = x + y; let b = sum(1, 2) * 3;")
    assert p.constants["b"] == 9.0


def test_a_definition_with_no_parameters():
    p = load("def service() = ~exp(2); session { set s = service(); }")
    assert p.session[0].expr == ir.Draw("exp", (Num(2.0),))


def test_a_statement_definition_expands_where_it_is_used():
    p = load("""
        pool kv { cap 100; }
        stage svc : fifo;
        def handle(p, s, w) { hold p (1) { run s (w); } }
        session { set n = 4; handle(kv, svc, n + 1); }
    """)
    hold = p.session[1]
    assert hold.pools[0].ref == PoolRef(0)
    assert hold.body == (ir.Run(StageRef(0), Binary("+", Attr(attr(p, "n"), "n"), Num(1.0)), label="`run svc (n + 1)`"),)


def test_a_bare_reference_argument_stands_for_an_array_member():
    p = load("pool kv[2] { cap 9; } def take(p) { hold p (1) { } } session { take(kv[1]); }")
    assert p.session[0].pools[0].ref == PoolRef(0, Num(1.0))


def test_definitions_may_use_earlier_definitions():
    p = load("def inc(x) = x + 1; def inc2(x) = inc(inc(x)); let a = inc2(5);")
    assert p.constants["a"] == 7.0


def test_a_definition_may_be_used_in_declarations():
    p = load("""
        def long_prefill(reqs, c) = residents + queued(reqs) > 1 ? c : 0;
        pool reqs { cap 4; }
        stage e : step { cost 1; chunk long_prefill(reqs, 512); }
    """)
    chunk = p.stages[0].step.chunk
    assert chunk == ir.Cond(Binary(">", Binary("+", ir.Ctx("residents"), ir.Probe("queued", PoolRef(0))), Num(1.0)),
                            Num(512.0), Num(0.0))


def test_a_serving_form_in_a_definition_resolves_at_the_use_site():
    p = load("""
        def think(z) { tool z; }
        stage tool : delay;
        session { think(3); }
    """)
    assert p.session == (ir.Run(StageRef(0), Num(3.0), label="`run tool (3)`"),)


def test_every_use_of_a_definition_gets_fresh_hold_ids():
    p = load("pool kv { cap 9; } def take() { hold kv (1) { hold kv (1) { } } } session { take(); take(); }")
    ids = [s.id for s in ir.walk_blocks(p.session) if isinstance(s, ir.Hold)]
    assert ids == [0, 1, 2, 3]


# ---------------------------------------------------------------- libraries (§2.2)
def test_a_library_is_read_relative_to_the_file_that_uses_it(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "prog").mkdir()
    (tmp_path / "lib" / "a.sq").write_text('use "b.sq";\ndef twice(x) = inc(x) * 2;\n')
    (tmp_path / "lib" / "b.sq").write_text('use "a.sq";\ndef inc(x) = x + 1;\n')
    prog = tmp_path / "prog" / "p.sq"
    prog.write_text('use "../lib/a.sq";\nuse "../lib/b.sq";\nlet v = twice(4);\n')
    assert load_program(path=str(prog)).constants == {"v": 10.0}


def test_a_library_holds_only_definitions(tmp_path):
    (tmp_path / "lib.sq").write_text("def f(x) = x;\npool kv { cap 1; }\n")
    (tmp_path / "p.sq").write_text('use "lib.sq";\n')
    err = fails(path=str(tmp_path / "p.sq"))
    assert "a library holds definitions: found `pool` where `def` or `use` goes" in err.message
    assert err.span.source.path.endswith("lib.sq") and where(err) == (2, 1)


def test_a_library_definition_must_end_in_the_library(tmp_path):
    (tmp_path / "lib.sq").write_text("def f(x) = x;\ndef g(x) {\n  set a = x;\n")
    (tmp_path / "p.sq").write_text('use "lib.sq";\nlet a = 1;\n')
    err = fails(path=str(tmp_path / "p.sq"))
    assert err.message == "this item does not end in the file it starts in: a library's definitions are whole"
    assert err.span.source.path.endswith("lib.sq") and where(err) == (2, 5)


def test_a_missing_library_names_the_folders_searched(tmp_path, monkeypatch):
    (tmp_path / "p.sq").write_text('let a = 1;\nuse "nothere.sq";\n')
    (tmp_path / "mine").mkdir()
    monkeypatch.setenv("SERQ_PATH", str(tmp_path / "mine"))
    err = fails(path=str(tmp_path / "p.sq"))
    assert err.message == "cannot find the library `nothere.sq`"
    assert err.notes == [f"searched `{tmp_path}`, `{tmp_path / 'mine'}`"]
    assert where(err) == (2, 5)


def test_a_library_is_found_next_to_the_program_then_on_serq_path(tmp_path, monkeypatch):
    (tmp_path / "p.sq").write_text('use "lib.sq";\nstage s : delay;\nworkload { arrive batch(1); }\n'
                                   'session { twice(1); end; }\nrun { horizon 5; }\n')
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "lib.sq").write_text("def twice(x) { run s (x); run s (x); }\n")
    (tmp_path / "b" / "lib.sq").write_text("def twice(x) { run s (2 * x); }\n")
    monkeypatch.setenv("SERQ_PATH", os.pathsep.join([str(tmp_path / "b"), str(tmp_path / "a")]))
    import serq
    assert serq.run(serq.load(str(tmp_path / "p.sq"))).stage("s").completed == 1  # b's: the first folder
    (tmp_path / "lib.sq").write_text("def twice(x) { run s (x); run s (x); run s (x); }\n")
    assert serq.run(serq.load(str(tmp_path / "p.sq"))).stage("s").completed == 3  # next to it wins


def test_a_bundled_library_is_found_wherever_the_program_is(tmp_path):
    # a bundled program copied elsewhere still runs, and a text program may use one
    src = (Path(__file__).resolve().parents[2] / "programs/multi-turn/vllm_chat.sq").read_text()
    (tmp_path / "vllm.sq").write_text(src)  # even named as the library is
    copied = load_program(path=str(tmp_path / "vllm.sq")).summary()
    assert copied.startswith("OK: 2 pool(s)")
    assert load(src).summary() == copied
    err = fails('use "std/vlm";')
    assert err.message == '`use "std/vlm"`: no bundled library of that name'
    assert err.helps == ['the bundled libraries are `use "std/a100";`, `use "std/h100";`, `use "std/routers";`, '
                         '`use "std/vllm";`']


def test_a_program_given_as_text_cannot_use_a_library_next_to_it():
    err = fails('use "lib.sq";')
    assert "reads a file next to the program, and this program was given as text" in err.message
    assert where(err) == (1, 5)


def test_an_error_in_a_library_definition_points_into_the_library_with_a_note(tmp_path):
    (tmp_path / "lib.sq").write_text("def f(x) {\n  set y = x + zz;\n}\n")
    (tmp_path / "p.sq").write_text('use "lib.sq";\nsession {\n  f(1);\n}\n')
    err = fails(path=str(tmp_path / "p.sq"))
    assert "unknown name `zz`" in err.message
    assert err.span.source.path.endswith("lib.sq") and where(err) == (2, 15)
    assert err.notes == [f"in `f`, used at {tmp_path / 'p.sq'}:3:3"]
    assert "note: in `f`, used at" in err.render()


def test_nested_expansions_list_every_use_innermost_first():
    err = fails("def g(x) = x + zz;\ndef f(x) { set a = g(x); }\nsession { f(1); }")
    assert where(err) == (1, 16)
    assert err.notes == ["in `g`, used at 2:20", "in `f`, used at 3:11"]


def test_the_expansion_limit_stops_exponential_definitions():
    text = "def f0(x) = x;\n" + "".join(f"def f{i}(x) = f{i - 1}(x) + f{i - 1}(x);\n" for i in range(1, 30))
    err = fails(text + "let y = f29(1);")
    assert err.message == "the definitions expand to more than a program can hold"


# ---------------------------------------------------------------- rules at the definition (§2.3)
def test_a_definition_may_not_take_a_word_of_the_language():
    err = fails("def hold(x) = x;")
    assert err.message == "`hold` is a word of the language" and where(err) == (1, 5)
    assert fails("def exp(x) = x;").message == "`exp` is a word of the language"


def test_a_definition_may_not_take_a_retired_word():
    err = fails("def keep(x) = x;")
    assert err.message == "`keep` is a retired word and names nothing: `keep` is now `cache`"


def test_a_definition_defined_twice_is_refused():
    err = fails("def f(x) = x;\ndef f(y) = y;")
    assert err.message == "`f` is defined twice" and where(err) == (2, 5)


def test_a_definition_may_use_only_the_definitions_before_it():
    err = fails("def a(x) = b(x);\ndef b(x) = x;")
    assert err.message == "`a` uses `b`, which is defined after it" and where(err) == (1, 12)


def test_a_definition_may_not_use_itself():
    err = fails("def a(x) = a(x) + 1;")
    assert err.message == "`a` uses itself" and where(err) == (1, 12)


def test_a_parameter_may_not_be_a_keyword_a_function_or_repeated():
    assert fails("def f(set) = 1;").message == "`set` is a word of the language"
    assert fails("def f(min) = 1;").message == "`min` is a word of the language"
    err = fails("def f(a, a) = 1;")
    assert err.message == "`a` is a parameter twice" and where(err) == (1, 10)


def test_a_body_may_not_assign_a_parameter():
    err = fails("def f(n) { set n = 1; }")
    assert err.message == "`n` is a parameter of `f`, and the body assigns it with `set`" and where(err) == (1, 16)
    err = fails("def f(n) { choose n in 2 by (n); }")
    assert "the body assigns it with `choose`" in err.message
    err = fails("pool kv { cap 1; } def f(n) { hold kv (n) at admission (n = 1) { } }")
    assert "the body assigns it with an `at admission` binding" in err.message


def test_a_definition_may_not_share_a_name_with_a_pool_a_stage_or_a_let():
    assert fails("pool kv { cap 1; } def kv(x) = x;").message == "`kv` is defined, and is also a pool"
    assert fails("def svc(x) = x; stage svc : delay;").message == "`svc` is defined, and is also a stage"
    assert fails("let c = 1; def c(x) = x;").message == "`c` is defined, and is also a `let` constant"


def test_after_the_parameters_comes_an_expression_or_a_block():
    err = fails("def f(x) x;")
    assert err.message == "expected `= expression;` or `{ statements }` after `def f(…)`, found `x`"
    assert where(err) == (1, 10)


def test_an_empty_expression_body_and_an_unclosed_body_are_refused():
    err = fails("def f(x) = ;")
    assert err.message == "`def f` has no expression" and where(err) == (1, 12)
    err = fails("def f(x) {\n  set a = 1;\n")
    assert err.message == "`def f` is not closed" and where(err) == (1, 5)


# ---------------------------------------------------------------- rules at the use (§2.3)
def test_a_use_must_pass_every_argument():
    err = fails("def f(x, y) = x + y;\nlet a = f(1);")
    assert err.message == "`f` takes 2 argument(s), got 1" and where(err) == (2, 9)
    err = fails("def f(x, y) = x + y;\nlet a = f(1, );")
    assert err.message == "`f`: the argument for `y` is empty"


def test_statements_and_expressions_are_not_interchangeable():
    err = fails("def f(x) { set a = x; }\nsession { set b = f(1); }")
    assert err.message.startswith("`f` is statements (") and err.message.endswith("), not an expression")
    err = fails("def f(x) = x;\nsession { f(1); }")
    assert err.message.startswith("`f` is an expression (") and err.message.endswith("), not statements")


def test_a_statement_use_needs_its_semicolon():
    err = fails("def f(x) { set a = x; }\nsession { f(1) }")
    assert err.message == "expected `;` after `f(…)`" and where(err) == (2, 11)


def test_an_unknown_statement_suggests_a_definition():
    err = fails("def handle(x) { set a = x; }\nsession { handel(1); }")
    assert err.message == "unknown statement `handel`" and err.helps == ["did you mean `handle`?"]


def test_a_definition_must_come_before_its_use():
    err = fails("session { f(1); }\ndef f(x) { set a = x; }")
    assert err.message == "`f` is used before its definition" and where(err) == (1, 11)


def test_an_argument_may_not_read_what_the_body_assigns():
    err = fails("def f(x) { set a = 1; set b = x; }\nsession { set a = 0; f(a + 1); }")
    assert err.message == "the argument for `x` reads `a`, which `f` assigns" and where(err) == (2, 24)


def test_an_argument_may_not_read_cached_when_the_body_holds_a_pool():
    err = fails("pool kv { cap 9; } def f(x) { hold kv (1) { set b = x; } }\nsession { f(cached); }")
    assert err.message == "the argument for `x` reads `cached`, which `f` assigns"


def test_a_drawing_argument_may_not_be_mentioned_twice():
    err = fails("def f(x) = x + x;\nsession { set a = f(~exp(1)); }")
    assert err.message == "the argument for `x` draws a sample, and `f` would draw it 2 times"
    assert where(err) == (2, 21)


def test_a_live_argument_to_a_statement_definition_is_refused():
    err = fails("def f(x) { set b = x; }\nsession { f(now); }")
    assert err.message == "the argument for `x` reads `now`, which changes while statements run"
    assert err.helps == ["`set t = now;` first, and pass the name"]
    err = fails("pool kv { cap 1; } def f(x) { set b = x; }\nsession { f(used(kv)); }")
    assert err.message == "the argument for `x` reads `used(kv)`, which changes while statements run"


def test_an_argument_may_not_read_what_a_deferred_turn_assigns():
    err = fails("def g(v) { set m = v; turn; }\nworkload { turn { set t = 1; } }\nsession { g(t); }")
    assert err.message == "the argument for `v` reads `t`, which its `turn;` assigns" and where(err) == (3, 13)


def test_a_turn_inside_a_definition_used_in_the_server_is_refused():
    err = fails("def g() { turn; }\nserver { g(); }\nworkload { session { request; } }")
    assert err.message == "`turn` is the session's, not the server's"
    assert where(err) == (1, 11) and err.notes == ["in `g`, used at 2:10"]


def test_a_request_inside_a_definition_splices_the_server():
    p = load("def ask() { request; }\nserver { set a = 1; }\nworkload { session { ask(); ask(); } }")
    assert p.session.count(ir.ServerBegin()) == 2 and p.session.count(ir.ServerEnd()) == 2


def test_an_observation_name_parameter_names_the_observation():
    p = load("def record(name, v) { observe name = v; }\nsession { record(latency, 2); }")
    assert p.observes == (ir.ObserveDecl("latency"),)


def test_a_parameter_standing_for_a_pool_may_not_take_an_expression():
    err = fails("def take(p) { hold p (1) { } }\nsession { take(1 + 2); }")
    assert err.message == "`p` names a pool or a stage here, and its argument `1 + 2` is not one"


def test_definitions_use_the_library_functions_of_vllm():
    p = load("""
        def reusable(x, bs) = floor((x - 1) / bs) * bs;
        pool kv { cap 100; block 16; }
        session { set k = 40; set c = min(cached, reusable(k, blocksize(kv))); }
    """)
    k = Attr(attr(p, "k"), "k")
    assert p.session[1].expr == Call("min", (Attr(ir.CACHED, "cached"),
                                              Binary("*", Call("floor", (Binary("/", Binary("-", k, Num(1.0)), Num(16.0)),)),
                                                     Num(16.0))))

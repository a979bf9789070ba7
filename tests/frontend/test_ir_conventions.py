"""The conventions of the IR the front end promises the simulator (docs/frontend.md)."""

from __future__ import annotations

from frontend_util import load

from serq import ir
from serq.frontend import load_program

TWO_SIDED = """
pool kv { cap 100; block 4; }
stage engine : step { cost 1; memory kv; }
stage user : delay;
server {
  set prompt = K + n;
  hold kv (prompt) at admission (need = prompt) { set c = need; prefill (need - c) growing kv; } cache (prompt);
  observe done = 1;
}
workload {
  init { set K = 0; set a0 = 1; }
  turn { set n = 5; observe n = n > 2; }
  session { turn; request; set z = 1; loop { request; choose j in 2 by (j); end; } }
}
"""


def test_attributes_are_the_builtins_then_first_appearances_in_init_turn_and_session():
    p = load(TWO_SIDED)
    assert p.attributes[:9] == ir.BUILTIN_ATTRIBUTES
    assert p.attributes[9:] == ("K", "a0", "n", "prompt", "need", "c", "z", "j")


def test_observations_are_listed_in_first_appearance_order_and_tests_are_marked():
    p = load(TWO_SIDED)
    assert p.observes == (ir.ObserveDecl("n", True), ir.ObserveDecl("done", False))


def test_an_observation_is_a_test_if_any_of_its_observes_is():
    p = load("session { observe x = 2; observe x = !serial; observe y = serial == 1 || serial == 2; }")
    assert p.observes == (ir.ObserveDecl("x", True), ir.ObserveDecl("y", True))


def test_every_splice_of_the_server_is_wrapped_and_gets_fresh_hold_ids():
    p = load(TWO_SIDED)
    flat = list(ir.walk_blocks(p.session))
    assert flat.count(ir.ServerBegin()) == 2 and flat.count(ir.ServerEnd()) == 2
    assert [s.id for s in flat if isinstance(s, ir.Hold)] == [0, 1]


def test_the_block_count_covers_init_turn_session_and_nested_blocks():
    # init, turn, session, 2 hold bodies, the loop body
    p = load(TWO_SIDED)
    assert p.block_count == 6
    assert p.summary() == "OK: 1 pool(s), 2 stage(s), 17 attribute(s), 6 block(s)"


def test_labels_print_the_statement_after_substitution():
    p = load("""
        pool kv { cap 100; }
        stage d : delay;
        def wait(t) { run d (t - 5); }
        session {
          set c = 1; set K = 2; set z = 3;
          branch (c / K) { } branch with (0.5 * c) { }
          wait(z);
          choose i in (z - 1) by (i);
          hold kv (1) { grow kv (c + 1); }
        }
    """)
    b1, b2, run, choose, hold = p.session[3:]
    assert b1.label == "`branch (c / K)`" and b2.label == "`branch with (0.5 * c)`"
    assert run.label == "`run d (z - 5)`"
    assert choose.label == "`choose … in (z - 1)`"
    assert hold.label == "`hold kv (...)`" and hold.body[0].label == "`grow kv (c + 1)`"


def test_labels_parenthesise_only_where_precedence_needs_it():
    p = load("stage d : delay; session { set a = 1; set b = 2; run d ((a + b) * 2 - -a ^ 2); run d (a ? b : a - 1); }")
    assert p.session[2].label == "`run d ((a + b) * 2 - -a ^ 2)`"
    assert p.session[3].label == "`run d (a ? b : a - 1)`"


def test_constant_subtrees_are_folded_and_conditionals_on_constants_pruned():
    p = load("let law = 1; stage d : delay; session { run d (law == 0 ? 1 : ~exp(2 * 3)); }")
    assert p.session[0].work == ir.Draw("exp", (ir.Num(6.0),))


def test_constants_are_in_source_order_and_a_text_program_has_no_path():
    p = load("let b = 1; let a = b + 1;")
    assert list(p.constants.items()) == [("b", 1.0), ("a", 2.0)]
    assert p.path is None


def test_a_trace_argument_adds_a_trace_to_a_program_without_one():
    p = load("workload { arrive batch(1); } session { turn; }", trace="data/t.csv")
    assert p.trace == ir.TraceDecl("data/t.csv", False)


def test_a_trace_path_in_a_text_program_stays_as_written():
    p = load('workload { trace "t.csv"; } session { turn; }')
    assert p.trace == ir.TraceDecl("t.csv", False)


def test_the_program_path_is_the_file_given(tmp_path):
    path = tmp_path / "p.sq"
    path.write_text("let a = 1;")
    assert load_program(path=str(path)).path == str(path)


def test_a_missing_program_file_is_a_program_error(tmp_path):
    from frontend_util import fails

    err = fails(path=str(tmp_path / "none.sq"))
    assert err.message.startswith(f"cannot read `{tmp_path / 'none.sq'}`: ")

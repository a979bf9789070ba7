"""One test per grammar feature (language §1–§6): each inlines a tiny program
and asserts the IR the front end produces."""

from __future__ import annotations

import math

from frontend_util import attr, load

from serq import ir
from serq.ir import Attr, Binary, Call, Cond, Ctx, Draw, Num, PoolRef, Probe, StageRef, Unary

ENGINE = """
pool kv { cap 1000; block 16; }
stage engine : step { budget 512; cost 0.01; memory kv; }
stage tool : delay;
"""


# ---------------------------------------------------------------- lexical (§1)
def test_comments_and_whitespace_mean_nothing():
    p = load("// a line comment\nlet a = /* a block\ncomment */ 1; // trailing\n")
    assert p.constants == {"a": 1.0}


def test_numbers_take_exponents_underscores_and_a_leading_dot():
    p = load("let a = 1_024; let b = 2e-5; let c = .5; let d = 4.1053e-5; let e = 3E2;")
    assert p.constants == {"a": 1024.0, "b": 2e-5, "c": 0.5, "d": 4.1053e-5, "e": 300.0}


def test_identifiers_may_be_unicode_and_are_case_sensitive():
    p = load("let λ = 2; let K = 3; let k = 4; let t_s = λ * K + k;")
    assert p.constants["t_s"] == 10.0


# ---------------------------------------------------------------- let and folding (§2.1, §6.1)
def test_a_let_folds_operators_functions_and_inf_in_source_order():
    p = load("let a = 2; let b = a ^ 3 ^ 2 / 256; let c = max(a, b) + min(inf, 1); let d = a > 1 ? -a : a;")
    assert p.constants == {"a": 2.0, "b": 2.0, "c": 3.0, "d": -2.0}


def test_power_is_right_associative_and_binds_tighter_than_unary_minus():
    p = load("let a = -2 ^ 2; let b = 2 ^ -1; let c = 2 ^ 3 ^ 2;")
    assert p.constants == {"a": -4.0, "b": 0.5, "c": 512.0}


def test_logic_treats_nonzero_as_true_and_comparisons_give_0_or_1():
    p = load("let a = 2 && 3; let b = 0 || 0; let c = !5; let d = 1 < 2; let e = (1 < 2) < 1;"
             " let f = 0 || 1 ? 7 : 8;")
    assert p.constants == {"a": 1.0, "b": 0.0, "c": 0.0, "d": 1.0, "e": 0.0, "f": 7.0}


def test_the_ternary_nests_to_the_right():
    p = load("let law = 2; let x = law == 0 ? 10 : law == 1 ? 11 : law == 2 ? 12 : 13;")
    assert p.constants["x"] == 12.0


def test_args_number_is_a_let_whose_value_is_its_default():
    p = load('use "std/args"; let W = args.number("W", 14.7); let two = W * 2;')
    assert p.constants == {"W": 14.7, "two": 29.4}


def test_a_set_override_replaces_a_let_in_its_place():
    p = load("let q = 0.3; let kids = q * 10;", sets=[("q", "0")])
    assert p.constants == {"q": 0.0, "kids": 0.0}


def test_a_set_override_may_name_earlier_lets_and_the_last_one_wins():
    p = load("let a = 2; let b = 3; let c = b + 1;", sets=[("b", "a * 10"), ("b", "a * 5")])
    assert p.constants == {"a": 2.0, "b": 10.0, "c": 11.0}


def test_a_set_override_binds_the_external_name_of_args_number():
    p = load('let wait = args.number("W", 14.7);', sets=[("W", "3")])
    assert p.constants["wait"] == 3.0


# ---------------------------------------------------------------- pools (§3)
def test_pool_clauses_fold_cap_and_block_and_keep_policies():
    p = load("""
        stage engine : step { cost 1; }
        let bs = 16;
        pool kv { cap 10 * bs; block bs; evict lru; preempt lifo; queue fifo; admit via engine; }
        pool other { }
    """)
    kv, other = p.pools
    assert kv == ir.PoolDecl("kv", None, 160.0, 16.0, "lru", "lifo", "fifo", 0)
    assert other == ir.PoolDecl("other", None, math.inf, None, "lru", "none", "fifo", None)


def test_pool_keys_are_expressions_at_their_moments():
    p = load("pool kv { evict by (age, -size); queue by (waited, serial); } session { }")
    kv = p.pools[0]
    assert kv.evict == (Ctx("age"), Unary("-", Ctx("size")))
    assert kv.queue == (Ctx("waited"), Attr(0, "serial"))


def test_a_pool_array_has_members_indexed_from_zero():
    p = load("pool kv[4] { cap 8; } session { hold kv[serial - 3 * 1] (1) { } }")
    assert p.pools[0].size == 4 and p.pools[0].members == 4
    hold = p.session[0]
    assert hold.pools[0].ref == PoolRef(0, Binary("-", Attr(0, "serial"), Num(3.0)))


# ---------------------------------------------------------------- stages (§4)
def test_stage_kinds_fifo_ps_and_delay():
    p = load("let c = 2; stage a : fifo; stage b : fifo(c); stage s : ps(present + 1); stage d : delay;")
    a, b, s, d = p.stages
    assert (a.kind, a.servers) == ("fifo", 1)
    assert (b.kind, b.servers) == ("fifo", 2)
    assert (s.kind, s.phi) == ("ps", Binary("+", Ctx("present"), Num(1.0)))
    assert d == ir.StageDecl("d", "delay")


def test_a_step_stage_takes_budget_cost_chunk_memory_and_serve():
    p = load("""
        pool kv { cap 100; }
        stage e : step { budget 8192; chunk residents > 1 ? 512 : 0;
                         cost 0.01 + 2e-5 * tokens; memory kv; serve decode first; };
    """)
    step = p.stages[0].step
    assert step.budget == Num(8192.0)
    assert step.chunk == Cond(Binary(">", Ctx("residents"), Num(1.0)), Num(512.0), Num(0.0))
    assert step.cost == Binary("+", Num(0.01), Binary("*", Num(2e-5), Ctx("tokens")))
    assert step.memory == 0 and step.serve == "decode_first"


def test_a_step_stage_defaults_to_an_infinite_budget_no_chunk_cap_and_admission_order():
    p = load("stage e : step { cost 1; }")
    assert p.stages[0].step == ir.StepDecl(Num(1.0), Num(math.inf), Num(0.0), "admission", None)


def test_serve_exclusive_prefill_and_serve_by_keys():
    p = load("stage a : step { cost 1; serve exclusive prefill; } stage b : step { cost 1; serve by (remaining, admission); }")
    assert p.stages[0].step.serve == "exclusive_prefill"
    assert p.stages[1].step.serve == (Ctx("remaining"), Ctx("admission"))


def test_a_stage_array_runs_on_the_member_named():
    p = load("stage svc[3] : fifo; session { run svc[2] (1); }")
    assert p.stages[0].size == 3
    assert p.session[0].stage == StageRef(0, Num(2.0))


# ---------------------------------------------------------------- workload (§2.6, §6.8)
def test_arrive_poisson_closed_batch_renewal_and_none():
    assert load("workload { arrive poisson(0.5 * 2); }").arrival == ir.Arrival("poisson", rate=1.0)
    assert load("let N = 8; workload { arrive closed(N); }").arrival == ir.Arrival("closed", n=8)
    assert load("workload { arrive batch(3); }").arrival == ir.Arrival("batch", n=3)
    assert load("workload { arrive renewal(1 + ~exp(2)); }").arrival == ir.Arrival(
        "renewal", gap=Binary("+", Num(1.0), Draw("exp", (Num(2.0),))))
    assert load("workload { arrive none; }").arrival == ir.Arrival()
    assert load("").arrival == ir.Arrival()


def test_init_and_turn_blocks_set_attributes():
    p = load("workload { init { set K = 0; } turn { set n = ~uniform(1, 2); observe n = n; } } session { turn; }")
    assert p.init == (ir.Set(attr(p, "K"), Num(0.0)),)
    assert p.turn == (ir.Set(attr(p, "n"), Draw("uniform", (Num(1.0), Num(2.0)))), ir.Observe(0, Attr(attr(p, "n"), "n")))
    assert p.session == (ir.Turn(),)


def test_hidden_names_attribute_slots():
    p = load("workload { hidden o, out; turn { set o = 1; } } session { turn; }")
    assert p.hidden == frozenset({attr(p, "o"), ir.OUT})


def test_a_trace_is_resolved_against_the_program_folder(tmp_path):
    path = tmp_path / "prog.sq"
    path.write_text('workload { trace "data/t.csv" ordered; } session { turn; }')
    from serq.frontend import load_program

    p = load_program(path=str(path))
    assert p.trace == ir.TraceDecl(str(tmp_path / "data" / "t.csv"), True)
    assert p.path == str(path)
    q = load_program(path=str(path), trace="other.csv")
    assert q.trace == ir.TraceDecl("other.csv", True)


# ---------------------------------------------------------------- the two sides (§2.7)
def test_the_server_is_spliced_in_place_of_every_request():
    p = load("""
        stage svc : fifo;
        server { set t0 = now; run svc (1); }
        workload { session { request; loop { request; end; } } }
    """)
    splice = (ir.ServerBegin(), ir.Set(attr(p, "t0"), Ctx("now")),
              ir.Run(StageRef(0), Num(1.0), label="`run svc (1)`"), ir.ServerEnd())
    assert p.two_sided
    assert p.session[:4] == splice
    assert p.session[4] == ir.Loop(splice + (ir.End(),))


def test_a_top_level_session_is_the_kernel_form():
    p = load("stage svc : fifo; session { run svc (1); end; }")
    assert not p.two_sided
    assert p.session == (ir.Run(StageRef(0), Num(1.0), label="`run svc (1)`"), ir.End())


def test_a_program_without_a_session_is_legal():
    p = load("let a = 1;")
    assert p.session == () and p.block_count == 1


# ---------------------------------------------------------------- statements (§5)
def test_set_observe_turn_and_end():
    p = load("session { set x = 2; observe y = x * 3; turn; end; }")
    x = attr(p, "x")
    assert p.session == (ir.Set(x, Num(2.0)), ir.Observe(0, Binary("*", Attr(x, "x"), Num(3.0))), ir.Turn(), ir.End())


def test_a_hold_takes_pools_reserve_reuse_and_cache():
    p = load("""
        pool reqs { cap 4; } pool kv { cap 100; block 4; }
        session { hold reqs (1), kv (8) reserve (12) reuse (4) { set a = cached; } cache (10); }
    """)
    h = p.session[0]
    assert h.id == 0
    assert h.pools == (ir.HoldPool(PoolRef(0), Num(1.0), None, "`hold reqs (1)`"),
                       ir.HoldPool(PoolRef(1), Num(8.0), Num(12.0), "`hold kv (8)`", "`hold kv reserve (12)`"))
    assert (h.reuse, h.cache) == (Num(4.0), Num(10.0))
    assert h.body == (ir.Set(attr(p, "a"), Attr(ir.CACHED, "cached")),)
    assert h.label == "`hold reqs (...), kv (...)`"


def test_grow_drop_and_release_act_on_pools():
    p = load("pool kv { cap 100; } session { hold kv (1) { grow kv (2 + 3); release kv; } drop kv; }")
    h, drop = p.session
    assert h.body == (ir.Grow(PoolRef(0), Num(5.0), "`grow kv (2 + 3)`"), ir.Release(PoolRef(0)))
    assert drop == ir.Drop(PoolRef(0))


def test_run_takes_a_mode_on_a_step_stage_and_growing():
    p = load(ENGINE + "session { hold kv (1) { run engine prefill (10) growing kv; run engine decode (5); } }")
    a, b = p.session[0].body
    assert a == ir.Run(StageRef(0), Num(10.0), "prefill", PoolRef(0), "`run engine prefill (10)`")
    assert b == ir.Run(StageRef(0), Num(5.0), "decode", None, "`run engine decode (5)`")


def test_branch_tests_a_guard_with_an_else():
    p = load("session { set c = 1; branch (c > 0) { end; } else { turn; } }")
    b = p.session[1]
    assert b == ir.Branch(Binary(">", Attr(attr(p, "c"), "c"), Num(0.0)), (ir.End(),), (ir.Turn(),), "`branch (c > 0)`")


def test_branch_with_a_probability_is_a_bernoulli_draw():
    p = load("let q = 0.25; session { branch with (q * 2) { end; } }")
    assert p.session[0] == ir.Branch(Draw("bernoulli", (Num(0.5),)), (ir.End(),), None, "`branch with (q * 2)`")


def test_loop_repeats_its_block():
    p = load("session { loop { turn; } }")
    assert p.session == (ir.Loop((ir.Turn(),)),)


def test_choose_binds_its_name_to_each_candidate():
    p = load("pool kv[2] { cap 9; } session { choose j in 2 by (used(kv[j]), j); }")
    j = attr(p, "j")
    assert p.session[0] == ir.Choose(j, Num(2.0), (Probe("used", PoolRef(0, Attr(j, "j"))), Attr(j, "j")),
                                     "`choose … in (2)`")


# ---------------------------------------------------------------- serving forms (§5.6)
def test_prefill_and_decode_find_the_step_engine_declared_above():
    p = load(ENGINE + "session { set n = 3; hold kv (1) { prefill n * 2 growing kv; decode (n); } }")
    a, b = p.session[1].body
    n = Attr(attr(p, "n"), "n")
    assert a == ir.Run(StageRef(0), Binary("*", n, Num(2.0)), "prefill", PoolRef(0), "`run engine prefill (n * 2)`")
    assert b == ir.Run(StageRef(0), n, "decode", None, "`run engine decode (n)`")


def test_tool_runs_plain_on_the_stage_named_tool():
    p = load(ENGINE + "let Z = 3; session { tool (~exp(Z)); tool Z; }")
    assert p.session == (ir.Run(StageRef(1), Draw("exp", (Num(3.0),)), label="`run tool (~exp(Z))`"),
                         ir.Run(StageRef(1), Num(3.0), label="`run tool (Z)`"))


def test_on_names_the_stage_and_a_plain_stage_runs_without_mode():
    p = load("stage a : step { cost 1; } stage b : fifo; session { prefill on a 5; prefill on b 5; }")
    assert p.session == (ir.Run(StageRef(0), Num(5.0), "prefill", label="`run a prefill (5)`"),
                         ir.Run(StageRef(1), Num(5.0), label="`run b (5)`"))


def test_a_serving_form_with_an_index_runs_on_that_member():
    p = load("stage tool[2] : delay; session { tool[1] 4; }")
    assert p.session[0] == ir.Run(StageRef(0, Num(1.0)), Num(4.0), label="`run tool[1] (4)`")


# ---------------------------------------------------------------- expressions (§6)
def test_probes_name_pools_and_stages():
    p = load(ENGINE + "session { set a = used(kv) + free(kv) + cachedin(kv) + holders(kv) + queued(kv);"
                      " set b = queue(tool) + busy(tool) + work(tool) + budget_left(engine); }")
    a, b = p.session
    fns = [x.fn for x in _walk(a.expr) if isinstance(x, Probe)] + [x.fn for x in _walk(b.expr) if isinstance(x, Probe)]
    assert fns == ["used", "free", "cachedin", "holders", "queued", "queue", "busy", "work", "budget_left"]


def test_blocksize_folds_to_the_pool_block():
    p = load(ENGINE + "session { set a = floor(17 / blocksize(kv)) * blocksize(kv); }")
    assert p.session[0].expr == Num(16.0)


def test_every_distribution_is_a_draw():
    p = load("session { set a = ~exp(1) + ~det(2) + ~uniform(1, 2) + ~erlang(4, 1) + ~h2(1, 4) + ~bernoulli(0.5); }")
    dists = [x.dist for x in _walk(p.session[0].expr) if isinstance(x, Draw)]
    assert dists == ["exp", "det", "uniform", "erlang", "h2", "bernoulli"]


def test_a_draw_binds_tighter_than_addition():
    p = load("session { set a = ~exp(200) + 1; }")
    assert p.session[0].expr == Binary("+", Draw("exp", (Num(200.0),)), Num(1.0))


def test_constant_subtrees_fold_inside_live_expressions():
    p = load("let a = 2; session { set x = now * (a + 3) + pow(2, 3); }")
    assert p.session[0].expr == Binary("+", Binary("*", Ctx("now"), Num(5.0)), Num(8.0))


def test_inf_is_a_number():
    p = load("pool kv { cap inf; } session { set x = min(inf, now); }")
    assert p.pools[0].cap == math.inf
    assert p.session[0].expr == Call("min", (Num(math.inf), Ctx("now")))


# ---------------------------------------------------------------- run settings (§2.8)
def test_run_settings_are_constants_with_defaults():
    p = load("let H = 100; workload { arrive poisson(1); } run { warmup H / 10; horizon H; seed 7; arrivals 50; }")
    assert p.run == ir.RunSettings(100.0, 10.0, 7, 50)
    assert load("").run == ir.RunSettings(None, 0.0, 1, None)


def _walk(e):
    from serq.expr import walk

    return walk(e)

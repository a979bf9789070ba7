"""The exact machine on its own: numbers as written, the fragment's boundary,
the arrival protocol, hand-worked iterations, copies, and the state key."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

import serq
from serq import ir
from serq.errors import SerqRuntimeError
from serq.prove.exact import Env, Unsupported, evaluate, exact
from serq.prove.machine import Ended, Iteration, Machine, NeedSession, Observed, check_fragment, init_attrs

N = ir.Num


def B(op: str, a: ir.Expr, b: ir.Expr) -> ir.Binary:
    return ir.Binary(op, a, b)


# -- numbers and expressions -------------------------------------------------------------


def test_a_number_is_read_as_the_user_wrote_it() -> None:
    assert exact(2e-5) == Fraction(1, 50000)  # not the binary double 2.0000000000000002e-05's value
    assert exact(0.1) == Fraction(1, 10)
    assert exact(3.0) == 3 and isinstance(exact(3.0), Fraction)
    with pytest.raises(Unsupported) as err:
        exact(math.inf)
    assert err.value.construct == "the number inf"


def test_a_sum_floats_round_is_exact() -> None:
    # 0.1 + 0.2 == 0.3 is 0 in floats, 1 over the rationals
    e = B("==", B("+", N(0.1), N(0.2)), N(0.3))
    assert evaluate(e, Env()) == 1
    assert evaluate(B("/", N(1.0), N(3.0)), Env()) == Fraction(1, 3)
    assert evaluate(B("*", B("/", N(1.0), N(3.0)), N(3.0)), Env()) == 1


def test_functions_comparisons_and_logic_give_exact_values() -> None:
    third = B("/", N(1.0), N(3.0))
    env = Env([Fraction(7, 2)], {"now": Fraction(5, 4)})
    x = ir.Attr(0, "x")
    assert evaluate(ir.Call("floor", (x,)), env) == 3
    assert evaluate(ir.Call("ceil", (x,)), env) == 4
    assert evaluate(ir.Call("min", (x, third)), env) == Fraction(1, 3)
    assert evaluate(ir.Call("max", (x, ir.Ctx("now"))), env) == Fraction(7, 2)
    assert evaluate(ir.Call("abs", (ir.Unary("-", x),)), env) == Fraction(7, 2)
    assert evaluate(ir.Call("pow", (x, N(2.0))), env) == Fraction(49, 4)
    assert evaluate(B("^", N(2.0), N(-2.0)), env) == Fraction(1, 4)
    assert evaluate(B("&&", x, N(0.0)), env) == 0 and evaluate(B("||", x, N(0.0)), env) == 1
    assert evaluate(ir.Unary("!", x), env) == 0
    assert evaluate(ir.Cond(B("<", ir.Ctx("now"), x), N(10.0), N(20.0)), env) == 10
    assert evaluate(ir.Call("max", (N(1.0), N(5.0), x)), env) == 5  # an aggregate's terms


@pytest.mark.parametrize(("e", "construct"), [
    (ir.Call("sqrt", (N(2.0),)), "`sqrt`"),
    (ir.Call("exp", (N(1.0),)), "`exp`"),
    (ir.Call("ln", (N(2.0),)), "`ln`"),
    (B("^", N(2.0), N(0.5)), "a power with a fractional exponent"),
    (B("/", N(1.0), N(0.0)), "a division by zero"),
    (N(math.inf), "the number inf"),
    (ir.Draw("exp", (N(1.0),)), "`~exp`"),
    (ir.Ctx("tokens"), "`tokens` here"),
])
def test_what_has_no_exact_value_is_refused_by_name(e: ir.Expr, construct: str) -> None:
    with pytest.raises(Unsupported) as err:
        evaluate(e, Env())
    assert err.value.construct == construct


def test_a_draw_and_a_probe_ask_the_environment() -> None:
    class Chosen(Env):
        def draw(self, e):
            return Fraction(3)

        def probe(self, fn, target_kind, index):
            return Fraction(10 * index + len(fn))

    e = B("+", ir.Draw("uniform", (N(0.0), N(9.0))), ir.Probe("used", ir.PoolRef(2)))
    assert evaluate(e, Chosen()) == 3 + 24


# -- the fragment -------------------------------------------------------------------------

ENGINE = "stage engine : step { budget 8; chunk 4; cost 3 + 2 * tokens; }\n"


@pytest.mark.parametrize(("text", "construct"), [
    ("stage s : ps(1);\nsession { run s (1); }", "a `ps` stage"),
    ("stage s : fifo;\nsession { run s (1); }", "a `fifo` stage"),
    ("stage d : delay;\nsession { run d (~exp(1)); }", "`~exp`"),
    ("stage d : delay;\nsession { run d (sqrt(serial)); }", "`sqrt`"),
    ("pool kv { cap 10; }\n" + ENGINE + "session { hold kv (1) { grow kv (1); } }", "`grow`"),
    ("pool kv { cap 10; }\nsession { hold kv (1) { } cache (1) }", "a `cache` clause (the prefix cache)"),
    ("pool kv[2] { cap 10; }\nsession { hold kv[0] (1) { } }", "a pool array"),
    ("stage d : delay;\nworkload { turn { set z = ~uniform(0, 1); } }\nsession { turn; run d (z); }",
     "`~uniform` in a turn block"),
])
def test_a_construct_outside_the_fragment_is_named(text: str, construct: str) -> None:
    with pytest.raises(Unsupported) as err:
        check_fragment(serq.load(text))
    assert err.value.construct == construct


def test_the_program_s_own_poisson_arrivals_are_out_but_given_times_are_in() -> None:
    p = serq.load(ENGINE + "workload { arrive poisson(1); }\nsession { run engine prefill (2); }")
    check_fragment(p)  # (a family supplies its own times)
    with pytest.raises(Unsupported) as err:
        Machine(p)
    assert "poisson" in err.value.construct
    m = Machine(p, arrivals=[0, Fraction(1, 2)])
    assert m.step() == [NeedSession(0, 0)]


def test_init_attrs_runs_init_with_draws_from_the_callback() -> None:
    p = serq.load("stage d : delay;\nworkload { init { set a = serial * 2; set b = ~uniform(0, 4) + now; } }\n"
                  "session { run d (a + b); }")
    attrs = init_attrs(p, 3, Fraction(1, 2), lambda e: Fraction(5, 2))
    slots = {name: i for i, name in enumerate(p.attributes)}
    assert attrs[slots["serial"]] == 3 and attrs[slots["a"]] == 6 and attrs[slots["b"]] == 3


# -- the machine ---------------------------------------------------------------------------

ONE = ENGINE + """
workload { arrive batch(1); init { set p = 6; set o = 2; } }
session { set t0 = now; run engine prefill (p); run engine decode (o); observe response = now - t0; end; }
"""


def run(m: Machine, limit: int = 10_000) -> list:
    out = []
    for _ in range(limit):
        if m.done:
            return out
        for r in m.step():
            out.append(r)
            if isinstance(r, NeedSession):
                m.supply_init()
    raise AssertionError("the machine did not finish")


def test_one_request_s_iterations_worked_by_hand() -> None:
    # budget 8, chunk 4, cost 3 + 2·tokens: prefill 4 (11) then 2 (7), then two decodes (5 each)
    recs = run(Machine(serq.load(ONE)))
    its = [r for r in recs if isinstance(r, Iteration)]
    assert [(r.now, r.cost, r.tokens, r.prefilled, r.decoders) for r in its] == [
        (0, 11, 4, 4, 0), (11, 7, 2, 2, 0), (18, 5, 1, 0, 1), (23, 5, 1, 0, 1)]
    assert [r.demand for r in its] == [6, 2, 1, 1]  # the prompt left, then one token
    assert [r.served for r in its] == [0, 4, 6, 7]
    assert [r.attention for r in its] == [8, 2, 0, 0]  # n·n/2 per chunk without a growing hold
    assert all(r.arrived == 1 and r.residents == 1 for r in its)
    assert [r for r in recs if isinstance(r, (Observed, Ended))] == [Observed(0, 0, 28, 28), Ended(0, 28)]


def test_a_batch_asks_for_every_session_before_any_runs() -> None:
    p = serq.load(ONE.replace("batch(1)", "batch(3)"))
    m = Machine(p)
    assert m.step() == [NeedSession(0, 0)]
    m.supply_init()
    assert m.step() == [NeedSession(1, 0)]
    m.supply_init()
    assert m.step() == [NeedSession(2, 0)]
    m.supply_init()
    first = m.step()  # the three run: one iteration of the budget's 8 tokens, 4 + 4
    assert [(r.tokens, r.residents) for r in first if isinstance(r, Iteration)] == [(8, 3)]


def test_supply_answers_a_pending_arrival_only() -> None:
    m = Machine(serq.load(ONE))
    with pytest.raises(RuntimeError):
        m.supply((0,) * len(m._code.program.attributes))  # announced but not yet returned by step()
    assert isinstance(m.step()[0], NeedSession)
    with pytest.raises(RuntimeError):
        m.step()  # waits for supply()


def test_a_copy_goes_its_own_way() -> None:
    m = Machine(serq.load(ONE))
    m.step()
    m.supply_init()
    m.step()
    before = m.key()
    c = m.copy()
    run(c)
    assert c.done and not m.done and m.key() == before
    assert [r.now for r in run(m) if isinstance(r, Iteration)] == [11, 18, 23]


def test_a_growth_that_would_preempt_is_refused_when_it_happens() -> None:
    text = """
pool kv { cap 4; preempt lifo; }
stage engine : step { cost 1; memory kv; }
workload { arrive batch(1); }
session { hold kv (1) { run engine decode (8) growing kv; } }
"""
    with pytest.raises(Unsupported) as err:
        run(Machine(serq.load(text)))
    assert err.value.construct == "a preemption (`preempt lifo`)"


def test_a_guard_that_is_not_0_or_1_is_a_run_time_error() -> None:
    text = ("stage d : delay;\nworkload { arrive batch(1); init { set h = 0.5; } }\n"
            "session { branch (h * G) { run d (1); } }")
    assert run(Machine(serq.load(text.replace("G", "2"))))[-1] == Ended(0, 1)  # exactly 1: taken
    with pytest.raises(SerqRuntimeError, match="the guard is 3/2"):
        run(Machine(serq.load(text.replace("G", "3"))))


# -- the state key -------------------------------------------------------------------------

PERIODIC = """
pool reqs { cap 1; admit via engine; }
stage engine : step { budget 4; cost 1 + tokens; }
workload { arrive renewal(GAP); init { set p = 3; } }
session { set t0 = now; hold reqs (1) { run engine prefill (p); run engine decode (2); } observe r = now - t0; end; }
"""


def keys_at_arrivals(text: str, arrivals: int) -> list:
    m = Machine(serq.load(text), unbounded=True)
    keys = []
    while len(keys) < arrivals:
        for r in m.step():
            if isinstance(r, NeedSession):
                keys.append((r.time, m.key()))
                m.supply_init()
    return keys


def test_a_periodic_program_s_state_recurs_at_each_arrival() -> None:
    # each request: prefill 3 (cost 4), two decodes (cost 2 each): done 8 after it arrives, before the next
    keys = keys_at_arrivals(PERIODIC.replace("GAP", "10"), 5)
    assert [t for t, _k in keys] == [10, 20, 30, 40, 50]
    assert len({k for _t, k in keys}) == 1


def test_equal_keys_have_the_same_future_shifted_in_time() -> None:
    m = Machine(serq.load(PERIODIC.replace("GAP", "10")), unbounded=True)
    seen: dict = {}
    while True:
        recs = m.step()
        if recs and isinstance(recs[0], NeedSession):
            k = m.key()
            if k in seen:
                break
            seen[k] = m.copy()
            m.supply_init()
    earlier = seen[m.key()]
    shift = m.now - earlier.now
    assert shift == 10

    def future(x: Machine) -> list:
        start = x.now
        x.supply_init()
        out = []
        for _ in range(12):
            for r in x.step():
                if isinstance(r, NeedSession):
                    x.supply_init()
                out.append((type(r).__name__, x.now - start, getattr(r, "cost", None)))
        return out

    assert future(m.copy()) == future(earlier.copy())


def test_a_growing_queue_never_repeats_a_key() -> None:
    # an arrival every 2, each request holding the only slot for 8: the queue grows by one every 8
    keys = keys_at_arrivals(PERIODIC.replace("GAP", "2"), 30)
    assert len({k for _t, k in keys}) == 30


def test_a_program_that_reads_the_date_does_not_recur() -> None:
    dated = PERIODIC.replace("observe r = now - t0;", "observe r = now - t0; branch (now > 1000) { end; }")
    keys = keys_at_arrivals(dated.replace("GAP", "10"), 4)
    assert len({k for _t, k in keys}) == 4


def test_an_attribute_from_serial_read_later_enters_the_key() -> None:
    text = PERIODIC.replace("set p = 3;", "set p = serial * 0 + 3;").replace("GAP", "10")
    keys = keys_at_arrivals(text, 4)
    assert len({k for _t, k in keys}) == 4  # init reads `serial`: the next serial is in the key


@pytest.mark.skipif("only" not in {f.name for f in __import__("dataclasses").fields(ir.StepDecl)},
                    reason="`serve only` is not in this tree yet")
def test_serve_only_passes_a_resident_over() -> None:
    # only decoding residents take tokens while one decodes: the second prefill waits a turn
    text = """
stage engine : step { budget 8; cost 1; serve only (decoding || decoders == 0); }
workload { arrive batch(2); init { set p = serial == 0 ? 1 : 4; } }
session { run engine prefill (p); run engine decode (3); }
"""
    from test_exact_semantics import agree

    assert agree(serq.load(text), 1e6) > 0


def test_a_copy_at_any_step_continues_as_the_original_does() -> None:
    import random

    from test_exact_semantics import SHAPES

    for shape in ("kv_growing", "delay_turns", "queue_waited", "renewal", "exclusive"):
        text, _h = SHAPES[shape](random.Random(f"{shape}-3"))
        m = Machine(serq.load(text))
        history: list = []
        copies = []
        while not m.done:
            copies.append((len(history), m.copy(), m.key()))
            recs = m.step()
            if recs and isinstance(recs[0], NeedSession):
                m.supply_init()
            history.append(recs)
        assert len(history) > 10
        for at, c, k in copies[::3]:
            assert c.key() == k
            rest = []
            while not c.done:
                recs = c.step()
                if recs and isinstance(recs[0], NeedSession):
                    c.supply_init()
                rest.append(recs)
            assert rest == history[at:], f"{shape}: a copy made at step {at} went another way"


def test_the_iteration_hook_sees_the_state_as_the_batch_is_formed() -> None:
    # two requests on two slots: the hook reads the slot pool and the stage at each launch
    text = """
pool reqs { cap 1; admit via engine; }
stage engine : step { budget 8; cost 1; }
workload { arrive batch(2); init { set p = 2; } }
session { hold reqs (1) { run engine prefill (p); } }
"""
    seen = []
    m = Machine(serq.load(text))
    m.on_iteration = lambda mm, r: seen.append((r.now, mm.probe("holders", "pool", 0), mm.probe("queued", "pool", 0),
                                                 mm.probe("queue", "stage", 0)))
    run(m)
    # t0: the first admitted (the second waits: one slot); t1: the first's prefill done, its slot
    # given back at its end, the second admitted in the next iteration
    assert seen == [(0, 1, 1, 1), (1, 1, 0, 1)]

"""`hold … at admission (x = e, …)` (language §5.3): substitution into the
header, `set x = e;` for what the body reads, and the rules that go with it."""

from __future__ import annotations

from frontend_util import attr, fails, load, where

from serq import ir
from serq.ir import Attr, Binary, Call, Num, PoolRef, Probe


def test_bindings_are_substituted_into_units_reserve_reuse_and_cache():
    p = load("""
        pool kv { cap 100; }
        session { set prompt = 10;
          hold kv (hit) reserve (known) reuse (hit) at admission (known = prompt + 1, hit = min(cachedin(kv), known)) {
          } cache (known);
        }
    """)
    prompt = Attr(attr(p, "prompt"), "prompt")
    known = Binary("+", prompt, Num(1.0))
    hit = Call("min", (Probe("cachedin", PoolRef(0)), known))
    h = p.session[1]
    assert h.pools[0].units == hit and h.pools[0].reserve == known
    assert h.reuse == hit and h.cache == known
    assert h.body == ()
    assert "known" not in p.attributes and "hit" not in p.attributes


def test_a_binding_the_body_reads_is_set_at_the_top_of_the_body():
    p = load("""
        pool kv { cap 100; }
        session { set prompt = 10;
          hold kv (known) at admission (known = computed < prompt ? prompt : computed + 1) {
            observe k = known;
          }
        }
    """)
    known = attr(p, "known")
    h = p.session[1]
    assert h.body[0] == ir.Set(known, ir.Cond(Binary("<", Attr(ir.COMPUTED, "computed"), Attr(attr(p, "prompt"), "prompt")),
                                              Attr(attr(p, "prompt"), "prompt"),
                                              Binary("+", Attr(ir.COMPUTED, "computed"), Num(1.0))))
    assert h.body[1] == ir.Observe(0, Attr(known, "known"))


def test_a_binding_may_not_draw():
    err = fails("pool kv { cap 9; }\nsession { hold kv (x) at admission (x = ~exp(1)) { } }")
    assert err.message == "`x` draws a sample: the binding is substituted, so a name used twice would draw twice"
    assert where(err) == (2, 37)


def test_a_binding_may_not_read_a_later_one():
    err = fails("pool kv { cap 9; }\nsession { hold kv (a) at admission (a = b + 1, b = 2) { } }")
    assert err.message == "`a` reads `b`, which is bound after it" and where(err) == (2, 37)


def test_a_name_bound_twice_is_refused():
    err = fails("pool kv { cap 9; }\nsession { hold kv (a) at admission (a = 1, a = 2) { } }")
    assert err.message == "`a` is bound twice in one `at admission`" and where(err) == (2, 44)


def test_a_binding_the_body_reads_may_not_read_live_state():
    err = fails("pool kv { cap 9; }\nsession { hold kv (1) at admission (h = cachedin(kv)) { observe x = h; } }")
    assert err.message == ("the body reads `h`, and `h` reads `cachedin`; the body sees a binding that reads "
                           "only attributes and constants")
    assert err.helps == ["in the body read `cached`"] and where(err) == (2, 37)
    err = fails("pool kv { cap 9; }\nsession { hold kv (1) at admission (h = now) { observe x = h; } }")
    assert err.helps == ["name the value with a `set` in the body"]


def test_a_binding_the_body_reads_may_not_read_itself():
    err = fails("pool kv { cap 9; }\nsession { set x = 1; hold kv (1) at admission (x = x + 1) { observe y = x; } }")
    assert err.message == "the binding `x` reads itself"


def test_a_binding_the_body_reads_has_a_name_of_its_own():
    err = fails("pool kv { cap 9; }\nsession { hold kv (1) at admission (kv = 1) { observe y = kv; } }")
    assert err.message == "the body reads `kv`, which is also a pool" and err.helps == ["rename the binding"]
    err = fails("pool kv { cap 9; }\nsession { hold kv (1) at admission (serial = 1) { observe y = serial; } }")
    assert err.message == "the body reads `serial`, which is also an attribute the scheduler sets"
    err = fails("pool kv { cap 9; }\nsession { set z = 2; hold kv (1) at admission (z = 1) { observe y = z; } }")
    assert err.message == "the body reads `z`, which is also an attribute the program `set`s elsewhere"
    err = fails("let c = 2; pool kv { cap 9; }\nsession { hold kv (1) at admission (c = 1) { observe y = c; } }")
    assert err.message == "the body reads `c`, which is also a `let` constant"


def test_a_binding_the_body_reads_is_read_nowhere_else():
    err = fails("pool kv { cap 9; }\nsession { hold kv (1) at admission (x = 1) { observe y = x; }\n  observe z = x; }")
    assert err.message == "`x` is read outside the body of the hold that binds it" and where(err) == (3, 15)


def test_a_binding_the_body_does_not_read_leaves_no_attribute():
    p = load("pool kv { cap 9; } session { hold kv (hit) at admission (hit = 2) { observe hit = 1; } }")
    assert "hit" not in p.attributes
    assert p.session[0].pools[0].units == Num(2.0)

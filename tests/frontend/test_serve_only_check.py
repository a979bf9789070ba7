"""`serve only (P)` in the front end: its grammar, its place in the IR beside
`serve`, and every static error at its `line:col`."""

from __future__ import annotations

import pytest
from frontend_util import fails, load, where

from serq import ir


def stage(clauses: str) -> str:
    """A step stage `e` with `clauses` on line 2, and sessions with a visible
    attribute `prio` and a hidden one `secret`."""
    return f"""stage e : step {{ cost 1;
  {clauses} }}
workload {{ hidden secret; arrive batch(1); init {{ set prio = 1; set secret = 2; }} }}
session {{ run e prefill (3); run e decode (4); end; }}
"""


def step(clauses: str) -> ir.StepDecl:
    decl = load(stage(clauses)).stages[0].step
    assert decl is not None
    return decl


def test_serve_only_is_a_field_of_its_own_beside_the_order() -> None:
    s = step("serve only (decoders > 0 ? decoding : !decoding);")
    assert s.serve == "admission"
    assert s.only == ir.Cond(ir.Binary(">", ir.Ctx("decoders"), ir.Num(0.0)), ir.Ctx("decoding"),
                             ir.Unary("!", ir.Ctx("decoding")))
    assert step("").only is None


@pytest.mark.parametrize("clauses, serve", [
    ("serve only (decoding); serve decode first;", "decode_first"),
    ("serve exclusive prefill; serve only (decoding);", "exclusive_prefill"),
    ("serve only (decoding) decode first;", "decode_first"),
    ("serve only (decoding) admission;", "admission"),
])
def test_serve_only_combines_with_every_order(clauses: str, serve: str) -> None:
    s = step(clauses)
    assert (s.serve, s.only) == (serve, ir.Ctx("decoding"))


def test_serve_only_with_by_keeps_the_keys_as_the_order() -> None:
    s = step("serve only (prio > 0) by (remaining, -admission);")
    assert s.only == ir.Binary(">", ir.Attr(s.only.a.slot, "prio"), ir.Num(0.0))  # type: ignore[union-attr]
    assert s.serve == (ir.Ctx("remaining"), ir.Unary("-", ir.Ctx("admission")))


def test_serve_only_reads_the_budget_totals_and_the_residents_own_values() -> None:
    s = step("serve only (kv_decode + kv_prefill >= 0 && residents >= decoders && remaining > 0 && admission >= 0);")
    assert s.only is not None


ERRORS = [
    ("a draw", "serve only (~uniform(0, 1) < 0.5);",
     "stage `e`: `serve only` may not draw: it is read for every resident at every iteration", 15),
    ("a hidden attribute", "serve only (secret > 0);",
     "stage `e`: `secret` is hidden from the scheduler, but is read in a step stage's serve keys or `serve only`", 15),
    ("tokens", "serve only (decoding || tokens > 0);",
     "stage `e`: `tokens` is read in a step stage's serve keys or `serve only`, but it exists only in a step "
     "stage's cost, after the iteration", 27),
    ("prefilled", "serve only (prefilled == 0);",
     "stage `e`: `prefilled` is read in a step stage's serve keys or `serve only`, but it exists only in a step "
     "stage's cost, after the iteration", 15),
    ("an unknown name", "serve only (prioo > 0);", "stage `e`: unknown name `prioo`", 15),
    ("the clock", "serve only (decoding || now > 5);",
     "stage `e`: `serve only` may not read `now`: it is read again when something happens, and time passing "
     "is not an event", 27),
    ("a constant that is not a test", "serve only (2);",
     "stage `e`: `serve only` is a test, 0 or 1, and this one is always 2", 15),
    ("serve only twice", "serve only (decoding); serve only (1);", "`serve only` is given twice in stage `e`", 26),
    ("an order twice", "serve only (decoding) by (remaining); serve admission;",
     "a step stage serves its residents in one way: `serve` is given twice", 41),
    ("no parentheses", "serve only decoding;", "expected `(`, found `decoding`", 14),
    ("a misspelt only", "serve onyl (decoding);",
     "expected `admission`, `decode first`, `exclusive prefill`, `exclusive prefills`, `by (keys)` or `only (P)` after `serve`, found `onyl`",
     9),
]


@pytest.mark.parametrize("clauses, message, col", [pytest.param(c, m, k, id=n) for n, c, m, k in ERRORS])
def test_serve_only_errors_are_located(clauses: str, message: str, col: int) -> None:
    err = fails(stage(clauses))
    assert err.message == message
    assert where(err) == (2, col)


def test_an_unknown_name_in_serve_only_suggests_the_attribute() -> None:
    err = fails(stage("serve only (prioo > 0);"))
    assert err.helps == ["did you mean `prio`?"]


def test_a_def_may_not_be_named_only() -> None:
    err = fails("def only(x) = x;")
    assert "only" in err.message

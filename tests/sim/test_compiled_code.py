"""A program's expressions are compiled once per distinct source text in a
process (issue 42, item 3: start-up).

A simulator writes Python source for each expression it evaluates
(``serq.expr.compile_expr``), for its gauges and for the session's body; the
code object of a text is kept (``serq.expr.code_of``) and evaluated again in
each simulator's own namespace.  These tests hold that the functions made from
one code object compute what the expression says in each namespace, and that
a bundled program costs a handful of ``compile()`` calls, none on a second run
in the same process, and as many for 16 replicas as for 2.
"""

from __future__ import annotations

import builtins
import math
from pathlib import Path
from typing import Any

import pytest

import serq
from serq import expr, ir
from serq.expr import Frame, base_namespace, compile_expr

ROOT = Path(__file__).resolve().parents[2]


class Ctx:
    """What ``lambda c: …`` reads: the attributes and a context variable."""

    def __init__(self, a: list[float], tokens: float) -> None:
        self.a = a
        self.tokens = tokens


def _a(slot: int) -> ir.Attr:
    return ir.Attr(slot, f"x{slot}")


def _n(v: float) -> ir.Num:
    return ir.Num(v)


#: expressions over a[0] = 3, a[1] = 0.5, tokens = 7, each with its value worked out by hand
SPREAD: list[tuple[ir.Expr, float]] = [
    (ir.Binary("+", _a(0), _a(1)), 3.5),
    (ir.Binary("-", _a(1), _a(0)), -2.5),
    (ir.Binary("*", ir.Ctx("tokens"), _a(1)), 3.5),
    (ir.Binary("/", _a(0), _n(0.0)), math.inf),  # IEEE: no exception
    (ir.Binary("/", _a(0), _a(1)), 6.0),
    (ir.Binary("^", _a(0), _n(2.0)), 9.0),
    (ir.Binary("<", _a(1), _a(0)), 1.0),
    (ir.Binary(">=", _a(1), _a(0)), 0.0),
    (ir.Binary("&&", _a(0), _n(0.0)), 0.0),
    (ir.Binary("||", _a(0), _n(0.0)), 1.0),
    (ir.Unary("-", _a(0)), -3.0),
    (ir.Unary("!", _a(1)), 0.0),
    (ir.Cond(ir.Binary("==", _a(0), _n(3.0)), ir.Ctx("tokens"), _n(-1.0)), 7.0),
    (ir.Call("max", (_a(0), ir.Ctx("tokens"))), 7.0),
    (ir.Call("min", (_a(0), ir.Ctx("tokens"))), 3.0),
    (ir.Call("floor", (_a(1),)), 0.0),
    (ir.Call("ceil", (_a(1),)), 1.0),
    (ir.Call("sqrt", (_n(16.0),)), 4.0),
    (ir.Call("abs", (ir.Unary("-", _a(0)),)), 3.0),
    (ir.Binary("+", ir.Binary("*", _n(2e-9), ir.Ctx("tokens")), _n(0.0002)), 0.0002 + 2e-9 * 7.0),
]


class Counter:
    """``builtins.compile``, counting its calls on the simulator's sources (``<serq …>``;
    not an import's, which compiles a module whose bytecode is not written)."""

    def __init__(self) -> None:
        self.calls = 0
        self.inner = builtins.compile

    def __call__(self, source: Any, filename: Any, *args: Any, **kw: Any) -> Any:
        if str(filename).startswith("<serq"):
            self.calls += 1
        return self.inner(source, filename, *args, **kw)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """An empty store of code objects and a counted ``compile``."""
    counter = Counter()
    monkeypatch.setattr(expr, "_CODE", {})
    monkeypatch.setattr(builtins, "compile", counter)
    return counter


def test_an_expression_compiled_once_computes_its_value_in_each_namespace(counted: Counter) -> None:
    first = [compile_expr(e, Frame(base_namespace())) for e, _ in SPREAD]
    after_first = counted.calls
    second = [compile_expr(e, Frame(base_namespace())) for e, _ in SPREAD]
    assert after_first == len(SPREAD)
    assert counted.calls == after_first  # the second namespace compiles nothing
    c = Ctx([3.0, 0.5], 7.0)
    for (e, want), f1, f2 in zip(SPREAD, first, second):
        assert f1 is not f2 and f1.__code__ is f2.__code__
        assert f1(c) == want and f2(c) == want, e


def test_a_shared_code_object_reads_each_namespace_s_own_bindings(counted: Counter) -> None:
    class Box:
        def __init__(self, v: float) -> None:
            self.v = v

    functions = []
    for v in (2.0, 5.0):
        f = Frame(base_namespace())
        name = f.bind(Box(v), "B")  # the same name in each namespace: the same text
        functions.append(eval(expr.code_of(f"lambda c: {name}.v * c.tokens", "<serq expr>", "eval"), f.ns))
    assert counted.calls == 1
    assert [fn(Ctx([], 3.0)) for fn in functions] == [6.0, 15.0]


def test_the_store_of_code_objects_is_emptied_when_full(counted: Counter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expr, "_CODE_LIMIT", 3)
    for k in range(4):
        expr.code_of(f"lambda c: {k}.0", "<serq expr>", "eval")
    assert len(expr._CODE) == 1 and counted.calls == 4
    expr.code_of("lambda c: 3.0", "<serq expr>", "eval")
    assert counted.calls == 4


def _run(program: Any) -> serq.Report:
    return serq.run(program, horizon=5, warmup=0, max_events=200_000)


def test_vllm_compiles_a_handful_of_sources_and_none_the_second_time(counted: Counter) -> None:
    program = serq.load(ROOT / "programs/multi-turn/vllm.sq")
    first = _run(program)
    # the session's body and the step stage's expressions (budget, chunk, cost, the holds' units)
    assert 1 <= counted.calls <= 8
    n = counted.calls
    second = _run(program)
    assert counted.calls == n
    assert second.text() == first.text()


def test_a_cluster_compiles_as_many_sources_for_32_replicas_as_for_16(counted: Counter) -> None:
    # (from 8 replicas on, an aggregate gauge keeps its terms: serq/sim/gauge_terms.py, one compile each)
    calls = []
    for n in (16, 32):
        expr._CODE.clear()
        before = counted.calls
        _run(serq.load(ROOT / "programs/cluster/agents.sq", sets={"N": str(n)}))
        calls.append(counted.calls - before)
    assert calls[0] == calls[1]
    assert calls[0] <= 24

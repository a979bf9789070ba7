"""Claims proved for every workload by induction over the iterations.

A claim ``every iteration of S (α·served + β <= γ·now + δ)`` with α, γ ≥ 0 —
a token-rate bound, as in Dai et al.'s Theorem 2(a) and Bari et al.'s
Theorem 1 — holds on every path of every workload when

* it holds at the first iteration (``served`` is 0 and ``now`` ≥ 0: β ≤ δ), and
* every iteration pays for its tokens: α·tokens ≤ γ·cost for every number of
  tokens an iteration can schedule (0 to the budget),

because the next iteration of S starts no earlier than this one ends
(``now`` grows by at least ``cost``) and ``served`` grows by exactly
``tokens``.  The second condition is decided exactly when ``cost`` reads only
``tokens``: the cost is then linear between the points where a ``ceil`` or
``floor`` inside it steps, so checking it at those points and at the limits
on either side of each is checking it everywhere.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from .. import ir
from ..expr import walk
from .exact import Env, Unsupported, compiled, exact, shown

#: the most pieces the cost is checked on
MAX_PIECES = 100_000


class _Lin:
    """``a·served + b·now + c`` (exact)."""

    __slots__ = ("s", "n", "c")

    def __init__(self, s: Any = 0, n: Any = 0, c: Any = 0) -> None:
        self.s, self.n, self.c = Fraction(s), Fraction(n), Fraction(c)


class _NotLinear(Exception):
    pass


def _lin(e: ir.Expr) -> _Lin:
    if isinstance(e, ir.Num):
        return _Lin(c=exact(e.value))
    if isinstance(e, ir.Ctx) and e.name == "served":
        return _Lin(s=1)
    if isinstance(e, ir.Ctx) and e.name == "now":
        return _Lin(n=1)
    if isinstance(e, ir.Unary) and e.op == "-":
        x = _lin(e.x)
        return _Lin(-x.s, -x.n, -x.c)
    if isinstance(e, ir.Binary) and e.op in ("+", "-"):
        a, b = _lin(e.a), _lin(e.b)
        k = 1 if e.op == "+" else -1
        return _Lin(a.s + k * b.s, a.n + k * b.n, a.c + k * b.c)
    if isinstance(e, ir.Binary) and e.op == "*":
        a, b = _lin(e.a), _lin(e.b)
        if a.s == a.n == 0:
            return _Lin(a.c * b.s, a.c * b.n, a.c * b.c)
        if b.s == b.n == 0:
            return _Lin(b.c * a.s, b.c * a.n, b.c * a.c)
    if isinstance(e, ir.Binary) and e.op == "/":
        a, b = _lin(e.a), _lin(e.b)
        if b.s == b.n == 0 and b.c != 0:
            return _Lin(a.s / b.c, a.n / b.c, a.c / b.c)
    raise _NotLinear


def rate_form(claim: ir.Claim) -> tuple[Fraction, Fraction, Fraction] | None:
    """``(α, γ, δ − β)`` when the claim is ``α·served + β <= γ·now + δ`` with α, γ ≥ 0."""
    e = claim.expr
    if claim.kind != "every" or not isinstance(e, ir.Binary) or e.op not in ("<=", ">="):
        return None
    lhs, rhs = (e.a, e.b) if e.op == "<=" else (e.b, e.a)
    try:
        d = _lin(ir.Binary("-", rhs, lhs))  # rhs − lhs ≥ 0: γ·now − α·served + (δ − β)
    except (_NotLinear, Unsupported):  # (a number with no exact value, inf or NaN: the exploration says so)
        return None
    alpha, gamma = -d.s, d.n
    if alpha < 0 or gamma < 0:
        return None
    return alpha, gamma, d.c


def prove_by_induction(p: ir.Program, claim: ir.Claim) -> str | None:
    """Why ``claim`` holds on every path of every workload, or None when this
    argument does not apply (or does not go through)."""
    form = rate_form(claim)
    if form is None or claim.stage is None:
        return None
    alpha, gamma, slack = form
    if slack < 0:
        return None  # fails, or not provable so, at a first iteration at time 0
    st = p.stages[claim.stage.stage]
    step = st.step
    if step is None:
        return None
    reads = {x.name for x in walk(step.cost) if isinstance(x, ir.Ctx)}
    if reads - {"tokens"} or any(isinstance(x, (ir.Attr, ir.Probe, ir.Draw)) for x in walk(step.cost)):
        return None
    if not isinstance(step.budget, ir.Num) or not math.isfinite(step.budget.value) or step.budget.value <= 0:
        return None
    budget = exact(step.budget.value)
    try:
        _degree(step.cost)
        cost = compiled(step.cost)
        points = _breakpoints(step.cost, budget)
    except (Unsupported, _NotLinear, ZeroDivisionError):
        return None
    if points is None:
        return None

    def margin(t: Fraction) -> Fraction:
        c = Fraction(cost(Env((), {"tokens": t})))
        return gamma * max(c, Fraction(0)) - alpha * t  # (an iteration's time is its cost, or 0 below 0)

    for a, b in zip(points, points[1:]):
        u, v = a + (b - a) / 3, a + 2 * (b - a) / 3
        fu, fv = margin(u), margin(v)
        # linear on (a, b): its limits at both ends, and its value at b
        if 2 * fu - fv < 0 or 2 * fv - fu < 0 or margin(b) < 0:
            return None
    return (f"by induction over the iterations, for every workload: each iteration of `{st.name}` of t tokens "
            f"lasts at least {shown(alpha / gamma) if gamma else '0'}·t (checked for every t up to the budget "
            f"{shown(budget)}), and the claim holds when nothing has been served")


def _degree(e: ir.Expr) -> int:
    """0 when ``e`` is constant in ``tokens`` between the steps of its floors and ceils, 1
    when linear there; anything else (a product of two such linear parts) is refused."""
    if isinstance(e, ir.Ctx):
        return 1 if e.name == "tokens" else 0
    if isinstance(e, ir.Call) and e.fn in ("floor", "ceil"):
        if _tok_lin(e.args[0]) is None:
            raise _NotLinear
        return 0
    if isinstance(e, ir.Call):
        raise _NotLinear  # min, max, abs, sqrt …: not followed
    if isinstance(e, ir.Binary):
        a, b = _degree(e.a), _degree(e.b)
        if e.op in ("+", "-"):
            return max(a, b)
        if e.op == "*" and a + b <= 1:
            return a + b
        if e.op == "/" and b == 0:
            return a
        raise _NotLinear
    if isinstance(e, ir.Unary) and e.op == "-":
        return _degree(e.x)
    if isinstance(e, ir.Num):
        return 0
    raise _NotLinear


def _breakpoints(cost: ir.Expr, budget: Fraction) -> list[Fraction] | None:
    """0, the budget, and every t in between where a ``ceil``/``floor`` of the cost steps."""
    pts = {Fraction(0), budget}
    for x in walk(cost):
        if isinstance(x, ir.Call) and x.fn in ("min", "max"):
            raise _NotLinear  # (crossings not followed)
        if isinstance(x, ir.Call) and x.fn in ("floor", "ceil"):
            arg = _tok_lin(x.args[0])
            if arg is None:
                raise _NotLinear
            a, c = arg  # a·t + c
            if a == 0:
                continue
            lo, hi = sorted((c, a * budget + c))
            n0, n1 = math.ceil(lo), math.floor(hi)
            if n1 - n0 > MAX_PIECES:
                return None
            for n in range(n0, n1 + 1):
                t = (n - c) / a
                if 0 <= t <= budget:
                    pts.add(t)
    return sorted(pts)


def _tok_lin(e: ir.Expr) -> tuple[Fraction, Fraction] | None:
    """``a·tokens + c`` of an expression linear in tokens, or None."""
    if isinstance(e, ir.Num):
        return Fraction(0), exact(e.value)
    if isinstance(e, ir.Ctx) and e.name == "tokens":
        return Fraction(1), Fraction(0)
    if isinstance(e, ir.Unary) and e.op == "-":
        x = _tok_lin(e.x)
        return None if x is None else (-x[0], -x[1])
    if isinstance(e, ir.Binary) and e.op in ("+", "-", "*", "/"):
        a, b = _tok_lin(e.a), _tok_lin(e.b)
        if a is None or b is None:
            return None
        if e.op == "+":
            return a[0] + b[0], a[1] + b[1]
        if e.op == "-":
            return a[0] - b[0], a[1] - b[1]
        if e.op == "*" and (a[0] == 0 or b[0] == 0):
            return a[1] * b[0] + b[1] * a[0], a[1] * b[1]
        if e.op == "/" and b[0] == 0 and b[1] != 0:
            return a[0] / b[1], a[1] / b[1]
    return None

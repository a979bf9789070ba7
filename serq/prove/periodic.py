"""A claim over a path that repeats: is it true for every repetition?

When a deterministic path's state recurs (up to a shift of time), its
iterations from then on are those of one period again and again, the k-th
repetition reading ``now + k·T``, ``served + k·S`` and ``arrived + k·A`` and
everything else as in the first.  A claim's expression is then a function of
the whole number k ≥ 0.  Every comparison in it is between affine functions
of k, each of which changes its outcome at one point at most; between those
points nothing changes.  So the claim holds for every k when it holds at each
such point, at its neighbours and at one k past them all — finitely many
exact evaluations.  A product of two quantities that both grow with k (a
claim quadratic in time) is outside this and reported so.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable

from .. import ir

#: the context variables that grow with the repetitions
GROWING = ("now", "served", "arrived")


class Nonlinear(Exception):
    """The claim is not affine in the number of repetitions."""


class _Affine:
    __slots__ = ("c", "k")

    def __init__(self, c: Any, k: Any = 0) -> None:
        self.c, self.k = c, k


def _forms(e: ir.Expr, base: Callable[[ir.Expr], Any], delta: dict[str, Any],
           cuts: set[Fraction]) -> list[_Affine]:
    """The affine forms ``e`` may take (one per branch of its conditionals),
    collecting in ``cuts`` the k where a comparison inside changes."""
    if isinstance(e, ir.Ctx) and e.name in delta:
        return [_Affine(base(e), delta[e.name])]
    if isinstance(e, (ir.Num, ir.Ctx, ir.Probe, ir.Attr)):
        return [_Affine(base(e))]
    if isinstance(e, ir.Unary):
        xs = _forms(e.x, base, delta, cuts)
        if e.op == "-":
            return [_Affine(-x.c, -x.k) for x in xs]
        return [_Affine(0), _Affine(1)]
    if isinstance(e, ir.Binary):
        a = _forms(e.a, base, delta, cuts)
        b = _forms(e.b, base, delta, cuts)
        op = e.op
        if op in ("+", "-"):
            s = 1 if op == "+" else -1
            return [_Affine(x.c + s * y.c, x.k + s * y.k) for x in a for y in b]
        if op == "*":
            out = []
            for x in a:
                for y in b:
                    if x.k and y.k:
                        raise Nonlinear("a product of two quantities that grow with time")
                    out.append(_Affine(x.c * y.c, x.c * y.k + x.k * y.c))
            return out
        if op == "/":
            out = []
            for x in a:
                for y in b:
                    if y.k:
                        raise Nonlinear("a division by a quantity that grows with time")
                    if y.c == 0:
                        raise Nonlinear("a division by zero")
                    out.append(_Affine(Fraction(x.c) / y.c, Fraction(x.k) / y.c))
            return out
        if op in ("<", "<=", ">", ">=", "==", "!="):
            for x in a:
                for y in b:
                    _cut(x.c - y.c, x.k - y.k, cuts)
            return [_Affine(0), _Affine(1)]
        if op in ("&&", "||"):
            return [_Affine(0), _Affine(1)]
        raise Nonlinear(f"the operator `{op}`")
    if isinstance(e, ir.Cond):
        _forms(e.c, base, delta, cuts)
        return _forms(e.a, base, delta, cuts) + _forms(e.b, base, delta, cuts)
    if isinstance(e, ir.Call) and e.fn in ("min", "max"):
        args = [_forms(x, base, delta, cuts) for x in e.args]
        flat = [f for fs in args for f in fs]
        for i, x in enumerate(flat):
            for y in flat[i + 1:]:
                _cut(x.c - y.c, x.k - y.k, cuts)
        return flat
    if isinstance(e, ir.Call) and e.fn == "abs":
        xs = _forms(e.args[0], base, delta, cuts)
        for x in xs:
            _cut(x.c, x.k, cuts)
        return xs + [_Affine(-x.c, -x.k) for x in xs]
    if isinstance(e, ir.Call) and e.fn in ("floor", "ceil"):
        xs = _forms(e.args[0], base, delta, cuts)
        out = []
        for x in xs:
            if x.k == 0:
                out.append(_Affine(math.floor(x.c) if e.fn == "floor" else math.ceil(x.c)))
            elif Fraction(x.k).denominator == 1:
                out.append(_Affine(math.floor(x.c) if e.fn == "floor" else math.ceil(x.c), x.k))
            else:
                raise Nonlinear(f"`{e.fn}` of a quantity that grows by a fraction each period")
        return out
    raise Nonlinear(f"`{getattr(e, 'fn', type(e).__name__)}`")


def _cut(c: Any, k: Any, cuts: set[Fraction]) -> None:
    if k:
        r = Fraction(-c) / Fraction(k)
        if r >= 0:
            cuts.add(r)


def repetitions_to_check(e: ir.Expr, base: Callable[[ir.Expr], Any], delta: dict[str, Any]) -> list[int]:
    """The k ≥ 0 at which evaluating ``e`` decides it for every k (module docstring);
    ``base(x)`` is a leaf's value in the first period, ``delta`` what each growing
    context variable gains a period."""
    cuts: set[Fraction] = set()
    _forms(e, base, delta, cuts)
    ks = {0, 1}
    for r in cuts:
        f = math.floor(r)
        ks.update(x for x in (f - 1, f, f + 1, f + 2) if x >= 0)
    ks.add(max(ks) + 1)
    return sorted(ks)

"""Expressions over exact numbers: integers and :class:`fractions.Fraction`.

The simulator evaluates a program's expressions in 64-bit floats
(:mod:`serq.expr`); the exact reference semantics evaluates the same trees
over the rationals, so that a verdict of ``serq prove`` never depends on a
rounding.  A number the program wrote is taken as the user wrote it
(:func:`exact`: ``2e-5`` is 1/50000, not the nearest double).

Values are *normalised rationals*: a Python ``int`` when the value is whole,
else a ``Fraction`` (both are ``numbers.Rational``; they compare, hash and
add together exactly, and an ``int`` has ``numerator`` and ``denominator``
too).  Whole numbers stay ``int`` because the quantities of a serving run
(tokens, units, most costs) are whole and ``int`` arithmetic is some twenty
times faster than ``Fraction``'s.

What has no exact value is refused with :class:`Unsupported` naming the
construct: ``sqrt``, ``exp``, ``ln``, a power with a fractional exponent, a
division by zero, an infinite number.  A draw is the caller's business
(:meth:`Env.draw`): the explorer enumerates its values.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import Any, Callable, Union

from .. import ir

#: An exact number: an ``int`` when whole, else a ``Fraction`` (see the module's docstring).
Q = Union[int, Fraction]


class Unsupported(Exception):
    """A construct outside the exact fragment: ``construct`` names it (``"a `ps`
    stage"``, ``"`sqrt`"``), ``label`` says where when the IR knows (a
    statement's label or a clause's site), else ``""``."""

    def __init__(self, construct: str, label: str = "") -> None:
        where = f" ({label})" if label else ""
        super().__init__(f"{construct}{where} is outside the exact fragment")
        self.construct = construct
        self.label = str(label)


def norm(x: Any) -> Q:
    """``x`` (an int or a Fraction) as a normalised rational: an int when whole."""
    if x.__class__ is int:
        return x  # type: ignore[no-any-return]
    if x.__class__ is float:  # ±inf: `largest`/`smallest` of an observation without samples, at end
        return x  # type: ignore[no-any-return,return-value]
    if x.denominator == 1:
        return int(x.numerator)
    return x  # type: ignore[no-any-return]


def exact(x: float) -> Fraction:
    """A program's number as the user wrote it: ``Fraction(repr(x))`` (the
    shortest decimal that reads back as ``x``), so ``2e-5`` is 1/50000.
    An infinite or NaN number has no exact value: :class:`Unsupported`."""
    if not math.isfinite(x):
        raise Unsupported(f"the number {x!r}")
    return Fraction(repr(float(x)))


def number(x: float) -> Q:
    """:func:`exact`, normalised (an int when whole)."""
    if x.__class__ is int:
        return x  # type: ignore[return-value]
    if x == x and x not in (math.inf, -math.inf) and x == int(x) and abs(x) < 2**53:
        return int(x)
    return norm(exact(x))


def shown(x: Any, exact: bool = False) -> str:
    """An exact number as a verdict gives it: a whole number in full (of up to
    15 digits), else six significant digits (``0.333333``; ``1e+320`` and
    ``1e-320`` from the integers, where a float would overflow or lose
    digits).  With ``exact``, a value is given exactly where that takes at
    most :data:`EXACT_CHARS` characters, followed by the six digits where
    they are not the same (``1/3 (≈ 0.333333)``), and by them alone, after a
    ``≈``, where it takes more."""
    x = Fraction(x)
    whole = x.denominator == 1
    text = str(x)  # (a whole Fraction's is its numerator's)
    if whole and (abs(x.numerator) < 10**15 or (exact and len(text) <= EXACT_CHARS)):
        return text
    try:
        f = float(x)
    except OverflowError:
        f = math.inf
    if f and abs(f) < math.inf and not abs(f) < sys.float_info.min:
        approx = f"{f:g}"
        same = Fraction(f) == x and Fraction(approx) == x
    else:
        approx, same = _scientific(x), False  # (past the largest float, or below the least normal one)
    if not exact or same:
        return approx
    return f"{text} (≈ {approx})" if len(text) <= EXACT_CHARS else f"≈ {approx}"


#: the longest exact value a verdict gives (``shown``); a longer one is given to six digits
EXACT_CHARS = 40


def _scientific(x: Fraction) -> str:
    """``x`` (not 0) to six significant digits, as ``%g`` writes a large or small number."""
    sign = "-" if x < 0 else ""
    x = abs(x)
    e = len(str(x.numerator)) - len(str(x.denominator))  # (within one of the exponent)
    while x >= Fraction(10) ** (e + 1):
        e += 1
    while x < Fraction(10) ** e:
        e -= 1
    digits = round(x * Fraction(10) ** (5 - e))  # six digits (ties to even), or 10^6 when x rounds up
    if digits >= 10**6:
        digits //= 10
        e += 1
    head = str(digits).rstrip("0")
    mantissa = head[0] + ("." + head[1:] if len(head) > 1 else "")
    return f"{sign}{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"


class Env:
    """What an expression reads: ``attrs`` (the session's attribute values by
    slot; empty where there is no session), ``ctx`` (context variables by
    name: ``now``, ``tokens``, ``waited`` …), :meth:`probe` for the
    observable functions of pools and stages and :meth:`draw` for a draw.
    The defaults refuse both; the machine and the explorer override them."""

    __slots__ = ("attrs", "ctx")

    def __init__(self, attrs: Any = (), ctx: dict[str, Q] | None = None) -> None:
        self.attrs = attrs
        self.ctx = {} if ctx is None else ctx

    def probe(self, fn: str, target_kind: str, index: int) -> Q:
        """``fn`` of pool (``target_kind == "pool"``) or stage ``index`` (a declaration index)."""
        raise Unsupported(f"`{fn}` of a {target_kind}")

    def draw(self, e: ir.Draw) -> Q:
        """A value of the draw ``e`` (the explorer's choice)."""
        raise Unsupported(f"`~{e.dist}`")


def evaluate(e: ir.Expr, env: Env) -> Fraction:
    """The exact value of ``e`` read in ``env``, as a ``Fraction``: ``+ - * /``,
    comparisons, ``&& || !`` (0 or 1, any non-zero is true), ``?:``, ``min max
    abs floor ceil``, a power with a whole exponent; :class:`Unsupported` for
    ``sqrt exp ln``, a fractional exponent, a division by zero, an infinite
    number.  A draw is ``env.draw(e)``."""
    return Fraction(compiled(e)(env))


#: An expression compiled into a function of an :class:`Env` giving a normalised rational.
Fn = Callable[[Env], Q]

_CACHE: dict[int, tuple[ir.Expr, Fn]] = {}


def compiled(e: ir.Expr) -> Fn:
    """``e`` as a closure over an :class:`Env` (compiled once per expression
    object: the machine evaluates the same trees millions of times)."""
    got = _CACHE.get(id(e))
    if got is not None and got[0] is e:
        return got[1]
    fn = _compile(e)
    _CACHE[id(e)] = (e, fn)  # (the tree is kept: its id is not reused while cached)
    return fn


def _refuse(construct: str) -> Fn:
    def fn(env: Env) -> Q:
        raise Unsupported(construct)
    return fn


def add(a: Q, b: Q) -> Q:
    r = a + b
    return r if r.__class__ is int else norm(r)


def sub(a: Q, b: Q) -> Q:
    r = a - b
    return r if r.__class__ is int else norm(r)


def mul(a: Q, b: Q) -> Q:
    r = a * b
    return r if r.__class__ is int else norm(r)


def div(a: Q, b: Q) -> Q:
    if b == 0:
        raise Unsupported("a division by zero")
    if a.__class__ is int and b.__class__ is int:
        if a % b == 0:  # type: ignore[operator]
            return a // b  # type: ignore[operator]
        return Fraction(a, b)
    return norm(Fraction(a) / b)


def power(a: Q, b: Q) -> Q:
    if b.__class__ is not int:
        raise Unsupported("a power with a fractional exponent")
    if a == 0 and b < 0:  # type: ignore[operator]
        raise Unsupported("a division by zero")
    if abs(b) > 4096:  # type: ignore[arg-type]
        raise Unsupported("a power with an exponent beyond 4096")
    return norm(Fraction(a) ** b)  # type: ignore[operator]


def _abs(x: Q) -> Q:
    return -x if x < 0 else x


def floor(x: Q) -> int:
    return x if x.__class__ is int else math.floor(x)  # type: ignore[return-value]


def ceil(x: Q) -> int:
    return x if x.__class__ is int else math.ceil(x)  # type: ignore[return-value]


_ARITH = {"+": add, "-": sub, "*": mul, "/": div, "^": power}
_CMP: dict[str, Callable[[Q, Q], int]] = {
    "<": lambda a, b: 1 if a < b else 0,
    "<=": lambda a, b: 1 if a <= b else 0,
    ">": lambda a, b: 1 if a > b else 0,
    ">=": lambda a, b: 1 if a >= b else 0,
    "==": lambda a, b: 1 if a == b else 0,
    "!=": lambda a, b: 1 if a != b else 0,
}
_POOL_PROBES = frozenset({"used", "free", "holders", "queued"})
_STAGE_PROBES = frozenset({"queue", "busy", "work", "budget_left"})


def probe_supported(p: ir.Probe) -> str | None:
    """Why a probe is outside the fragment (None: it is inside)."""
    t = p.target
    if t.index is not None:
        return f"a member of a {'pool' if isinstance(t, ir.PoolRef) else 'stage'} array"
    ok = _POOL_PROBES if isinstance(t, ir.PoolRef) else _STAGE_PROBES
    if p.fn not in ok:
        return f"`{p.fn}`"
    return None


def _compile(e: ir.Expr) -> Fn:
    if isinstance(e, ir.Num):
        if not math.isfinite(e.value):
            return _refuse(f"the number {e.value!r}")
        v = number(e.value)
        return lambda env: v
    if isinstance(e, ir.Attr):
        slot = e.slot
        return lambda env: env.attrs[slot]
    if isinstance(e, ir.Ctx):
        name = e.name

        def ctx(env: Env) -> Q:
            try:
                return env.ctx[name]
            except KeyError:
                raise Unsupported(f"`{name}` here") from None
        return ctx
    if isinstance(e, ir.Unary):
        x = _compile(e.x)
        if e.op == "-":
            return lambda env: -x(env)
        return lambda env: 1 if x(env) == 0 else 0
    if isinstance(e, ir.Binary):
        a, b = _compile(e.a), _compile(e.b)
        op = e.op
        if op == "&&":
            return lambda env: 1 if a(env) != 0 and b(env) != 0 else 0
        if op == "||":
            return lambda env: 1 if a(env) != 0 or b(env) != 0 else 0
        if op in _CMP:
            test = _CMP[op]
            return lambda env: test(a(env), b(env))
        f = _ARITH[op]
        return lambda env: f(a(env), b(env))
    if isinstance(e, ir.Cond):
        c, x, y = _compile(e.c), _compile(e.a), _compile(e.b)
        return lambda env: x(env) if c(env) != 0 else y(env)
    if isinstance(e, ir.Call):
        args = tuple(_compile(x) for x in e.args)
        fn = e.fn
        if fn in ("sqrt", "exp", "ln"):
            return _refuse(f"`{fn}`")
        if fn == "pow":
            a, b = args
            return lambda env: power(a(env), b(env))
        if fn == "abs":
            (x,) = args
            return lambda env: _abs(x(env))
        if fn == "floor":
            (x,) = args
            return lambda env: floor(x(env))
        if fn == "ceil":
            (x,) = args
            return lambda env: ceil(x(env))
        if fn == "sum":
            def total(env: Env) -> Q:
                acc: Q = 0
                for x in args:
                    acc = add(acc, x(env))
                return acc
            return total
        if fn in ("min", "max"):
            pick: Callable[..., Q] = min if fn == "min" else max
            if len(args) == 2:
                a, b = args
                return lambda env: pick(a(env), b(env))
            return lambda env: pick(f(env) for f in args)
        return _refuse(f"`{fn}`")
    if isinstance(e, ir.Probe):
        why = probe_supported(e)
        if why is not None:
            return _refuse(why)
        kind = "pool" if isinstance(e.target, ir.PoolRef) else "stage"
        index = e.target.pool if isinstance(e.target, ir.PoolRef) else e.target.stage
        fname = e.fn
        return lambda env: env.probe(fname, kind, index)
    if isinstance(e, ir.Draw):
        d = e
        return lambda env: norm(env.draw(d))
    raise TypeError(f"not an expression: {e!r}")


def refusal(e: ir.Expr, *, draws: bool = False) -> str | None:
    """The first construct of ``e`` outside the fragment, as
    :attr:`Unsupported.construct` would name it (None: ``e`` is inside).
    ``draws``: whether a draw is allowed here (``init`` only)."""
    from ..expr import walk

    for x in walk(e):
        if isinstance(x, ir.Num) and not math.isfinite(x.value):
            return f"the number {x.value!r}"
        if isinstance(x, ir.Call) and x.fn in ("sqrt", "exp", "ln"):
            return f"`{x.fn}`"
        if isinstance(x, ir.Probe):
            why = probe_supported(x)
            if why is not None:
                return why
        if isinstance(x, ir.Draw) and not draws:
            return f"`~{x.dist}`"
    return None


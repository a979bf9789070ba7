"""The family of workloads a verdict covers.

A program's workload draws its sessions' attributes in ``init``; ``serq
prove`` explores every workload of a *family*: each drawn attribute over its
support, when that support is finite (a ``floor``/``ceil`` of a bounded draw,
a ``bernoulli``, a ``min`` that caps an unbounded whole number …), or over
the whole numbers of a range the user gives (``--bound NAME=LO..HI``, which
also narrows a finite support); the arrivals are the program's own when they
are deterministic (a constant ``renewal`` gap, a ``batch``), otherwise
instants on a grid the user sets (``--grid DT``, ``--instants M``); and at
most ``--sessions K`` sessions when the program's arrivals would not end.

A support is worked out from the expression by interval arithmetic over
three shapes: a finite set, a range of whole numbers (``hi`` may be
infinite) and a real interval.  What cannot be bounded so is reported with
the attribute's name and the flag that bounds it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterable, Sequence

from .. import ir
from ..expr import walk
from .exact import Unsupported, exact, shown

#: The most values one attribute's support may have before the user is asked to bound it.
MAX_SUPPORT = 4096


@dataclass(frozen=True)
class Finite:
    values: tuple[Fraction, ...]  # sorted, distinct


@dataclass(frozen=True)
class Whole:
    lo: Fraction  # whole, or -inf as None
    hi: float | Fraction  # whole, or math.inf


@dataclass(frozen=True)
class Real:
    lo: float | Fraction
    hi: float | Fraction


Support = Finite | Whole | Real


class Unbounded(Exception):
    """An attribute whose support is not finite (``why``), to be bounded by the user."""


def _fin(xs: Iterable[Fraction]) -> Finite:
    vals = tuple(sorted(set(xs)))
    if len(vals) > MAX_SUPPORT:
        raise Unbounded(f"{len(vals)} values")
    return Finite(vals)


def _products_at_least(a: Sequence[Fraction], b: Sequence[Fraction]) -> int:
    """The fewest values the products of two sets of distinct numbers can
    take: m positive (or negative) numbers times n positive (or negative)
    ones take at least m + n − 1, as the sums of their logarithms do; the
    products of the other signs may fall on those, so the most of the four
    counts is the bound (0 when a side is all zeros)."""
    signs = [(sum(1 for x in xs if x > 0), sum(1 for x in xs if x < 0)) for xs in (a, b)]
    return max([m + n - 1 for m in signs[0] for n in signs[1] if m and n], default=0)


def _as_range(s: Support) -> tuple[Any, Any, bool]:
    """(lo, hi, whole) of a support."""
    if isinstance(s, Finite):
        return s.values[0], s.values[-1], all(v.denominator == 1 for v in s.values)
    if isinstance(s, Whole):
        return s.lo, s.hi, True
    return s.lo, s.hi, False


def _const(s: Support) -> Fraction | None:
    return s.values[0] if isinstance(s, Finite) and len(s.values) == 1 else None


def support(e: ir.Expr, attrs: dict[int, Support]) -> Support:
    """The values ``e`` can take, given the supports of the attributes it reads."""
    if isinstance(e, ir.Num):
        return Finite((exact(e.value),))
    if isinstance(e, ir.Attr):
        if e.slot not in attrs:
            raise Unbounded(f"it reads `{e.name}`, which `init` has not set")
        return attrs[e.slot]
    if isinstance(e, ir.Draw):
        args = [support(a, attrs) for a in e.args]
        consts = [_const(a) for a in args]
        if any(c is None for c in consts):
            raise Unbounded(f"`~{e.dist}` with arguments that vary")
        cs = [x for x in consts if x is not None]
        if e.dist == "det":
            return Finite((cs[0],))
        if e.dist == "bernoulli":
            p = cs[0]
            return Finite(tuple(v for v, ok in ((Fraction(0), p < 1), (Fraction(1), p > 0)) if ok))
        if e.dist == "uniform":
            return Real(min(cs[0], cs[1]), max(cs[0], cs[1]))
        return Real(Fraction(0), math.inf)  # exp, erlang, h2: any non-negative time
    if isinstance(e, ir.Call) and e.fn in ("floor", "ceil") and len(e.args) == 1:
        inner = support(e.args[0], attrs)
        if isinstance(inner, Finite):
            down = e.fn == "floor"
            return _fin(Fraction(math.floor(v) if down else math.ceil(v)) for v in inner.values)
        if isinstance(inner, Whole):
            return inner
        lo, hi = inner.lo, inner.hi
        if e.fn == "floor":  # a continuous draw over (lo, hi): floor takes floor(lo) … ceil(hi) − 1
            least = Fraction(math.floor(lo))
            most: Any = math.inf if hi == math.inf else Fraction(math.ceil(hi) - 1)
        else:
            least = Fraction(math.floor(lo) + 1)
            most = math.inf if hi == math.inf else Fraction(math.ceil(hi))
        return _whole(least, most)
    if isinstance(e, ir.Call) and e.fn in ("min", "max") and len(e.args) == 2:
        a, b = (support(x, attrs) for x in e.args)
        if isinstance(a, Finite) and isinstance(b, Finite):
            # (each value of a pair's min is a value of one side that the other side reaches up to,
            # and of its max one the other side reaches down to: the pairs need not be listed)
            if e.fn == "min":
                return _fin([x for x in a.values if x <= b.values[-1]] + [y for y in b.values if y <= a.values[-1]])
            return _fin([x for x in a.values if x >= b.values[0]] + [y for y in b.values if y >= a.values[0]])
        cb = _const(b) if _const(b) is not None else _const(a)
        other = a if _const(b) is not None else b
        if cb is not None:
            lo, hi, whole = _as_range(other)
            if e.fn == "min":
                lo, hi = min(lo, cb), min(hi, cb)
            else:
                lo, hi = max(lo, cb), max(hi, cb)
            return _whole(lo, hi) if whole and Fraction(cb).denominator == 1 else Real(lo, hi)
        raise Unbounded("a `min`/`max` of two varying values")
    if isinstance(e, ir.Binary) and e.op in ("+", "-", "*"):
        a, b = (support(x, attrs) for x in (e.a, e.b))
        if isinstance(a, Finite) and isinstance(b, Finite):
            # a sum or difference of m and n distinct numbers takes at least m + n − 1 values (the
            # least of one side with each of the other, then the greatest of the other with each of
            # the first), a product as many of one sign: too many, without listing the m·n pairs
            fewest = _products_at_least(a.values, b.values) if e.op == "*" else len(a.values) + len(b.values) - 1
            if fewest > MAX_SUPPORT:
                raise Unbounded(f"at least {fewest} values")
            op = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}[e.op]
            return _fin(op(x, y) for x in a.values for y in b.values)
        ca, cb = _const(a), _const(b)
        if e.op == "*" and (ca is not None or cb is not None):
            k, other = (ca, b) if ca is not None else (cb, a)
            lo, hi, whole = _as_range(other)
            if isinstance(other, Whole) and k is not None and k.denominator == 1 and k != 0 and hi != math.inf:
                # (a Whole holds more than MAX_SUPPORT values, `_whole`: counted, not listed to count)
                raise Unbounded(f"{shown(hi - lo + 1)} values")
            return Real(*sorted((k * lo, k * hi), key=float)) if k != 0 else Finite((Fraction(0),))
        if e.op in ("+", "-") and (ca is not None or cb is not None):
            if cb is not None:
                lo, hi, whole = _as_range(a)
                d = cb if e.op == "+" else -cb
                return _whole(lo + d, hi + d) if whole and d.denominator == 1 else Real(lo + d, hi + d)
            if e.op == "+" and ca is not None:
                lo, hi, whole = _as_range(b)
                return _whole(lo + ca, hi + ca) if whole and ca.denominator == 1 else Real(lo + ca, hi + ca)
        raise Unbounded("arithmetic on two varying values")
    if isinstance(e, ir.Binary) and e.op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||"):
        return Finite((Fraction(0), Fraction(1)))
    if isinstance(e, ir.Unary) and e.op == "!":
        return Finite((Fraction(0), Fraction(1)))
    if isinstance(e, ir.Unary):
        s = support(e.x, attrs)
        if isinstance(s, Finite):
            return _fin(-v for v in s.values)
        lo, hi, whole = _as_range(s)
        return _whole(-hi, -lo) if whole else Real(-hi, -lo)
    if isinstance(e, ir.Cond):
        c = support(e.c, attrs)
        if _const(c) is not None:
            return support(e.a if _const(c) != 0 else e.b, attrs)
        a, b = support(e.a, attrs), support(e.b, attrs)
        if isinstance(a, Finite) and isinstance(b, Finite):
            return _fin(a.values + b.values)
        raise Unbounded("a conditional over varying values")
    raise Unbounded("an expression the support analysis does not follow")


def _whole(lo: Any, hi: Any) -> Support:
    if hi != math.inf and lo != -math.inf and hi - lo + 1 <= MAX_SUPPORT:
        return _fin(Fraction(v) for v in range(int(lo), int(hi) + 1))
    return Whole(lo, hi)


@dataclass(frozen=True)
class Bound:
    """``--bound NAME=LO..HI[:STEP]``: the whole numbers (or steps) of a range."""

    name: str
    lo: Fraction
    hi: Fraction
    step: Fraction = Fraction(1)

    def values(self) -> tuple[Fraction, ...]:
        out = []
        v = self.lo
        while v <= self.hi:
            out.append(v)
            v += self.step
        return tuple(out)

    @staticmethod
    def parse(text: str) -> "Bound":
        name, eq, rng = text.partition("=")
        lo, dots, rest = rng.partition("..")
        hi, colon, step = rest.partition(":")
        try:
            b = Bound(name.strip(), Fraction(lo.strip()), Fraction(hi.strip()),
                      Fraction(step.strip()) if colon else Fraction(1))
        except (ValueError, ZeroDivisionError):
            b = None
        if not eq or not dots or not name.strip() or b is None:
            raise ValueError(f"--bound `{text}`: expected NAME=LO..HI or NAME=LO..HI:STEP (numbers)")
        if b.step <= 0:
            raise ValueError(f"--bound `{text}`: the step must be positive")
        if b.hi < b.lo:
            raise ValueError(f"--bound `{text}`: LO is above HI")
        count = (b.hi - b.lo) // b.step + 1  # (counted, not listed: 0..1e12 would take forever)
        if count > MAX_SUPPORT:
            raise ValueError(f"--bound `{text}`: {count:,} values, at most {MAX_SUPPORT}")
        return b


def check_bounds(p: ir.Program, bounds: Sequence[Bound]) -> None:
    """``ValueError`` (a usage error) when a bound names no attribute of ``p`` that
    ``init`` draws: a bound chooses among the values a draw gives, and an attribute
    set otherwise (``set t0 = now``) has no choice to narrow."""
    from ..errors import suggest

    drawn, own = set(), set(p.attributes[len(ir.BUILTIN_ATTRIBUTES):])
    for st in ir.walk_blocks(p.init):
        if isinstance(st, ir.Set) and any(isinstance(x, ir.Draw) for x in walk(st.expr)):
            drawn.add(p.attributes[st.slot])
    for b in bounds:
        if b.name in drawn:
            continue
        if b.name in own:
            why = f"`init` does not draw `{b.name}`: a bound narrows a drawn attribute"
        else:
            why = f"the program has no attribute `{b.name}`"
            near = suggest(b.name, drawn)
            if near is not None:
                why += f" (did you mean `{near}`?)"
        shown = ", ".join(sorted(drawn)) or "none"
        raise ValueError(f"--bound {b.name}: {why}; the attributes `init` draws: {shown}")


@dataclass
class Family:
    """The workloads explored: how sessions arrive and what each may be.

    ``arrivals``: ``("times", [t0, t1, …])`` (the program's own deterministic
    instants, possibly endless: ``endless`` True), or ``("grid", step, instants,
    sessions)`` (each session at any of ``instants`` grid points, in order).
    ``choices``: per attribute slot set by ``init`` with a draw, its values."""

    arrivals: tuple
    choices: dict[int, tuple[Fraction, ...]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    endless: bool = False
    sessions: int | None = None  # the most sessions explored (None: the program's own number)
    notes: list[str] = field(default_factory=list)

    @property
    def deterministic(self) -> bool:
        return not self.choices and self.arrivals[0] == "times"

    def per_session(self) -> int:
        n = 1
        for vals in self.choices.values():
            n *= len(vals)
        return n

    def size(self) -> float:
        """How many workloads (before memoised states are shared)."""
        k = self.sessions if self.sessions is not None else len(self.arrivals[1])
        per = self.per_session()
        if per > 1 and k * math.log10(per) > 300:
            return math.inf
        n = float(per) ** k
        if self.arrivals[0] == "grid":
            n *= math.comb(self.arrivals[2] + k - 1, k)
        return n

    def describe(self) -> str:
        """The family in words, for the verdict."""
        parts = []
        kind = self.arrivals[0]
        if kind == "times":
            times = self.arrivals[1]
            if self.endless:
                parts.append(f"the program's arrivals, every {shown(times[1] - times[0])} from {shown(times[0])}"
                             " for all time")
            else:
                n = self.sessions if self.sessions is not None else len(times)
                parts.append(f"{n} session(s) at the program's instants")
        else:
            _, step, m, k = self.arrivals
            instants = (", ".join(shown(step * i) for i in range(m)) if m <= 4 else
                        f"0, {shown(step)}, …, {shown(step * (m - 1))}")
            parts.append(f"{k} session(s), each arriving at one of {m} instants {instants}")
        for slot, vals in self.choices.items():
            parts.append(f"`{self.names[slot]}` in {_values(vals)}")
        return "; ".join(parts) + (" (" + "; ".join(self.notes) + ")" if self.notes else "")


def _values(vals: Sequence[Fraction]) -> str:
    if len(vals) <= 6:
        return "{" + ", ".join(shown(v) for v in vals) + "}"
    steps = {vals[i + 1] - vals[i] for i in range(len(vals) - 1)}
    if len(steps) == 1:
        step = steps.pop()
        return f"{shown(vals[0])}..{shown(vals[-1])}" + ("" if step == 1 else f" step {shown(step)}")
    return "{" + ", ".join(shown(v) for v in vals[:3]) + f", … {len(vals)} values, …, {shown(vals[-1])}}}"


def build_family(p: ir.Program, *, bounds: Sequence[Bound] = (), sessions: int | None = None,
                 grid: Fraction | None = None, instants: int = 4) -> Family:
    """The family of ``p``'s workloads under the user's bounds; :class:`Unsupported`
    (the arrival process) or :class:`Unbounded` (naming the attribute) when there is none."""
    names = {slot: name for slot, name in enumerate(p.attributes)}
    by_name = {name: slot for slot, name in names.items()}
    for b in bounds:
        if b.name not in by_name:
            raise Unbounded(f"--bound {b.name}: the program has no attribute `{b.name}`")
    bounded = {by_name[b.name]: b for b in bounds}
    if p.turn is not None and any(isinstance(x, ir.Draw) for st in ir.walk_blocks(p.turn)
                                  for e in _exprs(st) for x in walk(e)):
        raise Unsupported("a `turn` block that draws")
    supports: dict[int, Support] = {}
    choices: dict[int, tuple[Fraction, ...]] = {}
    for st in p.init:
        if not isinstance(st, ir.Set):
            continue
        draws = any(isinstance(x, ir.Draw) for x in walk(st.expr))
        reads_now = any(isinstance(x, ir.Ctx) for x in walk(st.expr))
        if st.slot in bounded:
            vals = bounded[st.slot].values()
            if draws:
                try:
                    s = support(st.expr, supports)
                except Unbounded:
                    s = Real(-math.inf, math.inf)
                vals = tuple(v for v in vals if _within(v, s))
                if not vals:
                    raise Unbounded(f"--bound {bounded[st.slot].name}: none of its values is one `init` can draw "
                                    "(a bound narrows what the draw can give; change the draw's range with --set)")
            choices[st.slot] = vals
            supports[st.slot] = Finite(vals) if vals else Finite((Fraction(0),))
            continue
        if not draws:
            if reads_now or st.slot in supports:
                supports.pop(st.slot, None)
            else:
                try:
                    supports[st.slot] = support(st.expr, supports)
                except Unbounded:
                    supports.pop(st.slot, None)
            continue
        try:
            s = support(st.expr, supports)
        except Unbounded as err:
            raise Unbounded(f"`{names[st.slot]}` ({err}): bound it with --bound {names[st.slot]}=LO..HI") from None
        if not isinstance(s, Finite):
            raise Unbounded(f"`{names[st.slot]}` takes {'whole numbers' if isinstance(s, Whole) else 'real values'}"
                            f" without end: bound it with --bound {names[st.slot]}=LO..HI")
        choices[st.slot] = s.values
        supports[st.slot] = s
    arr = p.arrival
    fam: Family
    if arr.kind == "batch":
        fam = Family(("times", [Fraction(0)] * arr.n), choices, names)
    elif arr.kind == "renewal" and isinstance(arr.gap, ir.Num):
        gap = exact(arr.gap.value)
        limit = p.run.arrivals
        if limit is not None:
            fam = Family(("times", [gap * (i + 1) for i in range(limit)]), choices, names)
        elif choices:
            k = sessions or 2
            fam = Family(("times", [gap * (i + 1) for i in range(k)]), choices, names, sessions=k,
                         notes=[f"the first {k} sessions: --sessions K for more"])
        else:
            fam = Family(("times", [gap, 2 * gap]), choices, names, endless=True)
    elif arr.kind in ("poisson", "renewal"):
        notes = []
        if grid is None:
            if arr.kind != "poisson" or not arr.rate > 0:
                raise Unbounded(f"`{arr.kind}` arrivals: give the instants a session may arrive at with --grid DT "
                                "(and --instants M, --sessions K)")
            grid = 1 / exact(arr.rate)
            notes.append("the grid is the mean gap 1 / rate: --grid DT for another")
        k = sessions or 2
        fam = Family(("grid", grid, instants, k), choices, names, sessions=k, notes=notes)
    else:
        raise Unsupported(f"`arrive {arr.kind}`")
    if sessions is not None and fam.arrivals[0] == "times" and not fam.endless:
        times = fam.arrivals[1][:sessions]
        fam = Family(("times", times), choices, names, sessions=len(times), notes=list(fam.notes))
    return fam


def _within(v: Fraction, s: Support) -> bool:
    if isinstance(s, Finite):
        return v in s.values
    lo, hi, whole = _as_range(s)
    return (not whole or v.denominator == 1) and lo <= v <= hi


def _exprs(st: Any) -> list[ir.Expr]:
    out = []
    for name in ("expr", "work", "guard", "count", "amount"):
        e = getattr(st, name, None)
        if e is not None and not isinstance(e, (tuple, list)):
            out.append(e)
    return out

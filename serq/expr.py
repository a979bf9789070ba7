"""Expressions: float semantics, distributions, constant folding, and
compilation of IR expressions into Python source once per run.

All values are 64-bit floats (language §6).  Division by zero, overflow and
domain errors give ``inf`` or ``NaN`` as IEEE arithmetic does, never a Python
exception.  Comparisons give 0.0 or 1.0; ``&&``, ``||``, ``!`` and ``?:`` treat
any non-zero value (NaN included) as true.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from . import fpmath, ir

INF = math.inf
NAN = math.nan

# ---------------------------------------------------------------------------
# float helpers, shared by folding and by compiled code


def f_div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0.0:
            return NAN
        return math.copysign(INF, a) * math.copysign(1.0, b)


def f_pow(a: float, b: float) -> float:
    try:
        r = fpmath.pow(a, b)
    except OverflowError:
        return INF
    except ZeroDivisionError:  # 0 ** negative
        return INF
    return NAN if isinstance(r, complex) else float(r)


def f_min(a: float, b: float) -> float:
    """IEEE minNum, as Rust's ``f64::min``: a NaN argument yields the other one."""
    if a != a:
        return b
    return b if b < a else a


def f_max(a: float, b: float) -> float:
    if a != a:
        return b
    return b if b > a else a


def f_maxn(*xs: float) -> float:
    """``f_max`` folded left to right over ``xs`` (an aggregate's terms), in one
    call.  The built-in ``max`` is that fold (it keeps the first of equals and
    takes a later one only if greater, so a NaN later on is passed over) unless
    the first is a NaN, which ``f_max`` passes over and ``max`` keeps."""
    acc = xs[0]
    if acc == acc:
        return max(xs)
    for x in xs[1:]:
        if acc != acc or x > acc:
            acc = x
    return acc


def f_minn(*xs: float) -> float:
    """``f_min`` folded left to right over ``xs``, in one call (as ``f_maxn``)."""
    acc = xs[0]
    if acc == acc:
        return min(xs)
    for x in xs[1:]:
        if acc != acc or x < acc:
            acc = x
    return acc


def f_sumn(*xs: float) -> float:
    """``xs`` added left to right, as ``((x0 + x1) + x2) + …`` (an aggregate
    ``sum j in n``): not the built-in ``sum``, which compensates its rounding
    from Python 3.12 on."""
    acc = xs[0]
    for x in xs[1:]:
        acc = acc + x
    return acc


AGGREGATES: dict[str, Callable[..., float]] = {"min": f_minn, "max": f_maxn, "sum": f_sumn}
"""The functions of an aggregate's terms (``ir.Call`` with any number of
arguments, from ``max|min|sum j in n (…)``): one flat call, not a chain as
deep as the terms are many."""


def is_aggregate(e: ir.Call) -> bool:
    """A call of an aggregate's terms: ``sum``, or ``min``/``max`` with other
    than the two arguments a program can write."""
    return e.fn == "sum" or (e.fn in ("min", "max") and len(e.args) != 2)


def f_floor(x: float) -> float:
    return x if x != x or x in (INF, -INF) else float(math.floor(x))


def f_ceil(x: float) -> float:
    return x if x != x or x in (INF, -INF) else float(math.ceil(x))


def f_sqrt(x: float) -> float:
    return math.sqrt(x) if x >= 0 else NAN


def f_exp(x: float) -> float:
    return fpmath.exp(x)


def f_ln(x: float) -> float:
    if x > 0:
        return fpmath.log(x)
    return -INF if x == 0 else NAN


PURE_FUNCTIONS: dict[str, tuple[int, Callable[..., float]]] = {
    "min": (2, f_min),
    "max": (2, f_max),
    "abs": (1, abs),
    "floor": (1, f_floor),
    "ceil": (1, f_ceil),
    "sqrt": (1, f_sqrt),
    "exp": (1, f_exp),
    "ln": (1, f_ln),
    "pow": (2, f_pow),
}

POOL_PROBES = ("used", "free", "cachedin", "holders", "queued")
STAGE_PROBES = ("queue", "busy", "work", "budget_left")

# ---------------------------------------------------------------------------
# distributions (semantics §6.2): each takes a stream with ``random()`` in [0, 1).
# Logarithms come from serq.fpmath, never the C library: the same bits on every
# machine (docs/simulator.md, "The same report on every machine").


_log = fpmath.log


def d_exp(g: Any, mean: float) -> float:
    return -mean * _log(1.0 - g.random())


def d_det(g: Any, x: float) -> float:
    return x


def d_uniform(g: Any, lo: float, hi: float) -> float:
    return lo + (hi - lo) * g.random()


#: The most phases of an Erlang draw: each is a draw of its own (``~erlang(1e9, m)`` took minutes
#: a sample), and past a few thousand the law is its mean to within 2 %.
MAX_PHASES = 10_000


def d_erlang(g: Any, k: float, mean: float) -> float:
    if not 0.0 < k <= MAX_PHASES:  # (NaN too: 0 divided by zero, -inf had no whole part)
        raise bad_phases(k, mean)
    phases = max(1, int(f_floor(k)))
    m = mean / k
    total = 0.0
    for _ in range(phases):  # left to right (sum() is compensated from Python 3.12 on)
        total += -m * _log(1.0 - g.random())
    return total


def bad_phases(k: float, mean: float) -> Exception:
    from .errors import SerqRuntimeError

    shown = f"{k:g}" if k == k else "NaN"
    return SerqRuntimeError(f"`~erlang({shown}, {mean:g})`: {shown} phases; an Erlang draw has more than 0 and at "
                            f"most {MAX_PHASES:,}")


def d_h2(g: Any, mean: float, cv2: float) -> float:
    v = f_max(cv2, 1.0)
    p = 0.5 * (1.0 + math.sqrt((v - 1.0) / (v + 1.0)))
    m = mean / (2.0 * p) if g.random() < p else mean / (2.0 * (1.0 - p))
    return -m * _log(1.0 - g.random())


def d_bernoulli(g: Any, p: float) -> float:
    return 1.0 if g.random() < p else 0.0


DISTRIBUTIONS: dict[str, tuple[int, Callable[..., float]]] = {
    "exp": (1, d_exp),
    "det": (1, d_det),
    "uniform": (2, d_uniform),
    "erlang": (2, d_erlang),
    "h2": (2, d_h2),
    "bernoulli": (1, d_bernoulli),
}

# ---------------------------------------------------------------------------
# constant folding


class NotConstant(Exception):
    """The expression reads something that is not a number or a pure function."""

    def __init__(self, node: Any) -> None:
        super().__init__(type(node).__name__)
        self.node = node


def _binop(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return f_div(a, b)
    if op == "^":
        return f_pow(a, b)
    if op == "<":
        return 1.0 if a < b else 0.0
    if op == "<=":
        return 1.0 if a <= b else 0.0
    if op == ">":
        return 1.0 if a > b else 0.0
    if op == ">=":
        return 1.0 if a >= b else 0.0
    if op == "==":
        return 1.0 if a == b else 0.0
    if op == "!=":
        return 1.0 if a != b else 0.0
    raise ValueError(op)


def fold(e: ir.Expr) -> float:
    """The value of a constant expression; raises :class:`NotConstant` when it
    reads an attribute, a context variable, a probe or a draw."""
    if isinstance(e, ir.Num):
        return e.value
    if isinstance(e, ir.Unary):
        x = fold(e.x)
        return -x if e.op == "-" else (1.0 if x == 0.0 else 0.0)
    if isinstance(e, ir.Binary):
        if e.op == "&&":
            return 1.0 if fold(e.a) != 0.0 and fold(e.b) != 0.0 else 0.0
        if e.op == "||":
            return 1.0 if fold(e.a) != 0.0 or fold(e.b) != 0.0 else 0.0
        return _binop(e.op, fold(e.a), fold(e.b))
    if isinstance(e, ir.Cond):
        return fold(e.a) if fold(e.c) != 0.0 else fold(e.b)
    if isinstance(e, ir.Call):
        fn = AGGREGATES[e.fn] if is_aggregate(e) else PURE_FUNCTIONS[e.fn][1]
        return float(fn(*(fold(x) for x in e.args)))
    raise NotConstant(e)


def is_constant(e: ir.Expr) -> bool:
    try:
        fold(e)
    except NotConstant:
        return False
    return True


def try_fold(e: ir.Expr) -> ir.Expr:
    """``e`` with every constant subtree replaced by its number."""
    try:
        return ir.Num(fold(e))
    except NotConstant:
        pass
    if isinstance(e, ir.Unary):
        return ir.Unary(e.op, try_fold(e.x))
    if isinstance(e, ir.Binary):
        return ir.Binary(e.op, try_fold(e.a), try_fold(e.b))
    if isinstance(e, ir.Cond):
        return ir.Cond(try_fold(e.c), try_fold(e.a), try_fold(e.b))
    if isinstance(e, ir.Call):
        return ir.Call(e.fn, tuple(try_fold(x) for x in e.args))
    if isinstance(e, ir.Draw):
        return ir.Draw(e.dist, tuple(try_fold(x) for x in e.args))
    return e


def children(e: ir.Expr) -> tuple[ir.Expr, ...]:
    """The direct sub-expressions (pool and stage indices included)."""
    if isinstance(e, ir.Unary):
        return (e.x,)
    if isinstance(e, ir.Binary):
        return (e.a, e.b)
    if isinstance(e, ir.Cond):
        return (e.c, e.a, e.b)
    if isinstance(e, (ir.Call, ir.Draw)):
        return e.args
    if isinstance(e, ir.Probe):
        return e.args if e.target.index is None else (e.target.index, *e.args)
    return ()


def walk(e: ir.Expr):
    """``e`` and all its sub-expressions, depth first."""
    yield e
    for c in children(e):
        yield from walk(c)


def draws(e: ir.Expr) -> bool:
    return any(isinstance(x, ir.Draw) for x in walk(e))


# ---------------------------------------------------------------------------
# compilation to Python source


class Frame:
    """How compiled code reaches what an expression reads at one moment.

    ``attrs``: the Python expression of the attribute list; ``ctx``: of the
    object carrying context variables; ``session``: of the session (for
    ``cachedin``), or ``None`` where there is none; ``stream``: of the random
    stream draws take from.  ``bind(obj)`` puts a run-time object into the
    namespace and returns the name compiled code uses for it."""

    def __init__(
        self,
        ns: dict[str, Any],
        *,
        attrs: str = "c.a",
        ctx: str = "c",
        session: str | None = "c",
        stream: str = "c.srng",
        resolve_pool: Callable[[ir.PoolRef, "Frame"], str] | None = None,
        resolve_stage: Callable[[ir.StageRef, "Frame"], str] | None = None,
    ) -> None:
        self.ns = ns
        self.attrs = attrs
        self.ctx = ctx
        self.session = session
        self.stream = stream
        self.resolve_pool = resolve_pool
        self.resolve_stage = resolve_stage
        #: read a pool's ``used`` from its attributes directly, past a passing run's watch
        #: (serq/sim/lazy.py): for the gauges, read when every run has caught up
        self.raw_used = False

    def derive(self, **kw: Any) -> "Frame":
        f = Frame(self.ns)
        f.__dict__.update(self.__dict__)
        f.__dict__.update(kw)
        return f

    def bind(self, obj: Any, hint: str = "o") -> str:
        key = ("__bound__", id(obj))
        names = self.ns.setdefault("__bound__", {})
        if key in names:
            return names[key]
        name = f"_{hint}{len(names)}"
        names[key] = name
        self.ns[name] = obj
        return name


def base_namespace() -> dict[str, Any]:
    """The helpers every compiled expression may call."""
    ns: dict[str, Any] = {
        "_inf": INF, "_nan": NAN,
        "_div": f_div, "_pow": f_pow,
        "_min": f_min, "_max": f_max, "_minn": f_minn, "_maxn": f_maxn, "_sumn": f_sumn, "_abs": abs, "_floor": f_floor, "_ceil": f_ceil,
        "_sqrt": f_sqrt, "_fexp": f_exp, "_ln": f_ln,
    }
    for name, (_, fn) in DISTRIBUTIONS.items():
        ns[f"_d_{name}"] = fn
    return ns


_CALL_NAMES = {
    "min": "_min", "max": "_max", "abs": "_abs", "floor": "_floor", "ceil": "_ceil",
    "sqrt": "_sqrt", "exp": "_fexp", "ln": "_ln", "pow": "_pow",
}
_CMP = {"<", "<=", ">", ">=", "==", "!="}


def num_source(v: float) -> str:
    if v != v:
        return "_nan"
    if v == INF:
        return "_inf"
    if v == -INF:
        return "(-_inf)"
    return repr(float(v))


def source(e: ir.Expr, f: Frame) -> str:
    """Python source text of a float-valued expression."""
    if isinstance(e, ir.Num):
        return num_source(e.value)
    if isinstance(e, ir.Attr):
        return f"{f.attrs}[{e.slot}]"
    if isinstance(e, ir.Ctx):
        if e.name == "now":
            return f"{f.bind(f.ns['__env__'], 'env')}.now"
        return f"{f.ctx}.{e.name}"
    if isinstance(e, ir.Unary):
        x = source(e.x, f)
        return f"(-{x})" if e.op == "-" else f"(1.0 if {x} == 0.0 else 0.0)"
    if isinstance(e, ir.Binary):
        a, b = source(e.a, f), source(e.b, f)
        op = e.op
        if op in ("+", "-", "*"):
            return f"({a} {op} {b})"
        if op == "/":
            return f"_div({a}, {b})"
        if op == "^":
            return f"_pow({a}, {b})"
        if op in _CMP:
            return f"(1.0 if {a} {op} {b} else 0.0)"
        if op == "&&":
            return f"(1.0 if {a} != 0.0 and {b} != 0.0 else 0.0)"
        if op == "||":
            return f"(1.0 if {a} != 0.0 or {b} != 0.0 else 0.0)"
        raise ValueError(op)
    if isinstance(e, ir.Cond):
        return f"({source(e.a, f)} if {source(e.c, f)} != 0.0 else {source(e.b, f)})"
    if isinstance(e, ir.Call):
        if is_aggregate(e):  # an aggregate's terms: one flat call
            return f"_{e.fn}n({', '.join(source(x, f) for x in e.args)})"
        args = ", ".join(source(x, f) for x in e.args)
        return f"{_CALL_NAMES[e.fn]}({args})"
    if isinstance(e, ir.Draw):
        args = "".join(", " + source(x, f) for x in e.args)
        return f"_d_{e.dist}({f.stream}{args})"
    if isinstance(e, ir.Probe):
        return probe_source(e, f)
    if isinstance(e, ir.Agg):  # a claim `at end` (serq/sim/claims.py)
        return f"{f.ctx}.agg({e.fn!r}, {e.obs})"
    raise TypeError(f"not an expression: {e!r}")


def probe_source(e: ir.Probe, f: Frame) -> str:
    if isinstance(e.target, ir.PoolRef):
        assert f.resolve_pool is not None, "no pools in this frame"
        p = f.resolve_pool(e.target, f)
        used = f"{p}.used"
        if f.raw_used and p in f.ns:  # (a member named by a number: its attributes bound once)
            used = f"{f.bind(f.ns[p].__dict__, 'U')}['used']"
        if e.fn == "used":
            return used
        if e.fn == "free":
            return f"({p}.cap - {used})"
        if e.fn == "cachedin" and e.args:
            chain = ", ".join(source(a, f) for a in e.args)
            return f"{p}.cached_along({f.session}, ({chain},))" if f.session else "0.0"
        if e.fn == "cachedin":
            return f"{p}.cached_of({f.session})" if f.session else "0.0"
        if e.fn == "holders":  # (inline: a router reads it for every replica)
            return f"float(len({p}.holders))"
        if e.fn == "queued":
            return f"float(len({p}.put_queue))"
    else:
        assert f.resolve_stage is not None, "no stages in this frame"
        s = f.resolve_stage(e.target, f)
        if e.fn == "queue":
            return f"{s}.present()"
        if e.fn == "busy":
            return f"{s}.busy()"
        if e.fn == "work":
            return f"{s}.work()"
        if e.fn == "budget_left":
            return f"{s}.budget_left()"
        if e.fn in ("est_lambda", "est_rho", "est_wait"):
            return f"{s}.{e.fn}()"
        if e.fn == "price":
            return f"{s}.price({source(e.args[0], f)}, {source(e.args[1], f)})"
    raise ValueError(f"unknown probe {e.fn}")


#: The code objects of the sources compiled so far in this process, by their whole text (and
#: file name and mode): a simulator writes the same source for each replica's expressions
#: (the names they read are the same, bound in its own namespace) and for every run of a
#: sweep, and a code object is immutable, so one compile serves them all.  Keyed by the
#: text itself, never by a hash of it; emptied when it reaches ``_CODE_LIMIT`` entries.
_CODE: dict[tuple[str, str, str], Any] = {}
_CODE_LIMIT = 2048


def code_of(text: str, filename: str, mode: str) -> Any:
    """``compile(text, filename, mode)``, once per distinct text in a process."""
    key = (text, filename, mode)
    code = _CODE.get(key)
    if code is None:
        code = compile(text, filename, mode)
        if len(_CODE) >= _CODE_LIMIT:
            _CODE.clear()
        _CODE[key] = code
    return code


def compile_expr(e: ir.Expr, f: Frame, arg: str = "c") -> Callable[[Any], float]:
    """``lambda c: <e>`` as a function; constants become ``lambda c: value``."""
    text = f"lambda {arg}: {source(e, f)}"
    return eval(code_of(text, "<serq expr>", "eval"), f.ns)  # noqa: S307 - our own generated code

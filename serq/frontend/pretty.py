"""A canonical printer of syntax-tree expressions and statement heads.

The IR's ``label`` strings come from here (never from slicing source text),
so that a run-time error can quote the statement as the program says it after
definitions and bindings are substituted: ```branch (c / K)```,
```run d (z - 5)```, ```choose … in (z - 1)```.
"""

from __future__ import annotations

import math

from . import ast as A

_PREC = {
    "||": 1, "&&": 2,
    "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3,
    "+": 4, "-": 4, "*": 5, "/": 5, "^": 7,
}


def number(v: float) -> str:
    """A number as a program would write it: ``5``, ``0.5``, ``2e-05``, ``inf``."""
    if v != v:
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def show(e: A.Expr | None, ctx: int = 0) -> str:
    """``e`` as text, parenthesised where precedence (language §6.1) needs it."""
    if e is None:
        return ""
    if isinstance(e, A.Num):
        text, prec = number(e.value), 8
    elif isinstance(e, A.Name):
        text, prec = e.id, 8
    elif isinstance(e, A.Index):
        text, prec = f"{e.id}[{show(e.index)}]", 8
    elif isinstance(e, (A.Call, A.Draw)):
        head = e.fn if isinstance(e, A.Call) else f"~{e.dist}"
        text = f"{head}({', '.join(show(a) for a in e.args)})"
        prec = 6 if isinstance(e, A.Draw) else 8
    elif isinstance(e, A.ArgsNumber):
        text, prec = f'args.number("{e.key}", {show(e.default)})', 8
    elif isinstance(e, A.Unary):
        text, prec = f"{e.op}{show(e.x, 6)}", 6
    elif isinstance(e, A.Binary):
        prec = _PREC[e.op]
        if e.op == "^":
            text = f"{show(e.a, 8)} ^ {show(e.b, 6)}"
        elif prec == 3:
            text = f"{show(e.a, 4)} {e.op} {show(e.b, 4)}"
        else:
            text = f"{show(e.a, prec)} {e.op} {show(e.b, prec + 1)}"
    elif isinstance(e, A.Cond):
        text, prec = f"{show(e.c, 1)} ? {show(e.a)} : {show(e.b)}", 0
    elif isinstance(e, A.Aggregate):
        text, prec = f"{e.op} {e.var} in {show(e.count, 8)} ({show(e.body)})", 8
    else:  # pragma: no cover - every expression class is listed above
        raise TypeError(type(e).__name__)
    return f"({text})" if prec < ctx else text


def ref(r: A.Ref) -> str:
    return r.name if r.index is None else f"{r.name}[{show(r.index)}]"


def run_label(s: A.RunStmt) -> str:
    mode = f" {s.mode}" if s.mode else ""
    return f"`run {ref(s.ref)}{mode} ({show(s.work)})`"


def branch_label(s: A.BranchStmt) -> str:
    return f"`branch with ({show(s.guard)})`" if s.draw else f"`branch ({show(s.guard)})`"


def hold_label(s: A.HoldStmt) -> str:
    return "`hold " + ", ".join(f"{ref(p.ref)} (...)" for p in s.pools) + "`"


def segment_label(g: A.Segment) -> str:
    return f"`prefix ({show(g.key)}: {show(g.length)})`"


def hold_pool_labels(p: A.HoldPool) -> tuple[str, str]:
    reserve = f"`hold {ref(p.ref)} reserve ({show(p.reserve)})`" if p.reserve is not None else ""
    return f"`hold {ref(p.ref)} ({show(p.units)})`", reserve


def grow_label(s: A.GrowStmt) -> str:
    return f"`grow {ref(s.ref)} ({show(s.amount)})`"


def choose_label(s: A.ChooseStmt) -> str:
    return f"`choose … in ({show(s.count)})`"

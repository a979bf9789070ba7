"""A ``let`` that lists its choices by name (docs/language.md, "A choice among
names"; issue 39): ``let router = affinity in (random, …, affinity);`` is worth
the chosen name's place in the list, counted from 0.  The builder checks the
list (:func:`let_with_choices`); the linker makes each name a constant and
reads a ``--set`` of the ``let`` by name or by place (:func:`place`).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from ..errors import Span, UsageError
from . import ast as A
from .diag import at, did_you_mean, error

if TYPE_CHECKING:  # (the builder's token: importing it imports the parser, which a kept parse skips)
    from .build_expr import Tok

_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def let_with_choices(name: Tok, value: A.Expr, choices: list[Tok], span: Span, list_span: Span) -> A.LetItem:
    """``let NAME = C in (C0, …)`` (docs/language.md, "A choice among names"): the
    choices are distinct names, and the value is one of them, by name."""
    what = f"`let {name.text}`"
    if not choices:
        raise error(f"{what} lists no choices", list_span,
                    helps=[f"list the names it may take, as in `let {name.text} = a in (a, b);`"])
    first: dict[str, Tok] = {}
    for c in choices:
        if c.text in first:
            raise error(f"`{c.text}` is listed twice among the choices of {what}", c.span,
                        notes=[f"the first is at {at(first[c.text].span)}"], helps=["keep one of them"])
        first[c.text] = c
    names = [c.text for c in choices]
    if not isinstance(value, A.Name):
        helps = [f"write one of {', '.join(f'`{n}`' for n in names)}"]
        if isinstance(value, A.Num) and value.value in range(len(names)):
            helps = [f"choice {int(value.value)} is `{names[int(value.value)]}`: write `{names[int(value.value)]}`"]
        raise error(f"the value of {what} is one of its choices, by name", value.span, helps=helps)
    if value.id not in first:
        helps, _ = did_you_mean(value.id, "", names)
        raise error(f"`{value.id}` is not among the choices of {what}", value.span,
                    helps=helps or [f"the choices are {', '.join(f'`{n}`' for n in names)}"])
    return A.LetItem(name.text, value, span, name.span, tuple(names), tuple(c.span for c in choices))


def place(let: A.LetItem, given: tuple[str, str] | None) -> float:
    """The place of ``let``'s choice: its default, or what ``--set KEY=TEXT`` gives —
    a choice's name, or a whole number that is a place in the list.  Anything else
    (an unknown name, another constant, a place out of range, a fraction) is a
    usage error that lists the choices, never a silent default."""
    assert isinstance(let.expr, A.Name)  # the builder's rule
    if given is None:
        return float(let.choices.index(let.expr.id))
    key, text = given
    t = text.strip()
    if t in let.choices:
        return float(let.choices.index(t))
    names = ", ".join(f"`{n}`" for n in let.choices)
    listing = f"the choices are {names}, or their places 0 to {len(let.choices) - 1}"
    try:
        v = float(t) if _NUMBER.fullmatch(t) else math.nan
    except ValueError:  # pragma: no cover - the pattern admits only numbers
        v = math.nan
    if math.isfinite(v) and v == int(v) and 0 <= v < len(let.choices):
        return float(int(v))
    helps, _ = did_you_mean(t, "", let.choices)
    raise UsageError(f"--set {key}: `{t}` is not a choice of `let {let.name}`", helps=helps + [listing])

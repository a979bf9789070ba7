"""Definitions (language §2.3): the rules checked when a ``def`` is read, and
what each body does that the use-site rules need (what it assigns, how often
it mentions each parameter, whether it says ``turn;`` or ``request;``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import field

from ..node import record
from . import ast as A
from .diag import at, error
from .words import RETIRED, is_language_word


@record
class DefInfo:
    item: A.DefItem
    ordinal: int
    assigned: frozenset[str] = frozenset()
    mentions: Counter = field(default_factory=Counter)
    sends: bool = False  # the body (or a definition it uses) says `turn;` or `request;`

    @property
    def kind(self) -> str:
        return "an expression" if self.item.is_expr else "statements"

    def what(self) -> str:
        form = "`def … = …;`" if self.item.is_expr else "`def … { … }`"
        return f"{form} at {at(self.item.name_span)}"


def body_uses(d: A.DefItem):
    """(name, span) of every definition-like use in a body: calls and statement uses."""
    exprs: list[A.Expr] = []
    if d.is_expr:
        exprs.append(d.body)  # type: ignore[arg-type]
    else:
        for s in A.walk_stmts(d.body):  # type: ignore[arg-type]
            exprs += A.stmt_exprs(s)
            if isinstance(s, (A.UseStmt, A.UnknownStmt)):
                yield s.name, s.name_span
    for e in exprs:
        for x in A.walk_expr(e):
            if isinstance(x, A.Call):
                yield x.fn, x.name_span


class Defs:
    """The program's definitions, read and checked in source order."""

    def __init__(self, items: list[A.Item]) -> None:
        self.table: dict[str, DefInfo] = {}
        # name → (the first definition whose body uses it, where): a later `def name` is refused
        self.used: dict[str, tuple[A.DefItem, A.Span]] = {}
        for ordinal, item in enumerate(items):
            if isinstance(item, A.DefItem):
                self.read(item, ordinal)

    def get(self, name: str) -> DefInfo | None:
        return self.table.get(name)

    def read(self, d: A.DefItem, ordinal: int) -> None:
        if d.name in RETIRED:
            raise error(f"`{d.name}` is a retired word and names nothing: {RETIRED[d.name]}", d.name_span)
        if is_language_word(d.name):
            raise error(f"`{d.name}` is a word of the language", d.name_span, helps=["name the definition otherwise"])
        if d.name in self.table:
            raise error(f"`{d.name}` is defined twice", d.name_span,
                        notes=[f"the first definition is at {at(self.table[d.name].item.name_span)}"])
        seen: dict[str, A.Span] = {}
        for p, span in zip(d.params, d.param_spans):
            if p in RETIRED or is_language_word(p):
                raise error(f"`{p}` is a word of the language", span, helps=["name the parameter otherwise"])
            if p in seen:
                raise error(f"`{p}` is a parameter twice", span, notes=[f"the first is at {at(seen[p])}"])
            seen[p] = span
        if d.name in self.used:
            earlier, span = self.used[d.name]
            raise error(f"`{earlier.name}` uses `{d.name}`, which is defined after it", span,
                        helps=[f"move `def {d.name}` above `def {earlier.name}`"])
        uses = list(body_uses(d))
        for name, span in uses:
            if name == d.name:
                raise error(f"`{d.name}` uses itself", span, helps=["a definition is expanded where it is used, "
                                                                   "so it cannot be recursive"])
        info = DefInfo(d, ordinal)
        if not d.is_expr:
            self._check_targets(d)
        self._analyse(info)
        self.table[d.name] = info
        for name, span in uses:
            self.used.setdefault(name, (d, span))

    def _check_targets(self, d: A.DefItem) -> None:
        params = set(d.params)
        for s in A.walk_stmts(d.body):  # type: ignore[arg-type]
            targets: list[tuple[str, A.Span, str]] = []
            if isinstance(s, A.SetStmt):
                targets.append((s.name, s.name_span, "`set`"))
            elif isinstance(s, A.ChooseStmt):
                targets.append((s.name, s.name_span, "`choose`"))
            elif isinstance(s, A.HoldStmt):
                targets += [(b.name, b.name_span, "an `at admission` binding") for b in s.bindings]
            for name, span, how in targets:
                if name in params:
                    raise error(f"`{name}` is a parameter of `{d.name}`, and the body assigns it with {how}", span,
                                helps=["a parameter stands for its argument; assign a name of its own"])

    def _analyse(self, info: DefInfo) -> None:
        d = info.item
        params = set(d.params)
        mentions: Counter = Counter()
        assigned: set[str] = set()
        sends = False
        if d.is_expr:
            exprs = [d.body]
            stmts: list[A.Stmt] = []
        else:
            stmts = list(A.walk_stmts(d.body))  # type: ignore[arg-type]
            exprs = [e for s in stmts for e in A.stmt_exprs(s)]
        for e in exprs:
            for x in A.walk_expr(e):  # type: ignore[arg-type]
                if isinstance(x, (A.Name, A.Index)) and x.id in params:
                    mentions[x.id] += 1
        for s in stmts:
            for r in A.stmt_refs(s):
                if r.name in params:
                    mentions[r.name] += 1
            if isinstance(s, A.SetStmt):
                assigned.add(s.name)
            elif isinstance(s, A.ChooseStmt):
                assigned.add(s.name)
            elif isinstance(s, A.HoldStmt):
                assigned |= {b.name for b in s.bindings} | {"cached", "computed"}
            elif isinstance(s, (A.TurnStmt, A.RequestStmt)):
                sends = True
            elif isinstance(s, A.UseStmt):
                inner = self.table.get(s.name)
                if inner is not None:
                    assigned |= inner.assigned
                    sends = sends or inner.sends
        info.mentions = mentions
        info.assigned = frozenset(assigned)
        info.sends = sends

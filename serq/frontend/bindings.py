"""``hold … at admission (x = e, …)`` (language §5.3).

Bindings are substituted into the hold's header (units, ``reserve``,
``reuse``) and its ``cache``; a binding the body reads also becomes
``set x = e;`` at the top of the body, under the rules that keep that honest:
it reads only attributes and constants, its name is its own, and nothing
outside the body reads it.  After this pass the program holds no binding.
"""

from __future__ import annotations

from dataclasses import replace

from . import ast as A
from .diag import error
from .expand import Expanded
from .words import CONTEXT, OBSERVABLE

_BUILTIN = ("serial", "turn_no", "cached", "computed", "new", "out", "think", "forced", "more")


def replace_names(e: A.Expr, mapping: dict[str, A.Expr]) -> A.Expr:
    """``e`` with every bare name of ``mapping`` replaced by its expression."""
    if not mapping:
        return e
    if isinstance(e, A.Name):
        return mapping.get(e.id, e)
    if isinstance(e, A.Unary):
        return replace(e, x=replace_names(e.x, mapping))
    if isinstance(e, A.Binary):
        return replace(e, a=replace_names(e.a, mapping), b=replace_names(e.b, mapping))
    if isinstance(e, A.Cond):
        return replace(e, c=replace_names(e.c, mapping), a=replace_names(e.a, mapping), b=replace_names(e.b, mapping))
    if isinstance(e, (A.Call, A.Draw)):
        return replace(e, args=tuple(None if a is None else replace_names(a, mapping) for a in e.args))
    if isinstance(e, A.Index):
        return replace(e, index=replace_names(e.index, mapping))
    if isinstance(e, A.Aggregate):  # its index is its own inside the body
        inner = {k: v for k, v in mapping.items() if k != e.var}
        return replace(e, count=replace_names(e.count, mapping), body=replace_names(e.body, inner))
    return e


def _opt(e: A.Expr | None, mapping: dict[str, A.Expr]) -> A.Expr | None:
    return None if e is None else replace_names(e, mapping)


class Bindings:
    def __init__(self, ex: Expanded) -> None:
        self.ex = ex
        blocks = [b for b in (ex.init, ex.turn, ex.session) if b is not None]
        self.sets = {s.name for b in blocks for s in A.walk_stmts(b) if isinstance(s, (A.SetStmt, A.ChooseStmt))}
        self.kinds: dict[str, str] = {}
        for kind, decls in (("a `let` constant", ex.lets), ("a pool", ex.pools), ("a stage", ex.stages)):
            for d in decls:
                self.kinds.setdefault(d.name, kind)
        self.body_read: set[str] = set()
        self.bound: dict[int, frozenset[str]] = {}  # id(hold) → the names its body reads and it binds

    def run(self) -> Expanded:
        ex = self.ex
        session = self.block(ex.session) if ex.session is not None else None
        out = replace(ex, session=session)
        self.check_outside(out)
        return out

    def block(self, block: A.Block) -> A.Block:
        out: list[A.Stmt] = []
        for s in block:
            if isinstance(s, A.HoldStmt):
                out.append(self.hold(s))
            elif isinstance(s, A.BranchStmt):
                out.append(replace(s, then=self.block(s.then),
                                   orelse=self.block(s.orelse) if s.orelse is not None else None))
            elif isinstance(s, A.LoopStmt):
                out.append(replace(s, body=self.block(s.body)))
            else:
                out.append(s)
        return tuple(out)

    def hold(self, h: A.HoldStmt) -> A.HoldStmt:
        names = [b.name for b in h.bindings]
        resolved: dict[str, A.Expr] = {}
        for i, b in enumerate(h.bindings):
            if b.name in names[:i]:
                raise error(f"`{b.name}` is bound twice in one `at admission`", b.name_span)
            if any(isinstance(x, A.Draw) for x in A.walk_expr(b.expr)):
                raise error(f"`{b.name}` draws a sample: the binding is substituted, so a name used twice "
                            "would draw twice", b.name_span,
                            helps=["sample into an attribute with `set` before the hold, and bind that"])
            later = sorted(A.names_read(b.expr) & set(names[i + 1:]))
            if later:
                raise error(f"`{b.name}` reads `{later[0]}`, which is bound after it", b.name_span,
                            helps=["bind it before"])
            resolved[b.name] = replace_names(b.expr, {k: v for k, v in resolved.items() if k != b.name})
        body = self.block(h.body)
        reads = set()
        for s in A.walk_stmts(body):
            for e in A.stmt_exprs(s):
                reads |= A.names_read(e)
        prelude: list[A.Stmt] = []
        for b in h.bindings:
            if b.name in reads:
                self.check_body_read(b, resolved[b.name])
                self.body_read.add(b.name)
                prelude.append(A.SetStmt(b.name, resolved[b.name], b.span, b.name_span))
        pools = tuple(replace(p, units=replace_names(p.units, resolved), reserve=_opt(p.reserve, resolved))
                      for p in h.pools)
        prefix = tuple(replace(g, key=replace_names(g.key, resolved), length=replace_names(g.length, resolved))
                       for g in h.prefix)
        lease = replace(h.lease, time=replace_names(h.lease.time, resolved)) if h.lease is not None else None
        out = replace(h, pools=pools, reuse=_opt(h.reuse, resolved), cache=_opt(h.cache, resolved),
                      bindings=(), body=tuple(prelude) + body, prefix=prefix, lease=lease)
        self.bound[id(out)] = frozenset(s.name for s in prelude)  # type: ignore[union-attr]
        return out

    def check_body_read(self, b: A.Binding, e: A.Expr) -> None:
        if b.name in A.names_read(b.expr):
            raise error(f"the binding `{b.name}` reads itself", b.name_span)
        for x in A.walk_expr(e):
            w = None
            if isinstance(x, A.Call) and x.fn in OBSERVABLE:
                w = x.fn
            elif isinstance(x, A.Name) and (x.id == "cached" or x.id in CONTEXT):
                w = x.id
            if w is not None:
                fix = "in the body read `cached`" if w in ("cachedin", "cached") else \
                    "name the value with a `set` in the body"
                raise error(f"the body reads `{b.name}`, and `{b.name}` reads `{w}`; the body sees a binding "
                            "that reads only attributes and constants", b.name_span, helps=[fix])
        also = None
        if b.name in _BUILTIN:
            also = "an attribute the scheduler sets"
        elif b.name in CONTEXT or b.name == "inf":
            also = "a name the language supplies"
        elif b.name in self.kinds:
            also = self.kinds[b.name]
        elif b.name in self.sets:
            also = "an attribute the program `set`s elsewhere"
        if also:
            raise error(f"the body reads `{b.name}`, which is also {also}", b.name_span,
                        helps=["rename the binding"])

    # ------------------------------------------------------------ reads outside the body
    def check_outside(self, ex: Expanded) -> None:
        if not self.body_read:
            return
        for block in (ex.init, ex.turn, ex.session):
            if block is not None:
                self.outside(block, frozenset())
        decl_exprs: list[A.Expr] = [item.expr for item in ex.lets]
        for item in list(ex.pools) + list(ex.stages) + ([ex.workload] if ex.workload else []) + \
                ([ex.run] if ex.run else []):
            clauses = list(item.clauses)
            if isinstance(item, A.StageItem) and item.arg is not None:
                decl_exprs.append(item.arg)
            for c in clauses:
                v = c.value
                if isinstance(v, A.Arrival) and v.arg is not None:
                    decl_exprs.append(v.arg)
                elif isinstance(v, tuple) and c.word in ("evict", "queue", "serve"):
                    decl_exprs += list(v)
                elif not isinstance(v, (tuple, str, A.Trace, A.Arrival)) and c.word not in ("admit", "memory"):
                    decl_exprs.append(v)  # type: ignore[arg-type]
        for e in decl_exprs:
            self.outside_expr(e, frozenset())

    def outside(self, block: A.Block, inside: frozenset[str]) -> None:
        for s in block:
            for e in A.stmt_exprs(s):
                self.outside_expr(e, inside)
            inner = inside | self.bound.get(id(s), frozenset())
            for b in A.child_blocks(s):
                self.outside(b, inner)

    def outside_expr(self, e: A.Expr, inside: frozenset[str]) -> None:
        for x in A.walk_expr(e):
            if isinstance(x, A.Name) and x.id in self.body_read and x.id not in inside:
                raise error(f"`{x.id}` is read outside the body of the hold that binds it", x.span,
                            helps=["give it a `set` of its own where it is read, or read it inside the hold"])

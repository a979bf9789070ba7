"""Definition expansion, the two sides, and the serving forms (language §2.3,
§2.7, §5.1, §5.6).

Definitions are expanded as syntax-tree templates: a parameter is replaced by
its argument (already expanded where the use is written), so a bare reference
can stand for a pool or a stage, and any other argument keeps its grouping.
Nodes copied out of a body get a :class:`~serq.frontend.diag.ViaSpan`, so an
error inside an expansion points into the definition and adds *in `NAME`,
used at L:C*.  The server block is expanded afresh in place of every
``request;``, between :class:`~serq.frontend.ast.ServerMark` statements.
Everything that depends on the use site (side rules, serving-form stages
declared above) is decided here, at the use site.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import cast

from ..errors import Span
from . import ast as A
from .defs import DefInfo, Defs
from .diag import ViaSpan, at, did_you_mean, error
from .pretty import show
from .words import CONTEXT, OBSERVABLE

#: The expanded program may hold at most this many syntax nodes (§2.3's token limit).
MAX_NODES = 200_000

_STMT_WORDS = ["turn", "request", "end", "set", "observe", "hold", "grow", "drop", "release", "run",
               "branch", "loop", "choose", "prefill", "decode", "tool", "load", "transfer"]
_TRACE_ATTRIBUTES = frozenset(("new", "out", "think", "forced", "more"))
_HEAD = {A.SetStmt: "set", A.ObserveStmt: "observe", A.TurnStmt: "turn", A.RequestStmt: "request",
         A.EndStmt: "end", A.DropStmt: "drop", A.LoopStmt: "loop", A.ChooseStmt: "choose"}


@dataclass(frozen=True)
class Env:
    """Where statements are being expanded: parameter substitutions, the chain of
    definition uses, the ordinal of the item the use site is in, and its side:
    ``session`` (top level), ``workload`` (the workload's session), ``server``,
    ``init``, ``turn`` or ``decl`` (a declaration's expression)."""

    subst: dict[str, A.Expr] = field(default_factory=dict)
    via: tuple[tuple[str, Span], ...] = ()
    site: int = 0
    side: str = "decl"


@dataclass
class Expanded:
    """The program after expansion: declarations, and the session's blocks."""

    lets: list[A.LetItem]
    pools: list[A.PoolItem]
    stages: list[A.StageItem]
    workload: A.WorkloadItem | None
    run: A.RunItem | None
    init: A.Block | None
    turn: A.Block | None
    session: A.Block | None
    two_sided: bool
    gauges: list[A.GaugeItem] = field(default_factory=list)
    share: A.ShareItem | None = None  # `share maxmin|bottleneck;`


def head(s: A.Stmt) -> Span:
    """The span of a statement's first word (for carets as wide as a token)."""
    span = getattr(s, "head", None) or getattr(s, "name_span", None)
    if span is not None and not isinstance(s, (A.SetStmt, A.ObserveStmt, A.ChooseStmt)):
        return span
    word = _HEAD.get(type(s), "")
    return replace(s.span, end=s.span.start + len(word)) if word else s.span


def item_head(item: A.Item, word: str) -> Span:
    return replace(item.span, end=item.span.start + len(word))


class Expander:
    def __init__(self, items: list[A.Item], defs: Defs) -> None:
        self.items = items
        self.defs = defs
        self.stages = [(i, it) for i, it in enumerate(items) if isinstance(it, A.StageItem)]
        self.budget = MAX_NODES
        self.server: tuple[A.ServerItem, int] | None = None
        self.requests = 0
        self.turn_assigned: frozenset[str] = frozenset()
        self.server_assigned: frozenset[str] = frozenset()

    def tick(self, span: Span) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise error("the definitions expand to more than a program can hold", span,
                        helps=["use the definitions fewer times, or write less in them"])

    @staticmethod
    def rs(span: Span, env: Env) -> Span:
        if not env.via:
            return span
        return ViaSpan(span.source, span.start, span.end, via=env.via)

    # ------------------------------------------------------------ expressions
    def xe(self, e: A.Expr, env: Env) -> A.Expr:
        self.tick(e.span)
        rs = self.rs
        if isinstance(e, A.Name):
            return env.subst[e.id] if e.id in env.subst else A.Name(e.id, rs(e.span, env))
        if isinstance(e, A.Num):
            return A.Num(e.value, rs(e.span, env))
        if isinstance(e, A.Index):
            idx = self.xe(e.index, env)
            if e.id in env.subst:
                arg = env.subst[e.id]
                if not isinstance(arg, A.Name):
                    raise error(f"`{e.id}[…]` indexes its argument `{show(arg)}`, which is not an array name",
                                arg.span)
                return A.Index(arg.id, idx, rs(e.span, env), arg.span)
            return A.Index(e.id, idx, rs(e.span, env), rs(e.name_span, env))
        if isinstance(e, A.Unary):
            return A.Unary(e.op, self.xe(e.x, env), rs(e.span, env))
        if isinstance(e, A.Binary):
            return A.Binary(e.op, self.xe(e.a, env), self.xe(e.b, env), rs(e.span, env))
        if isinstance(e, A.Cond):
            return A.Cond(self.xe(e.c, env), self.xe(e.a, env), self.xe(e.b, env), rs(e.span, env))
        if isinstance(e, A.Draw):
            return A.Draw(e.dist, tuple(self.xe(a, env) for a in e.args), rs(e.span, env), rs(e.name_span, env))
        if isinstance(e, A.ArgsNumber):
            return A.ArgsNumber(e.key, self.xe(e.default, env), rs(e.span, env))
        if isinstance(e, A.Aggregate):  # inside its body the index is its own, not a parameter
            inner = replace(env, subst={k: v for k, v in env.subst.items() if k != e.var})
            return A.Aggregate(e.op, e.var, self.xe(e.count, env), self.xe(e.body, inner), rs(e.span, env),
                               rs(e.var_span, env))
        assert isinstance(e, A.Call)
        args = tuple(None if a is None else self.xe(a, env) for a in e.args)
        call = A.Call(e.fn, args, rs(e.span, env), rs(e.name_span, env))
        info = self.visible(e.fn, call.name_span, env)
        if info is None:
            for i, a in enumerate(args):
                if a is None:
                    raise error(f"`{e.fn}`: argument {i + 1} is empty", call.name_span)
            return call
        if not info.item.is_expr:
            raise error(f"`{e.fn}` is statements ({info.what()}), not an expression", call.name_span,
                        helps=[f"use it as a statement: `{e.fn}(…);`"])
        self.check_args(info, args, call.name_span, statement=False)
        inner = Env(dict(zip(info.item.params, args)), ((e.fn, call.name_span),) + env.via, env.site, env.side)
        return self.xe(info.item.body, inner)  # type: ignore[arg-type]

    def visible(self, name: str, span: Span, env: Env) -> DefInfo | None:
        """The definition ``name`` names at this use site, if any."""
        info = self.defs.get(name)
        if info is None:
            return None
        if info.ordinal > env.site:
            raise error(f"`{name}` is used before its definition", span,
                        helps=[f"move `def {name}` above this use"],
                        notes=[f"`{name}` is defined at {at(info.item.name_span)}"])
        return info

    def check_args(self, info: DefInfo, args: tuple[A.Expr | None, ...], span: Span, *, statement: bool) -> None:
        """The use-site rules of §2.3: count, empty, capture, double draw, live and deferred reads."""
        d = info.item
        if len(args) != len(d.params):
            raise error(f"`{d.name}` takes {len(d.params)} argument(s), got {len(args)}", span,
                        notes=[f"`{d.name}` is defined at {at(d.name_span)}"])
        for p, a in zip(d.params, args):
            if a is None:
                raise error(f"`{d.name}`: the argument for `{p}` is empty", span)
            reads = A.names_read(a)
            captured = sorted(reads & info.assigned)
            if captured:
                raise error(f"the argument for `{p}` reads `{captured[0]}`, which `{d.name}` assigns", a.span,
                            helps=["`set` the value under another name first, and pass that name"])
            times = info.mentions[p]
            if times > 1 and any(isinstance(x, A.Draw) for x in A.walk_expr(a)):
                raise error(f"the argument for `{p}` draws a sample, and `{d.name}` would draw it {times} times",
                            a.span, helps=["`set` the draw first, and pass the name"])
            if not statement:
                continue
            for x in A.walk_expr(a):
                live = show(x) if isinstance(x, A.Call) and x.fn in OBSERVABLE else (
                    x.id if isinstance(x, A.Name) and x.id in CONTEXT else None)
                if live is not None:
                    raise error(f"the argument for `{p}` reads `{live}`, which changes while statements run",
                                x.span, helps=[f"`set t = {show(x)};` first, and pass the name"])
            if info.sends:
                for names, by in ((self.turn_assigned, "`turn;`"), (self.server_assigned, "`request;`")):
                    late = sorted(reads & names)
                    if late:
                        raise error(f"the argument for `{p}` reads `{late[0]}`, which its {by} assigns", a.span,
                                    helps=["pass a name the definition's `turn;` or `request;` leaves alone"])

    def xref(self, r: A.Ref, env: Env) -> A.Ref:
        idx = self.xe(r.index, env) if r.index is not None else None
        if r.name in env.subst:
            arg = env.subst[r.name]
            if isinstance(arg, A.Name):
                return A.Ref(arg.id, idx, self.rs(r.span, env), arg.span)
            if isinstance(arg, A.Index) and idx is None:
                return A.Ref(arg.id, arg.index, self.rs(r.span, env), arg.name_span)
            raise error(f"`{r.name}` names a pool or a stage here, and its argument `{show(arg)}` is not one",
                        arg.span)
        return A.Ref(r.name, idx, self.rs(r.span, env), self.rs(r.name_span, env))

    def xopt(self, e: A.Expr | None, env: Env) -> A.Expr | None:
        return None if e is None else self.xe(e, env)

    # ------------------------------------------------------------ statements
    def xs(self, block: A.Block, env: Env) -> A.Block:
        out: list[A.Stmt] = []
        for s in block:
            out += self.xs1(s, env)
        return tuple(out)

    def xs1(self, s: A.Stmt, env: Env) -> list[A.Stmt]:
        self.tick(s.span)
        side, rs = env.side, self.rs
        if isinstance(s, (A.SpawnStmt, A.JoinStmt)):
            return [self.subagent(s, env)]
        if side in ("init", "turn") and not isinstance(s, (A.SetStmt, A.ObserveStmt, A.UseStmt, A.UnknownStmt)):
            raise error("workload blocks may only `set` and `observe`", rs(head(s), env), prefix=side)
        if isinstance(s, A.SetStmt):
            return [A.SetStmt(s.name, self.xe(s.expr, env), rs(s.span, env), rs(s.name_span, env))]
        if isinstance(s, A.ObserveStmt):
            name = s.name
            if name in env.subst and isinstance(env.subst[name], A.Name):
                name = env.subst[name].id  # type: ignore[union-attr]
            return [A.ObserveStmt(name, self.xe(s.expr, env), rs(s.span, env), rs(s.name_span, env))]
        if isinstance(s, A.TurnStmt):
            if side == "server":
                raise error("`turn` is the session's, not the server's", rs(head(s), env),
                            helps=["say `turn;` in the workload's `session`"])
            return [A.TurnStmt(rs(s.span, env))]
        if isinstance(s, A.EndStmt):
            if side == "server":
                raise error("`end` is the session's; a server is done when its block is", rs(head(s), env))
            return [A.EndStmt(rs(s.span, env))]
        if isinstance(s, A.RequestStmt):
            return self.request(s, env)
        if isinstance(s, A.HoldStmt):
            pools = tuple(A.HoldPool(self.xref(p.ref, env), self.xe(p.units, env), self.xopt(p.reserve, env),
                                     rs(p.span, env)) for p in s.pools)
            bindings = tuple(A.Binding(b.name, self.xe(b.expr, env), rs(b.span, env), rs(b.name_span, env))
                             for b in s.bindings)
            prefix = tuple(A.Segment(self.xe(g.key, env), self.xe(g.length, env), rs(g.span, env)) for g in s.prefix)
            lease = None
            if s.lease is not None:
                lease = A.Lease(self.xref(s.lease.ref, env), self.xe(s.lease.time, env), rs(s.lease.span, env))
            return [A.HoldStmt(pools, self.xopt(s.reuse, env), bindings, self.xs(s.body, env),
                               self.xopt(s.cache, env), rs(s.span, env), rs(s.head, env), prefix, lease)]
        if isinstance(s, A.GrowStmt):
            return [A.GrowStmt(self.xref(s.ref, env), self.xe(s.amount, env), rs(s.span, env), rs(s.head, env))]
        if isinstance(s, A.DropStmt):
            return [A.DropStmt(self.xref(s.ref, env), rs(s.span, env))]
        if isinstance(s, A.ReleaseStmt):
            return [A.ReleaseStmt(self.xref(s.ref, env), rs(s.span, env), rs(s.head, env))]
        if isinstance(s, A.LoadStmt):
            return [A.LoadStmt(self.xref(s.ref, env), self.xe(s.amount, env), rs(s.span, env), rs(s.head, env))]
        if isinstance(s, A.RunStmt):
            growing = self.xref(s.growing, env) if s.growing else None
            return [A.RunStmt(self.xref(s.ref, env), s.mode, self.xe(s.work, env), growing,
                              rs(s.span, env), rs(s.head, env), s.form, tuple(self.xref(r, env) for r in s.also))]
        if isinstance(s, A.ServingStmt):
            run = self.serving(s, env)
            if s.role != "transfer":
                return [run]
            # `transfer (X) from P to Q (n)` is `run LINK (X); load Q (n); release P;` (docs/pd.md)
            assert s.src is not None and s.dst is not None and s.n is not None
            span, head_span = rs(s.span, env), rs(s.head, env)
            return [run, A.LoadStmt(self.xref(s.dst, env), self.xe(s.n, env), span, head_span),
                    A.ReleaseStmt(self.xref(s.src, env), span, head_span)]
        if isinstance(s, A.BranchStmt):
            orelse = self.xs(s.orelse, env) if s.orelse is not None else None
            return [A.BranchStmt(self.xe(s.guard, env), self.xs(s.then, env), orelse, s.draw,
                                 rs(s.span, env), rs(s.head, env))]
        if isinstance(s, A.LoopStmt):
            return [A.LoopStmt(self.xs(s.body, env), rs(s.span, env))]
        if isinstance(s, A.ChooseStmt):
            return [A.ChooseStmt(s.name, self.xe(s.count, env), tuple(self.xe(k, env) for k in s.keys),
                                 rs(s.span, env), rs(s.name_span, env))]
        if isinstance(s, A.UseStmt):
            return self.use(s, env)
        if isinstance(s, A.UnknownStmt):
            self.unknown(s, env)
        raise AssertionError(type(s).__name__)  # pragma: no cover

    def subagent(self, s: "A.SpawnStmt | A.JoinStmt", env: Env) -> A.Stmt:
        """``spawn``/``join``: a session's statements, never a server's or a workload block's."""
        rs = self.rs
        word = "spawn" if isinstance(s, A.SpawnStmt) else "join"
        if env.side not in ("session", "workload"):
            where = {"server": "a server", "init": "the workload's `init`", "turn": "the workload's `turn`"}.get(
                env.side, "this block")
            raise error(f"`{word}` is a session's statement, not allowed in {where}", rs(s.head, env),
                        helps=["spawn and join children in the workload's `session` block "
                               "or in a top-level `session`"])
        if isinstance(s, A.JoinStmt):
            return A.JoinStmt(s.name, rs(s.span, env), rs(s.head, env), rs(s.name_span, env))
        sets = tuple(A.SetStmt(x.name, self.xe(x.expr, env), rs(x.span, env), rs(x.name_span, env))
                     for x in s.sets)
        return A.SpawnStmt(self.xe(s.count, env), s.name, sets, rs(s.span, env), rs(s.head, env),
                           rs(s.name_span, env))

    def request(self, s: A.RequestStmt, env: Env) -> list[A.Stmt]:
        span = self.rs(s.span, env)
        if env.side == "server":
            raise error("a server does not request itself", self.rs(head(s), env))
        if env.side != "workload" or self.server is None:
            raise error("`request` is a statement of the `session` inside `workload`", self.rs(head(s), env),
                        helps=["a top-level `session` runs its statements itself"])
        self.requests += 1
        server, ordinal = self.server
        body = self.xs(server.body, Env({}, (), ordinal, "server"))
        return [A.ServerMark(True, span), *body, A.ServerMark(False, span)]

    def use(self, s: A.UseStmt, env: Env) -> list[A.Stmt]:
        span = self.rs(s.name_span, env)
        info = self.visible(s.name, span, env)
        if info is None:
            self.unknown(A.UnknownStmt(s.name, s.span, s.name_span, True), env)
        assert info is not None
        if info.item.is_expr:
            raise error(f"`{s.name}` is an expression ({info.what()}), not statements", span,
                        helps=[f"use it inside an expression, e.g. `set x = {s.name}(…);`"])
        args = tuple(None if a is None else self.xe(a, env) for a in s.args)
        self.check_args(info, args, span, statement=True)
        given = cast(tuple[A.Expr, ...], args)  # check_args has rejected an empty argument
        inner = Env(dict(zip(info.item.params, given)), ((s.name, span),) + env.via, env.site, env.side)
        return list(self.xs(info.item.body, inner))  # type: ignore[arg-type]

    def unknown(self, s: A.UnknownStmt, env: Env) -> None:
        span = self.rs(s.name_span, env)
        info = self.visible(s.name, span, env)
        if info is not None and info.item.is_expr:
            raise error(f"`{s.name}` is an expression ({info.what()}), not statements", span)
        if info is not None:
            if s.called:
                raise error(f"expected `;` after `{s.name}(…)`", span)
            raise error(f"`{s.name}` is a statement definition; use it as `{s.name}(…);`", span)
        names = _STMT_WORDS + [n for n, d in self.defs.table.items() if not d.item.is_expr and d.ordinal < env.site]
        helps, _ = did_you_mean(s.name, "", names)
        raise error(f"unknown statement `{s.name}`", span, helps=helps)

    # ------------------------------------------------------------ serving forms (§5.6)
    def serving(self, s: A.ServingStmt, env: Env) -> A.RunStmt:
        """A serving form's run: its stage found by role (or named by `on`)."""
        role = s.role
        above = [st for i, st in self.stages if i < env.site]
        also = tuple(self.xref(r, env) for r in s.also)
        if s.on is not None:
            ref = self.xref(s.on, env)
            matches = [st for st in above if st.name == ref.name]
            if not matches:
                helps, notes = did_you_mean(ref.name, "stage", {st.name: st.name_span for st in above})
                raise error(f"`{role} on {ref.name}`: no stage `{ref.name}` is declared above", ref.name_span,
                            helps=helps or [f"declare `stage {ref.name} : …;` above this statement"], notes=notes)
            stage = matches[0]
        else:
            plays = ("link", "transfer") if role == "transfer" else (role,)
            cands = [st for st in above if st.name in plays]
            if not cands and role in ("prefill", "decode"):
                cands = [st for st in above if st.kind == "step"]
            span = self.rs(s.head, env)
            if not cands:
                helps = [f"declare a stage named `{role}` above this statement" if role != "transfer" else
                         "declare a stage named `link` (or `transfer`) above this statement"]
                if role in ("prefill", "decode"):
                    helps.append("or declare a `step` engine above it")
                helps.append(f"or name one: `{role} on STAGE (...)`")
                raise error(f"no stage declared above plays `{role}`", span, helps=helps)
            if len(cands) > 1:
                names = ", ".join(st.name for st in cands)
                raise error(f"several stages play `{role}` ({names}): write `{role} on STAGE (...)`", span)
            stage = cands[0]
            ref = A.Ref(stage.name, self.xopt(s.index, env), span, span)
        mode = role if role in ("prefill", "decode") and stage.kind == "step" else None
        growing = self.xref(s.growing, env) if s.growing else None
        return A.RunStmt(ref, mode, self.xe(s.work, env), growing, self.rs(s.span, env), self.rs(s.head, env), role,
                         also)

    # ------------------------------------------------------------ declarations and the two sides
    def xsize(self, size: "int | A.Expr | None", env: Env) -> "int | A.Expr | None":
        return size if size is None or isinstance(size, int) else self.xe(size, env)

    def xclause(self, c: A.Clause, env: Env) -> A.Clause:
        """A declaration clause with its expressions expanded (blocks are left alone)."""
        v = c.value
        if isinstance(v, A.Arrival):
            v = A.Arrival(v.kind, self.xopt(v.arg, env), v.span)
        elif _is_expr(v):
            v = self.xe(v, env)  # type: ignore[arg-type]
        elif isinstance(v, tuple) and c.word in ("evict", "queue", "serve"):
            v = tuple(self.xe(k, env) for k in v)
        return A.Clause(c.word, v, c.span)

    def program(self) -> Expanded:
        lets, pools, stages, gauges = [], [], [], []
        workload = server = session = run = share = None
        for ordinal, item in enumerate(self.items):
            env = Env(site=ordinal)
            if isinstance(item, A.LetItem):
                lets.append(A.LetItem(item.name, self.xe(item.expr, env), item.span, item.name_span))
            elif isinstance(item, A.GaugeItem):
                gauges.append(A.GaugeItem(item.name, self.xe(item.expr, env), item.span, item.name_span))
            elif isinstance(item, A.PoolItem):
                pools.append(replace(item, size=self.xsize(item.size, env),
                                     clauses=tuple(self.xclause(c, env) for c in item.clauses)))
            elif isinstance(item, A.StageItem):
                stages.append(replace(item, size=self.xsize(item.size, env), arg=self.xopt(item.arg, env),
                                      clauses=tuple(self.xclause(c, env) for c in item.clauses)))
            elif isinstance(item, A.WorkloadItem):
                if workload is not None:
                    raise _duplicate("workload", item, workload[0])
                workload = (replace(item, clauses=tuple(self.xclause(c, env) for c in item.clauses)), ordinal)
            elif isinstance(item, A.ServerItem):
                if server is not None:
                    raise _duplicate("server", item, server[0])
                server = (item, ordinal)
            elif isinstance(item, A.SessionItem):
                if session is not None:
                    raise _duplicate("session", item, session[0])
                session = (item, ordinal)
            elif isinstance(item, A.RunItem):
                if run is not None:
                    raise _duplicate("run", item, run)
                run = replace(item, clauses=tuple(self.xclause(c, env) for c in item.clauses))
            elif isinstance(item, A.ShareItem):
                if share is not None:
                    raise error("`share` is given twice", item_head(item, "share"),
                                notes=[f"the first is at {at(share.span)}"], helps=["keep one of them"])
                share = item
        self.check_def_names(lets, pools, stages)
        return replace(self.sides(lets, pools, stages, workload, server, session, run), gauges=gauges, share=share)

    def check_def_names(self, lets, pools, stages) -> None:
        for kind, decls in (("a pool", pools), ("a stage", stages), ("a `let` constant", lets)):
            for d in decls:
                info = self.defs.get(d.name)
                if info is not None:
                    raise error(f"`{d.name}` is defined, and is also {kind}", info.item.name_span,
                                notes=[f"{kind[2:] if kind.startswith('a ') else kind} `{d.name}` is declared at "
                                       f"{at(d.name_span)}"])

    def sides(self, lets, pools, stages, workload, server, session, run) -> Expanded:
        clauses = {c.word: c for c in workload[0].clauses} if workload else {}
        wl_session = clauses.get("session")
        if session is not None and (server is not None or wl_session is not None):
            raise error("a program has one session, inside `workload` with a `server` or at top level, not both",
                        item_head(session[0], "session"))
        if wl_session is not None and server is None:
            raise error("a `session` inside `workload` is written against a `server` block; "
                        "without one, write `session` at top level", replace(wl_session.span, end=wl_session.span.start + 7))
        if server is not None and wl_session is None:
            raise error("`server` needs a `session` inside `workload` that says `request;`",
                        item_head(server[0], "server"))
        self.server = server
        self.turn_assigned = _assigned(clauses["turn"].value, self.defs) if "turn" in clauses else frozenset()
        if "trace" in clauses:
            self.turn_assigned |= _TRACE_ATTRIBUTES
        self.server_assigned = _assigned(server[0].body, self.defs) if server else frozenset()
        init = self.xs(clauses["init"].value, Env(site=workload[1], side="init")) if "init" in clauses else None
        turn = self.xs(clauses["turn"].value, Env(site=workload[1], side="turn")) if "turn" in clauses else None
        body: A.Block | None = None
        if wl_session is not None:
            body = self.xs(wl_session.value, Env(site=workload[1], side="workload"))  # type: ignore[arg-type]
            if self.requests == 0:
                raise error("`server` is never requested", item_head(server[0], "server"),
                            helps=["say `request;` in the workload's `session` where a turn is sent"])
        elif session is not None:
            body = self.xs(session[0].body, Env(site=session[1], side="session"))
        wl = workload[0] if workload else None
        return Expanded(lets, pools, stages, wl, run, init, turn, body, wl_session is not None)


def _is_expr(v: object) -> bool:
    return isinstance(v, (A.Num, A.Name, A.Index, A.Unary, A.Binary, A.Cond, A.Call, A.Draw, A.ArgsNumber,
                          A.Aggregate))


def _duplicate(word: str, item: A.Item, first: A.Item) -> Exception:
    return error(f"duplicate {word}", item_head(item, word), notes=[f"the first is at {at(first.span)}"])


def _assigned(block: A.Block, defs: Defs) -> frozenset[str]:
    """The names a block assigns, through the statement definitions it uses."""
    out: set[str] = set()
    for s in A.walk_stmts(block):
        if isinstance(s, (A.SetStmt, A.ChooseStmt)):
            out.add(s.name)
        elif isinstance(s, A.HoldStmt):
            out |= {b.name for b in s.bindings}
        elif isinstance(s, A.UseStmt) and defs.get(s.name) is not None:
            out |= defs.get(s.name).assigned  # type: ignore[union-attr]
    return frozenset(out)

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

from dataclasses import field, replace
from typing import cast

from ..errors import Span
from ..node import record
from . import ast as A
from .defs import DefInfo, Defs
from .diag import ViaSpan, at, did_you_mean, error
from .pretty import show
from .queues import Station, Stations, check_entry
from .words import CONTEXT, OBSERVABLE

#: The expanded program may hold at most this many syntax nodes (§2.3's token limit).
MAX_NODES = 200_000

_STMT_WORDS = ["turn", "request", "end", "set", "observe", "hold", "grow", "drop", "release", "run",
               "branch", "loop", "choose", "prefill", "decode", "tool", "load", "transfer"]
_TRACE_ATTRIBUTES = frozenset(("new", "out", "think", "forced", "more"))
_HEAD = {A.SetStmt: "set", A.ObserveStmt: "observe", A.TurnStmt: "turn", A.RequestStmt: "request",
         A.EndStmt: "end", A.DropStmt: "drop", A.LoopStmt: "loop", A.ChooseStmt: "choose"}


@record(frozen=True)
class Env:
    """Where statements are being expanded: parameter substitutions, the chain of
    definition uses, the ordinal of the item the use site is in, and its side:
    ``session`` (top level), ``workload`` (the workload's session), ``server``,
    ``init``, ``turn`` or ``decl`` (a declaration's expression)."""

    subst: dict[str, A.Expr] = field(default_factory=dict)
    via: tuple[tuple[str, Span], ...] = ()
    site: int = 0
    side: str = "decl"
    queue: "Entry | None" = None  # inside a queue entry's body: which call of which entry


@record(frozen=True)
class Entry:
    """A call of a queue entry being expanded (docs/pd.md, "Queue stations"): the
    station, the entry, the member's index (None: one queue), and for a ``from``
    call the source pool and the source member's index."""

    station: Station
    entry: A.QueueEntry
    index: A.Expr | None
    source_pool: A.Expr | None = None
    source_station: Station | None = None
    source_index: A.Expr | None = None

    def local(self, name: str) -> str:
        locals_ = self.station.locals[(self.entry.verb, self.entry.source is not None)]
        return f"{self.station.name}.{name}" if name in locals_ else name


@record
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
    claims: list[A.ClaimItem] = field(default_factory=list)
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
    def __init__(self, items: list[A.Item], defs: Defs, stations: Stations | None = None) -> None:
        self.items = items
        self.defs = defs
        self.stations = stations or Stations()
        self.calling: list[tuple[str, str, bool]] = []  # the entries being expanded (a cycle is an error)
        if self.stations.queues:
            lets = {n for it in items if isinstance(it, A.LetItem) for n in (it.name, *it.choices)}
            hidden: set[str] = set()
            for it in items:
                if isinstance(it, A.WorkloadItem):
                    for c in it.clauses:
                        if c.word == "hidden":
                            hidden |= {n.id for n in c.value}  # type: ignore[attr-defined]
            kinds = {it.name: it.kind for it in items if isinstance(it, A.StageItem)}
            for st in self.stations.queues.values():
                for e in st.entries.values():
                    check_entry(st, e, lets, hidden, kinds, self.stations.queues)
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
            if e.id in env.subst:
                return env.subst[e.id]
            if "." in e.id:
                self.dotted(e.id, rs(e.span, env))
            if env.queue is not None:
                if e.id == "self":
                    return self.self_index(env, e.span)
                return A.Name(env.queue.local(e.id), rs(e.span, env))
            if e.id == "self":
                raise error("`self` is a queue entry's word: the member's own index", rs(e.span, env))
            return A.Name(e.id, rs(e.span, env))
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
            name = env.queue.local(s.name) if env.queue is not None else s.name
            return [A.SetStmt(name, self.xe(s.expr, env), rs(s.span, env), rs(s.name_span, env))]
        if isinstance(s, A.MarkStmt):
            if env.queue is None:
                raise error("`mark` is a queue entry's statement: it names a moment the caller reads as "
                            "`Q.x`", rs(s.head, env))
            return [A.SetStmt(env.queue.local(s.name), A.Name("now", rs(s.head, env)), rs(s.span, env),
                              rs(s.head, env))]
        if isinstance(s, A.CallStmt):
            return self.call(s, env)
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
            if not s.ref.name:  # `run (w);`: the queue's own stage
                q = env.queue
                if q is None:
                    raise error("a `run` names its stage: `run STAGE (w);`", rs(s.head, env))
                if q.station.item.serve is None:
                    raise error(f"`run (…)` in queue `{q.station.name}`, which has no `serve`", rs(s.head, env))
                own = self.ref_of(q.station.member(q.station.name, q.index, rs(s.head, env)), rs(s.head, env))
                return [A.RunStmt(own, s.mode, self.xe(s.work, env), growing, rs(s.span, env), rs(s.head, env),
                                  s.form, tuple(self.xref(r, env) for r in s.also))]
            return [A.RunStmt(self.xref(s.ref, env), s.mode, self.xe(s.work, env), growing,
                              rs(s.span, env), rs(s.head, env), s.form, tuple(self.xref(r, env) for r in s.also))]
        if isinstance(s, A.ServingStmt):
            if s.role == "transfer" and env.queue is not None and s.on is None and s.index is None:
                return self.pull_read(s, env)
            run = self.serving(s, env)
            if s.role != "transfer":
                return [run]
            waits = self.link_waits(run, env)
            # `transfer (X) from P to Q (n)` is `run LINK (X); load Q (n); release P;` (docs/pd.md)
            assert s.src is not None and s.dst is not None and s.n is not None
            span, head_span = rs(s.span, env), rs(s.head, env)
            return [*waits, run, A.LoadStmt(self.xref(s.dst, env), self.xe(s.n, env), span, head_span),
                    A.ReleaseStmt(self.xref(s.src, env), span, head_span)]
        if isinstance(s, A.BranchStmt):
            orelse = self.xs(s.orelse, env) if s.orelse is not None else None
            return [A.BranchStmt(self.xe(s.guard, env), self.xs(s.then, env), orelse, s.draw,
                                 rs(s.span, env), rs(s.head, env))]
        if isinstance(s, A.LoopStmt):
            return [A.LoopStmt(self.xs(s.body, env), rs(s.span, env))]
        if isinstance(s, A.ChooseStmt):
            name = env.queue.local(s.name) if env.queue is not None else s.name
            return [A.ChooseStmt(name, self.xe(s.count, env), tuple(self.xe(k, env) for k in s.keys),
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
        if s.queue is not None:
            return self.request_gateway(s, env)
        if self.stations.queues and self.server is None and env.side == "workload":
            raise error("`request;` needs a `server` block; name a gateway with `request NAME;`",
                        self.rs(head(s), env))
        if env.side != "workload" or self.server is None:
            raise error("`request` is a statement of the `session` inside `workload`", self.rs(head(s), env),
                        helps=["a top-level `session` runs its statements itself"])
        self.requests += 1
        server, ordinal = self.server
        body = self.xs(server.body, Env({}, (), ordinal, "server"))
        return [A.ServerMark(True, span), *body, A.ServerMark(False, span)]

    # ------------------------------------------------------------ queue stations (docs/pd.md)
    def request_gateway(self, s: A.RequestStmt, env: Env) -> list[A.Stmt]:
        """``request gw;``: the gateway's ``route`` in place, as ``request;`` splices the server."""
        qspan = self.rs(s.queue_span or s.span, env)
        if env.side != "workload":
            raise error("`request` is a statement of the `session` inside `workload`", qspan)
        st = self.stations.queues.get(s.queue or "")
        if st is None:
            raise error(f"`request {s.queue}`: no queue `{s.queue}` is declared", qspan)
        if "gateway" not in st.roles:
            raise error(f"`request {s.queue}`: queue `{s.queue}` does not play `gateway`", qspan)
        route = st.entries[("route", False)]
        body = self.xs(route.body, Env({}, env.via, env.site, "server", Entry(st, route, None)))
        span = self.rs(s.span, env)
        return [A.ServerMark(True, span), *body, A.ServerMark(False, span)]

    def self_index(self, env: Env, span: Span) -> A.Expr:
        q = env.queue
        assert q is not None
        if not q.station.family or q.index is None:
            raise error(f"`self` inside queue `{q.station.name}`, which is not a family", span)
        return q.index

    def dotted(self, name: str, span: Span) -> None:
        """``Q.x`` read outside an entry: a mark, an attribute an entry sets, or a pool of ``Q``."""
        owner, x = name.split(".", 1)
        st = self.stations.queues.get(owner)
        if st is None or "." in x:
            return  # a kernel name (the linker checks it)
        if x not in st.attributes and x not in st.pools and x != "nic":
            raise error(f"`{name}`: no entry of `{owner}` marks or sets `{x}`, and `{owner}` has no pool `{x}`", span)

    def call(self, s: A.CallStmt, env: Env) -> list[A.Stmt]:
        """``Q[i].verb (args) [from S[k]] [to P (m)];``: the entry's body in place."""
        rs = self.rs
        qspan = rs(s.head, env)
        text = f"`{s.queue}.{s.verb}`"
        st = self.stations.queues.get(s.queue)
        if st is None:
            raise error(f"{text}: no queue `{s.queue}` is declared", qspan)
        if st.family and s.index is None:
            raise error(f"{text}: `{s.queue}` is a family of {_size(st.size)}; index it", qspan)
        if not st.family and s.index is not None:
            raise error(f"`{s.queue}[…].{s.verb}`: `{s.queue}` is one queue, not a family", qspan)
        link_call = s.verb == "transfer" and "link" in st.roles
        key = (s.verb, s.source is not None and not link_call)
        entry = st.entries.get(key)
        if entry is None:
            more = ""
            if (s.verb, not key[1]) in st.entries:
                more = f": its `{s.verb}` {'takes no' if key[1] else 'needs'} `from`"
            elif link_call:
                more = f"; its `serve` is its cost: `transfer on {s.queue}[…] (n) from S to P (m);`"
            raise error(f"{text}: queue `{s.queue}` has no such entry{more}", qspan)
        if len(s.args) != len(entry.params):
            raise error(f"{text} takes {len(entry.params)} argument(s), got {len(s.args)}", qspan)
        args = []
        for p, a in zip(entry.params, s.args):
            if a is None:
                raise error(f"{text}: the argument for `{p}` is empty", qspan)
            if any(isinstance(x, A.Draw) for x in A.walk_expr(a)):
                raise error(f"{text}: the argument for `{p}` draws a sample; a parameter is substituted, so a name "
                            "used twice would draw twice", a.span)
            args.append(self.xe(a, env))
        index = self.xe(s.index, env) if s.index is not None else None
        if s.to is not None and not link_call:
            raise error(f"`to` belongs to a link's `transfer`, not to `{s.verb}`", rs(s.to.name_span, env))
        if link_call and (s.source is None or s.to is None):
            raise error(f"`{s.queue}.transfer (n) from S to P (m)`: a transfer names the pool it takes from and "
                        "the pool it fills", qspan)
        source_pool = source_index = None
        source_station = None
        if s.source is not None:
            if s.source_field is not None:
                raise error(f"`from {s.source.name}.{s.source_field}`: a call takes from a queue, "
                            f"`from {s.source.name}[…]`", rs(s.source.name_span, env))
            source_pool, source_station, source_index = self.source(s, env, text)
        subst: dict[str, A.Expr] = dict(zip(entry.params, args))
        for pool in st.pools:
            subst[pool] = st.member(f"{st.name}.{pool}", index, qspan)
        if st.item.serve is not None:
            subst[st.name] = st.member(st.name, index, qspan)
        if entry.source is not None and source_pool is not None:
            subst[entry.source] = source_pool
        frame = (st.name, s.verb, key[1])
        if frame in self.calling:
            raise error(f"{text}: the entries call each other in a cycle", qspan)
        self.calling.append(frame)
        inner = Env(subst, ((f"{st.name}.{s.verb}", qspan),) + env.via, env.site, "server",
                    Entry(st, entry, index, source_pool, source_station, source_index))
        try:
            body = list(self.xs(entry.body, inner))
        finally:
            self.calling.pop()
        if link_call:
            assert s.to is not None and s.to_n is not None and source_pool is not None
            body += [A.LoadStmt(self.xref(s.to, env), self.xe(s.to_n, env), rs(s.span, env), qspan),
                     A.ReleaseStmt(self.ref_of(source_pool, qspan), rs(s.span, env), qspan)]
        return body

    def source(self, s: A.CallStmt, env: Env, text: str) -> tuple[A.Expr, Station | None, A.Expr | None]:
        """A call's ``from S[k]``: the pool S's entries lease, for member k."""
        assert s.source is not None
        span = self.rs(s.source.name_span, env)
        src = self.stations.queues.get(s.source.name)
        k = self.xe(s.source.index, env) if s.source.index is not None else None
        if src is None:  # a pool already bound (a nested call passes its own `from`)
            return self.xe(A.Index(s.source.name, s.source.index, s.source.span, s.source.name_span)
                           if s.source.index is not None else A.Name(s.source.name, s.source.span), env), None, None
        leased = list(src.leases.values())
        if all(lp is None for lp in leased):
            raise error(f"`from {src.name}`: no entry of `{src.name}` leases a pool, so it has nothing to take", span)
        pool = next(lp for lp in leased if lp is not None)
        for (verb, _f), lp in src.leases.items():
            if lp is None and verb != "route":
                raise error(f"`from {src.name}`: `{src.name}.{verb}` leases nothing, so a request that went "
                            f"through it would have no KV to take; a `from` needs every entry of `{src.name}` "
                            f"to lease `{pool}`", span)
        if src.family and k is None:
            raise error(f"`from {src.name}`: `{src.name}` is a family of {_size(src.size)}; index it", span)
        if not src.family and k is not None:
            raise error(f"`from {src.name}[…]`: `{src.name}` is one queue, not a family", span)
        return src.member(f"{src.name}.{pool}", k, span), src, k

    def link_waits(self, run: A.RunStmt, env: Env) -> list[A.Stmt]:
        """``transfer on L[a], M[b] …``: a link queue's ``latency`` is a wait before the read,
        one per link named that has one, in the order named."""
        out: list[A.Stmt] = []
        for r in (run.ref, *run.also):
            st = self.stations.queues.get(r.name)
            if st is not None and st.latency is not None:
                span = r.name_span
                out.append(A.RunStmt(A.Ref(f"{st.name}.latency", r.index, span, span), None,
                                     self.xe(st.latency, Env(site=env.site)), None, span, span))
        return out

    def pull_read(self, s: A.ServingStmt, env: Env) -> list[A.Stmt]:
        """``transfer (n) from src to kv (m)`` in an entry of a queue that pulls: the read over
        the source's NIC and this member's, after the relation's wait (docs/pd.md)."""
        q = env.queue
        assert q is not None and s.src is not None and s.dst is not None and s.n is not None
        span = self.rs(s.head, env)
        st = q.station
        if st.pulls is None or q.entry.source is None:
            raise error(f"`{st.name}`'s `transfer` names no NIC and `{st.name}` pulls from no queue: declare "
                        f"`{st.name} pull SOURCE share …;`, or write `transfer on …`", span)
        if s.src.name != q.entry.source or s.src.index is not None:
            raise error(f"`transfer … from {s.src.name}`: a read takes from the entry's source, "
                        f"`from {q.entry.source}`", self.rs(s.src.name_span, env))
        source, latency = st.pulls
        if q.source_station is None or q.source_station.name != source:
            got = show(q.source_pool) if q.source_pool is not None else "nothing"
            raise error(f"`{st.name}` pulls from `{source}`, and this entry was called `from {got}`", span)
        out: list[A.Stmt] = []
        if latency is not None:
            wait = st.member(f"{st.name}.nic.latency", q.index, span)
            out.append(A.RunStmt(self.ref_of(wait, span), None, self.xe(latency, Env(site=env.site)), None,
                                 self.rs(s.span, env), span))
        src_nic = self.ref_of(q.source_station.member(f"{source}.nic", q.source_index, span), span)
        own_nic = self.ref_of(st.member(f"{st.name}.nic", q.index, span), span)
        out.append(A.RunStmt(src_nic, None, self.xe(s.work, env), None, self.rs(s.span, env), span, "transfer",
                             (own_nic,)))
        out.append(A.LoadStmt(self.xref(s.dst, env), self.xe(s.n, env), self.rs(s.span, env), span))
        out.append(A.ReleaseStmt(self.xref(s.src, env), self.rs(s.span, env), span))
        return out

    @staticmethod
    def ref_of(e: A.Expr, span: Span) -> A.Ref:
        if isinstance(e, A.Index):
            return A.Ref(e.id, e.index, span, span)
        assert isinstance(e, A.Name)
        return A.Ref(e.id, None, span, span)

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
        q = env.queue
        if q is not None and s.on is None and s.index is None and role in ("prefill", "decode") \
                and q.station.item.serve is not None:  # a serving form in an entry finds its queue's stage
            span = self.rs(s.head, env)
            own = q.station.member(q.station.name, q.index, span)
            ref = self.ref_of(own, span)
            mode = role if q.station.item.serve.kind == "step" else None
            growing = self.xref(s.growing, env) if s.growing else None
            return A.RunStmt(ref, mode, self.xe(s.work, env), growing, self.rs(s.span, env), span, role)
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
        lets, pools, stages, gauges, claims = [], [], [], [], []
        workload = server = session = run = share = None
        for ordinal, item in enumerate(self.items):
            env = Env(site=ordinal)
            if isinstance(item, A.LetItem):
                # a choice's value is its name, which no definition may stand for
                lets.append(item if item.choices else replace(item, expr=self.xe(item.expr, env)))
            elif isinstance(item, A.GaugeItem):
                gauges.append(A.GaugeItem(item.name, self.xe(item.expr, env), item.span, item.name_span))
            elif isinstance(item, A.ClaimItem):
                claims.append(replace(item, expr=self.xe(item.expr, env), given=self.xopt(item.given, env),
                                      stage_index=self.xopt(item.stage_index, env)))
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
        return replace(self.sides(lets, pools, stages, workload, server, session, run), gauges=gauges, share=share,
                       claims=claims)

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
        if wl_session is not None and server is None and not self.stations.queues:
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
            if self.requests == 0 and server is not None:
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


def _size(size: "int | A.Expr | None") -> str:
    """A family's size as its declaration writes it: ``2``, ``NP``, ``N + 1``."""
    return str(size) if isinstance(size, int) or size is None else show(size)

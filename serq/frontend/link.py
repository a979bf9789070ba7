"""The expanded program → :class:`serq.ir.Program` (language §2, §5, §7.3–§7.5).

Order of work: session attributes (every ``set``/``choose``d name, in the
order init, turn, session), ``let`` constants with ``--set``, pools and
stages, the workload, the statements, the ``run`` block.  Link errors raise
at once; validation errors found on the way are raised at the end (§7).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

from .. import ir
from ..errors import SerqError, Source, Span, UsageError
from ..expr import walk as expr_walk
from ..node import record
from . import ast as A
from . import pretty
from .choices import place
from .declare import Declarations
from .diag import at, at_from, did_you_mean, error
from .expand import _TRACE_ATTRIBUTES, Expanded, head
from .parsed import parse_expression
from .resolve import Where
from .words import ADMIT, CONTEXT, END, GAUGE, GIVEN, ITERATION, RETIRED, SESSION

_HEADER_DRAW = ("a hold's header may not draw: it is read again at every admission attempt; "
                "sample into an attribute with `set` first")
_PREFIX_DRAW = ("a prefix key or length may not draw: it names cached content and is read again at every "
                "admission attempt; sample into an attribute with `set` first")
_TESTS = {"<", "<=", ">", ">=", "==", "!=", "&&", "||"}


@record(frozen=True)
class Ctx:
    """Where statements are: the context prefix of their errors, and the pools
    of the enclosing holds (pool index, reference as written)."""

    prefix: str
    holds: tuple[tuple[int, str], ...] = ()


class Linker(Declarations):
    def __init__(self, ex: Expanded, sets: Sequence[tuple[str, str]], path: str | None) -> None:
        super().__init__()
        self.ex = ex
        self.sets = list(sets)
        self.path = path
        self.spans: dict[int, Span] = {}  # id(IR statement) → its span, for the lints
        self.observes: dict[str, ir.ObserveDecl] = {}
        self.next_hold = 0
        self.blocks = 0
        self.leased: set[int] = set()  # pools some hold leases: `release` may end a lease outside a hold
        self.flows: list[tuple[ir.Run, A.RunStmt]] = []  # the multi-stage runs, for the `share` rules

    # ------------------------------------------------------------ attributes and constants
    def attributes(self) -> None:
        for name in ir.BUILTIN_ATTRIBUTES:
            self.attrs[name] = len(self.attrs)
        spawns = False
        for block in (self.ex.init, self.ex.turn, self.ex.session):
            for s in A.walk_stmts(block or ()):
                targets: list = [s] if isinstance(s, (A.SetStmt, A.ChooseStmt)) else []
                if isinstance(s, A.SpawnStmt):
                    spawns = True
                    targets = list(s.sets)
                    if s.name not in self.handles:
                        self.handles[s.name] = len(self.handles)
                for x in targets:
                    if x.name in ir.TREE_ATTRIBUTES:
                        raise error(f"`{x.name}` is a built-in attribute of the session tree; it is read-only",
                                    x.name_span, helps=["`parent`, `depth` and `root` are set when a session "
                                                        "starts; keep your own value under another name"])
                    if x.name not in self.attrs:
                        self.check_declared_name(x.name, x.name_span, "a session attribute")
                        self.attrs[x.name] = len(self.attrs)
        if spawns:
            for name in ir.TREE_ATTRIBUTES:
                self.attrs[name] = len(self.attrs)

    @staticmethod
    def check_declared_name(name: str, span: Span, what: str) -> None:
        if name in RETIRED:
            raise error(f"`{name}` is a retired word and names nothing: {RETIRED[name]}", span)
        if name in CONTEXT:
            raise error(f"`{name}` is a context variable; {what} may not take its name", span,
                        helps=["rename it"])
        if name == "inf":
            raise error(f"`inf` is a name the language supplies; {what} may not take it", span, helps=["rename it"])

    def constants(self) -> None:
        overrides = dict(self.sets)  # the last of a name wins
        keys = {}
        for let in self.ex.lets:
            keys[let.name] = let.name
            if isinstance(let.expr, A.ArgsNumber):
                keys.setdefault(let.expr.key, let.name)
        for name in overrides:
            if name not in keys:
                available = ", ".join(f"`{k}`" for k in keys) or "(none)"
                helps, _ = did_you_mean(name, "", keys)
                raise UsageError(f"unknown --set constant `{name}`",  # a command line's mistake: exit 2
                                 helps=helps + [f"`--set` overrides a declared `let`; available constants: {available}"])
        by_let = {keys[k]: (k, v) for k, v in overrides.items()}
        for let in self.ex.lets:
            self.check_declared_name(let.name, let.name_span, "a `let`")
            if let.name in self.let_spans:
                raise error(f"`let {let.name}` is declared twice", let.name_span,
                            notes=[f"the first is at {at(self.let_spans[let.name])}"])
            if let.name in self.attrs:
                raise error(f"`{let.name}` is both a `let` constant and a session attribute", let.name_span,
                            helps=["rename one of them"])
            what = f"`let {let.name}`"
            if let.choices:
                self.lets[let.name] = self.choice(let, by_let.get(let.name))
                if let.name in by_let:
                    self.given.add(let.name)
            elif let.name in by_let:
                key, text = by_let[let.name]
                self.lets[let.name] = self.set_value(key, text, what)
                self.given.add(let.name)
            else:
                e = let.expr.default if isinstance(let.expr, A.ArgsNumber) else let.expr
                self.lets[let.name] = self.const(e, what)
            self.let_spans[let.name] = let.name_span

    def choice(self, let: A.LetItem, given: tuple[str, str] | None) -> float:
        """The place of a ``let``'s choice (docs/language.md, "A choice among
        names"): its default, or the name (or place) a ``--set`` gives.  Its
        names become constants, each its own place, from here on."""
        for k, (name, span) in enumerate(zip(let.choices, let.choice_spans)):
            self.check_declared_name(name, span, "a choice")
            also = ("a session attribute" if name in self.attrs else "a spawn handle" if name in self.handles
                    else {"let": "a `let` constant", "pool": "a pool", "stage": "a stage"}.get(self.declared.get(name, "")))
            if also:
                raise error(f"the choice `{name}` of `let {let.name}` is also {also}", span,
                            helps=["a choice is a constant of the program: rename one of them"])
            if name in self.choices and self.choices[name][0] != k:
                other, first, where = self.choices[name]
                raise error(f"`{name}` is choice {k} of `let {let.name}` but choice {other} of `let {first}`",
                            span, notes=[f"that one is at {at(where)}"],
                            helps=["a name read as a constant has one value: list shared choices in the same order"])
            self.choices.setdefault(name, (k, let.name, span))
        return place(let, given)

    def set_value(self, key: str, text: str, what: str) -> float:
        """A ``--set`` value, evaluated in its ``let``'s place; errors carry no location."""
        try:
            e = parse_expression(Source(text, None))
        except SerqError as err:
            raise UsageError(f"--set {key}: invalid expression in set `{key} = {text}`: {err.message}",
                             helps=err.helps) from None
        try:
            return self.const(e, what)
        except SerqError as err:  # a value that is no constant is the command line's mistake (exit 2)
            raise UsageError(f"--set {key}: {err.message}", helps=err.helps, notes=err.notes) from None

    # ------------------------------------------------------------ statements
    def block(self, block: A.Block, ctx: Ctx) -> ir.Block:
        self.blocks += 1
        out: list[ir.Stmt] = []
        here = ctx
        for s in block:
            if isinstance(s, A.ServerMark):
                out.append(ir.ServerBegin() if s.begin else ir.ServerEnd())
                here = Ctx("server", ctx.holds) if s.begin else ctx
                continue
            x = self.stmt(s, here)
            self.spans[id(x)] = head(s)
            if isinstance(x, ir.Branch) and isinstance(x.guard, ir.Num) and x.guard.value in (0.0, 1.0):
                # a test on constants (a `--set` choice): both sides are checked, the one taken stands
                # in its place (a router picked by number, docs/cluster.md)
                out.extend(x.then if x.guard.value == 1.0 else x.orelse or ())
                continue
            out.append(x)
        return tuple(out)

    def stmt(self, s: A.Stmt, ctx: Ctx) -> ir.Stmt:
        w = Where(SESSION, ctx.prefix)
        if isinstance(s, A.SetStmt):
            return ir.Set(self.attrs[s.name], self.expr(s.expr, w))
        if isinstance(s, A.ObserveStmt):
            return self.observe(s, w)
        if isinstance(s, A.TurnStmt):
            return ir.Turn()
        if isinstance(s, A.EndStmt):
            return ir.End()
        if isinstance(s, A.HoldStmt):
            return self.hold(s, ctx)
        if isinstance(s, A.GrowStmt):
            ref = self.held(s.ref, ctx, "grow", w)
            label = self.site(pretty.grow_label(s), s.amount)
            return ir.Grow(ref, self.amount(s.amount, w, label), label)
        if isinstance(s, A.DropStmt):
            return ir.Drop(self.pool_ref(s.ref.name, s.ref.index, s.ref.name_span, w))
        if isinstance(s, A.ReleaseStmt):
            ref = self.pool_ref(s.ref.name, s.ref.index, s.ref.name_span, w)
            if ref.pool in self.leased:  # outside a hold of it, it ends a lease
                return ir.Release(ref)
            return ir.Release(self.held(s.ref, ctx, "release", w, exact=True))
        if isinstance(s, A.LoadStmt):
            ref = self.held(s.ref, ctx, "load", w, exact=True)
            label = self.site(f"`load {pretty.ref(s.ref)} ({pretty.show(s.amount)})`", s.amount)
            return ir.Load(ref, self.amount(s.amount, w, label), label)
        if isinstance(s, A.RunStmt):
            return self.run(s, ctx, w)
        if isinstance(s, A.BranchStmt):
            guard = self.expr(s.guard, w)
            if s.draw:
                guard = ir.Draw("bernoulli", (guard,))
            orelse = self.block(s.orelse, ctx) if s.orelse is not None else None
            return ir.Branch(guard, self.block(s.then, ctx), orelse, self.site(pretty.branch_label(s), s.guard))
        if isinstance(s, A.LoopStmt):
            return ir.Loop(self.block(s.body, ctx))
        if isinstance(s, A.SpawnStmt):
            sets = tuple(ir.Set(self.attrs[x.name], self.expr(x.expr, w)) for x in s.sets)
            label = self.site(f"`spawn ({pretty.show(s.count)}) into {s.name}`", s.count)
            return ir.Spawn(self.handles[s.name], self.expr(s.count, w), sets, label)
        if isinstance(s, A.JoinStmt):
            if s.name not in self.handles:
                helps, notes = did_you_mean(s.name, "handle", {h: None for h in self.handles})
                raise error(f"`join {s.name}`: no `spawn … into {s.name}` in this program", s.name_span,
                            prefix=ctx.prefix, helps=helps or ["a handle is named by the `spawn` that fills it"],
                            notes=notes)
            if ctx.holds:
                pools = ", ".join(f"`{text}`" for _, text in ctx.holds)
                raise error(f"`join {s.name}` inside a hold of {pools}: hold-and-wait", s.head, prefix=ctx.prefix,
                            helps=["a parent that keeps its slots while it waits for its children can deadlock "
                                   "the pool: the children may need exactly the units it holds; end or leave "
                                   "the hold before `join`"])
            return ir.Join(self.handles[s.name], f"`join {s.name}` at {at_from(s.head, None)}")
        if isinstance(s, A.ChooseStmt):
            keys = tuple(self.expr(k, w) for k in s.keys)
            count = self.expr(s.count, w)
            if isinstance(count, ir.Num) and not count.value <= ir.MAX_MEMBERS:  # (NaN too)
                n = count.value
                shown = f"{n:,.0f}" if math.isfinite(n) and n == int(n) else pretty.number(n)
                raise error(f"{pretty.choose_label(s)} has {shown} candidates: at most "
                            f"{ir.MAX_MEMBERS:,}", s.count.span, prefix=ctx.prefix,
                            helps=[f"a `choose` reads its keys for every candidate, as an aggregate writes out "
                                   f"its terms and a family builds its members: each at most {ir.MAX_MEMBERS:,}"])
            return ir.Choose(self.attrs[s.name], count, keys, self.site(pretty.choose_label(s), s.count))
        raise AssertionError(type(s).__name__)  # pragma: no cover

    def observe(self, s: A.ObserveStmt, w: Where) -> ir.Observe:
        test = (isinstance(s.expr, A.Binary) and s.expr.op in _TESTS) or (
            isinstance(s.expr, A.Unary) and s.expr.op == "!")
        decl = self.observes.get(s.name)
        if decl is None or (test and not decl.is_test):
            self.observes[s.name] = ir.ObserveDecl(s.name, test or (decl is not None and decl.is_test))
        return ir.Observe(list(self.observes).index(s.name), self.expr(s.expr, w))

    def amount(self, e: A.Expr, w: Where, label: str) -> ir.Expr:
        """A statement's amount: a constant one must be a number of units, tokens or seconds."""
        x = self.expr(e, w)
        if isinstance(x, ir.Num) and not x.value >= 0:
            raise error(f"{label}: the amount is {pretty.number(x.value)}, not a number of units, tokens or seconds",
                        e.span, prefix=w.prefix)
        return x

    def held(self, r: A.Ref, ctx: Ctx, verb: str, w: Where, exact: bool = False) -> ir.PoolRef:
        """A pool a statement acts on through an enclosing hold of it."""
        ref = self.pool_ref(r.name, r.index, r.name_span, w)
        written = pretty.ref(r)
        if not any(p == ref.pool and (not exact or text == written) for p, text in ctx.holds):
            same = [text for p, text in ctx.holds if p == ref.pool]
            if same:
                helps = [f"name the pool as the enclosing hold does, index included: `{verb} {same[-1]}`"]
            else:
                helps = [f"it acts on an enclosing hold's allocation: write it inside `hold {written} (…) {{ … }}`"]
            raise error(f"`{verb} {written}` outside a hold of `{written}`", r.name_span, prefix=ctx.prefix,
                        helps=helps)
        return ref

    def hold(self, s: A.HoldStmt, ctx: Ctx) -> ir.Hold:
        w = Where(ADMIT, ctx.prefix, draw=_HEADER_DRAW)
        pools: list[ir.HoldPool] = []
        seen: dict[tuple[int, str], A.HoldPool] = {}
        for p in s.pools:
            ref = self.pool_ref(p.ref.name, p.ref.index, p.ref.name_span, w)
            key = (ref.pool, pretty.ref(p.ref))
            if key in seen:
                raise error(f"this `hold` names pool `{key[1]}` twice", p.ref.name_span, prefix=ctx.prefix,
                            notes=[f"the first is at {at(seen[key].ref.name_span)}"],
                            helps=["one hold takes each pool once; add the amounts"])
            seen[key] = p
            label, reserve_label = pretty.hold_pool_labels(p)
            label, reserve_label = self.site(label, p.units), self.site(reserve_label, p.reserve)
            units = self.amount(p.units, w, label)
            reserve = self.amount(p.reserve, w, reserve_label) if p.reserve is not None else None
            self.fits_cap(p, ref, units, reserve, label, ctx)
            pools.append(ir.HoldPool(ref, units, reserve, label, reserve_label))
        if s.reuse is not None and s.cache is None:
            raise error("`reuse` needs a `cache` clause: a hold without `cache` consumes none of the "
                        "session's cached prefix", s.reuse.span, prefix=ctx.prefix)
        reuse = self.expr(s.reuse, w) if s.reuse is not None else None
        cache = self.expr(s.cache, Where(SESSION, ctx.prefix)) if s.cache is not None else None
        prefix = self.prefix(s, pools, ctx) if s.prefix else ()
        hold_id = self.next_hold
        self.next_hold += 1
        inner = Ctx(ctx.prefix, ctx.holds + tuple((hp.ref.pool, pretty.ref(p.ref)) for hp, p in zip(pools, s.pools)))
        body = self.block(s.body, inner)
        lease = None
        if s.lease is not None:
            written = pretty.ref(s.lease.ref)
            match = [hp.ref for hp, p in zip(pools, s.pools) if pretty.ref(p.ref) == written]
            if not match:
                taken = ", ".join(f"`{pretty.ref(p.ref)}`" for p in s.pools)
                raise error(f"`lease {written}`: the hold does not take that pool", s.lease.ref.name_span,
                            prefix=ctx.prefix,
                            helps=[f"a lease names one of the hold's pools as the hold writes it: {taken}"])
            label = self.site(f"`lease {written} ({pretty.show(s.lease.time)})`", s.lease.time)
            lease = ir.Lease(match[0], self.amount(s.lease.time, Where(SESSION, ctx.prefix), label), label)
        return ir.Hold(hold_id, tuple(pools), body, reuse, cache, lease, pretty.hold_label(s), prefix)

    def prefix(self, s: A.HoldStmt, pools: list[ir.HoldPool], ctx: Ctx) -> tuple[ir.Segment, ...]:
        """A hold's ``prefix`` segments (docs/simulator.md, "Shared prefix cache"): keys and
        lengths are read at admission and may neither draw nor read live state (a key that read
        state would move under the cache); the chain is written by ``cache`` and shared on the
        hold's pools that have a ``block``."""
        first = s.prefix[0].span
        if s.cache is None:
            raise error("`prefix` needs a `cache` clause: a hold without `cache` neither reads nor writes "
                        "the prefix cache", first, prefix=ctx.prefix,
                        helps=["add `cache (…)` after the hold's block, as `cache (prompt + o)`"])
        if not any(self.pool_decls[hp.ref.pool].block for hp in pools):
            names = ", ".join(f"`{self.pool_decls[hp.ref.pool].name}`" for hp in pools)
            raise error(f"`prefix` shares blocks, but no pool of this hold ({names}) has a `block`", first,
                        prefix=ctx.prefix, helps=["give the paged pool a block size: `block 16;`"])
        for hp in pools:
            d = self.pool_decls[hp.ref.pool]
            tier_of = next((o for o in self.pool_decls if o.spill is not None and o.spill.tier == hp.ref.pool), None)
            if d.block and (d.spill is not None or tier_of is not None):
                role = "spills" if d.spill is not None else f"is the tier `{tier_of.name}` spills to"  # type: ignore[union-attr]
                raise error(f"`prefix` shares pool `{d.name}`'s blocks between sessions, and `{d.name}` {role}: "
                            "a spilled piece joins its owner's entry, and a shared block has no one owner",
                            first, prefix=ctx.prefix,
                            helps=["spill from a pool whose holds keep per-session prefixes (no `prefix`): "
                                   "docs/offload.md, \"What is left out\""])
        w = Where(ADMIT, ctx.prefix, draw=_PREFIX_DRAW)
        out = []
        for g in s.prefix:
            key = self.expr(g.key, w)
            length = self.amount(g.length, w, self.site(pretty.segment_label(g), g.length))
            for part, x, what in ((g.key, key, "key"), (g.length, length, "length")):
                state = next((y for y in expr_walk(x) if isinstance(y, (ir.Probe, ir.Ctx))), None)
                if state is not None:
                    read = f"`{state.name}`" if isinstance(state, ir.Ctx) else f"`{state.fn}(…)`"
                    raise error(f"a prefix {what} may not read state, and this one reads {read}: a key or "
                                "length that read state would move under the cache", part.span,
                                prefix=ctx.prefix,
                                helps=["key a segment by attributes and constants, as `prefix (sys: n_sys)`"])
            out.append(ir.Segment(key, length, self.site(pretty.segment_label(g), g.length)))
        return tuple(out)

    def fits_cap(self, p: A.HoldPool, ref: ir.PoolRef, units: ir.Expr, reserve: ir.Expr | None,
                 label: str, ctx: Ctx) -> None:
        """A constant amount above the pool's cap can never be admitted (semantics §2.2)."""
        if not isinstance(units, ir.Num) or not (reserve is None or isinstance(reserve, ir.Num)):
            return
        decl = self.pool_decls[ref.pool]
        need = max(units.value, reserve.value if reserve is not None else 0.0)
        block = decl.block
        q = need / block - 1e-9 if block else math.inf
        rounded = math.ceil(q) * block if block and q < math.inf else need  # (past the largest float: need)
        if rounded > decl.cap + 1e-9:
            n = pretty.number
            blocks = f" ({n(rounded)} in blocks of {n(block)})" if block else ""
            raise error(f"{label} waits for {n(need)} units{blocks}, more than its cap {n(decl.cap)}",
                        p.units.span, prefix=ctx.prefix,
                        helps=[f"such a request could never be admitted; lower the amount or raise the cap of `{decl.name}`"])

    def run(self, s: A.RunStmt, ctx: Ctx, w: Where) -> ir.Run:
        ref = self.stage_ref(s.ref.name, s.ref.index, s.ref.name_span, w)
        if s.also:
            return self.flow(s, ref, ctx, w)
        kind = self.stages[s.ref.name].kind
        if (kind == "step") != (s.mode is not None):
            if s.form == "tool":
                helps = [f"`tool` is a plain run; `{s.ref.name}` is a step stage, so declare a `delay` stage for the tool"]
            elif kind == "step":
                helps = [f"stage `{s.ref.name}` is a step stage: write `run {s.ref.name} prefill (…)` or `decode`"]
            else:
                helps = [f"stage `{s.ref.name}` is a {kind} stage: write `run {s.ref.name} (…)`"]
            raise error("`prefill`/`decode` are required on a step stage and not allowed elsewhere", s.head,
                        prefix=ctx.prefix, helps=helps)
        growing = None
        if s.growing is not None:
            if kind != "step":
                raise error("`growing` needs a step stage", s.growing.name_span, prefix=ctx.prefix,
                            helps=[f"stage `{s.ref.name}` is a {kind} stage"])
            growing = self.held(s.growing, ctx, "growing", w)
        label = self.site(pretty.run_label(s), s.work)
        work = self.amount(s.work, w, label)
        return ir.Run(ref, work, s.mode, growing, label)  # type: ignore[arg-type]

    def flow(self, s: A.RunStmt, ref: ir.StageRef, ctx: Ctx, w: Where) -> ir.Run:
        """``run A, B (w)``: one flow holding every stage (docs/pd.md, "Flows"); each a
        ``ps`` stage of constant capacity, each stage array named once, no mode."""
        refs = [ref]
        seen = {s.ref.name: s.ref}
        for r in s.also:
            if r.name in seen:
                raise error(f"this run names stage `{r.name}` twice", r.name_span, prefix=ctx.prefix,
                            notes=[f"the first is at {at(seen[r.name].name_span)}"],
                            helps=["a flow holds each stage array once: which member it takes is known only "
                                   "when the run starts"])
            seen[r.name] = r
            refs.append(self.stage_ref(r.name, r.index, r.name_span, w))
        if s.mode is not None or s.growing is not None:
            word = s.mode if s.mode is not None else "growing"
            raise error(f"a run on several stages takes no `{word}`", s.head, prefix=ctx.prefix,
                        helps=["a flow is plain work on `ps` stages; a step engine's prefill or decode runs alone"])
        for r, sref in zip([s.ref, *s.also], refs):
            decl = self.stage_decls[sref.stage]
            if decl.kind != "ps" or not isinstance(decl.phi, ir.Num) or not (0.0 < decl.phi.value < math.inf):
                what = (f"a {decl.kind} stage" if decl.kind != "ps" else
                        "a ps stage whose capacity is not a constant above 0")
                raise error(f"a run on several stages holds only `ps` stages of constant capacity, and `{r.name}` "
                            f"is {what}", r.name_span, prefix=ctx.prefix,
                            helps=["a flow's rate is set from its stages' capacities; declare it "
                                   "`stage NAME : ps(C);` with C a number above 0 (it may not read `present`)"])
        label = self.site(f"`run {', '.join(pretty.ref(r) for r in (s.ref, *s.also))} ({pretty.show(s.work)})`", s.work)
        work = self.amount(s.work, w, label)
        flow = ir.Run(ref, work, None, None, label, tuple(refs[1:]))
        self.flows.append((flow, s))
        return flow

    def shared_stages(self, share: "A.ShareItem | None") -> tuple[str | None, tuple[int, ...]]:
        """The ``share`` rules: a program with a multi-stage run declares its policy and
        one without declares none; every stage array a flow holds is shared, and a plain
        run there is a flow of one stage."""
        if not self.flows:
            if share is not None:
                raise error(f"`share {share.policy}`: no run in this program holds several stages",
                            replace(share.span, end=share.span.start + 5),
                            helps=["`share` says how a `run A, B (w)` divides its stages; remove it, or write "
                                   "such a run"])
            return None, ()
        if share is None:
            _run, s = self.flows[0]
            raise error("a run on several stages needs the program's `share maxmin;` or `share bottleneck;`",
                        s.head, helps=["`share` has no default: say how flows divide the stages they hold"])
        shared = sorted({r.stage for x, _s in self.flows for r in (x.stage, *x.also)})
        return share.policy, tuple(shared)

    # ------------------------------------------------------------ the program
    def program(self, trace: str | None) -> ir.Program:
        ex = self.ex
        for kind, decls in (("let", ex.lets), ("pool", ex.pools), ("stage", ex.stages)):
            for d in decls:
                self.declared.setdefault(d.name, kind)
        self.attributes()
        self.constants()
        self.hide_all(ex.workload)
        self.declare_pools_and_stages(ex.pools, ex.stages)
        for block in (ex.init, ex.turn, ex.session):
            for s in A.walk_stmts(block or ()):
                if isinstance(s, A.HoldStmt) and s.lease is not None and s.lease.ref.name in self.pools:
                    self.leased.add(self.pools[s.lease.ref.name].index)
        arrival, trace_decl = self.workload(ex.workload, self.path, trace)
        init = self.block(ex.init, Ctx("init")) if ex.init is not None else ()
        turn = self.block(ex.turn, Ctx("turn")) if ex.turn is not None else None
        session = self.block(ex.session or (), Ctx("session"))
        run = self.run_settings(ex.run, arrival)
        gauges = self.gauges(ex.gauges)
        claims = self.claims(ex.claims)
        share, shared = self.shared_stages(ex.share)
        if self.deferred is not None:
            raise self.deferred
        return ir.Program(
            pools=tuple(self.pool_decls), stages=tuple(self.stage_decls),
            attributes=tuple(self.attrs), observes=tuple(self.observes.values()),
            session=session, init=init, turn=turn, arrival=arrival, trace=trace_decl,
            hidden=frozenset(self.hidden), run=run, constants=dict(self.lets),
            two_sided=ex.two_sided, path=self.path, block_count=self.blocks,
            handles=tuple(self.handles), gauges=gauges, share=share, shared=shared,
            estimated=frozenset(self.estimated), claims=claims,
        )

    def gauges(self, items: list[A.GaugeItem]) -> tuple[ir.Gauge, ...]:
        """The gauges, each read at the Gauge moment: no session, no draw, no clock."""
        out: dict[str, ir.Gauge] = {}
        spans: dict[str, Span] = {}
        for g in items:
            if g.name in spans:
                raise error(f"`gauge {g.name}` is declared twice", g.name_span,
                            notes=[f"the first is at {at(spans[g.name])}"])
            if g.name in self.observes:
                raise error(f"`gauge {g.name}`: `{g.name}` is also an `observe`; a report row has one name",
                            g.name_span, helps=["rename the gauge or the observation"])
            spans[g.name] = g.name_span
            w = Where(moment=GAUGE, prefix=f"gauge `{g.name}`", draw="a gauge may not draw", attrs=False)
            out[g.name] = ir.Gauge(g.name, self.expr(g.expr, w))
        return tuple(out.values())


    def observe_names(self) -> list[str]:
        return list(self.observes)

    def claims(self, items: list[A.ClaimItem]) -> tuple[ir.Claim, ...]:
        """The claims (docs/claims.md): a claim over iterations names a step stage and reads
        an iteration's record; one `at end` reads aggregates of the observations; a
        `given` reads a session's attributes after `init`.  None of them draws."""
        out: list[ir.Claim] = []
        spans: dict[str, Span] = {}
        for c in items:
            if c.name in spans:
                raise error(f"`claim {c.name}` is declared twice", c.name_span,
                            notes=[f"the first is at {at(spans[c.name])}"], helps=["rename one of them"])
            spans[c.name] = c.name_span
            prefix = f"claim `{c.name}`"
            nodraw = "a claim may not draw: it states a property of the run, and reading it must not change it"
            stage = None
            if c.kind != "end":
                assert c.stage is not None and c.stage_span is not None
                stage = self.stage_ref(c.stage, c.stage_index, c.stage_span,
                                       Where(moment=ITERATION, prefix=prefix, draw=nodraw, attrs=False))
                kind = self.stage_decls[stage.stage].kind
                if kind != "step":
                    raise error(f"`{c.kind} iteration of {c.stage}`: stage `{c.stage}` is a `{kind}` stage; only a "
                                "`step` stage iterates", c.stage_span, prefix=prefix,
                                helps=["name a step stage" + self._step_names()])
            w = Where(moment=ITERATION if stage is not None else END, prefix=prefix, draw=nodraw, attrs=False)
            body = self.expr(c.expr, w)  # (the resolver refuses state at end and in `given`: claim_probe)
            given = None
            if c.given is not None:
                given = self.expr(c.given, Where(moment=GIVEN, prefix=prefix, draw=nodraw))
                self.given_reads_init(c.given, prefix)
            site = f"{c.name_span.source.name}:{at(c.name_span)}"
            out.append(ir.Claim(c.name, c.kind, body, given, stage, site))  # type: ignore[arg-type]
        return tuple(out)

    def given_reads_init(self, given: A.Expr, prefix: str) -> None:
        """A `given` is read right after `init` (and a child's `spawn … with` sets): an
        attribute it reads is `serial`, one of the session tree's, one `init` or a spawn sets,
        or under a trace one its columns set."""
        ex = self.ex
        known = {"serial", *ir.TREE_ATTRIBUTES}
        if ex.workload is not None and any(c.word == "trace" for c in ex.workload.clauses):
            known |= _TRACE_ATTRIBUTES
        for s in A.walk_stmts(ex.init or ()):
            if isinstance(s, (A.SetStmt, A.ChooseStmt)):
                known.add(s.name)
        for block in (ex.init, ex.turn, ex.session):
            for s in A.walk_stmts(block or ()):
                if isinstance(s, A.SpawnStmt):
                    known.update(x.name for x in s.sets)
        for x in A.walk_expr(given):
            if isinstance(x, A.Name) and x.id in self.attrs and x.id not in known and x.id not in self.lets:
                raise error(f"`{x.id}` is not set by `init`, and a claim's `given` reads each session's "
                            "attributes right after `init`", x.span, prefix=prefix,
                            helps=["set it in `workload { init { … } }`, or state it in the claim itself"])

    def _step_names(self) -> str:
        steps = [d.name for d in self.stage_decls if d.kind == "step"]
        return f": {', '.join(steps)}" if steps else " (this program has none)"


def link(ex: Expanded, *, sets: Sequence[tuple[str, str]], path: str | None,
         trace: str | None) -> tuple[ir.Program, dict[int, Span]]:
    """The checked program, and the spans of its statements (for the lints)."""
    linker = Linker(ex, sets, path)
    program = linker.program(trace)
    return program, linker.spans


"""Pools, stages, the workload's arrivals and trace, and the ``run`` block
(language §2.6, §2.8, §3, §4, §6.8, §7.3–§7.5)."""

from __future__ import annotations

import math
import sys
import os
from collections.abc import Sequence
from typing import Any, cast

from .. import ir
from . import ast as A
from .diag import at, error, unknown
from .pretty import show
from .resolve import Decl, Resolver, Where
from .words import (
    BUDGET, EVICT, MAX_ALL_MEMBERS, MAX_MEMBERS, PS, RETIRED, SELECT, SERVE, SESSION, STEP, too_many_members,
)

#: The largest `closed(n)` or `batch(n)` (semantics §7.1); the run has a lower,
#: adjustable limit on live sessions (docs/simulator.md, "Run guards and limits").
MAX_POPULATION = 1_000_000

_QUEUE_DRAW = "a queue key may not draw; sample into an attribute first"
_SERVE_DRAW = "a serve key may not draw: it is read for every resident at every iteration"
_ONLY_DRAW = "`serve only` may not draw: it is read for every resident at every iteration"
_RENEWAL = "renewal arrival may use only constants and sampled distributions"


def _clauses(item: A.PoolItem | A.StageItem | A.WorkloadItem | A.RunItem) -> dict[str, A.Clause]:
    return {c.word: c for c in item.clauses}


# A clause's value is typed `object` in the syntax tree (ast.Clause); its word fixes its shape
# (grammar.py: `cap_clause = kw_cap expr semi`, `memory_clause = kw_memory name semi`, …).
def _expr(c: A.Clause) -> A.Expr:
    """The value of `cap`, `block`, `budget`, `chunk`, `cost` and the run options: an expression."""
    return cast(A.Expr, c.value)


def _name(c: A.Clause) -> A.Name:
    """The value of `admit via` and `memory`: a stage or pool name."""
    return cast(A.Name, c.value)


#: The most blocks a pool with a finite cap may have (``cap / block``).
MAX_BLOCKS = 1 << 24


class Declarations(Resolver):
    def __init__(self) -> None:
        super().__init__()
        self.pool_decls: list[ir.PoolDecl] = []
        self.stage_decls: list[ir.StageDecl] = []

    # ------------------------------------------------------------ names first
    def declare_pools_and_stages(self, pools: list[A.PoolItem], stages: list[A.StageItem]) -> None:
        groups: tuple[tuple[str, Sequence[A.PoolItem | A.StageItem], dict[str, Decl]], ...] = (
            ("pool", pools, self.pools), ("stage", stages, self.stages))
        for kind, items, table in groups:
            for i, item in enumerate(items):
                if item.name in RETIRED:
                    raise error(f"`{item.name}` is a retired word and names nothing: {RETIRED[item.name]}",
                                item.name_span)
                if item.name in table:
                    raise error(f"duplicate {kind} `{item.name}`", item.name_span,
                                helps=["rename or remove the duplicate"],
                                notes=[f"`{item.name}` is first declared at {at(table[item.name].span)}"])
                block = None
                if isinstance(item, A.PoolItem) and "block" in _clauses(item):
                    block = self.block_size(_expr(_clauses(item)["block"]), f"pool `{item.name}`")
                table[item.name] = Decl(i, item.name, self.array_size(item), item.name_span,
                                        kind=getattr(item, "kind", ""), block=block)
        self.all_members(pools, stages)
        for p in pools:
            self.pool_decls.append(self.pool(p))
        self.spill_cycles(pools)
        for s in stages:
            self.stage_decls.append(self.stage(s))
        self.budget_cycles(stages)

    def all_members(self, pools: list[A.PoolItem], stages: list[A.StageItem]) -> None:
        """The members of all families together, each built when the run starts: at most
        ``MAX_ALL_MEMBERS``, said at the largest family."""
        decls = [self.pools[p.name] for p in pools] + [self.stages[s.name] for s in stages]
        total = sum(d.size or 1 for d in decls)
        if total > MAX_ALL_MEMBERS:
            big = max(decls, key=lambda d: d.size or 1)
            raise error(f"the program's pools and stages have {total:,} members in all: at most {MAX_ALL_MEMBERS:,}",
                        big.span, helps=[f"`{big.name}` has {big.size:,}; every member is built when the run "
                                         "starts (about 100 µs and 5 KB each): make the families smaller"])

    def positive(self, e: A.Expr, what: str, prefix: str) -> float:
        v = self.const(e, what, prefix)
        if not (v > 0 and math.isfinite(v)):
            raise error(f"{what} must be positive", e.span, prefix=prefix)
        return v

    def block_size(self, e: A.Expr, prefix: str) -> float:
        """A pool's block: positive, finite, and a normal number — a subnormal
        one (below 2.2e-308) has no finite reciprocal, so no amount is a count of
        its blocks."""
        v = self.positive(e, "block", prefix)
        if v < sys.float_info.min:
            shown = show(A.Num(v, e.span)) if isinstance(e, A.Num) else f"`{show(e)}` = {show(A.Num(v, e.span))}"
            raise error(f"block {shown} is below the smallest normal number "
                        f"({sys.float_info.min:.1e}): amounts cannot be counted in such blocks", e.span, prefix=prefix,
                        helps=["a block is the pool's unit of allocation, such as 16 tokens"])
        return v

    def family(self, prefix: str, clause: str, mine: Decl, other: Decl, span) -> None:
        """`admit via` and `memory` pair two families one for one, or one for all (§3)."""
        a, b = mine.size or 1, other.size or 1
        if a != b and a != 1 and b != 1:
            raise error(f"`{clause} {other.name}` names a family of {b}, and `{mine.name}` is a family of {a}: "
                        "it must be one for one, or one for all", span, prefix=prefix)

    def spill_family(self, prefix: str, clause: str, mine: Decl, other: Decl, span) -> None:
        """A spill's tier and link serve the pool's members one for one, or one
        for all: a family of another size has members no pool member would use."""
        a, b = mine.size or 1, other.size or 1
        if b != 1 and b != a:
            whose = f"a family of {a}" if mine.size else "one pool"
            raise error(f"`{clause} {other.name}` names a family of {b}, and `{mine.name}` is {whose}: a spill's "
                        "tier and link are one per member of the pool, or one for all of them", span, prefix=prefix,
                        helps=[f"declare `{other.name}` without `[…]`, one for the pool" if not mine.size else
                               f"declare `{other.name}[{a}]`, one for each member, or `{other.name}` alone, shared"])

    def named(self, kind: str, table: dict[str, Decl], name: A.Name, prefix: str) -> Decl:
        if name.id not in table:
            raise unknown(kind, name.id, name.span, {d.name: d.span for d in table.values()}, prefix=prefix,
                          fallback=f"declare `{kind} {name.id} …`, or use an existing {kind}")
        return table[name.id]

    # ------------------------------------------------------------ pools (§3)
    def array_size(self, item: A.PoolItem | A.StageItem) -> int | None:
        """A family's size, folded: a positive integer up to ``MAX_MEMBERS``."""
        size = item.size
        if size is None or isinstance(size, int):
            return size
        kind = "pool" if isinstance(item, A.PoolItem) else "stage"
        v = self.const(size, f"the size of {kind} `{item.name}`")
        if not (1 <= v < math.inf and v == int(v)):
            raise error(f"array size must be a positive integer, found `{show(size)}` = {show(A.Num(v, size.span))}",
                        size.span, helps=[f"a family has 1 to {MAX_MEMBERS:,} members"])
        if v > MAX_MEMBERS:
            raise too_many_members(v, size.span, f"`{show(size)}` = ")
        return int(v)

    def pool(self, p: A.PoolItem) -> ir.PoolDecl:
        prefix = f"pool `{p.name}`"
        c = _clauses(p)
        cap = math.inf
        if "cap" in c:
            cap = self.const(_expr(c["cap"]), "cap", prefix)
            if cap < 0:
                raise error("cap must not be negative", _expr(c["cap"]).span, prefix=prefix)
        block = self.pools[p.name].block
        if block is not None and cap < math.inf and cap / block > MAX_BLOCKS:
            # an eviction takes a block at a time (each may spill, or re-read the keys): a pool of
            # 6.4e11 blocks (cap 640, block 1e-9) drained for days inside one event
            raise error(f"cap {show(A.Num(cap, p.span))} in blocks of {show(A.Num(block, p.span))} is "
                        f"{cap / block:.3g} blocks: at most {MAX_BLOCKS:,}", _expr(c["block"]).span, prefix=prefix,
                        helps=["an eviction takes a block at a time; a KV cache has thousands to millions of blocks "
                               "(a larger block, or `cap inf` for a pool that never evicts)"])
        evict: object = "lru"
        if "evict" in c and isinstance(c["evict"].value, tuple):
            evict = tuple(self.expr(k, Where(EVICT, prefix)) for k in c["evict"].value)
        queue: object = "fifo"
        if "queue" in c and isinstance(c["queue"].value, tuple):
            queue = tuple(self.expr(k, Where(SELECT, prefix, draw=_QUEUE_DRAW)) for k in c["queue"].value)
        admit_via = None
        if "admit" in c:
            stage = self.named("stage", self.stages, _name(c["admit"]), prefix)
            if stage.kind != "step":
                raise error(f"`admit via {stage.name}` needs a step stage; `{stage.name}` is a {stage.kind} stage",
                            _name(c["admit"]).span, prefix=prefix)
            self.family(prefix, "admit via", self.pools[p.name], stage, _name(c["admit"]).span)
            admit_via = stage.index
        preempt = c["preempt"].value if "preempt" in c else "none"
        spill = self.spill(p, c["spill"]) if "spill" in c else None
        return ir.PoolDecl(p.name, self.pools[p.name].size, cap, self.pools[p.name].block, evict, preempt, queue,  # type: ignore[arg-type]
                           admit_via, spill)

    def spill_cycles(self, pools: list[A.PoolItem]) -> None:
        """Spills go down tiers: a chain of tiers that comes back to a pool would
        evict and spill for ever."""
        decls = self.pool_decls
        for start, d in enumerate(decls):
            chain = [start]
            at_ = d.spill
            while at_ is not None:
                if at_.tier == start:
                    names = " → ".join(f"`{decls[i].name}`" for i in (*chain, start))
                    clause = _clauses(pools[start])["spill"]
                    raise error(f"spills go down tiers, and {names} comes back: each eviction would spill "
                                "for ever", clause.span, prefix=f"pool `{d.name}`",
                                helps=["end the chain with a tier that has no `spill`"])
                if at_.tier in chain:
                    break  # a cycle that does not pass through `start`: reported from its own pools
                chain.append(at_.tier)
                at_ = decls[at_.tier].spill

    def spill(self, p: A.PoolItem, clause: A.Clause) -> ir.Spill:
        """``spill TIER via LINK (work) when (pred)`` (docs/offload.md): a tier
        that is another pool, a link that can run a job with no session, both
        paired with the pool's family one for one or one for all."""
        prefix = f"pool `{p.name}`"
        tier_name, link_name, work, pred = cast(tuple[A.Name, A.Name, A.Expr, A.Expr], clause.value)
        tier = self.named("pool", self.pools, tier_name, prefix)
        if tier.name == p.name:
            raise error(f"`spill {tier.name}`: a pool spills to another pool, its tier", tier_name.span,
                        prefix=prefix, helps=["declare the tier, e.g. `pool host { cap 2e6; }`, and spill there"])
        link = self.named("stage", self.stages, link_name, prefix)
        if link.kind == "step":
            raise error(f"`spill … via {link.name}`: a spill's link runs a job with no session, and step stage "
                        f"`{link.name}` serves sessions' requests", link_name.span, prefix=prefix,
                        helps=["give the link a `fifo`, `ps` or `delay` stage of its own, e.g. "
                               "`stage pcie : fifo;`"])
        self.spill_family(prefix, "spill", self.pools[p.name], tier, tier_name.span)
        self.spill_family(prefix, "spill … via", self.pools[p.name], link, link_name.span)
        where = Where(EVICT, prefix)
        clause_text = f"{prefix}: `spill {tier.name} via {link.name} (…) when (…)`"
        return ir.Spill(tier.index, link.index, self.expr(work, where), self.expr(pred, where),
                        work_site=self.site(f"{clause_text} (its work)", work),
                        pred_site=self.site(f"{clause_text} (its `when`)", pred))

    # ------------------------------------------------------------ stages (§4)
    def stage(self, s: A.StageItem) -> ir.StageDecl:
        prefix = f"stage `{s.name}`"
        if s.kind == "fifo":
            servers = self.whole(s.arg, "fifo servers", prefix) if s.arg is not None else 1
            return ir.StageDecl(s.name, "fifo", self.stages[s.name].size, servers=servers)
        if s.kind == "ps":
            phi = self.expr(s.arg, Where(PS, prefix, attrs=False))  # type: ignore[arg-type]
            return ir.StageDecl(s.name, "ps", self.stages[s.name].size, phi=phi,
                                sites={"ps": self.site(f"{prefix}: `ps({show(s.arg)})`", s.arg)})
        if s.kind == "delay":
            return ir.StageDecl(s.name, "delay", self.stages[s.name].size)
        c = _clauses(s)
        budget = self.expr(_expr(c["budget"]), Where(BUDGET, prefix, attrs=False)) if "budget" in c else ir.Num(math.inf)
        chunk = self.expr(_expr(c["chunk"]), Where(BUDGET, prefix, attrs=False)) if "chunk" in c else ir.Num(0.0)
        cost = self.expr(_expr(c["cost"]), Where(STEP, prefix, attrs=False))
        serve: object = "admission"
        if "serve" in c:
            v = c["serve"].value
            serve = tuple(self.expr(k, Where(SERVE, prefix, draw=_SERVE_DRAW)) for k in v) if isinstance(v, tuple) else v
        memory = None
        if "memory" in c:
            pool = self.named("pool", self.pools, _name(c["memory"]), prefix)
            self.family(prefix, "memory", self.stages[s.name], pool, _name(c["memory"]).span)
            memory = pool.index
        only = self.only(_expr(c["only"]), prefix) if "only" in c else None
        step = ir.StepDecl(cost, budget, chunk, serve, memory, only)  # type: ignore[arg-type]
        sites: dict[str, str] = {word: self.site(f"{prefix}: `{word} {show(_expr(c[word]))}`", _expr(c[word]))
                 for word in ("budget", "chunk", "cost") if word in c}
        if "only" in c:
            sites["only"] = self.site(f"{prefix}: `serve only ({show(_expr(c['only']))})`", _expr(c["only"]))
        return ir.StageDecl(s.name, "step", self.stages[s.name].size, step=step, sites=sites)

    def only(self, e: A.Expr, prefix: str) -> ir.Expr:
        """``serve only (P)``: moment Serve, per resident, as a serve key reads
        (no draw), a test (0 or 1) and not the clock: the engine reads P again
        when something happens, and time passing is not an event, so a P on
        ``now`` would wait past its time (docs/language.md, the step engine)."""
        p = self.expr(e, Where(SERVE, prefix, draw=_ONLY_DRAW))
        from ..expr import walk

        if any(isinstance(x, ir.Ctx) and x.name == "now" for x in walk(p)):
            span = next((x.span for x in A.walk_expr(e) if isinstance(x, A.Name) and x.id == "now"), e.span)
            self.defer(error("`serve only` may not read `now`: it is read again when something happens, "
                             "and time passing is not an event", span, prefix=prefix,
                             helps=["decide by the residents and the engine's totals (`decoding`, `decoders`, "
                                    "`residents`, attributes)"]))
        if isinstance(p, ir.Num) and p.value not in (0.0, 1.0):
            raise error(f"`serve only` is a test, 0 or 1, and this one is always {show(A.Num(p.value, e.span))}",
                        e.span, prefix=prefix, helps=["write a condition on the resident, such as `decoding`"])
        return p

    def budget_cycles(self, stages: list[A.StageItem]) -> None:
        """``budget_left(S)`` is what S's budget leaves once its residents are
        planned, so it reads S's ``budget`` and ``chunk``: those of one step
        stage may not come back to it through ``budget_left`` (a family counts
        as one stage: its members read one another's)."""
        from ..expr import walk

        reads: dict[int, list[int]] = {}
        spans: dict[int, Any] = {}
        for item, decl in zip(stages, self.stage_decls):
            if decl.step is None:
                continue
            si = self.stages[item.name].index
            c = _clauses(item)
            for word, e in (("budget", decl.step.budget), ("chunk", decl.step.chunk)):
                for x in walk(e):
                    if isinstance(x, ir.Probe) and x.fn == "budget_left" and isinstance(x.target, ir.StageRef):
                        reads.setdefault(si, []).append(x.target.stage)
                        spans.setdefault(si, (word, _expr(c[word]).span))
        names = {d.index: d.name for d in self.stages.values()}
        for start in sorted(reads):
            path, seen = [start], {start}
            stack = [iter(reads.get(start, ()))]
            while stack:
                nxt = next(stack[-1], None)
                if nxt is None:
                    stack.pop()
                    path.pop()
                    continue
                if nxt == start:
                    word, span = spans[start]
                    loop = " → ".join(f"`{names[i]}`" for i in [*path, start])
                    raise error(f"the {word} of `{names[start]}` reads `budget_left`, which reads the budget and "
                                f"chunk of the stage it names: {loop} comes back", span,
                                prefix=f"stage `{names[start]}`",
                                helps=["a budget cannot depend on what it leaves; read the other stages' "
                                       "`queue`, `busy` or `work` instead"])
                if nxt not in seen:
                    seen.add(nxt)
                    path.append(nxt)
                    stack.append(iter(reads.get(nxt, ())))

    # ------------------------------------------------------------ the workload (§2.6, §6.8, §7.5)
    def workload(self, wl: A.WorkloadItem | None, path: str | None,
                 trace: str | None) -> tuple[ir.Arrival, ir.TraceDecl | None]:
        c = _clauses(wl) if wl is not None else {}
        arrival = ir.Arrival()
        if "arrive" in c:
            arrival = self.arrival(cast(A.Arrival, c["arrive"].value))
        decl = None
        if "trace" in c:
            t = cast(A.Trace, c["trace"].value)
            decl = ir.TraceDecl(_relative_to(t.path, path), t.ordered)
        if trace is not None:
            decl = ir.TraceDecl(trace, decl.ordered if decl else False)
        if arrival.kind == "trace" and decl is None:
            raise error("`arrive trace` replays a trace's arrival times, and the workload names no trace",
                        cast(A.Arrival, c["arrive"].value).span,
                        helps=['add `trace "FILE.csv";` to the workload: a trace with an `arrival` column '
                               "(docs/replay.md)"])
        return arrival, decl

    def arrival(self, a: A.Arrival) -> ir.Arrival:
        if a.kind == "trace":
            rate = 1.0 if a.arg is None else self.const(a.arg, "the replay rate of `arrive trace`")
            if not (rate > 0 and math.isfinite(rate)):
                raise error("the replay rate of `arrive trace` must be positive and finite",
                            a.arg.span if a.arg is not None else a.span)
            return ir.Arrival("trace", rate=rate)
        if a.kind == "none" or a.arg is None:
            return ir.Arrival()
        if a.kind == "poisson":
            rate = self.const(a.arg, "the poisson rate")
            if not (rate > 0 and math.isfinite(rate)):
                raise error("the poisson rate must be positive and finite", a.arg.span)
            return ir.Arrival("poisson", rate=rate)
        if a.kind == "renewal":
            return ir.Arrival("renewal", gap=self.expr(a.arg, Where(SESSION, "workload", only=_RENEWAL)))
        what = "the closed population" if a.kind == "closed" else "the batch size"
        n = self.whole(a.arg, what)
        if n > MAX_POPULATION:
            raise error(f"{what} is {n:,}; at most {MAX_POPULATION:,} sessions start at once (semantics §7.1)",
                        a.arg.span)
        return ir.Arrival(a.kind, n=n)  # type: ignore[arg-type]

    def hide_all(self, wl: A.WorkloadItem | None) -> None:
        """The workload's `hidden` names, before anything reads attributes."""
        for clause in (x for x in (wl.clauses if wl else ()) if x.word == "hidden"):
            for name in cast("tuple[A.Name, ...]", clause.value):
                self.hide(name)

    def hide(self, name: A.Name) -> None:
        if name.id in ("cached", "computed"):
            raise error(f"`{name.id}` cannot be hidden: the scheduler sets it, so it cannot be hidden from the scheduler",
                        name.span)
        if name.id not in self.attrs:
            raise error(f"hidden `{name.id}`: no `set` or `choose` makes it a session attribute", name.span)
        slot = self.attrs[name.id]
        if slot in self.hidden:
            raise error(f"hidden `{name.id}` twice", name.span)
        self.hidden.add(slot)

    # ------------------------------------------------------------ run settings (§2.8)
    def run_settings(self, run: A.RunItem | None, arrival: ir.Arrival) -> ir.RunSettings:
        c = _clauses(run) if run is not None else {}
        horizon = warmup = None
        if "horizon" in c:
            horizon = self.const(_expr(c["horizon"]), "the horizon")
            if not (math.isfinite(horizon) and horizon > 0):
                raise error("the horizon must be finite and positive", _expr(c["horizon"]).span)
        if "warmup" in c:
            warmup = self.const(_expr(c["warmup"]), "the warmup")
            if not (0 <= warmup < (horizon if horizon is not None else math.inf)):
                self.defer(error("run: need 0 <= warmup < horizon" if warmup < 0 else "warmup must be below the horizon",
                                 _expr(c["warmup"]).span))
        seed = 1
        if "seed" in c:
            v = self.const(_expr(c["seed"]), "the seed")
            if not (v >= 0 and math.isfinite(v) and v < 2 ** 64 and v == int(v)):
                raise error(f"the seed must be an unsigned integer, found {show(A.Num(v, _expr(c['seed']).span))}",
                            _expr(c["seed"]).span)
            seed = int(v)
        arrivals = None
        if "arrivals" in c:
            span = _expr(c["arrivals"]).span
            n = self.const(_expr(c["arrivals"]), "arrivals")
            if not (n >= 1 and math.isfinite(n) and n == int(n)):
                self.defer(error(f"run: arrivals must be a positive whole number, found {show(A.Num(n, span))}", span))
            elif arrival.kind not in ("poisson", "renewal", "trace"):
                self.defer(error("run: arrivals applies only to poisson, renewal or trace workloads", span))
            else:
                arrivals = int(n)
        lines = tuple(_expr(c[k]).span.line_col[0] if k in c else None for k in ("horizon", "warmup"))
        return ir.RunSettings(horizon, warmup or 0.0, seed, arrivals, lines)  # type: ignore[arg-type]


def _relative_to(path: str, program: str | None) -> str:
    """A trace path as written in a program: relative to the program's folder."""
    if program is None or os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(os.path.dirname(program), path))

"""Names → IR expressions (language §6.2–§6.7), with the moment checks.

An expression is resolved at a :class:`Where`: its moment, the context prefix
its errors carry, and what it may not do (draw, read attributes, read anything
but constants).  Name and constant errors are *link* errors and raise at once;
moment, hidden-attribute and draw errors are *validation* errors, which
:meth:`Resolver.defer` keeps until linking is done, so that the phases report
in the order of language §7.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .. import ir
from ..errors import SerqError, Site, Span
from ..expr import DISTRIBUTIONS, MAX_PHASES, PURE_FUNCTIONS, fold, try_fold, walk
from ..node import record
from . import ast as A
from .diag import did_you_mean, error, unknown
from .pretty import show
from .words import (
    CLAIM_AGGREGATES, CONTEXT, END, ESTIMATES, FUNCTIONS, GAUGE, GIVEN, ITERATION, MOMENT_TEXT, OLD_CONTEXT,
    POOL_PROBES, RETIRED, SESSION,
)

#: An aggregate, with those it is nested in, writes out at most this many terms.
MAX_TERMS = ir.MAX_MEMBERS  # (one bound with families and `choose`)


@record(frozen=True)
class Where:
    """Where an expression is read.  ``const`` names a constant position (its
    errors say "`let x`", "the horizon" …); ``draw`` is the message refusing a
    draw; ``attrs`` whether session attributes exist; ``only`` the message
    refusing anything but constants and draws (a renewal gap)."""

    moment: str = SESSION
    prefix: str | None = None
    const: str | None = None
    draw: str | None = None
    attrs: bool = True
    only: str | None = None


@record
class Decl:
    """A pool or stage as the resolver knows it."""

    index: int
    name: str
    size: int | None
    span: Span
    kind: str = ""  # stages: delay fifo ps step
    block: float | None = None  # pools: the folded `block`


class Resolver:
    def __init__(self) -> None:
        self.lets: dict[str, float] = {}
        self.let_spans: dict[str, Span] = {}
        self.attrs: dict[str, int] = {}
        self.handles: dict[str, int] = {}  # spawn handles: a namespace of their own
        self.hidden: set[int] = set()
        self.pools: dict[str, Decl] = {}
        self.stages: dict[str, Decl] = {}
        self.deferred: SerqError | None = None
        #: every `let`, pool and stage the program declares, by kind, wherever it is declared
        #: (an aggregate's index may take none of their names)
        self.declared: dict[str, str] = {}
        self.agg: dict[str, float] = {}  # the indices of the aggregates being written out, and their values
        self.agg_terms = 1  # terms the enclosing aggregates write out, multiplied
        self.estimated: set[int] = set()  # the stages whose online estimates some expression reads
        self.given: set[str] = set()  # the `let`s a `--set` gave
        #: the choices of the `let`s that list them, by name: (its place, its `let`, where it is listed)
        self.choices: dict[str, tuple[int, str, Span]] = {}

    def site(self, label: str, e: A.Expr | None) -> Site:
        """``label`` for run-time errors about ``e``: where ``e`` is written and the
        ``let`` constants it reads (issue 38: an error a `let` causes names it)."""
        if e is None:
            return Site(label)
        names: list[str] = []
        for x in A.walk_expr(e):
            if isinstance(x, A.Name) and x.id in self.lets and x.id not in names:
                names.append(x.id)
        return Site(label, e.span, tuple((n, self.lets[n], n in self.given) for n in names))

    def defer(self, err: SerqError) -> None:
        """Keep the first validation error until linking is done."""
        if self.deferred is None:
            self.deferred = err

    # ------------------------------------------------------------ constants
    def const(self, e: A.Expr, what: str, prefix: str | None = None) -> float:
        """The value of a constant expression; NaN is an error."""
        x = self.resolve(e, Where(const=what, prefix=prefix))
        value = fold(x)
        if value != value:
            raise error(f"{what} is NaN", e.span, helps=["a constant is a number or `inf`"], prefix=prefix)
        return value

    def whole(self, e: A.Expr, what: str, prefix: str | None = None) -> int:
        """A constant that must be a positive integer."""
        v = self.const(e, what, prefix)
        if not (v >= 1 and math.isfinite(v) and v == int(v)):
            raise error(f"{what} must be a positive integer, found {show(A.Num(v, e.span))}", e.span, prefix=prefix)
        return int(v)

    # ------------------------------------------------------------ expressions
    def expr(self, e: A.Expr, w: Where) -> ir.Expr:
        """The IR of ``e`` read at ``w``, with every constant subtree folded and
        every conditional on a constant reduced to its branch."""
        return prune(try_fold(self.resolve(e, w)))

    def opt(self, e: A.Expr | None, w: Where) -> ir.Expr | None:
        return None if e is None else self.expr(e, w)

    def resolve(self, e: A.Expr, w: Where) -> ir.Expr:
        if isinstance(e, A.Num):
            return ir.Num(e.value)
        if isinstance(e, A.Name):
            return self.name(e, w)
        if isinstance(e, A.Unary):
            return ir.Unary(e.op, self.resolve(e.x, w))  # type: ignore[arg-type]
        if isinstance(e, A.Binary):
            return ir.Binary(e.op, self.resolve(e.a, w), self.resolve(e.b, w))
        if isinstance(e, A.Cond):
            return ir.Cond(self.resolve(e.c, w), self.resolve(e.a, w), self.resolve(e.b, w))
        if isinstance(e, A.Call):
            return self.call(e, w)
        if isinstance(e, A.Draw):
            return self.draw(e, w)
        if isinstance(e, A.Aggregate):
            return self.aggregate(e, w)
        if isinstance(e, A.Index):
            kind = "pool" if e.id in self.pools else "stage" if e.id in self.stages else None
            if kind:
                raise error(f"{kind} `{e.id}` is not a value", e.span,
                            helps=[f"read it through a function, as in `{'used' if kind == 'pool' else 'queue'}({show(e)})`"],
                            prefix=w.prefix)
            raise error(f"`{e.id}` is not an array", e.name_span, prefix=w.prefix)
        raise error("`args.number(…)` is accepted only as the whole value of a `let`", e.span, prefix=w.prefix)

    def name(self, e: A.Name, w: Where) -> ir.Expr:
        n = e.id
        if n in self.agg:
            return ir.Num(self.agg[n])
        if n == "now" and w.moment == GAUGE:
            self.defer(error("a gauge may not read `now`: it is a function of the deployment's state, "
                             "averaged over time", e.span, prefix=w.prefix))
            return ir.Num(0.0)
        if n == "now" and w.moment == GIVEN:
            self.defer(error("a claim's `given` may not read `now`: it restricts the workload (each session's "
                             "attributes after `init`), not a moment of the run", e.span, prefix=w.prefix,
                             helps=["state a property of time in the claim itself"]))
            return ir.Num(0.0)
        if w.const is not None:
            if n in self.lets:
                return ir.Num(self.lets[n])
            if n in self.choices:
                return ir.Num(float(self.choices[n][0]))
            if n == "inf":
                return ir.Num(math.inf)
            helps, notes = did_you_mean(n, "", {**self.let_spans, **{c: x[2] for c, x in self.choices.items()}})
            if not helps:
                if n in self.attrs:
                    helps = [f"`{n}` is a session attribute; {w.const} is evaluated before any session exists"]
                elif n in CONTEXT:
                    helps = [f"`{n}` is a context variable; a constant cannot read it"]
                else:
                    helps = ["a constant reads numbers, `inf` and the `let`s above it"]
            raise error(f"`{n}` is not a constant", e.span, helps=helps, notes=notes, prefix=w.prefix)
        if n in self.attrs:
            slot = self.attrs[n]
            if w.only:
                self.defer(error(w.only, e.span, prefix=w.prefix))
            elif not w.attrs:
                self.defer(error(f"`{n}` is a session attribute, but {MOMENT_TEXT[w.moment]}, has no session",
                                 e.span, helps=["read constants, context variables and functions here"],
                                 prefix=w.prefix))
            elif slot in self.hidden and w.moment != SESSION:
                self.defer(error(f"`{n}` is hidden from the scheduler, but is read in {MOMENT_TEXT[w.moment]}",
                                 e.span, helps=["the scheduler may read what a real one would know"],
                                 prefix=w.prefix))
            return ir.Attr(slot, n)
        if n in self.lets:
            return ir.Num(self.lets[n])
        if n in self.choices:
            return ir.Num(float(self.choices[n][0]))
        if n in ir.TREE_ATTRIBUTES:  # a program that never spawns: every session is a root
            if not w.attrs or w.only:
                self.defer(error(w.only or f"`{n}` is a session attribute, but {MOMENT_TEXT[w.moment]}, has no session",
                                 e.span, prefix=w.prefix))
            return ir.Attr(ir.SERIAL, "serial") if n == "root" else ir.Num(-1.0 if n == "parent" else 0.0)
        if n in self.handles:
            raise error(f"`{n}` is a spawn handle, not a number", e.span, prefix=w.prefix,
                        helps=[f"a handle is only named by `spawn … into {n}` and `join {n};`; "
                               "count the children in an attribute of your own"])
        if n in CONTEXT:
            moments = CONTEXT[n]
            if w.only:
                self.defer(error(w.only, e.span, prefix=w.prefix))
            elif w.moment not in moments:
                # (a claim's moments are named only where nothing else reads the variable)
                shown = [m for m in moments if m not in (ITERATION, END, GIVEN)] or moments
                exists = ", or ".join(MOMENT_TEXT[m] for m in shown)
                self.defer(error(f"`{n}` is read in {MOMENT_TEXT[w.moment]}, but it exists only in {exists}",
                                 e.span, prefix=w.prefix))
            return ir.Ctx(n)
        if n == "inf":
            return ir.Num(math.inf)
        if n in OLD_CONTEXT:
            raise error(f"the context variable `{n}` is now `{OLD_CONTEXT[n]}`", e.span, prefix=w.prefix)
        for kind, table, fn in (("pool", self.pools, "used"), ("stage", self.stages, "queue")):
            if n in table:
                raise error(f"{kind} `{n}` is not a value", e.span,
                            helps=[f"read it through a function, as in `{fn}({n})`"], prefix=w.prefix)
        if n in RETIRED:
            raise error(f"`{n}` is a retired word and names nothing: {RETIRED[n]}", e.span, prefix=w.prefix)
        cands: dict[str, Span | None] = dict(self.let_spans)  # attributes have no declaration to point at
        cands.update({c: where for c, (_place, _let, where) in self.choices.items()})
        cands.update({a: None for a in self.attrs})
        raise unknown("name", n, e.span, cands, prefix=w.prefix, kind_in_help=False,
                      fallback="declare a `let` constant, or assign a session attribute with `set` before using it")

    def aggregate(self, e: A.Aggregate, w: Where) -> ir.Expr:
        """``max|min|sum j in n (body)`` written out: the body with ``j`` = 0 …
        n − 1 as the terms of one call (``max(b0, b1, b2)``, ``sum(b0, b1, b2)``),
        combined left to right when it is evaluated (``expr.AGGREGATES``)."""
        what = f"`{e.op} {e.var} in …`"
        j = e.var
        kind = ("a session attribute" if j in self.attrs else "an aggregate's index" if j in self.agg
                else {"let": "a `let` constant", "pool": "a pool", "stage": "a stage"}.get(self.declared.get(j, ""))
                or ("a `let` constant" if j in self.lets else None)
                or (f"a choice of `let {self.choices[j][1]}`" if j in self.choices else None))
        if kind is not None:
            raise error(f"{what}: the index `{j}` is also {kind}", e.var_span, prefix=w.prefix,
                        helps=["an aggregate's index is a fresh name: rename it"])
        if j in CONTEXT or j == "inf" or j in self.handles:
            raise error(f"{what}: the index `{j}` is a name the program already has", e.var_span, prefix=w.prefix,
                        helps=["an aggregate's index is a fresh name: rename it"])
        n = self.const(e.count, f"the count of {what}", w.prefix)
        if not (n >= 1 and math.isfinite(n) and n == int(n)):
            raise error(f"the count of {what} must be a positive integer, found {show(A.Num(n, e.count.span))}",
                        e.count.span, prefix=w.prefix)
        outer = self.agg_terms
        if n * outer > MAX_TERMS:
            raise error(f"{what} writes out {show(A.Num(n * outer, e.span))} terms"
                        + (" with the aggregates it is inside" if outer > 1 else "")
                        + f": at most {MAX_TERMS}", e.span, prefix=w.prefix,
                        helps=["an aggregate is written out term by term when the program is linked"])
        terms: list[ir.Expr] = []
        self.agg_terms = outer * int(n)
        try:
            for k in range(int(n)):
                self.agg[j] = float(k)
                terms.append(self.resolve(e.body, w))
        finally:
            self.agg.pop(j, None)
            self.agg_terms = outer
        return terms[0] if len(terms) == 1 else ir.Call(e.op, tuple(terms))

    def call(self, e: A.Call, w: Where) -> ir.Expr:
        fn, args = e.fn, e.args
        if fn in PURE_FUNCTIONS:
            arity = PURE_FUNCTIONS[fn][0]
            if len(args) != arity:
                raise error(f"`{fn}` takes {arity} argument(s), got {len(args)}", e.name_span, prefix=w.prefix)
            return ir.Call(fn, tuple(self.resolve(a, w) for a in args))  # type: ignore[arg-type]
        if fn in CLAIM_AGGREGATES and w.const is None:
            return self.claim_aggregate(e, w)
        if fn not in FUNCTIONS:
            helps, _ = did_you_mean(fn, "function", FUNCTIONS)
            raise error(f"unknown function `{fn}`", e.name_span, helps=helps, prefix=w.prefix)
        if w.const is not None:
            if fn == "blocksize":
                raise error("`blocksize` is not a constant", e.name_span, prefix=w.prefix,
                            helps=["name the block size with a `let`, and use that"])
            raise error(f"`{fn}` with {len(args)} argument(s) is not a constant function", e.name_span,
                        prefix=w.prefix, helps=["a constant may call `min max abs floor ceil sqrt exp ln pow`"])
        if fn == "blocksize":
            return self.blocksize(e, w)
        self.claim_probe(e, w)
        if fn in ESTIMATES:
            return self.estimate(e, w)
        if w.only:
            self.defer(error(w.only, e.name_span, prefix=w.prefix))
        if w.moment == GAUGE:
            if fn == "cachedin":
                self.defer(error("`cachedin` reads a session's own cache, but a gauge has no session", e.name_span,
                                 prefix=w.prefix, helps=["a gauge reads `used`, `free`, `holders`, `queued`, "
                                                         "`queue` and `busy`"]))
            elif fn in ("work", "budget_left"):
                self.defer(error(f"a gauge may not read `{fn}(…)`", e.name_span, prefix=w.prefix,
                                 helps=["`work` is a sum over the jobs and `budget_left` plans an iteration: "
                                        "neither is a state a gauge follows; `queue` and `busy` are"]))
        kind = "pool" if fn in POOL_PROBES else "stage"
        chain: tuple[ir.Expr, ...] = ()
        if fn == "cachedin" and len(args) > 1:  # cachedin(P, k1, n1, …): along a chain (docs/cluster.md)
            if len(args) % 2 == 0 or any(a is None for a in args):
                raise error(f"`cachedin` takes a pool, or a pool then key, length pairs of a chain; got "
                            f"{len(args)} argument(s)", e.name_span, prefix=w.prefix,
                            helps=["`cachedin(kv, sys, len)`: the cached prefix of a chain whose first segment "
                                   "is `sys: len`, as a hold's `prefix (sys: len)` names it"])
            chain = tuple(self.resolve(a, w) for a in args[1:])  # type: ignore[arg-type]
            args = args[:1]
        if len(args) != 1:
            raise error(f"`{fn}` takes 1 argument(s), got {len(args)}", e.name_span, prefix=w.prefix)
        name, span, index = self.probe_target(fn, args[0], kind, w)
        if kind == "pool":
            return ir.Probe(fn, self.pool_ref(name, index, span, w), chain)
        ref = self.stage_ref(name, index, span, w)
        if fn == "budget_left" and self.stages[name].kind != "step":
            raise error(f"`budget_left` expects a step stage here; `{name}` is a {self.stages[name].kind} stage",
                        span, prefix=w.prefix)
        return ir.Probe(fn, ref)

    def claim_probe(self, e: A.Call, w: Where) -> None:
        """A claim reads the state of pools and stages only over iterations, and there
        neither a session's own cache (it has none) nor ``budget_left``, which plans the
        next iteration (its ``budget`` and ``chunk`` may draw: a claim reads, never acts)."""
        fn = e.fn
        if w.moment == END:
            raise error("a claim `at end` reads `now`, constants and aggregates of observations, not the state "
                        "of pools and stages (every session has ended)", e.name_span, prefix=w.prefix)
        if w.moment == GIVEN:
            raise error("a claim's `given` reads a session's attributes and constants, not the state of pools "
                        "and stages", e.name_span, prefix=w.prefix)
        if w.moment == ITERATION and fn == "cachedin":
            raise error("`cachedin` reads a session's own cache, but a claim over iterations has no session",
                        e.name_span, prefix=w.prefix, helps=["read `used`, `free`, `holders` or `queued` of the pool"])
        if w.moment == ITERATION and fn == "budget_left":
            raise error("a claim may not read `budget_left(…)`: it plans the stage's next iteration, whose "
                        "`budget` and `chunk` may draw, and a claim reads the run without changing it",
                        e.name_span, prefix=w.prefix,
                        helps=["`tokens`, `demand` and `served` say what an iteration takes and could take"])

    def claim_aggregate(self, e: A.Call, w: Where) -> ir.Expr:
        """``total(x)``, ``count(x)``, ``largest(x)``, ``smallest(x)``, ``prefix_total(x)``:
        an aggregate of observation ``x``'s samples, read only by a claim ``at end``."""
        fn = e.fn
        if w.moment != END:
            raise error(f"`{fn}(…)` aggregates an observation over the whole run: only a claim `at end` reads it",
                        e.name_span, prefix=w.prefix,
                        helps=["write `claim NAME: at end (…);`" if w.moment in (ITERATION, GIVEN) else
                               "an aggregate of observations exists once every session has ended"])
        if len(e.args) != 1 or not isinstance(e.args[0], A.Name):
            raise error(f"`{fn}` takes the name of one observation, as in `{fn}(response)`", e.name_span,
                        prefix=w.prefix)
        name = e.args[0]
        names = list(self.observe_names())
        if name.id not in names:
            raise unknown("observation", name.id, name.span, {n: None for n in names}, prefix=w.prefix,
                          fallback="an aggregate reads an `observe NAME = …;` of the session"
                                   + (f": {', '.join(names)}" if names else "; this program observes nothing"))
        return ir.Agg(fn, names.index(name.id))

    def observe_names(self) -> list[str]:
        """The observations' names, in the order of ``Program.observes`` (the linker's)."""
        return []

    def probe_target(self, fn: str, a: A.Expr | None, kind: str, w: Where) -> tuple[str, Span, A.Expr | None]:
        """The pool or stage (``kind``) a probe such as ``used(kv[j])`` or
        ``est_wait(S)`` names: its name, the span to point at and its index
        expression; something else there (a number, an attribute) is an error."""
        if not isinstance(a, (A.Name, A.Index)):
            raise error(f"`{fn}` expects a {kind} name here", a.span, prefix=w.prefix)  # type: ignore[union-attr]
        span = a.span if isinstance(a, A.Name) else a.name_span
        own, other = (self.pools, self.stages) if kind == "pool" else (self.stages, self.pools)
        if a.id not in own and a.id in other | self.attrs | self.lets:
            raise error(f"`{fn}` expects a {kind} name here", span, prefix=w.prefix)
        return a.id, span, a.index if isinstance(a, A.Index) else None

    def estimate(self, e: A.Call, w: Where) -> ir.Expr:
        """``price(S, s_hit, ds)``, ``est_lambda(S)``, ``est_rho(S)``, ``est_wait(S)``: a
        stage's online estimates (docs/offload.md), read anywhere state may be read."""
        fn, args = e.fn, e.args
        arity = 3 if fn == "price" else 1
        if len(args) != arity:
            raise error(f"`{fn}` takes {arity} argument(s), got {len(args)}", e.name_span, prefix=w.prefix,
                        helps=["`price(S, s_hit, ds)`: the price of a miss that lengthens a hit's service "
                               "`s_hit` by `ds` at stage `S`" if fn == "price" else
                               f"`{fn}(S)` reads stage `S`'s estimate"])
        name, span, index = self.probe_target(fn, args[0], "stage", w)
        if w.only:
            self.defer(error(w.only, e.name_span, prefix=w.prefix))
        ref = self.stage_ref(name, index, span, w)
        self.estimated.add(ref.stage)
        rest = tuple(self.resolve(x, w) for x in args[1:])  # type: ignore[arg-type]
        return ir.Probe(fn, ref, rest)

    def blocksize(self, e: A.Call, w: Where) -> ir.Expr:
        if len(e.args) != 1:
            raise error(f"`blocksize` takes one pool, got {len(e.args)} argument(s)", e.name_span, prefix=w.prefix)
        a = e.args[0]
        if not isinstance(a, (A.Name, A.Index)) or a.id not in self.pools:
            if isinstance(a, (A.Name, A.Index)) and a.id not in self.stages | self.attrs | self.lets:
                self.pool_ref(a.id, None, a.span, w)  # unknown pool, with its did-you-mean
            raise error("`blocksize` takes a pool, not an expression", a.span, prefix=w.prefix)  # type: ignore[union-attr]
        index = a.index if isinstance(a, A.Index) else None
        ref = self.pool_ref(a.id, index, a.span if isinstance(a, A.Name) else a.name_span, w)
        if ref.index is not None and any(isinstance(x, ir.Draw) for x in walk(ref.index)):
            raise error(f"`blocksize({show(a)})`: the index draws a sample, and the folded number would drop the draw",
                        a.span, prefix=w.prefix)
        block = self.pools[a.id].block
        if block is None:
            raise error(f"`blocksize({a.id})`: pool `{a.id}` has no `block`", a.span, prefix=w.prefix,
                        helps=[f"give pool `{a.id}` a `block` clause"])
        return ir.Num(block)

    def draw(self, e: A.Draw, w: Where) -> ir.Expr:
        if w.const is not None:
            raise error("a constant cannot sample", e.span, prefix=w.prefix or w.const,
                        helps=["a constant is one number for the whole run; sample in a session with `set`"])
        if e.dist not in DISTRIBUTIONS:
            helps, _ = did_you_mean(e.dist, "distribution", list(DISTRIBUTIONS))
            raise error(f"unknown distribution `{e.dist}`", e.name_span, prefix=w.prefix,
                        helps=helps or ["the distributions are `exp det uniform erlang h2 bernoulli`"])
        arity = DISTRIBUTIONS[e.dist][0]
        if len(e.args) != arity:
            raise error(f"`~{e.dist}` takes {arity} argument(s)", e.name_span, prefix=w.prefix)
        if w.draw:
            self.defer(error(w.draw, e.span, prefix=w.prefix))
        args = tuple(self.resolve(a, w) for a in e.args)
        k = try_fold(args[0]) if e.dist == "erlang" else None
        if isinstance(k, ir.Num) and not 0.0 < k.value <= MAX_PHASES:
            raise error(f"`~erlang` with {show(A.Num(k.value, e.args[0].span))} phases: an Erlang draw has more "
                        f"than 0 and at most {MAX_PHASES:,}", e.args[0].span, prefix=w.prefix)
        return ir.Draw(e.dist, args)

    # ------------------------------------------------------------ pools and stages
    def pool_ref(self, name: str, index: A.Expr | None, span: Span, w: Where) -> ir.PoolRef:
        d = self._decl("pool", self.pools, name, index, span, w)
        return ir.PoolRef(d.index, self._index(d, index, w))

    def stage_ref(self, name: str, index: A.Expr | None, span: Span, w: Where) -> ir.StageRef:
        d = self._decl("stage", self.stages, name, index, span, w)
        return ir.StageRef(d.index, self._index(d, index, w))

    def _decl(self, kind: str, table: dict[str, Decl], name: str, index: A.Expr | None, span: Span,
              w: Where) -> Decl:
        if name not in table:
            raise unknown(kind, name, span, {d.name: d.span for d in table.values()}, prefix=w.prefix,
                          fallback=f"declare `{kind} {name} …` or use an existing {kind}"
                                   + (f": {', '.join(sorted(table))}" if table else ""))
        d = table[name]
        if d.size is not None and index is None:
            raise error(f"{kind} `{name}` is an array; index it", span, prefix=w.prefix,
                        helps=[f"name a member, `{name}[0]` to `{name}[{d.size - 1}]`"])
        if d.size is None and index is not None:
            raise error(f"{kind} `{name}` is not an array; it takes no index", span, prefix=w.prefix)
        return d

    def _index(self, d: Decl, index: A.Expr | None, w: Where) -> ir.Expr | None:
        if index is None:
            return None
        x = self.expr(index, replace(w, const=None))
        if w.moment in (GAUGE, ITERATION, END) and not isinstance(x, ir.Num):
            who = "a gauge" if w.moment == GAUGE else "a claim"
            raise error(f"index `{show(index)}`: {who}'s index is a number in range, not read from the state "
                        "(one read could leave the array while the run goes on)", index.span, prefix=w.prefix,
                        helps=["write the member's number, a constant, or an aggregate's index"])
        if isinstance(x, ir.Num) and not (0 <= x.value < (d.size or 0) and x.value == int(x.value)):
            raise error(f"index `{show(index)}` is {show(A.Num(x.value, index.span))}: a member of an array of "
                        f"{d.size} is 0 to {(d.size or 1) - 1}", index.span, prefix=w.prefix)
        return x



def prune(e: ir.Expr) -> ir.Expr:
    """``c ? a : b`` with a constant ``c`` replaced by the branch it takes."""
    if isinstance(e, ir.Cond):
        if isinstance(e.c, ir.Num):
            return prune(e.a if e.c.value != 0.0 else e.b)
        return ir.Cond(e.c, prune(e.a), prune(e.b))
    if isinstance(e, ir.Unary):
        return ir.Unary(e.op, prune(e.x))
    if isinstance(e, ir.Binary):
        return ir.Binary(e.op, prune(e.a), prune(e.b))
    if isinstance(e, (ir.Call, ir.Draw)):
        return replace(e, args=tuple(prune(a) for a in e.args))
    return e

"""The explorer: every path of a family of workloads, on the exact machine.

Paths branch where a session arrives (its attributes are chosen from the
family) and are explored depth first, each from a copy of the machine at the
branch.  Two paths that reach the same exact state at the same instant, with
the same counters and observations so far, have the same future: the second
is not explored again (``states`` counts the distinct states met, ``paths``
the workloads run to their end or to a repeat).

A deterministic program whose arrivals never end is one path: it is run
until its state recurs up to a shift of time (:meth:`Machine.key`); from
there on it repeats one period for ever, and a claim over its iterations is
decided for every repetition by :mod:`serq.prove.periodic`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
import math
from fractions import Fraction
from typing import Any, Callable, Sequence

from .. import ir
from .exact import Env, Unsupported, compiled, norm
from .family import Family
from .machine import Iteration, Machine, NeedSession, Observed
from .periodic import GROWING, Nonlinear, repetitions_to_check


@dataclass
class Limits:
    """How far the explorer goes before it answers ``unknown``."""

    max_states: int = 2_000_000  # machine steps over all paths
    max_paths: int = 200_000
    #: a path that never ends gives up on repeating once this many sessions are live at once
    max_live: int = 1_000


@dataclass
class Verdict:
    """One claim's verdict over a family (docs/claims.md)."""

    name: str
    kind: str  # every, some, end
    stage: str
    verdict: str = "unknown"  # proved, refuted, witnessed, no witness, unknown
    reason: str = ""
    family: str = ""
    paths: int = 0
    states: int = 0
    first: Fraction | None = None
    period: Fraction | None = None
    sessions: list[dict[str, Any]] | None = None  # the counterexample or witness

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.stage:
            d["stage"] = self.stage
        d.update(verdict=self.verdict, reason=self.reason, family=self.family, paths=self.paths,
                 states=self.states, first=_num(self.first), period=_num(self.period))
        if self.sessions is not None:
            d["counterexample"] = {"sessions": self.sessions}
        return d


def _num(x: Any) -> Any:
    if x is None:
        return None
    x = Fraction(x)
    return int(x) if x.denominator == 1 else float(x)


class _ClaimEnv(Env):
    """A claim's reading of the machine: the iteration record's variables, the probes."""

    __slots__ = ("m",)

    def __init__(self, m: Machine, ctx: dict[str, Any]) -> None:
        super().__init__((), ctx)
        self.m = m

    def probe(self, fn: str, target_kind: str, index: int) -> Any:
        return self.m.probe(fn, target_kind, index)


_ITER_VARS = ("now", "tokens", "decoders", "prefilled", "kv_decode", "kv_prefill", "attention", "residents",
              "demand", "served", "arrived")


def _record_ctx(r: Iteration) -> dict[str, Any]:
    return {k: getattr(r, k) for k in _ITER_VARS}


def _aggs_to_ctx(e: ir.Expr) -> ir.Expr:
    """``total(x)`` … as context variables ``__agg_total_3`` the end's context gives."""
    if isinstance(e, ir.Agg):
        return ir.Ctx(f"__agg_{e.fn}_{e.obs}")
    if isinstance(e, ir.Unary):
        return ir.Unary(e.op, _aggs_to_ctx(e.x))
    if isinstance(e, ir.Binary):
        return ir.Binary(e.op, _aggs_to_ctx(e.a), _aggs_to_ctx(e.b))
    if isinstance(e, ir.Cond):
        return ir.Cond(_aggs_to_ctx(e.c), _aggs_to_ctx(e.a), _aggs_to_ctx(e.b))
    if isinstance(e, ir.Call):
        return ir.Call(e.fn, tuple(_aggs_to_ctx(a) for a in e.args))
    return e


def _end_ctx(now: Any, samples: dict[int, list], p: ir.Program) -> dict[str, Any]:
    """The aggregates at the end; of an observation without samples, as the run's monitor
    reads them (serq/sim/claims.py): count, total and prefix_total 0, largest −inf, smallest +inf."""
    ctx: dict[str, Any] = {"now": now}
    for obs in range(len(p.observes)):
        ys = sorted(samples.get(obs, ()))
        n = len(ys)
        ctx[f"__agg_total_{obs}"] = norm(sum(ys, Fraction(0)))
        ctx[f"__agg_count_{obs}"] = n
        ctx[f"__agg_largest_{obs}"] = ys[-1] if ys else -math.inf
        ctx[f"__agg_smallest_{obs}"] = ys[0] if ys else math.inf
        ctx[f"__agg_prefix_total_{obs}"] = norm(sum(((n - i) * y for i, y in enumerate(ys)), Fraction(0)))
    return ctx


def init_with(p: ir.Program, serial: int, time: Any, chosen: dict[int, Any]) -> tuple[tuple, list[tuple[int, Any]]]:
    """A session's attributes after ``init`` with the drawn ones ``chosen``, and the
    samples its ``init`` observes (obs, value)."""
    a: list[Any] = [0] * len(p.attributes)
    a[ir.SERIAL] = serial
    env = Env(a, {"now": time})
    obs = []
    for st in p.init:
        if isinstance(st, ir.Set):
            a[st.slot] = chosen[st.slot] if st.slot in chosen else compiled(st.expr)(env)
        elif isinstance(st, ir.Observe):
            obs.append((st.obs, compiled(st.expr)(env)))
    return tuple(a), obs


@dataclass
class _Path:
    """What one path carries besides its machine."""

    sessions: list[dict[str, Any]] = field(default_factory=list)
    samples: dict[int, list] = field(default_factory=dict)

    def fork(self) -> "_Path":
        return _Path(list(self.sessions), {k: list(v) for k, v in self.samples.items()})


class Explorer:
    """The claims sharing one family (one ``given``), explored together."""

    def __init__(self, p: ir.Program, claims: Sequence[ir.Claim], verdicts: Sequence[Verdict], family: Family,
                 limits: Limits) -> None:
        self.p = p
        self.claims = list(claims)
        self.verdicts = list(verdicts)
        self.family = family
        self.limits = limits
        self.tests = [compiled(_aggs_to_ctx(c.expr)) for c in claims]
        self.given = [None if c.given is None else compiled(c.given) for c in claims]
        self.states = 0
        self.paths = 0
        self.seen: set = set()
        self.cut: str | None = None  # why the exploration stopped short
        self.unended: str | None = None  # why a path had no end (a deadlock): `at end` claims stay unknown
        self.excluded = 0  # partial workloads no session of the family could continue (`given`)
        #: the attributes a counterexample lists: every one `init` sets (the drawn ones first)
        set_by_init = [st.slot for st in p.init if isinstance(st, ir.Set)]
        self.shown = list(dict.fromkeys([*family.choices, *set_by_init]))
        self.stage_of = [c.stage.stage if c.stage is not None else None for c in claims]

    # -- the verdicts ---------------------------------------------------------------------------

    def open(self, i: int) -> bool:
        """Whether claim ``i`` can still change its verdict."""
        return self.verdicts[i].verdict not in ("refuted", "witnessed")

    def all_settled(self) -> bool:
        return not any(self.open(i) for i in range(len(self.claims)))

    def _found(self, i: int, verdict: str, now: Any, path: _Path) -> None:
        v = self.verdicts[i]
        v.verdict, v.first = verdict, Fraction(now)
        v.sessions = [dict(s) for s in path.sessions]

    # -- one iteration, one end --------------------------------------------------------------

    def _iteration(self, r: Iteration, m: Machine, path: _Path) -> None:
        ctx = _record_ctx(r)
        env = _ClaimEnv(m, ctx)
        for i, c in enumerate(self.claims):
            if self.stage_of[i] != r.stage or not self.open(i) or c.kind == "end":
                continue
            ok = self.tests[i](env) != 0
            if c.kind == "every" and not ok:
                self._found(i, "refuted", r.now, path)
            elif c.kind == "some" and ok:
                self._found(i, "witnessed", r.now, path)

    def _end(self, m: Machine, path: _Path) -> None:
        if m.sessions:  # nothing left to happen, sessions still live: a deadlock, the workload has no end
            if self.unended is None:
                self.unended = (f"a workload of the family never ends: at {_num(Fraction(m.now))}, "
                                f"{len(m.sessions)} session(s) wait for what never comes, so there is no end "
                                "to read the claim at (`serq run` says `not evaluated`)")
            return
        env = _ClaimEnv(m, _end_ctx(m.now, path.samples, self.p))
        for i, c in enumerate(self.claims):
            if c.kind == "end" and self.open(i):
                try:
                    ok = self.tests[i](env) != 0
                except (ArithmeticError, ValueError):  # −inf + inf, floor(−inf): of an empty observation
                    raise Unsupported("arithmetic on `largest`/`smallest` of an observation without samples") \
                        from None
                if not ok:
                    self._found(i, "refuted", m.now, path)

    # -- branching ------------------------------------------------------------------------------

    def choices(self, serial: int, time: Any) -> list[tuple[tuple, list, dict[str, Any]]]:
        """Every session the family allows at this arrival, inside every claim's ``given``."""
        fam = self.family
        slots = list(fam.choices)
        out = []
        for combo in itertools.product(*(fam.choices[s] for s in slots)):
            chosen = {s: norm(v) for s, v in zip(slots, combo)}
            attrs, obs = init_with(self.p, serial, time, chosen)
            env = Env(attrs, {})
            if any(g is not None and g(env) == 0 for g in self.given):
                continue
            shown = {self.p.attributes[s]: _num(attrs[s]) for s in self.shown}
            out.append((attrs, obs, {"serial": serial, "arrival": _num(time), "attributes": shown}))
        return out

    def run(self, m: Machine) -> None:
        """Explore every path from ``m`` (depth first)."""
        stack: list[tuple[Machine, _Path]] = [(m, _Path())]
        lim = self.limits
        while stack:
            if self.all_settled():
                return
            if self.paths >= lim.max_paths:
                self.cut = f"more than {lim.max_paths:,} workloads (--max-paths)"
                return
            m, path = stack.pop()
            while True:
                if self.states >= lim.max_states:
                    self.cut = f"more than {lim.max_states:,} states (--max-states)"
                    return
                recs = m.step()
                self.states += 1
                if not recs and m.done:
                    self._end(m, path)
                    self.paths += 1
                    break
                branch = None
                for r in recs:
                    if isinstance(r, Iteration):
                        self._iteration(r, m, path)
                    elif isinstance(r, Observed):
                        path.samples.setdefault(r.obs, []).append(r.value)
                    elif isinstance(r, NeedSession):
                        branch = r
                if branch is not None:
                    kids = self.choices(branch.serial, branch.time)
                    if not kids:  # no session of the family satisfies `given` here: not a workload of it
                        self.excluded += 1
                        break
                    for attrs, obs, shown in reversed(kids):
                        m2 = m.copy() if len(kids) > 1 else m
                        p2 = path.fork() if len(kids) > 1 else path
                        m2.supply(attrs)
                        p2.sessions.append(shown)
                        for o, v in obs:
                            p2.samples.setdefault(o, []).append(v)
                        stack.append((m2, p2))
                    break
                if m.done:
                    self._end(m, path)
                    self.paths += 1
                    break
                if not self.family.deterministic:
                    key = (m.key(), m.now, m.arrived, _frozen(path.samples), _served(m))
                    if key in self.seen:
                        self.paths += 1
                        break
                    self.seen.add(key)


def _frozen(samples: dict[int, list]) -> tuple:
    return tuple(sorted((k, tuple(sorted(v))) for k, v in samples.items()))


def _served(m: Machine) -> tuple:
    """Each step stage's tokens served so far: a claim may read them, so two paths merge
    only when they agree on them too."""
    return tuple(None if e is None else e.served for e in m._engines)


def explore_endless(p: ir.Program, claims: Sequence[ir.Claim], verdicts: Sequence[Verdict], limits: Limits) -> str | None:
    """One deterministic path that never ends: run it until its state recurs,
    then decide each claim over iterations for every repetition.  Returns why it
    stopped short (None: decided)."""
    m = Machine(p, unbounded=True)
    tests = [compiled(c.expr) for c in claims]
    records: list[tuple[Iteration, dict[tuple, Any]]] = []  # every iteration, with its probes' values
    seen: dict[Any, tuple[int, Any, Any]] = {}
    states = 0
    while True:
        if all(v.verdict in ("refuted", "witnessed") for v in verdicts):
            for v in verdicts:
                v.states, v.paths = states, 1
            return None
        if states >= limits.max_states or len(m.sessions) > limits.max_live:
            for v in verdicts:  # (what was explored before giving up, as a finished path shows it)
                v.states, v.paths = states, 1
        if states >= limits.max_states:
            return f"no repeated state within {limits.max_states:,} steps (--max-states)"
        if len(m.sessions) > limits.max_live:
            return (f"the path does not repeat: past time {_num(Fraction(m.now)):g} more than {limits.max_live:,} "
                    "sessions are live at once and the backlog keeps growing")
        recs = m.step()
        states += 1
        if recs and isinstance(recs[0], NeedSession):
            m.supply_init()
            continue
        for r in recs:
            if isinstance(r, Iteration):
                probes = _ProbeMemo(m)  # (read as a probe's value: kept for the period's repetitions)
                env = _ClaimEnv(probes, _record_ctx(r))  # type: ignore[arg-type]
                for i, c in enumerate(claims):
                    if c.stage is None or c.stage.stage != r.stage or verdicts[i].verdict in ("refuted", "witnessed"):
                        continue
                    ok = tests[i](env) != 0
                    v = verdicts[i]
                    if c.kind == "every" and not ok:
                        v.verdict, v.first = "refuted", Fraction(r.now)
                    elif c.kind == "some" and ok:
                        v.verdict, v.first = "witnessed", Fraction(r.now)
                records.append((r, probes.values))
        if m.done:
            for v in verdicts:
                v.states, v.paths = states, 1
            return "the path ended"
        key = m.key()
        if key in seen:
            start, t0, a0 = seen[key]
            period = Fraction(m.now) - Fraction(t0)
            arrived = m.arrived - a0
            window = records[start:]
            for i, c in enumerate(claims):
                v = verdicts[i]
                v.states, v.paths = states, 1
                if v.verdict in ("refuted", "witnessed"):
                    continue
                mine = [(r, pv) for r, pv in window if c.stage is not None and r.stage == c.stage.stage]
                if not mine:
                    v.verdict = "proved" if c.kind == "every" else "no witness"
                    v.period = period
                    continue
                served = _served_in(window, c.stage.stage)  # type: ignore[union-attr]
                delta = {"now": period, "served": served, "arrived": arrived}
                try:
                    found = _decide(c, tests[i], mine, delta)
                except (Nonlinear, Unsupported) as err:
                    v.verdict, v.reason = "unknown", f"the path repeats every {_num(period)}, but {err}"
                    continue
                v.period = period
                if found is None:
                    v.verdict = "proved" if c.kind == "every" else "no witness"
                else:
                    v.verdict = "refuted" if c.kind == "every" else "witnessed"
                    v.first = found
            return None
        seen[key] = (len(records), m.now, m.arrived)


class _ProbeMemo:
    """The machine's probes, remembered as read (for the repetitions of a period)."""

    def __init__(self, m: Machine) -> None:
        self.m = m
        self.values: dict[tuple, Any] = {}

    def probe(self, fn: str, kind: str, index: int) -> Any:
        k = (fn, kind, index)
        if k not in self.values:
            self.values[k] = self.m.probe(fn, kind, index)
        return self.values[k]


class _Fixed:
    def __init__(self, values: dict[tuple, Any]) -> None:
        self.values = values

    def probe(self, fn: str, kind: str, index: int) -> Any:
        return self.values[(fn, kind, index)]


def _served_in(window: Sequence[tuple[Iteration, Any]], stage: int) -> Any:
    """The tokens one period serves on ``stage``: the next period starts where this one's served ends."""
    its = [r for r, _ in window if r.stage == stage]
    last = its[-1]
    return last.served + last.tokens - its[0].served


def _decide(c: ir.Claim, test: Callable, mine: Sequence[tuple[Iteration, Any]], delta: dict[str, Any]) -> Fraction | None:
    """The first time, over every repetition, that ``c`` fails (every) or is witnessed (some); None: never."""
    best: Fraction | None = None
    for r, probes in mine:
        ctx = _record_ctx(r)

        def base(e: ir.Expr, ctx=ctx, probes=probes) -> Any:
            env = _ClaimEnv(_Fixed(probes), ctx)  # type: ignore[arg-type]
            return compiled(e)(env)

        ks = repetitions_to_check(c.expr, base, {k: delta[k] for k in GROWING})
        for k in ks:
            shifted = dict(ctx)
            for name in GROWING:
                shifted[name] = norm(Fraction(ctx[name]) + k * Fraction(delta[name]))
            ok = test(_ClaimEnv(_Fixed(probes), shifted)) != 0  # type: ignore[arg-type]
            hit = (not ok) if c.kind == "every" else ok
            if hit:
                t = Fraction(shifted["now"])
                if best is None or t < best:
                    best = t
                break
    return best

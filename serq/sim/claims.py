"""Claims on the path a run takes (docs/claims.md).

A claim reads and never acts.  ``every``/``some iteration of S (E)`` is read at
the start of each iteration of step stage ``S``, once its batch is formed: the
record the engine writes to its step log (the time, the cost's variables) with
``demand``, ``served`` and ``arrived`` beside it.  The monitor takes the step
log's place (:class:`Iterations` forwards to the real log when ``--steps``
asked for one), so the engine is not changed; as with ``--steps``, a stage a
claim reads runs iteration by iteration, which gives the same report.
``at end (E)`` is read once, at the instant the last session ends, when the
workload will bring no more (``batch``, ``--arrivals N``, the end of a trace).
``given (G)`` is read for each session after ``init``: one that fails it puts
the run outside the claim's family, and the claim is ``out of scope``.

A claim that reads only what a run of identical decode iterations keeps
(:data:`STEADY`: the tokens, the residents, the demand, the arrivals so far)
has one value over such a run, so its stage keeps its coalesced runs: the
step log gets a run's first iteration, and the run's other iterations count
as read with the same result (their number is the stage's iteration count
at the next record).  A claim reading ``now``, ``served``, the KV or a pool's
state turns the stage's runs off.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

from .. import ir
from ..expr import Frame, compile_expr, walk
from ..report import ClaimResult, shortest
from .compile import pool_source, stage_source

if TYPE_CHECKING:
    from .session import Session
    from .simulator import Simulator


#: what every iteration of a coalesced decode run reads alike (all residents decode one token)
STEADY = frozenset(("tokens", "decoders", "prefilled", "residents", "demand", "attention", "arrived"))


def steady(e: ir.Expr) -> bool:
    """Whether ``e`` reads nothing that changes within a run of identical decode iterations."""
    for x in walk(e):
        if isinstance(x, ir.Ctx) and x.name not in STEADY:
            return False
        if isinstance(x, (ir.Probe, ir.Attr, ir.Draw)):
            return False
    return True


def _true(v: float) -> bool:
    return v != 0.0 and v == v


class _Claim:
    """One claim's compiled expressions and what the run showed of it."""

    def __init__(self, claim: ir.Claim, test: Callable[[Any], float],
                 given: Callable[[Any], float] | None) -> None:
        self.claim = claim
        self.test = test
        self.given = given
        self.checked = 0
        self.failures = 0
        self.first: float | None = None  # the first failure (every, end) or witness (some)
        self.outside: str | None = None  # the session that put the run outside `given`
        self.done = False  # nothing more to read (witnessed, or out of scope)


class Iterations:
    """What a step stage a claim reads writes its iteration records to: the
    claims over its iterations are read, and the record goes on to the step
    log if there is one.  The record is the step log's row: time, cost,
    tokens, decoders, prefilled, kv_decode, kv_prefill, attention, residents."""

    def __init__(self, monitor: "ClaimMonitor", engine: Any, claims: list[_Claim], log: Any) -> None:
        self.monitor = monitor
        self.engine = engine
        self.claims = claims
        #: the step log proper (``--steps``), or None
        self.log = log
        self.served = 0.0
        #: the stage's iteration count at the latest record, and each claim's result there
        #: (for the iterations of a coalesced run that followed it: :meth:`close`)
        self.mark = 0
        self.last: list[bool | None] = [None] * len(claims)
        # what the claims' compiled code reads as context variables
        self.tokens = self.decoders = self.prefilled = self.kv_decode = self.kv_prefill = 0.0
        self.attention = self.residents = self.demand = self.arrived = 0.0

    def close(self) -> None:
        """The iterations since the latest record beyond its first (a coalesced run's
        others) were read alike: count them, with that record's results."""
        more = self.engine.iterations - self.mark - 1
        if more <= 0:
            return
        self.served += self.tokens * more
        for c, ok in zip(self.claims, self.last):
            if ok is None or c.done:
                continue
            c.checked += more
            if not ok and c.claim.kind == "every":
                c.failures += more

    def extend(self, row: tuple) -> None:
        if self.log is not None:
            self.log.extend(row)
        self.close()
        self.mark = self.engine.iterations
        (now, _cost, self.tokens, self.decoders, self.prefilled, self.kv_decode, self.kv_prefill,
         self.attention, self.residents) = row
        demand = 0.0
        for job in self.engine.residents:
            demand += job.work if job.prefill else 1.0
        self.demand = demand
        self.arrived = float(self.monitor.sim.arrivals)
        last = self.last
        for i, c in enumerate(self.claims):
            if c.done:
                last[i] = None
                continue
            c.checked += 1
            ok = last[i] = _true(c.test(self))
            if ok:
                if c.claim.kind == "some":
                    c.first, c.done = now, True
            elif c.claim.kind == "every":
                c.failures += 1
                if c.first is None:
                    c.first = now
        self.served += self.tokens


class _End:
    """The context of a claim ``at end``: the aggregates of the observations."""

    def __init__(self, samples: list[list[tuple[float, int, int, float]]]) -> None:
        self.samples = samples

    def agg(self, fn: str, obs: int) -> float:
        xs = [row[3] for row in self.samples[obs]]
        if fn == "count":
            return float(len(xs))
        if fn == "total":
            return math.fsum(xs)
        if fn == "largest":
            return max(xs) if xs else -math.inf
        if fn == "smallest":
            return min(xs) if xs else math.inf
        xs.sort()  # prefix_total: the sum of the prefix sums of the ascending samples
        n = len(xs)
        return math.fsum((n - i) * x for i, x in enumerate(xs))


class ClaimMonitor:
    """The program's claims, read on the run's path."""

    def __init__(self, sim: "Simulator") -> None:
        self.sim = sim
        program = sim.program
        frame = Frame(sim.ns, attrs="c.a", ctx="c", session=None, stream="_mrng",
                      resolve_pool=lambda ref, f: pool_source(sim, ref, f),
                      resolve_stage=lambda ref, f: stage_source(sim, ref, f))
        self.claims: list[_Claim] = []
        by_engine: dict[int, list[_Claim]] = {}
        for claim in program.claims:
            given = None if claim.given is None else compile_expr(claim.given, frame.derive(session="c"))
            c = _Claim(claim, compile_expr(claim.expr, frame), given)
            self.claims.append(c)
            if claim.stage is not None:
                engine = self._engine(claim.stage)
                by_engine.setdefault(id(engine), []).append(c)
        self.givens = [c for c in self.claims if c.given is not None]
        for engine in sim.engines:
            mine = by_engine.get(id(engine))
            if mine:
                if not all(steady(c.claim.expr) for c in mine):
                    engine.coalesce = False  # every iteration is read (the report is the same: docs/simulator.md)
                engine.step_log = Iterations(self, engine, mine, engine.step_log)
        self.logs = [e.step_log for e in sim.engines if isinstance(e.step_log, Iterations)]
        self.at_end = [c for c in self.claims if c.claim.kind == "end"]
        self.end_time: float | None = None

    def _engine(self, ref: ir.StageRef) -> Any:
        members = self.sim.stages[ref.stage]
        index = 0 if ref.index is None else int(ref.index.value)  # type: ignore[union-attr]
        return members[index]

    # -- hooks the population calls ----------------------------------------------------------

    def session_started(self, s: "Session") -> None:
        """A session's attributes after ``init``: is it inside every claim's ``given``?"""
        for c in self.givens:
            if c.outside is None:
                if not _true(c.given(s)):  # type: ignore[misc]
                    c.outside = f"session {s.serial} (arrived at {shortest(self.sim.env.now)}) fails `given`"
                    c.done = True

    def session_ended(self) -> None:
        """A session ended: when it was the last (none is live and the workload brings
        no more), the claims `at end` are read."""
        sim = self.sim
        if not self.at_end or sim.env.live or not finished_workload(sim):
            return
        now = self.end_time = sim.env.now
        ctx = _End(sim.samples)
        for c in self.at_end:
            if c.outside is None:
                c.checked = sim.arrivals
                ok = _true(c.test(ctx))
                c.failures = 0 if ok else 1
                c.first = None if ok else now

    # -- the verdicts ------------------------------------------------------------------------

    def results(self) -> list[ClaimResult]:
        for log in self.logs:  # the last record's run
            log.close()
        out = []
        sim = self.sim
        for c in self.claims:
            claim = c.claim
            kind = claim.kind
            where = "" if claim.stage is None else self._engine(claim.stage).label
            note = ""
            if c.outside is not None:
                result = "out of scope"
                note = c.outside
            elif kind == "every":
                result = "fails" if c.failures else "holds"
                if c.failures:
                    note = f"{c.failures} of {c.checked} iterations fail"
            elif kind == "some":
                result = "witnessed" if c.first is not None else "not witnessed"
            elif self.end_time is None:
                result = "not evaluated"
                live = sim.env.live
                note = (f"{live} session(s) still live at the end" if live else
                        "the workload was still arriving at the end: give it an end "
                        "(`batch`, --arrivals N or run { arrivals N; })")
            else:
                result = "fails" if c.failures else "holds"
            first = c.first if result in ("fails", "witnessed") else None
            out.append(ClaimResult(name=claim.name, kind=kind, stage=where, result=result, first=first,
                                   checked=c.checked, note=note))
        return out


def finished_workload(sim: "Simulator") -> bool:
    """Whether the workload will bring no more sessions: a ``batch`` (all at time 0),
    no ``arrive``, or an arrival process told when to stop that has reached it."""
    kind = sim.program.arrival.kind
    if kind in ("batch", "none"):
        return True
    stop = sim.arrivals_stop
    return stop is not None and sim.arrivals >= stop

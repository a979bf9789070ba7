"""How sessions arrive (semantics §7; docs/replay.md): one class per kind of
``arrive``, chosen from :data:`KINDS` by the workload's kind.

* :class:`Poisson` and :class:`Renewal` — open arrivals, one timer at a time,
  with the guards of a workload that outruns the clock or the limits;
* :class:`Closed` — ``closed(n)``: n sessions at time 0, each ended root
  replaced at once (the population does that), and ``batch(n)``: n at 0;
* :class:`TraceReplay` — ``arrive trace``: each trace session at its own
  arrival time, once, and a note of how the replay ended;
* :class:`NoArrivals` — a workload without ``arrive``.

An arrivals object checks the workload against the run limits before any
session exists (:meth:`Arrivals.check`), starts (:meth:`Arrivals.start`),
says after how many arrivals an idle run is over (``stop``) and what to tell
a user whose workload outpaces the service.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

from .. import ir
from ..errors import SerqError, SerqRuntimeError
from ..expr import Frame, compile_expr
from ..fpmath import log as _log
from .population import raise_live

if TYPE_CHECKING:
    from .simulator import Simulator

#: Open arrivals at one instant (an interarrival time below the clock's resolution).
ARRIVALS_PER_INSTANT = 1_000
#: Every this many arrivals, a renewal workload's pace is projected to the horizon.
PACE_CHECK = 1 << 14


def raise_with(name: str, value: float) -> str:
    """The help line that says how to raise a limit set by an environment variable."""
    shown = f"{value:.0f}" if value < 1e15 else f"{value:.3g}"
    return f"or raise the limit with the environment variable {name} (e.g. `{name}={shown} serq run …`)"


class Arrivals:
    """The arrivals of one run (a subclass per kind of ``arrive``)."""

    #: the kinds ``--arrivals N`` applies to
    counted = False

    def __init__(self, sim: "Simulator") -> None:
        self.sim = sim
        self.kernel = sim.env
        self.spec = sim.program.arrival
        self.limit = sim.arrival_limit
        #: after this many arrivals, the run is over once no session is live (None: at the horizon)
        self.stop: int | None = self.limit
        if self.limit is not None and not self.counted:
            raise SerqError("run: arrivals applies only to poisson, renewal or trace workloads")

    def check(self) -> None:
        """Refuse, before creating any session, a workload larger than the run limits."""

    def start(self) -> None:
        """The first arrivals, at time 0 or scheduled."""
        raise NotImplementedError

    def finish(self) -> None:
        """The run is over (the clock stands at its end)."""

    def count_name(self, value: float, what: str) -> str:
        """How to change a number of the workload: the ``let`` it comes from, if one has that value."""
        names = [k for k, v in self.sim.program.constants.items() if v == value]
        if len(names) == 1:
            return f"`{names[0]}` (--set {names[0]}=…)"
        return f"{what} in the program's `workload {{ arrive … }}`"


class Open(Arrivals):
    """Open arrivals, one timer at a time: the next is scheduled as one
    arrives, and the arriving session runs at once (``spawn(True)``)."""

    counted = True

    def __init__(self, sim: "Simulator") -> None:
        super().__init__(sim)
        self.max_arrivals = sim.max_arrivals
        self._at = -1.0  # the instant of the latest arrival, and how many there were
        self._n = 0
        self._arrive_cb = self.arrive
        sim.population.outpace = self.outpace

    def outpace(self) -> str:
        return (f"arrivals outpace the service: lower {self.rate_name()}, or shorten the horizon (--horizon), "
                "or stop after N arrivals with --arrivals N")

    def gap(self) -> float:
        """The time to the next arrival."""
        raise NotImplementedError

    def rate_name(self) -> str:
        raise NotImplementedError

    def arrivals_at(self, now: float) -> int:
        """Count one arrival at ``now``: how many arrived at this instant so far."""
        if now != self._at:
            self._at, self._n = now, 1
        else:
            self._n += 1
        return self._n

    def arrive(self, _ev: Any) -> None:
        sim = self.sim
        sim.events += 1
        now = self.kernel.now
        if self.arrivals_at(now) > ARRIVALS_PER_INSTANT:
            raise SerqRuntimeError(
                f"the run does not settle at time {now:g}: more than {ARRIVALS_PER_INSTANT:,} arrivals at "
                f"that instant; the interarrival times are too small to advance the clock at {now:g}",
                helps=[f"lower {self.rate_name()}"])
        if sim.arrivals >= self.max_arrivals:
            raise SerqRuntimeError(
                f"at time {now:g}: the workload has made {sim.arrivals:,} arrivals, the limit",
                helps=[f"lower {self.rate_name()}, or shorten the horizon (--horizon), or stop after N "
                       "arrivals with --arrivals N",
                       raise_with("SERQ_MAX_ARRIVALS", 10 * self.max_arrivals)])
        self.pace(now)
        limit = self.limit
        if limit is None or sim.arrivals + 1 < limit:
            self.kernel.timer(self.gap(), [self._arrive_cb])
        sim.population.spawn(True)

    def pace(self, now: float) -> None:
        """A check of the arrivals so far, before each arrival."""


class Poisson(Open):
    """``arrive poisson(λ)``: exponential gaps from the arrival stream, the first arrival at 0."""

    def __init__(self, sim: "Simulator") -> None:
        super().__init__(sim)
        self.rate = self.spec.rate
        self.stream = sim.arrival_stream

    def check(self) -> None:
        expected = self.rate * self.sim.horizon
        if self.limit is not None:
            expected = min(expected, float(self.limit))
        if expected > self.max_arrivals:
            raise SerqError(
                f"`arrive poisson({self.rate:g})` over the horizon {self.sim.horizon:g} makes about "
                f"{expected:.3g} arrivals, more than the limit of {self.max_arrivals:,}",
                helps=[f"lower {self.count_name(self.rate, 'the rate')} or the horizon (--horizon), "
                       "or stop after N arrivals with --arrivals N"]
                + ([raise_with("SERQ_MAX_ARRIVALS", math.ceil(expected))] if expected < math.inf else []))

    def start(self) -> None:
        self.kernel.timer(0.0, [self.arrive])

    def gap(self) -> float:
        return -_log(1.0 - self.stream.random()) / self.rate

    def rate_name(self) -> str:
        return f"the arrival rate, {self.count_name(self.rate, 'the rate')}"


class Renewal(Open):
    """``arrive renewal(gap)``: each gap an expression (drawn from the arrival stream)."""

    def __init__(self, sim: "Simulator") -> None:
        super().__init__(sim)
        assert self.spec.gap is not None
        frame = Frame(sim.ns, attrs="c.a", ctx="c", session=None, stream="_arng")
        self._gap: Callable[[Any], float] = compile_expr(self.spec.gap, frame)

    def start(self) -> None:
        self.kernel.timer(self.gap(), [self.arrive])

    def gap(self) -> float:
        gap = self._gap(None)
        if not (gap > 0.0 and math.isfinite(gap)):
            raise SerqRuntimeError(f"`arrive renewal(…)`: the interarrival time is {gap:g}, not a positive time")
        return gap

    def rate_name(self) -> str:
        return "the arrival rate (make the `arrive renewal(…)` gaps longer)"

    def pace(self, now: float) -> None:
        """Every :data:`PACE_CHECK` arrivals: the arrivals so far, projected to
        the horizon, must stay under the limit."""
        sim = self.sim
        n = sim.arrivals
        if not n or n % PACE_CHECK:
            return
        projected = n * (sim.horizon / now) if now > 0 else math.inf
        if self.limit is not None:
            projected = min(projected, float(self.limit))
        if projected > self.max_arrivals:
            about = f"about {projected:.3g} arrivals" if math.isfinite(projected) else "arrivals without end"
            raise SerqRuntimeError(
                f"`arrive renewal(…)` made {n:,} arrivals by time {now:g}; at that pace the horizon "
                f"{sim.horizon:g} would see {about}, more than the limit of {self.max_arrivals:,}",
                helps=["make the gaps longer, or shorten the horizon (--horizon), or stop after N arrivals with "
                       "--arrivals N",
                       raise_with("SERQ_MAX_ARRIVALS", 10 * self.max_arrivals)])


class Closed(Arrivals):
    """``arrive closed(n)`` and ``arrive batch(n)``: n sessions at time 0 (a
    closed population replaces each ended root at once: the population does)."""

    def check(self) -> None:
        spec, max_live = self.spec, self.sim.population.max_live
        if spec.n > max_live:
            what = "population" if spec.kind == "closed" else "batch"
            raise SerqError(
                f"`arrive {spec.kind}({spec.n})`: a {what} of {spec.n:,} sessions is more than the limit of "
                f"{max_live:,} live sessions",
                helps=[f"lower {self.count_name(spec.n, f'the {spec.kind} count')}", raise_live(spec.n)])

    def start(self) -> None:
        spawn = self.sim.population.spawn
        for _ in range(self.spec.n):
            spawn()


class TraceReplay(Arrivals):
    """``arrive trace`` (docs/replay.md): each trace session arrives at its
    first row's ``arrival`` divided by the replay rate, in arrival order (ties
    in file order), once; the first ``--arrivals N`` of them when N is given.
    The run ends when the trace is used up and every session has ended, or at
    the horizon; :meth:`finish` records which (``Report.replay``)."""

    counted = True

    def __init__(self, sim: "Simulator") -> None:
        super().__init__(sim)
        corpus = sim.corpus
        assert corpus is not None, "`arrive trace` is checked to name a trace"
        if corpus.arrivals is None:
            raise SerqRuntimeError(
                f"`arrive trace`: the trace `{corpus.path}` has no `arrival` column",
                helps=["name the columns in a header, with `arrival` (seconds) among them: "
                       "session,turn,new,out,think,arrival (docs/replay.md)",
                       "a public trace can be converted with `serq trace import FORMAT FILE -o OUT.csv`"])
        times = corpus.arrivals
        order = sorted(range(len(times)), key=times.__getitem__)
        total = len(order)
        if self.limit is not None:
            if self.limit > total:
                raise SerqRuntimeError(
                    f"--arrivals {self.limit}: the trace `{corpus.path}` has only {total:,} sessions",
                    helps=[f"ask for at most {total:,} arrivals, or leave --arrivals out to replay the whole trace"])
            total = self.limit
        self.order = order
        self.times = [times[i] / self.spec.rate for i in order[:total]]
        self.total = total
        self.stop = total
        self.next = 0
        self._at = -1.0  # the instant of the latest arrival, and how many there were
        self._n = 0
        sessions = corpus.sessions
        sim.population.trace_of = lambda serial: sessions[order[serial]]

    def start(self) -> None:
        self.kernel.timer_at(self.times[0], [self.arrive])

    def arrive(self, _ev: Any) -> None:
        sim = self.sim
        sim.events += 1
        now = self.kernel.now
        if now != self._at:
            self._at, self._n = now, 1
        else:
            self._n += 1
        if self._n > ARRIVALS_PER_INSTANT:
            raise SerqRuntimeError(
                f"the run does not settle at time {now:g}: more than {ARRIVALS_PER_INSTANT:,} trace sessions "
                f"arrive at that instant", helps=["spread the trace's arrival times, or lower the replay rate"])
        self.next += 1
        if self.next < self.total:  # the next arrival at its instant exactly (not now + (when − now))
            self.kernel.timer_at(self.times[self.next], [self.arrive])
        sim.population.spawn(True)

    def finish(self) -> None:
        """How the replay ended: the trace was used up and every session ended,
        or the horizon came first (``Report.replay``; a ``note:`` on stderr)."""
        sim = self.sim
        now = self.kernel.now
        live = self.kernel.live
        exhausted = sim.arrivals >= self.total and live == 0
        sim.replay = {"sessions": self.total, "arrived": sim.arrivals, "live": live,
                      "exhausted": exhausted, "end": now}
        if exhausted and now <= sim.warmup:
            raise SerqRuntimeError(
                f"the trace ended at time {now:g}, at or before the warm-up {sim.warmup:g}: nothing was measured",
                helps=["lower the warm-up (--warmup), or replay a longer trace"])


class Listed(Arrivals):
    """Sessions given one by one (``serq run --replay``, a counterexample of ``serq
    prove``: docs/claims.md): each arrives at its ``arrival`` and, after ``init``, takes
    the listed ``attributes``.  Under ``arrive batch`` sessions listed at time 0 are
    made together before any runs, as a batch's are; otherwise each arrives as a trace
    replay's session does.  The run ends when the last has ended."""

    def __init__(self, sim: "Simulator") -> None:
        super().__init__(sim)
        listed = sim.listed
        assert listed is not None
        attrs = {name: slot for slot, name in enumerate(sim.program.attributes)}
        self.times: list[float] = []
        self.values: list[list[tuple[int, float]]] = []
        last = 0.0
        for i, entry in enumerate(listed):
            t = _float(entry.get("arrival", 0.0))
            if not (math.isfinite(t) and t >= last):
                raise SerqError(f"--replay: session {i} arrives at {entry.get('arrival')!r}: the arrivals are "
                                "times ≥ 0 in order")
            last = t
            pairs = []
            for name, value in (entry.get("attributes") or {}).items():
                if name not in attrs or attrs[name] < len(ir.BUILTIN_ATTRIBUTES):
                    own = list(attrs)[len(ir.BUILTIN_ATTRIBUTES):]
                    raise SerqError(f"--replay: session {i} sets `{name}`, which is not an attribute the "
                                    "program sets", helps=[f"the program's attributes: {', '.join(own) or 'none'}"])
                pairs.append((attrs[name], _float(value)))
            self.times.append(t)
            self.values.append(pairs)
        self.total = self.stop = len(self.times)
        self.batch = sim.program.arrival.kind == "batch"
        self.next = 0
        sim.population.override = self.override

    def override(self, s: Any) -> None:
        """After ``init``: the listed attributes of the session that just arrived."""
        for slot, value in self.values[s.serial]:
            s.a[slot] = value

    def start(self) -> None:
        if not self.total:
            return
        if self.batch and self.times[-1] == 0.0:
            for _ in range(self.total):
                self.sim.population.spawn()
            return
        self.kernel.timer_at(self.times[0], [self.arrive])

    def arrive(self, _ev: Any) -> None:
        self.sim.events += 1
        self.next += 1
        if self.next < self.total:
            self.kernel.timer_at(self.times[self.next], [self.arrive])
        self.sim.population.spawn(True)


def _float(v: Any) -> float:
    """A listed number as a float: NaN for what is not one (a string, a boolean), ±inf past
    the floats' range (an integer of 400 digits), for the callers' finiteness checks."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return math.nan
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


class NoArrivals(Arrivals):
    """A workload without ``arrive``: no session ever comes."""

    def start(self) -> None:
        pass


#: The arrivals class of each kind of ``arrive``.
KINDS: dict[str, type[Arrivals]] = {
    "none": NoArrivals,
    "poisson": Poisson,
    "renewal": Renewal,
    "closed": Closed,
    "batch": Closed,
    "trace": TraceReplay,
}


def arrivals_of(sim: "Simulator") -> Arrivals:
    """The run's arrivals: the listed sessions (``--replay``) or the workload's own."""
    return Listed(sim) if sim.listed is not None else KINDS[sim.program.arrival.kind](sim)

"""Shared stages: ``ps`` stages whose capacity flows divide (docs/pd.md, "Flows").

A program with a multi-stage ``run A, B (w)`` declares ``share maxmin;`` or
``share bottleneck;``; every stage array some such run holds is *shared*, and
every job on a shared stage — a plain ``run`` there included — is a *flow*:
it holds all of its stages from its start to its end and its work goes down
at one rate, which the policy sets from the capacities of every stage it
holds (:mod:`serq.sim.flows`).

One :class:`FlowGroup` keeps the flows of a program.  As a ``ps`` stage
does, it recomputes rates once per settled instant after a flow started or
ended (an instant's starts and ends change nothing between them, as no time
passes) and schedules one event, the earliest end, ties to the earliest
started flow; a stale event is told by its epoch.  Flows tied in exact
arithmetic end one event after another at the same instant, in start order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from simpy.events import Event

from ..flows import RATES
from ..stats import TimeAverage, fold
from .base import Stage, check_work

if TYPE_CHECKING:
    from ..session import Session
    from ..simulator import Simulator

_INF = float("inf")


class FlowJob:
    """A flow: its session, the work it came with and the work ``left`` at the
    group's last update, its stages and its current rate."""

    __slots__ = ("session", "size", "left", "stages", "rate", "ev", "done", "seq", "enqueued", "started")

    def __init__(self, session: "Session", work: float, stages: tuple["SharedStage", ...], ev: Event,
                 now: float, seq: int) -> None:
        self.session = session
        self.size = work
        self.left = work
        self.stages = stages
        self.rate = 0.0
        self.ev = ev
        self.done = False
        self.seq = seq
        self.enqueued = now
        self.started = now

    @property
    def work(self) -> float:
        return self.left


class SharedStage(Stage):
    """A member of a shared stage array: a ``ps(φ)`` stage with a constant φ whose
    jobs are flows of the program's :class:`FlowGroup`.  Its ``number`` counts
    the flows present; its utilisation is the capacity they carry, the time
    average of ``Σ rate / φ``; every flow that ends counts as done here."""

    kind = "ps"

    def __init__(self, *args: Any, cap: float) -> None:
        super().__init__(*args)
        self.cap = cap
        self.group: FlowGroup | None = None
        self.gid = -1  # its place among the group's stages (the tie order of progressive filling)
        self.flows: dict[FlowJob, None] = {}  # present, in start order
        self.carried = TimeAverage(self.env.now)  # Σ rate / φ

    def submit(self, s: "Session", work: float, mode: str | None, growing: Any, label: str) -> Event:
        assert self.group is not None
        return self.group.flow((self,), s, work, label)

    def remove(self, job: FlowJob) -> None:  # type: ignore[override]
        assert self.group is not None
        self.group.remove(job)

    def work(self) -> float:
        assert self.group is not None
        dt = self.env.now - self.group.last
        return fold((max(0.0, j.left - j.rate * dt) for j in self.flows), 0.0)

    def utilization(self, end: float, start: float) -> float:
        """The capacity its flows carried over [start, end], as a fraction of φ."""
        span = end - start
        c = self.carried
        return (c.integral + c.value * (end - c.last)) / span if span > 0.0 else float("nan")

    def reset_stats(self, now: float) -> None:
        super().reset_stats(now)
        self.carried.reset(now)


class FlowGroup:
    """Every flow of a program on its shared stages (``stages``, in declaration
    order and then member order: the order progressive filling breaks ties by)."""

    def __init__(self, sim: "Simulator", stages: Sequence[SharedStage], policy: str) -> None:
        self.sim = sim
        self.env = sim.env
        self.stages = list(stages)
        for i, st in enumerate(self.stages):
            st.group = self
            st.gid = i
        self.caps = [st.cap for st in self.stages]
        self.rates_of = RATES[policy]
        self.flows: dict[FlowJob, None] = {}  # present, in start order
        self.last = self.env.now  # when ``left`` and the stages' carried capacity were last brought up to date
        self.epoch = 0
        self.dirty = False
        self._seq = 0

    # -- flows ------------------------------------------------------------------

    def flow(self, stages: tuple[SharedStage, ...], s: "Session", work: float, label: str) -> Event:
        """Start a flow of ``work`` on ``stages`` for ``s``; the event its session waits on."""
        if not 0.0 <= work < _INF:
            check_work(label, work)
        env = self.env
        if work == 0.0:
            ev = Event(env)
            env.make_ready(ev)
            return ev
        self._advance()
        self._seq += 1
        job = FlowJob(s, work, stages, Event(env), env.now, self._seq)
        self.flows[job] = None
        for st in stages:
            st.flows[job] = None
            st.count(+1)
        s.job = (stages[0], job)
        self._changed()
        return job.ev

    def remove(self, job: FlowJob) -> None:
        """A flow leaves unfinished (its session was preempted or ended)."""
        if job.done:
            return
        self._advance()
        job.done = True
        self._drop(job)
        self._changed()

    def _drop(self, job: FlowJob) -> None:
        del self.flows[job]
        for st in job.stages:
            del st.flows[job]
            st.count(-1)

    def _changed(self) -> None:
        if not self.dirty:
            self.dirty = True
            self.sim.dirty_ps.append(self)  # type: ignore[arg-type]

    def _advance(self) -> None:
        """Bring every flow's work left, and the capacity each stage carried, up to now."""
        now = self.env.now
        dt = now - self.last
        if dt > 0.0:
            for j in self.flows:
                left = j.left - j.rate * dt
                j.left = left if left > 0.0 else 0.0
        self.last = now

    def reschedule(self) -> None:
        """New rates for the flows present (called once per settled instant after a
        change); each stage's carried capacity from now; the next end's event."""
        self._advance()
        self.dirty = False
        self.epoch += 1
        flows = list(self.flows)
        now = self.env.now
        if flows:
            rates = self.rates_of([[st.gid for st in j.stages] for j in flows], self.caps)
            for j, r in zip(flows, rates):
                j.rate = r
        for st in self.stages:
            st.carried.set(now, fold((j.rate / st.cap for j in st.flows), 0.0))
        best: FlowJob | None = None
        best_t = _INF
        for j in flows:  # the earliest end; ties to the earliest started
            if j.rate > 0.0:
                t = j.left / j.rate
                if t < best_t:
                    best, best_t = j, t
        if best is not None:
            timer = self.env.timer(best_t, [self._finish])
            timer.job = best  # type: ignore[attr-defined]
            timer.epoch = self.epoch  # type: ignore[attr-defined]

    def _finish(self, t: Any) -> None:
        sim = self.sim
        sim.events += 1
        job = t.job
        if t.epoch != self.epoch or job.done:
            return
        self._advance()
        job.done = True
        job.left = 0.0
        self._drop(job)
        for st in job.stages:
            st.finished(job)  # type: ignore[arg-type]
        job.session.job = None
        self._changed()
        ev = job.ev
        if ev.callbacks is not None and not ev.triggered:
            sim.env.wake(ev)

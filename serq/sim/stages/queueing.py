"""``delay``, ``fifo(c)`` and ``ps(φ)`` stages (semantics §5).

Work on these stages is clock time at rate 1.  A job's end is one event
(``Finish`` in the spec), a SimPy ``Timeout`` whose first callback is the
stage's bookkeeping; the session waits on that timeout (delay) or on its
job's own event (fifo, ps), which the stage triggers as the session becomes
ready.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from simpy.events import Event, Timeout

from ...errors import SerqRuntimeError
from ..stats import fold
from .base import Stage, check_work

if TYPE_CHECKING:
    from ..session import Session


_INF = float("inf")


class QJob:
    """A job of a delay, fifo or ps stage: the fields of ``base.Job`` these
    stages use (``work`` left, or a ps finish tag), nothing per step stage."""

    __slots__ = ("session", "work", "enqueued", "started", "ev", "done", "seq", "timer")

    def __init__(self, session: "Session", work: float, ev: Event | None, now: float) -> None:
        self.session = session
        self.work = work
        self.enqueued = now
        self.started = now
        self.ev = ev
        self.done = False
        self.seq = 0
        self.timer: Any = None


class DelayStage(Stage):
    """Infinite servers: every job runs alone at rate 1, nobody waits."""

    kind = "delay"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.jobs: dict[QJob, None] = {}  # in submission order (a set's would follow memory addresses)

    def submit(self, s: "Session", work: float, mode: str | None, growing: Any, label: str) -> Event:
        check_work(label, work)
        if work == 0.0:
            return self.immediate()
        job = QJob(s, work, None, self.env.now)
        t = job.timer = self.env.timer(work, [self._finish])
        t.job = job  # type: ignore[attr-defined]
        self.jobs[job] = None
        self.count(+1)
        s.job = (self, job)
        return t

    def _finish(self, t: Any) -> None:
        self.sim.events += 1
        job = t.job
        if job.done:
            return  # its session was preempted away: a stale event
        job.done = True
        self.jobs.pop(job, None)
        self.count(-1)
        self.finished(job)
        job.session.job = None

    def remove(self, job: QJob) -> None:  # type: ignore[override]
        if not job.done:
            job.done = True
            self.jobs.pop(job, None)
            self.count(-1)

    def work(self) -> float:
        now = self.env.now
        return fold((max(0.0, j.work - (now - j.started)) for j in self.jobs), 0.0)


class FifoStage(Stage):
    """``c`` servers; jobs start in arrival order as servers free up.  A job
    that starts at once has no event of its own: its session waits on the
    job's timer (this is the M/G/1 path)."""

    kind = "fifo"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.servers: int = self.decl.servers
        self.waiting: deque[QJob] = deque()
        self.active: list[QJob] = []
        self._fin = self._finish

    def submit(self, s: "Session", work: float, mode: str | None, growing: Any, label: str) -> Event:
        if not 0.0 <= work < _INF:
            check_work(label, work)
        if work == 0.0:
            return self.immediate()
        now = self.env.now
        self.count(+1)
        if len(self.active) < self.servers and not self.waiting:
            # a free server: the session waits on the job's end itself
            job = QJob(s, work, None, now)
            s.job = (self, job)
            return self._start(job)
        job = QJob(s, work, Event(self.env), now)
        self.waiting.append(job)
        s.job = (self, job)
        return job.ev  # type: ignore[return-value]

    def _start(self, job: QJob) -> Timeout:
        env = self.env
        job.started = env.now
        self.active.append(job)
        ev = job.ev
        if ev is not None and ev.callbacks:
            # a job that waited: its session now waits on the timer itself (one
            # event fewer than waking it at the end), after the stage's bookkeeping
            callbacks: list[Any] = [self._fin]
            callbacks.extend(ev.callbacks)
            ev.callbacks.clear()
            job.ev = None
        else:
            callbacks = [self._fin]
        t = job.timer = env.timer(job.work, callbacks)
        t.job = job  # type: ignore[attr-defined]
        return t

    def _fill(self) -> None:
        while len(self.active) < self.servers and self.waiting:
            self._start(self.waiting.popleft())

    def _finish(self, t: Any) -> None:
        sim = self.sim
        sim.events += 1
        job = t.job
        if job.done:
            return
        job.done = True
        active = self.active
        active.remove(job)
        now = self.env.now
        self.count(-1)
        # self.finished(job), inline
        est = self.est
        if est is not None:
            est.observe(job.started, job.started - job.enqueued, now - job.started)
        if sim.stats_on:
            self.completed += 1
            self.wait_sum += job.started - job.enqueued
            self.service_sum += now - job.started
        job.session.job = None
        ev = job.ev  # a job that started at once has no event: its session waits on the timer
        if ev is not None and ev.callbacks is not None and not ev.triggered:
            self.env.make_ready(ev)
        waiting = self.waiting
        if waiting:
            servers = self.servers
            while len(active) < servers and waiting:
                self._start(waiting.popleft())

    def remove(self, job: QJob) -> None:  # type: ignore[override]
        if job.done:
            return
        job.done = True
        self.count(-1)
        t = job.timer
        if t is not None and t.callbacks:
            t.callbacks[:] = [self._finish]  # its session no longer waits on it
        if job in self.active:
            self.active.remove(job)
            self._fill()
        else:
            self.waiting.remove(job)

    def busy(self) -> float:
        return float(len(self.active))

    def work(self) -> float:
        now = self.env.now
        return fold((max(0.0, j.work - (now - j.started)) for j in self.active), 0.0) + fold((j.work for j in self.waiting), 0.0)


class _PsView:
    """What a ps capacity reads (moment Ps): ``present``."""

    __slots__ = ("present",)

    def __init__(self, present: float) -> None:
        self.present = present


class PsStage(Stage):
    """Processor sharing: total throughput φ(present), shared equally.

    Virtual time ``v`` advances at the per-job rate; a job's finish tag is
    ``v`` at its start plus its work; the smallest tag finishes first, equal
    tags in start order.  The rate is recomputed when the population changes,
    once per settled instant (§1.3 step 4)."""

    kind = "ps"

    def __init__(self, *args: Any, phi: Callable[[Any], float]) -> None:
        super().__init__(*args)
        self.phi = phi
        self.v = 0.0
        self.v_last = 0.0
        self.rate = 0.0
        self.tags: list[tuple[float, int, QJob]] = []  # sorted by (tag, start order)
        self.epoch = 0
        self.dirty = False
        self._seq = 0
        self._view = _PsView(0.0)  # what phi reads, reused

    def _advance(self) -> None:
        now = self.env.now
        self.v += self.rate * (now - self.v_last)
        self.v_last = now

    def submit(self, s: "Session", work: float, mode: str | None, growing: Any, label: str) -> Event:
        if not 0.0 <= work < _INF:
            check_work(label, work)
        if work == 0.0:
            return self.immediate()
        env = self.env
        now = env.now
        # self._advance(), inline
        v = self.v = self.v + self.rate * (now - self.v_last)
        self.v_last = now
        job = QJob(s, v + work, Event(env), now)
        seq = self._seq = self._seq + 1
        job.seq = seq
        bisect.insort(self.tags, (job.work, seq, job))
        self.count(+1)
        s.job = (self, job)
        if not self.dirty:  # self._changed()
            self.dirty = True
            self.sim.dirty_ps.append(self)
        return job.ev  # type: ignore[return-value]

    def _changed(self) -> None:
        if not self.dirty:
            self.dirty = True
            self.sim.dirty_ps.append(self)

    def reschedule(self) -> None:
        """New rate for the current population; the next finish event."""
        n = len(self.tags)
        if n:
            view = self._view
            view.present = float(n)
            phi = self.phi(view)
            if not 0.0 <= phi < _INF:
                shown = f"{phi:g}" if phi == phi else "NaN"
                raise SerqRuntimeError(f"stage `{self.label}`: the rate is {shown}, not a finite number ≥ 0",
                                       at=self.decl.sites.get("ps"))
        else:
            phi = 0.0
        self._advance()
        self.rate = rate = phi / n if n else 0.0
        self.epoch += 1
        self.dirty = False
        if n and rate > 0.0:
            tag, _seq, job = self.tags[0]
            t = self.env.timer(max(0.0, (tag - self.v) / rate), [self._finish])
            t.job = job  # type: ignore[attr-defined]
            t.epoch = self.epoch  # type: ignore[attr-defined]

    def _finish(self, t: Any) -> None:
        sim = self.sim
        sim.events += 1
        job = t.job
        if t.epoch != self.epoch or job.done:
            return
        self._advance()
        self.tags.remove((job.work, job.seq, job))
        self.v = max(self.v, job.work)
        job.done = True
        self.count(-1)
        self.finished(job)
        job.session.job = None
        if not self.dirty:  # self._changed()
            self.dirty = True
            sim.dirty_ps.append(self)
        ev = job.ev  # self.wake(job), and the session runs now if nobody else is ready
        if ev is not None and ev.callbacks is not None and not ev.triggered:
            sim.env.wake(ev)

    def remove(self, job: QJob) -> None:  # type: ignore[override]
        if job.done:
            return
        job.done = True
        self._advance()
        self.tags.remove((job.work, job.seq, job))
        self.count(-1)
        self._changed()

    def work(self) -> float:
        v = self.v + self.rate * (self.env.now - self.v_last)
        return fold((max(0.0, tag - v) for tag, _s, _j in self.tags), 0.0)

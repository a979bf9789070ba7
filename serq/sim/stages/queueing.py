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

from .base import Job, Stage, check_work

if TYPE_CHECKING:
    from ..session import Session


class DelayStage(Stage):
    """Infinite servers: every job runs alone at rate 1, nobody waits."""

    kind = "delay"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.jobs: set[Job] = set()

    def submit(self, s: "Session", work: float, mode: str | None, growing: Any, label: str) -> Event:
        check_work(label, work)
        if work == 0.0:
            return self.immediate()
        job = Job(s, work, None, self.env._now)
        timer = Timeout(self.env, work)
        timer.callbacks.append(self._finish)  # type: ignore[union-attr]
        timer.job = job  # type: ignore[attr-defined]
        job.timer = timer
        self.jobs.add(job)
        self.count(+1)
        s.job = (self, job)
        return timer

    def _finish(self, timer: Any) -> None:
        self.sim.events += 1
        job = timer.job
        if job.done:
            return  # its session was preempted away: a stale event
        job.done = True
        self.jobs.discard(job)
        self.count(-1)
        self.finished(job)
        job.session.job = None

    def remove(self, job: Job) -> None:
        if not job.done:
            job.done = True
            self.jobs.discard(job)
            self.count(-1)

    def work(self) -> float:
        now = self.env._now
        return sum(max(0.0, j.work - (now - j.started)) for j in self.jobs)


class FifoStage(Stage):
    """``c`` servers; jobs start in arrival order as servers free up."""

    kind = "fifo"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.servers: int = self.decl.servers
        self.waiting: deque[Job] = deque()
        self.active: list[Job] = []

    def submit(self, s: "Session", work: float, mode: str | None, growing: Any, label: str) -> Event:
        check_work(label, work)
        if work == 0.0:
            return self.immediate()
        now = self.env._now
        self.count(+1)
        if len(self.active) < self.servers and not self.waiting:
            # a free server: the session waits on the job's end itself
            job = Job(s, work, None, now)
            s.job = (self, job)
            return self._start(job)
        job = Job(s, work, Event(self.env), now)
        self.waiting.append(job)
        s.job = (self, job)
        return job.ev  # type: ignore[return-value]

    def _start(self, job: Job) -> Timeout:
        job.started = self.env._now
        self.active.append(job)
        timer = Timeout(self.env, job.work)
        timer.callbacks.append(self._finish)  # type: ignore[union-attr]
        timer.job = job  # type: ignore[attr-defined]
        job.timer = timer
        ev = job.ev
        if ev is not None and ev.callbacks:
            # a job that waited: its session now waits on the timer itself (one
            # event fewer than waking it at the end), after the stage's bookkeeping
            timer.callbacks.extend(ev.callbacks)  # type: ignore[union-attr]
            ev.callbacks.clear()
            job.ev = None
        return timer

    def _fill(self) -> None:
        while len(self.active) < self.servers and self.waiting:
            self._start(self.waiting.popleft())

    def _finish(self, timer: Any) -> None:
        self.sim.events += 1
        job = timer.job
        if job.done:
            return
        job.done = True
        self.active.remove(job)
        self.count(-1)
        self.finished(job)
        job.session.job = None
        self.wake(job)  # a job that started at once has no event: its session waits on the timer
        self._fill()

    def remove(self, job: Job) -> None:
        if job.done:
            return
        job.done = True
        self.count(-1)
        timer = job.timer
        if timer is not None and timer.callbacks:
            timer.callbacks[:] = [self._finish]  # its session no longer waits on it
        if job in self.active:
            self.active.remove(job)
            self._fill()
        else:
            self.waiting.remove(job)

    def busy(self) -> float:
        return float(len(self.active))

    def work(self) -> float:
        now = self.env._now
        return sum(max(0.0, j.work - (now - j.started)) for j in self.active) + sum(j.work for j in self.waiting)


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
        self.tags: list[tuple[float, int, Job]] = []  # sorted by (tag, start order)
        self.epoch = 0
        self.dirty = False
        self._seq = 0

    def _advance(self) -> None:
        now = self.env._now
        self.v += self.rate * (now - self.v_last)
        self.v_last = now

    def submit(self, s: "Session", work: float, mode: str | None, growing: Any, label: str) -> Event:
        check_work(label, work)
        if work == 0.0:
            return self.immediate()
        self._advance()
        job = Job(s, self.v + work, Event(self.env), self.env._now)
        self._seq += 1
        job.seq = self._seq
        bisect.insort(self.tags, (job.work, job.seq, job))
        self.count(+1)
        s.job = (self, job)
        self._changed()
        return job.ev  # type: ignore[return-value]

    def _changed(self) -> None:
        if not self.dirty:
            self.dirty = True
            self.sim.dirty_ps.append(self)

    def reschedule(self) -> None:
        """New rate for the current population; the next finish event."""
        n = len(self.tags)
        phi = self.phi(_PsView(float(n))) if n else 0.0
        self._advance()
        self.rate = phi / n if n else 0.0
        self.epoch += 1
        self.dirty = False
        if n and self.rate > 0.0:
            tag, _seq, job = self.tags[0]
            timer = Timeout(self.env, max(0.0, (tag - self.v) / self.rate))
            timer.callbacks.append(self._finish)  # type: ignore[union-attr]
            timer.job = job  # type: ignore[attr-defined]
            timer.epoch = self.epoch  # type: ignore[attr-defined]

    def _finish(self, timer: Any) -> None:
        self.sim.events += 1
        job = timer.job
        if timer.epoch != self.epoch or job.done:
            return
        self._advance()
        self.tags.remove((job.work, job.seq, job))
        self.v = max(self.v, job.work)
        job.done = True
        self.count(-1)
        self.finished(job)
        job.session.job = None
        self.wake(job)
        self._changed()

    def remove(self, job: Job) -> None:
        if job.done:
            return
        job.done = True
        self._advance()
        self.tags.remove((job.work, job.seq, job))
        self.count(-1)
        self._changed()

    def work(self) -> float:
        v = self.v + self.rate * (self.env._now - self.v_last)
        return sum(max(0.0, tag - v) for tag, _s, _j in self.tags)

"""Fair share across sessions (``fair``): fewest tokens served first, a
virtual token counter per session (Sheng et al., "Fairness in Serving Large
Language Models", OSDI 2024, without the counter lift)."""

from __future__ import annotations

from typing import Any

from ..sim.stages.base import Job
from ..sim.stages.candidate import Candidate
from ..sim.stages.step import StepEngine


class FairShare(StepEngine):
    """The waiting request whose session this engine has served the fewest
    tokens so far, ties in queue order.

    A session's tokens served are the work of its runs on this engine that
    completed: every prefill's and every decode's tokens, counted when the
    run ends.  A run cut short by a preemption counts nothing (its tokens
    are computed again)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.served: dict[int, float] = {}  # session serial → tokens served
        self._given: dict[int, float] = {}  # id(job) → its work when submitted

    def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
        served = self.served
        return min(candidates, key=lambda c: served.get(c.serial, 0.0))

    def submit(self, s: Any, work: float, mode: str | None, growing: Any, label: str) -> Any:
        ev = super().submit(s, work, mode, growing, label)
        if s.job is not None and s.job[0] is self:
            self._given[id(s.job[1])] = work
        return ev

    def finished(self, job: Job) -> None:
        super().finished(job)
        serial = job.session.serial
        self.served[serial] = self.served.get(serial, 0.0) + self._given.pop(id(job), 0.0)

    def remove(self, job: Job) -> None:
        super().remove(job)
        self._given.pop(id(job), None)

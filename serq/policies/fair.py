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

    def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
        served = self.served
        return min(candidates, key=lambda c: served.get(c.serial, 0.0))

    def on_finish(self, job: Job) -> None:
        serial = job.session.serial
        self.served[serial] = self.served.get(serial, 0.0) + job.size

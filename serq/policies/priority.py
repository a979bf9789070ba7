"""Priority by a session attribute (``priority``, ``priority:ATTR``)."""

from __future__ import annotations

from typing import Any

from ..errors import SerqError
from ..sim.stages.candidate import Candidate
from ..sim.stages.step import StepEngine


class Priority(StepEngine):
    """The waiting request whose session attribute ``key`` is smallest
    (vLLM's ``--scheduling-policy priority``: lower values first), ties in
    queue order.  ``key`` is ``prio``; choose another with
    ``--policy engine=priority:ATTR`` or a subclass (``key = "tier"``)."""

    key = "prio"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        try:
            self.attr_slot(self.key)  # a program without it: an error before the run
        except SerqError as err:
            err.helps.append(f'choose the attribute: `--policy {self.label}=priority:ATTR`, or a subclass '
                             'with key = "ATTR"')
            raise

    def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
        key = self.key
        return min(candidates, key=lambda c: c.attr(key))

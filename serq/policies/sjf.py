"""Shortest prompt first (``sjf``)."""

from __future__ import annotations

from typing import Any

from ..sim.stages.candidate import Candidate
from ..sim.stages.step import StepEngine


class ShortestPromptFirst(StepEngine):
    """The waiting request with the smallest session attribute ``key``
    (``prompt``: the tokens the turn sends), ties in queue order.

    The same choice as ``queue by (prompt)`` on the pool (docs/policies.md)."""

    key = "prompt"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.attr_slot(self.key)  # a program without it: an error before the run

    def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
        key = self.key
        return min(candidates, key=lambda c: c.attr(key))

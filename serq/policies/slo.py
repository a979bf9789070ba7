"""Least slack to a time-to-first-token target first (``slo``, ``slo:TARGET``)."""

from __future__ import annotations

from typing import Any

from ..errors import SerqRuntimeError
from ..sim.stages.candidate import Candidate
from ..sim.stages.step import StepEngine


class LeastSlack(StepEngine):
    """The waiting request with the least slack to its TTFT target, ties in
    queue order.  Its slack is ``target - age - per_token * prompt``: the
    time left before its turn's first token is due, less an estimate of its
    prefill (``age`` is the time since the turn's request was sent).

    ``target`` is seconds, or the name of a session attribute (per session:
    tiers) or of a ``let`` constant; ``per_token`` is seconds per prompt
    token (the programs' ``a``, the compute roof), 0 to order by deadline
    alone.  Choose the target with ``--policy engine=slo:0.5`` or
    ``slo:NAME``, or in a subclass."""

    target: float | str = 1.0
    per_token = 2e-5
    prompt = "prompt"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        program = self.sim.program
        if not isinstance(self.target, str) or self.target not in program.constants:
            if isinstance(self.target, str):
                self._attr_slot(self.target)
            elif not self.target >= 0.0:
                raise SerqRuntimeError(f"stage `{self.label}`: the TTFT target is {self.target:g}, not seconds >= 0")
        if self.per_token:
            self._attr_slot(self.prompt)

    def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
        target, per_token, prompt = self.target, self.per_token, self.prompt
        name = target if isinstance(target, str) else None
        program = self.sim.program
        if name is not None and name not in program.attributes and name in program.constants:
            target, name = program.constants[name], None  # a `let`

        def slack(c: Candidate) -> float:
            due = c.attr(name) if name is not None else float(target)
            return due - c.age - per_token * c.attr(prompt) if per_token else due - c.age

        return min(candidates, key=slack)

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
        target = self.target
        self._due_attr: str | None = None  # the attribute holding each session's target
        self._due = 0.0  # the target of every session
        if isinstance(target, str) and (target in program.attributes or target not in program.constants):
            self.attr_slot(target)  # an attribute first (an unknown name: its error, with did-you-mean)
            self._due_attr = target
        else:
            self._due = float(program.constants[target] if isinstance(target, str) else target)
            if not self._due >= 0.0:
                raise SerqRuntimeError(f"stage `{self.label}`: the TTFT target is {self._due:g}, not seconds >= 0")
        if self.per_token:
            self.attr_slot(self.prompt)

    def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
        attr, due, per_token, prompt = self._due_attr, self._due, self.per_token, self.prompt

        def slack(c: Candidate) -> float:
            left = (c.attr(attr) if attr is not None else due) - c.age
            return left - per_token * c.attr(prompt) if per_token else left

        return min(candidates, key=slack)

"""First come, first served: vLLM's default scheduling policy (``fcfs``)."""

from __future__ import annotations

from ..sim.stages.step import StepEngine


class FCFS(StepEngine):
    """The default engine itself: the head of the queue first (or the
    ``queue by`` keys of the pool, if it declares them)."""

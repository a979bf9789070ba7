"""Stage engines: ``delay``, ``fifo``, ``ps`` and the ``step`` engine."""

from .hooks import HOOKS, HookError, pure
from .step import StepEngine

__all__ = ["HOOKS", "HookError", "StepEngine", "pure"]

"""Stage engines: ``delay``, ``fifo``, ``ps`` and the ``step`` engine."""

from .step import StepEngine

__all__ = ["StepEngine"]

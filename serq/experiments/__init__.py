"""Experiments: sweeps over a grid × seeds, across-seed statistics, capacity search.

``serq.sweep(...)`` and ``serq sweep`` are the entry points; see
``docs/experiments.md``.  Modules: :mod:`.grid` (the command-line syntax),
:mod:`.sweep` (plans, runs, rows), :mod:`.backends` (process pool, Ray),
:mod:`.journal` (the results file), :mod:`.stats` and :mod:`.summary`
(intervals across seeds), :mod:`.search` (``--find-max``), :mod:`.compare`
(two programs on common seeds).
"""

from __future__ import annotations

from .compare import Comparison, compare
from .sweep import SweepInterrupted, SweepResult, sweep

__all__ = ["sweep", "SweepResult", "SweepInterrupted", "compare", "Comparison"]

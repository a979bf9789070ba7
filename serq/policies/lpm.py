"""Longest prefix match first (``lpm``): SGLang's cache-aware policy
(``schedule_policy.py``, ``CacheAwarePolicy.LPM``)."""

from __future__ import annotations

from ..sim.stages.candidate import Candidate
from ..sim.stages.step import StepEngine


class LongestPrefixFirst(StepEngine):
    """The waiting request whose session has the longest prefix cached in
    the engine's memory pool (what ``cachedin(kv)`` reads in its header),
    ties in queue order."""

    def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
        return max(candidates, key=lambda c: c.cached)  # max keeps the first of equals

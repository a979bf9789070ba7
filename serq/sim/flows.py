"""Flows: jobs that hold several ``ps`` stages at once, and how the stages'
capacity is divided among them (issue 23; the Rust serQ's ``share`` policies).

A *flow* holds every stage of its list from its start to its end and moves at
one rate, set by the program-wide policy from the capacities of all the stages
it holds:

* ``maxmin`` — max-min fair, by progressive filling: every unfrozen flow's rate
  rises together; the stage whose spare capacity per unfrozen flow is smallest
  fills first (ties to the lowest stage index), its flows freeze at their rate,
  and the others go on rising until every flow is frozen.  Work-conserving.
* ``bottleneck`` — each flow gets its equal share at the tightest of its stages,
  ``min over its stages s of φ_s / n_s``.  Not work-conserving: a flow held back
  at one stage leaves its share of the others unused.

The simulator's flows (``serq/sim/stages/shared.py``, the language's
``run A, B (w)`` and ``share``) take their rates from :func:`maxmin` and
:func:`bottleneck`.  :class:`FlowSet` is a clock of its own over the same
solver, recomputing at every start and end with no simulator around it: the
tests work the design's cases through it by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

POLICIES = ("maxmin", "bottleneck")


def maxmin(flows: Sequence[Sequence[int]], caps: Sequence[float]) -> list[float]:
    """Max-min fair rates of ``flows`` (each a list of distinct stage indices)
    on stages of capacities ``caps`` (positive), by progressive filling."""
    rates = [0.0] * len(flows)
    left = list(caps)
    on: list[list[int]] = [[] for _ in caps]  # the unfrozen flows at each stage
    for f, stages in enumerate(flows):
        for s in stages:
            on[s].append(f)
    frozen = [False] * len(flows)
    unfrozen = len(flows)
    while unfrozen:
        best, inc = -1, math.inf
        for s, fs in enumerate(on):  # the stage that fills first; ties to the lowest index
            if fs:
                x = left[s] / len(fs)
                if x < inc:
                    best, inc = s, x
        if inc < 0.0:
            inc = 0.0  # (a stage rounded just below empty gives nothing more)
        for f, stages in enumerate(flows):
            if not frozen[f]:
                rates[f] += inc
        for s, fs in enumerate(on):
            if fs:
                left[s] -= inc * len(fs)
        left[best] = 0.0
        for f in on[best][:]:
            frozen[f] = True
            unfrozen -= 1
            for s in flows[f]:
                on[s].remove(f)
    return rates


def bottleneck(flows: Sequence[Sequence[int]], caps: Sequence[float]) -> list[float]:
    """Each flow's equal share at the tightest of its stages."""
    n = [0] * len(caps)
    for stages in flows:
        for s in stages:
            n[s] += 1
    return [min(caps[s] / n[s] for s in stages) for stages in flows]


RATES = {"maxmin": maxmin, "bottleneck": bottleneck}


class FlowSet:
    """Flows on a set of shared stages over time: each keeps its remaining
    work, and at every start and end every rate is recomputed by the policy.

    ``start(t, stages, work)`` adds a flow at time ``t`` (the times of calls
    never decrease); ``next_end()`` is the earliest end at the current rates
    (time, flow), ``finish(t, flow)`` takes that flow out at its end.  The
    capacity a stage carries, ``Σ rate / φ`` over its flows, is integrated
    over time for its utilisation (``carried``)."""

    def __init__(self, caps: Sequence[float], policy: str) -> None:
        if policy not in RATES:
            raise ValueError(f"share policy {policy!r}: one of {', '.join(POLICIES)}")
        if not all(c > 0.0 and math.isfinite(c) for c in caps):
            raise ValueError("a shared stage's capacity is a positive finite number")
        self.caps = list(caps)
        self.rates_of = RATES[policy]
        self.now = 0.0
        self.flows: dict[int, tuple[list[int], float]] = {}  # flow → (its stages, work left at `now`)
        self.rate: dict[int, float] = {}
        self.carried = [0.0] * len(caps)  # ∫ Σ rate / φ dt, per stage
        self._next = 0

    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt < 0.0:
            raise ValueError(f"time goes back: {t!r} after {self.now!r}")
        if dt > 0.0:
            for f, (stages, left) in self.flows.items():
                r = self.rate[f]
                self.flows[f] = (stages, left - r * dt)
                for s in stages:
                    self.carried[s] += r / self.caps[s] * dt
        self.now = t

    def _solve(self) -> None:
        ids = list(self.flows)
        rates = self.rates_of([self.flows[f][0] for f in ids], self.caps)
        self.rate = dict(zip(ids, rates))

    def start(self, t: float, stages: Sequence[int], work: float) -> int:
        """A flow of ``work`` over ``stages`` starts at ``t``; its number."""
        if len(set(stages)) != len(stages) or not stages:
            raise ValueError("a flow names each of its stages once, and at least one")
        self._advance(t)
        f = self._next
        self._next += 1
        self.flows[f] = (list(stages), work)
        self._solve()
        return f

    def next_end(self) -> tuple[float, int] | None:
        """The earliest end at the current rates, ties to the earliest started flow."""
        best: tuple[float, int] | None = None
        for f, (_stages, left) in self.flows.items():
            r = self.rate[f]
            if r > 0.0:
                t = self.now + max(0.0, left) / r
                if best is None or t < best[0]:
                    best = (t, f)
        return best

    def finish(self, t: float, f: int) -> None:
        """Flow ``f`` ends at ``t``; the others' rates are recomputed."""
        self._advance(t)
        del self.flows[f]
        del self.rate[f]
        self._solve()

    def run(self) -> dict[int, float]:
        """Let every flow run to its end with no more starts: their end times."""
        ends: dict[int, float] = {}
        while self.flows:
            nxt = self.next_end()
            if nxt is None:
                raise ValueError("a flow has rate 0 and never ends")
            t, f = nxt
            self.finish(t, f)
            ends[f] = t
        return ends

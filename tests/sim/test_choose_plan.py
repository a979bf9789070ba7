"""A `choose` whose last key is a random tie-break draws it only where a
comparison reads it (serq/sim/choose.py), and chooses, and leaves the stream,
exactly as the loop over every candidate does."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

import serq
from serq.expr import d_uniform
from serq.sim import rng
from serq.sim.session import Session
from serq.sim.simulator import Simulator


def _session(key: int, plans: dict) -> SimpleNamespace:
    return SimpleNamespace(a=[0.0] * 4, srng=rng.keyed(key), sim=SimpleNamespace(choose_plans=plans, choose_index={}),
                           candidates=0)


@pytest.mark.parametrize("seed", range(60))
def test_a_planned_choice_picks_and_draws_as_the_loop_over_every_candidate(seed: int) -> None:
    """Keys with many ties (a few whole values), none before the draw (the
    random router), two before it, a NaN among them: the planned choice is
    the loop's, and the stream's next value after it is the loop's too."""
    r = random.Random(seed)
    n = r.choice([0, 1, 2, 7, r.randint(1, 80)])
    lo, hi = r.choice([(0.0, 1.0), (-3.0, 5.5), (2.0, 2.0)])
    firsts = r.choice([0, 1, 1, 2])
    table = [[r.choice([0.0, 1.0, 2.0, math.nan] if r.random() < 0.2 else [0.0, 1.0, 2.0]) for _ in range(n)]
             for _ in range(firsts)]

    def key_of(row: list[float]):
        return lambda s: row[int(s.a[2])]

    def tie_break(s):
        return d_uniform(s.srng, lo, hi)

    keys = tuple(key_of(row) for row in table) + (tie_break,)
    label = "`choose … in (n)`"
    key = r.getrandbits(64)
    loop = _session(key, {})
    want = Session.choose(loop, float(n), keys, 2, label)
    planned = _session(key, {id(label): (label, (lo, hi))})
    got = Session.choose(planned, float(n), keys, 2, label)
    assert got == want
    assert planned.candidates == loop.candidates == n
    assert planned.srng.random() == loop.srng.random()  # the stream moved on by n draws in both


def test_the_routers_with_a_random_tie_break_are_planned_and_round_robin_is_not() -> None:
    """The cluster program's router, by name: every router of lib/routers.sq
    ends its keys with `~uniform(0, 1)` but round robin, which draws nothing."""
    planned = {}
    for router in ("random", "round_robin", "least_requests", "least_kv", "power_of_two", "affinity"):
        loaded = serq.load("programs/cluster/agents.sq", sets=[("N", "4"), ("router", router)])
        sim = Simulator(loaded, seed=1, horizon=1.0, warmup=0.0)
        planned[router] = sorted(plan for _label, plan in sim.choose_plans.values())
    assert planned == {"random": [(0.0, 1.0)], "round_robin": [], "least_requests": [(0.0, 1.0)],
                       "least_kv": [(0.0, 1.0)], "power_of_two": [(0.0, 1.0)], "affinity": [(0.0, 1.0)]}

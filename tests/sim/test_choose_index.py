"""A router's keys kept per replica (serq/sim/choose_index.py) choose exactly
the replica the loop over every candidate chooses, ties and the stream after
included, and keep up with the replicas whose load changes."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

import serq
from serq.expr import d_uniform
from serq.sim import choose_index, rng
from serq.sim.choose_index import Index
from serq.sim.session import Session
from serq.sim.simulator import Simulator

SLOT = 2
LABEL = "`choose … in (n)`"


def _pools(n: int, r: random.Random) -> list[SimpleNamespace]:
    return [SimpleNamespace(keyed=(), holders=r.randint(0, 2), queued=r.randint(0, 2)) for _ in range(n)]


def _loop(key: int, n: int, keys: tuple, plan: tuple[float, float] | None) -> tuple[float, float]:
    """The loop's choice (planned when a random last key is), and the stream's next value after."""
    s = SimpleNamespace(a=[0.0] * 4, srng=rng.keyed(key), candidates=0,
                        sim=SimpleNamespace(choose_plans={id(LABEL): (LABEL, plan)} if plan else {}, choose_index={}))
    got = Session.choose(s, float(n), keys, SLOT, LABEL)
    return got, s.srng.random()


@pytest.mark.parametrize("seed", range(40))
def test_the_index_picks_the_loops_replica_as_loads_change_at_random(seed: int) -> None:
    """Replicas whose holders and queue (0 to 2: ties everywhere) change a few at
    a time, each change told to the index as ``Pool.record`` tells it: at every
    choice the index's replica and the stream after it are the loop's, with a
    random last key (of several bounds) or none (ties to the first)."""
    r = random.Random(seed)
    n = r.choice([1, 2, 5, 30, 64])  # (30 and 64: ties past ``ARRAY_TIES``, drawn in NumPy)
    plan = r.choice([(0.0, 1.0), (-3.0, 5.5), (2.0, 2.0), None])
    two = r.random() < 0.3  # two keys before the draw
    pools = _pools(n, r)

    def load(s):
        p = pools[int(s.a[SLOT])]
        return float(p.holders + p.queued)

    def waiting(s):
        return float(pools[int(s.a[SLOT])].queued)

    firsts = (load, waiting) if two else (load,)
    keys = firsts + ((lambda s: d_uniform(s.srng, plan[0], plan[1])),) if plan else firsts
    index = Index(n, [pools], plan)
    assert all(p.keyed == ((index, j),) for j, p in enumerate(pools))
    for _ in range(30):
        for _ in range(r.choice([0, 1, 1, 3, n])):  # some replicas' loads change
            j = r.randrange(n)
            p = pools[j]
            p.holders, p.queued = r.randint(0, 2), r.randint(0, 2)
            for ix, member in p.keyed:  # (``Pool.record``)
                ix.mark(member)
        key = r.getrandbits(64)
        s = SimpleNamespace(a=[0.0] * 4, srng=rng.keyed(key))
        got = index.choose(s, n, keys, SLOT)
        assert (got, s.srng.random()) == _loop(key, n, keys, plan)


def test_ties_go_to_the_least_draw_and_without_one_to_the_first_replica() -> None:
    """Replicas 1, 3 and 4 tie at load 0: with no random key replica 1 wins;
    with ``~uniform(0, 1)`` the winner is the one of the three whose draw (the
    stream's value at its own place) is the least, worked out by hand here."""
    loads = [2.0, 0.0, 1.0, 0.0, 0.0]
    pools = [SimpleNamespace(keyed=()) for _ in loads]
    key = 12345

    def load(s):
        return loads[int(s.a[SLOT])]

    plain = Index(5, [pools], None)
    assert plain.choose(SimpleNamespace(a=[0.0] * 4, srng=rng.keyed(key)), 5, (load,), SLOT) == 1.0
    g = rng.keyed(key)
    draws = [g.random() for _ in range(5)]
    want = min((1, 3, 4), key=lambda j: draws[j])
    drawn = Index(5, [pools], (0.0, 1.0))
    s = SimpleNamespace(a=[0.0] * 4, srng=rng.keyed(key))
    assert drawn.choose(s, 5, (load, lambda s: d_uniform(s.srng, 0.0, 1.0)), SLOT) == float(want)
    assert s.srng.random() == g.random()  # the stream moved on by the five draws


def test_a_nan_key_or_a_choice_over_part_of_the_family_is_left_to_the_loop() -> None:
    loads = [1.0, math.nan, 0.0]
    pools = [SimpleNamespace(keyed=()) for _ in loads]
    index = Index(3, [pools], None)
    s = SimpleNamespace(a=[0.0] * 4, srng=rng.keyed(7))
    keys = (lambda s: loads[int(s.a[SLOT])],)
    assert index.choose(s, 3, keys, SLOT) is None
    loads[1] = 5.0
    pools[1].keyed[0][0].mark(1)
    assert index.choose(s, 3, keys, SLOT) == 2.0
    assert index.choose(s, 2, keys, SLOT) is None  # (two candidates of three: the loop's)


def test_only_the_routers_that_read_holders_and_queues_alone_are_indexed() -> None:
    """least_requests reads `holders` and `queued` of `reqs[j]`: indexed;
    least_kv reads `used` (which passing runs grow unseen), affinity a
    session's own cache, power of two its picks, round robin its serial: not."""
    indexed = {}
    for router in ("random", "round_robin", "least_requests", "least_kv", "power_of_two", "affinity"):
        loaded = serq.load("programs/cluster/agents.sq", sets=[("N", "4"), ("router", router)])
        sim = Simulator(loaded, seed=1, horizon=1.0, warmup=0.0)
        indexed[router] = len(sim.choose_index)
    assert indexed == {"random": 0, "round_robin": 0, "least_requests": 1, "least_kv": 0, "power_of_two": 0,
                       "affinity": 0}


LOR = """
use "std/routers";
pool reqs[6] { cap 2; }
stage engine[6] : fifo;
workload { arrive poisson(30); session { request; end; } }
server { route_vidur_lor(6, reqs); hold reqs[j] (1) { run engine[j] (~exp(0.15)); } }
run { horizon 40; warmup 4; seed 3; }
"""


@pytest.mark.parametrize("router", ["least_requests", "vidur_lor"])
def test_a_cluster_run_chooses_at_every_request_what_the_loop_chooses(router: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Every choice of a whole run checked against the loop as it is made
    (``CHECK``): the agents on 16 replicas behind least outstanding requests
    (a random tie-break), and Vidur's LOR on 6 (ties to the first), whose
    queues fill and drain; and the counter of pools with a queue is right
    at every change of a pool."""
    monkeypatch.setattr(choose_index, "CHECK", True)
    if router == "vidur_lor":
        loaded = serq.load(LOR)
        sim = Simulator(loaded, seed=3, horizon=40.0, warmup=4.0, max_events=2_000_000)
    else:
        loaded = serq.load("programs/cluster/agents.sq", sets=[("N", "16"), ("router", router)])
        sim = Simulator(loaded, seed=1, horizon=40.0, warmup=4.0, max_events=2_000_000)
    (index,) = {ix for _label, ix in sim.choose_index.values()}
    chosen = []
    record = type(sim.all_pools[0]).record

    def counted(pool, now=None):
        assert sim.queued_pools == sum(1 for p in sim.all_pools if p.put_queue)
        record(pool, now)

    monkeypatch.setattr(type(sim.all_pools[0]), "record", counted)
    real = index.choose
    monkeypatch.setattr(index, "choose", lambda *a: chosen.append(real(*a)) or chosen[-1])
    sim.run()
    assert len(chosen) > 200 and None not in chosen
    assert len(set(chosen)) == index.n  # every replica was chosen

"""Pools and the prefix cache on small scenarios with hand-computed answers
(semantics §2, §3, §11.4)."""

from __future__ import annotations

import pytest

import serq


def run(text: str, **kw: float) -> serq.Report:
    return serq.run(serq.load(text), **kw)


def values(report: serq.Report, name: str) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for s in report.samples[name]:
        out.setdefault(s.session, []).append(s.value)
    return out


EVICTION_ORDER = """
pool P {{ cap 55; {evict} }}
stage gate : delay;
workload {{ arrive batch(3); }}
session {{
  run gate (serial);                    // s0 at 0, s1 at 1, s2 at 2
  hold P (10 * (serial + 1)) {{ run gate (0.5); }} cache (10 * (serial + 1));
  branch (serial == 1) {{
    run gate (2);                       // s1 comes back at 3.5
    hold P (20) {{ observe found = cached; }} cache (20);
  }}
  end;
}}
run {{ horizon 10; }}
"""


@pytest.mark.parametrize("evict, found, evicted", [
    ("evict lru;", 20, 1), ("evict by (waiting, size);", 20, 1), ("evict by (-size);", 0, 2)])
def test_eviction_order_decides_whose_prefix_survives(evict: str, found: float, evicted: int) -> None:
    # cached 10 (s0) + 20 (s1); s2 needs 30 at t = 2: 30 + 30 > 55, one entry must
    # go.  LRU and smallest-first take s0's 10; largest-first takes s1's 20, and
    # when s1 comes back (20 more beside 10 + 30 cached) s2's 30 too.
    report = run(EVICTION_ORDER.format(evict=evict))
    assert values(report, "found") == {1: [found]}
    assert report.pool("P").evicted_entries == evicted


WAITING_FIRST = """
pool P {{ cap 50; evict by ({keys}); }}
pool Q {{ cap 1; }}
stage gate : delay;
stage tool : delay;
workload {{ arrive batch(4); }}
session {{
  branch (serial == 3) {{ hold Q (1) {{ run tool (10); }} end; }}   // holds Q until 10
  run gate (serial);
  branch (serial == 2) {{ hold P (25) {{ run tool (1); }} end; }}  // at 2: 30 cached + 25 > 50
  hold P (serial == 0 ? 10 : 20) {{ run tool (0.5); }} cache (serial == 0 ? 10 : 20);
  branch (serial == 0) {{ hold Q (1) {{ }} }} else {{ run tool (5); }}  // s0 waits in Q's queue, s1 calls a tool
  observe kept = cachedin(P);
  end;
}}
run {{ horizon 20; }}
"""


@pytest.mark.parametrize("keys, kept", [("waiting, size", {0: [10], 1: [0]}), ("size", {0: [0], 1: [20]})])
def test_a_waiting_sessions_prefix_outlives_one_in_a_tool_call(keys: str, kept: dict) -> None:
    report = run(WAITING_FIRST.format(keys=keys))
    assert values(report, "kept") == kept


def test_blocks_round_allocations_up_and_cached_prefixes_down() -> None:
    # block 10, cap 100: s0 holds 55 → 60 allocated, caches min(55, 60) → 50.
    # s1 holds 70: 0 + 50 + 70 > 100 → two blocks of s0's tail go (20 units);
    # s0 comes back and finds 30.
    report = run("""
pool P { cap 100; block 10; evict lru; }
stage gate : delay;
workload { arrive batch(2); }
session {
  run gate (serial);
  hold P (serial == 0 ? 55 : 70) { observe used = used(P); run gate (0.5); } cache (55);
  branch (serial == 0) { run gate (2); hold P (10) { observe found = cached; } cache (0); }
  end;
}
run { horizon 10; }
""")
    assert values(report, "used") == {0: [60], 1: [70]}
    assert values(report, "found") == {0: [30]}
    pool = report.pool("P")
    assert (pool.evicted_units, pool.evicted_entries) == (20, 0)


def test_an_amount_too_large_to_count_in_blocks_is_its_own_rounding() -> None:
    # 1.5e308 / 0.5 overflows to inf (the rounding raised OverflowError, issue 38): an amount that
    # large is a whole number of half-units to its precision, so it is allocated as it is, and
    # a cached prefix of it rounds down to itself
    report = run("""
pool P { cap inf; block 0.5; evict lru; }
stage gate : delay;
workload { arrive batch(1); }
session {
  hold P (1.5e308) { observe used = used(P); run gate (1); } cache (1.5e308);
  hold P (1) { observe found = cached; } cache (0);
  end;
}
run { horizon 10; }
""")
    assert values(report, "used") == {0: [1.5e308]}
    assert values(report, "found") == {0: [1.5e308]}


def test_a_growth_that_does_not_fit_waits_under_preempt_none() -> None:
    # s0 holds 40 and asks 30 more at t = 5; s1 holds 50 until t = 6: 40 + 50 + 30 > 100
    report = run("""
pool P { cap 100; preempt none; }
stage gate : delay;
workload { arrive batch(2); }
session {
  branch (serial == 1) { hold P (50) { run gate (6); } end; }
  hold P (40) { run gate (5); set t = now; grow P (30); observe waited = now - t; }
  end;
}
run { horizon 10; }
""")
    assert values(report, "waited") == {0: [1.0]}
    assert report.pool("P").preemptions == 0


def test_queue_keys_choose_who_is_admitted_next() -> None:
    # three holds of the whole pool, prio = 2 − serial: admitted 2, then 1, then 0
    report = run("""
pool P { cap 10; queue by (prio); }
stage gate : delay;
workload { arrive batch(3); init { set prio = 2 - serial; } }
session { hold P (10) { observe start = now; run gate (1); } end; }
run { horizon 10; }
""")
    assert values(report, "start") == {0: [2.0], 1: [1.0], 2: [0.0]}


@pytest.mark.parametrize("header", ["P (big)", "P (5) reserve (big)"])
def test_a_hold_that_can_never_fit_is_rejected_and_the_others_go_on(header: str) -> None:
    # `big` is an attribute: the checker cannot refuse it, the pool rejects it
    report = run(f"""
pool P {{ cap 10; }}
stage gate : delay;
workload {{ arrive batch(3); init {{ set big = 20; }} }}
session {{
  branch (serial == 0) {{ hold {header} {{ run gate (1); }} }}
  hold P (10) {{ run gate (1); }}
  observe done = now;
  end;
}}
run {{ horizon 10; }}
""")
    pool = report.pool("P")
    assert pool.rejected == 1
    assert values(report, "done") == {1: [1.0], 2: [2.0]}
    assert report.ended == 3


@pytest.mark.parametrize("outer, hits", [("", [0, 1, 1, 1]), ("cache (0)", [0, 0, 0, 0])])
def test_only_a_hold_with_a_cache_clause_consumes_the_prefix(outer: str, hits: list[int]) -> None:
    # a 1000-token prompt every second, block 16: cache (1000) keeps 992.  An outer
    # hold without `cache` leaves the prefix to the inner one; with `cache (0)` it
    # consumes it at its own admission and keeps nothing.
    report = run(f"""
pool kv {{ cap 10000; block 16; }}
stage gate : delay;
workload {{ arrive batch(1); }}
session {{
  loop {{
    hold kv (16) {{
      hold kv (1000) {{ observe hit = cached > 0; observe got = cached; run gate (1); }} cache (1000);
    }} {outer}
  }}
}}
run {{ horizon 3.5; }}
""")
    assert [int(v) for v in values(report, "hit")[0]] == hits
    assert values(report, "got")[0][1] == (992 if hits[1] else 0)


def test_queue_keys_may_read_the_waiting_sessions_own_cache() -> None:
    # s0 is admitted alone at 0.1; s1 and s2 wait, and the larger cached prefix
    # (s2: 12 units, s1: 11) goes first
    report = run("""
pool C { cap 100; }
pool P { cap 10; queue by (-cachedin(C), serial); }
stage gate : delay;
workload { arrive batch(3); }
session {
  hold C (10 + serial) { run gate (0.1); } cache (10 + serial);
  hold P (10) { observe start = now; run gate (1); }
  end;
}
run { horizon 10; }
""")
    assert values(report, "start") == {0: [0.1], 1: [2.1], 2: [1.1]}


def test_the_count_of_stalled_growths_follows_every_pools_growers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass over the pools skips their stalled growths while none is
    counted (``Holds.stalled``): the count is the growers of every pool at each
    pass, through stalls, retries that admit them and sessions that leave
    while stalled (the agents program with growths that wait, and a stall
    with a hand-computed wait)."""
    from pathlib import Path

    from serq.sim.holds import Holds

    seen = {"passes": 0, "stalled": 0}
    pass_ = Holds.try_admit_all

    def checked(self: Holds) -> None:
        assert self.stalled == sum(len(p.growers) for p in self.sim.all_pools)
        seen["passes"] += 1
        seen["stalled"] += self.stalled > 0
        pass_(self)

    monkeypatch.setattr(Holds, "try_admit_all", checked)
    test_a_growth_that_does_not_fit_waits_under_preempt_none()
    # s0 stalls growing A at 1.1 (preempt none); s1's growth of B preempts it at 2 (the latest
    # admitted to B): it leaves A's growers, and its hold starts over once s1 ends at 3
    report = run("""
pool A { cap 100; preempt none; }
pool B { cap 100; preempt lifo; }
stage gate : delay;
workload { arrive batch(2); }
session {
  branch (serial == 1) { hold A (40) { hold B (50) { run gate (2); grow B (40); run gate (1); } } end; }
  run gate (0.1);
  hold B (30) { hold A (50) { run gate (1); grow A (20); observe done = now; } }
  end;
}
run { horizon 20; }
""")
    assert values(report, "done") == {0: [4.0]}
    assert report.pool("B").preemptions == 1
    text = (Path(__file__).resolve().parents[2] / "programs/cluster/agents.sq").read_text()
    program = serq.load(text.replace("preempt lifo;", "preempt none;", 1),
                        sets=[("N", "5"), ("router", "1"), ("Lambda", "0.6"), ("blocks", "800")])
    serq.run(program, horizon=40.0, warmup=4.0)
    assert seen["passes"] > 1000 and seen["stalled"] > 50


def test_a_pools_wait_counts_only_admissions_after_the_warmup() -> None:
    # Three sessions join S's queue at t = 0 (batch(3)), each holding the one unit of S
    # (cap 1) for 2 s; the queue admits them in serial order:
    #   s0 admitted at 0 (wait 0), s1 at 2 (wait 2 - 0 = 2), s2 at 4 (wait 4 - 0 = 4).
    # The warm-up ends at 1: s0's admission is in it, s1's and s2's are after it. A wait is
    # measured from joining the queue (0, inside the warm-up), not from the warm-up's end:
    #   wait = (2 + 4) / 2 = 3
    # (counting the warm-up admission too: (0 + 2 + 4) / 3 = 2; measuring from the warm-up's
    # end: (1 + 3) / 2 = 2.)  `admits` is whole-run: 3.
    report = run("""
pool S { cap 1; }
stage gate : delay;
workload { arrive batch(3); }
session {
  hold S (1) { observe admitted = now; run gate (2); }
  end;
}
run { horizon 10; warmup 1; }
""")
    assert values(report, "admitted") == {1: [2.0], 2: [4.0]}  # s0's sample falls in the warm-up
    pool = report.pool("S")
    assert pool.mean_wait == 3.0
    assert pool.admissions == 3

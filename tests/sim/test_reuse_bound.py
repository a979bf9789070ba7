"""A `reuse (RHO)` bound that binds: the hit is RHO rounded down to blocks, the
rest of the consumed prefix goes back to the cache as a *dead* entry (cached,
evictable, readable by nobody), and the pool's time averages follow — every
figure worked out by hand on a one-session timeline of `~det` steps
(docs/language.md §14, "reuse"; docs/simulator.md, "Pools and the prefix cache").

Issue 26: a mutation that made the bound a no-op survived every other test."""

from __future__ import annotations

import pytest

import serq

# One session, blocks of 16, a cap of 400 units, every step one second:
#
#   [0,1]  hold A: 100 units -> 112 allocated (rounded up to blocks).  At its release
#          `cache (100)` keeps min(100, 112) = 100 -> 96 (rounded down): the entry is 96.
#   [1,2]  nothing held; cached 96.
#   [2,3]  hold B (100 -> 112) with `reuse (RHO)`: it consumes the entry, reads
#          hit = min(96, floor(RHO/16)*16), and the other d = 96 - hit units stay
#          cached as a dead entry.  `cache (0)` at its release writes nothing.
#   [3,4]  hold C (50 -> 64): the session's own entry is gone (B consumed it), so its hit
#          is 0 although the pool still caches the d dead units; it releases
#          min(50, 64) = 50 -> 48, a new live entry.
#   [4,5]  cached d + 48.
#   [5,6]  hold D (350 -> 352, no `cache`, so it reads no prefix): 0 used + (d + 48)
#          cached + 352 > 400 when d > 0, so eviction takes d units (d is whole blocks),
#          LRU: the dead entry keeps the release key of the entry it came from (time 1),
#          older than C's (time 4), so it goes first and whole.
#   [6,7]  cached 48.
#
# used:   112 + 0 + 112 + 64 + 0 + 352 + 0 = 640 unit-seconds over 7 s, whatever RHO is
# cached: 0 + 96 + d + d + (d + 48) + 48 + 48 = 240 + 3d unit-seconds over 7 s
SOURCE = """
pool kv { cap 400; block 16; }
stage d : delay;
workload { arrive batch(1); }
session {
  hold kv (100) { run d (~det(1)); } cache (100);
  run d (~det(1));
  hold kv (100) REUSE { observe hit = cached; run d (~det(1)); } cache (0);
  observe own_after = cachedin(kv);
  hold kv (50) { observe hit_c = cached; run d (~det(1)); } cache (50);
  run d (~det(1));
  hold kv (350) { run d (~det(1)); }
}
run { horizon 7; }
"""

ENTRY = 96  # hold A's entry: 100 rounded down to blocks of 16


def run(reuse: str, **kw: float) -> serq.Report:
    return serq.run(serq.load(SOURCE.replace("REUSE", reuse)), **kw)


@pytest.mark.parametrize("rho, hit", [
    (40, 32),      # binds: 40 rounded down to blocks is 32
    (48, 48),      # binds, a whole number of blocks
    (15.9, 0),     # less than a block: nothing is read
    (0, 0),        # reads nothing: the whole entry goes dead
    (200, ENTRY),  # does not bind: the whole entry is read
])
def test_the_hit_is_the_bound_in_whole_blocks_and_the_rest_is_cached_dead(rho: float, hit: int) -> None:
    report = run(f"reuse ({rho})")
    dead = ENTRY - hit
    assert report.observe("hit").mean == hit
    # the dead part is readable by nobody: the session has no entry left, and C reads nothing
    assert report.observe("own_after").mean == 0
    assert report.observe("hit_c").mean == 0
    kv = report.pool("kv")
    assert kv.mean_used == pytest.approx(640 / 7, rel=1e-12)
    assert kv.mean_cached == pytest.approx((240 + 3 * dead) / 7, rel=1e-12)
    # D's eviction takes exactly the dead entry, whole (none when nothing went dead)
    assert (kv.evicted_entries, kv.evicted_units) == ((1, dead) if dead else (0, 0))
    assert kv.admissions == 4 and kv.rejected == 0


def test_without_the_clause_the_whole_entry_is_read() -> None:
    plain, unbound = run(""), run("reuse (200)")
    assert plain.observe("hit").mean == ENTRY
    assert plain.pool("kv").mean_cached == pytest.approx(240 / 7, rel=1e-12)
    assert plain.to_json() == unbound.to_json()


@pytest.mark.parametrize("warmup, horizon, used, cached", [
    (1.5, 2, 0, ENTRY),         # between A and B: the entry alone
    (2.5, 3, 112, ENTRY - 32),  # during B: 112 allocated, the 64 dead units cached
    (3.5, 4, 64, 64),           # during C: the dead units still cached, C holds 64
    (4.5, 5, 0, 64 + 48),       # the dead entry and C's new one
    (5.5, 6, 352, 48),          # during D: the dead entry was evicted for it
])
def test_the_pool_accounting_step_by_step(warmup: float, horizon: float, used: float, cached: float) -> None:
    # a window [warmup, horizon] inside one step of the timeline averages a constant
    kv = run("reuse (40)", warmup=warmup, horizon=horizon).pool("kv")
    assert (kv.mean_used, kv.mean_cached) == (used, cached)
    assert kv.mean_used + kv.mean_cached <= 400


# The shared prefix cache (docs/simulator.md, "Shared prefix cache", `reuse (ρ)`): the bound
# limits what a hold reads of its chain; units past it are not dead there but stay ordinary
# cached nodes another hold reads.  Three sessions, one at a time, each holding 100 units
# (112 allocated) on a chain `7: 64` for one second and caching min(100, 112) -> 96:
#
#   [1,2]  session 0 reads nothing (the cache is empty), holds 112; it writes the segment
#          node `7` (64 units) and its own node (32).
#   [3,4]  session 1 with `reuse (40)` reads 32 of node `7`: hit 32, used 32 + 80 = 112;
#          the other 32 units of `7` and session 0's own 32 stay cached: 64.  Its release
#          writes its own node (32): cached 64 + 32 + 32 = 128.
#   [5,6]  session 2, no bound, reads all 64 of `7`: cached 128 - 64 = 64; then 160.
#   [6,10] cached 160.
#
# cached: 96 (1 s) + 64 + 128 + 64 + 4 * 160 = 992 unit-seconds; used 3 * 112 = 336
SHARED = """
pool kv { cap 1000; block 16; }
stage d : delay;
workload { arrive batch(3); }
session {
  run d (~det(serial * 2 + 1));
  branch (serial == 1) {
    hold kv (100) prefix (7: 64) reuse (40) { observe hit = cached; run d (~det(1)); } cache (100);
  } else {
    hold kv (100) prefix (7: 64) { observe hit = cached; run d (~det(1)); } cache (100);
  }
}
run { horizon 10; }
"""


def test_on_a_shared_cache_the_units_past_the_bound_stay_readable() -> None:
    report = serq.run(serq.load(SHARED))
    assert [(s.session, s.value) for s in report.samples["hit"]] == [(0, 0), (1, 32), (2, 64)]
    kv = report.pool("kv")
    assert kv.mean_cached == pytest.approx(992 / 10, rel=1e-12)
    assert kv.mean_used == pytest.approx(336 / 10, rel=1e-12)
    assert kv.evicted_entries == 0

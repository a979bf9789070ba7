"""Eviction in bulk (issue 9, item 2) against the rule as written (semantics
§3.3): while ``used + cached + need > cap + ε``, search the entry with the
smallest key and take one piece of it (a block, tail first, or the whole
entry without ``block``).  ``REFERENCE`` below is that rule, one block and
one search at a time, as the simulator did it before; the cache now drains a
victim in one step and keeps its victims in a heap.  Both must leave the same
entries, the same ``cached``, ``evict(n)``, ``evict(u)`` and eviction stream,
bit for bit — on hand-made caches (ties in release time, partial takes, dead
entries, ``evict by`` keys with ties and NaN, keys that read ``size`` or
draw) and on whole runs, whose JSON reports must be identical."""

from __future__ import annotations

import copy
import math
import random
from typing import Any

import pytest

import serq
from serq.sim import pool as pool_mod
from serq.sim.cache import EPS, LRU, SCAN, SIZED, STABLE, EvictView, PrefixCache, classify
from serq.sim.order import total_key

# -- the reference: one block, one full search ----------------------------------------------


def ref_evict_one(cache: PrefixCache, now: float) -> bool:
    best, best_key = None, None
    for store in (cache.entries, cache.dead):  # live entries, then dead ones, in insertion order
        for k, e in store.items():
            if cache.keys is None:
                key: Any = (e.last, e.seq)
            else:
                key = total_key((*cache.keys(EvictView(e, now, cache.stream)), e.seq))
            if best_key is None or key < best_key:
                best, best_key = (store, k), key
    if best is None:
        return False
    store, k = best
    e = store[k]
    piece = min(cache.block, e.size) if cache.block is not None else e.size
    e.size -= piece
    if e.size <= EPS:
        del store[k]
        cache.evicted_entries += 1
    cache.total -= piece
    cache.evicted_units += piece
    return True


def ref_make_room(cache: PrefixCache, used: float, need: float, cap: float, now: float) -> None:
    while used + cache.total + need > cap + EPS:
        if not ref_evict_one(cache, now):
            break


def state(cache: PrefixCache) -> tuple:
    """Everything eviction changes, floats by their repr (bit for bit)."""
    return (
        [(k, repr(e.size)) for k, e in cache.entries.items()],
        [(k, repr(e.size)) for k, e in cache.dead.items()],
        repr(cache.total), cache.evicted_entries, repr(cache.evicted_units),
        cache.stream.getstate() if cache.stream is not None else None,
    )


# -- hand-made caches -----------------------------------------------------------------------


class Owner:
    def __init__(self, a: list[float], ended: bool, queued: bool) -> None:
        self.a = a
        self.ended = ended
        self.queued_at = 1.0 if queued else None


KEYS = {  # name: (keys of an EvictView, kind)
    "lru": (None, LRU),
    "size": (lambda c: (c.size,), SIZED),
    "-size": (lambda c: (-c.size,), SIZED),
    "size blocks": (lambda c: (math.floor(c.size / 40.0),), SIZED),
    "attr": (lambda c: (c.a[0],), STABLE),  # ties and NaN among the attributes
    "waiting, age": (lambda c: (c.waiting, c.age), STABLE),
    "last": (lambda c: (c.last,), STABLE),
    "nan": (lambda c: (math.nan,), STABLE),
    "zero": (lambda c: (0.0, -0.0 if c.a[0] == c.a[0] and c.a[0] > 1 else 0.0), STABLE),
    "draw": (lambda c: (c.srng.random(),), SCAN),
    "draw if big": (lambda c: (c.srng.random() if c.size > 30 else c.a[0],), SCAN),
    "draw, size": (lambda c: (c.a[0], c.srng.random(), c.size), SCAN),
}

BLOCKS = [16.0, 1.0, 2.5, 0.3, 0.1, None]


def build(rng: random.Random, keys: Any, kind: str, block: float | None) -> tuple[PrefixCache, float, float, float]:
    stream = random.Random(rng.random()) if kind == SCAN else None
    cache = PrefixCache(block, keys, stream, None if keys is None else kind)
    if keys is None:
        cache.kind = LRU
    seq = 0
    now = 0.0
    attrs = [0.0, 1.0, 2.0, math.nan, -1.0]
    sizes: list[float] = []
    for serial in range(rng.randint(0, 9)):
        now += rng.choice([0.0, 0.0, 0.5, 1.0])  # ties in release time
        if block is not None:
            size = rng.randint(1, 8) * block
            if rng.random() < 0.2:
                size = math.floor((size + rng.random() * block) / block + EPS) * block
            elif rng.random() < 0.1:  # not a multiple of the block: the slow path from then on
                size = rng.random() * 100
        else:
            size = float(rng.randint(1, 100)) if rng.random() < 0.7 else rng.random() * 50
        sizes.append(size)
        owner = Owner([rng.choice(attrs)], rng.random() < 0.5, rng.random() < 0.3) if rng.random() < 0.7 else None
        cache.put(serial, size, now, seq, [rng.choice(attrs)], owner)  # type: ignore[arg-type]
        seq += 1
        if rng.random() < 0.3:  # consumed at an admission, the part past `reuse` left dead
            e = cache.take(serial)
            assert e is not None
            if block is not None and e.size > block:
                bound = math.floor(rng.randint(0, int(e.size / block)) + EPS) * block
                if e.size > bound:
                    cache.put_dead(e, e.size - bound)
            else:
                cache.put_dead(e, e.size)
            if rng.random() < 0.5:  # and released again, later
                cache.put(serial, size, now, seq, [rng.choice(attrs)], owner)  # type: ignore[arg-type]
                seq += 1
    if rng.random() < 0.2:  # a dead entry keyed older than every live one
        for e in list(cache.entries.values())[:1]:
            cache.put_dead(e, block if block is not None else 3.0)
    total = cache.total
    cap = float(rng.choice([100, 160, 200, 1000])) if rng.random() < 0.8 else rng.choice([100.5, 0.1 * 1000])
    used = float(rng.randint(0, int(cap))) if rng.random() < 0.8 else rng.random() * cap
    need = float(rng.randint(0, int(cap - used) + 1)) if rng.random() < 0.8 else rng.random() * 30
    if rng.random() < 0.3:  # cached close to what must go
        need = max(0.0, cap - used - total + rng.choice([1.0, block or 1.0, 0.5, sum(sizes[:2])]))
    return cache, used, need, cap


@pytest.mark.parametrize("block", BLOCKS, ids=str)
@pytest.mark.parametrize("name", list(KEYS))
def test_bulk_eviction_equals_the_block_by_block_rule(name: str, block: float | None) -> None:
    keys, kind = KEYS[name]
    rng = random.Random(f"{name} {block}")
    evicted = 0
    for _ in range(60):  # caches of up to 9 entries: every path of make_room, by coverage
        cache, used, need, cap = build(rng, keys, kind, block)
        ref = copy.deepcopy(cache)
        now = 7.0
        cache.make_room(used, need, cap, now)
        ref_make_room(ref, used, need, cap, now)
        assert state(cache) == state(ref)
        evicted += ref.evicted_entries
        # and again on what is left (the LRU dead heap after evictions)
        more = rng.random() * 100
        cache.make_room(used, need + more, cap, now + 1)
        ref_make_room(ref, used, need + more, cap, now + 1)
        assert state(cache) == state(ref)
    assert evicted > 0


def test_evict_one_is_still_one_piece_of_the_smallest_key() -> None:
    cache = PrefixCache(16.0, None, None)
    cache.put(1, 48.0, 1.0, 5, [], None)  # type: ignore[arg-type]
    cache.put(2, 32.0, 1.0, 6, [], None)  # type: ignore[arg-type]
    e = cache.take(2)
    assert e is not None
    cache.put_dead(e, 16.0)  # keyed (1.0, 6): younger than entry 1
    cache.put(2, 32.0, 2.0, 7, [], None)  # type: ignore[arg-type]
    taken = []
    while cache.evict_one(3.0):
        taken.append(([(k, x.size) for k, x in cache.entries.items()], [x.size for x in cache.dead.values()]))
    assert taken[:4] == [([(1, 32.0), (2, 32.0)], [16.0]), ([(1, 16.0), (2, 32.0)], [16.0]),
                         ([(2, 32.0)], [16.0]), ([(2, 32.0)], [])]
    assert cache.total == 0.0 and cache.evicted_units == 96.0 and cache.evicted_entries == 3


@pytest.mark.parametrize("evict, kind", [
    ("evict by (last, waiting);", STABLE), ("evict by (K > 2 ? 0 / 0 : -K, age);", STABLE),
    ("evict by (floor(size / 64));", SIZED), ("evict by (last, size);", SIZED),
    ("evict by (size, ~uniform(0, 1));", SCAN), ("evict by (last > 1 ? ~exp(1) : 0);", SCAN),
    ("evict by (cachedin(kv));", SCAN)])
def test_classify_reads_the_keys(evict: str, kind: str) -> None:
    prog = serq.load(PROGRAM.format(bs=16, block="block bs; ", evict=evict, n=300, o=20, reuse=2))
    (kv,) = [p for p in prog.pools if p.name == "kv"]
    assert classify(kv.evict) == kind


# -- whole runs against the reference --------------------------------------------------------

PROGRAM = """
let bs = {bs};
let blocks = 2000 / bs;
let Lambda = 0.8;
pool kv {{ cap blocks * bs; {block}{evict} preempt lifo; }}
pool reqs {{ cap 8; admit via engine; }}
stage engine : step {{
  budget 512;
  cost 0.0002 + 2e-7 * (kv_decode + kv_prefill) + 2e-5 * tokens;
  memory kv;
}}
stage tool : delay;
server {{
  set prompt = K + n;
  set kept = 0;
  hold reqs (1), kv (min(known, hit + budget_left(engine)))
       reuse (floor(hit / {reuse} / bs) * bs)
       at admission (known = max(kept, computed < prompt ? prompt : computed + 1),
                     hit = min(cachedin(kv), floor((known - 1) / bs) * bs)) {{
    set kept = known;
    set c = min(cached, floor((known - 1) / bs) * bs);
    observe hit = c > 0;
    prefill on engine (known - c) growing kv;
    decode on engine (max(0, o - 1 - (known - prompt))) growing kv;
  }} cache (prompt + o);
}}
workload {{
  arrive poisson(Lambda);
  hidden o;
  init {{ set K = 0; }}
  turn {{
    set n = K == 0 ? ~uniform({n} / 3, {n}) : ~exp({n} / 6);
    set o = ~exp({o}) + 1;
    set more = ~bernoulli(0.8);
  }}
  session {{
    turn;
    loop {{
      request;
      set K = prompt + o;
      branch (more) {{ tool (~exp(3)); turn; }} else {{ end; }}
    }}
  }}
}}
run {{ horizon 150; warmup 15; seed 1; }}
"""

RUNS = [  # (block, evict clause, reuse divisor); block 0: none (whole entries go)
    (0.3, "evict lru;", 2),  # first: its long runs import the arrays (vector.py) the later runs then use
    (0, "evict lru;", 2), (0, "evict by (-size);", 2), (0, "evict by (last > 20 ? 0 / 0 : size, ~uniform(0, 1));", 2),
    (16, "evict lru;", 1), (16, "evict lru;", 2), (2.5, "evict lru;", 2),
    (16, "evict by (size);", 2), (2.5, "evict by (-size);", 1), (0.3, "evict by (size);", 2),
    (16, "evict by (last);", 2), (16, "evict by (floor(age / 5), waiting);", 2),
    (2.5, "evict by (K > 600 ? 0 / 0 : -K);", 2), (16, "evict by (0);", 2),
    (16, "evict by (~uniform(0, 1));", 2), (2.5, "evict by (size > 200 ? ~uniform(0, 1) : 0.5, last);", 2),
    # one key element reads size, monotonically (re-read alone; drained in one go when it grows with size)
    (16, "evict by (waiting, -size);", 2), (16, "evict by (waiting, size * 2, last);", 2),
    (2.5, "evict by (1 - size / 4);", 2), (0, "evict by (K, 3 * size);", 2),
    (16, "evict by (size * size - 300 * size);", 2),  # not monotone: the whole key read again
]


LONGER = {  # runs that must go on to reach a path (each first reached after t = 120 when over 80)
    # a run's growths evict the waiting head's own prefix first (drained_first, near t = 65); a run
    # reaches its cap of iterations between two growths
    (16, "evict lru;", 1): 150,
    # a long run's growths offered to the arrays' LRU (vector.grow_pool, from t = 50); the last
    # iteration of a run would grow past the run's ceiling
    (2.5, "evict lru;", 2): 150,
    (16, "evict by (floor(age / 5), waiting);", 2): 150,  # a run stops at a growth it may not replay
    (0, "evict lru;", 2): 80,  # long decode runs counted in arrays (vector.account), from t = 70
}


def _ref_pool_make_room(self: Any, need: float, now: float | None = None) -> None:
    ref_make_room(self.cache, self.used, need, self.cap, self.sim.env.now if now is None else now)


@pytest.mark.parametrize("bs, evict, reuse", RUNS, ids=lambda x: str(x))
def test_a_run_reports_the_same_as_block_by_block(bs: float, evict: str, reuse: int, monkeypatch: Any) -> None:
    text = PROGRAM.format(bs=bs or 16, block="block bs; " if bs else "", evict=evict,
                          n={0: 900, 16: 900, 2.5: 600, 0.3: 200}[bs], o=20, reuse=reuse)
    # 40 s: 100 to 140 entries evicted whole (32 by `-size` with all of a hit reused), tens of thousands of units
    horizon = LONGER.get((bs, evict, reuse), 40)
    fast = serq.run(serq.load(text), horizon=horizon, warmup=horizon / 10)
    monkeypatch.setattr(pool_mod.Pool, "make_room", _ref_pool_make_room)
    # and a run's growths through it too (not the whole-block drain nor a run's heap of victims)
    monkeypatch.setattr(PrefixCache, "whole_blocks", lambda *args: False)
    by_keys = PrefixCache.by_keys.__func__  # type: ignore[attr-defined]

    def not_lasting(cls: type, *args: Any) -> PrefixCache:
        cache = by_keys(cls, *args)
        cache.lasting = False
        return cache

    monkeypatch.setattr(PrefixCache, "by_keys", classmethod(not_lasting))
    slow = serq.run(serq.load(text), horizon=horizon, warmup=horizon / 10)
    kv = slow.pool("kv")
    assert kv.evicted_units > 0, "the scenario must evict"
    assert fast.to_json() == slow.to_json()


@pytest.mark.parametrize("keys, direction", [
    ("(size)", 1), ("(-size)", -1), ("(waiting, -size)", -1), ("(1 - size / 4)", -1), ("(K, 3 * size)", 1),
    ("(size * -2 + K)", -1), ("(- -size, last)", 1),
    ("(size * size)", 0), ("(size * K)", 0), ("(size, -size)", 0), ("(last)", 0), ("(size * 0)", 0),
])
def test_the_direction_of_the_one_key_element_that_reads_size(keys: str, direction: int) -> None:
    from serq.sim.cache import size_direction

    text = PROGRAM.format(bs=16, block="block bs; ", evict=f"evict by {keys};", n=900, o=20, reuse=2)
    program = serq.load(text)
    (kv,) = [p for p in program.pools if p.name == "kv"]
    assert size_direction(kv.evict) == direction


# -- whole rounds of a drain by `-size` (issue 21) ---------------------------------------------


def level_cache(rng: random.Random, block: float) -> tuple[PrefixCache, float, float, float]:
    """A cache keyed ``(waiting, -size)`` as ``Pool`` makes it (the size element
    read alone, ``neg_size``) with many entries near one level: fractional sizes
    within a few blocks of each other, ties in size, owners waiting or not,
    dead entries, a big one above the rest; ``need`` from one block to all."""
    keys = lambda c: (c.waiting, -c.size)  # noqa: E731
    cache = PrefixCache(block, keys, None, SIZED)
    cache.size_key = (1, lambda c: -c.size)
    cache.size_dir = -1
    cache.neg_size = True
    level = rng.choice([5, 20, 60]) * block
    grid = rng.choice([1.0, 0.5, 1 / 3, 2.0 ** -30, block])  # 1/3: sizes off the block's grid
    for serial in range(rng.randint(1, 40)):
        size = level + rng.randint(-3, 3) * block + math.floor(rng.random() * block / grid) * grid
        if rng.random() < 0.1:
            size = level * rng.choice([2, 4])  # one far above
        if rng.random() < 0.1 and serial:
            size = cache.size_of(serial - 1) or size  # a tie
        owner = Owner([0.0], False, rng.random() < 0.3)
        cache.put(serial, size, float(serial), serial, [0.0], owner)  # type: ignore[arg-type]
        if rng.random() < 0.1:
            e = cache.take(serial)
            assert e is not None
            cache.put_dead(e, e.size)
    used = float(rng.randint(0, 100)) * block
    cap = used + cache.total - rng.random() * block
    need = rng.choice([1.0, block, 3 * block, rng.random() * cache.total, cache.total * 1.5])
    return cache, used, need, cap


@pytest.mark.parametrize("block", [16.0, 1.0, 2.5, 0.3])
def test_a_drain_by_minus_size_takes_whole_rounds_as_block_by_block(block: float, monkeypatch: Any) -> None:
    rng = random.Random(f"rounds {block}")
    rounds_taken = 0
    real = PrefixCache._rounds

    def counting(self: PrefixCache, *args: Any) -> Any:
        nonlocal rounds_taken
        done = real(self, *args)
        rounds_taken += done is not None
        return done

    monkeypatch.setattr(PrefixCache, "_rounds", counting)
    for _ in range(100):  # about 430 drains by whole rounds a block size (but 0.3)
        cache, used, need, cap = level_cache(rng, block)
        ref = copy.deepcopy(cache)
        cache.make_room(used, need, cap, 5.0)
        ref_make_room(ref, used, need, cap, 5.0)
        assert state(cache) == state(ref)
        more = rng.random() * 40 * block  # again, on what is left
        cache.make_room(used, need + more, cap, 6.0)
        ref_make_room(ref, used, need + more, cap, 6.0)
        assert state(cache) == state(ref)
    if block == 0.3:  # not a multiple of the sizes' ulp: x − t·b would round, so block by block
        assert rounds_taken == 0
    else:
        assert rounds_taken > 100  # the rounds did the work, not the block-by-block fallback


@pytest.mark.parametrize("block", [16.0, 1.0, 0.3])
def test_a_kept_heap_lasts_across_evictions_as_block_by_block(block: float) -> None:
    """Keys that read only ``size``, ``waiting`` and ``last`` (``memo``): one
    heap of victims serves eviction after eviction.  Between them owners start
    and stop waiting (the cache is told, as ``Pool.join`` and ``Holds.admit``
    tell it), entries are put, taken and put again, and dead parts appear;
    each ``make_room`` must still leave what the rule block by block leaves."""
    rng = random.Random(f"kept {block}")
    for _ in range(60):  # 480 make_room on a kept heap a block size
        cache, used, need, cap = level_cache(rng, block)
        cache.memo = True
        for store, k in [(cache.entries, k) for k in cache.entries] + [(cache.dead, k) for k in cache.dead]:
            cache._dirty.append((store, k))
        ref = copy.deepcopy(cache)
        serial = len(cache.entries) + len(cache.dead) + 100
        for step in range(8):
            cache.make_room(used, need, cap, 5.0 + step)
            ref_make_room(ref, used, need, cap, 5.0 + step)
            assert state(cache) == state(ref)
            for c in (cache, ref):  # the same changes to both (their owners are copies)
                r = random.Random(f"{step} {serial}")
                for k, e in list(c.entries.items()):
                    if r.random() < 0.3:  # starts or stops waiting
                        e.owner.queued_at = None if e.owner.queued_at is not None else 1.0
                        c.touch(k)
                    elif r.random() < 0.05:
                        taken = c.take(k)
                        assert taken is not None
                        if r.random() < 0.5:
                            c.put_dead(taken, taken.size)
                for j in range(r.randint(0, 4)):  # new and returning entries near the level
                    s = serial + j if r.random() < 0.7 else r.choice([*c.entries, serial + j])
                    size = r.choice([1, 5, 20]) * block + math.floor(r.random() * 4) * block
                    c.put(s, size, 10.0 + step, s, [0.0], Owner([0.0], False, r.random() < 0.3))
            serial += 5
            need = rng.choice([block, 3 * block, 7 * block, rng.random() * cache.total])
            cap = used + cache.total - rng.random() * block
        assert len(cache._heap) <= 2 * (len(cache.entries) + len(cache.dead)) + 16 + 40


def test_a_drain_shorter_than_a_round_takes_the_first_members_in_one_step(monkeypatch: Any) -> None:
    """Five entries at one level (10, 10, 10, 9.5, 9.5 blocks of 1), three
    blocks short: the three largest give a block each, in one step of
    ``_rounds`` (no block taken one at a time), as the rule would."""
    keys = lambda c: (c.waiting, -c.size)  # noqa: E731
    cache = PrefixCache(1.0, keys, None, SIZED)
    cache.size_key = (1, lambda c: -c.size)
    cache.size_dir = -1
    cache.neg_size = True
    cache.memo = True
    for serial, size in enumerate([10.0, 10.0, 9.5, 10.0, 9.5]):
        cache.put(serial, size, float(serial), serial, [0.0], Owner([0.0], False, False))  # type: ignore[arg-type]
    ref = copy.deepcopy(cache)
    pieces = []
    monkeypatch.setattr(PrefixCache, "_take_piece", lambda *a: pieces.append(a) or True)
    cache.make_room(0.0, 3.0, 49.0, 1.0)
    assert not pieces
    assert [e.size for e in cache.entries.values()] == [9.0, 9.0, 9.5, 9.0, 9.5]
    assert cache.total == 46.0 and cache.evicted_units == 3.0 and cache.evicted_entries == 0
    # the members stay out of the heap, in their order, for the next drain to take up
    assert cache._heap == [] and cache._level is not None
    assert [item[4].size for item in cache._level] == [9.5, 9.5, 9.0, 9.0, 9.0]
    monkeypatch.undo()
    ref_make_room(ref, 0.0, 3.0, 49.0, 1.0)
    assert state(ref) == state(cache)
    cache.make_room(0.0, 6.0, 49.0, 2.0)  # the next drain starts from them: three more blocks
    ref_make_room(ref, 0.0, 6.0, 49.0, 2.0)
    assert state(ref) == state(cache)
    assert [e.size for e in cache.entries.values()] == [8.0, 9.0, 8.5, 9.0, 8.5]  # 9.5, 9.5, then 9 (seq 0)


# -- a run's growths on a full pool, in one step -----------------------------------------------

@pytest.mark.parametrize("seed", range(60))
def test_a_runs_growths_on_a_full_pool_leave_the_totals_of_one_growth_at_a_time(seed: int) -> None:
    """`make_room_whole` takes ``n`` growths of one whole number of blocks
    on a full pool from its oldest entry in one step when that entry is larger
    than their sum: the cached totals after each growth, the entries left,
    ``cached`` and ``evict(u)`` are those of `make_room` one growth at a time
    (full or not, equal needs or not, an oldest entry large enough or not)."""
    rng = random.Random(seed)
    b = rng.choice([16.0, 1.0, 32.0])
    cache = PrefixCache(b, None, None)
    for serial in range(rng.randint(1, 5)):
        cache.put(serial, b * rng.randint(1, 40), float(serial), serial, [], None)  # type: ignore[arg-type]
    cache.evicted_units = rng.choice([0.0, b * 1000, 2.0**50 - b * rng.randint(0, 60)])
    used = b * rng.randint(0, 50)
    cap = used + cache.total + rng.choice([0.0, 0.0, b, -b])  # full, with room for a block, or over
    d = b * rng.randint(1, 3)
    needs = [d] * rng.randint(2, 12) if rng.random() < 0.8 else [b * rng.randint(1, 3) for _ in range(5)]
    slow = copy.deepcopy(cache)
    want = []
    u = used
    for need in needs:
        slow.make_room(u, need, cap, 0.0)
        want.append(slow.total)
        u += need
    assert cache.whole_blocks(used, needs, cap) is (cache.evicted_units <= 2.0**50)
    got = cache.make_room_whole(used, needs, cap)
    assert got == want
    assert (cache.total, cache.evicted_units, cache.evicted_entries) == (
        slow.total, slow.evicted_units, slow.evicted_entries)
    assert [(k, e.size) for k, e in cache.entries.items()] == [(k, e.size) for k, e in slow.entries.items()]


def test_ten_growths_of_a_block_on_a_full_pool_take_ten_blocks_of_the_oldest_entry() -> None:
    """A pool of 1 000 units with 200 used and two entries (600 then 200)
    cached: ten growths of 16 leave the first entry 440 and the totals 784,
    768, …, 640."""
    cache = PrefixCache(16.0, None, None)
    cache.put(1, 600.0, 0.0, 0, [], None)  # type: ignore[arg-type]
    cache.put(2, 200.0, 1.0, 1, [], None)  # type: ignore[arg-type]
    assert cache.whole_blocks(200.0, [16.0] * 10, 1000.0)
    assert cache.make_room_whole(200.0, [16.0] * 10, 1000.0) == [800.0 - 16.0 * j for j in range(1, 11)]
    assert (cache.entries[1].size, cache.entries[2].size, cache.total, cache.evicted_units) == (
        440.0, 200.0, 640.0, 160.0)


@pytest.mark.parametrize("name", ["-size", "size", "attr", "waiting, age", "last", "zero"])
@pytest.mark.parametrize("seed", range(12))
def test_a_runs_growths_under_lasting_keys_drain_as_one_growth_at_a_time(name: str, seed: int) -> None:
    """`drain_run`: ``n`` growths of a block each under `evict by` keys that
    last through a run, every size on the block's grid, in one drain: the
    cached totals after each growth and the state (entries, dead parts,
    ``cached``, ``evict(n)``, ``evict(u)``) are the rule's, block by block
    and growth by growth; off the grid, or when the cache would run dry, it
    does nothing and says so (None)."""
    keys, kind = KEYS[name]
    rng = random.Random(f"{name} {seed}")
    b = 16.0
    cache = PrefixCache(b, keys, None, kind)
    cache.lasting = True
    attrs = [0.0, 1.0, 2.0, math.nan]
    for serial in range(rng.randint(1, 8)):
        owner = Owner([rng.choice(attrs)], rng.random() < 0.5, rng.random() < 0.3)
        size = b * rng.randint(1, 30)
        cache.put(serial, size, float(serial // 2), serial, [rng.choice(attrs)], owner)  # type: ignore[arg-type]
    if rng.random() < 0.3:  # part of one left dead
        e = cache.take(0)
        assert e is not None
        cache.put_dead(e, b * rng.randint(1, int(e.size / b)))
    off_grid = rng.random() < 0.15
    if off_grid:
        cache.put(99, b * 3 + 5.0, 9.0, 99, [0.0], None)  # type: ignore[arg-type]
    used = b * rng.randint(0, 40)
    cap = used + cache.total + b * rng.choice([0, 0, 1, 3])  # full, or a few blocks of slack
    n = rng.randint(2, 14)
    ref = copy.deepcopy(cache)
    want = []
    u = used
    for j in range(n):
        ref_make_room(ref, u, b, cap, 5.0 + j)
        want.append(ref.total)
        u += b
    got = cache.drain_run(used, [b] * n, cap, [5.0 + j for j in range(n)])
    dry = used + cache.total + n * b - cap > cache.total
    if off_grid or dry:
        assert got is None
        return
    assert got == want
    assert state(cache) == state(ref)

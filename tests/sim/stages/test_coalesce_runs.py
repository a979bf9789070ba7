"""Coalesced decode runs with requests waiting (issue 9): a run goes on while
no waiting request can be admitted before it ends, and the report is the one
the engine gives iteration by iteration."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import serq
from serq.sim.stages import StepEngine

if TYPE_CHECKING:
    from serq.sim.stages.decode_run import DecodeRun

ROOT = Path(__file__).resolve().parents[3]
VLLM = ROOT / "programs/multi-turn/vllm.sq"


class Plain(StepEngine):
    coalesce = False


class Counting(StepEngine):
    """The default engine, counting the iterations inside coalesced runs."""

    inside = 0

    def _iter_end(self, timer):  # type: ignore[no-untyped-def]
        if timer.epoch == self.epoch and self.run_length > 1:
            Counting.inside += self.run_length
        super()._iter_end(timer)


def same(program: serq.Program, horizon: float = 150.0, seed: int = 1, engine: type = Counting) -> serq.Report:
    Counting.inside = 0
    fast = serq.run(program, seed=seed, horizon=horizon, warmup=horizon / 10, engines={"engine": engine})
    slow = serq.run(program, seed=seed, horizon=horizon, warmup=horizon / 10, engines={"engine": Plain})
    assert fast.to_json() == slow.to_json()
    return fast


@pytest.mark.parametrize("sets, horizon", [
    ({"Lambda": "2"}, 40.0),                       # slots full, a long queue (~80 runs with it waiting)
    ({"Lambda": "2", "max_seqs": "4"}, 40.0),      # few slots (~180 runs with a queue)
    ({"Lambda": "0.6", "blocks": "1200"}, 100.0),  # the head does not fit in kv; growths evict and preempt
    # (100 s: evictions that empty the head's cached prefix, a one-job run stopped by a preemption)
    ({"Lambda": "0.9", "blocks": "2500", "B": "64"}, 100.0),  # small budget, tight memory (a queue at a run is
    # rare here: 4 runs in 100 s, nothing the others do not reach in 150)
])
def test_runs_go_on_while_the_head_cannot_be_admitted(sets: dict, horizon: float) -> None:
    program = serq.load(VLLM, sets=sets)
    same(program, horizon=horizon)
    assert Counting.inside > 0


def test_a_budget_left_by_the_decoders_alone_lets_a_run_ignore_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    # budget 1 = max_seqs: the decoder leaves no token, no admission is tried (with 16 and 16 the
    # prefills, one token each beside the decoders, keep a batch from ever being all decoders with
    # a queue); ~30 runs go on with requests waiting in 20 s
    from serq.sim.stages.waiting import HeadAnalysis

    ignored = []
    terms = HeadAnalysis.terms

    def counting(self: HeadAnalysis):  # type: ignore[no-untyped-def]
        got = terms(self)
        engine = self.engine
        ignored.append(got is not None and not engine.left > 0.0 and any(p.put_queue for p in engine.admit_pools))
        return got

    monkeypatch.setattr(HeadAnalysis, "terms", counting)
    program = serq.load(VLLM, sets={"Lambda": "0.9", "B": "1", "max_seqs": "1"})
    same(program, horizon=20.0)
    assert Counting.inside > 0
    assert sum(ignored) > 10


HEADERS = """
pool kv {{ cap 4000; block 16; evict lru; preempt lifo; }}
pool reqs {{ cap 3; admit via engine; }}
{extra_pool}
stage engine : step {{ budget 512; cost 0.01 + 1e-6 * kv_decode; memory kv; }}
workload {{
  arrive poisson(3);
  init {{ set prompt = ~uniform(50, 400); set o = ~exp(80) + 1; }}
}}
session {{
  {outer}
  hold reqs (1), kv ({units}) {{
    run engine prefill (prompt) growing kv;
    run engine decode (o) growing kv;
  }} cache (prompt + o);
  {outer_end}
  end;
}}
"""


@pytest.mark.parametrize("units, outer", [
    ("min(prompt, budget_left(engine))", ""),                       # pure, reads the engine's budget
    ("min(prompt, cachedin(kv) + budget_left(engine))", ""),         # reads the cache a run evicts
    ("min(prompt, used(kv) / 100 + 16)", ""),                        # reads what a run grows
    ("min(prompt, 16 + now * 0)", ""),                               # reads the clock: no run with a queue
    ("min(prompt, 16 + work(engine) * 0)", ""),                      # reads the work left: no run with a queue
    ("min(prompt, 16)", "gate"),                                     # a pool tried at every settle
])
def test_headers_of_every_kind_give_the_same_report(units: str, outer: str) -> None:
    extra = "pool gate { cap 2; }" if outer else ""
    text = HEADERS.format(extra_pool=extra, units=units,
                          outer="hold gate (1) {" if outer else "", outer_end="}" if outer else "")
    program = serq.load(text)
    for seed in (1, 2):  # 30 s: ~100 to 150 runs with a queue a seed (none with the clock or the work)
        same(program, horizon=30.0, seed=seed)


# a returning session's amount is NaN once its cached prefix is gone: an eviction by a run's growth
# while it waits makes the head's header an error there, as one iteration at a time
FRAGILE = """
pool kv { cap CAP; block 16; evict lru; preempt lifo; }
pool reqs { cap 2; admit via engine; }
stage engine : step { budget 512; cost 0.01 + 1e-6 * kv_decode; memory kv; }
stage tool : delay;
workload { arrive poisson(LAM); init { set prompt = ~uniform(50, 300); set t = 0; } }
session {
  loop {
    set o = ~exp(60) + 1;
    hold reqs (1), kv (t == 0 ? prompt : prompt + 0 * (1 / cachedin(kv))) {
      run engine prefill (prompt) growing kv;
      run engine decode (o) growing kv;
    } cache (prompt + o);
    set t = t + 1;
    set prompt = prompt + o + 20;
    branch (t >= 4) { end; }
    run tool (~exp(1));
  }
}
"""


@pytest.mark.parametrize("cap, lam", [(3000, 4), (5000, 1)])
def test_a_heads_amount_made_invalid_by_a_runs_eviction_is_the_same_error(cap: int, lam: int) -> None:
    """The waiting head's other amounts are evaluated again only where a
    growth changed its cached prefix (a set of one, ``waiting.HeadSet``):
    the eviction that empties it makes the amount NaN inside the run's
    replay, the error one iteration at a time gives."""
    import traceback

    program = serq.load(FRAGILE.replace("CAP", str(cap)).replace("LAM", str(lam)))
    errors = []
    for engine in (Counting, Plain):
        with pytest.raises(serq.SerqError, match="the amount is NaN") as info:
            serq.run(program, seed=1, horizon=200.0, warmup=10.0, engines={"engine": engine})
        errors.append((str(info.value), [f.name for f in traceback.extract_tb(info.value.__traceback__)]))
    assert errors[0][0] == errors[1][0]
    assert "replay" in errors[0][1] and "replay" not in errors[1][1]  # (raised in the run's replay)


TWO_ENGINES = """
pool kv { cap 100000; block 16; evict lru; preempt lifo; }
pool reqs { cap 4; admit via engine; }
stage engine : step { budget 256; cost 0.01; memory kv; }
stage other : step { budget 64; cost 0.0137; }
stage side : ps(1);
workload { arrive poisson(2); init { set p = ~uniform(20, 200); set o = ~exp(60) + 2; } }
session {
  hold reqs (1), kv (min(p, budget_left(engine))) {
    run engine prefill (p) growing kv;
    run engine decode (o) growing kv;
  }
  run side (~exp(0.05));
  run other decode (o);
  end;
}
"""


def test_another_engine_or_a_ps_stage_keeps_the_report() -> None:
    program = serq.load(TWO_ENGINES)
    for seed in (1, 2, 3):
        fast = serq.run(program, seed=seed, horizon=60.0, warmup=5.0)
        slow = serq.run(program, seed=seed, horizon=60.0, warmup=5.0, engines={"engine": Plain, "other": Plain})
        assert fast.to_json() == slow.to_json()


class AdmissionOrderSafe(Counting):
    """A pass-through order declared safe for coalescing."""

    coalesce_safe = True

    def order_residents(self):  # type: ignore[no-untyped-def]
        return sorted(self.residents, key=lambda j: (j.prefill, j.session.adm_seq))

    def iteration_cost(self, view):  # type: ignore[no-untyped-def]
        return super().iteration_cost(view)


class Unsafe(AdmissionOrderSafe):
    coalesce_safe = False


def test_a_subclass_declared_coalesce_safe_keeps_the_fast_path_and_the_report() -> None:
    program = serq.load(VLLM, sets={"Lambda": "0.6"})
    Counting.inside = 0
    fast = serq.run(program, seed=2, horizon=60.0, warmup=6.0, engines={"engine": AdmissionOrderSafe})
    assert Counting.inside > 0  # (~38 000 of the iterations)
    Counting.inside = 0
    slow = serq.run(program, seed=2, horizon=60.0, warmup=6.0, engines={"engine": Unsafe})
    assert Counting.inside == 0
    plain = serq.run(program, seed=2, horizon=60.0, warmup=6.0, engines={"engine": Plain})
    assert fast.to_json() == slow.to_json() == plain.to_json()


class VictimOnly(StepEngine):
    """Overrides only choose_victim: never consulted inside a run."""

    def choose_victim(self, pool, grower):  # type: ignore[no-untyped-def]
        return super().choose_victim(pool, grower)


def test_choose_victim_alone_keeps_coalescing() -> None:
    program = serq.load(VLLM, sets={"Lambda": "0.6", "blocks": "1500"})
    # 70 s: ~30 preemptions, where it is consulted
    fast = serq.run(program, seed=1, horizon=70.0, warmup=7.0, engines={"engine": VictimOnly})
    plain = serq.run(program, seed=1, horizon=70.0, warmup=7.0, engines={"engine": Plain})
    assert fast.to_json() == plain.to_json()


# -- scheduling clauses on the fast path (issue 21) ------------------------------------------------

def _edited(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of programs/multi-turn/vllm.sq with ``old`` replaced by ``new``."""
    text = VLLM.read_text(encoding="utf-8")
    assert text.count(old) == 1
    out = tmp_path / "edited.sq"
    out.write_text(text.replace(old, new), encoding="utf-8")
    return out


SERVE = ("  memory kv;\n}", "  memory kv;\n  serve by KEYS;\n}")


@pytest.mark.parametrize("keys", [
    "(decoding ? 0 : 1, remaining)",   # shortest remaining first (the guide's SRPT)
    "(-remaining)",                    # longest remaining first
    "(K, remaining)",                  # an attribute, then remaining
    "(- -remaining, admission)",
])
def test_serve_by_remaining_keeps_runs_and_the_report(tmp_path: Path, keys: str) -> None:
    old, new = SERVE
    program = serq.load(_edited(tmp_path, old, new.replace("KEYS", keys)), sets={"Lambda": "0.6"})
    same(program, horizon=60.0)  # ~40 000 iterations inside runs
    assert Counting.inside > 1000


@pytest.mark.parametrize("keys", ["(remaining * 2)", "(remaining + 1)", "(kv_decode, remaining)", "(now)"])
def test_serve_by_keys_that_can_reorder_a_run_run_iteration_by_iteration(tmp_path: Path, keys: str) -> None:
    old, new = SERVE
    program = serq.load(_edited(tmp_path, old, new.replace("KEYS", keys)), sets={"Lambda": "0.6"})
    same(program, horizon=30.0)  # ~10 000 iterations, most of them all decodes
    assert Counting.inside == 0


def test_serve_by_remaining_keeps_ties_in_admission_order_through_a_run() -> None:
    # every request decodes 300 tokens: the residents tie on `remaining` whenever they were
    # admitted in the same iteration, and a run must keep them in admission order
    program = serq.load(HEADERS.format(extra_pool="", outer="", outer_end="", units="prompt")
                        .replace("set o = ~exp(80) + 1;", "set o = 300; set prompt = 100;")
                        .replace("budget 512; cost", "budget 512; serve by (remaining); cost"))
    fast = same(program, horizon=140.0)  # ~115 ended
    assert Counting.inside > 100
    assert fast.ended > 100


@pytest.mark.parametrize("keys", [
    "(waiting, -size)",       # sized: the victim's key moves as it shrinks
    "(-age)",                 # reads the clock: the replay evicts at each growth's time
    "(last)",                 # LRU spelt as keys
    "(~uniform(0, 1))",       # a draw: the eviction stream in the same order
    "(K - size)",             # an owner's attribute
])
def test_evict_by_keys_keep_runs_and_the_report(tmp_path: Path, keys: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the replay of a run's growths (Pool.allocate_run) must itself evict by the keys: count
    # the cached units its calls take, so a run that merely ends before such a growth fails
    from serq.sim.pool import Pool

    taken = []
    allocate_run = Pool.allocate_run

    def counting(self: Pool, needs: list[float], times: list[float]) -> None:
        before = self.cache.evicted_units
        allocate_run(self, needs, times)
        taken.append(self.cache.evicted_units - before)

    monkeypatch.setattr(Pool, "allocate_run", counting)
    program = serq.load(_edited(tmp_path, "evict lru;", f"evict by {keys};"), sets={"Lambda": "0.6", "blocks": "1500"})
    fast = same(program, horizon=60.0)  # ~220 replays of a run's growths, evicting ~35 000 units
    assert Counting.inside > 1000
    kv = fast.pool("kv")
    assert kv.evicted_units > 0
    assert sum(taken) > 0, "no eviction happened inside a coalesced run"


def _planned(first: float, pieces: list[tuple[float, int]]) -> "DecodeRun":
    """A run whose iterations after the first cost ``c`` ``n`` times in turn, for each piece."""
    from serq.sim.stages.decode_run import DecodeRun

    run = DecodeRun(first - 1e-3, 1e-3, 1.0, None, 0)
    run.first = first
    t = first
    for c, n in pieces:
        t1 = t
        for _ in range(n):
            t1 += c
        run.segs.append([c, n, t, t1])
        t = t1
    run.length = 1 + sum(n for _c, n in pieces)
    run.end = t
    return run


@pytest.mark.parametrize("seed", range(30))
def test_a_runs_end_index_is_where_its_list_of_ends_has_the_time(seed: int) -> None:
    """`DecodeRun.end_index` works a time's place out of the segments (one
    multiple of an exact step inside a binade, the ends added up elsewhere):
    the same answer as looking the time up in the list of every end, for the
    ends themselves, their neighbouring floats and times between ends, with
    runs that cross binades, costs that are no multiple of an ulp and times
    near 0."""
    import math

    rng = random.Random(seed)
    first = rng.choice([rng.uniform(0.0, 3.0), rng.uniform(1000.0, 1100.0), 2.0 ** rng.randint(-3, 12) - 1e-3,
                        rng.uniform(0.0, 1e-300)])
    pieces = [(rng.choice([rng.uniform(1e-5, 1e-3), 2.0 ** -12, 0.1, 1e-4 * rng.randint(1, 9)]), rng.randint(1, 200))
              for _ in range(rng.randint(1, 12))]
    run = _planned(first, pieces)
    ends = run.end_list()
    assert len(ends) == run.length and ends[-1] == run.end
    probes = set(ends) | {math.nextafter(e, math.inf) for e in ends} | {math.nextafter(e, 0.0) for e in ends}
    probes |= {(a + b) / 2 for a, b in zip(ends, ends[1:])} | {first - 1.0, run.end + 1.0}
    for t in probes:
        want = ends.index(t) if t in ends else -1
        assert run.end_index(t) == want, (t, want)
    run.all_ends()  # made once and kept: the lookup reads the list then
    assert all(run.end_index(t) == i for i, t in enumerate(ends))


@pytest.mark.parametrize("seed", range(30))
def test_a_runs_lengths_are_the_differences_of_its_ends(seed: int) -> None:
    """`_length_runs` gives each iteration's length from the segments (one
    length for a segment with one step, its ulp tested once when the whole run
    lies in one binade): the differences of the list of every end, with runs
    that cross binades, costs halfway between two ulps and times near 0."""
    from serq.sim.stages.decode_run import _length_runs

    rng = random.Random(seed)
    first = rng.choice([rng.uniform(0.0, 3.0), rng.uniform(1000.0, 1100.0), 2.0 ** rng.randint(-3, 12) - 1e-3,
                        rng.uniform(0.0, 1e-300), 1024.0 + 3 * 2.0 ** -42])
    ulp_halves = [2.0 ** -42 * k + 2.0 ** -43 for k in range(1, 4)]  # past 1024: halfway between two ulps
    pieces = [(rng.choice([rng.uniform(1e-5, 1e-3), 2.0 ** -12, 0.1, *ulp_halves]), rng.randint(1, 200))
              for _ in range(rng.randint(1, 12))]
    run = _planned(first, pieces)
    ends = run.end_list()
    lengths = [x for x, c in _length_runs(run.segs) for _ in range(c)]
    assert lengths == [b - a for a, b in zip(ends, ends[1:])]


def _accounted(run: "DecodeRun", jobs: int, seed: int, warmup: float, one_pass: bool) -> tuple:
    """The state a replay's `_account` leaves on a stand-in engine (its sums and
    gap histogram started from values of ``seed``), in one pass or not."""
    from types import SimpleNamespace

    from serq.sim.stages.decode_run import DecodeRun
    from serq.sim.stats import LogHistogram

    rng = random.Random(seed)
    itl = LogHistogram()
    for _ in range(rng.randint(0, 5)):
        itl.add(rng.uniform(1e-3, 1e-2))
    sim = SimpleNamespace(stats_on=True, warmup=warmup, events=0, horizon=math.inf)
    engine = SimpleNamespace(sim=sim, itl=itl, t_decode_only=rng.uniform(0.0, 50.0),
                             t_decoders=rng.uniform(0.0, 500.0), dec_cost=rng.uniform(0.0, 50.0),
                             dec_iters=rng.randint(0, 99), dec_sum=float(rng.randint(0, 999)), iterations=0)
    k = run.length - 1
    if one_pass:
        run._account(engine, jobs, k)
    else:
        original = DecodeRun._sums_in_one
        DecodeRun._sums_in_one = lambda *_a: False  # type: ignore[method-assign]
        try:
            run._account(engine, jobs, k)
        finally:
            DecodeRun._sums_in_one = original  # type: ignore[method-assign]
    hist = (itl.count, itl.total, sorted(itl._buckets.items()))
    return (hist, engine.t_decode_only, engine.t_decoders, engine.dec_cost, engine.dec_iters, engine.dec_sum,
            engine.iterations, sim.events)


def test_a_runs_statistics_in_one_pass_are_those_of_the_separate_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """`DecodeRun._sums_in_one` (a replay's gaps, spans and costs folded in
    one pass over the segments) leaves every sum, count and bucket as the
    separate passes do, to the bit: runs of one or many jobs, segments short
    and long (past `_SHORT`, folded at once), lengths of zero (costs far
    below the clock's ulp), ends that cross binades and costs halfway between
    two ulps (it declines those), warm-ups before and inside the run."""
    from serq.sim.stages.decode_run import DecodeRun

    one_pass = DecodeRun._sums_in_one
    taken: list[bool] = []

    def counted(*args: object) -> bool:
        taken.append(one_pass(*args))  # type: ignore[arg-type]
        return taken[-1]

    monkeypatch.setattr(DecodeRun, "_sums_in_one", counted)
    for seed in range(300):
        rng = random.Random(seed)
        first = rng.choice([rng.uniform(1.0, 3.0), rng.uniform(1000.0, 1100.0), 2.0 ** rng.randint(-3, 12) - 1e-3,
                            1024.0 + 3 * 2.0 ** -42])
        costs = [rng.uniform(1e-5, 1e-3), 2.0 ** -12, 0.1, 1e-4 * rng.randint(1, 9), 1e-17,
                 2.0 ** -42 * rng.randint(1, 3) + 2.0 ** -43]
        near = rng.random() < 0.5  # costs close together: the lengths share a bucket, its least and greatest
        pieces = [(rng.uniform(2e-4, 2.02e-4) if near else rng.choice(costs),
                   rng.choice([1, 2, rng.randint(1, 30), rng.randint(40, 200)])) for _ in range(rng.randint(1, 12))]
        run = _planned(first, pieces)
        if run.length < 3:
            continue
        jobs = rng.choice([1, 2, 3, 15])
        warmup = rng.choice([0.0, 0.0, first, first + 1e-3])
        one = _accounted(run, jobs, seed, warmup, one_pass=True)
        assert one == _accounted(run, jobs, seed, warmup, one_pass=False), seed
    assert taken.count(True) > 50 and taken.count(False) > 10, taken.count(False)  # (both ways, many times)


@pytest.mark.parametrize("seed", range(6))
def test_a_position_plus_one_token_at_a_time_is_added_a_binade_at_once(seed: int) -> None:
    # positions with a fraction of many bits round when they cross a power of two: 2047.3 + 1.0
    # is not 2048.3 in floats; plus_ones takes one addition a binade and must land on the same float
    from functools import reduce
    from itertools import repeat
    from operator import add

    from serq.sim.stages.decode_run import plus_ones
    rng = random.Random(seed)
    for _ in range(400):
        p = rng.choice([rng.uniform(0.0, 5000.0), rng.uniform(2040.0, 2048.0), rng.uniform(0.0, 1.0),
                        float(rng.randrange(1 << 20)), rng.uniform(2.0**51, 2.0**52), rng.uniform(2.0**52, 2.0**54)])
        k = rng.randrange(0, 70) if p > 2.0**50 else rng.randrange(0, 9000)
        assert plus_ones(p, k) == reduce(add, repeat(1.0, k), p), (p, k)
    from fractions import Fraction
    p = math.nextafter(2047.0, 3000.0)  # its last bit is below the ulp of 2048: crossing rounds it
    assert Fraction(plus_ones(p, 3)) != Fraction(p) + 3
    assert plus_ones(p, 3) == ((p + 1.0) + 1.0) + 1.0


@pytest.mark.parametrize("seed", range(4))
def test_a_job_whose_room_passes_the_run_is_skipped_only_where_it_would_not_grow(seed: int) -> None:
    # `_plan_by_growths` takes a job whose allocation is more than cap + _SKIP_MARGIN past its
    # position as not growing in the run (first growth `cap + 1`) without the search, for
    # positions below 2^30 and runs below 2^20 iterations: the search must agree at the edge of
    # that margin, with positions of every bit of a fraction and those that cross binades
    from serq.sim.stages.coalesce import _CAP_SKIP, _P_SKIP, _SKIP_MARGIN, _exact, _first_growth
    rng = random.Random(seed)
    checked = 0
    for _ in range(3000):
        p = rng.choice([rng.uniform(0.0, 5000.0), rng.uniform(2040.0, 2048.0), rng.uniform(0.0, 1.0),
                        float(rng.randrange(1 << 20)), rng.uniform(_P_SKIP / 2, _P_SKIP),
                        math.nextafter(_P_SKIP, 0.0)])
        cap = rng.choice([2, 3, 17, 500, rng.randrange(2, 70_000), _CAP_SKIP - 1])
        a = p + (cap + _SKIP_MARGIN) + rng.choice([1e-9, 1e-3, 0.5, 1.0, 16.0])  # just past the margin
        if not (a - p > cap + _SKIP_MARGIN):
            continue
        assert _first_growth(p, a, 2, cap, _exact(p, cap)) == cap + 1, (p, a, cap)
        inside = p + (cap - 3.0)  # (and one whose room ends inside the run grows in it)
        assert _first_growth(p, inside, 2, cap, _exact(p, cap)) <= cap, (p, inside, cap)
        checked += 1
    assert checked > 2500


@pytest.mark.parametrize("seed", range(4))
def test_a_periodic_growth_is_the_search_and_round_up_of_each_growth(seed: int) -> None:
    # `_plan_one` takes a job's growths as every `period` iterations, a block each, where
    # `_period` says so: each growth then must be where the search finds it and take what the
    # round-up gives, growth after growth, up to the run's cap (and the period be found often)
    from serq.sim.stages.coalesce import EPS, _exact, _first_growth, _period
    from serq.sim.stages.decode_run import exact_below, plus_ones
    rng = random.Random(seed)
    found = 0
    for _ in range(3000):
        b = rng.choice([16.0, 16.0, 32.0, 1.0, 8.0, 12.0, 16.5])
        k = rng.choice([float(rng.randrange(1 << 20)), rng.uniform(0.0, 5000.0), rng.uniform(2040.0, 2048.0)])
        p = rng.choice([k, math.floor(k * 64) / 64, math.floor(k) + 0.5, math.floor(k)])
        a = rng.choice([math.ceil((p + 1.0) / b) * b, math.ceil((p + 1.0) / b) * b + b, p + 1.5, 0.0])
        cap = rng.choice([3, 17, 200, rng.randrange(2, 3000)])
        # as `_plan_one` asks (`_exact`: infinite when every step is) and as `_plan_by_growths`
        # does (the steps inside p's binade, when they are at least the run's)
        exact = _exact(p, cap) if rng.random() < 0.5 or exact_below(p) < cap else float(exact_below(p))
        g = _first_growth(p, a, 2, cap, exact)
        period = _period(p, a, g, b, cap, exact)
        if not period:
            continue
        found += 1
        while g <= cap:  # the growth at g, as the loop took it before, then the next one's search
            x = a + (((p + (g - 2)) if g - 2 < exact else plus_ones(p, g - 2)) + 1.0 - a)
            need = math.ceil(x / b - EPS) * b - a
            assert need == b, (p, a, g, b, cap)
            a = a + need
            nxt = _first_growth(p, a, g + 1, cap, exact)
            assert nxt == (g + period if g + period <= cap else cap + 1), (p, a, g, b, cap)
            g = nxt
    assert found > 600, found


def test_long_decodes_from_fractional_prompts_keep_the_report_and_plan_by_growths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # uniform prompts (a fraction of ~40 bits) and outputs of thousands of tokens: positions cross
    # 2048, 4096 and 8192, where a token more rounds; the runs are planned a growth at a time
    from serq.sim.stages import coalesce
    src = (ROOT / "programs/single-turn/vllm_single_turn.sq").read_text()
    src = src.replace("~exp(200)", "~exp(3000)").replace("let Lambda = 3.0;", "let Lambda = 1.0;")
    path = tmp_path / "long.sq"
    path.write_text(src.replace('use "std/vllm";', f'use "{ROOT / "serq/lib/vllm.sq"}";'))
    each = []
    real = coalesce.RunPlanner._plan_each
    monkeypatch.setattr(coalesce.RunPlanner, "_plan_each", lambda self, cost: each.append(1) or real(self, cost))
    report = same(serq.load(path), horizon=70.0)  # ~170 000 iterations in runs, ~70 turns
    assert Counting.inside > 100_000
    assert not each  # every run's positions step a binade at a time
    assert report.turns > 50


# small prompts with every bit of a fraction: a run's positions cross several binades (1, 2, 4,
# 8, 16 …), where a token's addition rounds, so the replay's one addition for k tokens is right
# only inside one binade (`DecodeRun._commit`, `plus_ones`)
SMALL_PROMPTS = """
pool kv { cap 200000; block 16; evict lru; preempt lifo; }
pool reqs { cap 3; admit via engine; }
stage engine : step { budget 4096; cost 0.01 + 1e-7 * kv_decode; memory kv; }
workload { arrive poisson(2); init { set prompt = ~uniform(0.01, 3); set o = ~exp(80) + 1; } }
session {
  hold reqs (1), kv (prompt) {
    run engine prefill (prompt) growing kv;
    run engine decode (o) growing kv;
  }
  end;
}
"""


class Positions(StepEngine):
    """The default engine, noting each resident's position (its bits) at every iteration end."""

    log: list[tuple[float, int, str]] = []

    def _iter_end(self, timer):  # type: ignore[no-untyped-def]
        super()._iter_end(timer)
        if timer.epoch == self.epoch:
            for job in self.residents:
                if job.hold is not None:
                    Positions.log.append((self.env.now, job.session.serial, job.hold.pos[job.k].hex()))


class PlainPositions(Positions):
    coalesce = False


def test_a_run_leaves_each_position_as_one_token_at_a_time_would() -> None:
    """At the end of every coalesced run, each resident's position has the
    bits the iterations one by one give it at that time, across binades."""
    program = serq.load(SMALL_PROMPTS)
    logs = []
    for engine in (Positions, PlainPositions):
        Positions.log = []
        serq.run(program, seed=1, horizon=60.0, warmup=6.0, engines={"engine": engine})
        logs.append(Positions.log)
    fast, slow = logs
    assert len(fast) * 5 < len(slow)  # (most iterations were inside runs)
    assert sum(1 for _t, _s, bits in fast if float.fromhex(bits) > 16.0) > 500
    assert set(fast) <= set(slow)


class GeneralLoop(StepEngine):
    """The default engine through `start_iteration`'s general loop: an override of
    `plan_tokens` that asks for what the default asks (the usual engine has a loop of its
    own, `StepEngine._plan_plain`)."""

    def plan_tokens(self, job, chunk):  # type: ignore[no-untyped-def]
        return super().plan_tokens(job, chunk)


@pytest.mark.parametrize("sets, horizon", [
    ({"Lambda": "0.9"}, 60.0),                              # slots full, admissions every iteration
    ({"Lambda": "0.6", "blocks": "1200"}, 60.0),            # growths that preempt inside the loop (6 preemptions)
    ({"Lambda": "0.9", "blocks": "2500", "B": "64"}, 80.0),  # small budget, tight memory (6 preemptions)
    ({"Lambda": "0.9", "chunk_cap": "512"}, 60.0),          # prefills in chunks
])
def test_the_usual_engines_planning_loop_is_the_general_one(sets: dict, horizon: float) -> None:
    program = serq.load(VLLM, sets=sets)
    plain = serq.run(program, seed=2, horizon=horizon, warmup=horizon / 10)
    general = serq.run(program, seed=2, horizon=horizon, warmup=horizon / 10, engines={"engine": GeneralLoop})
    assert plain.to_json() == general.to_json()
    assert plain.to_dict()["pools"][0]["preemptions"] > 0 or sets.get("blocks") is None


def test_a_batchs_kv_decode_is_kept_as_a_sum_only_while_the_sum_is_exact() -> None:
    from serq.sim.stages.coalesce import RunPlanner
    assert RunPlanner._kv_sum([16.0, 32.0, 0.0, 4096.0]) == 4144.0
    assert RunPlanner._kv_sum([]) == 0.0
    assert RunPlanner._kv_sum([16.0, 1.5]) is None  # a fraction: the fold may round
    assert RunPlanner._kv_sum([16.0, -16.0]) is None
    assert RunPlanner._kv_sum([math.inf]) is None
    assert RunPlanner._kv_sum([math.nan]) is None
    assert RunPlanner._kv_sum([2.0**51, 2.0**51]) is None  # (a run's growths could pass 2^53)


# SMALL_PROMPTS's batches of up to three decodes, and the same whose memory is their fractional
# position (no blocks): every growth a fraction of a token, the cost's kv_decode folded anew at each
@pytest.mark.parametrize("text, whole", [(SMALL_PROMPTS.replace("block 16; ", ""), False), (SMALL_PROMPTS, True)])
def test_a_runs_cost_reads_the_batchs_kv_decode_as_one_iteration_at_a_time_does(
        text: str, whole: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from serq.sim.stages.coalesce import RunPlanner
    sums: list[float | None] = []
    real = RunPlanner._kv_sum
    monkeypatch.setattr(RunPlanner, "_kv_sum", staticmethod(lambda kv: sums.append(real(kv)) or sums[-1]))
    same(serq.load(text), horizon=80.0)
    assert len(sums) > 50  # runs of several jobs, planned a growth at a time
    if whole:  # blocks of 16: the sum kept
        assert all(s is not None for s in sums)
    else:  # fractional allocations: the fold at each growth
        assert sum(1 for s in sums if s is None) > 0.9 * len(sums)

"""Long decode runs planned in arrays (serq/sim/stages/vector.py): every float
is the one the scalar walk and the iteration-by-iteration engine compute."""

from __future__ import annotations

import math
import random
from functools import reduce
from itertools import repeat
from operator import add
from pathlib import Path

import numpy as np
import pytest

import serq
from serq import expr, ir
from serq.sim.stages import StepEngine, vector
from serq.sim.stages.decode_run import DecodeRun, plus_ones
from serq.sim.stats import _LOG_W

ROOT = Path(__file__).resolve().parents[3]


class Plain(StepEngine):
    coalesce = False


def _cost_of(text: str) -> ir.Expr:
    program = serq.load(f"""
pool kv {{ cap 1e6; block 16; }}
stage engine : step {{ budget 64; cost {text}; memory kv; }}
workload {{ arrive poisson(1); }}
session {{ hold kv (10) {{ run engine decode (3) growing kv; }} end; }}
""")
    return program.stages[0].step.cost


class View:
    tokens = decoders = 3.0
    prefilled = kv_prefill = attention = 0.0
    residents = 3.0


@pytest.mark.parametrize("text", [
    "1e-3 + 2e-9 * kv_decode",
    "max(2e-4 + 2e-9 * kv_decode, tokens * 2e-5)",
    "min(1e-2, 1e-4 + kv_decode / 3e7)",
    "kv_decode > 5000 ? 2e-3 : 1e-3 + kv_decode * 1e-9",
    "floor(kv_decode / 1000) * 1e-4 + ceil(decoders / 2) * 1e-5 + abs(-1e-3)",
    "1 / (kv_decode - 4096)",             # a zero divisor: IEEE infinities, as f_div
    "(kv_decode >= 300 && decoders < 4) + (kv_decode == 0 || residents != 3) * 1e-3",
    "max j in 4 (1e-3 * j - kv_decode * 1e-7 * j) + sum j in 3 (j * kv_decode * 1e-9) + min j in 3 (j)",
    "-(1e-3 - kv_decode * 1e-7)",
    # a NaN (0 · ∞ at 4096) on either side of min and max, against a number; signed zeros
    "max(0 * (1 / (kv_decode - 4096)), 1e-3)", "max(1e-3, 0 * (1 / (kv_decode - 4096)))",
    "min(0 * (1 / (kv_decode - 4096)), 1e-3)", "min(1e-3, 0 * (1 / (kv_decode - 4096)))",
    "max(-(kv_decode * 0), 0)", "max(0, -(kv_decode * 0))", "min(-(kv_decode * 0), 0)", "min(0, -(kv_decode * 0))",
])
def test_the_array_cost_is_the_scalar_cost_at_every_point(text: str) -> None:
    e = _cost_of(text)
    vcost = vector.compile_cost(e)
    assert vcost is not None
    scalar = expr.compile_expr(e, expr.Frame(expr.base_namespace()))
    rng = random.Random(3)
    kv = np.array([0.0, 16.0, 4096.0, 4095.999, 5000.0, 1e18] + [float(rng.randrange(1 << 20)) for _ in range(200)])
    got = vcost(View(), kv).tolist()
    for x, y in zip(kv.tolist(), got):
        v = View()
        v.kv_decode = x
        want = scalar(v)
        assert (want == y and math.copysign(1, want) == math.copysign(1, y)) or (want != want and y != y), (x, want, y)


@pytest.mark.parametrize("text", ["exp(kv_decode / 1e6)", "ln(kv_decode + 1)", "sqrt(kv_decode)",
                                  "kv_decode ^ 0.5", "1e-3 + now * 0", "1e-3 * ~exp(1)", "1e-3 + used(kv) * 0"])
def test_a_cost_whose_array_form_may_round_otherwise_is_not_compiled(text: str) -> None:
    assert vector.compile_cost(_cost_of(text)) is None


@pytest.mark.parametrize("seed", range(4))
def test_positions_are_plus_ones_at_every_step(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        p = rng.choice([rng.uniform(0, 5000), rng.uniform(2000, 2048), float(rng.randrange(9000)), rng.random()])
        d = np.array(sorted(rng.sample(range(30000), 300)), dtype=np.int64)
        got = vector.positions(p, d).tolist()
        assert got == [plus_ones(p, int(k)) for k in d]
        assert got[:3] == [reduce(add, repeat(1.0, int(k)), p) for k in d[:3]]


def _growths_over_arrays(p: float, a: float, g0: int, b: float, cap: int) -> list[int] | None:
    # vector.growths without its shortcut for exact positions: every growth's units and the test
    # between two growths over the arrays, from positions (which test_positions_… holds to plus_ones)
    g = g0 + int(b) * np.arange(max(0, (cap - g0) // int(b) + 1), dtype=np.int64)
    if not g.size:
        return []
    a_before = a + b * np.arange(g.size, dtype=np.float64)
    units = (vector.positions(p, g - 2) + 1.0) - a_before
    need = np.ceil((a_before + units) / b - 1e-9) * b - a_before
    if not (np.all(units > 1e-9) and np.all(need == b)):
        return None
    if g.size > 1 and np.any((vector.positions(p, g[1:] - 3) + 1.0) - a_before[1:] > 1e-9):
        return None
    return g.tolist()


@pytest.mark.parametrize("seed", range(4))
def test_a_jobs_growths_are_found_as_over_the_arrays(seed: int) -> None:
    # vector.growths works out a job's units once when every position is exact: the same growths
    # (or the same refusal) as over the arrays, for positions with few and many fraction bits,
    # near a binade's top, allocations on and off the block, and growths that take two blocks
    rng = random.Random(seed)
    found = refused = 0
    for _ in range(300):
        b = rng.choice([16.0, 16.0, 1.0, 3.0, 256.0])
        whole = float(rng.randrange(0, 9000))
        p = rng.choice([whole + rng.randrange(1 << 10) / 1024, whole + rng.random(), whole,
                        2048.0 - rng.randrange(1, 64) + rng.randrange(1 << 12) / 4096, 2.0**40 + rng.random() * 2**12,
                        whole + rng.choice([1e-8, 1e-5, 2.0**-20, 1.0 - 1e-9]),  # (a fraction of a block near 0 or 1)
                        2.0 ** rng.randrange(9, 14) - rng.random() * 20,  # (a binade's top crossed before a growth,
                        rng.random() * 6])  # or several: rounded more than once)
        a = rng.choice([b * math.ceil(p / b), b * math.ceil(p / b) + b, float(math.ceil(p)), b * math.floor(p / b)])
        cap = rng.randrange(2, 30000)
        g0 = max(2, min(cap + 1, int(a - p + 2.0)))
        want = _growths_over_arrays(p, a, g0, b, cap)
        got = vector.growths(p, a, g0, b, cap)
        assert (None if got is None else got.tolist()) == want, (p, a, g0, b, cap)
        found += want is not None and len(want) > 1
        refused += want is None
    assert found > 50 and refused > 20  # (both ways taken)


LONG = """
pool kv {{ cap {cap}; block 16; evict lru; preempt lifo; }}
pool reqs {{ cap {slots}; admit via engine; }}
stage engine : step {{ budget 4096; cost {cost}; memory kv; }}
workload {{
  arrive poisson({rate});
  init {{ set prompt = {prompt}; set o = ~exp({out}) + 1; }}
}}
session {{
  hold reqs (1), kv (prompt) {{
    run engine prefill (prompt) growing kv;
    run engine decode (o) growing kv;
  }} cache (prompt + o);
  end;
}}
"""


UNIFORM = "~uniform(100, 3000)"


def _same(text: str, horizon: float, seed: int, monkeypatch: pytest.MonkeyPatch) -> tuple[serq.Report, int]:
    planned = []
    real = vector.plan

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        got = real(*args, **kwargs)
        planned.append(got is not None)
        return got
    monkeypatch.setattr(vector, "plan", counting)
    program = serq.load(text)
    fast = serq.run(program, seed=seed, horizon=horizon, warmup=horizon / 10)
    slow = serq.run(program, seed=seed, horizon=horizon, warmup=horizon / 10, engines={"engine": Plain})
    assert fast.to_json() == slow.to_json()
    return fast, sum(planned)


ONE_JOB = dict(cap="1e6", slots=1, cost="2e-4 + 2e-9 * kv_decode", rate=0.5, out=3000)  # fractional positions
TOGETHER = dict(cap="1e6", slots=6, cost="2e-4 + 2e-9 * kv_decode", rate=2, out=3000,
                prompt="floor(~uniform(10, 100)) * 16")                          # whole blocks: jobs grow together
SEVERAL = dict(cap="1e6", slots=4, cost="max(2e-4 + 2e-9 * kv_decode, tokens * 2e-5)", rate=2, out=2000)
FILLS = dict(cap="60000", slots=8, cost="1e-3 + 1e-8 * kv_decode", rate=3, out=4000)  # the pool fills (from ~50 s):
# runs stop there
NO_MEMORY = dict(cap="1e6", slots=3, cost="3e-4", rate=1, out=3000)               # a cost that reads no memory
MERGE = dict(cap="1e6", slots=2, cost="kv_decode > 6000 ? 5e-4 : 2e-4 + 1e-9 * kv_decode", rate=1, out=4000)  # equal
# costs merge


# each horizon: over 20 requests ended. Seed 2 only where it reaches what seed 1 and the other cases
# do not (coverage): the cache's eviction piece by piece (FILLS), a histogram's one-bucket fill (MERGE)
@pytest.mark.parametrize("case, horizon, seed", [
    (ONE_JOB, 70.0, 1), (TOGETHER, 30.0, 1), (SEVERAL, 30.0, 1), (FILLS, 100.0, 1), (FILLS, 100.0, 2),
    (NO_MEMORY, 50.0, 1), (MERGE, 50.0, 1), (MERGE, 50.0, 2),
])
def test_long_runs_planned_in_arrays_give_the_report_of_one_iteration_at_a_time(
        case: dict, horizon: float, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    report, planned = _same(LONG.format(**{"prompt": UNIFORM, **case}), horizon, seed, monkeypatch)
    assert planned > 5  # the array planner took these runs
    assert report.ended > 20


def test_very_long_runs_sum_in_whole_ulps_and_keep_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    # a reasoning model's answers of ~20 000 tokens, two or three at once: runs of thousands of
    # iterations whose sums (gaps counted once per decoder, spans, costs) are taken in whole ulps
    # (each sum over stretches of one value: a segment's iterations, its one length, in one row)
    taken = []
    real = vector.fold_in_binade

    def spy(acc: float, xs: np.ndarray, n: int = 1, counts: np.ndarray | None = None) -> float | None:
        size = xs.size if counts is None else int(counts.sum())
        taken.append((size, xs.size, n, real(acc, xs, n, counts)))
        return taken[-1][3]
    monkeypatch.setattr(vector, "fold_in_binade", spy)
    text = LONG.format(cap="1e6", slots=3, cost="2e-4 + 2e-9 * kv_decode", rate=0.3, out=20000, prompt=UNIFORM)
    report, planned = _same(text, 30.0, 2, monkeypatch)  # (12 sums of 4 096 or more, 2 of several decoders)
    assert planned > 5
    assert any(size >= 4096 and got is not None for size, _rows, _n, got in taken)  # (a run's three sums)
    assert any(n > 1 and got is not None for _size, _rows, n, got in taken)  # (gaps of several decoders)
    assert any(size >= 10 * rows and got is not None for size, rows, _n, got in taken)  # (over its stretches)


def test_a_run_longer_than_its_first_cost_foretells_is_planned_to_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    # the arrays first reach a quarter past what the first cost allows before the next event; a cost
    # that falls as kv_decode grows lets the run past that, and it is planned again to the jobs' ends
    further = []
    real = vector._plan
    monkeypatch.setattr(vector, "_plan", lambda *a: further.append(real(*a)) or further[-1])
    text = LONG.format(cap="1e6", slots=2, cost="1e-4 + 2e-3 / (1 + kv_decode / 1000)", rate=0.5, out=3000,
                       prompt=UNIFORM)
    report, planned = _same(text, 70.0, 1, monkeypatch)  # (6 planned further, as in 100 s)
    assert planned > 5
    assert sum(f is vector._FURTHER for f in further) > 3


def test_a_cost_that_turns_negative_ends_the_run_where_the_walk_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    text = LONG.format(cap="1e6", slots=2, cost="2e-3 - 1e-7 * kv_decode", rate=1, out=3000, prompt=UNIFORM)
    program = serq.load(text)
    # seed 7: the cost reaches 0 early, inside a run planned in arrays
    with pytest.raises(serq.SerqRuntimeError) as fast:
        serq.run(program, seed=7, horizon=100.0, warmup=10.0)
    with pytest.raises(serq.SerqRuntimeError) as slow:
        serq.run(program, seed=7, horizon=100.0, warmup=10.0, engines={"engine": Plain})
    assert str(fast.value) == str(slow.value)
    assert "costs" in str(fast.value)


def test_the_seeds_single_turn_program_with_long_outputs_keeps_its_report(monkeypatch: pytest.MonkeyPatch) -> None:
    src = (ROOT / "programs/single-turn/vllm_single_turn.sq").read_text()
    src = src.replace("~exp(200)", "~exp(4000)").replace("let Lambda = 3.0;", "let Lambda = 1.0;")
    src = src.replace('use "std/vllm";', f'use "{ROOT / "serq/lib/vllm.sq"}";')
    report, planned = _same(src, 100.0, 1, monkeypatch)  # (~140 runs planned in arrays)
    assert planned > 100


def test_a_full_cache_gives_its_blocks_to_a_long_run_as_growth_by_growth(monkeypatch: pytest.MonkeyPatch) -> None:
    # a small pool whose cache fills: the long runs' growths evict a block each from the oldest
    # entry, and empty entries on the way; replayed in arrays, the report is one iteration at a time's
    bulk = []
    real = vector.grow_blocks
    monkeypatch.setattr(vector, "grow_blocks", lambda *a: bulk.append(real(*a)) or bulk[-1])
    text = LONG.format(cap="40000", slots=3, cost="1e-3 + 1e-8 * kv_decode", rate=2, out=3000,
                       prompt="floor(~uniform(10, 150)) * 16 + 3")
    report, planned = _same(text, 60.0, 3, monkeypatch)  # (~90 growths in bulk, ~180 000 units evicted)
    assert planned > 5 and sum(bulk) > 20
    kv = next(p for p in report.pools if p.name == "kv")
    assert kv.evicted_units > 1e5


def test_a_program_of_short_decodes_never_imports_numpy() -> None:
    # the arrays pay for numpy's import only after 2 000 growths of long runs walked
    import subprocess
    import sys
    code = ("import sys, serq; p = serq.load(sys.argv[1]); "
            "serq.run(p, seed=1, horizon=300, warmup=30, max_events=2_000_000); print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "programs/multi-turn/vllm_chat.sq")],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("shape", ["growing", "shuffled", "edges", "stretches", "few stretches", "one value", "a NaN"])
@pytest.mark.parametrize("n", [1, 3])
def test_a_runs_gaps_fill_the_histogram_as_one_by_one(shape: str, n: int) -> None:
    # vector.add_stretches of the values as stretches (a few stretches, or any with a NaN:
    # LogHistogram's fill; many others left for later and counted in when the buckets are
    # read: keys by range, or np.unique with zeros' and infinities' keys) against
    # LogHistogram.add, each value n times in a row: the same total, count, buckets (count,
    # smallest, largest), and a last value whose bucket is the one kept for it
    from serq.sim.stats import LogHistogram
    rng = np.random.default_rng(7)
    xs = np.sort(rng.uniform(1e-4, 3e-3, 500))
    if shape == "shuffled":
        xs = rng.permutation(xs)
    elif shape in ("stretches", "few stretches"):  # a run's gaps: a value per stretch between growths,
        k = 60 if shape == "stretches" else 5      # across bucket edges, one stretch out of order
        vals = np.sort(rng.uniform(2.8e-4, 3.4e-4, k))
        vals[k // 2] = 2.5e-4
        xs = np.repeat(vals, rng.integers(1, 40, k))
        assert vector._FEW < 60 and 5 <= vector._FEW
    elif shape == "one value":
        xs = np.full(300, 3e-4)
    elif shape == "edges":  # zeros, an infinity, values close to bucket edges, repeats, out of order at the end
        edge = math.exp(_LOG_W * 40)
        xs = np.concatenate(([0.0, 0.0], np.nextafter(edge, 0.0) * np.ones(3), [edge, edge * (1 + 1e-12)],
                             xs[:50], [math.inf, 1e-3]))
    elif shape == "a NaN":  # (never a gap of a run; its bucket's least and greatest depend on the order)
        xs = np.concatenate(([0.0, math.nan, 0.0], xs[:40]))
    fast, slow = LogHistogram(), LogHistogram()
    vector.add_stretches(fast, *vector._stretches(xs), n)
    for x in xs.tolist():
        for _ in range(n):
            slow.add(x)
    assert (fast.count, repr(fast.total)) == (slow.count, repr(slow.total))
    assert bool(fast._later) == (shape in ("growing", "shuffled", "stretches", "edges"))  # (left for later)
    assert repr(sorted(fast._counted().items())) == repr(sorted(slow._buckets.items())) and not fast._later
    if fast._last_x == fast._last_x:  # (the value `add` finds its bucket for without a logarithm)
        assert fast._last_b is fast._buckets[_key(fast._last_x)]
    assert repr(fast.buckets()) == repr(slow.buckets())
    quantiles = (0.01, 0.5, 0.99, 1.0)
    assert repr([fast.quantile(q) for q in quantiles]) == repr([slow.quantile(q) for q in quantiles])


def _key(x: float) -> int:
    from serq.sim.stats import _INF_KEY, _ZERO_KEY, _bucket
    return _ZERO_KEY if not x > 0.0 else _INF_KEY if x == math.inf else _bucket(x)


@pytest.mark.parametrize("seed", range(4))
def test_runs_gaps_left_for_later_give_the_buckets_of_one_by_one_among_other_values(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # runs' gaps left for later (LogHistogram._later), counted in when their number reaches
    # vector._LATER (small here) or when the buckets are read, between single values, runs
    # walked in Python (add_runs, add_repeat) and zeros: the same buckets, quantiles and mean as
    # every value added one by one, and a merged family the same as the merge of those
    from serq.sim.stats import LogHistogram
    monkeypatch.setattr(vector, "_LATER", 60)
    rng = np.random.default_rng(seed)
    fast, slow = LogHistogram(), LogHistogram()
    read = by_size = 0
    for _ in range(40):
        what = rng.integers(0, 5)
        if what == 0:  # a run's gaps in arrays: stretches between growths, n decoders
            vals = np.sort(rng.uniform(2.8e-4, 3.4e-4, int(rng.integers(vector._FEW + 1, 80))))
            counts = rng.integers(0, 20, vals.size)
            n = int(rng.integers(1, 4))
            held = len(fast._later)
            vector.add_stretches(fast, vals, counts, n)
            by_size += len(fast._later) <= held  # (counted in: they reached vector._LATER values)
            for x, c in zip(vals.tolist(), counts.tolist()):
                for _ in range(c * n):
                    slow.add(x)
        elif what == 1:
            x = float(rng.choice([0.0, rng.uniform(1e-4, 1e-3), 3e-4]))
            fast.add(x)
            slow.add(x)
        elif what == 2:  # a walked run's gaps
            runs = [[float(rng.uniform(2.8e-4, 3.4e-4)), int(rng.integers(1, 9))] for _ in range(3)]
            fast.add_runs(runs, 2, min(x for x, _c in runs))
            for x, c in runs:
                for _ in range(2 * c):
                    slow.add(x)
        elif what == 3:
            x = float(rng.uniform(1e-4, 1e-3))
            fast.add_repeat(x, 5)
            for _ in range(5):
                slow.add(x)
        else:  # something reads the buckets between two runs (a quantile): all counted in first
            read += 1
            assert fast.buckets() == slow.buckets()
            assert not fast._later
    assert (fast.count, fast.total, fast.mean) == (slow.count, slow.total, slow.mean)
    assert fast.buckets() == slow.buckets()
    assert [fast.quantile(q) for q in (0.5, 0.9, 0.99)] == [slow.quantile(q) for q in (0.5, 0.9, 0.99)]
    other_fast, other_slow = LogHistogram(), LogHistogram()
    vector.add_stretches(other_fast, np.linspace(3e-4, 6e-4, 40), np.full(40, 3), 1)
    for x in np.linspace(3e-4, 6e-4, 40).tolist():
        for _ in range(3):
            other_slow.add(x)
    merged = LogHistogram.merged([fast, other_fast])
    assert merged.buckets() == LogHistogram.merged([slow, other_slow]).buckets()
    assert read > 0 and by_size > 0


@pytest.mark.parametrize("router, gauges", [(2, True), (3, False), (0, True)])
def test_a_clusters_long_runs_kept_in_arrays_give_the_report_of_one_iteration_at_a_time(
        router: int, gauges: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # replicas behind a router with a reasoning model's outputs: runs planned in arrays pass over
    # the other replicas' events (serq/sim/lazy.py), are cut, replayed when a router or a gauge
    # reads their pools, and made into lists where the passing-run machinery reads them
    from serq.sim.stages import coalesce
    monkeypatch.setattr(coalesce, "_WALK_FIRST", 0)  # (numpy at the first long run)
    text = (ROOT / "programs/cluster/agents.sq").read_text().replace("~exp(200) + 1", "~exp(3000) + 1")
    if not gauges:
        text = "\n".join(line for line in text.splitlines() if not line.startswith("gauge "))
    text = text.replace('use "std/routers";', f'use "{ROOT / "serq/lib/routers.sq"}";')
    # 0.6 sessions a second: by 30 s requests queue behind a replica's runs (the waiting head's analysis)
    program = serq.load(text, sets={"N": "3", "router": str(router), "Lambda": "0.6"})
    planned = []
    real = vector.plan
    monkeypatch.setattr(vector, "plan", lambda *a: planned.append(real(*a)) or planned[-1])
    fast = serq.run(program, seed=5, horizon=30.0, warmup=3.0)
    slow = serq.run(program, seed=5, horizon=30.0, warmup=3.0, engines={"engine": Plain})
    assert fast.to_json() == slow.to_json()
    for name in fast.gauges:
        assert fast.gauge(name).points == slow.gauge(name).points
    assert sum(p is not None for p in planned) > 100  # (240 to 256)


def _planned(seed: int) -> DecodeRun:
    # a run as vector.plan leaves it: costs in runs of equal values, the ends added in turn,
    # growth rows (one or two jobs) at some iterations
    rnd = random.Random(seed)
    m = rnd.randint(2, 60)
    per = [rnd.choice([1e-3, 1.5e-3, 2e-3]) for _ in range(m - 1)]  # iterations 2 … m
    run = DecodeRun(0.25, 1e-3, 64.0, None, 0)
    ends = np.add.accumulate(np.array([run.first] + per))
    costs, counts, t0, t1 = [], [], [], []
    for j, c in enumerate(per):  # iteration j + 2 ends at ends[j + 1]
        if costs and costs[-1] == c:
            counts[-1] += 1
            t1[-1] = ends[j + 1]
        else:
            costs.append(c), counts.append(1), t0.append(ends[j]), t1.append(ends[j + 1])
    g, who = [], []
    for it in range(2, m + 1):
        for i in range(2):
            if rnd.random() < 0.25:
                g.append(it - 2)
                who.append(i)
    ga = np.array(g, dtype=np.int64)
    run.cols = vector.Cols(np.array(costs), np.array(counts, dtype=np.int64), np.array(t0), np.array(t1), ends, ga,
                           np.array(who, dtype=np.int64), ends[ga], 16.0, None)
    run.length, run.end = m, float(ends[-1])
    return run


@pytest.mark.parametrize("seed", range(40))
def test_a_run_kept_in_arrays_is_cut_as_its_lists_are(seed: int) -> None:
    # DecodeRun.cut on the columns (Cols.cut) against the same cut on the lists they make:
    # the same segments, growth events, ends, length and end, and the growths replayed so far
    arrays, lists = _planned(seed), _planned(seed)
    lists._lists()
    rnd = random.Random(seed)
    length = rnd.randint(1, arrays.length)
    grown = rnd.randint(0, arrays.n_events())
    arrays.grown = lists.grown = grown
    assert arrays.all_ends() == lists.all_ends()
    assert [arrays.event_start(e) for e in range(arrays.n_events())] == [e[3] for e in lists.events]
    arrays.cut(length, arrays.all_ends())
    lists.cut(length, lists.all_ends())
    assert arrays.cols is not None  # (cut in place, no lists made)
    assert (arrays.length, arrays.end, arrays.grown, arrays.ends) == (lists.length, lists.end, lists.grown, lists.ends)
    assert arrays.end_list() == lists.end_list()
    assert arrays.segs == lists.segs and arrays.events == lists.events


def _sums(seed: int) -> tuple[float, np.ndarray, int]:
    # an accumulator and values as a run's sums see them (gaps and costs of a few stretches,
    # the time averages' products), and the edges of the whole-ulp sum: the binade's top
    # reached or passed, values halfway between two ulps, zeros, negatives, huge values
    rnd = random.Random(seed)
    kind = seed % 8
    acc = rnd.choice([rnd.uniform(1.0, 2000.0), rnd.uniform(1e-3, 1.0), 0.0, 2.0 ** rnd.randint(-5, 11)])
    size = rnd.randint(1, 400)
    xs = np.repeat(np.array([rnd.uniform(2e-4, 4e-4) for _ in range(8)]), (size + 7) // 8)[:size]
    e = math.frexp(acc)[1] if acc else 0
    u = math.ldexp(1.0, e - 53)
    if kind == 1 and acc:  # the sum ends at the binade's top, or an ulp either side
        xs = np.full(size, u * rnd.randint(1, 9))
        acc = math.ldexp(1.0, e) - u * rnd.randint(1, 9) * size + u * rnd.choice([-1, 0, 1])
    elif kind == 2 and acc:  # a value halfway between two multiples of the ulp
        xs[rnd.randrange(size)] = u * (rnd.randint(0, 1000) + 0.5)
    elif kind == 3:
        xs[rnd.randrange(size)] = rnd.choice([0.0, -0.0, -1e-4, math.inf, math.nan, 1e300])
    elif kind == 4 and acc:  # values below half an ulp: the sum does not move
        xs = np.full(size, u * rnd.choice([0.25, 0.4999, 0.5001]))
    elif kind == 5:  # a large sum: the binade is left
        xs = xs * 1e6
    return acc, xs, rnd.choice([1, 1, 2, 3])


@pytest.mark.parametrize("seed", range(400))
def test_a_sum_in_whole_ulps_is_the_sum_in_turn(seed: int) -> None:
    # vector.fold_in_binade against the additions one after the other: equal wherever it gives a
    # sum, and it gives one for the usual sums (the accumulator well inside its binade)
    acc, xs, n = _sums(seed)
    got = vector.fold_in_binade(acc, xs, n)
    with np.errstate(all="ignore"):
        want = reduce(add, (x for x in xs.tolist() for _ in range(n)), acc)
    if got is not None:
        assert got == want or (math.isnan(got) and math.isnan(want))
        assert math.copysign(1.0, got) == math.copysign(1.0, want)
    assert vector.fold_runs(acc, xs, np.ones(xs.size, dtype=np.int64), n) == want or math.isnan(want)
    if seed % 8 in (0, 6, 7) and acc >= 1.0 and xs.sum() * n < acc / 4:
        assert got is not None  # (nothing in the way: the whole-ulp sum is taken)


@pytest.mark.parametrize("seed", range(300))
def test_ties_in_a_sum_in_whole_ulps_round_to_even_as_the_sum_in_turn(seed: int) -> None:
    # values halfway between two multiples of the accumulator's ulp, in stretches (counts, each
    # added n times), beside values whose odd or even number of ulps flips the sum's parity, and
    # stretches added no times: fold_in_binade (and fold_runs) against the additions in turn
    rnd = random.Random(seed)
    acc = rnd.choice([1000.0, 1000.0 + 3 * math.ulp(1000.0), 1536.25, 3.0, 7.5e5])
    u = math.ulp(acc)
    size = rnd.choice([1, 2, 5, 40, 300])
    units = [rnd.randint(0, 40) + rnd.choice([0.5, 0.5, 0.0, 0.25, 0.75]) for _ in range(size)]
    xs = np.array(units) * u
    counts = np.array([rnd.choice([0, 1, 1, 2, 3, 17]) for _ in range(size)], dtype=np.int64)
    n = rnd.choice([1, 1, 2, 3])
    want = reduce(add, (x for x, c in zip(xs.tolist(), counts.tolist()) for _ in range(c * n)), acc)
    assert vector.fold_in_binade(acc, xs, n, counts) == want
    assert vector.fold_runs(acc, xs, counts, n) == want
    ones = np.ones(size, dtype=np.int64)
    assert vector.fold_in_binade(acc, xs, n) == reduce(add, (x for x in xs.tolist() for _ in range(n)), acc)
    assert vector.fold_in_binade(acc, xs, n, ones) == vector.fold_in_binade(acc, xs, n)


@pytest.mark.parametrize("seed", range(80))
def test_a_segments_iterations_each_last_its_step_where_the_ends_stay_in_a_binade(seed: int) -> None:
    # vector._steps (a long run's lengths a segment at a time) against the ends one by one: each
    # iteration of a segment lasts (t0 + c) - t0 when every end stays in one binade and no cost is
    # halfway between two multiples of its ulp (a tie's lengths alternate with the end's parity);
    # None where that does not hold (a cost that is a tie, ends that cross a power of two)
    rnd = random.Random(seed)
    first = rnd.choice([1000.0, 1500.123, 3.75, 2048.0 - 3e-6, 1e6 + 0.5])
    u = math.ulp(first)
    costs, counts = [], []
    for _ in range(rnd.randint(1, 6)):
        if rnd.random() < 0.8:  # (a whole number of ulps, a tie, or between)
            costs.append((rnd.randint(1, 10**6) + rnd.choice([0.0, 0.3, 0.5, 0.5, 0.71])) * u)
        else:
            costs.append(rnd.uniform(1e-9, 3e-8))
        counts.append(rnd.randint(1, 40))
    ends, t0, lengths = [first], [], []
    for c, n in zip(costs, counts):
        t0.append(ends[-1])
        for _ in range(n):
            ends.append(ends[-1] + c)
            lengths.append(ends[-1] - ends[-2])
    got = vector._steps(np.array(costs), np.array(t0), np.array(ends))
    if got is not None:
        assert np.repeat(got, counts).tolist() == lengths
    one_binade = math.frexp(ends[0])[1] == math.frexp(ends[-1])[1]
    ties = any(math.fmod(c, u) * 2.0 == u for c in costs)
    assert (got is not None) == (one_binade and not ties)


def test_the_whole_ulp_sum_refuses_what_it_cannot_do() -> None:
    u = math.ulp(1000.0)
    halfway = np.array([3e-4, 2.5 * u])  # (a tie is summed as the rounding to even sums it)
    assert vector.fold_in_binade(1000.0, halfway, 1) == reduce(add, halfway.tolist(), 1000.0)
    assert vector.fold_in_binade(1000.0, np.array([3e-4, -1e-9]), 1) is None  # negative
    assert vector.fold_in_binade(1000.0, np.array([3e-4, math.nan]), 1) is None
    assert vector.fold_in_binade(1023.9, np.full(1000, 1e-3), 1) is None  # past 1024
    assert vector.fold_in_binade(0.0, np.full(10, 1e-3), 1) is None
    assert vector.fold_in_binade(1000.0, np.full(1000, 1e-3), 2) == reduce(add, repeat(1e-3, 2000), 1000.0)


@pytest.mark.parametrize("queued, before", [(0, 0.0), (0, 2.0), (3, 0.0), (3, 3.0)])
def test_a_runs_growths_in_arrays_keep_the_pools_averages_queue_or_none(queued: int, before: float) -> None:
    # vector.grow_blocks (a run's growths of one block each, in arrays) against Pool.allocate, one
    # growth at a time: the same used, cached and four integrals, to the bit, whether holds wait at
    # the pool or not (an empty queue before and through the run leaves its integral as it is, and
    # the arrays then skip its row)
    from types import SimpleNamespace

    import simpy

    from serq.sim.pool import Pool

    def pool() -> Pool:
        sim = SimpleNamespace(env=simpy.Environment(), gauges=None)
        decl = SimpleNamespace(name="kv", cap=1e6, block=16.0, preempt="lifo", admit_via=None)
        p = Pool(sim, decl, "kv", None)  # type: ignore[arg-type]
        p.used = 4096.0
        p.holders = [object()] * 2  # type: ignore[list-item]
        p.put_queue = [object()] * queued  # type: ignore[list-item]
        for avg, value in zip(p._averages, (4096.0, 0.0, before, 2.0)):
            avg.value, avg.last, avg.integral = value, 3.0, 0.125
        return p

    rng = np.random.default_rng(queued * 10 + int(before))
    times = 3.0 + np.add.accumulate(rng.uniform(1e-4, 3e-3, 300))
    fast, slow = pool(), pool()
    assert vector.grow_blocks(fast, 16.0, times)
    for t in times.tolist():
        slow.allocate(16.0, t)
    state = lambda p: (p.used, p.cache.total, [(a.value, a.last, a.integral) for a in p._averages])  # noqa: E731
    assert state(fast) == state(slow)
    assert (fast.queue_avg.integral == 0.125) == (queued == 0 and before == 0.0)

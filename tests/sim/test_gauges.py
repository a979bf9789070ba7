"""Gauges at run time (docs/language.md §25, docs/report.md §17): read at the
end of every instant and at each growth of a coalesced run; the time average,
its batch-means interval and the extremes over [warm-up, end]; the report's
table, JSON and dump."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import serq
from serq.sim.gauges import Gauges, summarize
from serq.sim.simulator import Simulator
from serq.sim.results import build_report
from tests.frontend.test_gauges_aggregates import DEPLOYMENT

ROOT = Path(__file__).resolve().parents[2]

# the router of tests/frontend/test_gauges_aggregates.py, run longer
ROUTED = DEPLOYMENT.replace("horizon 400; warmup 10;", "horizon 4000; warmup 100;")


def run(text: str, **kw) -> serq.Report:
    return serq.run(serq.load(text), **kw)


def test_a_gauge_of_used_is_the_pools_time_average() -> None:
    r = run(ROUTED + "gauge u0 = used(kv[0]); gauge h1 = holders(kv[1]);")
    u0, h1 = r.gauge("u0"), r.gauge("h1")
    pool0, pool1 = r.pools_named("kv")
    assert u0.mean == pytest.approx(pool0.mean_used, rel=1e-9)
    assert h1.mean == pytest.approx(pool1.mean_holders, rel=1e-9)
    assert u0.mean - u0.ci <= u0.mean <= u0.mean + u0.ci and u0.ci > 0.0
    assert h1.min == 0.0 and h1.max >= 1.0 and h1.max == int(h1.max)


def test_the_spread_is_read_at_one_moment() -> None:
    r = run(ROUTED + "gauge hot = max k in 2 (used(kv[k]));\ngauge total = sum k in 2 (used(kv[k]));\n"
                     "gauge spread = max k in 2 (used(kv[k])) - min k in 2 (used(kv[k]));")
    a, b = (p.mean_used for p in r.pools_named("kv"))
    assert r.gauge("total").mean == pytest.approx(a + b, rel=1e-9)  # a sum of gauges is the sum of their means
    assert r.gauge("hot").mean > max(a, b)  # E[max] exceeds max E
    assert r.gauge("spread").mean > abs(a - b)


def test_the_dump_is_the_signal(tmp_path: Path) -> None:
    r = run(ROUTED + "gauge u = used(kv[0]);")
    r.dump(tmp_path)
    rows = (tmp_path / "gauge" / "u.csv").read_text().splitlines()
    assert rows[0] == "time,value"
    pts = [tuple(map(float, line.split(","))) for line in rows[1:]]
    assert pts[0][0] == 0.0
    assert all(p[0] < q[0] and p[1] != q[1] for p, q in zip(pts, pts[1:]))  # changes only, in time order
    area = 0.0
    for k, (t, v) in enumerate(pts):
        nxt = pts[k + 1][0] if k + 1 < len(pts) else r.end
        lo, hi = max(t, r.warmup), min(nxt, r.end)
        if hi > lo:
            area += v * (hi - lo)
    assert area / (r.end - r.warmup) == pytest.approx(r.gauge("u").mean, rel=1e-9)


END_OF_INSTANT = """\
pool kv { cap 10; }
stage gate : delay;
workload { arrive batch(2); }
session {
  run gate (serial == 0 ? 0 : 1);
  hold kv (1) { run gate (1); }
  end;
}
gauge n = holders(kv);
run { horizon 3; }
"""


def test_a_gauge_reads_the_end_of_an_instant() -> None:
    """Session 0 holds over [0, 1); at 1 it releases as session 1 takes the
    pool, and the two holders the instant passes through are never a value:
    1 holder over [0, 2), none after."""
    g = run(END_OF_INSTANT).gauge("n")
    assert g.points == ((0.0, 1.0), (2.0, 0.0))
    assert (g.min, g.max) == (0.0, 1.0)
    assert g.mean == pytest.approx(2.0 / 3.0, rel=1e-15)


def test_the_extremes_are_values_held_inside_the_span() -> None:
    pts = [(0.0, 50.0), (1.0, 2.0), (2.0, 7.0), (2.0 + 1e-9, 3.0), (5.0, -1.0)]
    s = summarize("g", pts, 1.5, 5.0)  # 50 before the warm-up, -1 only from the end on
    assert (s.min, s.max) == (2.0, 7.0)
    assert s.mean == pytest.approx((2.0 * 0.5 + 7.0 * 1e-9 + 3.0 * (3.0 - 1e-9)) / 3.5, rel=1e-12)
    flat = summarize("g", [(0.0, 4.0)], 0.0, 10.0)
    assert (flat.mean, flat.ci, flat.min, flat.max) == (4.0, 0.0, 4.0, 4.0)
    empty = summarize("g", [(0.0, 4.0)], 10.0, 10.0)
    assert math.isnan(empty.mean) and math.isinf(empty.ci)


def test_the_interval_is_batch_means_over_20_windows() -> None:
    # one value per window: 0, 1, …, 19 over [0, 20)
    s = summarize("g", [(float(i), float(i)) for i in range(20)], 0.0, 20.0)
    sd = math.sqrt(sum((i - 9.5) ** 2 for i in range(20)) / 19)
    assert s.mean == 9.5
    assert s.ci == pytest.approx(2.093 * sd / math.sqrt(20), rel=1e-12)


def _windows_by_hand(pts: list[tuple[float, float]], start: float, end: float) -> tuple[float, list[float]]:
    """The mean and the 20 window means of a piecewise-constant signal, each
    window's area taken piece by piece (every piece cut at the window's edges)."""
    width = (end - start) / 20
    edges = [start + i * width for i in range(20)] + [end]
    areas: list[list[float]] = [[] for _ in range(20)]
    for k, (t, v) in enumerate(pts):
        t_next = pts[k + 1][0] if k + 1 < len(pts) else end
        for w in range(20):
            lo, hi = max(t, start, edges[w]), min(t_next, end) if w == 19 else min(t_next, end, edges[w + 1])
            if hi > lo:
                areas[w].append(v * (hi - lo))
    means = [math.fsum(a) / (edges[w + 1] - edges[w]) for w, a in enumerate(areas)]
    return math.fsum(x for a in areas for x in a) / (end - start), means


@pytest.mark.parametrize("seed", range(40))
def test_the_summary_is_the_windows_areas(seed: int) -> None:
    """`summarize` walks the change points once, a window after another: the
    same areas as cutting every piece at every window's edges."""
    import random

    rng = random.Random(seed)
    start = rng.choice([0.0, rng.uniform(0.0, 50.0)])
    end = start + rng.choice([rng.uniform(0.1, 100.0), 1e-6])
    times = sorted(rng.choice([rng.uniform(-10.0, 150.0), round(rng.uniform(0.0, 100.0), 1), start, end])
                   for _ in range(rng.randint(1, 80)))
    pts = [(t, rng.choice([rng.uniform(-5.0, 5.0), 0.0, 3.0])) for t in times]
    s = summarize("g", pts, start, end)
    mean, means = _windows_by_hand(pts, start, end)
    assert s.mean == mean
    m = math.fsum(means) / 20
    assert s.ci == 2.093 * math.sqrt(math.fsum((x - m) * (x - m) for x in means) / 19 / 20)


def test_the_report_shows_the_gauge_table_and_json() -> None:
    r = run(ROUTED + "gauge total = sum k in 2 (used(kv[k]));", horizon=400.0, warmup=10.0)
    lines = r.text().splitlines()
    k = lines.index("gauge     mean   95% CI     min      max")
    assert lines[k + 2].startswith("total")
    assert lines[k + 4].startswith("stage")  # between the client rows and the stage table
    doc = json.loads(r.to_json())
    assert list(doc)[list(doc).index("client") + 1] == "gauges"
    assert set(doc["gauges"]["total"]) == {"mean", "ci", "min", "max"}
    assert "gauges" not in json.loads(run(ROUTED, horizon=50.0, warmup=1.0).to_json())
    with pytest.raises(serq.SerqError, match="unknown gauge `totl`") as info:
        r.gauge("totl")
    assert info.value.helps == ["did you mean gauge `total`?"]


def test_same_seed_same_gauges() -> None:
    text = ROUTED + "gauge s = sum k in 2 (queue(svc[k]));"
    a, b = run(text, horizon=300.0, warmup=10.0), run(text, horizon=300.0, warmup=10.0)
    assert a.gauge("s") == b.gauge("s") and a.gauge("s").points == b.gauge("s").points


def test_a_gauge_changes_nothing_else() -> None:
    plain = json.loads(run(ROUTED, horizon=500.0, warmup=10.0).to_json())
    gauged = json.loads(run(ROUTED + "gauge s = sum k in 2 (used(kv[k]));", horizon=500.0, warmup=10.0).to_json())
    del gauged["gauges"]
    assert gauged == plain


@pytest.mark.parametrize("lam", ["0.6", "1.2"])
def test_coalesced_runs_give_the_gauges_of_iteration_by_iteration(lam: str, tmp_path: Path) -> None:
    """A coalesced decode run's growths are read at their times, with the
    run's iteration in flight: the same change points as one by one."""
    text = (ROOT / "programs/multi-turn/vllm.sq").read_text()  # (`use "std/vllm"` is found anywhere)
    text += "\ngauge kvu = used(kv);\ngauge b = busy(engine) + free(kv) / 1000;\ngauge w = queued(reqs);\n"
    path = tmp_path / "gauged.sq"
    path.write_text(text)
    program = serq.load(path, sets=[("Lambda", lam)])
    reports = []
    for coalesce in (True, False):
        sim = Simulator(program, seed=2, horizon=300.0, warmup=30.0)
        for engine in sim.engines:
            engine.coalesce = coalesce
        sim.run()
        reports.append(build_report(sim))
    a, b = reports
    assert a.to_json() == b.to_json()
    for name in ("kvu", "b", "w"):
        assert a.gauge(name).points == b.gauge(name).points
    assert len(a.gauge("kvu").points) > 1000


def test_a_gauge_needs_no_pool_and_no_session() -> None:
    g = Gauges(None, ["one"], lambda _c: (1.0,))  # type: ignore[arg-type]
    g.sample(0.0)
    g.sample(1.0)
    g.sample(1.0)
    assert g.points == [[(0.0, 1.0)]]


def test_the_last_reading_of_an_instant_stands() -> None:
    """Read again at the same time (the start of the run, then the end of its
    first instant; a growth of a run, then the end of that instant), the
    later value replaces the earlier; a change back leaves no point."""
    state = {"v": 0.0}
    g = Gauges(None, ["v"], lambda _c: (state["v"],))  # type: ignore[arg-type]
    for t, v in [(0.0, 0.0), (0.0, 3.0), (1.0, 5.0), (1.0, 4.0), (2.0, 7.0), (2.0, 4.0), (3.0, 4.0)]:
        state["v"] = v
        g.sample(t)
    assert g.points == [[(0.0, 3.0), (1.0, 4.0)]]


def test_a_span_too_short_for_twenty_windows_has_no_interval() -> None:
    """Warm-up 10^6 s and a span of 10^-9 s: the windows' edges are one float
    (a twentieth of the span is below the clock's resolution there), so the
    time average stands and the batch-means interval is +inf, not a crash."""
    s = summarize("g", [(0.0, 2.0), (1e6, 4.0)], 1e6, 1e6 + 1e-9)
    assert s.mean == pytest.approx(4.0, rel=1e-6) and math.isinf(s.ci) and (s.min, s.max) == (4.0, 4.0)
    r = run("pool kv { cap 5; }\nworkload { arrive poisson(0.0001); }\nsession { hold kv (1) { } }\n"
            "gauge u = used(kv);\nrun { horizon 10; }", warmup=1e6, horizon=1e6 + 1e-9)
    assert math.isinf(r.gauges["u"].ci)


def test_two_pools_that_change_in_one_instant_are_both_read() -> None:
    """At the end of an instant only the gauges of the one pool that changed
    are read again (all that read it, its holders too), and every gauge when
    two did: at t = 1 the session gives A back and takes B, and both move."""
    r = run("""
pool A { cap 10; }
pool B { cap 10; }
stage gate : delay;
workload { arrive batch(1); }
session { hold A (3) { run gate (1); } hold B (4) { run gate (1); } run gate (1); hold A (2) { run gate (1); } end; }
gauge a = used(A);
gauge b = used(B);
gauge h = holders(A);
run { horizon 10; }
""")
    assert r.gauge("a").points == ((0.0, 3.0), (1.0, 0.0), (3.0, 2.0), (4.0, 0.0))
    assert r.gauge("b").points == ((0.0, 0.0), (1.0, 4.0), (2.0, 0.0))
    assert r.gauge("h").points == ((0.0, 1.0), (1.0, 0.0), (3.0, 1.0), (4.0, 0.0))  # (a gauge of A all the same)

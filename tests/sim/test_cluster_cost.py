"""What keeps a cluster's cost per replica flat in N (issue 42, item 5) changes
no figure: the gauges' aggregates read term by term (serq/sim/gauge_terms.py),
settle asking only the engines that may start (``Simulator.stirred``), and the
passing runs' ends kept as the keys of one dictionary (serq/sim/lazy.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import serq
from serq.sim import gauge_terms, gauges, lazy
from serq.sim.results import build_report
from serq.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "programs/cluster/agents.sq"
LLMD = ROOT / "programs/pd/llmd.sq"
MAX_EVENTS = 2_000_000


def _run(path: Path, sets: list[tuple[str, str]], horizon: float, stir_only: bool = True) -> Simulator:
    loaded = serq.load(str(path), sets=dict(sets))
    sim = Simulator(loaded, seed=3, horizon=horizon, warmup=horizon / 10, max_events=MAX_EVENTS)
    if not stir_only:
        sim.stir_only = False  # every engine asked at every settle, as before
    sim.run()
    return sim


@pytest.mark.parametrize("router", ["least_requests", "least_kv", "random"])
def test_gauges_read_term_by_term_change_at_the_same_times_to_the_same_values(
        router: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve replicas (each gauge an aggregate of twelve terms, kept), against
    the gauges read whole at every change (no aggregate is long enough)."""
    sets = [("N", "12"), ("router", router)]
    kept = _run(AGENTS, sets, 40.0)
    monkeypatch.setattr(gauge_terms, "MIN_TERMS", 10**9)
    whole = _run(AGENTS, sets, 40.0)
    assert build_report(kept).to_json() == build_report(whole).to_json()  # (the gauges' log read to its end)
    # (a cluster's gauges read a log of its pools' changes, with the same gauges compiled on stand-ins)
    assert whole.gauges.reader.read.__name__ == "<lambda>" and kept.gauges.reader.read.__name__ == "read_all"
    assert kept.gauges.points == whole.gauges.points
    assert sum(len(p) for p in kept.gauges.points) > 1000  # the gauges did move


@pytest.mark.parametrize("path, sets", [(AGENTS, [("N", "8")]), (LLMD, [])])
def test_settle_asking_only_the_stirred_engines_gives_the_report_of_asking_every_engine(
        path: Path, sets: list[tuple[str, str]]) -> None:
    """A cluster and a P/D program (requests waiting in pools admitted via the engines)."""
    stirred = _run(path, sets, 30.0)
    every = _run(path, sets, 30.0, stir_only=False)
    assert stirred.stir_only
    assert build_report(stirred).to_json() == build_report(every).to_json()


def test_the_ends_dictionary_holds_exactly_the_passing_runs_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whenever a run is planned, the runs passing then own every key, each its
    own ends (none left behind by a run that ended or was cut), but for the
    latest run, whose ends go in only then (most runs end before another is
    planned: they never pay for theirs)."""
    checked = []
    outside = 0
    admit = lazy.LazyRuns.admit

    def checking(self: lazy.LazyRuns, engine: Any, run: Any, now: float) -> Any:
        nonlocal outside
        assert len(self.unindexed) <= 1 and set(self.unindexed) <= set(self.engines)
        outside += len(self.unindexed)
        want = {t: e for e in self.engines if e not in self.unindexed for t in e.run.all_ends()}
        assert self.at == want
        got = admit(self, engine, run, now)
        assert not self.unindexed  # (the others' ends are in before this run's are checked against them)
        checked.append(len(self.at))
        return got
    monkeypatch.setattr(lazy.LazyRuns, "admit", checking)
    _run(AGENTS, [("N", "8")], 30.0)
    assert len(checked) > 200 and max(checked) > 400  # (many runs, many ends at once)
    assert outside > 50


def test_ascending_visits_a_place_marked_later_in_the_pass_and_leaves_an_earlier_one_to_the_next() -> None:
    from serq.sim.order import ascending
    class Owner:
        marks = 0

    owner = Owner()
    marked = {5, 2, 8}
    seen = []
    for i in ascending(marked, owner, "marks"):
        seen.append(i)
        if i == 5:  # handling 5 marks 7 (later: this pass) and 1 (earlier: not now)
            marked.update({7, 1})
            owner.marks += 1
    assert seen == [2, 5, 7, 8]


@pytest.mark.parametrize("fold, step", [("f_maxn", "_max_after"), ("f_minn", "_min_after")])
def test_an_aggregate_followed_one_term_at_a_time_is_the_fold_to_the_bit(fold: str, step: str) -> None:
    """Random single-term changes among values with ties, zeros of both signs,
    a NaN and an int: the aggregate kept by the step (read whole where it says
    None) is the fold over the terms, bit for bit, after every change."""
    import random
    import struct

    from serq import expr
    fold_fn, step_fn = getattr(expr, fold), getattr(gauge_terms, step)
    pool = [0.0, -0.0, 1.0, 2.0, 2.0, 3.5, -1.0, math.nan, 7.0, 3]
    rng = random.Random(5)
    wholes = 0
    for _ in range(200):
        terms = [rng.choice(pool) for _ in range(rng.randint(1, 9))]
        cur = fold_fn(*terms)
        for _ in range(30):
            r = rng.randrange(len(terms))
            old, terms[r] = terms[r], rng.choice(pool)
            got = step_fn(cur, old, terms[r])
            if got is None:
                wholes += 1
                got = fold_fn(*terms)
            want = fold_fn(*terms)
            assert type(got) is type(want)
            assert struct.pack("<d", got) == struct.pack("<d", want) or (got != got and want != want)
            cur = got
    assert 200 < wholes < 4000  # (of 6 000 changes: most are followed without reading every term)


@pytest.mark.parametrize("logged", [True, False])
def test_a_sum_follows_one_terms_change_only_while_its_terms_are_whole(
        logged: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sums over twelve replicas, kept term by term: of whole numbers (followed by one term's
    change), of halves (whole or not as the holders move: read whole while one is not) and of
    thirds (never whole), against the sums read whole at every change, change point for change
    point."""
    monkeypatch.setattr(gauges, "LOGGED", logged)
    path = tmp_path / "sums.sq"
    path.write_text(AGENTS.read_text() + "gauge kv_total = sum r in N (used(kv[r]));\n"
                    "gauge half_held = sum r in N (holders(reqs[r]) / 2 + queued(reqs[r]));\n"
                    "gauge kv_thirds = sum r in N (used(kv[r]) / 3);\n")
    sets = [("N", "12"), ("Lambda", "0.6")]
    kept = _run(path, sets, 30.0)
    monkeypatch.setattr(gauge_terms, "MIN_TERMS", 10**9)
    whole = _run(path, sets, 30.0)
    assert build_report(kept).to_json() == build_report(whole).to_json()
    assert kept.gauges.points == whole.gauges.points
    names = kept.gauges.names
    half = kept.gauges.points[names.index("half_held")]
    assert len(half) > 200 and any(not v.is_integer() for _t, v in half) and any(v.is_integer() for _t, v in half)
    assert len(kept.gauges.points[names.index("kv_total")]) > 1000

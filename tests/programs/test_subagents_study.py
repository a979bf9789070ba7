"""The subagent study's structural facts (docs/subagents.md, "What it shows";
benchmarks/study_subagents.py): the study's core on short horizons, asserting
what must hold whatever the numbers drift to."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import serq

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("study_subagents", ROOT / "benchmarks" / "study_subagents.py")
study = importlib.util.module_from_spec(_spec)
sys.modules["study_subagents"] = study
_spec.loader.exec_module(study)


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    d = tmp_path_factory.mktemp("study")
    return study.variant(study.SPAWN, "spawn", d), study.variant(study.APPROX, "approx", d)


def test_expected_max_is_the_mean_of_the_slowest_of_k() -> None:
    assert study.expected_max([1.0, 2.0, 3.0], k=1) == pytest.approx(2.0)
    # max of 2 draws from {1, 2, 3}: P(max = 1, 2, 3) = 1/9, 3/9, 5/9
    assert study.expected_max([3.0, 1.0, 2.0], k=2) == pytest.approx((1 + 6 + 15) / 9)
    assert study.expected_max([5.0] * 7, k=3) == pytest.approx(5.0)


def test_the_added_observes_change_no_other_figure(programs) -> None:
    spawn, approx = programs
    for original, copy, extra in ((study.SPAWN, spawn, "ctx"), (study.APPROX, approx, "task")):
        a = serq.run(serq.load(original), horizon=300, warmup=30).to_dict()
        b = serq.run(serq.load(copy), horizon=300, warmup=30).to_dict()
        assert extra in b["observes"] and extra not in a["observes"]
        b["observes"].pop(extra)
        assert a == b


def test_a_join_waits_for_the_slowest_of_its_k_children(programs) -> None:
    spawn, _ = programs
    r = serq.run(serq.load(spawn), seed=2, horizon=500, warmup=0)
    groups: dict[int, list[float]] = {}
    for s in r.samples["subagent"]:
        groups.setdefault((s.session - study.CHILD_SERIALS) // study.K, []).append(s.value)
    maxima = sorted(max(g) for g in groups.values() if len(g) == study.K)
    joins = sorted(s.value for s in r.samples["join_wait"])
    assert len(joins) > 20 and joins == pytest.approx(maxima, rel=1e-9, abs=1e-9)
    # so the mean join wait exceeds the mean single child's time, and the task time the join wait
    assert r.observe("join_wait").mean > 1.3 * r.observe("subagent").mean
    assert r.tasks.time.mean > r.observe("join_wait").mean


def test_in_the_approximation_W_does_not_feed_back(programs) -> None:
    # the children arrive in their own stream: the arrivals and the children's number do not
    # depend on how long a parent waits, which is what cuts the feedback loop
    _, approx = programs
    a = serq.run(serq.load(approx, sets={"W": "14.7"}), seed=3, horizon=400, warmup=40)
    b = serq.run(serq.load(approx, sets={"W": "60"}), seed=3, horizon=400, warmup=40)
    assert a.arrivals == b.arrivals
    assert b.observe("task").mean > a.observe("task").mean


def test_task_time_and_ttft_grow_with_the_parents_rate(programs) -> None:
    # the cliff on the same seeds: well below the knee (0.02) and past it (0.3)
    spawn, _ = programs
    for seed in (1, 2):
        low = study.one(("spawn", str(spawn), (("Lambda", "0.02"),), seed, 800.0, 80.0))
        high = study.one(("spawn", str(spawn), (("Lambda", "0.3"),), seed, 800.0, 80.0))
        assert high["task_mean"] > 1.2 * low["task_mean"]
        assert high["ttft_mean"] > 5 * low["ttft_mean"]
        assert high["util"] > 0.9 > low["util"]


def test_the_control_gives_the_children_the_approximations_context(tmp_path) -> None:
    # part 4 of the study: the spawn's `set K = K` becomes one ~uniform(2000, 6000) draw per spawn
    path = study.variant(study.SPAWN, "spawn4k", tmp_path)
    assert "spawn (k) into kids { set K = ~uniform(2000, 6000); set sub = 1; }" in path.read_text()
    r = study.one(("spawn4k", str(path), (), 1, 300.0, 30.0))
    assert r["join_count"] > 0 and r["join_mean"] > r["sub_mean"]

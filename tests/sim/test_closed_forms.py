"""Closed forms the simulator must meet within its own confidence intervals:
M/M/1 and M/G/1 (Pollaczek–Khinchine), M/G/1 processor sharing (insensitive
to the service law), M/M/1//N (mean-value analysis), Little's law."""

from __future__ import annotations

from pathlib import Path

import pytest

import serq

ROOT = Path(__file__).resolve().parents[2]
SEEDS = (1, 2, 3)


def inside(report: serq.Report, name: str, expected: float) -> bool:
    o = report.observe(name)
    return abs(o.mean - expected) <= o.ci


def test_mm1_response_wait_and_utilisation_match_the_closed_form() -> None:
    # λ = 0.8, μ = 1: response 1/(μ−λ) = 5, wait ρ/(μ−λ) = 4, utilisation ρ = 0.8
    program = serq.load(ROOT / "programs/single-turn/mg1.sq")
    hits = {"response": 0, "wait": 0}
    for seed in SEEDS:
        report = serq.run(program, seed=seed, horizon=60_000, warmup=2_000)
        hits["response"] += inside(report, "response", 5.0)
        hits["wait"] += inside(report, "wait", 4.0)
        assert report.stage("svc").utilization == pytest.approx(0.8, abs=0.015)
        assert report.observe("service").mean == pytest.approx(1.0, abs=0.03)
    assert hits["response"] >= 2 and hits["wait"] >= 2, hits


@pytest.mark.parametrize("law, wait", [(0, 2.0), (2, 2.5)])
def test_mg1_wait_follows_pollaczek_khinchine(law: int, wait: float) -> None:
    # W = ρ·E[S]·(1 + cv²)/(2(1 − ρ)): deterministic cv² 0 → 2.0, Erlang-4 cv² 1/4 → 2.5
    program = serq.load(ROOT / "programs/single-turn/mg1.sq", sets={"law": str(law)})
    hits = sum(inside(serq.run(program, seed=s, horizon=40_000, warmup=2_000), "wait", wait) for s in SEEDS)
    assert hits >= 2


@pytest.mark.parametrize("law", [1, 3])
def test_processor_sharing_response_is_insensitive_to_the_service_law(law: int) -> None:
    # M/G/1-PS, λ = 0.7, μ = 1: response 1/(μ − λ) = 3.333 for exponential (law 1)
    # and for H2 service with cv² = 9 (law 3) alike; mean number ρ/(1 − ρ) = 2.333
    program = serq.load(ROOT / "programs/single-turn/ps.sq", sets={"law": str(law)})
    hits = 0
    for seed in SEEDS:
        report = serq.run(program, seed=seed, horizon=40_000, warmup=2_000)
        hits += inside(report, "response", 1 / 0.3)
        assert report.stage("svc").mean_number == pytest.approx(0.7 / 0.3, rel=0.15)
    assert hits >= 2


def test_the_closed_system_matches_mean_value_analysis() -> None:
    # M/M/1//N with N = 8, μ = 1, Z = 4: MVA gives response ≈ 4.251 and
    # throughput ≈ 0.9696 (Q_n = X_n·R_n, R_n = (1 + Q_{n−1})/μ, X_n = n/(R_n + Z))
    def mva(n: int, mu: float, z: float) -> tuple[float, float]:
        q = 0.0
        for k in range(1, n + 1):
            r = (1 + q) / mu
            x = k / (r + z)
            q = x * r
        return r, x

    r, x = mva(8, 1.0, 4.0)
    assert r == pytest.approx(4.251, abs=1e-3) and x == pytest.approx(0.9696, abs=1e-4)
    program = serq.load(ROOT / "programs/multi-turn/closed.sq")
    hits = 0
    for seed in SEEDS:
        report = serq.run(program, seed=seed, horizon=30_000, warmup=1_000)
        hits += inside(report, "response", r)
        assert report.stage("svc").throughput == pytest.approx(x, rel=0.02)
    assert hits >= 2


def test_littles_law_holds_at_a_delay_stage() -> None:
    # L = λ·W at the tool stage: mean jobs present = completions per second × mean time
    report = serq.run(serq.load(ROOT / "programs/multi-turn/vllm.sq"), seed=2, horizon=600, warmup=60)
    tool = report.stage("tool")
    assert tool.mean_number == pytest.approx(tool.throughput * tool.mean_service, rel=0.03)
    assert tool.mean_wait == 0.0


def test_two_fifo_servers_match_erlang_c() -> None:
    # M/M/2 with λ = 1.6, μ = 1: a = 1.6, ρ = 0.8; Erlang C = (a²/2)/(1 − ρ) over
    # (1 + a + (a²/2)/(1 − ρ)) = 6.4 / 9 = 0.711; mean wait C/(2μ − λ) = 1.778
    program = serq.load("""
stage svc : fifo(2);
workload { arrive poisson(1.6); init { set t0 = now; set s = ~exp(1); } }
session { run svc (s); observe wait = now - t0 - s; }
run { horizon 30000; warmup 1000; }
""")
    hits = 0
    for seed in SEEDS:
        report = serq.run(program, seed=seed)
        hits += inside(report, "wait", 6.4 / 9 / 0.4)
        # Little: jobs present = λ · (wait + service) = 1.6 · 2.778 = 4.444
        assert report.stage("svc").mean_number == pytest.approx(1.6 * (6.4 / 9 / 0.4 + 1), rel=0.1)
    assert hits >= 2

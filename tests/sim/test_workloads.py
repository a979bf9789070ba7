"""The four vLLM workload programs on one engine reproduce the seeds' figures
statistically (the original's random numbers are not expected, its spread
is), and the subagent wait W is the fixed point the program's own output gives."""

from __future__ import annotations

import csv
import functools
import importlib.util
import statistics
from pathlib import Path

import pytest

import serq

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("workloads_table", ROOT / "benchmarks/workloads_table.py")
TABLE = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TABLE)


def test_the_agent_program_lands_near_the_seed_report_at_horizon_300() -> None:
    # seed report (one run of the original): hit 0.8858, prefill 685.2 tokens, ttft 14.28 ms,
    # response 59.94 ms, mean live 7.387, no preemption; the mean of seeds 2-4 here (seed 1 is
    # the busiest of ten, docs/workloads.md).  Tolerances from the measured spread: the same
    # statistic, the mean of three consecutive seeds, for seeds 2-4, 5-7 and 8-10 of this
    # build strays from the report's figure by at most hit 0.010 (absolute), prefill 4.4 %,
    # ttft 3.7 %, response 2.1 %, mean live 8.4 %; each tolerance is that, rounded up to the
    # next percent.  Seeds 2-4 themselves: 0.0056, 2.3 %, 2.7 %, 0.3 %, 7.3 %.
    program = serq.load(ROOT / "programs/multi-turn/vllm.sq")
    reports = [serq.run(program, seed=s, horizon=300, warmup=30) for s in (2, 3, 4)]

    def avg(f) -> float:
        return statistics.mean(f(r) for r in reports)

    assert avg(lambda r: r.observe("hit").mean) == pytest.approx(0.8858, abs=0.02)
    assert avg(lambda r: r.observe("prefill_tokens").mean) == pytest.approx(685.2, rel=0.05)
    assert avg(lambda r: r.observe("ttft").mean) == pytest.approx(0.01428, rel=0.04)
    assert avg(lambda r: r.observe("response").mean) == pytest.approx(0.05994, rel=0.03)
    assert avg(lambda r: r.mean_live) == pytest.approx(7.387, rel=0.09)
    for r in reports:
        assert r.pool("kv").preemptions == 0 and r.pool("kv").rejected == 0
        assert r.pool("kv").admissions == r.pool("reqs").admissions  # every request holds both
        assert r.pool("kv").mean_wait != r.pool("kv").mean_wait  # NaN: a hold waits at its first pool
        # a prefill and a decode each (give or take the turns cut by warm-up and horizon)
        assert r.stage("engine").completed == pytest.approx(2 * r.observe("response").count, abs=4)


# seed 1, horizon 2000, warm-up 200 (1 800 s measured): the seed's table
SEED_TABLE = {
    # program, sets: requests/s, hit rate, prefill tokens, TTFT ms, response ms, engine busy
    ("programs/single-turn/vllm_single_turn.sq", ""): (2.98, 0.00, 2004, 43, 96, 0.23),
    ("programs/multi-turn/vllm_chat.sq", ""): (1.61, 0.80, 221, 4, 67, 0.10),
    ("programs/multi-turn/vllm.sq", ""): (3.15, 0.89, 767, 17, 64, 0.17),
    ("programs/subagent/vllm_subagents.sq", "q=0"): (1.00, 0.90, 686, 14, 58, 0.06),
    ("programs/subagent/vllm_subagents.sq", ""): (3.70, 0.69, 2002, 53, 113, 0.28),
}
# How far seed 1 may stray from the seed's figure, per cell: the measured spread of this
# build, i.e. the largest relative deviation from the seed's figure among seeds 1-8
# (`python benchmarks/workloads_table.py --seeds 1 2 3 4 5 6 7 8`), rounded up to the next
# percent (a figure below 0.05, the single-turn hit rate 0, within 0.01 absolute).  The
# seed's figures are one run of the original, so ours can be any seed's: a change that gives
# seed 1 another seed's traffic (new random streams) still passes, one that moves a figure
# past what eight seeds reach fails.  Seed 1's own deviations, for comparison, in the
# comments (the largest, 16.3 %, is the agent's TTFT).  Re-measure after a change that
# legitimately moves these figures.
TOLERANCE = {
    # requests/s, hit rate, prefill tokens, TTFT, response, engine busy
    ("programs/single-turn/vllm_single_turn.sq", ""): (0.02, 0.01, 0.01, 0.02, 0.03, 0.03),
    # seed 1: 1.5 %, 0, 0.2 %, 1.1 %, 0.1 %, 0.3 %
    ("programs/multi-turn/vllm_chat.sq", ""): (0.12, 0.02, 0.05, 0.16, 0.04, 0.10),
    # seed 1: 7.8 %, 1.2 %, 3.1 %, 8.5 %, 3.3 %, 9.2 %
    ("programs/multi-turn/vllm.sq", ""): (0.13, 0.02, 0.12, 0.25, 0.13, 0.17),
    # seed 1: 6.3 %, 1.1 %, 6.4 %, 16.3 %, 5.3 %, 2.8 %
    ("programs/subagent/vllm_subagents.sq", "q=0"): (0.23, 0.03, 0.09, 0.10, 0.05, 0.26),
    # seed 1: 13.4 %, 0.5 %, 2.3 %, 2.9 %, 2.1 %, 6.8 %
    ("programs/subagent/vllm_subagents.sq", ""): (0.07, 0.04, 0.14, 0.25, 0.18, 0.11),
    # seed 1: 1.4 %, 0.4 %, 5.7 %, 7.8 %, 5.9 %, 1.0 %
}


@functools.lru_cache(maxsize=None)
def seed_run(path: str, sets: str) -> serq.Report:
    """A row's program at seed 1 to its own horizon, run once a test process: the subagent
    program's run is also the one the fixed-point test reads (it ran it again, as `serq run`)."""
    overrides = dict([sets.split("=")]) if sets else {}
    return serq.run(serq.load(ROOT / path, sets=overrides), seed=1)


@pytest.mark.parametrize("path, sets", sorted(SEED_TABLE))
def test_each_row_of_the_seeds_workloads_table_is_reproduced(path: str, sets: str) -> None:
    report = seed_run(path, sets)
    assert (report.horizon, report.warmup) == (2000, 200)
    got = TABLE.row(report)  # the columns docs/workloads.md prints
    want = SEED_TABLE[(path, sets)]
    for g, w, tol in zip(got, want, TOLERANCE[(path, sets)]):
        if w < 0.05:
            assert g == pytest.approx(w, abs=tol)
        else:
            assert g == pytest.approx(w, rel=tol), (got, want)


def test_the_subagent_wait_is_the_fixed_point_of_the_programs_output(tmp_path: Path) -> None:
    # the mean over parents of the slowest of k = 3 subagent lifetimes, read from the dump of
    # the program's own run (seed 1, horizon 2000: `serq run … --dump` writes it with Report.dump,
    # the same bytes), is W = 14.7 s when the program waits W
    seed_run("programs/subagent/vllm_subagents.sq", "").dump(tmp_path / "out")
    with open(tmp_path / "out/subagent.csv") as fh:
        lifetimes = [float(row["value"]) for row in csv.DictReader(fh)]
    k = 3
    slowest = [max(lifetimes[i:i + k]) for i in range(0, len(lifetimes) - k + 1, k)]
    assert len(slowest) > 300
    assert statistics.mean(slowest) == pytest.approx(14.7, rel=0.08)

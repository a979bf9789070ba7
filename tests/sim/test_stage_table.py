"""The stage table's columns (docs/report.md §9: `number`, `util`, `done`, `thru`,
`wait`, `service`) against values worked out by hand: exact ones on small
deterministic timelines, and the closed forms of M/M/1 (fifo), M/M/∞ (delay)
and M/M/1-PS (ps) within a stated multiple of the standard error.

Issue 26: a FIFO stage whose `service` counted the queueing wait was caught
only by golden snapshots and outputs pasted into the docs.

Statistical tolerances: each run's `observe` rows carry a batch-means 95 %
interval whose half-width is 2.093 standard errors (docs/report.md §5), so a
run's standard error is ``ci / 2.093``; the mean over R independent seeds has
the standard error ``sqrt(Σ se_i²) / R``; the tolerance is 3 of those (a
correct simulator falls outside with probability about 0.3 %, and the runs
are deterministic, so a pass is a pass for good)."""

from __future__ import annotations

import math

import pytest

import serq

T_19 = 2.093  # the batch-means interval's Student-t quantile (19 degrees of freedom)
K = 3.0  # tolerance, in standard errors


# -- exact: deterministic timelines ---------------------------------------------------------

# Sessions arrive every 2 s from t = 2 (`renewal(~det(2))`), and alternate works 3 and 1
# (serial 0, 2, … bring 3; serial 1, 3, … bring 1).  Horizon 10.5:
#
#   serial  arrives  fifo: starts  ends  wait   delay: ends
#   0       2        2             5     0      5
#   1       4        5             6     1      5
#   2       6        6             9     0      9
#   3       8        9             10    1      9
#   4       10       10            (13: cut by the horizon)   (13)
#
# fifo: jobs present 1 on [2,4], 2 on [4,5], 1 on [5,8], 2 on [8,9], 1 on [9,10.5]:
#   10.5 job-seconds -> number 1.0; busy on [2,10.5] -> util 8.5/10.5; done 4 (the fifth is
#   still in service); wait (0+1+0+1)/4 = 0.5; service (3+1+3+1)/4 = 2.
# delay: every job in service at once: 3 + 1 + 3 + 1 + 0.5 = 8.5 job-seconds -> number
#   8.5/10.5; busy on [2,5], [6,9], [10,10.5] -> util 6.5/10.5; wait 0, service 2.
DET = """
stage svc : KIND;
workload { arrive renewal(~det(2)); }
session { run svc (~det(floor(serial / 2) * 2 == serial ? 3 : 1)); }
run { horizon 10.5; }
"""


def _stage(kind: str, **kw: float) -> serq.report.StageSummary:
    return serq.run(serq.load(DET.replace("KIND", kind)), **kw).stage("svc")


def test_a_deterministic_fifo_stage_table_is_exact() -> None:
    st = _stage("fifo")
    assert st.completed == 4
    assert st.mean_wait == 0.5
    assert st.mean_service == 2.0
    assert st.mean_number == pytest.approx(1.0, rel=1e-12)
    assert st.utilization == pytest.approx(8.5 / 10.5, rel=1e-12)
    assert st.throughput == pytest.approx(4 / 10.5, rel=1e-12)
    assert st.iterations == 0


def test_a_deterministic_fifo_stage_table_after_a_warmup_is_exact() -> None:
    # warm-up 4.5: time averages over [4.5, 10.5] (6 s): jobs present 2 on [4.5,5], 1 on
    # [5,8], 2 on [8,9], 1 on [9,10.5] -> 1 + 3 + 2 + 1.5 = 7.5 -> 1.25; busy throughout.
    # Jobs completed after 4.5: all four (ends 5, 6, 9, 10), their waits and services whole
    # (serial 0 started before the warm-up: a job counts by its completion).
    st = _stage("fifo", warmup=4.5)
    assert st.completed == 4
    assert (st.mean_wait, st.mean_service) == (0.5, 2.0)
    assert st.mean_number == pytest.approx(7.5 / 6, rel=1e-12)
    assert st.utilization == pytest.approx(1.0, rel=1e-12)
    assert st.throughput == pytest.approx(4 / 6, rel=1e-12)


def test_a_deterministic_delay_stage_table_is_exact() -> None:
    st = _stage("delay")
    assert st.completed == 4
    assert (st.mean_wait, st.mean_service) == (0.0, 2.0)
    assert st.mean_number == pytest.approx(8.5 / 10.5, rel=1e-12)
    assert st.utilization == pytest.approx(6.5 / 10.5, rel=1e-12)


def test_a_two_server_fifo_stage_table_is_exact() -> None:
    # three jobs of 2 s at t = 0 on fifo(2): two start at once, the third waits 2 s.
    # number 3 on [0,2], 1 on [2,4] -> 8/10; util ("at least one job present") 4/10.
    prog = serq.load("stage svc : fifo(2);\nworkload { arrive batch(3); }\n"
                     "session { run svc (~det(2)); }\nrun { horizon 10; }")
    st = serq.run(prog).stage("svc")
    assert st.completed == 3
    assert st.mean_wait == pytest.approx(2 / 3, rel=1e-12)
    assert st.mean_service == 2.0
    assert st.mean_number == pytest.approx(0.8, rel=1e-12)
    assert st.utilization == pytest.approx(0.4, rel=1e-12)


def test_a_deterministic_ps_stage_table_is_exact() -> None:
    # two jobs at t = 0 of works 1 and 3 sharing rate 1: each runs at 1/2 until the first
    # ends at 2 (1 unit done each), the second then has 2 left at rate 1 and ends at 4.
    # service (time resident) (2 + 4)/2 = 3, wait 0; number 2 on [0,2], 1 on [2,4]: 6/5.
    prog = serq.load("stage svc : ps(1);\nworkload { arrive batch(2); }\n"
                     "session { run svc (~det(1 + 2 * serial)); }\nrun { horizon 5; }")
    st = serq.run(prog).stage("svc")
    assert st.completed == 2
    assert (st.mean_wait, st.mean_service) == (0.0, 3.0)
    assert st.mean_number == pytest.approx(6 / 5, rel=1e-12)
    assert st.utilization == pytest.approx(4 / 5, rel=1e-12)


# -- closed forms ---------------------------------------------------------------------------

# Poisson arrivals at `lam`, exponential work of mean `mean_s` (mu = 1/mean_s), the stage
# under test.  `wait` and `service` are observed per job too: a job starts at its session's
# arrival, so its stage wait is now - t0 - s and (rate 1) its service s.
MM = """
let lam = 0.5;
let mean_s = 1;
stage svc : KIND;
workload { arrive poisson(lam); init { set t0 = now; set s = ~exp(mean_s); } }
session {
  run svc (s);
  observe response = now - t0;
  observe wait = now - t0 - s;
  observe service = s;
}
"""


def _runs(kind: str, lam: float, mean_s: float, seeds: tuple[int, ...], horizon: float) -> list[serq.Report]:
    prog = serq.load(MM.replace("KIND", kind), sets={"lam": repr(lam), "mean_s": repr(mean_s)})
    return [serq.run(prog, seed=s, horizon=horizon, warmup=1000) for s in seeds]


def _pooled(reports: list[serq.Report], name: str) -> tuple[float, float]:
    """The mean of an observe row over the runs, and its standard error from their
    batch-means intervals."""
    rows = [r.observe(name) for r in reports]
    mean = math.fsum(o.mean for o in rows) / len(rows)
    se = math.sqrt(math.fsum((o.ci / T_19) ** 2 for o in rows)) / len(rows)
    return mean, se


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _same_jobs_as_the_observations(r: serq.Report, st: serq.report.StageSummary) -> None:
    """The stage table counts the jobs the observe rows count (both after warm-up), and
    its `wait` and `service` are their means: only float rounding apart."""
    assert st.completed == r.observe("service").count
    assert st.mean_wait == pytest.approx(r.observe("wait").mean, rel=1e-9, abs=1e-12)
    assert st.mean_service == pytest.approx(r.observe("service").mean, rel=1e-9)
    assert st.throughput == pytest.approx(st.completed / (r.end - r.warmup), rel=1e-12)
    # Little's law in the window: number = thru * (wait + service), up to the jobs that
    # straddle the warm-up and the end (a few job-seconds in 10^5: 1e-3 leaves 100 times that)
    assert st.mean_number == pytest.approx(st.throughput * (st.mean_wait + st.mean_service), rel=1e-3)


def test_a_fifo_stage_is_an_mm1_queue() -> None:
    # M/M/1, lam = 0.5, mu = 1, rho = 0.5: Wq = rho/(mu - lam) = 1, service 1/mu = 1,
    # W = 1/(mu - lam) = 2, L = rho/(1 - rho) = 1 = lam * W, util = rho
    lam, mu = 0.5, 1.0
    rho = lam / mu
    horizon = 100_000
    reports = _runs("fifo", lam, 1 / mu, (1, 2, 3, 4), horizon)
    stages = [r.stage("svc") for r in reports]
    for r, st in zip(reports, stages):
        _same_jobs_as_the_observations(r, st)
    wait, se_wait = _pooled(reports, "wait")
    service, se_service = _pooled(reports, "service")
    response, se_response = _pooled(reports, "response")
    assert abs(wait - rho / (mu - lam)) <= K * se_wait, (wait, se_wait)
    assert abs(response - 1 / (mu - lam)) <= K * se_response, (response, se_response)
    assert abs(service - 1 / mu) <= K * se_service, (service, se_service)
    assert _mean([st.mean_wait for st in stages]) == pytest.approx(wait, rel=1e-9)
    assert _mean([st.mean_service for st in stages]) == pytest.approx(service, rel=1e-9)
    # number and util by Little's law: L = lam * W and rho = lam * E[S]; their error is lam
    # times the error of W (or E[S]) plus W (or E[S]) times the arrival rate's, whose
    # standard error is sqrt(lam / T) per run (a Poisson count over T), / sqrt(R) pooled
    n = len(reports)
    se_lam = math.sqrt(lam / (horizon - 1000)) / math.sqrt(n)
    number = _mean([st.mean_number for st in stages])
    util = _mean([st.utilization for st in stages])
    thru = _mean([st.throughput for st in stages])
    assert abs(thru - lam) <= K * se_lam, (thru, se_lam)
    assert abs(number - rho / (1 - rho)) <= K * math.hypot(lam * se_response, se_lam / (mu - lam)), number
    assert abs(util - rho) <= K * math.hypot(lam * se_service, se_lam / mu), util


def test_a_delay_stage_is_an_infinite_server() -> None:
    # M/M/inf, lam = 2, E[S] = 1.5: no wait, service E[S], number lam * E[S] = 3, and the
    # stage busy (at least one job present) with probability 1 - exp(-3) = 0.950
    lam, mean_s = 2.0, 1.5
    horizon = 25_000
    reports = _runs("delay", lam, mean_s, (1, 2), horizon)
    stages = [r.stage("svc") for r in reports]
    for r, st in zip(reports, stages):
        assert st.mean_wait == 0.0
        _same_jobs_as_the_observations(r, st)
    service, se_service = _pooled(reports, "service")
    assert abs(service - mean_s) <= K * se_service, (service, se_service)
    se_lam = math.sqrt(lam / (horizon - 1000)) / math.sqrt(len(reports))
    number = _mean([st.mean_number for st in stages])
    assert abs(number - lam * mean_s) <= K * math.hypot(lam * se_service, mean_s * se_lam), number
    # util: P(N > 0) = 1 - exp(-lam E[S]) (N is Poisson); its time average has no interval
    # here: 1 % (the two runs are 0.9516 and 0.9506) is four times their distance from it
    util = _mean([st.utilization for st in stages])
    assert util == pytest.approx(1 - math.exp(-lam * mean_s), rel=0.01)


def test_a_ps_stage_is_an_mm1_processor_sharing_queue() -> None:
    # M/M/1-PS, lam = 0.5, mu = 1: no wait; mean time resident 1/(mu - lam) = 2 (the
    # stage's `service` is the response: docs/report.md §9); number rho/(1 - rho) = 1
    lam, mu = 0.5, 1.0
    rho = lam / mu
    horizon = 100_000
    reports = _runs("ps(1)", lam, 1 / mu, (1, 2), horizon)
    stages = [r.stage("svc") for r in reports]
    for r, st in zip(reports, stages):
        assert st.mean_wait == 0.0
        assert st.completed == r.observe("response").count
        assert st.mean_service == pytest.approx(r.observe("response").mean, rel=1e-9)
        assert st.mean_number == pytest.approx(st.throughput * st.mean_service, rel=1e-3)
    response, se_response = _pooled(reports, "response")
    assert abs(response - 1 / (mu - lam)) <= K * se_response, (response, se_response)
    se_lam = math.sqrt(lam / (horizon - 1000)) / math.sqrt(len(reports))
    number = _mean([st.mean_number for st in stages])
    assert abs(number - rho / (1 - rho)) <= K * math.hypot(lam * se_response, se_lam / (mu - lam)), number

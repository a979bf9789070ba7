"""Gauges read from a log of the pools' changes (serq/sim/gauges.py): with
passing runs (serq/sim/lazy.py) the change points are those of the gauges read
as the run goes, however often the log is read, and the runs' growths are no
longer replayed before every instant for them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

import serq
from serq.sim import gauges, lazy
from serq.sim.simulator import Simulator
from tests.sim.test_lazy_runs import GRID, SYSTEM, same

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "programs/cluster/agents.sq"
LLMD = ROOT / "programs/pd/llmd.sq"


def points(program: Any, horizon: float) -> tuple[str, dict[str, tuple]]:
    r = serq.run(program, seed=1, horizon=horizon, warmup=horizon / 10)
    return r.to_json(), {name: r.gauge(name).points for name in r.gauges}


@functools.lru_cache(maxsize=None)
def live_points(path: Path, sets: tuple[tuple[str, str], ...], horizon: float) -> tuple[str, dict[str, tuple]]:
    """`points` of the run without the log (gauges.LOGGED false, as the caller has set it), made once
    a test process for the three `every` below: without the log, LOG_READ and LOG_ENGINES are not
    read (serq/sim/simulator.py tests LOGGED first), so the run is the same for each."""
    assert not gauges.LOGGED
    return points(serq.load(path, sets=dict(sets)), horizon)


# (the agents' horizons: 3 800 and 5 200 change points, the log read once before its end at LOG_READ)
@pytest.mark.parametrize("path, sets, horizon", [
    (AGENTS, {"N": "8"}, 40.0),
    (AGENTS, {"N": "8", "router": "affinity", "Lambda": "0.6"}, 25.0),
    (LLMD, {}, 60.0),
])
@pytest.mark.parametrize("every", [5, 300, gauges.LOG_READ])
def test_the_log_gives_the_change_points_read_as_the_run_goes(path: Path, sets: dict[str, str], horizon: float,
                                                              every: int, monkeypatch: pytest.MonkeyPatch) -> None:
    program = serq.load(path, sets=sets)
    monkeypatch.setattr(gauges, "LOG_ENGINES", 2)  # (llmd.sq has four engines)
    monkeypatch.setattr(gauges, "LOG_READ", every)  # read the log often, or rarely
    logged = points(program, horizon)
    monkeypatch.setattr(gauges, "LOGGED", False)
    live = live_points(path, tuple(sets.items()), horizon)
    assert logged == live
    assert sum(len(p) for p in logged[1].values()) > 2000  # (the gauges do move)


def simulator(path: Path, sets: dict[str, str], horizon: float) -> Simulator:
    program = serq.load(path, sets=sets)
    sim = Simulator(program, seed=1, horizon=horizon, warmup=horizon / 10)
    sim.run()
    return sim


def test_a_cluster_logs_and_replays_its_growths_only_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    caught: list[float] = []
    catch_up = lazy.LazyRuns.catch_up

    def counted(self: Any, t: float) -> None:
        if self.soonest < t:
            caught.append(t)
        catch_up(self, t)
    monkeypatch.setattr(lazy.LazyRuns, "catch_up", counted)
    sim = simulator(AGENTS, {"N": "8"}, 40.0)
    assert sim.gauges.log and sim.gauges.read_to > 0.0  # (read in part as the run went)
    assert not sim.lazy.merged and sim.lazy.admitted > 500
    logged = len(caught)
    caught.clear()
    monkeypatch.setattr(gauges, "LOGGED", False)
    sim = simulator(AGENTS, {"N": "8"}, 40.0)
    assert sim.gauges.log is None and sim.lazy.merged
    assert len(caught) > 20 * max(logged, 1)  # before every instant, as the gauges read them then


def test_a_few_engines_read_their_gauges_as_the_run_goes() -> None:
    # (four engines replay their runs' growths before each instant for less than the log costs)
    assert gauges.LOG_ENGINES == 8
    sim = simulator(AGENTS, {"N": "7"}, 5.0)
    assert sim.lazy is not None and sim.gauges.log is None and sim.lazy.merged
    sim = simulator(AGENTS, {"N": "8"}, 5.0)
    assert sim.gauges.log is not None and not sim.lazy.merged


def test_a_gauge_that_reads_a_stage_is_read_as_the_run_goes(tmp_path: Path) -> None:
    path = tmp_path / "agents.sq"
    path.write_text(AGENTS.read_text() + "gauge q0 = queue(engine[0]);\n")
    sim = simulator(path, {"N": "8"}, 10.0)
    assert sim.lazy is not None and sim.gauges.log is None and sim.lazy.merged


def test_a_log_read_past_an_entry_it_has_not_got_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # the log is read only up to the earliest growth still to be replayed: reading it up to now
    # instead would put a later replayed growth before readings already made
    monkeypatch.setattr(gauges, "LOG_READ", 5)
    monkeypatch.setattr(gauges.Gauges, "_readable", lambda self, now: now)
    with pytest.raises(AssertionError, match="gauge log: an entry at"):
        simulator(AGENTS, {"N": "8"}, 40.0)


def test_the_growths_queued_to_replay_stay_few_without_a_catch_up_at_every_instant() -> None:
    # each passing run has one next growth queued; the stale entries of runs replayed, cut or
    # ended are dropped (they hold the runs: a 64-replica run kept 300 MB of them)
    sim = simulator(AGENTS, {"N": "16"}, 60.0)
    heap = sim.lazy.growths
    assert sim.lazy.admitted > 1500
    assert len(heap) <= 64 + 4 * len(sim.lazy.engines)
    assert len({id(entry[3]) for entry in heap}) == len(heap)


@pytest.mark.parametrize("path, sets, horizon", [
    *[(AGENTS, {"N": 3, "router": router, "Lambda": 0.6}, 30.0) for router in range(6)],
    (AGENTS, {"N": 4, "router": 3, "Lambda": 0.6, "blocks": 1500}, 60.0),  # tight KV: evictions, preemptions
                                                                           # (from 55 s on, runs that may evict
                                                                           # all of a waiting head's prefix)
    (AGENTS, {"N": 3, "router": 2, "Lambda": 0.9, "max_seqs": 4}, 45.0),   # long queues (45 s: a mean queue of
                                                                           # 0.5 request, 1.0 at 60 s)
    (SYSTEM, {"N": 3, "router": 6, "Lambda": 6, "blocks": 1200}, 15.0),    # shared prefix caches
    (GRID, {"router": 3, "Lambda": 4}, 20.0),                              # ends that tie
])
def test_logged_gauges_of_few_engines_give_the_report_of_one_iteration_at_a_time(
        path: Path, sets: dict[str, Any], horizon: float, monkeypatch: pytest.MonkeyPatch) -> None:
    # the clusters of tests/sim/test_lazy_runs.py, their gauges read from the log (they have
    # too few engines for it by default), against every iteration one by one; the log read
    # every 2048 entries, a few times before its end in each
    monkeypatch.setattr(gauges, "LOG_ENGINES", 2)
    monkeypatch.setattr(gauges, "LOG_READ", 2048)
    report = same(path, sets, horizon)
    assert sum(len(report.gauge(name).points) for name in report.gauges) > 300

"""Coalesced runs that pass over other engines' events (serq/sim/lazy.py, issue 22):
the report of a cluster is the one its engines give iteration by iteration, and
the runs do pass over events (else the cluster is as slow as before)."""

from __future__ import annotations

import functools
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import serq
from serq.sim import lazy
from serq.sim.stages import StepEngine
from serq.sim.stages.decode_run import DecodeRun

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "programs/cluster/agents.sq"
SYSTEM = ROOT / "programs/cluster/system_prompt.sq"
GRID = Path(__file__).parent / "programs/tied_grid.sq"
SHARED = Path(__file__).parent / "programs/shared_kv.sq"


class Plain(StepEngine):
    coalesce = False


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """How often each step of the passing runs happened."""
    seen: Counter = Counter()
    for name in ("register", "tie", "cut", "materialize", "catch_up"):
        def counted(self: Any, *args: Any, _f: Any = getattr(lazy.LazyRuns, name), _n: str = name) -> Any:
            seen[_n] += 1
            return _f(self, *args)
        monkeypatch.setattr(lazy.LazyRuns, name, counted)
    replay = DecodeRun.replay

    def replayed(self: DecodeRun, engine: Any, assign: Any) -> None:
        seen["iterations in runs"] += self.length
        replay(self, engine, assign)
    monkeypatch.setattr(DecodeRun, "replay", replayed)
    return seen


def same(path: Path, sets: dict[str, Any], horizon: float, seed: int = 1,
         warmup: float | None = None) -> serq.Report:
    """The cluster run with passing runs, against every iteration one by one:
    the same report, gauges' change points included (the warm-up a tenth of the horizon unless given)."""
    program = serq.load(path, sets={k: str(v) for k, v in sets.items()})
    warmup = horizon / 10 if warmup is None else warmup
    fast = serq.run(program, seed=seed, horizon=horizon, warmup=warmup)
    slow = serq.run(program, seed=seed, horizon=horizon, warmup=warmup, engines={"engine": Plain})
    assert fast.to_json() == slow.to_json()
    for name in fast.gauges:
        assert fast.gauge(name).points == slow.gauge(name).points
    return fast


@pytest.mark.parametrize("router", range(6))
def test_every_router_gives_the_report_of_one_iteration_at_a_time(router: int, calls: Counter) -> None:
    # 3 replicas; least KV (3), affinity (5) read the pools' `used` and `cachedin` at every request
    # (30 s: some 260 to 310 runs planned, whatever the router)
    report = same(AGENTS, {"N": 3, "router": router, "Lambda": 0.6}, 30.0)
    assert calls["register"] > 100
    # (the report counts the iterations after the warm-up, the runs all of them)
    assert calls["iterations in runs"] > 0.9 * sum(st.iterations for st in report.stages if st.name == "engine")


@pytest.mark.parametrize("sets, horizon", [
    # tight KV: growths evict and preempt (23 preemptions by 60 s, 4 by 40 s, none by 30 s)
    ({"N": 4, "router": 3, "Lambda": 0.6, "blocks": 1500}, 60.0),
    # long queues: the head re-read after growths (at 0.9 a second the queues fill only after 30 s)
    ({"N": 3, "router": 2, "Lambda": 1.5, "max_seqs": 4}, 35.0),
    # (the gauges' log read while runs' growths wait to be replayed, before now from 19 s on and
    # after it from 30 s on; at 0.45 a second, from 43 s and 28 s)
    ({"N": 8, "router": 5, "Lambda": 0.8}, 32.0),
])
def test_loaded_clusters_give_the_same_report(sets: dict[str, Any], horizon: float, calls: Counter) -> None:
    same(AGENTS, sets, horizon)  # (983 to 1 227 runs planned, 107 to 165 of them cut)
    assert calls["register"] > 100 and calls["cut"] > 0


@pytest.mark.parametrize("router", [2, 6])
def test_shared_prefix_caches_give_the_same_report(router: int) -> None:
    # route_prefix reads `cachedin` of every replica's trie at every request (15 s: some 330 runs planned)
    same(SYSTEM, {"N": 3, "router": router, "Lambda": 6, "blocks": 1200}, 15.0)


@pytest.mark.parametrize("sets", [{"router": 3, "Lambda": 4}, {"router": 3, "Lambda": 3, "N": 3},
                                  {"router": 1, "Lambda": 4}])
def test_ends_that_tie_are_ordered_as_one_iteration_at_a_time(sets: dict[str, Any], calls: Counter) -> None:
    # every iteration of every engine ends on one grid of times: a run's ends tie with other
    # engines' iteration ends and timers all the time, and the least-KV router reads the pools then
    # (20 s: 800 to 3 000 ties)
    same(GRID, sets, 20.0)
    assert calls["tie"] > 100


@pytest.mark.parametrize("path, sets", [(GRID, {"router": 3, "Lambda": 4}), (GRID, {"router": 1, "Lambda": 3, "N": 3}),
                                        (AGENTS, {"N": 4, "router": 2, "Lambda": 0.9})])
def test_no_event_ever_falls_on_a_passing_runs_iteration_end(path: Path, sets: dict[str, Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # the invariant the order of ties rests on: each event the kernel takes from the queue
    # lies on no iteration end of a passing run but the end of that run itself
    from serq.sim import kernel

    managers: list[lazy.LazyRuns] = []
    init = lazy.LazyRuns.__init__

    def kept(self: lazy.LazyRuns, sim: Any) -> None:
        init(self, sim)
        managers.append(self)
    monkeypatch.setattr(lazy.LazyRuns, "__init__", kept)
    seen = Counter()
    pop = kernel.heappop

    def checked(q: list) -> Any:
        entry = pop(q)
        for manager in managers:
            for engine in manager.engines:
                ends = engine.run.all_ends()
                if ends[0] <= entry[0] < ends[-1]:
                    seen["inside a run"] += 1
                    assert entry[0] not in ends, f"an event at {entry[0]!r} ties with a passing run's iteration end"
        return entry
    monkeypatch.setattr(kernel, "heappop", checked)
    program = serq.load(path, sets={k: str(v) for k, v in sets.items()})
    serq.run(program, seed=1, horizon=40.0, warmup=4.0)
    assert seen["inside a run"] > 1000


def test_a_router_reading_the_engines_work_sees_the_tokens_of_ended_iterations(tmp_path: Path,
                                                                               calls: Counter) -> None:
    # `work(engine[j])` of an engine in a passing run: its residents' work less a token for
    # every iteration that has ended by now (none of them committed yet)
    text = AGENTS.read_text()
    text = text.replace("  route(router, N, kv, reqs);", "  choose j in N by (work(engine[j]), ~uniform(0, 1));")
    path = tmp_path / "by_work.sq"
    path.write_text(text)
    # (at 0.9 a second a replica, a router that reads `work` as of the run's start chooses
    # otherwise from about 10 s on, at 0.6 only from 43 s on; 20 s: some 220 runs planned)
    same(path, {"N": 3, "Lambda": 0.9}, 20.0)
    assert calls["register"] > 100


@pytest.mark.parametrize("old, new, sets, horizon", [
    # growths stall (from about 19.5 s on: by 21 s thousands of runs cut short, each later second
    # as dear as the first twenty)
    ("preempt lifo;", "preempt none;", {"N": 5, "router": 1, "Lambda": 0.6, "blocks": 800}, 21.0),
    # (a growth that would not fit first stops a run planned iteration by iteration at 39.6 s)
    ("let chunk_cap = 0;", "let chunk_cap = 256;", {"N": 3, "router": 4, "Lambda": 1.2, "blocks": 1500}, 40.0),
    # (the first runs long enough for numpy come at 27 to 32 s)
    ("evict lru;", "evict by (-size, last);", {"N": 5, "router": 5, "Lambda": 1.2, "blocks": 1500}, 35.0),
    # (a batch first fills the budget at 23 s)
    ("  memory kv;\n}", "  serve by (remaining);\n  memory kv;\n}", {"N": 5, "router": 4, "Lambda": 0.9}, 26.0),
    # (a prompt that can never fit at 29 s; a waiting head's whole prefix evicted at 38 s)
    ("let B = 8192;", "let B = 64;", {"N": 5, "router": 2, "Lambda": 0.9, "blocks": 800}, 40.0),
])
def test_engine_settings_that_shape_runs_give_the_same_report(old: str, new: str, sets: dict[str, Any],
                                                              horizon: float, tmp_path: Path, calls: Counter) -> None:
    text = AGENTS.read_text()
    assert old in text
    path = tmp_path / "variant.sq"
    path.write_text(text.replace(old, new, 1))
    same(path, sets, horizon)  # (over 300 runs planned in each)
    assert calls["register"] > 50


@pytest.mark.parametrize("sets, horizon", [
    # least KV on two replicas at 1.2 a second each: with the reads' growths skipped, it chooses
    # otherwise from about 9 s on (on four at 0.6, only from 38 s on)
    ({"N": 2, "router": 3, "Lambda": 1.2}, 20.0),
    ({"N": 4, "router": 5, "Lambda": 0.6}, 30.0),
])
def test_without_gauges_each_run_replays_its_own_growths_when_read(sets: dict[str, Any], horizon: float,
                                                                    tmp_path: Path, calls: Counter) -> None:
    # no gauge: a read of one replica's pool (the router's `used`, `cachedin`) replays that pool's growths alone
    text = AGENTS.read_text()
    path = tmp_path / "agents.sq"
    path.write_text("\n".join(line for line in text.splitlines() if not line.startswith("gauge ")))
    same(path, sets, horizon)  # (150 to 360 reads of a pool)
    assert calls["register"] > 100 and calls["catch_up"] == 0


def test_engines_sharing_a_pool_cut_each_other(calls: Counter, monkeypatch: pytest.MonkeyPatch) -> None:
    # one KV pool for two engines: each run watches the other's pool, and a growth of one
    # preempts the other's residents (the run in flight is replayed up to then first)
    monkeypatch.setattr(lazy.LazyRuns, "GIVE_UP", 10**9)
    same(SHARED, {"Lambda": 1.5}, 40.0)  # (40 s: two such preemptions, at 17 s and 32 s; the rarest path)
    assert calls["materialize"] > 0 and calls["cut"] > 1000


def test_engines_that_keep_cutting_each_other_fall_back_to_the_next_event() -> None:
    from serq.sim.simulator import Simulator

    # (the runs fall back at 4.7 s; by 60 s, runs that stop at the next event again have stopped
    # short for the other engine, idle with work)
    sim = Simulator(serq.load(SHARED), seed=1, horizon=60.0, warmup=6.0)
    sim.run()
    assert sim.lazy.off and sim.lazy.conflicts == lazy.LazyRuns.GIVE_UP + 1
    assert not sim.lazy.engines and sim.lazy.latest == -math.inf  # every passing run ended
    same(SHARED, {"Lambda": 1.5}, 60.0)


def test_a_second_seed_and_warm_up_inside_busy_runs(calls: Counter) -> None:
    # a warm-up end falls while an engine is busy: runs stop there (statistics restart)
    # (at 4 s one of the four engines iterates; 20 s: some 300 runs planned)
    same(AGENTS, {"N": 4, "router": 4, "Lambda": 0.9}, 20.0, seed=7, warmup=4.0)
    assert calls["register"] > 100


def test_only_programs_whose_state_is_each_engines_own_pass(tmp_path: Path) -> None:
    def sim_of(text: str) -> Any:
        from serq.sim.simulator import Simulator

        path = tmp_path / "p.sq"
        path.write_text(text)
        return Simulator(serq.load(path), seed=1, horizon=10.0, warmup=0.0)

    base = AGENTS.read_text()
    assert sim_of(base).lazy is not None
    # eviction keys that read `waiting` change with any session's code: no passing runs
    keyed = base.replace("evict lru;", "evict by (waiting, size);")
    assert sim_of(keyed).lazy is None
    assert sim_of(base.replace("evict lru;", "evict by (-size, last);")).lazy is not None
    # one engine: nothing to pass over that is not its own
    assert sim_of(base.replace("let N = 4;", "let N = 1;")).lazy is None


def test_a_users_engine_class_keeps_the_old_rule() -> None:
    from serq.sim.simulator import Simulator

    class Mine(StepEngine):
        def order_residents(self) -> list:
            return list(self.residents)

    sim = Simulator(serq.load(AGENTS), seed=1, horizon=10.0, warmup=0.0, engines={"engine": Mine})
    assert sim.lazy is None


@functools.lru_cache(maxsize=None)
def uncut_report() -> str:
    """The bundled multi-turn program's report with runs as long as MAX_RUN lets them be (80 s:
    some 130 runs could be longer than 64 iterations)."""
    return serq.run(serq.load(ROOT / "programs" / "multi-turn" / "vllm.sq"), horizon=80, warmup=20).to_json()


@pytest.mark.parametrize("limit", [1, 2, 7, 64])
def test_a_run_longer_than_the_limit_is_several_runs_with_the_same_report(limit: int,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # a coalesced run stands for at most MAX_RUN iterations (a decode of 1e9 tokens listed a
    # billion ends, issue 38); cut shorter, the bundled program's report is byte for byte the same
    from serq.sim.stages import coalesce

    whole = uncut_report()
    program = serq.load(ROOT / "programs" / "multi-turn" / "vllm.sq")
    monkeypatch.setattr(coalesce, "MAX_RUN", limit)
    assert serq.run(program, horizon=80, warmup=20).to_json() == whole

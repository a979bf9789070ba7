"""The hook table (serq/sim/stages/hooks.py): one list of the step engine's
hooks that the engine, its guards, the fast path and docs/policies.md share."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import serq
from serq.policies import resolve
from serq.policies.fair import FairShare
from serq.sim.stages import HOOKS, StepEngine, pure
from serq.sim.stages.base import Job
from serq.sim.stages.hooks import overridden, run_blockers

ROOT = Path(__file__).resolve().parents[3]
VLLM = ROOT / "programs" / "multi-turn" / "vllm.sq"


def test_every_hook_is_a_method_of_the_engine_and_the_docs_table_is_the_hook_table() -> None:
    for name in HOOKS:
        assert callable(getattr(StepEngine, name)), name
    text = (ROOT / "docs" / "policies.md").read_text(encoding="utf-8")
    section = text[text.index("## The hook contract"):]
    rows = re.findall(r"^\| `(\w+)\([^)]*\)` \| (\w+) \| ([^|]+) \| ([^|]+) \|$", section, flags=re.MULTILINE)
    assert [r[0] for r in rows] == list(HOOKS)
    for name, kind, decides, keeps in rows:
        hook = HOOKS[name]
        assert (kind, decides.strip()) == (hook.kind, hook.decides)
        assert keeps.strip() == ("yes" if hook.keeps_runs else "if declared `@pure`" if hook.may_be_pure else "no")


def report(engine: type | None, lam: str = "0.6", horizon: float = 400) -> Any:
    program = serq.load(VLLM, sets=[("Lambda", lam)])
    return serq.run(program, seed=2, horizon=horizon, warmup=horizon / 10,
                    engines={"engine": engine} if engine else None)


class BySerial(StepEngine):
    """Oldest session first: an order a decode run does not change."""

    def order_residents(self) -> list[Job]:
        return sorted(self.residents, key=lambda job: job.session.serial)


class BySerialPure(StepEngine):
    @pure
    def order_residents(self) -> list[Job]:
        return sorted(self.residents, key=lambda job: job.session.serial)


class BySerialPlain(BySerial):
    coalesce = False


def test_pure_keeps_the_fast_path_and_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_blockers(BySerial) == ["order_residents"]
    assert run_blockers(BySerialPure) == []
    # the timers that end an iteration or a coalesced run, counted per engine class
    ends: dict[type, int] = {}
    original = StepEngine._iter_end

    def counting(self: StepEngine, timer: Any) -> None:
        ends[type(self)] = ends.get(type(self), 0) + 1
        original(self, timer)

    monkeypatch.setattr(StepEngine, "_iter_end", counting)
    # 60 s: ~39 000 iterations, ~460 timers for the pure one's
    plain = report(BySerialPlain, horizon=60)
    fast = report(BySerialPure, horizon=60)
    impure = report(BySerial, horizon=60)
    assert fast.to_json() == plain.to_json() == impure.to_json()
    # the pure one coalesced its decode runs: one timer for many iterations
    iterations = plain.stage("engine").iterations
    assert ends[BySerial] in (iterations, iterations - 1)  # (the one in flight at the horizon never ends)
    assert ends[BySerialPure] < iterations / 5


def test_pure_on_a_hook_that_cannot_be_pure_is_an_error() -> None:
    class Wrong(StepEngine):
        @pure
        def select_waiting(self, candidates: list) -> Any:
            return candidates[0]

    with pytest.raises(serq.SerqError, match="@pure on `select_waiting`"):
        report(Wrong, horizon=20)


def test_notifications_and_decisions_that_keep_runs_block_nothing() -> None:
    class Told(StepEngine):
        def on_finish(self, job: Job) -> None:
            pass

        def on_remove(self, job: Job) -> None:
            pass

        def choose_victim(self, pool: Any, grower: Any) -> Any:
            return StepEngine.choose_victim(self, pool, grower)

    assert overridden(Told) == ["choose_victim", "on_finish", "on_remove"]
    assert run_blockers(Told) == []

    class Mechanism(StepEngine):
        def start_iteration(self) -> bool:
            return StepEngine.start_iteration(self)

    assert run_blockers(Mechanism) == ["start_iteration"]


class FairShareByOverrides(StepEngine):
    """`fair` as it was written before the notifications: submit, finished and
    remove overridden (mechanism), the work kept per job."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.served: dict[int, float] = {}
        self._given: dict[int, float] = {}

    def select_waiting(self, candidates: list) -> Any:
        served = self.served
        return min(candidates, key=lambda c: served.get(c.serial, 0.0))

    def submit(self, s: Any, work: float, mode: Any, growing: Any, label: str) -> Any:
        ev = super().submit(s, work, mode, growing, label)
        if s.job is not None and s.job[0] is self:
            self._given[id(s.job[1])] = work
        return ev

    def finished(self, job: Job) -> None:
        super().finished(job)
        serial = job.session.serial
        self.served[serial] = self.served.get(serial, 0.0) + self._given.pop(id(job), 0.0)

    def remove(self, job: Job) -> None:
        super().remove(job)
        self._given.pop(id(job), None)


def test_fair_on_notifications_is_fair_on_overridden_mechanism() -> None:
    assert report(FairShare, lam="0.8").to_json() == report(FairShareByOverrides, lam="0.8").to_json()
    assert "on_finish" in overridden(FairShare) and "submit" not in vars(FairShare)


def test_engine_and_policy_options_resolve_alike(tmp_path: Path) -> None:
    assert resolve("sjf") is resolve("sjf")
    from serq.sim.engines import load_engine_classes
    from serq.policies import from_options

    assert load_engine_classes(["engine=sjf"]) == from_options(["engine=sjf"], {})
    assert load_engine_classes(["engine=serq.policies.lpm:LongestPrefixFirst"])["engine"] is resolve("lpm")


def test_an_admit_next_override_still_works_and_is_named_in_the_warnings() -> None:
    class Old(StepEngine):
        def admit_next(self, left: float) -> bool:
            return StepEngine.admit_next(self, left)

    old = report(Old, horizon=100)
    new = report(None, horizon=100)
    assert old.to_json() == new.to_json()
    assert any("overrides `admit_next`, which is deprecated" in w and "override `select_waiting`" in w
               for w in old.warnings())
    # nothing about hooks (a 100 s run of vllm.sq does not settle: that warning is issue 39's)
    assert [w for w in new.warnings() if not w.startswith("the run did not settle (")] == []

"""Admission policies (issue 10, item 2): ``serq.policies`` and the
``select_waiting`` hook.

Each bundled policy chooses differently from FCFS on a small scenario (the
first-token order, worked out below); each gives the same report with and
without coalesced decode runs on the bundled multi-turn agent; ``sjf`` is
``queue by (prompt)``; names resolve, or fail with one clear error.
"""

from __future__ import annotations

import csv
import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import serq
from serq.errors import SerqError, UsageError
from serq.policies import POLICIES, resolve
from serq.sim.engines import HookError
from serq.sim.stages import StepEngine
from serq.sim.stages.candidate import Candidate

ROOT = Path(__file__).resolve().parents[2]
VLLM = ROOT / "programs/multi-turn/vllm.sq"

# Three sessions at time 0 (serials 0, 1, 2), one request slot: the engine
# admits one request at a time, so admissions and first tokens come in the
# order the policy picks.  An iteration costs 1 whatever it holds: a prompt
# prefills in one iteration (first token at its end), three decode tokens
# follow, and the slot is free for the next at t = 4, 8.  Turn 1 caches the
# prompt in `kv`; every session waits until t = 100 and asks again, so at
# t = 100 all three wait with what turn 1 left: cached prefixes 300, 100,
# 200 and tokens served 303, 103, 203.
#
#   serial  prompt  prio  deadline
#   0       300     2     5
#   1       100     0     1
#   2       200     1     3
SCENARIO = """
let target = 2;
pool reqs { cap 1; admit via engine; }
pool kv { cap 100000; evict lru; }
stage engine : step { budget 10000; cost 1; memory kv; }
stage tool : delay;
workload { arrive batch(3); init {
  set prompt = serial == 0 ? 300 : serial == 1 ? 100 : 200;
  set prio = serial == 0 ? 2 : serial == 1 ? 0 : 1;
  set deadline = serial == 0 ? 5 : serial == 1 ? 1 : 3;
} }
session {
  hold reqs (1), kv (prompt) {
    run engine prefill (prompt);
    observe first = serial;
    run engine decode (3);
  } cache (prompt);
  tool (100 - now);
  hold reqs (1), kv (prompt) {
    run engine prefill (prompt);
    observe second = serial;
    run engine decode (3);
  }
  end;
}
run { horizon 1000; }
"""


def order(engine: type, tmp_path: Path, program: str = SCENARIO) -> tuple[list, list]:
    """(time, serial) of each turn's first token, turn 1 then turn 2."""
    report = serq.run(serq.load(program), engines={"engine": engine})
    report.dump(tmp_path)
    out = []
    for name in ("first", "second"):
        with open(tmp_path / f"{name}.csv") as f:
            out.append([(float(r["time"]), int(float(r["value"]))) for r in csv.DictReader(f)])
    return out[0], out[1]


FCFS_ORDER = [(1.0, 0), (5.0, 1), (9.0, 2)]
FCFS_SECOND = [(101.0, 0), (105.0, 1), (109.0, 2)]


def test_fcfs_is_the_default_engine_and_admits_in_queue_order(tmp_path: Path) -> None:
    assert order(resolve("fcfs"), tmp_path) == (FCFS_ORDER, FCFS_SECOND)
    assert order(StepEngine, tmp_path) == (FCFS_ORDER, FCFS_SECOND)
    assert resolve("fcfs").select_waiting is StepEngine.select_waiting


def test_sjf_admits_the_shortest_prompt_first(tmp_path: Path) -> None:
    # prompts 300, 100, 200: serial 1, then 2, then 0, in both turns
    first, second = order(resolve("sjf"), tmp_path)
    assert first == [(1.0, 1), (5.0, 2), (9.0, 0)]
    assert second == [(101.0, 1), (105.0, 2), (109.0, 0)]


def test_lpm_admits_the_longest_cached_prefix_first(tmp_path: Path) -> None:
    # turn 1: nothing cached, ties in queue order (FCFS); turn 2: cached 300, 100, 200
    first, second = order(resolve("lpm"), tmp_path)
    assert first == FCFS_ORDER
    assert second == [(101.0, 0), (105.0, 2), (109.0, 1)]


def test_fair_admits_the_session_served_fewest_tokens_first(tmp_path: Path) -> None:
    # turn 1: nobody served yet (FCFS); turn 2: served 303, 103, 203 tokens
    engine = resolve("fair")
    first, second = order(engine, tmp_path)
    assert first == FCFS_ORDER
    assert second == [(101.0, 1), (105.0, 2), (109.0, 0)]


def test_fair_counts_the_tokens_of_completed_runs() -> None:
    seen: dict[int, float] = {}

    class Watching(resolve("fair")):  # type: ignore[misc, valid-type]
        def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
            if self.env.now == 100.0 and not seen:
                seen.update(self.served)
            return super().select_waiting(candidates)

    serq.run(serq.load(SCENARIO), engines={"engine": Watching})
    assert seen == {0: 303.0, 1: 103.0, 2: 203.0}


def test_priority_admits_the_smallest_attribute_first(tmp_path: Path) -> None:
    # prio 2, 0, 1: serial 1, then 2, then 0
    first, second = order(resolve("priority"), tmp_path)
    assert first == [(1.0, 1), (5.0, 2), (9.0, 0)]
    assert second == [(101.0, 1), (105.0, 2), (109.0, 0)]


def test_priority_reads_the_attribute_given_after_the_colon(tmp_path: Path) -> None:
    # priority:deadline orders by 5, 1, 3 (the same order as prio here); priority:prompt is sjf
    assert order(resolve("priority:prompt"), tmp_path) == order(resolve("sjf"), tmp_path)

    class ByDeadline(resolve("priority")):  # type: ignore[misc, valid-type]
        key = "deadline"

    assert order(ByDeadline, tmp_path)[0] == [(1.0, 1), (5.0, 2), (9.0, 0)]


def test_slo_admits_the_least_slack_first(tmp_path: Path) -> None:
    # slo:deadline: slack = deadline - age - 2e-5 * prompt, age 0 for all at t = 0:
    # 5 - 0.006, 1 - 0.002, 3 - 0.004 → serial 1, then 2, then 0
    first, _ = order(resolve("slo:deadline"), tmp_path)
    assert first == [(1.0, 1), (5.0, 2), (9.0, 0)]
    # slo:target (the `let`, 2 s for everyone) at t = 0: slack 2 - 2e-5 * prompt, the
    # longest prompt has the least: 0 (300), then 2 (200), then 1 (100)
    first, _ = order(resolve("slo:target"), tmp_path)
    assert first == [(1.0, 0), (5.0, 2), (9.0, 1)]
    # with per_token = 0 a common target orders by age alone: FCFS at t = 0
    class Deadline(resolve("slo")):  # type: ignore[misc, valid-type]
        per_token = 0.0

    assert order(Deadline, tmp_path)[0] == FCFS_ORDER


def test_a_preempted_request_is_tried_first_whatever_the_policy() -> None:
    class Never(StepEngine):
        def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
            assert not any(c._req.front for c in candidates)
            return candidates[-1]

    program = serq.load(VLLM, sets={"Lambda": "0.9", "blocks": "2000"})
    # 60 s: about 40 preemptions, their requests tried first some 100 times
    report = serq.run(program, seed=1, horizon=60, warmup=6, engines={"engine": Never})
    assert report.pool("kv").preemptions > 0


# -- the candidates --------------------------------------------------------------------------


def test_a_candidate_reads_attributes_cache_and_times() -> None:
    seen: list[tuple] = []

    class Look(StepEngine):
        def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
            if self.env.now == 100.0 and not seen:
                for c in candidates:
                    seen.append((c.serial, c.position, c.attr("prompt"), c.cached, c.waited, c.age, c.joined))
            return candidates[0]

    serq.run(serq.load(SCENARIO), engines={"engine": Look})
    # at t = 100 all three joined at 100 (no server: age is the time waited); cached = prompt
    assert seen == [(0, 0, 300.0, 300.0, 0.0, 0.0, 100.0), (1, 1, 100.0, 100.0, 0.0, 0.0, 100.0),
                    (2, 2, 200.0, 200.0, 0.0, 0.0, 100.0)]


def test_a_candidate_is_read_only() -> None:
    caught: list[BaseException] = []

    class Write(StepEngine):
        def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
            for name in ("cached", "waited", "serial", "position", "age", "joined"):
                try:
                    setattr(candidates[0], name, 1.0)
                except AttributeError as err:
                    caught.append(err)
            try:
                candidates[0].prompt = 1.0  # type: ignore[attr-defined]
            except AttributeError as err:
                caught.append(err)
            return candidates[0]

    serq.run(serq.load(SCENARIO), engines={"engine": Write})
    assert len(caught) % 7 == 0 and caught


def test_an_unknown_or_hidden_attribute_is_a_clear_error() -> None:
    class Typo(StepEngine):
        def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
            return min(candidates, key=lambda c: c.attr("promt"))

    with pytest.raises(SerqError) as err:
        serq.run(serq.load(SCENARIO), engines={"engine": Typo})
    assert "no session attribute `promt`" in str(err.value) and err.value.helps == ["did you mean `prompt`?"]

    program = serq.load(VLLM)
    with pytest.raises(SerqError, match="session attribute `o` is hidden"):
        serq.run(program, horizon=50, warmup=0, engines={"engine": resolve("priority:o")})
    with pytest.raises(SerqError, match="no session attribute `prio`") as err2:
        serq.run(program, horizon=50, warmup=0, engines={"engine": resolve("priority")})
    assert "priority:ATTR" in err2.value.render()


def test_a_hook_returning_a_non_candidate_names_the_class_and_hook() -> None:
    class Bad(StepEngine):
        def select_waiting(self, candidates: list[Candidate]) -> Any:
            return candidates[0].serial

    with pytest.raises(HookError) as err:
        serq.run(serq.load(SCENARIO), engines={"engine": Bad})
    assert "Bad`, hook `select_waiting`" in str(err.value)
    assert "returned 0, not one of the candidates" in str(err.value)


def test_none_admits_nothing_this_iteration(tmp_path: Path) -> None:
    class Late(StepEngine):  # None before t = 50
        def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
            return None if self.env.now < 50.0 else candidates[0]

    # at t = 0 nothing is admitted; the engine, with no resident, starts no iteration
    # until an event wakes it, and none comes: the requests wait to the horizon
    report = serq.run(serq.load(SCENARIO), engines={"engine": Late})
    assert report.pool("reqs").admissions == 0


# -- coalesced runs ----------------------------------------------------------------------------

BUNDLED = ["fcfs", "sjf", "lpm", "fair", "priority:n", "slo"]
#: (Lambda, seed) of the runs each policy makes coalesced and plain, to HORIZON: a light load
#: (no queue) and a loaded one (a queue from about 40 s on: some 600 choices among two or more,
#: a few preemptions)
CASES = (("0.4", 2), ("0.9", 1))
HORIZON = 120.0


@functools.lru_cache(maxsize=None)
def _both(name: str, sets: tuple[tuple[str, str], ...], horizon: float, seed: int) -> tuple[str, str, int, int]:
    """(coalesced report, plain report, iterations in coalesced runs, iterations) of one policy
    on the multi-turn agent, made once a process (the loaded case of CASES is also the first
    case under pressure)."""
    cls = resolve(name)
    counted = _counting(cls)
    plain = type("Plain", (cls,), {"coalesce": False})
    program = serq.load(VLLM, sets=dict(sets))
    fast = serq.run(program, seed=seed, horizon=horizon, warmup=horizon / 10, engines={"engine": counted})
    slow = serq.run(program, seed=seed, horizon=horizon, warmup=horizon / 10, engines={"engine": plain})
    return fast.to_json(), slow.to_json(), counted.coalesced, fast.stage("engine").iterations


def _policy_reports(name: str) -> dict[tuple[str, int], tuple[str, str, int]]:
    """(Lambda, seed) → (coalesced report, plain report, coalesced share in ‰) of one policy
    (one policy's at a time: the test workers share them out)."""
    out = {}
    for lam, seed in CASES:
        fast, slow, coalesced, iterations = _both(name, (("Lambda", lam),), HORIZON, seed)
        out[(lam, seed)] = (fast, slow, 1000 * coalesced // iterations)
    return out


def _counting(cls: type) -> Any:
    def _iter_end(self: Any, timer: Any) -> None:
        if timer.epoch == self.epoch and self.run_length > 1:
            type(self).coalesced += self.run_length
        cls._iter_end(self, timer)

    return type("Counted", (cls,), {"_iter_end": _iter_end, "coalesced": 0})


@pytest.mark.parametrize("name", BUNDLED)
def test_each_policy_reports_the_same_coalesced_and_plain(name: str) -> None:
    for case in CASES:
        fast, slow, _share = _policy_reports(name)[case]
        assert fast == slow, (name, case)


@pytest.mark.parametrize("name", BUNDLED[1:])
def test_each_policy_keeps_coalesced_runs_and_chooses_differently(name: str) -> None:
    mine, default = _policy_reports(name), _policy_reports("fcfs")
    for case in CASES:
        share = mine[case][2]
        assert share >= default[case][2] - 20, (name, case, share)  # within 2 % of the default's
    assert mine[CASES[1]][0] != default[CASES[1]][0]


def test_a_custom_admit_next_keeps_coalesced_runs_while_nothing_fits() -> None:
    class Admit(StepEngine):  # the default's admission, through an override
        def admit_next(self, left: float) -> bool:
            return StepEngine.admit_next(self, left)

    # the loaded case of CASES: some 190 runs start with requests waiting, 160 of them go on
    program = serq.load(VLLM, sets={"Lambda": "0.9"})
    counted = _counting(Admit)
    fast = serq.run(program, seed=1, horizon=120, warmup=12, engines={"engine": counted})
    slow = serq.run(program, seed=1, horizon=120, warmup=12,
                    engines={"engine": type("P", (Admit,), {"coalesce": False})})
    base = serq.run(program, seed=1, horizon=120, warmup=12)
    assert fast.to_json() == slow.to_json() == base.to_json()
    assert counted.coalesced > 0.9 * fast.stage("engine").iterations


# -- the language's own policy ---------------------------------------------------------------


def _vllm_text(queue: str = "") -> str:
    text = VLLM.read_text()
    return text.replace("pool reqs { cap max_seqs; admit via engine; }",
                        f"pool reqs {{ cap max_seqs; admit via engine;{queue} }}")


@pytest.mark.parametrize("lam", ["0.4", "0.6"])
def test_sjf_gives_the_report_of_queue_by_prompt(lam: str, tmp_path: Path) -> None:
    (tmp_path / "plain.sq").write_text(_vllm_text())
    (tmp_path / "queue_by.sq").write_text(_vllm_text(" queue by (prompt);"))
    subclass = serq.load(tmp_path / "plain.sq", sets={"Lambda": lam})
    language = serq.load(tmp_path / "queue_by.sq", sets={"Lambda": lam})
    for seed in (1, 2):  # 200 s: from one choice among two or more (0.4, seed 2) to some 350 (0.6, seed 1)
        a = serq.run(subclass, seed=seed, horizon=200, warmup=20, engines={"engine": resolve("sjf")})
        b = serq.run(language, seed=seed, horizon=200, warmup=20)
        assert a.to_json() == b.to_json()


def test_lpm_gives_the_report_of_queue_by_cachedin(tmp_path: Path) -> None:
    (tmp_path / "plain.sq").write_text(_vllm_text())
    (tmp_path / "queue_by.sq").write_text(_vllm_text(" queue by (-cachedin(kv));"))
    subclass = serq.load(tmp_path / "plain.sq", sets={"Lambda": "0.6"})
    language = serq.load(tmp_path / "queue_by.sq", sets={"Lambda": "0.6"})
    # 200 s: some 360 choices among two or more, a few preemptions
    a = serq.run(subclass, seed=1, horizon=200, warmup=20, engines={"engine": resolve("lpm")})
    b = serq.run(language, seed=1, horizon=200, warmup=20)
    assert a.to_json() == b.to_json()


def test_priority_gives_the_report_of_queue_by_prio() -> None:
    language = SCENARIO.replace("pool reqs { cap 1; admit via engine; }",
                                "pool reqs { cap 1; admit via engine; queue by (prio); }")
    a = serq.run(serq.load(SCENARIO), engines={"engine": resolve("priority")})
    b = serq.run(serq.load(language))
    assert a.to_json() == b.to_json()
    assert a.to_json() != serq.run(serq.load(SCENARIO)).to_json()


# -- names -------------------------------------------------------------------------------------


def test_every_short_name_resolves_to_a_step_engine() -> None:
    assert list(POLICIES) == ["fcfs", "sjf", "lpm", "fair", "priority", "slo"]
    for name in POLICIES:
        assert issubclass(resolve(name), StepEngine)
    assert resolve("serq.policies.lpm:LongestPrefixFirst") is resolve("lpm")
    assert resolve("priority:tier").key == "tier"
    assert resolve("slo:0.5").target == 0.5 and resolve("slo:target").target == "target"


@pytest.mark.parametrize("spec, message, helps", [
    ("fifo", "unknown policy `fifo`", ["did you mean `fcfs`?"]),
    ("lmp", "unknown policy `lmp`", []),
    ("sjf:3", "policy `sjf:3`: `sjf` takes no parameter", []),
    ("priority:", "policy `priority:`: the parameter after `priority:` is empty", []),
])
def test_a_bad_policy_name_is_a_usage_error(spec: str, message: str, helps: list[str]) -> None:
    with pytest.raises(UsageError) as err:
        resolve(spec)
    assert str(err.value) == message
    assert err.value.helps[:-1] == helps


def test_a_class_path_that_does_not_import_is_an_error() -> None:
    with pytest.raises(SerqError, match="cannot import `nosuch.mod`"):
        resolve("nosuch.mod:X")
    with pytest.raises(SerqError, match="is not a subclass"):
        resolve("serq.errors:SerqError")


def test_serq_policies_is_exported_lazily() -> None:
    code = ("import sys, serq; a = 'serq.policies' in sys.modules or 'serq.sim' in sys.modules; "
            "p = serq.policies.resolve('sjf'); print(a, p.__name__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "ShortestPromptFirst"]


# -- the command line --------------------------------------------------------------------------


def serq_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "serq", *args], cwd=ROOT, capture_output=True, text=True)


def test_policy_option_runs_the_policy() -> None:
    done = serq_cli("run", str(VLLM), "--horizon", "200", "--warmup", "20", "--json", "--policy", "engine=sjf")
    assert done.returncode == 0, done.stderr
    program = serq.load(VLLM)
    assert done.stdout.strip() == serq.run(program, horizon=200, warmup=20,
                                           engines={"engine": resolve("sjf")}).to_json().strip()


@pytest.mark.parametrize("args, line", [
    (["--policy", "engine=sjf", "--engine", "engine=serq.policies.lpm:LongestPrefixFirst"],
     "error: --policy `engine=sjf`: stage `engine` already has --engine; give one engine per stage"),
    (["--policy", "engine=sjf", "--policy", "engine=lpm"],
     "error: --policy `engine=lpm`: stage `engine` already has --policy; give one engine per stage"),
    (["--policy", "sjf"], "error: invalid --policy `sjf`; expected STAGE=NAME (NAME one of fcfs, sjf, lpm, "
     "fair, priority, slo, or package.module:Class)"),
    (["--policy", "engine=fifo"], "error: unknown policy `fifo`"),
])
def test_policy_option_errors_exit_2(args: list[str], line: str) -> None:
    done = serq_cli("run", str(VLLM), "--horizon", "50", *args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines()[0] == line
    assert "Traceback" not in done.stderr


# -- coalesced = plain under every kind of header ------------------------------------------------

HEADERS = """
pool kv {{ cap 4000; block 16; evict lru; preempt lifo; }}
pool reqs {{ cap 3; admit via engine; }}
stage engine : step {{ budget 512; cost 0.01 + 1e-6 * kv_decode; memory kv; }}
workload {{
  arrive poisson(3);
  init {{ set prompt = ~uniform(50, 400); set o = ~exp(80) + 1; set prio = ~uniform(0, 3); }}
}}
session {{
  loop {{
    hold reqs (1), kv ({units}) {{
      run engine prefill (prompt) growing kv;
      run engine decode (o) growing kv;
    }} cache (prompt + o);
    branch (~bernoulli(0.5)) {{ set prompt = prompt + o + 20; }} else {{ end; }}
  }}
}}
"""


@pytest.mark.parametrize("units", [
    "min(prompt, budget_left(engine))",                      # pure, reads the engine's budget
    "min(prompt, cachedin(kv) + budget_left(engine))",       # reads the cache a run evicts
    "min(prompt, used(kv) / 100 + 16)",                      # reads what a run grows
    "min(prompt, 16 + now * 0)",                             # reads the clock: no run with a queue
])
@pytest.mark.parametrize("name", ["sjf", "lpm", "fair", "priority", "slo"])
def test_each_policy_is_exact_under_every_kind_of_header(units: str, name: str) -> None:
    program = serq.load(HEADERS.format(units=units))
    cls = resolve(name)
    plain = type("Plain", (cls,), {"coalesce": False})
    # 30 s: the slots full and a queue from the first seconds; at seed 3 lpm and priority preempt
    # (some requests twice with no progress between)
    for seed in (1, 3):
        fast = serq.run(program, seed=seed, horizon=30.0, warmup=3.0, engines={"engine": cls})
        slow = serq.run(program, seed=seed, horizon=30.0, warmup=3.0, engines={"engine": plain})
        assert fast.to_json() == slow.to_json(), (name, units, seed)


@pytest.mark.parametrize("sets, horizon", [
    ({"Lambda": "0.9"}, HORIZON),                            # slots full, a long queue (the loaded case of CASES)
    ({"Lambda": "0.9", "max_seqs": "4"}, HORIZON),           # few slots
    ({"Lambda": "0.6", "blocks": "1200"}, 90.0),             # requests do not fit in kv; growths evict and preempt
                                                             # (90 s: some 80 preemptions, and a run of one decoder
                                                             # stopped before a growth that would preempt)
    ({"Lambda": "0.9", "blocks": "2500", "B": "64"}, 75.0),  # small budget, tight memory (75 s: a queue, a few
                                                             # preemptions)
])
def test_policies_are_exact_under_pressure(sets: dict, horizon: float) -> None:
    for name in ("lpm", "slo"):
        fast, slow, coalesced, _iterations = _both(name, tuple(sets.items()), horizon, 1)
        assert fast == slow, (name, sets)
        assert coalesced > 0

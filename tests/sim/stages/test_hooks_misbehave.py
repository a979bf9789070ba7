"""A user's StepEngine hooks that misbehave (issue 8, B11): a wrong value or
an exception stops the run with a SerqError (a HookError) naming the class
and the hook, never a raw TypeError, a corrupt report or a hang; a valid
value runs.  A fuzz test draws subclasses that return random bad values."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import serq
from serq.sim.engines import HOOKS, HookError
from serq.sim.stages import StepEngine

# every hook is called: admissions via the engine, chunked prefills, growths that preempt
PROGRAM = """
pool reqs { cap 3; admit via engine; }
pool kv { cap 160; block 16; evict lru; preempt lifo; }
stage engine : step { budget 64; chunk 32; cost 0.5 + tokens / 100; memory kv; }
workload { arrive poisson(2); init { set prompt = ~uniform(30, 90); set o = ~uniform(1, 20); } }
session {
  hold reqs (1), kv (min(prompt, budget_left(engine))) {
    run engine prefill (prompt) growing kv;
    run engine decode (o) growing kv;
  }
  end;
}
run { horizon 30; }
"""


#: The event budget of a run here.  PROGRAM's runs handle at most 127 events, whether
#: the hooks behave or stop them (measured over every case here, issue 38); a hook that
#: made a run go on for ever would reach the budget and end it with a SerqError, at the
#: same point on every machine, where an alarm of 3 s used to (and could, on a busy
#: machine, stop a run that would have ended).
EVENTS = 10_000


def run_bounded(cls: type) -> serq.Report:
    return serq.run(serq.load(PROGRAM), engines={"engine": cls}, max_events=EVENTS)


def engine_class(hook: str, behave: Callable[..., Any], calls: list[int]) -> type:
    def method(self: StepEngine, *args: Any) -> Any:
        calls[0] += 1
        return behave(self, *args)

    return type(f"Bad_{hook}", (StepEngine,), {hook: method})


def default(hook: str) -> Callable[..., Any]:
    return lambda self, *args: getattr(StepEngine, hook)(self, *args)


def raising(self: StepEngine, *args: Any) -> Any:
    raise ValueError("boom")


class Stranger:
    """Looks like a job, is not a resident."""
    work = remaining = 5.0
    prefill = False
    session = None


# (label, behaviour, expected): "error" — a HookError once the hook is called;
# "ok" — the run ends normally; "either" — valid or not depending on the state
BAD_ANY = [
    ("None", lambda self, *a: None, "error"),
    ("str", lambda self, *a: "1", "error"),
    ("raises", raising, "error"),
    ("object", lambda self, *a: object(), "error"),
    ("dict", lambda self, *a: {}, "error"),
]
NUMBERS = [
    ("nan", lambda self, *a: math.nan, "error"),
    ("inf", lambda self, *a: math.inf, "error"),
    ("-inf", lambda self, *a: -math.inf, "error"),
    ("-1", lambda self, *a: -1, "error"),
    ("-tiny", lambda self, *a: -1e-300, "error"),
    ("huge", lambda self, *a: 1e300, "error"),
    ("complex", lambda self, *a: 1j, "error"),
    ("True", lambda self, *a: True, "error"),
    ("Decimal", lambda self, *a: Decimal("1"), "error"),
    ("list", lambda self, *a: [1.0], "error"),
]
BEHAVIOURS: dict[str, list[tuple[str, Callable[..., Any], str]]] = {
    "plan_tokens": BAD_ANY + NUMBERS + [
        ("default", default("plan_tokens"), "ok"),
        ("zero", lambda self, job, chunk: 0, "ok"),
        ("half", lambda self, job, chunk: job.work / 2, "ok"),
        ("tiny", lambda self, job, chunk: 1e-300, "ok"),
        ("int 1", lambda self, job, chunk: 1, "either"),  # more than a resident with 0.5 left
        ("all left", lambda self, job, chunk: job.work, "ok"),
        ("one over", lambda self, job, chunk: job.work + 1, "error"),
    ],
    "order_residents": BAD_ANY + [
        ("default", default("order_residents"), "ok"),
        ("reversed", lambda self: list(reversed(self.residents)), "ok"),
        ("generator", lambda self: (j for j in self.residents), "ok"),
        ("empty", lambda self: [], "ok"),
        ("half", lambda self: self.residents[::2], "ok"),
        ("twice", lambda self: self.residents + self.residents, "error"),
        ("stranger", lambda self: [Stranger()] + self.residents, "error"),
        ("sessions", lambda self: [j.session for j in self.residents] or [object()], "error"),
        ("int", lambda self: 3, "error"),
        ("sorted in place", lambda self: self.residents.sort(key=lambda j: j.work) or self.residents, "either"),
        ("endless", lambda self: iter(lambda: self.residents[0] if self.residents else None, 0), "error"),
    ],
    "select_waiting": BAD_ANY[1:] + [  # None: admit none this iteration
        ("default", default("select_waiting"), "ok"),
        ("none", lambda self, cands: None, "ok"),
        ("last", lambda self, cands: cands[-1], "ok"),
        ("the list", lambda self, cands: cands, "error"),
        ("a request", lambda self, cands: cands[0]._req, "error"),
        ("int 0", lambda self, cands: 0, "error"),
    ],
    "admit_next": BAD_ANY + [
        ("default", default("admit_next"), "ok"),
        ("never", lambda self, left: False, "ok"),
        ("always", lambda self, left: True, "error"),
        ("int 1", lambda self, left: 1, "error"),
        ("nan", lambda self, left: math.nan, "error"),
        ("super then True", lambda self, left: StepEngine.admit_next(self, left) or True, "error"),
    ],
    "choose_victim": BAD_ANY[1:] + [  # None: the grower stalls
        ("default", default("choose_victim"), "ok"),
        ("stall", lambda self, pool, grower: None, "ok"),
        ("grower", lambda self, pool, grower: grower, "ok"),
        ("a job", lambda self, pool, grower: self.residents[0] if self.residents else grower.job[1], "error"),
        ("first resident", lambda self, pool, grower: self.residents[0].session, "ok"),
        ("the pool", lambda self, pool, grower: pool, "error"),
        ("a non-holder", lambda self, pool, grower: _non_holder(self, pool), "error"),
    ],
    "iteration_cost": BAD_ANY + [n for n in NUMBERS if n[0] not in ("huge", "True", "complex")] + [
        ("default", default("iteration_cost"), "ok"),
        ("one", lambda self, view: 1.0, "ok"),
        ("huge", lambda self, view: 1e300, "ok"),
        ("tokens", lambda self, view: view.tokens, "either"),  # 0 for a preemption only: fine
        ("zero", lambda self, view: 0.0, "error"),
        ("int", lambda self, view: 2, "ok"),
        ("True", lambda self, view: True, "error"),
        ("complex", lambda self, view: 1j, "error"),
    ],
    # notifications: an exception stops the run; what they return is ignored
    "on_finish": [
        ("default", default("on_finish"), "ok"),
        ("raises", raising, "error"),
        ("returns", lambda self, job: "anything", "ok"),
    ],
    "on_remove": [
        ("default", default("on_remove"), "ok"),
        ("raises", raising, "error"),
        ("returns", lambda self, job: 3, "ok"),
    ],
}


def _non_holder(self: StepEngine, pool: Any) -> Any:
    """A session that holds nothing on ``pool``: one waiting in a queue, else a new one."""
    for p in self.sim.all_pools:
        for req in p.put_queue:
            return req.session
    from serq.sim.session import Session
    return Session(self.sim, 10_000)


def check(hook: str, label: str, behave: Callable[..., Any], expected: str) -> None:
    calls = [0]
    cls = engine_class(hook, behave, calls)
    try:
        report = run_bounded(cls)
    except HookError as err:
        assert expected != "ok", f"{hook} {label}: {err}"
        assert f"`{cls.__module__}.Bad_{hook}`" in str(err) and f"hook `{hook}`" in str(err), str(err)
        assert "\n" not in str(err) and len(str(err)) < 400, str(err)
        if label == "raises":
            assert "raised ValueError: boom (at test_hooks_misbehave.py:" in str(err)
        return
    except serq.SerqError as err:  # the simulator's own checks may stop a run a valid hook allowed
        assert expected == "either", f"{hook} {label}: {err}"
        return
    assert calls[0] > 0, f"{hook} was never called"
    assert expected != "error", f"{hook} {label}: ran without an error"
    report.text()
    report.to_json()


CASES = [(hook, label, behave, expected) for hook in HOOKS for label, behave, expected in BEHAVIOURS[hook]]


@pytest.mark.parametrize("hook, label, behave, expected", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_each_bad_value_is_an_error_naming_the_class_and_hook(hook: str, label: str, behave: Any,
                                                            expected: str) -> None:
    check(hook, label, behave, expected)


@st.composite
def misbehaving(draw: Any) -> tuple[str, str, Callable[..., Any], str]:
    """A hook that answers with the default, or one of the bad values, call by call."""
    hook = draw(st.sampled_from(list(HOOKS)))
    choices = BEHAVIOURS[hook]
    picks = draw(st.lists(st.integers(0, len(choices) - 1), min_size=1, max_size=6))
    every = draw(st.integers(1, 50))  # misbehave at every `every`-th call, behave otherwise
    chosen = [choices[i] for i in picks]
    ok = default(hook)
    count = [0]

    def behave(self: StepEngine, *args: Any) -> Any:
        count[0] += 1
        if count[0] % every:
            return ok(self, *args)
        return chosen[(count[0] // every) % len(chosen)][1](self, *args)

    labels = "+".join(c[0] for c in chosen)
    return hook, f"{labels}/{every}", behave, "ok" if all(c[2] == "ok" for c in chosen) else "either"


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(misbehaving())
def test_random_misbehaviour_stops_cleanly_or_runs(case: tuple[str, str, Callable[..., Any], str]) -> None:
    hook, label, behave, expected = case
    calls = [0]
    cls = engine_class(hook, behave, calls)
    try:
        run_bounded(cls).to_json()
    except HookError as err:
        assert expected != "ok", f"{label}: {err}"
        assert f"hook `{hook}`" in str(err)
    except serq.SerqError:
        assert expected != "ok"


def test_the_default_engine_and_a_pass_through_subclass_give_the_same_report() -> None:
    class PassThrough(StepEngine):
        coalesce = False

    for hook in HOOKS:
        setattr(PassThrough, hook, default(hook))
    program = serq.load(PROGRAM)
    assert serq.run(program).to_json() == serq.run(program, engines={"engine": PassThrough}).to_json()


def test_the_cli_prints_the_error_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "badsched.py").write_text(
        "from serq.sim.stages import StepEngine\n"
        "class Lazy(StepEngine):\n"
        "    def plan_tokens(self, job, chunk):\n"
        "        pass\n"
        "class Raises(StepEngine):\n"
        "    def order_residents(self):\n"
        "        return sorted(self.residents, key=lambda j: j.wrok)\n")
    prog = tmp_path / "p.sq"
    prog.write_text(PROGRAM)
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "SERQ_MAX_EVENTS": str(EVENTS),
           "SERQ_CACHE_DIR": os.environ["SERQ_CACHE_DIR"]}  # (the suite's kept parses, tests/conftest.py)

    def run(cls: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "serq", "run", str(prog), "--engine", f"engine=badsched:{cls}"],
                              capture_output=True, text=True, env=env)

    lazy = run("Lazy")
    assert lazy.returncode == 1 and "Traceback" not in lazy.stderr and lazy.stdout == ""
    assert lazy.stderr.strip() == (f"{prog}: engine class `badsched.Lazy`, hook `plan_tokens` (stage `engine`) "
                                   "returned None, not a number of tokens >= 0")
    raises = run("Raises")
    assert raises.returncode == 1 and "Traceback" not in raises.stderr
    assert ("engine class `badsched.Raises`, hook `order_residents` (stage `engine`) raised AttributeError: "
            "'Job' object has no attribute 'wrok'") in raises.stderr
    assert "(at badsched.py:7)" in raises.stderr


def test_a_hook_error_is_a_run_time_error_of_the_public_api() -> None:
    from serq.sim.engines import HookError

    assert issubclass(HookError, serq.SerqRuntimeError)
    assert issubclass(serq.SerqRuntimeError, serq.SerqError)


def test_a_simulator_error_met_inside_a_hook_names_the_class_and_the_hook_too() -> None:
    # a hook that calls back into the simulator, which refuses what it was given: the
    # simulator's own message, and a note naming the class and the hook (issue 25)
    from serq.errors import SerqError
    from serq.sim.stages.base import check_work

    class CallsBack(StepEngine):
        def plan_tokens(self, job: Any, chunk: float) -> float:
            check_work("my planner's amount", -1.0)
            return super().plan_tokens(job, chunk)

    with pytest.raises(SerqError) as info:
        run_bounded(CallsBack)
    err = info.value
    assert not isinstance(err, HookError)
    assert err.message == "my planner's amount: the amount is -1, not a number of units, tokens or seconds"
    assert err.notes == [f"inside engine class `{__name__}.{CallsBack.__qualname__}`, hook `plan_tokens` "
                         "(stage `engine`)"]

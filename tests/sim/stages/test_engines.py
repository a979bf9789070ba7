"""Subclassing the step engine: a user's scheduler changes one decision, and
the default engine's coalesced decode runs change nothing in the report."""

from __future__ import annotations

from pathlib import Path

import pytest

import serq
from serq.sim.stages import StepEngine

ROOT = Path(__file__).resolve().parents[3]

THREE_REQUESTS = """
// four prompts admitted together (no `admit via`: at once, in arrival order); budget 100
pool reqs { cap 16; }
pool kv { cap 100000; block 16; evict lru; preempt lifo; }
stage engine : step { budget 100; cost 1; memory kv; }
stage gate : delay;
workload {
  arrive batch(4);
  init { set prompt = serial == 0 ? 100 : serial == 1 ? 90 : serial == 2 ? 30 : 60; }
}
session {
  hold reqs (1), kv (min(prompt, budget_left(engine))) {
    run engine prefill (prompt) growing kv;
    observe first = now;
  }
  end;
}
run { horizon 50; }
"""


class ShortestPromptFirst(StepEngine):
    """Serves the resident with the fewest tokens left first."""

    def order_residents(self):
        return sorted(self.residents, key=lambda job: job.work)


def firsts(report: serq.Report) -> dict[int, float]:
    return {s.session: s.value for s in report.samples["first"]}


def test_a_shortest_prompt_first_engine_changes_the_order_of_service() -> None:
    program = serq.load(THREE_REQUESTS)
    # admission order: step 1 r0 takes all 100; step 2 r1 90 and r2 10; step 3
    # r2 its last 20 and r3 60: first tokens at 1, 2, 3, 3
    default = firsts(serq.run(program))
    assert default == {0: 1, 1: 2, 2: 3, 3: 3}
    # fewest tokens left first: step 1 r2 30, r3 60, r1 10; step 2 r1 80, r0 20;
    # step 3 r0 80: first tokens at 3, 2, 1, 1
    custom = firsts(serq.run(program, engines={"engine": ShortestPromptFirst}))
    assert custom == {0: 3, 1: 2, 2: 1, 3: 1}


def test_an_engine_class_is_chosen_by_module_path_on_the_command_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "mysched.py").write_text(
        "from serq.sim.stages import StepEngine\n"
        "class Spf(StepEngine):\n"
        "    def order_residents(self):\n"
        "        return sorted(self.residents, key=lambda j: j.work)\n"
        "class NotAnEngine:\n    pass\n")
    prog = tmp_path / "three.sq"
    prog.write_text(THREE_REQUESTS)
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin",
           "SERQ_CACHE_DIR": os.environ["SERQ_CACHE_DIR"]}  # (the suite's kept parses, tests/conftest.py)
    ok = subprocess.run([sys.executable, "-m", "serq", "run", str(prog), "--engine", "engine=mysched:Spf", "--json"],
                        capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "serq", "run", str(prog), "--engine", "engine=mysched:NotAnEngine"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "not a subclass" in bad.stderr and "Traceback" not in bad.stderr  # a command line's mistake
    # a misspelt stage is the same mistake in `run` as in `sweep`: exit 2, the option named, a did-you-mean
    for option, value in (("--engine", "engin=mysched:Spf"), ("--policy", "engin=sjf")):
        for command in ("run", "sweep"):
            bad = subprocess.run([sys.executable, "-m", "serq", command, str(prog), option, value, "--quiet"],
                                 capture_output=True, text=True, env=env)
            assert bad.returncode == 2, bad.stderr
            assert bad.stderr.splitlines()[:3] == ["error: unknown step stage `engin`", "help: did you mean `engine`?",
                                                   f"help: {option} gives a step stage its scheduler; the program has "
                                                   "`engine`"]
    from serq.errors import UsageError

    with pytest.raises(UsageError, match="unknown step stage `engin`"):
        serq.run(program=serq.load(THREE_REQUESTS), engines={"engin": ShortestPromptFirst})


class Plain(StepEngine):
    coalesce = False


@pytest.mark.parametrize("program, seed", [
    ("programs/multi-turn/vllm.sq", 1),
    ("programs/multi-turn/vllm.sq", 4),
    ("programs/subagent/vllm_subagents.sq", 2),
    ("programs/single-turn/vllm_single_turn.sq", 3),
])
def test_coalesced_decode_runs_give_the_same_report_as_one_iteration_at_a_time(program: str, seed: int) -> None:
    p = serq.load(ROOT / program)
    fast = serq.run(p, seed=seed, horizon=120, warmup=20)
    slow = serq.run(p, seed=seed, horizon=120, warmup=20, engines={"engine": Plain})
    assert fast.to_json() == slow.to_json()
    assert fast.stage("engine").iterations > 1000


def test_serve_by_keys_in_the_program_order_the_residents_like_the_subclass() -> None:
    # `serve by (remaining)` is the shortest-first subclass written in the language
    program = serq.load(THREE_REQUESTS.replace("cost 1; memory kv;", "cost 1; memory kv; serve by (remaining);"))
    assert firsts(serq.run(program)) == {0: 3, 1: 2, 2: 1, 3: 1}

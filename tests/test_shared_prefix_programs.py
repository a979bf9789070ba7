"""The bundled programs on the shared prefix cache (issue 14, docs/workloads.md
"On a shared prefix cache"): `programs/single-turn/vllm_system_prompt.sq` and
`programs/subagent/vllm_spawn_shared.sq` check and run, hit where the
per-session cache cannot, and are deterministic.  Short horizons: each run
takes under a second.  The margins come from seeds 1–3 at horizons 200 and 400
(docs/workloads.md has ten seeds at horizon 2000)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import serq

ROOT = Path(__file__).resolve().parent.parent
SINGLE = "programs/single-turn/vllm_single_turn.sq"
SYSTEM = "programs/single-turn/vllm_system_prompt.sq"
SPAWN = "programs/subagent/vllm_spawn.sq"
SHARED = "programs/subagent/vllm_spawn_shared.sq"
CHILD = 2**32  # children's serials start here (docs/subagents.md, "Serials")


def run(path: str, seed: int = 1, horizon: float = 300, sets: dict[str, str] | None = None) -> serq.Report:
    return serq.run(serq.load(ROOT / path, sets=sets or {}), seed=seed, horizon=horizon, warmup=horizon / 10)


@pytest.mark.parametrize("path", [SYSTEM, SHARED])
def test_the_program_checks_and_runs_from_the_command_line(path: str) -> None:
    done = subprocess.run([sys.executable, "-m", "serq", "run", path, "--horizon", "60", "--warmup", "6"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("run: horizon 60 end 60 warmup 6 seed 1 ")
    assert "\nhit " in done.stdout and "\nprefill_tokens " in done.stdout


def test_the_system_prompt_hits_and_prefills_a_quarter_of_the_single_turn_program() -> None:
    """Seed 1, horizon 300 (warm-up 30): the same arrivals in both programs
    (Poisson at 3 per second). Every request after the warm-up hits its system
    prompt (the 8 prompts are cached within seconds and take 16 000 of the
    pool's 160 000 tokens); it prefills its message, uniform 100–900, plus the
    part of the system prompt's last block that is not full (`K mod 16`: 0 to
    14 tokens), so 500 + 5 on average where the single-turn program prefills its
    whole prompt, 2 000 on average (measured: 514.2 against 2 023.6; TTFT 10.5
    against 44.0 ms)."""
    single, system = run(SINGLE), run(SYSTEM)
    assert single.arrivals == system.arrivals
    assert single.observe("hit").mean == 0.0
    assert system.observe("hit").mean == 1.0
    values = [s.value for s in system.samples["prefill_tokens"] if s.time >= 30]
    assert values and all(100 <= v < 900 + 14 for v in values)
    assert system.observe("prefill_tokens").mean == pytest.approx(505, abs=25)
    assert single.observe("prefill_tokens").mean == pytest.approx(2000, abs=60)
    assert system.observe("prefill_tokens").mean < 0.3 * single.observe("prefill_tokens").mean
    assert system.observe("ttft").mean < 0.4 * single.observe("ttft").mean
    assert system.pool("kv").preemptions == 0


def test_one_system_prompt_for_all_leaves_only_the_message_to_prefill() -> None:
    """`--set prompts=1`: every request's system prompt is prompt 1, 1 600
    tokens (100 full blocks), so a hit prefills exactly the message, 100–900."""
    r = run(SYSTEM, sets={"prompts": "1"}, horizon=120)
    values = [s.value for s in r.samples["prefill_tokens"] if s.time >= 12]
    assert r.observe("hit").mean == 1.0 and values and all(100 <= v < 900 for v in values)


def test_the_shared_subagents_prefill_less_than_vllm_spawn() -> None:
    """Seed 2, horizon 400 (warm-up 40): the same parents (the same draws).
    With the per-session cache a child's first request prefills its parent's
    whole context again (thousands of tokens); sharing leaves it its own
    message (`~exp(500)`), the parent's output of the delegating turn
    (`~exp(200)`) and a straddling block. Measured: prefill 960 against 2 492
    tokens, hit 0.97 against 0.69, children's first requests (228 in each)
    727 against 7 452."""
    spawn, shared = run(SPAWN, seed=2, horizon=400), run(SHARED, seed=2, horizon=400)
    assert spawn.arrivals == shared.arrivals
    assert shared.observe("prefill_tokens").mean < 0.6 * spawn.observe("prefill_tokens").mean
    assert shared.observe("hit").mean > 0.9 > 0.75 > spawn.observe("hit").mean

    def first_of_children(r: serq.Report) -> list[float]:
        return [s.value for s in r.samples["prefill_tokens"] if s.session >= CHILD and s.turn == 1]

    kids_spawn, kids_shared = first_of_children(spawn), first_of_children(shared)
    assert len(kids_spawn) > 100 and len(kids_shared) > 100
    assert sum(kids_shared) / len(kids_shared) < 1000 < 4000 < sum(kids_spawn) / len(kids_spawn)


def test_without_delegation_the_shared_subagent_program_is_vllm_spawn() -> None:
    """`--set q=0`: no child and no delegating turn; the chain (the task, an
    empty segment, then the session's own) caches what the per-session entry
    caches, so the observations and the client table are the same."""
    a = run(SPAWN, sets={"q": "0"}, horizon=300)
    b = run(SHARED, sets={"q": "0"}, horizon=300)
    for name in ["hit", "prefill_tokens", "ttft", "tpot", "response"]:
        assert a.observe(name) == b.observe(name), name
    assert a.pool("kv").evicted_units == b.pool("kv").evicted_units


@pytest.mark.parametrize("path, seed", [(SYSTEM, 3), (SHARED, 3)])
def test_the_shared_programs_are_deterministic(path: str, seed: int) -> None:
    one, two = run(path, seed=seed, horizon=150), run(path, seed=seed, horizon=150)
    assert one.to_json() == two.to_json()
    assert run(path, seed=seed + 1, horizon=150).to_json() != one.to_json()

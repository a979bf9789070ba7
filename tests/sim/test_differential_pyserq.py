"""A differential test against the Rust original, through its Python binding
``pyserq`` (0.1.6, on PyPI): fixed traces of agent sessions replayed through
both simulators on a vLLM-like step engine under KV pressure.

Nothing random is left: the trace is replayed ``ordered``, token counts are
whole numbers, think times and session spacing are fixed, and every constant
of the step cost is a power of two, so the floating-point times of both
simulators are exact and compared with ``==``.  Compared per scenario:

* every admission of the KV request (a first one and each one after a
  preemption): its time, session, turn and prefilled tokens — ours from an
  ``observe`` at the top of the hold's body, pyserq's from the observation its
  engine records for each admission (``llm.prefill``);
* turns and ended sessions; the KV pool's admissions, preemptions, evicted
  entries and units, rejections and ``stuck`` sessions; the engine's
  iterations; TTFT, TPOT and response time (counts equal, means equal up to
  summation order).  (The chunked scenario has 17 sessions ``stuck``,
  preempted again before passing their last preemption's position, in both.)

pyserq speaks a later syntax than ours: a deployment file (``fn main()``, a
``device``, an ``engine`` with a ``scheduler`` and a ``worker``) and a
workload file of its own; its engine keeps a request's state and admits it
with a ``taking … reuse … cache`` clause, where ours writes the request as a
``hold`` with ``at admission`` bindings (the request of ``lib/vllm.sq``,
written out here so the test does not move with edits to the library).

Differences by design (each pinned by a test below):

* A preempted request whose resumption can no longer fit in the pool (its
  ``known`` tokens exceed the pool's cap) is **rejected** here when it re-joins
  (``rej``; the session ends, docs/simulator.md "The step engine"); pyserq
  0.1.6 leaves it waiting at the head of the queue for ever (its report's
  ``over_cap``) and the engine idles with work.  The pressure scenarios never
  reach that case.
* pyserq's engine keeps ``request.known`` across preemptions.  The request
  written in the specification (language §10.2) recomputes it at every
  admission from ``computed``, the position its last attempt reached: a
  request preempted during its decode, re-admitted, and preempted again before
  its re-prefill passes the prompt, forgets the tokens it had generated and
  decodes them again, where pyserq (and vLLM, which keeps a request's output
  tokens) re-prefills them.  This test found it; ``lib/vllm.sq`` now keeps
  ``known`` across preemptions (``kept``), as the specification's note says a
  request should ("the request keeps its output tokens"), and agrees exactly.
  The specification's plain formula on the chunked trace, where the case is
  frequent, is an expected failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

import serq
from serq.sim.stages.step import StepEngine

pyserq = pytest.importorskip("pyserq")
if getattr(pyserq, "__version__", None) != "0.1.6":
    pytest.skip("the pyserq programs below are written in pyserq 0.1.6's syntax", allow_module_level=True)

HORIZON = 2000  # every scenario drains long before it

# Step cost: max(omega + beta * (kv_decode + kv_prefill), tokens * a), with
# omega = 2^-8 s per iteration, beta = 2^-26 s per resident KV token and
# a = 2^-15 s per scheduled token: powers of two, so sums are exact.
OMEGA, BETA, A = "0.00390625", "1.490116119384765625e-8", "3.0517578125e-5"


# -- the traces ---------------------------------------------------------------------------


def _lcg(seed: int) -> Iterator[int]:
    """Knuth's MMIX LCG, high bits: a fixed generator, not Python's ``random``."""
    x = seed
    while True:
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        yield x >> 33


def agent_trace(seed: int, sessions: int, turns: tuple[int, int]) -> str:
    """Agent sessions: a task of 1500-4000 tokens, then each turn resends the
    whole context (previous prompt, its output, a tool's output of 100-1500
    tokens); 40-400 output tokens; tool calls of 0.25-2 s in steps of 1/8 s."""
    gen = _lcg(seed)

    def draw(lo: int, hi: int) -> int:
        return lo + next(gen) % (hi - lo + 1)

    rows = ["session,turn,new,out,think"]
    for s in range(sessions):
        prompt = draw(1500, 4000)
        n = draw(*turns)
        for t in range(1, n + 1):
            out = draw(40, 400)
            think = draw(2, 16) / 8 if t < n else 0.0
            rows.append(f"{s},{t},{prompt},{out},{think}")
            prompt += out + draw(100, 1500)
    return "\n".join(rows) + "\n"


# -- the programs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    seed: int
    sessions: int
    turns: tuple[int, int]
    blocks: int  # KV blocks of 16 tokens
    spacing: float  # seconds between session arrivals (a power-of-two fraction)
    chunk: int = 0  # vLLM's long_prefill_token_threshold; 0: none
    keep_known: bool = True  # keep `known` across preemptions, as lib/vllm.sq and pyserq's engine do


def ours(sc: Scenario, trace: str) -> str:
    chunk = f"chunk residents + queued(reqs) > 1 ? {sc.chunk} : 0; " if sc.chunk else ""
    if sc.keep_known:
        known = "max(kept, computed < prompt ? prompt : computed + 1)"
        kept, keep = "\n  set kept = 0;", "\n    set kept = known;"
    else:
        known, kept, keep = "computed < prompt ? prompt : computed + 1", "", ""
    return f"""
let bs = 16;
pool kv {{ cap {sc.blocks} * bs; block bs; evict lru; preempt lifo; }}
pool reqs {{ cap 16; admit via llm; }}
stage llm : step {{
  budget 2048;
  {chunk}cost max({OMEGA} + {BETA} * (kv_decode + kv_prefill), tokens * {A});
  memory kv;
}}
stage gate : delay;
stage tool : delay;
workload {{
  arrive batch({sc.sessions});
  trace "{trace}" ordered;
  hidden out;
  session {{
    run gate (serial * {sc.spacing});
    turn;
    loop {{
      request;
      branch (more) {{ tool think; turn; }} else {{ end; }}
    }}
  }}
}}
// lib/vllm.sq's vllm_request, written out
server {{
  set prompt = new;{kept}
  hold reqs (1), kv (min(known, hit + budget_left(llm)))
       at admission (known = {known},
                     hit = min(cachedin(kv), floor((known - 1) / bs) * bs)) {{{keep}
    set c = min(cached, floor((known - 1) / bs) * bs);
    observe prefill_tokens = known - c;
    prefill on llm (known - c) growing kv;
    decode on llm (out - 1 - (known - prompt)) growing kv;
  }} cache (prompt + out);
}}
run {{ horizon {HORIZON}; }}
"""


def theirs_deployment(sc: Scenario) -> str:
    if sc.chunk:
        cap = " each at most (threshold)"
        let = f"\n      let threshold = running.count + waiting.count > 1 ? {sc.chunk} : inf;"
    else:
        cap = let = ""
    return f"""
let bs = 16;
fn main() {{
  device gpu {{ kv cap {sc.blocks} * bs; }}
  engine llm on gpu {{
    reqs cap 16;
    tokens cap 2048;
    scheduler {{{let}
      advance running{cap};
      admit waiting while (running.preempted == 0){cap}
        taking reqs (1), kv (min(request.known, request.hit + budget_left(llm)))
        reuse (floor((request.known - 1) / bs) * bs)
        cache (request.input + request.output);
    }}
    worker {{ forward (max({OMEGA} + {BETA} * (batch.kv_decode + batch.kv_prefill), batch.tokens * {A})); }}
  }}
  pool kv on gpu {{ block bs; evict lru; preempt lifo; }}
  pool reqs on llm {{ queue fifo; }}
  server (new, hidden out) {{ llm (new, out); }}
}}
"""


def theirs_workload(sc: Scenario, trace: str) -> str:
    return f"""
stage gate : delay;
stage tool : delay;
workload {{
  arrive batch({sc.sessions});
  trace "{trace}" ordered;
  send (new, out);
  session {{
    run gate (cost(gate, serial * {sc.spacing}));
    loop {{
      turn;
      if (more) {{ run tool (cost(tool, think)); }} else {{ end; }}
    }}
  }}
}}
"""


# -- running both ----------------------------------------------------------------------------


class VictimLog(StepEngine):
    """The default engine, noting who grew and whom it preempted."""

    log: list[tuple[int, int]] = []

    def choose_victim(self, pool: Any, grower: Any) -> Any:
        victim = super().choose_victim(pool, grower)
        if victim is not None:
            type(self).log.append((grower.serial, victim.serial))
        return victim


def write(tmp: Path, sc: Scenario, trace_text: str) -> None:
    (tmp / "trace.csv").write_text(trace_text)
    (tmp / "ours.sq").write_text(ours(sc, "trace.csv"))
    (tmp / "deployment.sq").write_text(theirs_deployment(sc))
    (tmp / "workload.sq").write_text(theirs_workload(sc, "trace.csv"))


def run_ours(tmp: Path, engines: dict[str, type] | None = None) -> Any:
    return serq.run(serq.load(tmp / "ours.sq"), engines=engines)


def run_theirs(tmp: Path) -> Any:
    program = pyserq.compile(str(tmp / "deployment.sq"), workload=str(tmp / "workload.sq"), horizon=HORIZON)
    return pyserq.run(program)


def admissions_ours(report: Any) -> list[tuple[float, int, int, float]]:
    return [(s.time, int(s.session), int(s.turn), s.value) for s in report.samples["prefill_tokens"]]


def admissions_theirs(report: Any) -> list[tuple[float, int, int, float]]:
    o = report.observe("llm.prefill")
    return [(t, int(s), int(n), v) for t, s, n, v in zip(o.times, o.sessions, o.turns, o.samples)]


def summary(report: Any) -> dict[str, Any]:
    kv, llm = report.pool("kv"), report.stage("llm")
    out: dict[str, Any] = {
        "turns": report.turns,
        "ended": report.ended,
        "kv admissions": kv.admissions,
        "preemptions": kv.preemptions,
        "evicted entries": kv.evicted_entries,
        "evicted units": kv.evicted_units,
        "rejected": kv.rejected,
        "stuck": kv.stuck,  # preempted again without progress past the last preemption
        "iterations": llm.iterations,
    }
    for row in ("ttft", "tpot", "response"):
        out[f"{row} count"] = report.client[row].count
    return out


def first_difference(a: list[Any], b: list[Any]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"admission {i}: ours {x}, pyserq {y}"
    return f"ours {len(a)} admissions, pyserq {len(b)}"


def assert_same(ours_report: Any, theirs_report: Any) -> None:
    a, b = admissions_ours(ours_report), admissions_theirs(theirs_report)
    assert a == b, first_difference(a, b)
    assert summary(ours_report) == summary(theirs_report)
    for row in ("ttft", "tpot", "response"):
        # the same samples, summed in another order: equal to the last bits
        assert ours_report.client[row].mean == pytest.approx(theirs_report.client[row].mean, rel=1e-12), row


# -- the scenarios ---------------------------------------------------------------------------

# (scenario, at least this many preemptions, at least this many of another resident)
SCENARIOS = {
    # 30 agents 1.375 s apart, 4-10 turns, 3000 blocks: 331 admissions,
    # 112 preemptions, 7 of them of another resident than the grower
    "agents_tight": (Scenario(seed=3, sessions=30, turns=(4, 10), blocks=3000, spacing=1.375), 100, 5),
    # 24 agents 2.125 s apart on 2000 blocks: 214 admissions, 51 preemptions
    # (3 of another resident)
    "agents_sparse": (Scenario(seed=4, sessions=24, turns=(4, 10), blocks=2000, spacing=2.125), 40, 1),
    # the first trace with long prefills chunked at 512 tokens (vLLM's
    # long_prefill_token_threshold) while more than one request is present:
    # 468 admissions, 249 preemptions (119 of another resident)
    "agents_chunked": (
        Scenario(seed=3, sessions=30, turns=(4, 10), blocks=3000, spacing=1.375, chunk=512),
        200,
        100,
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_both_simulators_admit_preempt_and_serve_alike(name: str, tmp_path: Path) -> None:
    sc, min_preempt, min_other = SCENARIOS[name]
    write(tmp_path, sc, agent_trace(sc.seed, sc.sessions, sc.turns))
    mine, theirs = run_ours(tmp_path), run_theirs(tmp_path)
    assert mine.pool("kv").preemptions >= min_preempt  # under pressure
    assert mine.pool("kv").rejected == 0
    assert_same(mine, theirs)
    if min_other:
        # who preempted whom, from our engine run iteration by iteration (an
        # overridden hook turns coalescing off): the same run, and growths
        # that preempted a resident other than the grower
        VictimLog.log = []
        logged = run_ours(tmp_path, {"llm": VictimLog})
        assert admissions_ours(logged) == admissions_ours(mine)
        assert len(VictimLog.log) == mine.pool("kv").preemptions
        assert sum(1 for grower, victim in VictimLog.log if grower != victim) >= min_other


@pytest.mark.xfail(
    strict=True,
    reason="the specification's request (language §10.2) recomputes `known` "
    "from `computed` at each admission, so a request preempted again before its re-prefill "
    "passes the prompt forgets its generated tokens; pyserq's engine keeps `request.known` "
    "(first difference: session 23 turn 1 re-admitted at 33.43 s, 2575 tokens here, 2577 there)",
)
def test_the_plain_request_forgets_generated_tokens_on_a_second_preemption(tmp_path: Path) -> None:
    sc, _, _ = SCENARIOS["agents_chunked"]
    sc = Scenario(**{**sc.__dict__, "keep_known": False})
    write(tmp_path, sc, agent_trace(sc.seed, sc.sessions, sc.turns))
    assert_same(run_ours(tmp_path), run_theirs(tmp_path))


def test_a_resumption_that_can_no_longer_fit_is_rejected_here_and_waits_there(tmp_path: Path) -> None:
    """One request of 900 + 300 tokens on 64 blocks (1024 tokens): it prefills,
    decodes until the pool is full, and preempts itself; it would resume with
    1025 known tokens, 65 blocks.  Here it is rejected and its session ends;
    pyserq leaves it at the head of the queue, asking for more than the cap,
    for ever.  Up to that point both agree."""
    sc = Scenario(seed=0, sessions=1, turns=(1, 1), blocks=64, spacing=1.5)
    write(tmp_path, sc, "session,turn,new,out,think\n0,1,900,300,0\n")
    mine, theirs = run_ours(tmp_path), run_theirs(tmp_path)
    assert admissions_ours(mine) == admissions_theirs(theirs) == [(0.0, 0, 1, 900.0)]
    assert mine.stage("llm").iterations == theirs.stage("llm").iterations
    assert mine.pool("kv").preemptions == theirs.pool("kv").preemptions == 1
    # ours: rejected when the preempted hold re-joins; the session ends
    assert (mine.pool("kv").rejected, mine.ended) == (1, 1)
    # pyserq: not rejected, never ends; the head of the queue asks for 1025 tokens
    assert (theirs.pool("kv").rejected, theirs.ended) == (0, 0)
    assert theirs.pool("kv").over_cap is not None and theirs.pool("kv").over_cap[1] == 1025
    assert theirs.stage("llm").idle_with_work

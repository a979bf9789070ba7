"""The per-turn shortcuts (issue 42, item 4) give the numbers of the code they
replace: a ``turn`` block reads the workload stream once into a local, and
its draws are still the (serial, turn, WORKLOAD) stream's, in statement order;
a prefill and the decode after it are one submission when nothing the decode's
tokens read can change meanwhile, and the report is the two statements'."""

from __future__ import annotations

from pathlib import Path

import pytest

import serq
from serq.sim import rng
from serq.sim.simulator import Simulator

PROGRAM = """
stage think : delay;
workload {
  arrive poisson(1);
  init { set K = 7; }
  turn { set x = ~uniform(0, 1); set y = K > 0 ? ~uniform(10, 20) : 0; }
}
session { turn; run think (1); turn; }
run { horizon 10; warmup 0; seed 3; }
"""


def test_a_turn_block_binds_the_workload_stream_once() -> None:
    sim = Simulator(serq.load(PROGRAM), seed=3, horizon=10.0, warmup=0.0)
    text = sim.code.text
    turn = text[text.index("def _turn"):text.index("def _body")]
    assert turn.count("_wr = s.wrng") == 1 and turn.count("s.wrng") == 1
    init = text[text.index("def _init"):text.index("def _turn")]
    assert "wrng" not in init  # init draws nothing: no stream is bound


def test_a_turns_draws_are_its_workload_streams_in_order() -> None:
    program = serq.load(PROGRAM)
    names = program.attributes
    sim = Simulator(program, seed=3, horizon=10.0, warmup=0.0)
    s = sim.spawn()
    for turn in (1, 2):
        s.do_turn()
        ref = rng.workload_stream(sim.root, s.serial, turn)
        x = ref.random()  # ~uniform(0, 1): lo + (hi - lo) * u
        y = 10.0 + (20.0 - 10.0) * ref.random()  # K = 7 > 0: the second draw of the turn
        assert (s.a[names.index("x")], s.a[names.index("y")]) == (x, y)
        assert 0.0 <= x < 1.0 and 10.0 <= y < 20.0


# -- a prefill and its decode, one submission (StepEngine.submit_then) -------------------------

VLLM = str(Path(__file__).resolve().parents[2] / "programs/multi-turn/vllm.sq")

#: one engine, a prefill then a decode growing one pool; DECODE is the decode's tokens
CHAIN = """
pool kv { cap CAP; block 16; evict lru; preempt lifo; }
pool reqs { cap 8; admit via engine; }
stage engine : step { budget 512; cost 1e-3 + 1e-6 * tokens + 1e-9 * kv_decode; memory kv; }
stage tool : delay;
workload {
  arrive poisson(40);
  turn { set n = ~uniform(50, 400); set o = ~exp(60); set more = ~bernoulli(0.5); }
}
session {
  turn;
  loop {
    hold reqs (1), kv (n) { prefill on engine (n) growing kv; decode on engine (DECODE) growing kv; }
    branch (more) { tool (~exp(0.2)); turn; } else { end; }
  }
}
run { horizon 30; warmup 3; seed 5; }
"""


def _chain_program(decode: str = "o", cap: int = 20000) -> str:
    return CHAIN.replace("DECODE", decode).replace("CAP", str(cap))


def _body(program: serq.Program) -> str:
    text = Simulator(program, seed=1, horizon=1.0, warmup=0.0).code.text
    return text[text.index("def _body"):]


def test_vllm_request_submits_its_prefill_and_decode_together() -> None:
    body = _body(serq.load(VLLM))
    assert body.count(".submit_then(s, ") == 1 and "if not s.chained:" in body
    assert body.count("'decode'") == 1  # (the session's own decode: when the engine did not submit it)


def test_a_decode_that_reads_what_moves_while_the_prefill_runs_is_submitted_by_the_session() -> None:
    for decode in ("o + ~exp(5)", "o + now", "o + used(kv)", "o + queue(engine)"):
        body = _body(serq.load(_chain_program(decode)))
        assert "submit_then" not in body, decode
    for decode in ("max(0, floor(o) - 1)", "ln(exp(o / 100)) * pow(o, 1) / sqrt(o * o) * 100"):
        assert "submit_then" in _body(serq.load(_chain_program(decode))), decode


def _counted_chains(monkeypatch, program: serq.Program, **kw):  # type: ignore[no-untyped-def]
    from serq.sim.stages.step import StepEngine

    chained = [0]
    chain = StepEngine._chain

    def counting(self, prefill, work):  # type: ignore[no-untyped-def]
        chained[0] += 1
        chain(self, prefill, work)

    monkeypatch.setattr(StepEngine, "_chain", counting)
    return serq.run(program, **kw), chained[0]


def _unchained(monkeypatch, program: str, **kw):  # type: ignore[no-untyped-def]
    """The report with every prefill and its decode compiled as two submissions."""
    from serq.sim import compile as compiler

    with monkeypatch.context() as m:
        m.setattr(compiler, "_chainable", lambda a, b: False)
        return serq.run(serq.load(program), **kw)


@pytest.mark.parametrize("case", ["vllm", "preempting", "zero decodes", "another hook"])
def test_the_engine_submitting_the_decode_keeps_the_report(case: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The same report as the session submitting it: on vLLM's program, on a
    small pool that preempts (a preempted prefill's decode is not submitted),
    with decodes of 0 tokens (the session goes on at the prefill's end), and
    with an engine class that overrides a hook (it never submits a decode)."""
    from serq.sim.stages.step import StepEngine

    class Hooked(StepEngine):
        def on_finish(self, job):  # type: ignore[no-untyped-def]
            pass

    program, kw = {"vllm": (VLLM, {"horizon": 120.0, "warmup": 12.0}),
                   "preempting": (_chain_program(cap=1200), {}),
                   "zero decodes": (_chain_program("o < 30 ? 0 : o"), {}),
                   "another hook": (_chain_program(), {"engines": {"engine": Hooked}})}[case]
    report, chained = _counted_chains(monkeypatch, serq.load(program), **kw)
    assert report.to_json() == _unchained(monkeypatch, program, **kw).to_json()
    if case == "another hook":
        assert chained == 0
    else:
        assert chained > 100
    if case == "preempting":
        assert report.pool("kv").preemptions > 10


def test_a_decode_amount_that_is_an_error_is_the_same_error(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A decode of a negative number of tokens is not submitted by the engine:
    the session wakes at the prefill's end and its own submission gives the
    error, the same message at the same time as two statements give it — also
    in a turn after one whose decode the engine did submit."""
    from serq.errors import SerqRuntimeError

    program = _chain_program("turn_no < 2 ? o : 0 - 1")
    with pytest.raises(SerqRuntimeError) as chained:
        serq.run(serq.load(program))
    with pytest.raises(SerqRuntimeError) as plain:
        _unchained(monkeypatch, program)
    assert str(chained.value) == str(plain.value) and "decode" in str(chained.value)

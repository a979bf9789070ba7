"""The per-turn shortcuts (issue 42, item 4) give the numbers of the code they
replace: a ``turn`` block reads the workload stream once into a local, and
its draws are still the (serial, turn, WORKLOAD) stream's, in statement order."""

from __future__ import annotations

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

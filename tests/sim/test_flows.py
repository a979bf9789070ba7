"""The flow solver (serq/sim/flows.py, issue 23): rates and end times worked
out by hand for two and three flows under `maxmin` and `bottleneck`."""

from __future__ import annotations

import pytest

from serq.sim.flows import FlowSet, bottleneck, maxmin


def test_two_reads_from_one_sender_share_its_egress() -> None:
    # stages: 0 the sender's egress (1), 1 and 2 the two receivers' ingress (1 each); two flows
    # of work 1 from t = 1: the egress is the bottleneck, half each, both end at 3
    for policy in ("maxmin", "bottleneck"):
        fs = FlowSet([1.0, 1.0, 1.0], policy)
        a = fs.start(1.0, [0, 1], 1.0)
        b = fs.start(1.0, [0, 2], 1.0)
        assert fs.rate == {a: 0.5, b: 0.5}
        assert fs.run() == {a: 3.0, b: 3.0}


def test_three_flows_two_stages_maxmin() -> None:
    # A (cap 1) carries f1, f2; B (cap 2) carries f1, f3: A fills first at 1/2 each; f3 takes
    # the rest of B, 3/2, and ends at 2/3; f1 and f2 stay at 1/2 and end at 2
    assert maxmin([[0, 1], [0], [1]], [1.0, 2.0]) == [0.5, 0.5, 1.5]
    fs = FlowSet([1.0, 2.0], "maxmin")
    f1, f2, f3 = fs.start(0.0, [0, 1], 1.0), fs.start(0.0, [0], 1.0), fs.start(0.0, [1], 1.0)
    t, f = fs.next_end()  # type: ignore[misc]
    assert (t, f) == (pytest.approx(2 / 3, abs=1e-15), f3)
    fs.finish(t, f)
    assert fs.carried[1] == pytest.approx(2 / 3 * (0.5 + 1.5) / 2.0)  # B full until f3 ends
    assert fs.rate == {f1: 0.5, f2: 0.5}
    ends = fs.run()
    assert ends[f1] == pytest.approx(2.0) and ends[f2] == pytest.approx(2.0)


def test_three_flows_two_stages_bottleneck() -> None:
    # f1 = min(1/2, 2/2) = 1/2, f2 = 1/2, f3 = 2/2 = 1: f3 ends at 1, f1 and f2 at 2; B carries
    # 3/4 of its capacity until f3 ends (the share bottleneck leaves unused)
    assert bottleneck([[0, 1], [0], [1]], [1.0, 2.0]) == [0.5, 0.5, 1.0]
    fs = FlowSet([1.0, 2.0], "bottleneck")
    f1, f2, f3 = fs.start(0.0, [0, 1], 1.0), fs.start(0.0, [0], 1.0), fs.start(0.0, [1], 1.0)
    assert fs.next_end() == (1.0, f3)
    fs.finish(1.0, f3)
    assert fs.carried[1] == 0.75
    # alone on B now, f1 is still held to 1/2 by A
    assert fs.rate == {f1: 0.5, f2: 0.5}
    assert fs.run() == {f1: 2.0, f2: 2.0}


def test_a_flow_starting_later_slows_the_others_from_then() -> None:
    # one stage of capacity 2: f1 alone at 2 from 0; f2 joins at 0.25 (f1 has 0.5 done), both at 1
    fs = FlowSet([2.0], "maxmin")
    f1 = fs.start(0.0, [0], 1.0)
    f2 = fs.start(0.25, [0], 1.0)
    assert fs.rate == {f1: 1.0, f2: 1.0}
    t, f = fs.next_end()  # type: ignore[misc]
    assert (t, f) == (0.75, f1)  # f1's last 0.5 at rate 1
    fs.finish(t, f)
    assert fs.run() == {f2: 1.0}  # f2 had 0.5 left at 0.75, alone at 2


def test_progressive_filling_ties_go_to_the_lowest_stage() -> None:
    # two stages fill at once (each 1 for one flow): both flows frozen at 1, nothing left over
    assert maxmin([[0], [1], [0, 1]], [2.0, 2.0]) == [1.0, 1.0, 1.0]
    # a near tie: stage 0 (0.3) fills first at 0.15 a flow; stage 1 (0.1 + 0.2, an ulp more)
    # leaves its other flow the ulp's worth on top, never less
    rates = maxmin([[0, 1], [0], [1]], [0.3, 0.1 + 0.2])
    assert rates[0] == rates[1] == 0.15 and rates[2] >= 0.15


@pytest.mark.parametrize("bad", [
    lambda: FlowSet([1.0], "fair"),
    lambda: FlowSet([0.0], "maxmin"),
    lambda: FlowSet([1.0], "maxmin").start(0.0, [0, 0], 1.0),
])
def test_bad_input_is_refused(bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        bad()

"""Runs that do not settle end with a message instead of hanging (semantics §1.3)."""

from __future__ import annotations

import pytest

import serq


@pytest.mark.parametrize("program, message", [
    # a loop that never waits
    ("workload { arrive batch(1); }\nsession { loop { set x = x + 1; } }",
     "ran a loop a million times without waiting"),
    # a loop whose pass reads 4 096 keys: stopped after 245 passes, not a million (issue 38: 40 minutes)
    ("workload { arrive batch(1); }\nsession { loop { choose j in 4096 by (j); } }",
     "ran a loop a million times without waiting"),
    # a loop of zero-work runs: ready again at the same instant, forever
    ("stage s : delay;\nworkload { arrive batch(1); }\nsession { loop { run s (0); } }",
     "became ready more than 1000 times at that instant"),
    # two sessions taking turns at an empty hold, all at time 0
    ("pool P { cap 1; }\nworkload { arrive batch(2); }\nsession { loop { hold P (1) { } } }",
     "became ready more than 1000 times at that instant"),
    # a closed population whose sessions end at once, each replaced at once
    ("pool P { cap 0; }\nworkload { arrive closed(4); init { set u = 5; } }\nsession { hold P (u) { } }",
     "closed-population sessions ended 4001 times at that instant"),
])
def test_a_run_that_does_not_settle_stops_with_an_error(program: str, message: str) -> None:
    with pytest.raises(serq.SerqError, match=message):
        serq.run(serq.load(program + "\nrun { horizon 5; }"))


def test_a_guard_that_is_not_zero_or_one_is_a_run_time_error() -> None:
    with pytest.raises(serq.SerqError, match=r"`branch \(x\)`: the guard is 2, not 0 or 1"):
        serq.run(serq.load("workload { arrive batch(1); init { set x = 2; } }\n"
                           "session { branch (x) { end; } }\nrun { horizon 5; }"))


def test_a_negative_amount_of_work_is_a_run_time_error() -> None:
    with pytest.raises(serq.SerqError, match=r"the amount is -5, not a number of units, tokens or seconds"):
        serq.run(serq.load("stage d : delay;\nworkload { arrive batch(1); init { set z = 0; } }\n"
                           "session { run d (z - 5); }\nrun { horizon 5; }"))


@pytest.mark.parametrize("index, shown", [("2", "2"), ("0.5", "0.5"), ("0/0", "NaN"), ("-1", "-1"), ("1/0", "inf")])
@pytest.mark.parametrize("use", ["hold kv[i] (1) { }", "run s[i] (1);", "set x = used(kv[i]);"])
def test_an_index_outside_its_array_is_a_run_time_error(index: str, shown: str, use: str) -> None:
    """A member picked at run time is a whole number 0 … n−1; anything else
    stops the run with the index's value and the array's range."""
    program = (f"stage s[2] : delay;\npool kv[2] {{ cap 5; }}\nworkload {{ arrive poisson(1); }}\n"
               f"session {{ set i = {index}; {use} }}\nrun {{ horizon 10; }}")
    with pytest.raises(serq.SerqError, match=rf"index `(kv|s)\[…\]` is {shown}: a member of an array of 2 is 0 to 1"):
        serq.run(serq.load(program))


@pytest.mark.parametrize("index", ["1", "1.0", "-0.0", "2 - 1"])
def test_an_index_equal_to_a_whole_number_picks_that_member(index: str) -> None:
    program = (f"stage s[2] : delay;\nworkload {{ arrive poisson(1); }}\n"
               f"session {{ set i = {index}; run s[i] (1); }}\nrun {{ horizon 10; }}")
    done = [s.completed for s in serq.run(serq.load(program)).stages]
    assert done == ([10, 0] if index == "-0.0" else [0, 10])


def test_sessions_created_inside_one_event_count_against_the_event_budget() -> None:
    # `spawn (1e9)` and `batch(1e6)` start their sessions inside one event: 22 s and 37 s before
    # the live limit stopped them; with a budget, each session counts as an event
    for src in ("stage d : delay;\nworkload { arrive batch(1); }\nsession { spawn (1e9) into kids { } join kids; }\n",
                "stage d : delay;\nworkload { arrive batch(1000000); }\nsession { run d (1); }\n"):
        with pytest.raises(serq.SerqError, match="it handled its budget of 5,000 events"):
            serq.run(serq.load(src + "run { horizon 5; }\n"), max_events=5000)
    # and a run under its budget is the same run
    report = serq.run(serq.load("stage d : delay;\nworkload { arrive batch(10); }\nsession { run d (1); }\n"
                                "run { horizon 5; }\n"), max_events=21)
    assert report.ended == 10 and report.events == 10

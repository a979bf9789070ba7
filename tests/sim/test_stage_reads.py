"""A stage's own expressions — a `ps` rate, a step stage's `cost`, `budget`,
`chunk` and `serve by` keys — may read the observables of any stage: itself,
or one declared below it (language §17: functions of pools and stages may be
called at every moment but the constant one).  They were an `IndexError` at the
start of the run (issue 38); a budget that reads what it leaves itself is
refused when checking."""

from __future__ import annotations

import itertools

import pytest

import serq


def responses(src: str) -> dict[int, float]:
    report = serq.run(serq.load(src))
    return {int(r[1]): r[3] for r in report.samples["response"]}


def test_a_ps_rate_may_read_its_own_population() -> None:
    # ps(queue(s)): the rate is the number present, so each job has rate 1 — a delay stage.
    # Jobs of 1 and 2 s at 0 end at 1 and 2 (ps(1) would end them at 2 and 3).
    src = """
stage s : ps(queue(s));
workload { arrive batch(2); }
session { run s (serial + 1); observe response = now; }
run { horizon 10; }
"""
    assert responses(src) == {0: 1.0, 1: 2.0}


def test_a_ps_rate_may_read_a_stage_declared_below_it() -> None:
    # at 0, session 0 puts 10 s on the delay stage b, session 1 puts 4 s on a; a's rate is read
    # when its population changes, at the end of the instant: 1 + queue(b) = 2, so the 4 s take 2 s
    src = """
stage a : ps(1 + queue(b));
stage b : delay;
workload { arrive batch(2); }
session { branch (serial == 0) { run b (10); } else { run a (4); } observe response = now; }
run { horizon 20; }
"""
    assert responses(src) == {0: 10.0, 1: 2.0}


def test_a_step_cost_may_read_its_own_queue() -> None:
    # one prefill of 10 tokens, budget 4: iterations of 4, 4, 2 tokens while one job is present,
    # each costing 1 + queue(e) = 2 s: the prefill ends at 6
    src = """
pool kv { cap 100; }
stage e : step { budget 4; cost 1 + queue(e); memory kv; }
workload { arrive batch(1); }
session { hold kv (10) { run e prefill (10) growing kv; } observe response = now; }
run { horizon 20; }
"""
    assert responses(src) == {0: 6.0}


PROBES = ["queue({s})", "busy({s})", "work({s})", "est_lambda({s})", "est_rho({s})", "est_wait({s})",
          "price({s}, 1, 1)", "budget_left({s})"]
SLOTS = {
    "ps": "stage s : ps(1 + {p});\nstage e : step {{ cost 0.01; memory kv; }}\n",
    "cost": "stage s : ps(1);\nstage e : step {{ cost 0.01 + 1e-3 * min(1, {p}); memory kv; }}\n",
    "budget": "stage s : ps(1);\nstage e : step {{ budget 64 + {p}; cost 0.01; memory kv; }}\n",
    "chunk": "stage s : ps(1);\nstage e : step {{ chunk 8 + {p}; cost 0.01; memory kv; }}\n",
    "serve": "stage s : ps(1);\nstage e : step {{ serve by ({p}, remaining); cost 0.01; memory kv; }}\n",
}


@pytest.mark.parametrize("slot, probe, target", list(itertools.product(SLOTS, PROBES, ["s", "e", "t"])))
def test_every_observable_of_every_stage_may_be_read_by_every_stage_expression(slot: str, probe: str,
                                                                               target: str) -> None:
    # `s` and `e` read themselves or each other (one is below the other), `t` is declared below both
    src = ("pool kv { cap 1000; block 4; }\n" + SLOTS[slot].format(p=probe.format(s=target)) + "stage t : fifo;\n"
           "workload { arrive poisson(2); init { set n = ~uniform(5, 20); } }\n"
           "session { run s (~exp(0.3)); hold kv (n) { run e prefill (n) growing kv; run e decode (3) growing kv; }\n"
           "  run t (0.1); }\n"
           "run { horizon 30; }\n")
    try:
        program = serq.load(src)
    except serq.SerqError as err:  # only budget_left of a stage that is not a step one, or of itself
        assert probe.startswith("budget_left") and err.line is not None, err.render()
        return
    try:
        report = serq.run(program, max_events=200_000)
    except serq.SerqRuntimeError as err:  # a rate of 1 + budget_left(e) = inf: said where the rate is written
        assert (slot, probe, target) == ("ps", "budget_left({s})", "e"), err.render()
        assert err.render().startswith("<text>:2:14: stage `s`: the rate is inf, not a finite number ≥ 0")
        return
    assert report.ended > 0


@pytest.mark.parametrize("clause", ["budget", "chunk"])
def test_a_budget_that_reads_what_it_leaves_is_refused(clause: str) -> None:
    src = f"pool kv {{ cap 100; }}\nstage e : step {{ {clause} 64 + budget_left(e); cost 1; memory kv; }}\n"
    with pytest.raises(serq.SerqError) as err:
        serq.load(src)
    assert err.value.render().splitlines()[0] == (
        f"<text>:2:{19 + len(clause)}: stage `e`: the {clause} of `e` reads `budget_left`, which reads the budget and "
        "chunk of the stage it names: `e` → `e` comes back")


def test_two_budgets_that_read_each_others_leftovers_are_refused() -> None:
    src = ("pool kv { cap 100; }\n"
           "stage a : step { budget 8 + budget_left(b); cost 1; memory kv; }\n"
           "stage b : step { budget 8 + budget_left(a); cost 1; memory kv; }\n")
    with pytest.raises(serq.SerqError, match=r"`a` → `b` → `a` comes back"):
        serq.load(src)
    # one way is fine: a's budget reads b's leftover, b's budget is a number
    serq.load(src.replace("budget 8 + budget_left(a)", "budget 8"))

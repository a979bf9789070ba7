"""A `let` that lists its choices by name (issue 39, item 5; docs/language.md, "A choice
among names"): `let router = affinity in (random, …, affinity);` is worth the chosen name's
place, `--set router=NAME` picks by name, a whole place in range still works, and anything
else is a usage error that lists the choices; the names are constants; the list's static
rules stop at the name at fault; sweeps show the names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from frontend_util import cli_main, fails, load

import serq

ROOT = Path(__file__).resolve().parents[1]
AGENTS = str(ROOT / "programs" / "cluster" / "agents.sq")
SYSTEM = str(ROOT / "programs" / "cluster" / "system_prompt.sq")
ROUTERS = "`random`, `round_robin`, `least_requests`, `least_kv`, `power_of_two`, `affinity`"

# One session of one unit of work, served in 1 s by the slow design and 0.5 s by the fast:
# `done` is 1 or 0.5 exactly, whatever the seed.
TWO = """\
let design = slow in (slow, fast);
stage svc : fifo;
workload { arrive batch(1); }
session { run svc (design == fast ? 0.5 : 1); observe done = now; }
run { horizon 10; }
"""


def short_run(program: str, *sets: str) -> tuple[int, str]:
    """`serq run` of a cluster program for 15 s (warm-up 5), bounded by events."""
    args = [a for s in sets for a in ("--set", s)]
    return cli_main("run", program, "--horizon", "15", "--warmup", "5", "--max-events", "20000", *args)


def test_a_router_by_name_gives_the_report_of_its_number() -> None:
    by_name, by_number, other = (short_run(AGENTS, f"router={r}") for r in ("affinity", "5", "random"))
    assert by_name[0] == 0, by_name[1]
    assert by_name == by_number
    assert other[0] == 0 and other[1] != by_name[1]  # the name chose something: random differs


def test_the_default_is_the_place_of_the_named_choice() -> None:
    # agents.sq defaults to least_requests, place 2 of six; system_prompt.sq to prefix, place 6 of seven
    assert serq.load(AGENTS).constants["router"] == 2.0
    assert serq.load(SYSTEM).constants["router"] == 6.0
    assert serq.load(SYSTEM, sets=[("router", "affinity")]).constants["router"] == 5.0
    assert serq.load(AGENTS, sets=[("router", "round_robin")]).constants["router"] == 1.0


@pytest.mark.parametrize("value", ["9", "-1", "2.5", "6", "N", "1e999", "Affinity"])
def test_a_value_that_is_no_choice_is_a_usage_error_listing_the_choices(value: str) -> None:
    # 9 and 6 are past the last place (5), -1 before the first, 2.5 between two, `N` a
    # constant that is no choice, and names are case-sensitive
    code, out = cli_main("run", AGENTS, "--set", f"router={value}")
    assert code == 2
    lines = out.splitlines()
    assert lines[0] == f"error: --set router: `{value}` is not a choice of `let router`"
    assert lines[-1] == f"help: the choices are {ROUTERS}, or their places 0 to 5"


def test_a_near_name_gets_a_did_you_mean() -> None:
    code, out = cli_main("run", AGENTS, "--set", "router=afinity")
    assert code == 2
    assert out.splitlines() == [
        "error: --set router: `afinity` is not a choice of `let router`",
        "help: did you mean `affinity`?",
        f"help: the choices are {ROUTERS}, or their places 0 to 5",
    ]


def test_the_prefix_router_is_a_choice_of_system_prompt_only() -> None:
    code, out = cli_main("check", AGENTS, "--set", "router=prefix")
    assert code == 2 and "`prefix` is not a choice of `let router`" in out
    assert cli_main("check", SYSTEM, "--set", "router=prefix")[0] == 0


def test_the_names_are_constants_worth_their_place() -> None:
    p = load("let router = b in (a, b, c,);\n"          # a trailing comma is accepted
             "let k = c * 10 + router;\n"                # c is place 2: 20 + 1
             "stage svc : fifo;\nworkload { arrive batch(1); }\n"
             "session { branch (router == b) { run svc (3); } else { run svc (4); } observe done = now; }\n"
             "run { horizon 10; }\n")
    assert p.constants == {"router": 1.0, "k": 21.0}
    assert serq.run(p).observe("done").mean == 3.0  # the branch for `b` ran: 3 s of work


def test_a_choice_picks_its_branch_at_run_time() -> None:
    slow = serq.run(load(TWO)).observe("done").mean
    fast = serq.run(load(TWO, sets=[("design", "fast")])).observe("done").mean
    assert (slow, fast) == (1.0, 0.5)


def test_two_lets_may_share_a_name_at_the_same_place() -> None:
    p = load("let r1 = b in (a, b);\nlet r2 = a in (a, b, c);\nlet k = b;\n"
             "stage svc : fifo;\nworkload { arrive batch(1); }\nsession { run svc (1); }\nrun { horizon 10; }\n")
    assert p.constants == {"r1": 1.0, "r2": 0.0, "k": 1.0}


_REST = "stage svc : fifo;\nworkload { arrive batch(1); }\nsession { run svc (1); }\nrun { horizon 10; }\n"


@pytest.mark.parametrize(("first", "message", "col"), [
    ("let router = a in ();", "`let router` lists no choices", 16),
    ("let router = a in (a, b, a);", "`a` is listed twice among the choices of `let router`", 26),
    ("let router = c in (a, b);", "`c` is not among the choices of `let router`", 14),
    ("let router = 1 in (a, b);", "the value of `let router` is one of its choices, by name", 14),
    ('let router = args.number("r", 1) in (a, b);', "the value of `let router` is one of its choices, by name", 14),
    ("let router = a in (a, svc);", "the choice `svc` of `let router` is also a stage", 23),
    ("let router = a in (a, router);", "the choice `router` of `let router` is also a `let` constant", 23),
    ("let router = a in (a, now);", "`now` is a context variable; a choice may not take its name", 23),
    ("let r1 = a in (a, b); let r2 = b in (b, a);", "`b` is choice 0 of `let r2` but choice 1 of `let r1`", 38),
    ("let k = a; let router = a in (a, b);", "`a` is not a constant", 9),  # read before its `let`
])
def test_the_static_rules_of_a_choice_list_stop_at_the_name_at_fault(first: str, message: str, col: int) -> None:
    err = fails(first + "\n" + _REST)
    assert (err.message, err.line, err.col) == (message, 1, col)


def test_a_default_given_by_place_is_refused_with_the_name_at_that_place() -> None:
    err = fails("let router = 1 in (a, b);\n" + _REST)
    assert err.helps == ["choice 1 is `b`: write `b`"]
    err = fails("let router = afinity in (random, affinity);\n" + _REST)
    assert err.helps == ["did you mean `affinity`?"]


def test_a_file_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "p.sq"
    path.write_text("let N = 2;\nlet router = random in (random, affinity, random);\n" + _REST)
    code, out = cli_main("check", str(path))
    assert code == 1
    assert out.splitlines()[0] == f"{path}:2:43: `random` is listed twice among the choices of `let router`"


def test_a_sweep_over_names_shows_the_names_and_pairs_on_a_name(tmp_path: Path) -> None:
    path = tmp_path / "two.sq"
    path.write_text(TWO)
    base = ("sweep", str(path), "--set", "design=slow,fast", "--seeds", "1-2", "--jobs", "1", "--quiet",
            "--show", "observes.done.mean")
    code, out = cli_main(*base, "--csv")
    assert code == 0, out
    assert out.splitlines()[1:] == ["slow,2,-,1,0,2", "fast,2,-,0.5,0,2"]  # (settled: - , a batch is not judged)
    code, out = cli_main(*base, "--json", "--baseline", "design=slow")
    assert code == 0, out
    got = json.loads(out)
    assert [p["design"] for p in got["points"]] == ["slow", "fast"]
    assert got["paired"]["baseline"] == {"design": "slow"}
    # fast minus slow on the same seed: 0.5 - 1, on both seeds
    assert got["paired"]["points"] == [{"design": "fast", "pairs": 2,
                                        "observes.done.mean": {"mean": -0.5, "ci": 0, "n": 2}}]
    out_file = tmp_path / "rows.jsonl"
    assert cli_main(*base, "--out", str(out_file))[0] == 0
    assert [json.loads(x)["design"] for x in out_file.read_text().splitlines()] == ["slow", "slow", "fast", "fast"]


def test_a_sweep_with_a_name_that_is_no_choice_is_refused_before_any_run(tmp_path: Path) -> None:
    path = tmp_path / "two.sq"
    path.write_text(TWO)
    code, out = cli_main("sweep", str(path), "--set", "design=slow,fats", "--seeds", "1", "--jobs", "1", "--quiet")
    assert code == 2
    assert out.splitlines() == [
        "error: --set design: `fats` is not a choice of `let design`",
        "help: did you mean `fast`?",
        "help: the choices are `slow`, `fast`, or their places 0 to 1",
    ]


def test_a_queue_entry_reads_a_choice_as_it_reads_a_let() -> None:
    # one request of 2 units on a delay stage: 2 s quick, twice that slow
    src = ("let mode = quick in (quick, slow);\n"
           "queue P : prefill { serve delay; nic delay; prefill (p) { run (mode == slow ? 2 * p : p); } }\n"
           "workload { arrive batch(1); init { set n = 2; } }\n"
           "session { P.prefill (n); observe done = now; }\nrun { horizon 10; }\n")
    assert serq.run(load(src)).observe("done").mean == 2.0
    assert serq.run(load(src, sets=[("mode", "slow")])).observe("done").mean == 4.0


def test_an_aggregate_index_may_not_take_a_choices_name() -> None:
    err = fails("let router = a in (a, b);\nlet k = max a in 3 (a);\n" + _REST)
    assert (err.message, err.line, err.col) == ("`max a in …`: the index `a` is also a choice of `let router`", 2, 13)

"""Subagents (issue 11, docs/subagents.md): `spawn (COUNT) into NAME { set …; }`
and `join NAME;` — parsing, checks and their diagnostics, the session tree's
attributes, the order children start in, the join's wait, the random streams
of a tree, and the live-session guard."""

from __future__ import annotations

import pytest
from frontend_util import fails, load, where

import serq
from serq.errors import SerqRuntimeError
from serq.sim.population import CHILD_SERIALS

C0 = CHILD_SERIALS  # the first child's serial

# one root at time 0 (a Poisson stream stopped after one arrival)
ONE = "stage d : delay;\nworkload { arrive poisson(1); init { set t0 = now; } }\n"


def run1(body: str, **kw) -> serq.Report:
    return serq.run(load(ONE + body), seed=1, horizon=1000, arrivals=1, **kw)


def values(report: serq.Report, name: str) -> list[tuple[float, int, float]]:
    return [(s.time, s.session, s.value) for s in report.samples[name]]


# ---------------------------------------------------------------- the closed form


def harmonic(k: int) -> float:
    return sum(1.0 / i for i in range(1, k + 1))


FANOUT = """let k = 1;
stage d : delay;
workload { arrive poisson(0.5); init { set t0 = now; } }
session {
  branch (depth == 0) {
    spawn (k) into kids {}
    join kids;
    observe wait = now - t0;
  } else {
    run d (~exp(1));
  }
}
"""


@pytest.mark.parametrize("k", [1, 3, 8])
def test_a_root_joining_k_exponential_children_waits_the_harmonic_number(k: int) -> None:
    # the maximum of k independent Exp(1) service times on a delay stage has mean H_k
    program = load(FANOUT, sets=[("k", str(k))])
    hits = 0
    for seed in (1, 2, 3):
        o = serq.run(program, seed=seed, horizon=8000, warmup=100).observe("wait")
        assert o.count > 3500
        hits += abs(o.mean - harmonic(k)) <= o.ci
        assert o.mean == pytest.approx(harmonic(k), rel=0.05)
    assert hits >= 2


# ---------------------------------------------------------------- exact scenarios


def test_children_start_in_order_after_the_parents_own_statement() -> None:
    r = run1("""session {
  branch (depth == 0) {
    spawn (3) into kids { set c = 10 + serial; }
    observe after = 1;
    join kids;
    observe joined = now;
  } else {
    observe start = c;
    run d (1 + (serial - %d));
  }
}
""" % C0)
    # the parent's statement after the spawn runs first, then the children in child order
    assert values(r, "after") == [(0.0, 0, 1.0)]
    assert values(r, "start") == [(0.0, C0, 10.0), (0.0, C0 + 1, 10.0), (0.0, C0 + 2, 10.0)]
    assert values(r, "joined") == [(3.0, 0, 3.0)]  # the last child ends at 3
    assert r.ended == 4


def test_a_spawns_sets_are_evaluated_in_the_parent_at_the_spawn_after_the_childs_init() -> None:
    # `init` sets t0 = now (0) in the child; the spawn's `set t0 = …` then overrides it with the
    # parent's value, evaluated once, in the parent: every child gets the same draw
    r = run1("""session {
  branch (depth == 0) {
    set x = ~uniform(0, 1);
    spawn (2) into kids { set t0 = t0 + 7; set y = x; }
    join kids;
  } else {
    observe t = t0;
    observe y = y;
  }
}
""")
    assert [v for _, _, v in values(r, "t")] == [7.0, 7.0]
    ys = [v for _, _, v in values(r, "y")]
    assert ys[0] == ys[1] and 0.0 < ys[0] < 1.0


def test_join_with_no_child_outstanding_does_not_wait() -> None:
    r = run1("""session {
  join kids;
  observe t1 = now;
  spawn (depth == 0 ? 1 : 0) into kids {}
  join kids;
  observe t2 = now;
  join kids;
  observe t3 = now;
  run d (depth == 1 ? 2 : 0);
}
""")
    root = [v for _, s, v in values(r, "t3") if s == 0]
    assert [v for _, s, v in values(r, "t1") if s == 0] == [0.0]
    assert root == [2.0]  # the second join waited for the child; the third had nothing to wait for


def test_a_nested_spawn_gives_depth_parent_and_root() -> None:
    r = run1("""session {
  spawn (depth < 2 ? 2 : 0) into kids {}
  observe depth = depth;
  observe parent = parent;
  observe root = root;
  join kids;
}
""")
    sessions = [s for _, s, _ in values(r, "depth")]
    # the root, its two children, then the grandchildren (each child spawns when it runs)
    assert sessions == [0, C0, C0 + 1, C0 + 2, C0 + 3, C0 + 4, C0 + 5]
    assert [v for *_, v in values(r, "depth")] == [0, 1, 1, 2, 2, 2, 2]
    assert [v for *_, v in values(r, "parent")] == [-1, 0, 0, C0, C0, C0 + 1, C0 + 1]
    assert [v for *_, v in values(r, "root")] == [0] * 7
    assert r.ended == 7


def test_a_spawn_of_zero_makes_no_child() -> None:
    r = run1("session { spawn (0) into kids { set a = 1; } join kids; observe t = now; }\n")
    assert values(r, "t") == [(0.0, 0, 0.0)] and r.ended == 1


def test_tree_attributes_read_as_a_roots_without_spawn() -> None:
    r = run1("session { observe p = parent; observe d = depth; observe r = root; }\n")
    assert [values(r, n)[0][2] for n in ("p", "d", "r")] == [-1.0, 0.0, 0.0]


# ---------------------------------------------------------------- run-time errors


@pytest.mark.parametrize("count, shown", [("1.5", "1.5"), ("-1", "-1"), ("t0 - 1 / 0", "-inf"),
                                          ("1 / 0", "inf"), ("~uniform(0, 1) < 2 ? 0 / 0 : 1", "NaN")])
def test_a_count_that_is_not_a_whole_number_is_a_run_time_error_naming_the_line(count: str, shown: str) -> None:
    with pytest.raises(SerqRuntimeError) as info:
        run1("session {\n  spawn (%s) into kids {}\n}\n" % count)
    assert info.value.message.endswith(f"the count is {shown}, not a non-negative whole number")
    assert info.value.message.startswith("`spawn (") and " into kids`: " in info.value.message
    assert (info.value.line, info.value.col) == (4, 10)  # the count, as the program writes it


def test_a_tree_that_never_dies_out_meets_the_live_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERQ_MAX_LIVE", "50")
    with pytest.raises(SerqRuntimeError) as info:
        run1("session { spawn (2) into kids {} run d (1); join kids; }\n")
    assert info.value.message.endswith(
        "more than 50 sessions live at once (the limit): the session trees grow without end")
    assert any("never dies out" in h for h in info.value.helps)


# ---------------------------------------------------------------- check errors

SPAWN = "stage d : delay;\n"
POOLED = "pool slots { cap 2; }\nstage d : delay;\n"


def case(name: str, text: str, message: str, line: int, col: int):
    return pytest.param(text, message, line, col, id=name)


ERRORS = [
    case("join inside a hold is hold-and-wait", POOLED +
         "session {\n  spawn (1) into kids {}\n  hold slots (1) {\n    join kids;\n  }\n}\n",
         "session: `join kids` inside a hold of `slots`: hold-and-wait", 6, 5),
    case("join inside a hold through a definition", POOLED +
         "def wait_kids() { join kids; }\nsession {\n  spawn (1) into kids {}\n  hold slots (1) { wait_kids(); }\n}\n",
         "session: `join kids` inside a hold of `slots`: hold-and-wait", 3, 19),
    case("join of a handle no spawn fills", SPAWN + "session { join kids; }\n",
         "session: `join kids`: no `spawn … into kids` in this program", 2, 16),
    case("reading a handle is an error", SPAWN + "session { spawn (1) into kids {} set n = kids; }\n",
         "session: `kids` is a spawn handle, not a number", 2, 42),
    case("the tree attributes are read-only", SPAWN + "session { spawn (1) into kids { set depth = 3; } }\n",
         "`depth` is a built-in attribute of the session tree; it is read-only", 2, 37),
    case("set of a tree attribute outside a spawn", SPAWN + "session { set root = 1; }\n",
         "`root` is a built-in attribute of the session tree; it is read-only", 2, 15),
    case("a spawn block holds only sets", SPAWN + "session { spawn (1) into kids { run d (1); } }\n",
         "a `spawn` block may only `set` the children's attributes", 2, 33),
    case("spawn in init", SPAWN + "workload { arrive poisson(1); init { spawn (1) into k {} } }\nsession { }\n",
         "`spawn` is a session's statement, not allowed in the workload's `init`", 2, 38),
    case("join in turn", SPAWN + "workload { arrive poisson(1); turn { join k; } }\nsession { spawn (1) into k {} }\n",
         "`join` is a session's statement, not allowed in the workload's `turn`", 2, 38),
    case("spawn in a server", SPAWN +
         "workload { arrive poisson(1); session { request; } }\nserver { spawn (1) into k {} }\n",
         "`spawn` is a session's statement, not allowed in a server", 3, 10),
]


@pytest.mark.parametrize("text, message, line, col", ERRORS)
def test_diagnostics(text: str, message: str, line: int, col: int) -> None:
    err = fails(text)
    assert err.message == message, err.render()
    assert where(err) == (line, col), err.render()


def test_the_hold_and_wait_refusal_explains_the_deadlock() -> None:
    err = fails(POOLED + "session {\n  spawn (1) into kids {}\n  hold slots (1) { join kids; }\n}\n")
    assert any("deadlock" in h for h in err.helps)
    assert "help:" in err.render()


def test_a_handle_has_its_own_namespace_beside_a_let_of_the_same_name() -> None:
    # the seed's `spawn (k) into kids` beside `let kids = …`: `kids` in an expression is the `let`
    p = load(SPAWN + "let kids = 2;\nsession { spawn (kids) into kids { set n = kids; } join kids; }\n")
    assert p.handles == ("kids",)
    r = serq.run(load(ONE + "let kids = 2;\nsession { spawn (depth == 0 ? kids : 0) into kids { set n = kids; } "
                            "join kids; observe n = n; }\n"), seed=1, horizon=100, arrivals=1)
    assert [v for *_, v in values(r, "n")] == [2.0, 2.0, 0.0]  # the children first: the root observes after its join


# ---------------------------------------------------------------- determinism

BASE = """stage d : delay;
workload { arrive poisson(0.8); init { set t0 = now; set x = ~exp(2); } }
session {
  run d (x);
  %s
  observe response = now - t0;
  observe x = x;
}
"""


def test_reruns_are_byte_identical() -> None:
    program = load(BASE % "spawn (depth == 0 ? ~uniform(0, 3) < 1 ? 0 : 2 : 0) into k { set x = x / 2; } join k;")
    a = serq.run(program, seed=4, horizon=2000)
    b = serq.run(program, seed=4, horizon=2000)
    assert a.text() == b.text() and a.to_json() == b.to_json()


def test_spawn_of_zero_and_join_leave_the_report_unchanged() -> None:
    with_ = serq.run(load(BASE % "spawn (0) into k {} join k;"), seed=3, horizon=2000)
    without = serq.run(load(BASE % ""), seed=3, horizon=2000)
    assert with_.text() == without.text()
    assert with_.to_json() == without.to_json()


def test_roots_draws_and_arrivals_do_not_change_with_the_number_of_children() -> None:
    # children draw from streams keyed by their place in the tree: the roots' own draws
    # (x) and their arrival instants are the same whether they spawn 0 or 3 children
    def roots(n: int) -> list[tuple[float, int, float]]:
        body = BASE.replace("run d (x);", "observe arrived = t0;\n  run d (x);")
        r = serq.run(load(body % f"spawn (depth == 0 ? {n} : 0) into k {{ set x = ~exp(1); }}"),
                     seed=5, horizon=500)
        return [v for v in values(r, "arrived") if v[1] < C0] + [v for v in values(r, "x") if v[1] < C0]

    assert roots(0) == roots(3)


# ---------------------------------------------------------------- Little's law across the tree

MM1 = """stage svc : fifo;
workload { arrive poisson(0.5); init { set t0 = now; } }
session {
  branch (depth == 0) {
    spawn (1) into kid {}
    join kid;
    observe root = now - t0;
  } else {
    run svc (~exp(1));
    observe child = now - t0;
  }
}
"""


def test_one_child_each_on_a_fifo_server_is_mm1_and_the_tree_keeps_littles_law() -> None:
    # the children arrive as the roots do (Poisson, λ = 0.5) on one exp(1) server: M/M/1 with
    # response 1/(μ − λ) = 2, and the root's join waits exactly its child's response; the mean number
    # of live sessions is λ · (root's time + child's time) = 0.5 · (2 + 2) = 2 (Little's law)
    hits = 0
    for seed in (1, 2, 3):
        r = serq.run(load(MM1), seed=seed, horizon=40_000, warmup=2_000)
        root, child = r.observe("root"), r.observe("child")
        assert root.mean == pytest.approx(child.mean, rel=1e-9)
        hits += abs(child.mean - 2.0) <= child.ci
        assert r.mean_live == pytest.approx(0.5 * (root.mean + child.mean), rel=0.05)
    assert hits >= 2


def test_with_q_0_the_spawn_program_reports_the_approximations_figures() -> None:
    # no delegation: the same parents, the same draws (docs/subagents.md, "The program")
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "programs/subagent"
    a = serq.run(serq.load(root / "vllm_spawn.sq", sets={"q": "0"}))
    b = serq.run(serq.load(root / "vllm_subagents.sq", sets={"q": "0"}))
    assert a.observe("join_wait").count == 0
    assert {n: o for n, o in a.observes.items() if n != "join_wait"} == b.observes
    assert a.client == b.client
    assert a.stages == [s for s in b.stages if s.name != "delegate"]
    assert (a.events, a.arrivals, a.ended, a.turns, a.mean_live) == (b.events, b.arrivals, b.ended, b.turns, b.mean_live)

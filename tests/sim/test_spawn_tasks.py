"""Task statistics of a program that spawns (issue 11 item 3, docs/subagents.md
"Task statistics"): a task is a root and all its descendants; its time runs
from the root's arrival to the end of the last session of the tree.  The
`task` table (text), `tasks` (JSON), `tasks.csv` (--dump), `task_time`
samples, the warm-up rule, open tasks and tasks with a session stuck at a
pool."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from bounds import env
from frontend_util import load

import serq
from serq.report import TaskRecord, client_decimals, fixed
from serq.sim.population import CHILD_SERIALS

C0 = CHILD_SERIALS  # the first child's serial
ROOT = Path(__file__).resolve().parents[2]

# one root at time 0 (a Poisson stream stopped after one arrival)
ONE = "stage d : delay;\nworkload { arrive poisson(1); init { set t0 = now; } }\n"


def run1(body: str, **kw) -> serq.Report:
    return serq.run(load(ONE + body), seed=1, horizon=1000, arrivals=1, **kw)


def tasks(report: serq.Report) -> serq.report.TaskSummary:
    assert report.tasks is not None
    return report.tasks


# ---------------------------------------------------------------- small scenarios worked out by hand


def test_two_children_of_one_and_three_seconds_then_the_root_runs_half_a_second() -> None:
    r = run1("""session {
  branch (depth == 0) {
    spawn (2) into kids {}
    join kids;
    run d (0.5);
  } else {
    run d (1 + 2 * (serial - %d));
  }
}
""" % C0)
    t = tasks(r)
    # the children end at 1 and 3; the root's join waits to 3, it runs to 3.5
    assert t.records == [TaskRecord(root=0, start=0.0, end=3.5, sessions=3, depth=1)]
    assert (t.count, t.open, t.stuck) == (1, 0, 0)
    assert (t.time.count, t.time.mean, t.time.p99, t.time.ci) == (1, 3.5, 3.5, math.inf)
    assert math.isnan(t.time.cv2)  # one sample
    assert (t.sessions.mean, t.depth.mean) == (3.0, 1.0)
    assert [tuple(s) for s in r.samples["task_time"]] == [(3.5, 0, 0, 3.5)]


def test_a_nested_tree_of_depth_two_has_seven_sessions() -> None:
    # every session spawns two until depth 2, runs depth + 1 seconds, then joins:
    # the grandchildren end at 3, so do their parents (joined) and the root
    r = run1("""session {
  spawn (depth < 2 ? 2 : 0) into kids {}
  run d (depth + 1);
  join kids;
}
""")
    assert tasks(r).records == [TaskRecord(0, 0.0, 3.0, 7, 2)]
    assert r.ended == 7


def test_a_root_that_does_not_join_leaves_its_task_to_its_last_child() -> None:
    # the root ends at 1 after a turn; its child runs to 5: the task ends at 5, after the root
    r = run1("""session {
  spawn (depth == 0 ? 1 : 0) into kids {}
  turn;
  run d (depth == 0 ? 1 : 5);
  observe ended = now;
}
""")
    assert sorted((s.session, s.value) for s in r.samples["ended"]) == [(0, 1.0), (C0, 5.0)]
    assert tasks(r).records == [TaskRecord(0, 0.0, 5.0, 2, 1)]
    # the sample is stamped with the task's end, the root and the root's last turn_no
    assert [tuple(s) for s in r.samples["task_time"]] == [(5.0, 0, 1, 5.0)]


BATCH = """stage d : delay;
workload { arrive batch(3); }
session {
  branch (depth == 0) {
    spawn (1) into kids { set x = serial == 0 ? 1 : serial == 1 ? 5 : 100; }
  } else {
    run d (x);
  }
}
run { horizon 50; warmup 3; }
"""


def test_the_warmup_rule_and_open_tasks() -> None:
    # three roots at 0 whose children end at 1, 5 and 100: the first task completes in the
    # warm-up (not counted), the second after it (counted whole, from 0), the third is open at 50
    t = tasks(serq.run(load(BATCH)))
    assert t.records == [TaskRecord(1, 0.0, 5.0, 2, 1)]
    assert (t.count, t.open, t.stuck) == (1, 1, 0)
    assert t.to_dict()["open"] == 1


# ---------------------------------------------------------------- the closed form

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


def harmonic(k: int) -> float:
    return sum(1.0 / i for i in range(1, k + 1))


@pytest.mark.parametrize("k", [3, 8])
def test_a_root_joining_k_exponential_children_has_a_task_time_of_the_harmonic_number(k: int) -> None:
    program = load(FANOUT, sets=[("k", str(k))])
    hits = 0
    for seed in (1, 2, 3):
        r = serq.run(program, seed=seed, horizon=6000, warmup=100)
        t = tasks(r)
        assert t.count > 2700
        hits += abs(t.time.mean - harmonic(k)) <= t.time.ci
        assert t.time.mean == pytest.approx(harmonic(k), rel=0.06)
        # the root ends at its join: the task time is its wait, sample for sample
        assert t.time == r.observe("wait")
        assert (t.sessions.mean, t.sessions.cv2, t.sessions.p99) == (k + 1, 0.0, k + 1)
        assert (t.depth.mean, t.depth.p99) == (1.0, 1.0)
    assert hits >= 2


# ---------------------------------------------------------------- a child stuck at a pool

STUCK = """pool kv { cap 160; block 16; evict lru; preempt lifo; }
stage engine : step { budget 1024; cost 1; memory kv; }
stage d : delay;
workload { arrive batch(2); }
session {
  branch (depth == 0) {
    spawn (1) into kids { set big = serial == 0 ? 1 : 0; }
    join kids;
  } else {
    branch (big) {
      hold kv (min(100, budget_left(engine))) {
        run engine prefill (100) growing kv;
        run engine decode (100) growing kv;
      }
    } else {
      run d (2);
    }
  }
}
run { horizon 400; }
"""


def test_a_task_whose_child_is_stuck_at_a_pool_is_counted_apart() -> None:
    # root 0's child needs 200 tokens of a 160-token pool: it is preempted over and over at
    # the same position (stuck), and root 0 waits at its join for ever; root 1's task is done at 2
    r = serq.run(load(STUCK))
    assert r.pool("kv").stuck == 1
    t = tasks(r)
    assert t.records == [TaskRecord(1, 0.0, 2.0, 2, 1)]
    assert (t.count, t.open, t.stuck) == (1, 1, 1)
    assert r.to_dict()["tasks"]["stuck"] == 1
    text = r.text()
    assert ("stuck: 1 task(s) with a session stuck at a pool (the root or a descendant): their times are "
            "not in the task table") in text.splitlines()
    # the task table's stuck line comes right under the task table
    lines = text.splitlines()
    at = lines.index("task      count   mean  95% CI  cv2    p99")
    assert lines[at + 5].startswith("stuck: 1 task(s)")
    assert r.warnings() == [
        "1 session(s) stuck at pool `kv`: the means are over the sessions that got through",
        "1 task(s) with a session stuck at a pool: the task table is over the tasks that got through",
    ]


def test_the_cli_prints_the_stuck_tasks_warning(tmp_path: Path) -> None:
    program = tmp_path / "stuck.sq"
    program.write_text(STUCK)
    out = subprocess.run([sys.executable, "-m", "serq", "run", str(program)], capture_output=True, text=True,
                         cwd=ROOT, env=env())  # bounded by events (tests/bounds.py)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [
        "warning: 1 session(s) stuck at pool `kv`: the means are over the sessions that got through",
        "warning: 1 task(s) with a session stuck at a pool: the task table is over the tasks that got through",
    ]
    assert "\ntask " in out.stdout


# ---------------------------------------------------------------- the views: text, JSON, dump

TREE = """stage d : delay;
workload { arrive poisson(0.4); init { set t0 = now; } }
session {
  spawn (depth == 0 ? ~uniform(0, 3) < 1 ? 0 : 2 : depth == 1 ? 1 : 0) into kids {}
  run d (~exp(1));
  branch (depth == 0) { join kids; }
  observe life = now - t0;
}
run { horizon 500; warmup 20; seed 7; }
"""


def test_the_text_table_follows_the_client_table_layout() -> None:
    r = serq.run(load(TREE))
    t = tasks(r)
    lines = r.text().splitlines()
    at = lines.index(next(x for x in lines if x.startswith("task ")))
    # right after the observe table (no client here), before the stage table
    assert lines[at - 1] == "" and lines[at + 5] == "" and lines[at + 6].startswith("stage ")
    assert lines[at].split() == ["task", "count", "mean", "95%", "CI", "cv2", "p99"]
    assert [x.split()[0] for x in lines[at + 2:at + 5]] == ["time", "sessions", "depth"]
    for line, (name, s) in zip(lines[at + 2:at + 5], t.rows()):
        # the client rows' format: mean, CI and p99 with the mean's 4 significant digits, cv2 with 3 decimals
        d = client_decimals(s.mean)
        assert line.split() == [name, str(t.count), fixed(s.mean, d), "±" + fixed(s.ci, d), fixed(s.cv2, 3),
                                fixed(s.p99, d)]
        assert s.count == t.count
    # a root has 1 session (no child) or 1 + 2 children + 2 grandchildren = 5; depth 0 or 2
    assert {rec.sessions for rec in t.records} == {1, 5}
    assert all(rec.depth == (0 if rec.sessions == 1 else 2) for rec in t.records)
    assert t.sessions.mean == pytest.approx(sum(rec.sessions for rec in t.records) / t.count)


def test_a_program_with_a_client_has_the_task_table_right_after_the_client_table() -> None:
    text = serq.run(serq.load(ROOT / "programs/subagent/vllm_spawn.sq"), horizon=600, warmup=100).text()
    lines = text.splitlines()
    at = lines.index(next(x for x in lines if x.startswith("task ")))
    assert lines[at - 2].startswith("response ") and lines[at + 6].startswith("stage ")


def test_json_keys() -> None:
    r = serq.run(load(TREE))
    d = json.loads(r.to_json())
    assert [k for k in d if k != "settling"][-1] == "tasks"  # (the settling evidence comes last)
    assert list(d["tasks"]) == ["count", "time", "sessions", "depth", "open", "stuck"]
    assert list(d["tasks"]["time"]) == list(d["observes"]["life"])  # a summary like an observe's/client's
    t = tasks(r)
    assert d["tasks"]["count"] == t.count > 100
    assert d["tasks"]["time"]["mean"] == t.time.mean
    assert (d["tasks"]["open"], d["tasks"]["stuck"]) == (t.open, 0)


def test_the_dump_writes_tasks_csv_in_completion_order(tmp_path: Path) -> None:
    r = serq.run(load(TREE))
    r.dump(tmp_path)
    rows = (tmp_path / "tasks.csv").read_text().splitlines()
    assert rows[0] == "root,start,end,sessions,depth"
    t = tasks(r)
    assert len(rows) == t.count + 1
    parsed = [tuple(x.split(",")) for x in rows[1:]]
    assert [(int(a), float(b), float(c), int(n), int(d)) for a, b, c, n, d in parsed] == [tuple(x) for x in t.records]
    ends = [rec.end for rec in t.records]
    assert ends == sorted(ends) and ends[0] >= 20  # completion order, after warm-up
    # numbers as the other dump files write them (shortest round trip)
    rec = t.records[0]
    assert rows[1] == f"{rec.root},{serq.report.shortest(rec.start)},{serq.report.shortest(rec.end)},{rec.sessions},{rec.depth}"
    times = (tmp_path / "task_time.csv").read_text().splitlines()
    assert times[0] == "time,session,turn,value" and len(times) == len(rows)


def test_the_hand_scenario_dump(tmp_path: Path) -> None:
    run1("session {\n  spawn (depth == 0 ? 2 : 0) into kids {}\n  run d (depth == 0 ? 0.25 : 1.5);\n  join kids;\n}\n"
         ).dump(tmp_path)
    assert (tmp_path / "tasks.csv").read_text() == "root,start,end,sessions,depth\n0,0,1.5,3,1\n"


def test_cli_dump_and_json(tmp_path: Path) -> None:
    program = tmp_path / "tree.sq"
    program.write_text(TREE)
    out = subprocess.run([sys.executable, "-m", "serq", "run", str(program), "--json", "--dump", str(tmp_path / "d")],
                         capture_output=True, text=True, cwd=ROOT, env=env())  # bounded by events (tests/bounds.py)
    assert out.returncode == 0 and out.stderr == ""
    d = json.loads(out.stdout)
    lines = (tmp_path / "d" / "tasks.csv").read_text().splitlines()
    assert len(lines) == d["tasks"]["count"] + 1


# ---------------------------------------------------------------- determinism, and what has no task table


def test_reruns_are_byte_identical(tmp_path: Path) -> None:
    a, b = serq.run(load(TREE)), serq.run(load(TREE))
    assert a.text() == b.text() and a.to_json() == b.to_json()
    a.dump(tmp_path / "a")
    b.dump(tmp_path / "b")
    assert (tmp_path / "a/tasks.csv").read_bytes() == (tmp_path / "b/tasks.csv").read_bytes()


def test_a_program_without_spawn_has_no_task_table(tmp_path: Path) -> None:
    r = serq.run(load(ONE + "session { run d (1); observe t = now; }\n"), seed=1, horizon=100)
    assert r.tasks is None
    assert "\ntask " not in r.text() and "tasks" not in json.loads(r.to_json())
    assert "task_time" not in r.samples
    r.dump(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_run_that_spawns_no_child_has_no_task_table() -> None:
    # the decision (docs/subagents.md): the table is for a run that spawned a child, so that
    # `spawn (0)` gives the same report as the same program without it (issue 11)
    base = ONE + "session { %s run d (~exp(1)); observe t = now; }\n"
    with_ = serq.run(load(base % "spawn (0) into kids {} join kids;"), seed=2, horizon=300)
    without = serq.run(load(base % ""), seed=2, horizon=300)
    assert with_.tasks is None
    assert with_.text() == without.text() and with_.to_json() == without.to_json()
    # … and a program whose spawn happens to make a child gets it
    drawn = serq.run(load(base % "spawn (depth == 0 && serial == 7 ? 1 : 0) into kids {} join kids;"),
                     seed=2, horizon=300)
    assert drawn.tasks is not None and drawn.tasks.count == drawn.arrivals - drawn.tasks.open


def test_with_q_0_the_spawn_program_has_no_task_table() -> None:
    r = serq.run(serq.load(ROOT / "programs/subagent/vllm_spawn.sq", sets={"q": "0"}), horizon=400, warmup=50)
    assert r.tasks is None and "tasks" not in r.to_dict()

"""Step engines for the sweep tests' `--engine` axes (importable by the sweep's
spawned workers as `test_sweep_engines:Class`), and the tests of that axis."""

from __future__ import annotations

import json

from frontend_util import cli_main, cli_streams

from serq.experiments.sweep import flatten
from serq.sim.stages import StepEngine

VLLM = "programs/multi-turn/vllm.sq"
RUN = ("--horizon", "40", "--warmup", "5")


class Plain(StepEngine):
    """The default engine under another name."""


class SlowSteps(StepEngine):
    """Every iteration takes 1.5 times as long: reports differ from the default's."""

    def iteration_cost(self, view):  # type: ignore[no-untyped-def]
        return 1.5 * super().iteration_cost(view)


def test_an_engine_axis_gives_a_column_named_engine_and_runs_each_class(tmp_path) -> None:
    out = tmp_path / "rows.jsonl"
    code, text = cli_main("sweep", VLLM, *RUN, "--seeds", "1-2", "--jobs", "2", "--quiet", "--out", str(out),
                          "--engine", "engine=test_sweep_engines:Plain,test_sweep_engines:SlowSteps")
    assert code == 0, text
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["engine"], r["seed"]) for r in rows] == [
        ("test_sweep_engines:Plain", 1), ("test_sweep_engines:Plain", 2),
        ("test_sweep_engines:SlowSteps", 1), ("test_sweep_engines:SlowSteps", 2),
    ]
    # each row is the plain run with that engine
    for row in rows:
        code, plain, _ = cli_streams("run", VLLM, *RUN, "--seed", str(row["seed"]), "--json", "--engine",
                               f"engine={row['engine']}")
        assert code == 0
        expected = flatten(json.loads(plain))
        assert {k: row[k] for k in expected} == expected
    assert rows[0]["client.ttft.mean"] < rows[2]["client.ttft.mean"]  # the classes did run


def test_engine_and_policy_axes_for_several_stages_are_named_by_stage() -> None:
    from serq.experiments.sweep import class_axes

    assert [a.name for a in class_axes("engine", {"engine": ["m:A"]})] == ["engine"]
    assert [a.name for a in class_axes("policy", {"p": ["fcfs"], "d": ["sjf"]})] == ["policy.p", "policy.d"]


def test_a_policy_axis_runs_each_named_policy(tmp_path) -> None:
    policies = __import__("pytest").importorskip("serq.policies")
    import serq

    result = serq.sweep(VLLM, {"Lambda": [0.5]}, seeds=[1], horizon=40, warmup=5, jobs=2,
                        policies={"engine": ["fcfs", "sjf"]})
    assert [r["policy"] for r in result.rows] == ["fcfs", "sjf"]
    for row in result.rows:
        report = serq.run(serq.load(VLLM, sets={"Lambda": "0.5"}), seed=1, horizon=40, warmup=5,
                          engines={"engine": policies.resolve(row["policy"])})
        expected = flatten(report.to_dict())
        assert {k: row[k] for k in expected} == expected

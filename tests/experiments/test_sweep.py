"""`serq sweep`'s syntax (serq/experiments/grid.py) and its refusals: axes,
ranges, seeds, SLOs, names — each mistake one `error:` line (plus `help:`
lines) and exit 2, never a traceback."""

from __future__ import annotations

import pytest
from frontend_util import cli_main

from serq.errors import UsageError
from serq.experiments.grid import parse_seeds, parse_set_axis, parse_slo, value_text
from serq.experiments.summary import nearest_figure

MG1 = "programs/single-turn/mg1.sq"


def test_a_range_counts_in_decimals_and_includes_its_stop() -> None:
    axis = parse_set_axis("Lambda=0.2:0.8:0.1")
    assert axis.name == "Lambda"
    assert axis.values == (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)  # not 0.30000000000000004
    assert [value_text(v) for v in axis.values] == ["0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8"]
    assert parse_set_axis("x=0:1:0.3").values == (0.0, 0.3, 0.6, 0.9)  # stop not reached: not added
    assert parse_set_axis("x=1e-1:3e-1:1e-1").values == (0.1, 0.2, 0.3)
    assert parse_set_axis("B=1024:4096:1024").values == (1024, 2048, 3072, 4096)
    assert parse_set_axis("x=0.5:0.5:0.1").values == (0.5,)


def test_a_list_and_a_single_value_are_axes_too() -> None:
    assert parse_set_axis("B=4096,8192").values == (4096, 8192)
    assert parse_set_axis("X=5").values == (5,)
    assert parse_set_axis("r=0.5, 2*mean_s").values == (0.5, "2*mean_s")  # an expression stays text


def test_an_interval_without_a_step_is_only_for_find_max() -> None:
    axis = parse_set_axis("lam=0.1:0.9", allow_interval=True)
    assert axis.values == (0.1, 0.9) and axis.interval == (0.1, 0.9)
    with pytest.raises(UsageError, match="START:STOP:STEP"):
        parse_set_axis("lam=0.1:0.9")


@pytest.mark.parametrize("item, message", [
    ("x=0.8:0.2:0.1", "the range is empty"),
    ("x=0.2:0.8:0", "the step must be > 0"),
    ("x=0.2:0.8:-0.1", "the step must be > 0"),
    ("x=a:0.8:0.1", "is not a number"),
    ("x=0:1e9:1e-3", "more than"),
    ("x=1:2:3:4", "a range is"),
    ("x=", "no value"),
    ("x=1,,2", "empty item"),
    ("x=1,1.0", "listed twice"),
    ("x", "expected NAME="),
    ("2x=1", "expected an identifier"),
])
def test_bad_axes_are_refused(item: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_set_axis(item)


def test_seeds_are_a_range_a_list_or_one() -> None:
    assert parse_seeds("1-10") == list(range(1, 11))
    assert parse_seeds("1,3,5") == [1, 3, 5]
    assert parse_seeds("7") == [7]
    assert parse_seeds("1-3,9") == [1, 2, 3, 9]


@pytest.mark.parametrize("text", ["", "a", "3-1", "1,1", "-1", "1-", "1.5", "1,,2"])
def test_bad_seeds_are_refused(text: str) -> None:
    with pytest.raises(UsageError):
        parse_seeds(text)


def test_an_slo_is_figure_comparison_number() -> None:
    slo = parse_slo("client.ttft.p99<=0.5")
    assert (slo.figure, slo.op, slo.bound) == ("client.ttft.p99", "<=", 0.5)
    assert slo.met(0.5) and not slo.met(0.51) and not slo.met(None) and not slo.met(float("nan"))
    assert parse_slo(" pools.kv.preemptions < 3 ").met(2)
    assert parse_slo("req_per_s>=1e-1").met(0.2)


@pytest.mark.parametrize("text", ["client.ttft.p99", "x<<3", "x<=", "x<=abc", "x==1", "<=3", "x<=inf"])
def test_bad_slos_are_refused(text: str) -> None:
    with pytest.raises(UsageError, match="expected FIGURE<=NUMBER"):
        parse_slo(text)


def one_error_line(out: str) -> None:
    lines = out.strip().splitlines()
    assert lines[0].startswith("error: "), out
    assert all(line.startswith("help: ") for line in lines[1:]), out
    assert "Traceback" not in out


@pytest.mark.parametrize("argv, message", [
    (["--set", "lamm=0.5,0.7"], "unknown constant `lamm`"),
    (["--set", "lam=0.7:0.5:0.1"], "the range is empty"),
    (["--set", "lam=0.5:0.7:0"], "the step must be > 0"),
    (["--set", "lam=0.5", "--seeds", "x"], "invalid --seeds"),
    (["--set", "lam=0.1:0.9", "--find-max", "lam", "--slo", "x<<3"], "invalid --slo"),
    (["--set", "lam=0.1:0.9", "--find-max", "lam"], "needs at least one --slo"),
    (["--set", "lam=0.5", "--slo", "x<=3"], "go with --find-max"),
    (["--set", "lam=0.5", "--resume"], "--resume needs --out"),
    (["--set", "lam=0.5", "--out", "x.txt"], "must end in .jsonl or .csv"),
    (["--set", "lam=0.5", "--set", "lam=0.6"], "given twice"),
    (["--set", "lam=0.5", "--backend", "dask"], "unknown backend"),
    (["--set", "lam=0.5", "--engine", "svc=x.y:Z"], "unknown step stage `svc`"),
    (["--set", "lam=0.5", "--show", "observes.respons.mean", "--horizon", "20", "--warmup", "0"],
     "unknown figure"),
])
def test_bad_command_lines_get_one_error_and_exit_2(argv: list[str], message: str) -> None:
    code, out = cli_main("sweep", MG1, "--quiet", "--jobs", "1", *argv)
    assert code == 2, out
    assert message in out
    one_error_line(out)


def test_an_unknown_axis_gets_a_did_you_mean() -> None:
    code, out = cli_main("sweep", MG1, "--set", "lamm=0.5")
    assert code == 2
    assert "help: did you mean `lam`?" in out


def _refused_show(figure: str) -> str:
    """What `serq sweep --show FIGURE` says of a figure no run has (exit 2)."""
    code, out = cli_main("sweep", MG1, "--quiet", "--jobs", "1", "--set", "lam=0.5", "--horizon", "20",
                         "--warmup", "0", "--show", figure)
    assert code == 2, out
    return out


def test_an_unknown_figure_with_no_single_near_name_lists_its_siblings() -> None:
    # p98 is as near to p90 as to p99: no did-you-mean, but the row's figures under that name
    out = _refused_show("observes.response.p98")
    assert "help: the figures `observes.response.*`: observes.response.count, observes.response.mean," in out
    assert "observes.response.p99" in out


def test_a_figure_named_without_its_statistic_or_near_one_gets_its_mean() -> None:
    # `--show gauge.kv_usage_max` (for gauges.kv_usage_max.mean) had no did-you-mean: the name is
    # more than two edits from every column, but one edit from a figure's stem
    out = _refused_show("observe.response")
    assert "help: did you mean `observes.response.mean`?" in out
    assert "help: the figures `observes.response.*`: observes.response.count, observes.response.mean," in out
    columns = ["client.ttft.count", "client.ttft.mean", "gauges.kv.mean", "gauges.kv.ci", "pools.kv.preemptions"]
    assert nearest_figure("gauge.kv", columns) == ("gauges.kv.mean", "gauges.kv")
    assert nearest_figure("client.ttft", columns) == ("client.ttft.mean", "client.ttft")  # (the mean, not the first)
    assert nearest_figure("pools.kv", columns) == ("pools.kv.preemptions", "pools.kv")
    assert nearest_figure("client.ttft.man", columns) == ("client.ttft.mean", "")
    assert nearest_figure("stages.engine", columns) is None


def test_an_unknown_policy_is_a_usage_error() -> None:
    pytest.importorskip("serq.policies")
    code, out = cli_main("sweep", "programs/multi-turn/vllm.sq", "--policy", "engine=fcfs,nosuch")
    assert code == 2, out
    assert "nosuch" in out
    one_error_line(out)


def test_a_bad_engine_class_is_a_usage_error() -> None:
    code, out = cli_main("sweep", "programs/multi-turn/vllm.sq", "--engine", "engine=no_such_module:X")
    assert code == 2, out
    assert "cannot import `no_such_module`" in out
    one_error_line(out)


def test_a_program_error_is_exit_1_as_for_run() -> None:
    code, out = cli_main("sweep", MG1, "--set", "lam=0.5", "--horizon", "10", "--warmup", "20")
    assert code == 1, out
    assert "--warmup 20 is not below --horizon 10" in out and "Traceback" not in out


def test_range_values_are_the_decimals_start_plus_i_steps() -> None:
    from decimal import Decimal

    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=200, deadline=None)
    @given(st.integers(-5000, 5000), st.integers(1, 500), st.integers(0, 40), st.integers(0, 4))
    def check(start: int, step: int, count: int, places: int) -> None:
        scale = Decimal(10) ** -places
        a, s = Decimal(start) * scale, Decimal(step) * scale
        stop = a + count * s
        axis = parse_set_axis(f"x={a}:{stop}:{s}")
        assert len(axis.values) == count + 1
        for i, v in enumerate(axis.values):
            assert Decimal(value_text(v)) == a + i * s  # shortest form = the exact decimal

    check()


def test_a_misspelt_figure_is_refused_before_any_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # fifty runs of a long horizon: the error comes at once, not after them (issue 25).  With a
    # budget of one event, a run started first would fail (exit 1, the budget's message) before
    # the figure could be refused: so exit 2 says that no run started, on any machine (issue 38)
    monkeypatch.setenv("SERQ_MAX_EVENTS", "1")
    code, out = cli_main("sweep", "programs/multi-turn/vllm.sq", "--quiet", "--jobs", "1", "--set", "Lambda=0.3",
                         "--seeds", "1-50", "--horizon", "1e6", "--show", "client.ttft.p98")
    assert code == 2, out
    assert "unknown figure `client.ttft.p98`: no run of this sweep has it" in out
    one_error_line(out)


def test_every_figure_a_row_has_is_known_before_the_runs(tmp_path) -> None:
    # the columns a run writes are among those the plan knows (arrays sized by a --set included)
    import serq
    from serq.experiments.grid import Axis
    from serq.experiments.sweep import flatten, make_plan, req_per_s

    plan = make_plan("programs/pd/llmd_flat.sq", [Axis("Lambda", (0.6,), "set", "Lambda")], [1], horizon=30, warmup=3)
    report = serq.run(serq.load("programs/pd/llmd_flat.sq", sets={"Lambda": "0.6"}), horizon=30, warmup=3)
    row = flatten(report.to_dict())
    row["req_per_s"] = req_per_s(row)
    assert set(row) <= set(plan.figures) and len(row) > 100

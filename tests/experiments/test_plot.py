"""``serq plot`` and :mod:`serq.experiments.plot` (issue 10, item 4): a
sweep's figures as mean ± Student-t interval across seeds, CDFs of a dump's
samples, PNG/SVG by suffix, byte-identical SVG, one-line errors.

The tests that draw need matplotlib (the ``plot`` extra, also in ``test``) and
are skipped without it; reading and checking the input do not need it."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import pytest

import serq
from serq.errors import SerqError, UsageError
from serq.experiments import plot as P
from serq.experiments.stats import t_quantile

ROOT = Path(__file__).resolve().parents[2]

# A sweep's rows: Lambda 0.2, 0.4 × policy fcfs, sjf × seeds 1-3, axes before `seed`.
# client.ttft.p99 = Lambda + (0.1 for sjf) + seed/100, so at each point the three
# seeds give base + 0.01, 0.02, 0.03: mean base + 0.02, s = 0.01, and the 95 %
# interval's half-width is t(0.975, 2) · 0.01 / √3 = 4.3027 · 0.005774 = 0.024841.
ROWS = [
    {"Lambda": lam, "policy": pol, "seed": seed, "horizon": 300,
     "client.ttft.p99": lam + (0.1 if pol == "sjf" else 0.0) + seed / 100, "pools.kv.preemptions": seed}
    for lam in (0.2, 0.4) for pol in ("fcfs", "sjf") for seed in (1, 2, 3)
]
HALF = t_quantile(0.975, 2) * 0.01 / math.sqrt(3)


def needs_matplotlib() -> None:
    pytest.importorskip("matplotlib")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def lines_of(fig) -> dict[str, tuple[list[float], list[float]]]:
    """Each legend label's (x, y) data on the first panel."""
    ax = fig.axes[0]
    return {c.get_label(): (list(c.lines[0].get_xdata()), list(c.lines[0].get_ydata())) for c in ax.containers}


def bars_of(fig, k: int) -> list[float]:
    """The half-heights of line ``k``'s error bars on the first panel."""
    segments = fig.axes[0].containers[k].lines[2][0].get_segments()
    return [(seg[1][1] - seg[0][1]) / 2 if len(seg) == 2 else math.nan for seg in segments]  # no bar: NaN


# -- the sweep plot ---------------------------------------------------------------------


def test_each_hue_is_a_line_of_means_over_seeds_with_t_intervals(tmp_path):
    needs_matplotlib()
    fig = P.plot_sweep(write_jsonl(tmp_path / "s.jsonl", ROWS), x="Lambda", y="client.ttft.p99", hue="policy",
                       out=tmp_path / "f.png")
    lines = lines_of(fig)
    assert list(lines) == ["fcfs", "sjf"]
    # each line is shifted sideways by ±0.008 of the x range (0.2) so the bars stay apart
    assert lines["fcfs"][0] == pytest.approx([0.2 - 0.0008, 0.4 - 0.0008])
    assert lines["fcfs"][1] == pytest.approx([0.22, 0.42])
    assert lines["sjf"][1] == pytest.approx([0.32, 0.52])
    assert bars_of(fig, 0) == pytest.approx([HALF, HALF], rel=1e-9)
    assert HALF == pytest.approx(0.024841, abs=1e-6)
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("Lambda", "client ttft p99 (s)")  # name and unit (serq.units)
    assert ax.get_legend().get_title().get_text() == "policy"
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_csv_results_file_gives_the_same_lines_as_json_lines(tmp_path):
    needs_matplotlib()
    a = P.plot_sweep(write_jsonl(tmp_path / "s.jsonl", ROWS), x="Lambda", y="client.ttft.p99", hue="policy")
    b = P.plot_sweep(write_csv(tmp_path / "s.csv", ROWS), x="Lambda", y="client.ttft.p99", hue="policy")
    assert lines_of(a) == lines_of(b)


def test_several_figures_are_panels_sharing_the_x_axis(tmp_path):
    needs_matplotlib()
    fig = P.plot_sweep(ROWS, x="Lambda", y=["client.ttft.p99", "pools.kv.preemptions"], hue="policy")
    assert [ax.get_ylabel() for ax in fig.axes] == ["client ttft p99 (s)", "pool kv preempt (preemptions)"]
    assert [c.lines[0].get_ydata()[0] for c in fig.axes[1].containers] == [2.0, 2.0]  # mean of 1, 2, 3


def test_a_text_axis_is_categorical_and_a_single_seed_has_no_bar(tmp_path):
    needs_matplotlib()
    rows = [r for r in ROWS if r["seed"] == 1 and r["Lambda"] == 0.2]
    fig = P.plot_sweep(rows, x="policy", y="client.ttft.p99")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fcfs", "sjf"]
    # one seed: a plain line (no error-bar glyph, no bar) and a title that says so
    assert not ax.containers
    assert list(ax.lines[0].get_ydata()) == pytest.approx([0.21, 0.31])
    assert ax.get_legend() is None
    assert ax.get_title() == "one seed: each run's value (no interval)"


def test_where_keeps_the_matching_rows(tmp_path):
    needs_matplotlib()
    fig = P.plot_sweep(write_csv(tmp_path / "s.csv", ROWS), x="Lambda", y="client.ttft.p99", where=["policy=sjf"])
    assert [list(c.lines[0].get_ydata()) for c in fig.axes[0].containers] == [pytest.approx([0.32, 0.52])]


def test_the_same_input_gives_a_byte_identical_svg(tmp_path):
    needs_matplotlib()
    path = write_jsonl(tmp_path / "s.jsonl", ROWS)
    for name in ("a.svg", "b.svg"):
        P.plot_sweep(path, x="Lambda", y="client.ttft.p99", hue="policy", out=tmp_path / name)
    a = (tmp_path / "a.svg").read_bytes()
    assert a == (tmp_path / "b.svg").read_bytes()
    assert a.startswith(b"<?xml") and b"<dc:date>" not in a


def test_an_axis_that_is_neither_x_nor_hue_is_an_error_naming_it():
    with pytest.raises(UsageError) as err:
        P.plot_sweep(ROWS, x="Lambda", y="client.ttft.p99")
    assert str(err.value.message) == (
        "the rows differ in axis `policy` (fcfs, sjf), which is neither --x nor --hue: "
        "keep one value with --where policy=VALUE, or plot it with --hue policy")
    with pytest.raises(UsageError) as err:
        P.plot_sweep(ROWS, x="seed", y="client.ttft.p99")
    assert str(err.value.message) == (
        "the rows differ in axes `Lambda` (0.2, 0.4), `policy` (fcfs, sjf), which are neither --x nor --hue: "
        "keep one value of each with --where COLUMN=VALUE, or plot one with --hue")


@pytest.mark.parametrize("kwargs, message", [
    ({"y": "client.ttft.mean"}, "unknown column `client.ttft.mean` in the rows; columns starting `client.ttft.`: "
                                "`client.ttft.p99`"),
    ({"y": "stages.engine.iters"}, "unknown column `stages.engine.iters` in the rows; its columns: `Lambda`, "
                                   "`policy`, `seed`, `horizon`, `client.ttft.p99`, `pools.kv.preemptions`"),
    ({"y": "client.ttft.p999"}, "unknown column `client.ttft.p999` in the rows; did you mean `client.ttft.p99`?"),
    ({"x": "Lamda"}, "unknown column `Lamda` in the rows; did you mean `Lambda`?"),
    # a figure named without its statistic, or near such a name: its column (the mean, else the first)
    ({"y": "pools.kv"}, "unknown column `pools.kv` in the rows; did you mean `pools.kv.preemptions`?"),
    ({"y": "client.ttf"}, "unknown column `client.ttf` in the rows; did you mean `client.ttft.p99`?"),
    ({"hue": "polcy"}, "unknown column `polcy` in the rows; did you mean `policy`?"),
    ({"y": "policy", "hue": "policy"}, "column `policy` is not a number (it holds `fcfs`)"),
    ({"where": ["policy=lpm"], "hue": "policy"}, "no rows in the rows have policy=lpm"),
    ({"where": ["policy"]}, "invalid --where `policy`; expected COLUMN=VALUE"),
    ({"out": "f.pdf", "hue": "policy"}, "invalid --out `f.pdf`: the name must end in .png or .svg"),
])
def test_bad_input_is_one_usage_error(kwargs, message):
    args = {"x": "Lambda", "y": "client.ttft.p99", **kwargs}
    with pytest.raises(UsageError) as err:
        P.plot_sweep(ROWS, **args)
    assert err.value.message == message


def test_without_matplotlib_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    with pytest.raises(UsageError) as err:
        P.plot_sweep(ROWS, x="Lambda", y="client.ttft.p99", hue="policy")
    assert err.value.message == "plotting needs matplotlib: install serq[plot] (pip install 'serq[plot]')"


# -- the CDF ------------------------------------------------------------------------------


def write_samples(path: Path, values: list[float]) -> Path:
    path.write_text("time,session,turn,value\n" + "".join(f"{i},{i},1,{v}\n" for i, v in enumerate(values)))
    return path


def test_a_cdf_steps_up_by_one_nth_at_each_sample(tmp_path):
    needs_matplotlib()
    fig = P.plot_cdf(write_samples(tmp_path / "client_ttft.csv", [0.3, 0.1, 0.2, 0.2]))
    line = fig.axes[0].lines[0]
    assert list(line.get_xdata()) == [0.1, 0.1, 0.2, 0.2, 0.3]
    assert list(line.get_ydata()) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert line.get_label() == "client_ttft (n = 4)"
    assert fig.axes[0].get_xlabel() == "client_ttft"


def test_several_files_are_one_curve_each_and_log_x_is_a_log_scale(tmp_path):
    needs_matplotlib()
    a = write_samples(tmp_path / "client_ttft.csv", [0.0, 0.01, 0.1])
    b = write_samples(tmp_path / "client_response.csv", [0.5, 2.0])
    fig = P.plot_cdf([a, b], out=tmp_path / "c.svg", log_x=True)
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["client_ttft (n = 3)", "client_response (n = 2)"]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "value"
    assert (tmp_path / "c.svg").read_bytes().startswith(b"<?xml")


def test_a_long_cdf_is_drawn_through_a_bounded_number_of_ranks(tmp_path):
    needs_matplotlib()
    n = 3 * P.CDF_POINTS + 7
    fig = P.plot_cdf(write_samples(tmp_path / "x.csv", [float(i) for i in range(n)]))
    line = fig.axes[0].lines[0]
    assert len(line.get_xdata()) == P.CDF_POINTS + 1
    assert (line.get_xdata()[-1], line.get_ydata()[-1]) == (n - 1, 1.0)


def test_a_dumped_client_csv_plots(tmp_path):
    needs_matplotlib()
    report = serq.run(serq.load(ROOT / "programs/multi-turn/vllm.sq"), seed=1, horizon=80, warmup=8)
    report.dump(tmp_path / "d")
    fig = P.plot_cdf(tmp_path / "d" / "client_ttft.csv", out=tmp_path / "ttft.png")
    assert fig.axes[0].lines[0].get_label() == f"client_ttft (n = {report.client['ttft'].count})"


@pytest.mark.parametrize("content, message", [
    ("time,session,turn,value\n", "`{p}` has no samples"),
    ("time,session,turn,val\n1,1,1,2\n", "unknown column `value` in `{p}`; did you mean `val`?"),
    ("time,session,turn,value\n1,1,1,x\n", "{p}:2: `value` is not a number"),
])
def test_a_bad_dump_file_is_an_input_error(tmp_path, content, message):
    # the input's fault (exit 1, as a program that does not load), not the command line's (exit 2)
    p = tmp_path / "x.csv"
    p.write_text(content)
    with pytest.raises(SerqError) as err:
        P.plot_cdf(p)
    assert not isinstance(err.value, UsageError)
    assert err.value.message == message.format(p=p)


# -- the command line ---------------------------------------------------------------------


def cli(capsys, monkeypatch, *args: str) -> tuple[int, str]:
    """``serq ARGS`` in this process: (exit code, stderr)."""
    from serq.cli import main

    monkeypatch.setattr(sys, "argv", ["serq", *args])
    with pytest.raises(SystemExit) as done:
        main()
    return done.value.code, capsys.readouterr().err


def test_the_plot_command_writes_png_or_svg(tmp_path, capsys, monkeypatch):
    needs_matplotlib()
    path = str(write_jsonl(tmp_path / "s.jsonl", ROWS))
    for name in ("f.png", "f.svg"):
        code, err = cli(capsys, monkeypatch, "plot", path, "--x", "Lambda", "--y", "client.ttft.p99",
                        "--hue", "policy", "--out", str(tmp_path / name))
        assert (code, err) == (0, "")
    samples = str(write_samples(tmp_path / "client_ttft.csv", [0.1, 0.2]))
    assert cli(capsys, monkeypatch, "plot", samples, "--cdf", "--log-x", "--out", str(tmp_path / "c.svg")) == (0, "")
    assert (tmp_path / "c.svg").exists() and (tmp_path / "f.png").exists()


@pytest.mark.parametrize("args, line", [
    (["--x", "Lambda", "--y", "client.ttft.mean", "--hue", "policy"],
     "error: unknown column `client.ttft.mean` in `{s}`; columns starting `client.ttft.`: `client.ttft.p99`"),
    (["--x", "Lambda", "--y", "client.ttft.p99"], "error: the rows differ in axis `policy`"),
    (["--y", "client.ttft.p99"], "error: a sweep's plot needs --x COLUMN and --y COLUMN"),
    (["--cdf", "--x", "Lambda"], "error: --cdf plots the `value` column of dump files: --x do not apply"),
    (["--x", "Lambda", "--y", "client.ttft.p99", "--log-x"], "error: --log-x goes with --cdf"),
])
def test_a_bad_command_line_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, args, line):
    s = write_jsonl(tmp_path / "s.jsonl", ROWS)
    code, err = cli(capsys, monkeypatch, "plot", str(s), *args, "--out", str(tmp_path / "f.png"))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(line.format(s=s)) and "Traceback" not in err


def test_a_missing_results_file_and_an_unwritable_figure(tmp_path, capsys, monkeypatch):
    code, err = cli(capsys, monkeypatch, "plot", str(tmp_path / "no.jsonl"), "--x", "a", "--y", "b",
                    "--out", str(tmp_path / "f.png"))
    assert (code, err) == (1, f"cannot read `{tmp_path / 'no.jsonl'}`: No such file or directory\n")
    needs_matplotlib()
    s = write_jsonl(tmp_path / "s.jsonl", ROWS)
    code, err = cli(capsys, monkeypatch, "plot", str(s), "--x", "Lambda", "--y", "client.ttft.p99", "--hue", "policy",
                    "--out", str(tmp_path / "none" / "f.png"))
    assert (code, err) == (1, f"cannot write {tmp_path / 'none' / 'f.png'}: No such file or directory\n")


def test_without_matplotlib_the_command_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    s = write_jsonl(tmp_path / "s.jsonl", ROWS)
    code, err = cli(capsys, monkeypatch, "plot", str(s), "--x", "Lambda", "--y", "client.ttft.p99", "--hue", "policy",
                    "--out", str(tmp_path / "f.png"))
    assert (code, err) == (2, "error: plotting needs matplotlib: install serq[plot] (pip install 'serq[plot]')\n")


def test_errors_are_serq_errors():
    assert issubclass(UsageError, SerqError)


def test_a_real_sweep_plots_from_its_result_and_from_its_csv(tmp_path):
    needs_matplotlib()
    # M/G/1 (programs/single-turn/mg1.sq) at two loads, two seeds: the kernel form has no
    # client rows, so the figure is an observe's mean
    result = serq.sweep(ROOT / "programs/single-turn/mg1.sq", grid={"lam": [0.3, 0.6]}, seeds=[1, 2], jobs=1,
                        horizon=300, warmup=30, out=tmp_path / "s.csv")
    a = P.plot_sweep(result, x="lam", y="observes.response.mean")
    b = P.plot_sweep(tmp_path / "s.csv", x="lam", y="observes.response.mean", out=tmp_path / "s.svg")
    [(xs, ys)] = lines_of(a).values()
    assert xs == [0.3, 0.6] and list(lines_of(b).values()) == [(xs, ys)]
    by_point = [[r["observes.response.mean"] for r in result.rows if r["lam"] == lam] for lam in (0.3, 0.6)]
    assert ys == pytest.approx([sum(v) / 2 for v in by_point])



# -- units, log scale, SLO lines, bars cut at 0, titles, paired differences (issue 25) ------


def test_bars_of_a_figure_that_cannot_be_negative_stop_at_0_and_the_title_says_so(tmp_path):
    needs_matplotlib()
    # preemptions 0, 0, 9 over three seeds: mean 3, half-width t(0.975, 2)·s/√3 = 4.3027·5.196/1.732 = 12.91
    rows = [dict(r, **{"pools.kv.preemptions": 9 if r["seed"] == 3 else 0}) for r in ROWS]
    fig = P.plot_sweep(rows, x="Lambda", y="pools.kv.preemptions", hue="policy")
    seg = fig.axes[0].containers[0].lines[2][0].get_segments()[0]
    half = t_quantile(0.975, 2) * math.sqrt(27) / math.sqrt(3)
    assert (seg[0][1], seg[1][1]) == pytest.approx((0.0, 3.0 + half))  # below: to 0, not 3 − 12.9
    assert fig.axes[0].get_title().endswith("bars cut at 0 (cannot be negative): pool kv preempt")
    # a program's own figure (an observe) may be negative: its bars are left whole
    rows = [dict(r, **{"observes.gain.mean": 9 if r["seed"] == 3 else 0}) for r in ROWS]
    seg = P.plot_sweep(rows, x="Lambda", y="observes.gain.mean", hue="policy").axes[0].containers[0] \
        .lines[2][0].get_segments()[0]
    assert seg[0][1] == pytest.approx(3.0 - half)


def test_log_y_and_an_slo_line_on_its_panel(tmp_path):
    needs_matplotlib()
    fig = P.plot_sweep(ROWS, x="Lambda", y=["client.ttft.p99", "pools.kv.preemptions"], hue="policy", log_y=True,
                       slo=["client.ttft.p99<=0.5", "pools.kv.preemptions >= 1"])
    top, bottom = fig.axes[0], fig.axes[1]
    assert top.get_yscale() == bottom.get_yscale() == "log"
    slo_top = [ln for ln in top.lines if ln.get_label().startswith("SLO")]
    assert [(ln.get_label(), list(ln.get_ydata())) for ln in slo_top] == [("SLO ≤ 0.5", [0.5, 0.5])]
    assert [ln.get_label() for ln in bottom.lines if ln.get_label().startswith("SLO")] == ["SLO ≥ 1"]
    assert top.get_title() == ("mean over seeds (n = 3) ± 95 % Student-t interval; "
                               "bars cut at 0 (cannot be negative): pool kv preempt")  # (preemptions 2 ± 2.48)


@pytest.mark.parametrize("slo, message", [
    ("client.ttft.p99<0.5", "invalid --slo `client.ttft.p99<0.5`; expected FIGURE<=VALUE or FIGURE>=VALUE"),
    ("client.ttft.p98<=0.5", "--slo `client.ttft.p98<=0.5`: `client.ttft.p98` is not a plotted figure"),
    ("client.ttft.p99<=inf", "invalid --slo `client.ttft.p99<=inf`: `inf` is not a finite number"),
])
def test_a_bad_slo_is_refused(slo, message):
    with pytest.raises(UsageError) as err:
        P.plot_sweep(ROWS, x="Lambda", y="client.ttft.p99", hue="policy", slo=[slo])
    assert err.value.message.startswith(message)


def test_a_log_scale_needs_a_value_above_0():
    rows = [dict(r, **{"pools.kv.preemptions": 0}) for r in ROWS]
    with pytest.raises(UsageError, match=r"`pools.kv.preemptions` has no value above 0 to show on a log scale"):
        P.plot_sweep(rows, x="Lambda", y="pools.kv.preemptions", hue="policy", log_y=True)


def test_one_line_per_seed_says_it_has_no_interval():
    needs_matplotlib()
    fig = P.plot_sweep(ROWS, x="Lambda", y="client.ttft.p99", hue="seed", where=["policy=fcfs"])
    ax = fig.axes[0]
    assert ax.get_title() == "one line per seed: each run's value (no interval)"
    assert not ax.containers and len(ax.lines) == 3


def test_the_paired_panel_plots_each_designs_difference_from_the_baseline_with_0_marked():
    needs_matplotlib()
    # sjf − fcfs is 0.1 on every seed (paired: no spread); preemptions differ by 0
    rows = [dict(r, **{"client.ttft.p99": r["client.ttft.p99"] + (r["seed"] / 50 if r["policy"] == "sjf" else 0)})
            for r in ROWS]
    fig = P.plot_sweep(rows, x="Lambda", y="client.ttft.p99", baseline="policy=fcfs")
    ax = fig.axes[0]
    (container,) = ax.containers
    assert container.get_label() == "sjf"
    # differences 0.1 + seed/50: 0.12, 0.14, 0.16 → mean 0.14, s 0.02, half t(0.975, 2)·0.02/√3
    assert list(container.lines[0].get_ydata()) == pytest.approx([0.14, 0.14])
    seg = container.lines[2][0].get_segments()[0]
    assert (seg[1][1] - seg[0][1]) / 2 == pytest.approx(2 * HALF)
    assert [list(ln.get_ydata()) for ln in ax.lines if ln.get_color() == "black"] == [[0.0, 0.0]]
    assert ax.get_ylabel() == "Δ client ttft p99 (s)"
    assert ax.get_title() == ("paired difference from policy=fcfs (same seed, same point): "
                              "mean over n = 3 pairs ± 95 % Student-t interval")
    # it is the sweep's own paired table, plotted
    from serq.experiments.summary import paired

    table = paired(rows, ["Lambda", "policy"], ["client.ttft.p99"], "policy", "fcfs")
    assert [st["client.ttft.p99"].mean for _, st in table.points] == pytest.approx([0.14, 0.14])


@pytest.mark.parametrize("kwargs, message", [
    ({"hue": "Lambda", "baseline": "policy=fcfs"}, "--baseline `policy=fcfs` compares the values of axis `policy`: "
                                                   "they are the lines, so --hue must be `policy`"),
    ({"baseline": "Lambda=0.2", "hue": None}, "--baseline `Lambda=0.2` compares the values of axis `Lambda`, "
                                              "which cannot also be --x"),
    ({"baseline": "policy=lifo"}, "--baseline `policy=lifo`: `lifo` is not a value of axis `policy`"),
    ({"baseline": "policy=fcfs", "where": ["policy=sjf"]}, "--baseline `policy=fcfs` compares the values of axis "
                                                           "`policy`, which --where policy=… would narrow to one"),
])
def test_a_bad_baseline_is_refused(kwargs, message):
    with pytest.raises(UsageError) as err:
        P.plot_sweep(ROWS, x="Lambda", y="client.ttft.p99", **kwargs)
    assert err.value.message.startswith(message)


def test_plot_reads_standard_input_and_writes_svg_to_standard_output(tmp_path):
    needs_matplotlib()
    import subprocess

    P.plot_sweep(write_csv(tmp_path / "s.csv", ROWS), x="Lambda", y="client.ttft.p99", hue="policy",
                 out=tmp_path / "f.svg")
    jsonl = "".join(json.dumps(r) + "\n" for r in ROWS)
    for data in (jsonl, (tmp_path / "s.csv").read_text()):  # JSON Lines or CSV, told apart by the first character
        done = subprocess.run([sys.executable, "-m", "serq", "plot", "-", "--x", "Lambda", "--y", "client.ttft.p99",
                               "--hue", "policy", "--out", "-"], input=data.encode(), capture_output=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout == (tmp_path / "f.svg").read_bytes()  # the figure the file gives, as SVG


@pytest.mark.parametrize("args, line", [
    (["--cdf", "--log-y"], "error: --cdf plots the `value` column of dump files: --log-y do not apply"),
    (["--x", "Lambda", "--y", "client.ttft.p99", "--hue", "policy", "--slo", "client.ttft.p99=1"],
     "error: invalid --slo `client.ttft.p99=1`"),
    (["--x", "Lambda", "--y", "client.ttft.p99", "--hue", "policy", "--where", "policy"],
     "error: invalid --where `policy`; expected COLUMN=VALUE"),
])
def test_every_option_is_checked_before_the_results_are_read(tmp_path, capsys, monkeypatch, args, line):
    # the results file does not exist: the option's mistake is what is reported
    code, err = cli(capsys, monkeypatch, "plot", str(tmp_path / "missing.jsonl"), *args, "--out", str(tmp_path / "f.png"))
    assert code == 2 and err.startswith(line), err

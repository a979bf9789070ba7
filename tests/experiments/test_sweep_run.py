"""Running sweeps (serq/experiments/sweep.py, backends.py, journal.py): rows in
plan order whatever the workers, each equal to a plain `serq run --json`,
files written as runs end and resumable, Ctrl-C leaving a valid file."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bounds import HANG, env, wait_for
from frontend_util import cli_main, cli_streams, default_sigint

import serq
from serq.errors import SerqError
from serq.experiments.journal import Journal
from serq.experiments.sweep import SweepResult, flatten, req_per_s

ROOT = Path(__file__).resolve().parents[2]
MG1 = "programs/single-turn/mg1.sq"
VLLM = "programs/multi-turn/vllm.sq"


def sweep_mg1(tmp_path: Path, jobs: int, name: str = "rows.jsonl", *extra: str) -> tuple[str, Path]:
    out = tmp_path / name
    code, text = cli_main("sweep", MG1, "--set", "lam=0.5,0.7", "--set", "law=0,1", "--seeds", "3,1,2",
                          "--horizon", "300", "--warmup", "20", "--jobs", str(jobs), "--quiet", "--out", str(out),
                          "--show", "observes.response.mean", *extra)
    assert code == 0, text
    return text, out


def test_rows_are_the_same_for_one_and_two_jobs_in_point_then_seed_order(tmp_path: Path) -> None:
    text1, out1 = sweep_mg1(tmp_path, 1, "one.jsonl")
    text2, out2 = sweep_mg1(tmp_path, 2, "two.jsonl")
    assert out1.read_bytes() == out2.read_bytes()
    assert text1 == text2
    rows = [json.loads(line) for line in out1.read_text().splitlines()]
    # the product in the order given, the seeds in the order given
    assert [(r["lam"], r["law"], r["seed"]) for r in rows] == [
        (lam, law, seed) for lam in (0.5, 0.7) for law in (0, 1) for seed in (3, 1, 2)
    ]
    assert list(rows[0])[:3] == ["lam", "law", "seed"]


def test_each_row_equals_a_plain_run_of_its_point_and_seed(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    code, text = cli_main("sweep", VLLM, "--set", "Lambda=0.3,0.5", "--seeds", "1-2", "--horizon", "60",
                          "--warmup", "10", "--jobs", "2", "--quiet", "--out", str(out))
    assert code == 0, text
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4
    for row in rows:
        code, plain, _ = cli_streams("run", VLLM, "--set", f"Lambda={row['Lambda']}", "--seed", str(row["seed"]),
                               "--horizon", "60", "--warmup", "10", "--json")
        assert code == 0
        expected = flatten(json.loads(plain))
        assert {k: row[k] for k in expected} == expected
        assert set(row) == {"Lambda", "req_per_s", *expected}
    # the generic flattening names
    for name in ("client.ttft.mean", "client.ttft.p99", "client.response.mean", "pools.kv.preemptions",
                 "stages.engine.iterations", "events", "end"):
        assert name in rows[0]


def test_flatten_names_array_members_by_label() -> None:
    report = {"end": 5, "observes": {"hit": {"mean": 1}},
              "pools": [{"name": "kvD", "index": 0, "mean_used": 3}, {"name": "kvD", "index": 1, "mean_used": 4}],
              "stages": [{"name": "engine", "index": None, "iterations": 7}]}
    assert flatten(report) == {"end": 5, "observes.hit.mean": 1, "pools.kvD[0].mean_used": 3,
                               "pools.kvD[1].mean_used": 4, "stages.engine.iterations": 7}


def test_req_per_s_is_turns_completed_after_warm_up_per_second() -> None:
    assert req_per_s({"client.response.count": 90, "end": 100, "warmup": 10}) == 1.0
    assert req_per_s({"end": 100, "warmup": 10}) is None  # no client rows (the kernel form)


def test_csv_and_jsonl_hold_the_same_rows(tmp_path: Path) -> None:
    _, jl = sweep_mg1(tmp_path, 2, "rows.jsonl")
    _, cs = sweep_mg1(tmp_path, 2, "rows.csv")
    from_json = [json.loads(line) for line in jl.read_text().splitlines()]
    with cs.open() as f:
        from_csv = list(csv.DictReader(f))
    assert len(from_csv) == len(from_json)
    assert Journal(cs).read() == from_json  # numbers read back as the same numbers


def test_resume_skips_the_runs_the_file_holds_and_ignores_a_cut_last_line(tmp_path: Path) -> None:
    text, full = sweep_mg1(tmp_path, 2, "full.jsonl")
    lines = full.read_text().splitlines(keepends=True)
    part = tmp_path / "part.jsonl"
    part.write_text(lines[4] + lines[0] + lines[7] + lines[1][:40])  # a crash mid-line
    program = serq.sweep  # the Python entry point, the same machinery
    result = program(MG1, {"lam": [0.5, 0.7], "law": [0, 1]}, seeds=[3, 1, 2], horizon=300, warmup=20,
                     jobs=2, out=part, resume=True)
    assert result.skipped == 3
    assert part.read_bytes() == full.read_bytes()
    assert [r["seed"] for r in result.rows] == [json.loads(x)["seed"] for x in lines]


def test_resume_runs_again_when_the_horizon_changed(tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    serq.sweep(MG1, {"lam": [0.5]}, seeds=[1, 2], horizon=100, warmup=0, jobs=1, out=out)
    again = serq.sweep(MG1, {"lam": [0.5]}, seeds=[1, 2], horizon=200, warmup=0, jobs=1, out=out, resume=True)
    assert again.skipped == 0
    assert len(again.rows) == 2
    # the other horizon's rows stay in the file, after this sweep's
    assert [r["horizon"] for r in Journal(out).read()] == [200, 200, 100, 100]
    once = serq.sweep(MG1, {"lam": [0.5]}, seeds=[1, 2], horizon=200, warmup=0, jobs=1, out=out, resume=True)
    assert once.skipped == 2


def test_without_resume_the_file_starts_over(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    out.write_text('{"old": 1}\n')
    serq.sweep(MG1, {"lam": [0.5]}, seeds=[1], horizon=50, warmup=0, jobs=1, out=out)
    assert "old" not in out.read_text() and len(out.read_text().splitlines()) == 1


def test_a_csv_header_widens_when_a_row_brings_a_new_column(tmp_path: Path) -> None:
    j = Journal(tmp_path / "r.csv")
    j.start([])
    j.append({"a": 1, "b": 2.5})
    j.append({"a": 2, "c": "x"})
    assert (tmp_path / "r.csv").read_text() == "a,b,c\n1,2.5,\n2,,x\n"
    assert j.read() == [{"a": 1, "b": 2.5, "c": None}, {"a": 2, "b": None, "c": "x"}]


def test_a_resumed_file_that_is_not_a_sweep_s_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "r.jsonl"
    bad.write_text("[1]\n{}\n")
    with pytest.raises(SerqError, match="r.jsonl:1: not a row"):
        Journal(bad).read()


def test_a_failed_run_keeps_the_finished_ones_and_says_how_to_go_on(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    # mean_s = -1: the service time is negative, a run-time error at every point
    code, text = cli_main("sweep", MG1, "--set", "law=0", "--set", "mean_s=1,-1", "--horizon", "50",
                          "--warmup", "0", "--jobs", "1", "--quiet", "--out", str(out))
    assert code == 1, text
    assert "the run at law=0, mean_s=-1, seed 1 failed" in text
    assert "add --resume" in text and "Traceback" not in text
    assert len(out.read_text().splitlines()) == 1


def test_the_summary_and_the_python_result() -> None:
    result = serq.sweep(MG1, {"lam": [0.5, 0.6]}, seeds=range(1, 4), horizon=200, warmup=10, jobs=2)
    assert isinstance(result, SweepResult)
    assert len(result.rows) == 6 and result.axes == ["lam"]
    summary = result.summary(["observes.response.mean"])
    data = summary.to_dict()
    assert data["figures"] == ["observes.response.mean"]
    first = data["points"][0]
    values = [r["observes.response.mean"] for r in result.rows[:3]]
    from serq.experiments.stats import across

    assert first["lam"] == 0.5 and first["runs"] == 3
    assert first["observes.response.mean"]["mean"] == pytest.approx(sum(values) / 3)
    assert first["observes.response.mean"]["ci"] == pytest.approx(across(values).half)
    assert "±" in summary.text()
    # a kernel program has none of the default figures: its observes' means instead
    assert result.summary().figures == ["observes.response.mean", "observes.wait.mean", "observes.service.mean"]


def test_to_frame_names_the_extra_when_pandas_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    result = SweepResult([{"x": 1, "seed": 1}], ["x"], [1])
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(SerqError, match=r"pip install 'serq\[pandas\]'"):
        result.to_frame()


def test_to_frame_passes_the_rows_and_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    fake = types.ModuleType("pandas")
    fake.DataFrame = lambda rows, columns: (rows, columns)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pandas", fake)
    result = SweepResult([{"x": 1, "seed": 1}, {"x": 2, "seed": 1, "y": 3}], ["x"], [1])
    assert result.to_frame() == (result.rows, ["x", "seed", "y"])


def test_the_summary_json_and_a_single_seed(tmp_path: Path) -> None:
    code, text = cli_main("sweep", VLLM, "--set", "Lambda=0.3", "--horizon", "40", "--warmup", "5", "--json",
                          "--jobs", "1")
    assert code == 0, text
    data = json.loads(text)
    assert data["figures"][:3] == ["req_per_s", "client.ttft.mean", "client.ttft.p99"]
    assert data["points"][0]["client.ttft.mean"]["ci"] is None  # one seed: no interval
    code, table = cli_main("sweep", VLLM, "--set", "Lambda=0.3", "--horizon", "40", "--warmup", "5", "--jobs", "1")
    assert " ± " not in table  # one seed: the means alone, no `± -` in every cell
    row = table.splitlines()[2].split()
    assert row[:3] == ["0.3", "1", "0/1"]  # a 35 s run is too short to settle (issue 39)
    assert all(float(x) >= 0 for x in row[3:])


def test_import_serq_does_not_import_the_experiments() -> None:
    done = subprocess.run([sys.executable, "-c", "import serq, sys; print('serq.experiments' in sys.modules)"],
                          cwd=ROOT, capture_output=True, text=True)  # it only computes: no timeout
    assert done.stdout.strip() == "False"
    assert callable(serq.sweep) and serq.SweepResult is SweepResult


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a process group")
def test_ctrl_c_stops_the_workers_and_leaves_a_valid_resumable_file(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    # 15 runs (5 points x 3 seeds; were 30 with seeds 1-6): the Ctrl-C comes once two rows are
    # written, with 13 runs of horizon 20000 (0.6 s each on an idle machine, some 4 s of work on two
    # workers) still to go -- what the test needs is a sweep still running when the signal comes,
    # then a resume that finishes it; the runs after those two are the resume's own cost
    argv = [str(Path(sys.executable).parent / "serq"), "sweep", MG1, "--set", "lam=0.5:0.9:0.1", "--seeds", "1-3",
            "--horizon", "20000", "--warmup", "100", "--jobs", "2", "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=default_sigint, env=env())
    # two rows written, however long they take on a busy machine (HANG: a true hang only)
    wait_for(lambda: out.exists() and len(out.read_text().splitlines()) >= 2, "two rows in the file", proc)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    stdout, stderr = proc.communicate(timeout=HANG)  # it ends on the signal (HANG: a true hang only)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted: ") and "--resume" in lines[0], stderr
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert 2 <= len(kept) < 15
    assert f"{len(kept)} of 15 runs kept" in lines[0]
    order = [(r["lam"], r["seed"]) for r in kept]
    assert order == sorted(order)
    # the workers (and multiprocessing's resource tracker) go: nothing of the group is left (HANG: one
    # that stays, a true hang)
    wait_for(lambda: not subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True).stdout.strip(),
             "the sweep's workers to end", every=0.1)
    # and --resume finishes the sweep from there (its runs bounded by events: no timeout)
    done = subprocess.run([*argv, "--resume", "--quiet"], cwd=ROOT, capture_output=True, text=True, env=env())
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # --quiet
    final = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["lam"], r["seed"]) for r in final] == [(lam, s) for lam in (0.5, 0.6, 0.7, 0.8, 0.9)
                                                      for s in range(1, 4)]
    assert all(k in final for k in kept)


def run_with_stderr_on_a_terminal(*argv: str) -> tuple[int, str]:
    """`serq ARGV` with stderr on a pseudo-terminal: its exit code and what it drew there."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "serq"), *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=slave, env=env(TERM="xterm", COLUMNS="120"))
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return proc.wait(), seen.decode("utf-8", "replace")  # it has closed the terminal: ending


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_progress_is_drawn_on_a_terminal_and_not_with_quiet() -> None:
    argv = ("sweep", MG1, "--set", "lam=0.5,0.6", "--seeds", "1-3", "--horizon", "3000", "--warmup", "0",
            "--jobs", "1")
    code, drawn = run_with_stderr_on_a_terminal(*argv)
    assert code == 0
    assert "sweep" in drawn and "/6" in drawn and "runs" in drawn and "ETA" in drawn
    code, drawn = run_with_stderr_on_a_terminal(*argv, "--quiet")
    assert code == 0 and drawn == ""


def test_no_progress_when_stderr_is_not_a_terminal() -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "serq"), "sweep", MG1, "--set", "lam=0.5",
                           "--seeds", "1-2", "--horizon", "500", "--warmup", "0"],
                          cwd=ROOT, capture_output=True, text=True, env=env())  # bounded by events
    assert done.returncode == 0 and done.stderr == ""


def test_an_out_file_that_cannot_be_written_stops_the_sweep_before_any_run(tmp_path: Path) -> None:
    code, text = cli_main("sweep", MG1, "--set", "lam=0.5", "--horizon", "100", "--warmup", "0", "--quiet",
                          "--out", str(tmp_path / "no" / "rows.csv"))
    assert code == 1
    assert text.strip() == f"error: cannot write {tmp_path / 'no' / 'rows.csv'}: No such file or directory"


SCRIPT = f"""
import serq
result = serq.sweep({str(ROOT / MG1)!r}, {{"lam": [0.5, 0.6]}}, seeds=[1, 2], horizon=200, warmup=0, jobs=2)
print(len(result.rows), result.rows[3]["events"])
"""


def test_a_script_without_a_main_guard_can_sweep_on_spawned_workers(tmp_path: Path) -> None:
    # the workers do not re-run the caller's script (which would start a sweep in each)
    script = tmp_path / "unguarded.py"
    script.write_text(SCRIPT)
    # its runs bounded by events; HANG guards against workers that re-run the script for ever, only
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, env=env(),
                          timeout=HANG, check=False)
    assert done.returncode == 0, done.stderr
    expected = serq.sweep(MG1, {"lam": [0.6]}, seeds=[2], horizon=200, warmup=0, jobs=1).rows[0]["events"]
    assert done.stdout.split() == ["4", str(expected)]
    assert done.stderr == ""


def test_a_script_read_from_standard_input_can_sweep_on_spawned_workers(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-"], input=SCRIPT, cwd=tmp_path, capture_output=True, text=True,
                          env=env(), timeout=HANG, check=False)  # as above
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "4" and done.stderr == ""


#: The clock the runner reads in this test (time.perf_counter, replaced): a task moves it by
#: the seconds it stands for, so what the runner decides depends on the tasks alone, not
#: on how busy the machine is (issue 38).  Workers have their own copy, which nobody reads.
CLOCK = [0.0]


def _pid_after(seconds: float) -> int:
    """A task for the runner: the process that ran it (a task of ``seconds`` on :data:`CLOCK`)."""
    CLOCK[0] += seconds
    return os.getpid()


def test_by_default_runs_start_here_and_workers_start_once_the_runs_left_would_take_long(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from serq.experiments import backends

    monkeypatch.setattr(time, "perf_counter", lambda: CLOCK[0])

    def pids(tasks: list[float], jobs: int | None = None) -> list[int]:
        got: list[int] = []
        with backends.Runner(jobs) as runner:
            runner.run(tasks, _pid_after, got.append)
        return got

    here = os.getpid()
    # short runs (5 × 0.01 s = 0.05 s left after the first): all in this process, no pool started
    assert pids([0.01] * 6) == [here] * 6
    # with an explicit count, as given: a pool from the first run
    if backends.default_jobs() < 2:
        pytest.skip("one core: the default never starts workers")
    assert here not in pids([0.0] * 4, jobs=2)
    # long runs: the first here, and the rest on workers once 1 s of work is left (0.3 s × 5 = 1.5 s)
    got = pids([0.3] * 6)
    assert got[0] == here and here not in got[1:]
    monkeypatch.setattr(backends, "PARALLEL_AFTER", 10.0)  # the same runs under a higher bar: all here
    assert pids([0.3] * 6) == [here] * 6

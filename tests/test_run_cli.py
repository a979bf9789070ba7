"""`serq run` from the command line: determinism, the golden report, the
seed's jq sweep, --dump, and bad input (one-line errors, exit 1 or 2, never a
traceback)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bounds import HANG, env

ROOT = Path(__file__).resolve().parent.parent
VLLM = ROOT / "programs/multi-turn/vllm.sq"
GOLDEN = ROOT / "tests/golden"


def serq(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`serq ARGS`, its run bounded by events (tests/bounds.py): no timeout."""
    return subprocess.run([sys.executable, "-m", "serq", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env())


def test_the_same_seed_gives_a_byte_identical_report_and_another_seed_does_not() -> None:
    args = ("run", str(VLLM), "--horizon", "60", "--warmup", "10")
    a, b = serq(*args), serq(*args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    ja, jb = serq(*args, "--json"), serq(*args, "--json")
    assert ja.stdout == jb.stdout
    other = serq(*args, "--seed", "2")
    assert other.stdout != a.stdout


def test_the_report_of_a_small_run_matches_the_golden_file() -> None:
    out = serq("run", str(VLLM), "--horizon", "60", "--warmup", "10", "--seed", "3")
    assert out.returncode == 0, out.stderr
    golden = GOLDEN / "vllm_h60.txt"
    if os.environ.get("SERQ_REGEN_GOLDEN"):
        golden.write_text(out.stdout)
    assert out.stdout == golden.read_text()


def test_the_report_has_the_seed_layout() -> None:
    out = serq("run", str(VLLM), "--horizon", "300", "--warmup", "30").stdout
    lines = out.splitlines()
    assert lines[0].startswith("run: horizon 300 end 300 warmup 30 seed 1 events ")
    assert "observe         count" in out and "client    count" in out
    assert any(l.startswith("hit ") for l in lines) and any(l.startswith("prefill_tokens ") for l in lines)
    assert [l.split()[0] for l in lines if l.split() and l.split()[0] in ("ttft", "tpot", "response")] == [
        "ttft", "tpot", "response"]
    assert any(l.startswith("kv ") for l in lines) and any(l.startswith("reqs ") for l in lines)


@pytest.mark.skipif(shutil.which("jq") is None or shutil.which("bash") is None, reason="needs jq and bash")
def test_the_seeds_jq_sweep_runs_as_printed(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "serq").write_text(f"#!/bin/sh\nexec {sys.executable} -m serq \"$@\"\n")
    (bindir / "serq").chmod(0o755)
    script = """
for lam in 0.3 0.6 0.9; do
  for seed in 1 2 3; do
    serq run examples/multi-turn/vllm.sq --horizon 2000 --warmup 200 --set Lambda=$lam --seed $seed --json \\
      | jq -r --arg l $lam --arg s $seed \\
          '[$l, $s, .client.ttft.mean, (.pools[] | select(.name=="kv") | .preemptions)] | @tsv'
  done
done
""".replace("examples/", "programs/").replace("--horizon 2000 --warmup 200", "--horizon 100 --warmup 10")
    # a shell pipeline (serq into jq): its runs are bounded by events, and HANG guards against a
    # pipe that never closes, only
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT,
                         env=env(PATH=f"{bindir}:{os.environ['PATH']}"), timeout=HANG)
    assert out.returncode == 0, out.stderr
    rows = [line.split("\t") for line in out.stdout.splitlines()]
    assert [(r[0], r[1]) for r in rows] == [(l, s) for l in ("0.3", "0.6", "0.9") for s in ("1", "2", "3")]
    for r in rows:
        assert 0.001 < float(r[2]) < 10 and int(r[3]) >= 0


def test_dump_writes_one_csv_per_observation(tmp_path: Path) -> None:
    out = serq("run", str(VLLM), "--horizon", "60", "--warmup", "10", "--dump", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    # the program's observes, and the client rows' per-turn samples (issue 10)
    assert files == ["client_response.csv", "client_tpot.csv", "client_ttft.csv", "hit.csv", "prefill_tokens.csv"]
    rows = (tmp_path / "out/hit.csv").read_text().splitlines()
    assert rows[0] == "time,session,turn,value"
    assert len(rows) > 10
    assert list(tmp_path.iterdir()) == [tmp_path / "out"]  # no temporary folder left behind


def test_json_report_names_the_seed_fields() -> None:
    report = json.loads(serq("run", str(VLLM), "--horizon", "60", "--warmup", "10", "--json").stdout)
    assert set(report["client"]) == {"ttft", "tpot", "response"}
    assert report["client"]["ttft"]["mean"] > 0
    kv = next(p for p in report["pools"] if p["name"] == "kv")
    assert kv["preemptions"] == 0 and kv["index"] is None
    assert report["horizon"] == 60 and report["seed"] == 1


@pytest.mark.parametrize("args, code, message", [
    (("run", "no/such/file.sq", "--horizon", "10"), 1, "cannot read"),
    (("run", "programs/multi-turn/vllm.sq", "--seed", "-1"), 2, "seed"),
    (("run", "programs/multi-turn/vllm.sq", "--set", "x="), 2, "set"),
    (("run", "programs/multi-turn/vllm.sq", "--set", "Lambdaa=1"), 2, "unknown --set constant `Lambdaa`"),
    (("run", "programs/multi-turn/vllm.sq", "--horizon", "-3"), 2, "horizon"),
    (("run", "programs/multi-turn/vllm.sq", "--warmup", "5000"), 1, "warmup"),
    (("run", "programs/multi-turn/vllm.sq", "--frobnicate"), 2, "frobnicate"),
    (("run", "programs/multi-turn/vllm.sq", "--engine", "engine=nowhere.module:Engine"), 2, "cannot import"),
    (("run", "programs/multi-turn/vllm.sq", "--horizon", "60", "--trace", "any.csv"), 1,
     "--trace any.csv: the program's workload names no trace file"),
])
def test_bad_input_gets_a_short_error_and_the_right_exit_code(args: tuple, code: int, message: str) -> None:
    out = serq(*args)
    assert out.returncode == code, (out.returncode, out.stderr)
    assert message in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_a_program_without_a_horizon_needs_one_from_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "p.sq"
    path.write_text("stage s : delay;\nworkload { arrive poisson(1); }\nsession { run s (1); }\n")
    out = serq("run", str(path))
    assert out.returncode == 1 and "no horizon" in out.stderr
    assert serq("run", str(path), "--horizon", "5").returncode == 0


def test_a_run_time_error_names_the_file_and_prints_nothing_on_stdout(tmp_path: Path) -> None:
    path = tmp_path / "bad.sq"
    path.write_text("stage s : delay;\nworkload { arrive batch(1); init { set c = 1; set K = 2; } }\n"
                    "session { branch (c / K) { run s (1); } }\nrun { horizon 5; }\n")
    out = serq("run", str(path))
    assert out.returncode == 1
    assert "`branch (c / K)`: the guard is 0.5, not 0 or 1" in out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr

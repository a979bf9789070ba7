"""`--backend ray`: the same rows as the process pool, on a local Ray with two
workers.  Skipped when Ray is not installed (`pip install 'serq[ray]'`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bounds import HANG, env, wait_for
from frontend_util import cli_main, default_sigint

MG1 = "programs/single-turn/mg1.sq"
ROOT = Path(__file__).resolve().parents[2]
SERQ = str(Path(sys.executable).parent / "serq")  # this interpreter's command


def sweep(tmp_path: Path, name: str, *extra: str) -> bytes:
    """The rows of a small sweep, written by a `serq sweep` process of its own.
    Ray's compiled core can interrupt the main thread of the process that
    started it (its `_raylet` calls `_thread.interrupt_main`): in the test
    process, a KeyboardInterrupt after the sweep would land in whatever test
    runs next, and could stop the whole session. One did reach a CI run, caught
    in a garbage collector's callback; this is its likely source."""
    out = tmp_path / name
    argv = [SERQ, "sweep", MG1, "--set", "lam=0.5,0.7", "--seeds", "1-3",
            "--horizon", "300", "--warmup", "20", "--jobs", "2", "--quiet", "--out", str(out), *extra]
    # its runs are bounded by events (env); it waits on Ray, so HANG guards a true hang only
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env(), timeout=HANG)
    assert done.returncode == 0, done.stderr
    return out.read_bytes()


def test_ray_gives_the_same_rows_as_the_process_pool(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    assert sweep(tmp_path, "ray.jsonl", "--backend", "ray") == sweep(tmp_path, "pool.jsonl")


def test_without_ray_the_backend_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    code, text = cli_main("sweep", MG1, "--set", "lam=0.5", "--horizon", "50", "--warmup", "0", "--backend", "ray",
                          "--quiet")
    assert code == 1
    assert "--backend ray needs Ray: pip install 'serq[ray]'" in text


def test_address_is_for_ray_only() -> None:
    code, text = cli_main("sweep", MG1, "--set", "lam=0.5", "--address", "auto", "--quiet")
    assert code == 2 and "--address joins a Ray cluster" in text


def test_ctrl_c_on_ray_keeps_the_finished_runs_and_stops_ray(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    import json
    import os
    import signal

    out = tmp_path / "rows.jsonl"
    argv = [SERQ, "sweep", MG1, "--set", "lam=0.5:0.9:0.1", "--seeds", "1-6",
            "--horizon", "20000", "--warmup", "100", "--jobs", "2", "--backend", "ray", "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=default_sigint, env=env())
    # two rows written, however long Ray takes to start on a busy machine (HANG: a true hang only)
    wait_for(lambda: out.exists() and len(out.read_text().splitlines()) >= 2, "two rows in the file", proc)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: Ray's own processes get it too
    _, stderr = proc.communicate(timeout=HANG)  # it ends on the signal, Ray with it (HANG: a true hang only)
    if proc.returncode != 130 and "discovered a bug in Ray" in stderr:
        # Ray 2.x sometimes aborts its own driver on a cancelled task (task_manager.cc "Tried to
        # complete task that was not pending"): the rows kept must still be whole
        kept = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(kept) >= 2
        pytest.xfail("Ray aborted on cancellation (a Ray bug, docs/experiments.md); the results file stayed valid")
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert [line for line in stderr.splitlines() if line.startswith("interrupted: ")], stderr
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert 2 <= len(kept) < 30
    # Ray shuts down: nothing of the sweep's process group is left (HANG: a process that stays, a true hang)
    wait_for(lambda: not subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.strip(),
             "Ray's processes to end", every=0.1)

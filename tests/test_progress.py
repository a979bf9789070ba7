"""A long `serq run` shows its progress on a terminal's standard error, and
nothing otherwise (serq/progress.py; issue 25)."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from bounds import env, wait_for

import serq.progress
from serq.progress import RunProgress

ROOT = Path(__file__).resolve().parents[1]


def test_the_line_says_the_simulated_time_against_the_horizon_and_is_cleared(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the line's wall-clock seconds from a clock that stands still, and the test waits for the
    # line rather than sleeping: the same text however busy the machine (issue 38)
    monkeypatch.setattr(serq.progress, "time", types.SimpleNamespace(monotonic=lambda: 100.0))
    out = io.StringIO()
    clock = [0.0]
    with RunProgress(lambda: clock[0], 10.0, out, delay=0.0, period=0.01):
        clock[0] = 5.0
        wait_for(lambda: "simulated 5 of 10 s" in out.getvalue(), "the line at 5 s", every=0.01)
    text = out.getvalue()
    assert "\rsimulated 5 of 10 s (50 %) · 0 s" in text
    width = len("simulated 5 of 10 s (50 %) · 0 s")
    assert text.endswith("\r" + " " * width + "\r")  # the line is gone when the run ends


def test_a_short_run_shows_nothing() -> None:
    # a run that ends before the line's delay: a delay no machine reaches, not one the sleep
    # must stay under (issue 38)
    out = io.StringIO()
    with RunProgress(lambda: 1.0, 10.0, out, delay=1e6):
        time.sleep(0.05)
    assert out.getvalue() == ""


def _run_on_a_terminal(*extra: str) -> tuple[int, str, str]:
    """`serq run` with its standard error on a pseudo-terminal, the line shown from the start."""
    master, slave = pty.openpty()
    # at once: the run need not last a second
    proc = subprocess.Popen([sys.executable, "-m", "serq", "run", "programs/multi-turn/vllm.sq", "--horizon", "300", "--warmup", "30",
                             *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=slave, env=env(SERQ_PROGRESS_AFTER="0"))
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out = proc.communicate()[0]
    os.close(master)
    return proc.returncode, out.decode(), seen.decode(errors="replace")


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_serq_run_on_a_terminal_shows_progress_and_quiet_turns_it_off() -> None:
    code, out, err = _run_on_a_terminal()
    assert code == 0 and out.startswith("run: horizon 300 ")
    assert "simulated " in err and " of 300 s (" in err
    code, out, err = _run_on_a_terminal("--quiet")
    assert code == 0 and out.startswith("run: horizon 300 ") and err == ""


def test_serq_run_into_a_pipe_shows_no_progress() -> None:
    done = subprocess.run([sys.executable, "-m", "serq", "run", "programs/multi-turn/vllm.sq", "--horizon", "300",
                           "--warmup", "30"],  # (settles: no warning)
                          cwd=ROOT, capture_output=True, text=True, env=env(SERQ_PROGRESS_AFTER="0"))
    assert done.returncode == 0 and done.stderr == ""

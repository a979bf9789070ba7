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


def _line_after(monkeypatch: pytest.MonkeyPatch, t: float, horizon: float, spent: float) -> str:
    """The line of a run at ``t`` of ``horizon`` after ``spent`` wall seconds (a clock that stands still)."""
    monkeypatch.setattr(serq.progress, "time", types.SimpleNamespace(monotonic=lambda: 100.0 + spent))
    bar = RunProgress(lambda: t, horizon, io.StringIO())
    bar._start = 100.0
    return bar.line()


def test_the_line_gives_the_wall_time_left_at_the_pace_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    # 12 s for the first 5 of 10 simulated seconds: 12 s more for the other 5
    assert _line_after(monkeypatch, 5.0, 10.0, 12.0) == "simulated 5 of 10 s (50 %) · 12 s · about 12 s left"
    # a fifth done in 30 s: 120 s more, said in minutes
    assert _line_after(monkeypatch, 400.0, 2000.0, 30.0).endswith("· 30 s · about 2 min left")
    # nearly there: not "about 0 s"
    assert _line_after(monkeypatch, 9.9, 10.0, 20.0).endswith("· 20 s · less than a second left")
    # not before a second has passed (no pace to go by), nor at or past the horizon
    assert _line_after(monkeypatch, 5.0, 10.0, 0.5) == "simulated 5 of 10 s (50 %) · 0 s"
    assert "left" not in _line_after(monkeypatch, 10.0, 10.0, 30.0)
    assert "left" not in _line_after(monkeypatch, 0.0, 10.0, 30.0)


def test_a_horizon_far_past_what_was_meant_says_so_in_years(monkeypatch: pytest.MonkeyPatch) -> None:
    # `serq run programs/multi-turn/closed.sq --horizon 1e308`: the share stays at 0 %, the time left
    # tells the user the run will not end; no overflow to inf on the way
    line = _line_after(monkeypatch, 271048.0, 1e308, 12.0)
    assert line.startswith("simulated 271048 of 1e+308 s (0 %) · 12 s · about ")
    assert line.endswith(" years left")
    years = float(line.split("about ")[1].split(" ")[0])
    assert years == pytest.approx(1e308 / 271048.0 * 12.0 / (365.25 * 86400), rel=1e-2)
    # a pace that would give more than the largest float: the time left is not said
    assert "left" not in _line_after(monkeypatch, 1e-300, 1e308, 12.0)


@pytest.mark.parametrize(("seconds", "said"), [
    (0.6, "1 s"), (59.0, "59 s"), (99.4, "99 s"), (100.0, "2 min"), (3000.0, "50 min"), (7200.0, "2 h"),
    (47 * 3600.0, "47 h"), (3 * 86400.0, "3 days"), (400 * 86400.0, "400 days"),
    (10 * 365.25 * 86400, "10 years"), (3.2e9 * 365.25 * 86400, "3.2e+09 years")])
def test_wall_times_read_in_the_unit_that_suits_them(seconds: float, said: str) -> None:
    assert serq.progress.wall(seconds) == said


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

"""How often the cycle collector runs (serq/_collector.py): a run raises the
youngest generation's threshold and puts it back, the ``serq`` command's
process keeps the raised one, and neither changes a report."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest
from bounds import env

import serq
from serq import _collector

ROOT = Path(__file__).resolve().parent.parent
VLLM = ROOT / "programs" / "multi-turn" / "vllm.sq"


def test_a_run_collects_less_often_and_puts_the_setting_back() -> None:
    old = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with _collector.fewer():
            assert gc.get_threshold() == (_collector.YOUNG, 10, 10)
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(50_000, 10, 10)  # a caller's higher setting is kept
        with _collector.fewer():
            assert gc.get_threshold() == (50_000, 10, 10)
        gc.set_threshold(0, 10, 10)  # and the collector left off where it was turned off
        with _collector.fewer():
            assert gc.get_threshold() == (0, 10, 10)
    finally:
        gc.set_threshold(*old)


def test_the_command_process_collects_as_a_run_does_from_its_start() -> None:
    code = "import gc; import serq.cli; print(gc.get_threshold()[0])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env())
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == _collector.YOUNG
    plain = subprocess.run([sys.executable, "-c", "import gc; import serq; print(gc.get_threshold()[0])"],
                           capture_output=True, text=True, cwd=ROOT, env=env())
    assert int(plain.stdout) == 700  # `import serq` leaves a notebook's collector as it was


def test_the_report_does_not_depend_on_when_the_collector_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    program = serq.load(VLLM)
    old, was = gc.get_threshold(), gc.isenabled()
    monkeypatch.setattr(_collector, "YOUNG", 10)  # (else the run raises the threshold to 10 000)
    try:
        gc.enable()
        gc.set_threshold(10, 2, 2)  # often: every 10 new objects, the oldest every 40
        before = sum(g["collections"] for g in gc.get_stats())
        often = serq.run(program, seed=3, horizon=100, warmup=10).text()
        collected = sum(g["collections"] for g in gc.get_stats()) - before
        gc.disable()
        never = serq.run(program, seed=3, horizon=100, warmup=10).text()
    finally:
        gc.set_threshold(*old)
        if was:
            gc.enable()
    # (it did run, and often: 1 500 times in a fresh process, 610 in a CI worker — the count of
    # new objects it goes by is those made less those freed, and depends on what the process holds)
    assert collected > 100
    assert often == never
    assert "response" in often

"""The package type-checks: mypy finds no error in `serq` (run in-process, from the repo root)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_error_in_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    # --no-incremental: a stale cache from another checkout never hides an error
    stdout, stderr, status = api.run(["serq", "--ignore-missing-imports", "--no-incremental"])
    assert status == 0, f"mypy exited with {status}:\n{stdout}{stderr}"

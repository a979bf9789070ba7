"""The package type-checks: mypy finds no error in `serq` (from the repo root, so that
pyproject.toml's `[tool.mypy]` settings apply).

mypy runs in a process of its own: its command line ends with ``os._exit`` (mypy's
``util.hard_exit``) and skips freeing the types it built (370 MB at most), which in the test's
own process cost 8-14 s more when the pytest worker exits (`python -m pytest -n 1
tests/test_typing.py`: 30 s in-process, 20 s so). It only computes, so it has no timeout
(tests/bounds.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_error_in_the_package() -> None:
    # --no-incremental: a stale cache from another checkout never hides an error
    done = subprocess.run([sys.executable, "-m", "mypy", "serq", "--ignore-missing-imports", "--no-incremental"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"mypy exited with {done.returncode}:\n{done.stdout}{done.stderr}"
    assert "Success: no issues found" in done.stdout

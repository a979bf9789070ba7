"""Atomic file output: a failed run leaves nothing half-written."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_dir_atomic(path: str | os.PathLike[str], fill: Callable[[Path], None]) -> None:
    """Create folder ``path`` with the files ``fill(tmp)`` writes into a temporary
    sibling folder, then move them in.  An existing folder keeps its other files;
    the written files replace theirs one rename each."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    try:
        fill(tmp)
        if not target.exists():
            os.replace(tmp, target)
            return
        for root, _dirs, files in os.walk(tmp):
            rel = Path(root).relative_to(tmp)
            (target / rel).mkdir(parents=True, exist_ok=True)
            for name in files:
                os.replace(Path(root) / name, target / rel / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

"""The sweep's results file: JSON Lines (``.jsonl``) or CSV (``.csv``).

While a sweep runs, each finished run's row is appended and the file flushed
and fsync'ed, so a crash or a Ctrl-C loses at most the line being written.
When the sweep ends (or is interrupted) the file is rewritten in plan order
through :func:`serq.files.write_text_atomic` (a temporary file, then a
rename).  On ``--resume`` the rows are read back; a last line without its
newline (a write cut short) is ignored, any other unreadable line is an
error.

A CSV file's header is the union of its rows' columns.  Rows can differ (a
client row with no samples is absent from a report), so when a new row brings
a column the header lacks, the whole file is rewritten with the wider header
before appending continues — rare, and the file stays valid CSV throughout.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import SerqError, UsageError
from ..files import write_text_atomic
from ..report import _encode
from .grid import number_or_text, value_text

FORMATS = {".jsonl": "jsonl", ".csv": "csv"}


def _cell(v: Any) -> str:
    return "" if v is None else value_text(v)



def jsonl_rows(text: str, bad_line: Callable[[int], Exception]) -> list[dict[str, Any]]:
    """The JSON objects of ``text``, one a line (blank lines skipped); a
    line that is not an object raises ``bad_line(line number)``."""
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict):
            raise bad_line(n)
        rows.append(row)
    return rows

class Journal:
    """One results file; see the module's rules."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(os.path.realpath(path))
        self.shown = os.fspath(path)
        fmt = FORMATS.get(self.path.suffix.lower())
        if fmt is None:
            raise UsageError(f"invalid --out `{self.shown}`: the name must end in .jsonl or .csv")
        self.format = fmt
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise UsageError(f"invalid --out `{self.shown}`: not a regular file (a sweep appends and rewrites it)")
        self.rows: list[dict[str, Any]] = []
        self.header: list[str] = []

    # -- reading --------------------------------------------------------------

    def read(self) -> list[dict[str, Any]]:
        """The rows the file holds (none if it does not exist)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as err:
            raise SerqError(f"cannot read {self.shown}: {getattr(err, 'strerror', None) or err}",
                            prefix="error") from None
        if not text.endswith("\n"):  # a line cut short by a crash
            text = text[: text.rfind("\n") + 1]
        if self.format == "jsonl":
            return jsonl_rows(text, lambda n: SerqError(
                f"{self.shown}:{n}: not a row of a sweep (a JSON object)",
                helps=["resume only from a file a sweep wrote, or drop --resume to start over"]))
        reader = csv.DictReader(io.StringIO(text))
        rows = []
        for row in reader:
            if None in row or any(v is None for v in row.values()):
                raise SerqError(f"{self.shown}:{reader.line_num}: a row with a different number of cells",
                                helps=["resume only from a file a sweep wrote, or drop --resume to start over"])
            rows.append({k: (None if v == "" else number_or_text(v)) for k, v in row.items()})
        return rows

    # -- writing --------------------------------------------------------------

    def start(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Begin: the file holds exactly ``rows`` (those kept on resume)."""
        self.rewrite(rows)

    def append(self, row: Mapping[str, Any]) -> None:
        """Add one row and make it durable (flush, fsync)."""
        self.rows.append(dict(row))
        if self.format == "csv" and any(c not in self.header for c in row):
            self.rewrite(self.rows)
            return
        self._append_text(self._lines([row]))

    def rewrite(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Replace the file with ``rows`` in this order, atomically."""
        self.rows = [dict(r) for r in rows]
        if self.format == "csv":
            self.header = list(dict.fromkeys(c for r in self.rows for c in r))
            text = self._csv_line(self.header) if self.header else ""
        else:
            text = ""
        try:
            write_text_atomic(self.path, text + self._lines(self.rows))
        except BrokenPipeError:
            raise
        except OSError as err:
            raise SerqError(f"cannot write {self.shown}: {err.strerror or err}", prefix="error") from None

    def _lines(self, rows: Sequence[Mapping[str, Any]]) -> str:
        if self.format == "jsonl":
            return "".join(_encode(dict(r)) + "\n" for r in rows)
        return "".join(self._csv_line([_cell(r.get(c)) for c in self.header]) for r in rows)

    @staticmethod
    def _csv_line(cells: Sequence[str]) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(cells)
        return buf.getvalue()

    def _append_text(self, text: str) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
            try:
                data = memoryview(text.encode("utf-8"))
                while data:
                    data = data[os.write(fd, data):]
                os.fsync(fd)
            finally:
                os.close(fd)
        except BrokenPipeError:
            raise
        except OSError as err:
            raise SerqError(f"cannot write {self.shown}: {err.strerror or err}", prefix="error") from None

"""What each trace format is built from: the request it yields, the tally of
the rows it leaves out, the field readers and the rows of a CSV source.

A format module (``splitwise.py``, ``azure.py``, …) reads one request per row
of its source and yields :class:`Request` values one at a time; its
:class:`Format` is listed in :mod:`serq.traces.formats`.  Times are kept as
decimals (:class:`decimal.Decimal`) from the text on, so no float noise is
added to an arrival.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Callable, Iterator, Sequence, TextIO

from ..errors import SerqError


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a source trace."""

    line: int  #: the source line it came from (1-based)
    time: Decimal  #: arrival, seconds, in the source's own origin
    new: int  #: prompt tokens
    out: int  #: output tokens


@dataclass(slots=True)
class Tally:
    """What an importer left out, by reason (``reason → rows``), in first-seen order."""

    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1


Reader = Callable[[TextIO, str, Tally, "Options"], Iterator[Request]]


@dataclass(frozen=True)
class Format:
    """An importable trace format."""

    name: str
    aliases: tuple[str, ...]
    description: str  #: one line: what the source is
    keeps: str  #: what the import keeps, and what it drops
    read: Reader


@dataclass(frozen=True)
class Options:
    """Format-specific choices (``models``: BurstGPT's ``Model`` values to keep)."""

    models: tuple[str, ...] = ()


# ---------------------------------------------------------------------------
# fields


def file_line(path: str, line: int) -> str:
    """``path:line``, the prefix of a message about that line."""
    return f"{path}:{line}"


def count(text: str, column: str, path: str, line: int) -> int:
    """A token count: a whole number ≥ 0 (``12`` or ``12.0``)."""
    try:
        return _nonneg(int(text), text, column, path, line)
    except ValueError:
        pass
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite():
        raise SerqError(f"column `{column}`: invalid number `{text.strip()}`",
                        helps=["a token count is a whole number, e.g. 512"], prefix=file_line(path, line))
    if value != value.to_integral_value():
        raise SerqError(f"column `{column}`: `{text.strip()}` is not a whole number of tokens",
                        helps=["a token count is a whole number, e.g. 512"], prefix=file_line(path, line))
    return _nonneg(int(value), text, column, path, line)


def _nonneg(value: int, text: str, column: str, path: str, line: int) -> int:
    if value < 0:
        raise SerqError(f"column `{column}`: negative token count `{text.strip()}`",
                        helps=["a token count is 0 or more"], prefix=file_line(path, line))
    return value


def seconds(text: str, column: str, path: str, line: int, unit: Decimal | None = None) -> Decimal:
    """A time: a finite decimal number (times ``unit`` when given)."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite():
        raise SerqError(f"column `{column}`: invalid time `{text.strip()}`",
                        helps=["a time is a number of seconds, e.g. 12.5"], prefix=file_line(path, line))
    return value if unit is None else value * unit


def need_positive(req: Request, new_col: str, out_col: str, path: str) -> Request:
    """Refuse a request with no prompt or no output (a program's `decode (out - 1)` needs out ≥ 1)."""
    for value, column in ((req.new, new_col), (req.out, out_col)):
        if value == 0:
            raise SerqError(f"column `{column}`: 0 tokens",
                            helps=["a request has at least one prompt token and one output token; "
                                   "remove the row"], prefix=file_line(path, req.line))
    return req


# ---------------------------------------------------------------------------
# CSV sources


def csv_rows(f: TextIO, path: str, columns: Sequence[str]) -> Iterator[tuple[int, list[str]]]:
    """``(line, [the named columns' fields])`` for each data row of a CSV file whose
    first non-empty line is a header naming ``columns`` (in any order, among others)."""
    reader = csv.reader(f)
    index: list[int] | None = None
    width = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as err:
            raise SerqError(f"malformed CSV: {err}", helps=["fields are separated by commas, one row a line"],
                            prefix=file_line(path, reader.line_num)) from None
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if index is None:
            names = [c.strip() for c in row]
            missing = [c for c in columns if c not in names]
            if missing:
                shown = ",".join(columns)
                helps = [f"the first line names the columns, among them {shown}"]
                guess = next((_GUESS[n] for n in names if n in _GUESS), None)
                if guess is None and names and names[0].startswith("{"):
                    guess = "mooncake"
                if "session" in names and "new" in names and "out" in names:
                    helps.append("this is already a serQ trace: a program reads it as it is")
                elif guess is not None:
                    helps.append(f"this header looks like the `{guess}` format: "
                                 f"`serq trace import {guess} …`")
                raise SerqError(
                    f"the header has no column {', '.join(f'`{c}`' for c in missing)}", helps=helps,
                    notes=[f"the header read: `{','.join(names)[:200]}`"], prefix=file_line(path, line))
            index = [names.index(c) for c in columns]
            width = len(names)
            continue
        if len(row) != width:
            raise SerqError(f"expected {width} fields, as the header has, got {len(row)}",
                            helps=["each row has one field per header column"], prefix=file_line(path, line))
        yield line, [row[i] for i in index]
    if index is None:
        raise SerqError("no header line", helps=[f"the first line names the columns: {','.join(columns)}"],
                        prefix=path)


#: A column name → the format whose header has it (for the help of a wrong FORMAT).
_GUESS = {"arrived_at": "splitwise", "num_prefill_tokens": "splitwise", "TIMESTAMP": "azure",
          "ContextTokens": "azure", "Timestamp": "burstgpt", "Request tokens": "burstgpt"}

"""The trace CSV of a workload (language §10.4, semantics §7.3).

``session,turn,new,out,think[,forced]``; empty lines, ``#`` lines and the
header are skipped; consecutive rows with the same ``session`` value form one
trace session, in file order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .. import reading
from ..errors import SerqError, Source

#: The largest trace file read (``docs/frontend.md``, "Limits and hostile input").
MAX_TRACE_BYTES = 64 * reading.MiB

COLUMNS = ("session", "turn", "new", "out", "think", "forced")


@dataclass(frozen=True, slots=True)
class TraceTurn:
    new: float
    out: float
    think: float
    forced: float


@dataclass(frozen=True, slots=True)
class Corpus:
    sessions: tuple[tuple[TraceTurn, ...], ...]


def _number(text: str, path: str, line: int, col: int) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise SerqError(
            f"column {col} ({COLUMNS[col - 1]}): invalid number `{text.strip()}`",
            helps=["replace it with a numeric value"], prefix=f"{path}:{line}",
        ) from None


_MEMO = 1 << 16


def _lines(text: str, chunk: int = 1 << 20) -> Iterator[str]:
    """``text.splitlines()``, a piece at a time (pieces end at a newline), so that a
    large trace is not held twice."""
    start, n = 0, len(text)
    while start < n:
        cut = text.find("\n", min(start + chunk, n))
        end = n if cut < 0 else cut + 1
        yield from text[start:end].splitlines()
        start = end


def parse_trace(text: str, path: str) -> Corpus:
    """Parse trace text; errors name ``path:line``."""
    sessions: list[list[TraceTurn]] = []
    last_key: float | None = None
    memo: dict[str, float] = {}  # field text → value: repeated values are parsed and stored once
    for lineno, raw in enumerate(_lines(text), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("session"):
            continue
        fields = line.split(",")
        if len(fields) not in (5, 6):
            raise SerqError(
                f"expected 5 or 6 fields, got {len(fields)}",
                helps=["the columns are session,turn,new,out,think[,forced]"], prefix=f"{path}:{lineno}",
            )
        values = []
        for i, f in enumerate(fields, 1):
            v = memo.get(f)
            if v is None:
                v = _number(f, path, lineno, i)
                if len(memo) < _MEMO:
                    memo[f] = v
            values.append(v)
        key = values[0]
        turn = TraceTurn(values[2], values[3], values[4], values[5] if len(values) == 6 else 0.0)
        if last_key is None or key != last_key:
            sessions.append([])
            last_key = key
        sessions[-1].append(turn)
    if not sessions:
        raise SerqError("empty trace", helps=["a trace needs at least one data row"], prefix=path)
    return Corpus(tuple(tuple(s) for s in sessions))


def read_trace(path: str) -> Corpus:
    """The trace file ``path`` (a regular file of UTF-8 text, at most :data:`MAX_TRACE_BYTES`)."""
    shown = reading.show_path(path)
    try:
        text = reading.read_text(path, MAX_TRACE_BYTES)
    except reading.Unreadable as err:
        if err.text is not None and err.offset is not None:
            line, col = Source(err.text, path).line_col(err.offset)
            raise SerqError(f"not UTF-8 text ({err.reason.partition('(')[2].rstrip(')')})",
                            helps=["save the trace as UTF-8"], prefix=f"{shown}:{line}:{col}") from None
        helps = [f"a trace holds at most {reading.size_text(MAX_TRACE_BYTES)}"] if err.too_large else []
        raise SerqError(f"cannot read trace `{shown}`: {err.reason}", helps=helps) from None
    return parse_trace(text, shown)

"""The trace CSV of a workload (language §10.4, semantics §7.3, docs/replay.md).

Two forms, told apart by the first line that is neither empty nor a ``#``
comment:

* **positional** (the seed's): ``session,turn,new,out,think[,forced]`` — no
  header, or the header ``session,turn,new,out,think`` or
  ``session,turn,new,out,think,forced``; each row has 5 or 6 fields; lines that
  start with ``session`` are skipped wherever they are.
* **named**: a header naming its columns, in any order, from ``session``,
  ``turn``, ``new``, ``out``, ``think``, ``forced`` and ``arrival``
  (``session``, ``new`` and ``out`` are required; ``think`` and ``forced``
  default to 0; ``turn`` is read and not used). Every row has as many fields
  as the header. Any other name is an error (with a did-you-mean).

A first line is a header when none of its fields is a number. Consecutive
rows with the same ``session`` value form one trace session, in file order.
``arrival`` (seconds) is when the session's first turn is sent: the first
row's value is the session's arrival (finite and ≥ 0); later rows' values are
read as numbers and not used. ``arrive trace`` replays sessions at those times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from .. import reading
from ..errors import SerqError, Source, suggest

#: The largest trace file read (``docs/frontend.md``, "Limits and hostile input").
MAX_TRACE_BYTES = 64 * reading.MiB

COLUMNS = ("session", "turn", "new", "out", "think", "forced")
#: The names a header may give, in the order the documentation lists them.
NAMES = ("session", "turn", "new", "out", "think", "forced", "arrival")
REQUIRED = ("session", "new", "out")
#: Column names of public trace formats, and the importer that reads them (docs/traces.md).
FOREIGN = {
    "arrived_at": "splitwise", "num_prefill_tokens": "splitwise", "num_decode_tokens": "splitwise",
    "TIMESTAMP": "azure", "ContextTokens": "azure", "GeneratedTokens": "azure",
    "timestamp": "mooncake", "input_length": "mooncake", "output_length": "mooncake",
    "Timestamp": "burstgpt", "Request tokens": "burstgpt", "Response tokens": "burstgpt",
}


@dataclass(frozen=True, slots=True)
class TraceTurn:
    new: float
    out: float
    think: float
    forced: float


@dataclass(frozen=True, slots=True)
class Corpus:
    sessions: tuple[tuple[TraceTurn, ...], ...]
    #: each session's arrival (its first row's ``arrival``), in file order; ``None``
    #: when the trace has no ``arrival`` column
    arrivals: tuple[float, ...] | None = None
    #: the file as it is shown in messages
    path: str = ""


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


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _cols(raw: str, fields: list[str]) -> list[int]:
    """The 1-based character column where each field of the stripped ``raw`` starts."""
    col = len(raw) - len(raw.lstrip()) + 1
    out = []
    for f in fields:
        out.append(col)
        col += len(f) + 1
    return out


def parse_trace(text: str, path: str) -> Corpus:
    """Parse trace text; errors name ``path:line`` (``path:line:col`` in a named trace)."""
    lines = enumerate(_lines(text), 1)
    for lineno, raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(",")
        names = [f.strip() for f in fields]
        if any(_is_number(f) for f in names):
            break  # a data row: the positional form, without a header
        if tuple(names) in (COLUMNS[:5], COLUMNS):
            break  # the seed's own header: the positional form
        return _parse_named(lines, path, lineno, raw, fields)
    return _parse_positional(text, path)


def _parse_positional(text: str, path: str) -> Corpus:
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
    return Corpus(tuple(tuple(s) for s in sessions), None, path)


def _header(path: str, lineno: int, raw: str, fields: list[str]) -> dict[str, int]:
    """The named header: column name → field index."""
    where: dict[str, int] = {}
    for i, (f, col) in enumerate(zip(fields, _cols(raw, fields))):
        name = f.strip()
        at = f"{path}:{lineno}:{col + len(f) - len(f.lstrip())}"
        listed = ", ".join(f"`{n}`" for n in NAMES)
        if not name:
            raise SerqError(f"the header's column {i + 1} has no name", prefix=at,
                            helps=[f"name every column, from {listed}"])
        if name in where:
            raise SerqError(f"the header names the column `{name}` twice", prefix=at,
                            helps=["each column is named once"])
        if name not in NAMES:
            helps = []
            near = suggest(name, NAMES)
            if near is not None:
                helps.append(f"did you mean `{near}`?")
            if name in FOREIGN:
                helps.append(f"this looks like a {FOREIGN[name]} trace: convert it with "
                             f"`serq trace import {FOREIGN[name]} FILE -o OUT.csv`")
            helps.append(f"a trace's columns are {listed}")
            raise SerqError(f"unknown trace column `{name}`", prefix=at, helps=helps)
        where[name] = i
    missing = [n for n in REQUIRED if n not in where]
    if missing:
        raise SerqError(f"the header has no `{missing[0]}` column", prefix=f"{path}:{lineno}:1",
                        helps=["a named trace needs the columns " + ", ".join(f"`{n}`" for n in REQUIRED)
                               + "; `think`, `forced` default to 0 and `arrival` is needed by `arrive trace`"])
    return where


def _parse_named(lines: Iterator[tuple[int, str]], path: str, head_line: int, head_raw: str,
                 head_fields: list[str]) -> Corpus:
    where = _header(path, head_line, head_raw, head_fields)
    width = len(head_fields)
    names = [""] * width
    for name, i in where.items():
        names[i] = name
    i_session, i_new, i_out = where["session"], where["new"], where["out"]
    i_think, i_forced, i_arrival = where.get("think"), where.get("forced"), where.get("arrival")
    sessions: list[list[TraceTurn]] = []
    arrivals: list[float] = []
    last_key: float | None = None
    memo: dict[str, float] = {}

    def bad(lineno: int, raw: str, fields: list[str], i: int, why: str, help_: str) -> SerqError:
        col = _cols(raw, fields)[i]
        return SerqError(f"column `{names[i]}`: {why}", prefix=f"{path}:{lineno}:{col}", helps=[help_])

    for lineno, raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) != width:
            raise SerqError(
                f"expected {width} fields, got {len(fields)}",
                helps=[f"the header (line {head_line}) names the columns {','.join(names)}"],
                prefix=f"{path}:{lineno}",
            )
        values = []
        for i, f in enumerate(fields):
            v = memo.get(f)
            if v is None:
                try:
                    v = float(f)
                except ValueError:
                    raise bad(lineno, raw, fields, i, f"invalid number `{f.strip()}`",
                              "replace it with a numeric value") from None
                if len(memo) < _MEMO:
                    memo[f] = v
            values.append(v)
        key = values[i_session]
        turn = TraceTurn(values[i_new], values[i_out], values[i_think] if i_think is not None else 0.0,
                         values[i_forced] if i_forced is not None else 0.0)
        if last_key is None or key != last_key:
            sessions.append([])
            last_key = key
            if i_arrival is not None:
                t = values[i_arrival]
                if not (math.isfinite(t) and t >= 0.0):
                    raise bad(lineno, raw, fields, i_arrival, f"the arrival time {fields[i_arrival].strip()} "
                              "is not a finite time ≥ 0", "arrival times are seconds from the start of the run")
                arrivals.append(t)
        sessions[-1].append(turn)
    if not sessions:
        raise SerqError("empty trace", helps=["a trace needs at least one data row"], prefix=path)
    return Corpus(tuple(tuple(s) for s in sessions), tuple(arrivals) if i_arrival is not None else None, path)


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

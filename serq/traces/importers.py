"""Importers: public LLM request traces → the serQ trace CSV (``docs/traces.md``).

Each importer reads one request per row of its source and yields
:class:`Request` values — the source line, the arrival time in seconds (in the
source's own origin), the prompt tokens and the output tokens — one at a time.
:func:`import_trace` writes them as ``session,turn,new,out,think,arrival``, one
single-turn session per request, ``turn`` 1 and ``think`` 0, ``arrival`` the
seconds since the first request kept (or since ``--start``), read and written
row by row so that the memory used does not grow with the file.

Times are kept as decimals (:class:`decimal.Decimal`) from the text to the
output, so an arrival is the exact difference of the source's timestamps (no
float noise is added; noise already in the source is kept).
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import gzip
import io
import json
import os
import re
import sys
import zlib
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Callable, Iterator, Sequence, TextIO

from .. import reading
from ..errors import SerqError, UsageError
from ..sim.trace import MAX_TRACE_BYTES
from ..files import open_atomic

#: The header the importers write (the ``arrival`` column: docs/traces.md).
HEADER = "session,turn,new,out,think,arrival"


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


@dataclass(frozen=True)
class ImportSummary:
    """What :func:`import_trace` did."""

    format: str  #: the canonical format name
    rows: int  #: requests written
    read: int  #: requests the format yielded (after its own filters, before the window and the limit)
    dropped: dict[str, int]  #: rows left out, by reason
    first: Decimal | None  #: first written arrival (seconds)
    last: Decimal | None  #: last written arrival (seconds)
    bytes: int  #: size of the output

    @property
    def too_large(self) -> bool:
        """Whether the output is larger than a trace may be (:data:`serq.sim.trace.MAX_TRACE_BYTES`)."""
        return self.bytes > MAX_TRACE_BYTES

    @property
    def limit_text(self) -> str:
        """The largest trace file, as text (``64 MiB``)."""
        return reading.size_text(MAX_TRACE_BYTES)

    def text(self, dst: str) -> str:
        """One line for the terminal: ``wrote N requests (…) to DST``."""
        span = f", arrivals {fmt_decimal(self.first)} to {fmt_decimal(self.last)} s" if self.rows else ""
        out = f"wrote {self.rows} requests{span} to {dst}"
        if self.dropped:
            out += "; left out: " + ", ".join(f"{n} {why}" for why, n in self.dropped.items())
        return out


# ---------------------------------------------------------------------------
# fields


def _where(path: str, line: int) -> str:
    return f"{path}:{line}"


def _count(text: str, column: str, path: str, line: int) -> int:
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
                        helps=["a token count is a whole number, e.g. 512"], prefix=_where(path, line))
    if value != value.to_integral_value():
        raise SerqError(f"column `{column}`: `{text.strip()}` is not a whole number of tokens",
                        helps=["a token count is a whole number, e.g. 512"], prefix=_where(path, line))
    return _nonneg(int(value), text, column, path, line)


def _nonneg(value: int, text: str, column: str, path: str, line: int) -> int:
    if value < 0:
        raise SerqError(f"column `{column}`: negative token count `{text.strip()}`",
                        helps=["a token count is 0 or more"], prefix=_where(path, line))
    return value


def _seconds(text: str, column: str, path: str, line: int, unit: Decimal | None = None) -> Decimal:
    """A time: a finite decimal number (times ``unit`` when given)."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite():
        raise SerqError(f"column `{column}`: invalid time `{text.strip()}`",
                        helps=["a time is a number of seconds, e.g. 12.5"], prefix=_where(path, line))
    return value if unit is None else value * unit


def _need_positive(req: Request, new_col: str, out_col: str, path: str) -> Request:
    """Refuse a request with no prompt or no output (a program's `decode (out - 1)` needs out ≥ 1)."""
    for value, column in ((req.new, new_col), (req.out, out_col)):
        if value == 0:
            raise SerqError(f"column `{column}`: 0 tokens",
                            helps=["a request has at least one prompt token and one output token; "
                                   "remove the row"], prefix=_where(path, req.line))
    return req


# ---------------------------------------------------------------------------
# CSV sources


def _csv_rows(f: TextIO, path: str, columns: Sequence[str]) -> Iterator[tuple[int, list[str]]]:
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
                            prefix=_where(path, reader.line_num)) from None
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
                    notes=[f"the header read: `{','.join(names)[:200]}`"], prefix=_where(path, line))
            index = [names.index(c) for c in columns]
            width = len(names)
            continue
        if len(row) != width:
            raise SerqError(f"expected {width} fields, as the header has, got {len(row)}",
                            helps=["each row has one field per header column"], prefix=_where(path, line))
        yield line, [row[i] for i in index]
    if index is None:
        raise SerqError("no header line", helps=[f"the first line names the columns: {','.join(columns)}"],
                        prefix=path)


#: A column name → the format whose header has it (for the help of a wrong FORMAT).
_GUESS = {"arrived_at": "splitwise", "num_prefill_tokens": "splitwise", "TIMESTAMP": "azure",
          "ContextTokens": "azure", "Timestamp": "burstgpt", "Request tokens": "burstgpt"}


def read_splitwise(f: TextIO, path: str, tally: Tally, opts: Options) -> Iterator[Request]:
    """Splitwise/Vidur: ``arrived_at`` (seconds), ``num_prefill_tokens``, ``num_decode_tokens``."""
    cols = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
    for line, (t, new, out) in _csv_rows(f, path, cols):
        req = Request(line, _seconds(t, cols[0], path, line), _count(new, cols[1], path, line),
                      _count(out, cols[2], path, line))
        yield _need_positive(req, cols[1], cols[2], path)


_STAMP = re.compile(r"\s*(\d{4}-\d{2}-\d{2})[ T]([01]\d|2[0-3]):([0-5]\d):([0-5]\d|60)(?:\.(\d+))?"
                    r"\s*(Z|[+-]\d{2}:?\d{2})?\s*\Z")
_DAYS: dict[str, int] = {}  # "2023-11-16" → its ordinal, for the few days a trace spans


def _timestamp(text: str, column: str, path: str, line: int) -> Decimal:
    """``2023-11-16 18:15:46.6805900`` (an optional ``Z`` or ``+HH:MM``) → seconds since 0001-01-01."""
    m = _STAMP.match(text)
    day = None
    if m is not None:
        ymd = m.group(1)
        day = _DAYS.get(ymd)
        if day is None:
            try:
                day = date.fromisoformat(ymd).toordinal()
            except ValueError:
                day = None
            else:
                if len(_DAYS) < 4096:
                    _DAYS[ymd] = day
    if m is None or day is None:
        raise SerqError(f"column `{column}`: invalid timestamp `{text.strip()}`",
                        helps=["a timestamp reads like 2023-11-16 18:15:46.6805900"], prefix=_where(path, line))
    _, h, mi, s, frac, zone = m.groups()
    secs = day * 86400 + int(h) * 3600 + int(mi) * 60 + int(s)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        secs -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return Decimal(f"{secs}.{frac}") if frac else Decimal(secs)


def read_azure(f: TextIO, path: str, tally: Tally, opts: Options) -> Iterator[Request]:
    """Azure LLM inference trace: ``TIMESTAMP`` (date and time), ``ContextTokens``, ``GeneratedTokens``."""
    cols = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
    for line, (t, new, out) in _csv_rows(f, path, cols):
        req = Request(line, _timestamp(t, cols[0], path, line), _count(new, cols[1], path, line),
                      _count(out, cols[2], path, line))
        yield _need_positive(req, cols[1], cols[2], path)


def read_burstgpt(f: TextIO, path: str, tally: Tally, opts: Options) -> Iterator[Request]:
    """BurstGPT: ``Timestamp`` (seconds), ``Model``, ``Request tokens``, ``Response tokens``,
    ``Total tokens``, ``Log Type``.  Rows with 0 response tokens (the failed requests of
    ``BurstGPT_*.csv``) or 0 request tokens are left out and counted; ``--model`` keeps
    only the named models."""
    cols = ("Timestamp", "Model", "Request tokens", "Response tokens")
    models = set(opts.models)
    for line, (t, model, new, out) in _csv_rows(f, path, cols):
        time = _seconds(t, cols[0], path, line)
        n_new = _count(new, cols[2], path, line)
        n_out = _count(out, cols[3], path, line)
        if models and model.strip() not in models:
            tally.drop("of other models")
            continue
        if n_out == 0:
            tally.drop("failed (0 response tokens)")
            continue
        if n_new == 0:
            tally.drop("with 0 request tokens")
            continue
        yield Request(line, time, n_new, n_out)


# ---------------------------------------------------------------------------
# Mooncake (JSON lines)

_MS = Decimal("0.001")
#: floats as decimals (exact times); ints stay ints, as hash_ids are long lists of them
_JSON = json.JSONDecoder(parse_float=Decimal)


def read_mooncake(f: TextIO, path: str, tally: Tally, opts: Options) -> Iterator[Request]:
    """Mooncake: one JSON object a line, ``timestamp`` (ms), ``input_length``,
    ``output_length``; ``hash_ids`` (the prompt's block hashes) is not kept."""
    for line, raw in enumerate(f, 1):
        text = raw.strip()
        if not text:
            continue
        try:
            obj = _JSON.decode(text)
        except ValueError as err:
            msg = getattr(err, "msg", str(err))
            helps = ["each line is one JSON object"]
            if line == 1 and "," in text and not text.startswith(("{", "[")):
                helps.append("this looks like a CSV file: the CSV formats are splitwise, azure and burstgpt")
            raise SerqError(f"invalid JSON: {msg}", helps=helps, prefix=_where(path, line)) from None
        if not isinstance(obj, dict):
            raise SerqError("expected a JSON object", helps=["each line is one JSON object"],
                            prefix=_where(path, line))
        values = []
        for key in ("timestamp", "input_length", "output_length"):
            if key not in obj:
                raise SerqError(f"no `{key}`", helps=["each line has timestamp, input_length and output_length"],
                                prefix=_where(path, line))
            v = obj[key]
            if isinstance(v, int) and not isinstance(v, bool):
                v = Decimal(v)
            if not isinstance(v, Decimal):
                raise SerqError(f"`{key}`: expected a number, got `{json.dumps(v, default=str)[:40]}`",
                                helps=["timestamp is in milliseconds; the lengths are token counts"],
                                prefix=_where(path, line))
            values.append(v)
        t, new, out = values
        if not t.is_finite():
            raise SerqError(f"`timestamp`: invalid time `{t}`", prefix=_where(path, line))
        req = Request(line, t * _MS, _count(str(new), "input_length", path, line),
                      _count(str(out), "output_length", path, line))
        yield _need_positive(req, "input_length", "output_length", path)


# ---------------------------------------------------------------------------
# the table

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("splitwise", ("vidur",),
               "Splitwise/Vidur processed CSV: arrived_at,num_prefill_tokens,num_decode_tokens",
               "keeps arrived_at, num_prefill_tokens (new), num_decode_tokens (out); other columns are ignored",
               read_splitwise),
        Format("azure", (),
               "Azure LLM inference trace CSV: TIMESTAMP,ContextTokens,GeneratedTokens",
               "keeps TIMESTAMP (to seconds since the first row), ContextTokens (new), GeneratedTokens (out); "
               "other columns are ignored",
               read_azure),
        Format("mooncake", (),
               "Mooncake JSON lines: timestamp (ms), input_length, output_length, hash_ids",
               "keeps timestamp (ms → s), input_length (new), output_length (out); drops hash_ids "
               "(the shared prefix blocks) and any other key",
               read_mooncake),
        Format("burstgpt", (),
               "BurstGPT CSV: Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
               "keeps Timestamp, Request tokens (new), Response tokens (out); leaves out failed requests "
               "(0 response tokens) and rows of 0 request tokens, counted; drops Model (unless --model "
               "selects), Total tokens and Log Type",
               read_burstgpt),
    )
}

_ALIASES = {alias: f for f in FORMATS.values() for alias in (f.name, *f.aliases)}


def format_names() -> list[str]:
    """Every accepted format name, aliases included, sorted."""
    return sorted(_ALIASES)


def get_format(name: str) -> Format:
    """The format called ``name`` (or an alias); a :class:`SerqError` naming the choices otherwise."""
    fmt = _ALIASES.get(name.strip().lower())
    if fmt is None:
        raise SerqError(f"unknown trace format `{name}`",
                        helps=[f"the formats are {', '.join(format_names())}"])
    return fmt


# ---------------------------------------------------------------------------
# the import


def fmt_decimal(value: Decimal | None) -> str:
    """A decimal in plain notation, without trailing zeros: ``4.314579``, ``12``, ``0``."""
    if value is None:
        return "NaN"
    if not value:
        return "0"
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


@contextlib.contextmanager
def _open_source(src: str, shown: str) -> Iterator[TextIO]:
    """The source as text: ``-`` is standard input, a name ending in ``.gz`` is gunzipped."""
    stdin: io.TextIOWrapper | None = None
    try:
        if src == "-":
            stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig", newline="")
            stream: TextIO = stdin
        elif src.endswith(".gz"):
            stream = gzip.open(src, "rt", encoding="utf-8-sig", newline="")
        else:
            if os.path.isdir(src):
                raise IsADirectoryError(21, "Is a directory", src)
            stream = open(src, encoding="utf-8-sig", newline="")
    except OSError as err:
        raise SerqError(f"cannot read `{shown}`: {err.strerror or err}") from None
    try:
        yield stream
    finally:
        if stdin is not None:
            stdin.detach()  # leave sys.stdin open
        else:
            stream.close()


def _bad_utf8_line(src: str) -> int | None:
    """The line of the first byte of ``src`` that is not UTF-8 (a regular file only:
    text is decoded ahead of the rows read, so the row being read does not tell)."""
    if src == "-" or src.endswith(".gz"):
        return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1
    try:
        with open(src, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 16), b""):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as err:
                    return line + chunk.count(b"\n", 0, max(0, err.start))
                line += chunk.count(b"\n")
    except OSError:
        return None
    return None


def _decimal(value: float | int | str | Decimal, name: str) -> Decimal:
    try:
        d = value if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        d = Decimal("NaN")
    if not d.is_finite():
        raise UsageError(f"invalid value for {name}: {value} (must be finite)")
    return d


def import_trace(
    format: str,
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    limit: int | None = None,
    start: float | Decimal = 0,
    duration: float | Decimal | None = None,
    scale: float | Decimal = 1,
    models: Sequence[str] = (),
) -> ImportSummary:
    """Import the trace ``src`` of ``format`` (a name of :data:`FORMATS` or an alias)
    into the serQ trace CSV ``dst``, as a stream, and say what was done.

    One single-turn session per request, in file order: ``session`` 0, 1, …,
    ``turn`` 1, ``new`` the prompt tokens, ``out`` the output tokens, ``think`` 0,
    ``arrival`` the seconds since the first request kept, minus ``start``, times
    ``scale``.  (The first request kept is the first row the format does not
    leave out: BurstGPT's failed requests and the rows of other ``models`` do not
    count.)  ``start`` and ``duration`` (seconds of the source's time, counted
    from that request) keep the requests in ``[start, start + duration)``,
    and reading stops at the window's end; ``limit`` keeps the first ``limit``
    requests of the window, and reading stops there.  ``models`` (BurstGPT only)
    keeps the rows whose ``Model`` is one of them.  ``src`` may be ``-``
    (standard input) or a ``.gz`` file.

    A bad row, a time earlier than the row before it, or a window with no
    request raise :class:`~serq.errors.SerqError` (``file:line: message``), and
    ``dst`` is left as it was; an output that cannot be written raises
    :class:`OSError`.  Bad options raise :class:`~serq.errors.UsageError`.
    """
    fmt = get_format(format)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UsageError(f"invalid value for --limit: {limit} (must be an integer >= 1)")
    start_d = _decimal(start, "--start")
    if start_d < 0:
        raise UsageError(f"invalid value for --start: {start} (must be >= 0)")
    end_d = None
    if duration is not None:
        dur = _decimal(duration, "--duration")
        if dur <= 0:
            raise UsageError(f"invalid value for --duration: {duration} (must be > 0)")
        end_d = start_d + dur
    scale_d = _decimal(scale, "--scale")
    if scale_d <= 0:
        raise UsageError(f"invalid value for --scale: {scale} (must be > 0)")
    models = tuple(m.strip() for m in models)
    if models and fmt.name != "burstgpt":
        raise UsageError("--model applies to the burstgpt format only")
    src_s = os.fspath(src)
    shown = reading.show_path(src_s)
    tally = Tally()
    rows = read = size = 0
    first: Decimal | None = None
    arrival = Decimal(0)
    with _open_source(src_s, shown) as f, open_atomic(dst) as out:
        out.write(HEADER + "\n")
        size = len(HEADER) + 1
        t0: Decimal | None = None
        prev = Decimal(0)
        prev_line = 0
        unscaled = scale_d == 1
        requests = fmt.read(f, shown, tally, Options(models))
        try:
            for req in requests:
                read += 1
                if t0 is None:
                    t0 = req.time
                elif req.time < prev:
                    raise SerqError(
                        f"time goes backwards: {fmt_decimal(req.time - t0)} s after "
                        f"{fmt_decimal(prev - t0)} s on line {prev_line}",
                        helps=["sort the file by arrival time first: an import reads it in order, "
                               "as a stream"], prefix=_where(shown, req.line))
                prev, prev_line = req.time, req.line
                rel = req.time - t0
                if rel < start_d:
                    tally.drop("before --start")
                    continue
                if end_d is not None and rel >= end_d:
                    break
                arrival = rel - start_d if unscaled else (rel - start_d) * scale_d
                if first is None:
                    first = arrival
                text = f"{rows},1,{req.new},{req.out},0,{fmt_decimal(arrival)}\n"
                out.write(text)
                size += len(text)
                rows += 1
                if limit is not None and rows >= limit:
                    break
        except UnicodeDecodeError:
            bad = _bad_utf8_line(src_s)
            raise SerqError("not UTF-8 text", helps=["save the trace as UTF-8"],
                            prefix=shown if bad is None else _where(shown, bad)) from None
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            raise SerqError(f"cannot read `{shown}`: {err}") from None
        if rows == 0:
            where = " in the window" if (start_d or end_d is not None) else ""
            raise SerqError(f"no requests{where} to write", prefix=shown,
                            helps=["a trace needs at least one request"
                                   + (" (widen --start/--duration)" if where else "")])
    return ImportSummary(fmt.name, rows, read, dict(tally.dropped), first, arrival, size)

"""The import: a source trace, read as a stream by its format, written as the
serQ trace CSV (``docs/traces.md``).

:func:`import_trace` writes ``session,turn,new,out,think,arrival``, one
single-turn session per request, ``turn`` 1 and ``think`` 0, ``arrival`` the
seconds since the first request kept (or since ``--start``), read and written
row by row so that the memory used does not grow with the file.  Times stay
decimals from the text to the output, so an arrival is the exact difference of
the source's timestamps (no float noise is added; noise already in the source
is kept).
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import io
import os
import sys
import zlib
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Iterator, Sequence, TextIO

from .. import reading
from ..errors import SerqError, UsageError
from ..files import open_atomic
from .base import Options, Tally, file_line
from .formats import get_format
from .reader import MAX_TRACE_BYTES

#: The header the importers write (the ``arrival`` column: docs/traces.md).
HEADER = "session,turn,new,out,think,arrival"


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
        """Whether the output is larger than a trace may be (:data:`serq.traces.reader.MAX_TRACE_BYTES`)."""
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
    """Import the trace ``src`` of ``format`` (a name of :data:`~serq.traces.formats.FORMATS`
    or an alias) into the serQ trace CSV ``dst``, as a stream, and say what was done.

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
        size = len(HEADER) + 1  # (the header goes out with the first row: a source refused at its
        # header writes nothing, even to standard output, where nothing can be taken back)
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
                               "as a stream"], prefix=file_line(shown, req.line))
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
                if rows == 0:
                    out.write(HEADER + "\n")
                out.write(text)
                size += len(text)
                rows += 1
                if limit is not None and rows >= limit:
                    break
        except UnicodeDecodeError:
            bad = _bad_utf8_line(src_s)
            raise SerqError("not UTF-8 text", helps=["save the trace as UTF-8"],
                            prefix=shown if bad is None else file_line(shown, bad)) from None
        except (EOFError, gzip.BadGzipFile, zlib.error) as err:
            raise SerqError(f"cannot read `{shown}`: {err}") from None
        if rows == 0:
            where = " in the window" if (start_d or end_d is not None) else ""
            raise SerqError(f"no requests{where} to write", prefix=shown,
                            helps=["a trace needs at least one request"
                                   + (" (widen --start/--duration)" if where else "")])
    return ImportSummary(fmt.name, rows, read, dict(tally.dropped), first, arrival, size)

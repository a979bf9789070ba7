"""The Azure LLM inference trace's CSV: ``TIMESTAMP`` (a date and time),
``ContextTokens``, ``GeneratedTokens``."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from typing import Iterator, TextIO

from ..errors import SerqError
from .base import Format, Options, Request, Tally, count, csv_rows, file_line, need_positive

_STAMP = re.compile(r"\s*(\d{4}-\d{2}-\d{2})[ T]([01]\d|2[0-3]):([0-5]\d):([0-5]\d|60)(?:\.(\d+))?"
                    r"\s*(Z|[+-]\d{2}:?\d{2})?\s*\Z")
_DAYS: dict[str, int] = {}  # "2023-11-16" → its ordinal, for the few days a trace spans


def timestamp(text: str, column: str, path: str, line: int) -> Decimal:
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
                        helps=["a timestamp reads like 2023-11-16 18:15:46.6805900"], prefix=file_line(path, line))
    _, h, mi, s, frac, zone = m.groups()
    secs = day * 86400 + int(h) * 3600 + int(mi) * 60 + int(s)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        secs -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return Decimal(f"{secs}.{frac}") if frac else Decimal(secs)


def read(f: TextIO, path: str, tally: Tally, opts: Options) -> Iterator[Request]:
    """Azure LLM inference trace: ``TIMESTAMP`` (date and time), ``ContextTokens``, ``GeneratedTokens``."""
    cols = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
    for line, (t, new, out) in csv_rows(f, path, cols):
        req = Request(line, timestamp(t, cols[0], path, line), count(new, cols[1], path, line),
                      count(out, cols[2], path, line))
        yield need_positive(req, cols[1], cols[2], path)


FORMAT = Format(
    "azure", (),
    "Azure LLM inference trace CSV: TIMESTAMP,ContextTokens,GeneratedTokens",
    "keeps TIMESTAMP (to seconds since the first row), ContextTokens (new), GeneratedTokens (out); "
    "other columns are ignored",
    read,
)

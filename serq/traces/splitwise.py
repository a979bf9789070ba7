"""Splitwise's processed CSV, which Vidur reads too (``vidur`` is another name
for it): ``arrived_at`` (seconds), ``num_prefill_tokens``, ``num_decode_tokens``."""

from __future__ import annotations

from typing import Iterator, TextIO

from .base import Format, Options, Request, Tally, count, csv_rows, need_positive, seconds


def read(f: TextIO, path: str, tally: Tally, opts: Options) -> Iterator[Request]:
    """Splitwise/Vidur: ``arrived_at`` (seconds), ``num_prefill_tokens``, ``num_decode_tokens``."""
    cols = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
    for line, (t, new, out) in csv_rows(f, path, cols):
        req = Request(line, seconds(t, cols[0], path, line), count(new, cols[1], path, line),
                      count(out, cols[2], path, line))
        yield need_positive(req, cols[1], cols[2], path)


FORMAT = Format(
    "splitwise", ("vidur",),
    "Splitwise/Vidur processed CSV: arrived_at,num_prefill_tokens,num_decode_tokens",
    "keeps arrived_at, num_prefill_tokens (new), num_decode_tokens (out); other columns are ignored",
    read,
)

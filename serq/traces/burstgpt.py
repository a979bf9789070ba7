"""BurstGPT's CSV: ``Timestamp`` (seconds), ``Model``, ``Request tokens``,
``Response tokens``, ``Total tokens``, ``Log Type``."""

from __future__ import annotations

from typing import Iterator, TextIO

from .base import Format, Options, Request, Tally, count, csv_rows, seconds


def read(f: TextIO, path: str, tally: Tally, opts: Options) -> Iterator[Request]:
    """BurstGPT: ``Timestamp`` (seconds), ``Model``, ``Request tokens``, ``Response tokens``,
    ``Total tokens``, ``Log Type``.  Rows with 0 response tokens (the failed requests of
    ``BurstGPT_*.csv``) or 0 request tokens are left out and counted; ``--model`` keeps
    only the named models."""
    cols = ("Timestamp", "Model", "Request tokens", "Response tokens")
    models = set(opts.models)
    for line, (t, model, new, out) in csv_rows(f, path, cols):
        time = seconds(t, cols[0], path, line)
        n_new = count(new, cols[2], path, line)
        n_out = count(out, cols[3], path, line)
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


FORMAT = Format(
    "burstgpt", (),
    "BurstGPT CSV: Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
    "keeps Timestamp, Request tokens (new), Response tokens (out); leaves out failed requests "
    "(0 response tokens) and rows of 0 request tokens, counted; drops Model (unless --model "
    "selects), Total tokens and Log Type",
    read,
)

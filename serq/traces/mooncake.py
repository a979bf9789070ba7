"""Mooncake's JSON lines: one object a line, ``timestamp`` (ms),
``input_length``, ``output_length`` and ``hash_ids``."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Iterator, TextIO

from ..errors import SerqError
from .base import Format, Options, Request, Tally, count, file_line, need_positive

_MS = Decimal("0.001")
#: floats as decimals (exact times); ints stay ints, as hash_ids are long lists of them
_JSON = json.JSONDecoder(parse_float=Decimal)


def read(f: TextIO, path: str, tally: Tally, opts: Options) -> Iterator[Request]:
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
            raise SerqError(f"invalid JSON: {msg}", helps=helps, prefix=file_line(path, line)) from None
        if not isinstance(obj, dict):
            raise SerqError("expected a JSON object", helps=["each line is one JSON object"],
                            prefix=file_line(path, line))
        values = []
        for key in ("timestamp", "input_length", "output_length"):
            if key not in obj:
                raise SerqError(f"no `{key}`", helps=["each line has timestamp, input_length and output_length"],
                                prefix=file_line(path, line))
            v = obj[key]
            if isinstance(v, int) and not isinstance(v, bool):
                v = Decimal(v)
            if not isinstance(v, Decimal):
                raise SerqError(f"`{key}`: expected a number, got `{json.dumps(v, default=str)[:40]}`",
                                helps=["timestamp is in milliseconds; the lengths are token counts"],
                                prefix=file_line(path, line))
            values.append(v)
        t, new, out = values
        if not t.is_finite():
            raise SerqError(f"`timestamp`: invalid time `{t}`", prefix=file_line(path, line))
        req = Request(line, t * _MS, count(str(new), "input_length", path, line),
                      count(str(out), "output_length", path, line))
        yield need_positive(req, "input_length", "output_length", path)


FORMAT = Format(
    "mooncake", (),
    "Mooncake JSON lines: timestamp (ms), input_length, output_length, hash_ids",
    "keeps timestamp (ms → s), input_length (new), output_length (out); drops hash_ids "
    "(the shared prefix blocks) and any other key",
    read,
)

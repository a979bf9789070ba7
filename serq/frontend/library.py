"""Reading a program and the libraries it ``use``s (language §2.2).

A ``use "path";`` item is replaced by the library's items, read relative to
the directory of the file that says ``use``.  A file is read at most once
(compared by canonical path), so a library that uses the program back, or one
read already, is skipped.  A library holds only ``def`` and ``use`` items.
"""

from __future__ import annotations

import os

from .. import reading
from ..errors import SerqError, Source, Span
from . import ast as A
from .diag import error
from .lexer import MAX_TOKENS, TooManyTokens
from .parse import parse_counted

#: The program file and its libraries together may hold at most this many bytes
#: (a program given as text: this many characters).
MAX_BYTES = 2 * reading.MiB

_LIMITS = (f"a program and its libraries hold at most {reading.size_text(MAX_BYTES)} "
           f"and {MAX_TOKENS:_} tokens".replace("_", " "))

#: A later era's standard library of `args.number` (decision 5): accepted, and empty.
STD_ARGS = "std/args"

_ITEM_WORD = {
    A.LetItem: "let", A.PoolItem: "pool", A.StageItem: "stage", A.WorkloadItem: "workload",
    A.ServerItem: "server", A.SessionItem: "session", A.RunItem: "run",
}


def read_text(path: str, limit: int = MAX_BYTES) -> str:
    """The text of a program file; a missing, unreadable or oversized file is a program error."""
    try:
        return reading.read_text(path, limit)
    except reading.Unreadable as err:
        raise _unreadable(err, path, path, None) from None


def _unreadable(err: reading.Unreadable, path: str, written: str, where: Span | None) -> SerqError:
    """The error for a file that cannot be read: at its first bad byte when it is
    not UTF-8, else at ``where`` (a `use` path; None for the program file)."""
    message = f"cannot read `{reading.show_path(written)}`: {err.reason}"
    if err.text is not None and err.offset is not None:
        return error(message, Span(Source(err.text, path), err.offset, err.offset + 1),
                     helps=["save the file as UTF-8"])
    return error(message, where, helps=[_LIMITS] if err.too_large else ())


def check_text_size(text: str) -> None:
    """A program given as text is held to the size of a program file."""
    if len(text) > MAX_BYTES:
        raise error(f"the program text is longer than {MAX_BYTES:_} characters, more than a program can hold"
                    .replace("_", " "), helps=[_LIMITS])


def load_items(source: Source) -> list[A.Item]:
    """The program's items, with every library spliced in place of its ``use``."""
    seen: set[str] = set()
    if source.path is not None:
        seen.add(os.path.realpath(source.path))
    out: list[A.Item] = []
    items, tokens = parse_counted(source, max_tokens=MAX_TOKENS)
    budget = [MAX_BYTES - len(source.text.encode("utf-8", "surrogatepass")), MAX_TOKENS - tokens]
    _splice(items, source, seen, out, budget)
    return out


def _splice(items: list[A.Item], source: Source, seen: set[str], out: list[A.Item], budget: list[int]) -> None:
    """Splice the libraries of ``items`` into ``out``; ``budget`` is [bytes, tokens] left."""
    for item in items:
        if not isinstance(item, A.UseItem):
            out.append(item)
            continue
        if item.path == STD_ARGS:
            continue
        if source.path is None:
            raise error(f'`use "{item.path}"` reads a file next to the program, and this program was given as text',
                        item.path_span, helps=["save the program to a file, or paste the definitions in"])
        path = os.path.normpath(os.path.join(os.path.dirname(source.path), item.path))
        try:
            canonical = os.path.realpath(path)
        except ValueError:  # a NUL byte, or a character no file name can hold
            canonical = path  # reading it fails below, with the reason
        if canonical in seen:
            continue
        seen.add(canonical)
        try:
            text = reading.read_text(path, max(budget[0], 0))
        except reading.Unreadable as err:
            if err.too_large:
                raise error("the libraries are more than a program can hold", item.path_span,
                            notes=[f"`{item.path}` holds more than the {budget[0]:_} bytes left"
                                   .replace("_", " ")], helps=[_LIMITS]) from None
            raise _unreadable(err, path, item.path, item.path_span) from None
        budget[0] -= len(text.encode("utf-8"))
        lib = Source(text, path)
        try:
            lib_items, tokens = parse_counted(lib, library=True, max_tokens=budget[1])
        except TooManyTokens:
            raise error("the libraries are more than a program can hold", item.path_span,
                        notes=[f"`{item.path}` holds more than the {budget[1]:_} tokens left".replace("_", " ")],
                        helps=[_LIMITS]) from None
        budget[1] -= tokens
        for li in lib_items:
            if not isinstance(li, (A.DefItem, A.UseItem)):
                word = _ITEM_WORD.get(type(li), "an item")
                head = Span(lib, li.span.start, li.span.start + len(word))
                raise error(f"a library holds definitions: found `{word}` where `def` or `use` goes",
                            head, helps=["move it into the program that uses the library"])
        _splice(lib_items, lib, seen, out, budget)

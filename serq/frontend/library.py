"""Reading a program and the libraries it ``use``s (language §2.2).

A ``use "path";`` item is replaced by the library's items, read relative to
the directory of the file that says ``use``.  A file is read at most once
(compared by canonical path), so a library that uses the program back, or one
read already, is skipped.  A library holds only ``def`` and ``use`` items.
"""

from __future__ import annotations

import os

from ..errors import Source, Span
from . import ast as A
from .diag import error
from .parse import parse_source

#: The spliced program may hold at most this many tokens (§2.2).
MAX_TOKENS = 100_000

#: A later era's standard library of `args.number` (decision 5): accepted, and empty.
STD_ARGS = "std/args"

_ITEM_WORD = {
    A.LetItem: "let", A.PoolItem: "pool", A.StageItem: "stage", A.WorkloadItem: "workload",
    A.ServerItem: "server", A.SessionItem: "session", A.RunItem: "run",
}


def read_text(path: str) -> str:
    """The text of a program file; a missing or unreadable file is a program error."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as err:
        raise error(f"cannot read `{path}`: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise error(f"cannot read `{path}`: it is not UTF-8 text") from None


def load_items(source: Source) -> list[A.Item]:
    """The program's items, with every library spliced in place of its ``use``."""
    seen: set[str] = set()
    if source.path is not None:
        seen.add(os.path.realpath(source.path))
    out: list[A.Item] = []
    count = [len(source.text)]
    _splice(parse_source(source), source, seen, out, count)
    return out


def _splice(items: list[A.Item], source: Source, seen: set[str], out: list[A.Item], count: list[int]) -> None:
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
        canonical = os.path.realpath(path)
        if canonical in seen:
            continue
        seen.add(canonical)
        if os.path.isdir(path):
            raise error(f"cannot read `{item.path}`: it is a directory", item.path_span)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as err:
            raise error(f"cannot read `{item.path}`: {err.strerror or err}", item.path_span) from None
        except UnicodeDecodeError:
            raise error(f"cannot read `{item.path}`: it is not UTF-8 text", item.path_span) from None
        count[0] += len(text)
        if count[0] > 20 * MAX_TOKENS:
            raise error("the libraries are more than a program can hold", item.path_span)
        lib = Source(text, path)
        lib_items = parse_source(lib, library=True)
        for li in lib_items:
            if not isinstance(li, (A.DefItem, A.UseItem)):
                word = _ITEM_WORD.get(type(li), "an item")
                head = Span(lib, li.span.start, li.span.start + len(word))
                raise error(f"a library holds definitions: found `{word}` where `def` or `use` goes",
                            head, helps=["move it into the program that uses the library"])
        _splice(lib_items, lib, seen, out, count)

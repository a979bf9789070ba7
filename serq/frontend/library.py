"""Reading a program and the libraries it ``use``s (language §2.2).

A ``use "path";`` item is replaced by the library's items, read relative to
the directory of the file that says ``use`` when anything by that name is
there, else from the first folder of ``SERQ_PATH`` that holds it; ``use
"std/NAME";`` reads a library that ships with serq, ``serq/lib/NAME.sq``,
wherever the program is (:func:`find_library`).  A file is read at most once
(compared by canonical path), so a library that uses the program back, or one
read already, is skipped.  A library holds only ``def`` and ``use`` items.
"""

from __future__ import annotations

import os

from .. import linked, reading
from ..errors import SerqError, Source, Span
from . import ast as A
from .diag import error
from .lexer import MAX_TOKENS, TooManyTokens
from .parsed import parse_counted

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
        text = reading.read_text(path, limit)
    except reading.Unreadable as err:
        raise _unreadable(err, path, path, None) from None
    linked.read(path, text)  # (what a kept linked program depends on: serq/linked.py)
    return text


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


#: The libraries that ship with serq: ``use "std/vllm";`` reads ``serq/lib/vllm.sq`` wherever the program is.
BUNDLED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
STD = "std/"


def library_folders() -> list[str]:
    """Where a ``use`` looks when nothing by its name is next to the using file:
    each folder of ``SERQ_PATH`` (separated as ``PATH`` is)."""
    return [d for d in os.environ.get("SERQ_PATH", "").split(os.pathsep) if d]


def bundled() -> list[str]:
    """The bundled libraries' names, as a ``use`` writes them (``std/vllm``, …)."""
    return [STD + n[:-3] for n in sorted(os.listdir(BUNDLED)) if n.endswith(".sq")]


def find_library(written: str, using: str | None, where: Span) -> str:
    """The file a ``use "written";`` reads.  ``std/NAME`` is a bundled library
    (``serq/lib/NAME.sq``).  Any other name is read next to the using file when
    anything by that name is there (as it is, errors and all), else from the
    first folder of ``SERQ_PATH`` that holds it; a name found nowhere is an
    error naming the folders searched."""
    if written.startswith(STD):
        name = written[len(STD):]
        path = os.path.join(BUNDLED, name if name.endswith(".sq") else name + ".sq")
        if "/" not in name and os.path.isfile(path):
            return path  # (its text is checked when a kept linked program is read: the read is recorded)
        raise error(f'`use "{written}"`: no bundled library of that name', where,
                    helps=["the bundled libraries are " + ", ".join(f'`use "{b}";`' for b in bundled())])
    here = None
    if using is not None:
        here = os.path.normpath(os.path.join(os.path.dirname(using), written))
        if os.path.isabs(written) or "\0" in written:
            return here
        there = os.path.lexists(here)
        linked.looked("lexists", here, there)
        if there:
            return here
    elif os.path.isabs(written):
        return written
    folders = library_folders()
    for folder in folders:
        candidate = os.path.normpath(os.path.join(folder, written))
        found = os.path.isfile(candidate)
        linked.looked("isfile", candidate, found)
        if found:
            return candidate
    searched = ([os.path.dirname(here) or "."] if here is not None else []) + folders
    shown = ", ".join(f"`{reading.show_path(f)}`" for f in searched) or "no folder (SERQ_PATH is not set)"
    helps = ["a bundled library is `use \"std/NAME\";`: " + ", ".join(bundled()),
             "add your own libraries' folder to SERQ_PATH (folders separated as in PATH)"]
    if using is None:
        raise error(f'`use "{written}"` reads a file next to the program, and this program was given as text; '
                    "no SERQ_PATH folder holds it either", where, notes=[f"searched {shown}"], helps=helps)
    raise error(f"cannot find the library `{written}`", where, notes=[f"searched {shown}"], helps=helps)


def load_items(source: Source) -> list[A.Item]:
    """The program's items, with every library spliced in place of its ``use``."""
    seen: set[str] = set()
    if source.path is not None:
        canonical = os.path.realpath(source.path)
        linked.looked("realpath", source.path, canonical)
        seen.add(canonical)
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
        path = find_library(item.path, source.path, item.path_span)
        try:
            canonical = os.path.realpath(path)
        except ValueError:  # a NUL byte, or a character no file name can hold
            canonical = path  # reading it fails below, with the reason
        linked.looked("realpath", path, canonical)  # (a file read once: which ones are the same file)
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
        linked.read(path, text)
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

"""Parsed files kept on disk, so that a program read again skips the parser.

Parsing is most of what loading a program costs (about 25 ms for ``vllm.sq``
and ``std/vllm``), and importing Parsimonious and building the grammar costs
as much again at every start.  A file that parsed without error is kept as
its syntax tree, pickled, under the hash of its text and of the front end's
own sources; reading it back takes about a millisecond, and a ``serq`` whose
every file is kept never imports the parser.

Never stale: an entry's name hashes the text with :func:`fingerprint` (the
interpreter's version, the contents of every source file the syntax tree
depends on: the front end, :mod:`serq.errors`, :mod:`serq.node`, … and the
parser libraries' files by size and modification time, as Python's bytecode
cache checks a source), and the entry holds both again, compared in full
when read.  An entry that does
not match, or cannot be read, is a miss: the file is parsed and the entry
written anew.  Files with errors are not kept (their errors come from the
parser, every time).  Entries are written atomically (a temporary file, then
a rename); a cache that cannot be written is silently not used.

Where: ``SERQ_CACHE_DIR`` when set (empty: no cache), else
``$XDG_CACHE_HOME/serq/parsed``, else ``~/.cache/serq/parsed``.  At most
:data:`MAX_ENTRIES` entries are kept; writing one more removes the oldest
half.  The entries are pickles, trusted as Python trusts its ``__pycache__``:
the folder is made readable by its owner alone, and one that is someone
else's, or that others may write in, is not used.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

from ..errors import Source, Span
from ..linked import cache_dir, sha256, stamp_parser_libraries, write_entry
from ..linked import trusted as _trusted
from . import ast as A
from .lexer import NUMBER, number_value

#: The format of an entry (raise it when the entry's layout changes).
MAGIC = b"serq-parsed-1"

#: Entries kept at most; writing one more removes the oldest half.
MAX_ENTRIES = 1000

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: serQ's sources the syntax tree depends on, relative to the package: every
#: module ``serq.frontend.parse`` imports (tests/frontend/test_parsed.py holds the list to that).
OWN = ("__init__.py", "api.py", "errors.py", "expr.py", "fpmath.py", "ir.py", "linked.py", "node.py",
       "_node_inits.py", "reading.py")


_FINGERPRINT: bytes | None = None


def fingerprint() -> bytes:
    """The hash of everything a file's syntax tree depends on besides its text."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        h = sha256(MAGIC)
        h.update(sys.version.encode())  # (the lexer's `re` follows the interpreter's Unicode tables)
        front = os.path.join(_ROOT, "frontend")
        names = [os.path.join(_ROOT, n) for n in OWN]
        names += sorted(os.path.join(front, n) for n in os.listdir(front) if n.endswith(".py"))
        for name in names:
            with open(name, "rb") as f:
                data = f.read()
            h.update(f"\0{os.path.relpath(name, _ROOT)}\0{len(data)}\0".encode())
            h.update(data)
        stamp_parser_libraries(h)
        _FINGERPRINT = h.digest()
    return _FINGERPRINT


def _name(text: str) -> str:
    """The file name of ``text``'s entry."""
    h = sha256(fingerprint())
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest() + ".pickle"


class _Pickler(pickle.Pickler):
    """Pickles a syntax tree with its :class:`Source` left out (the one being read)."""

    def __init__(self, file: Any, source: Source) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.source = source

    def persistent_id(self, obj: Any) -> str | None:
        return "source" if obj is self.source else None


class _Unpickler(pickle.Unpickler):
    """Reads a syntax tree back, its spans pointing into ``source``."""

    def __init__(self, file: Any, source: Source) -> None:
        super().__init__(file)
        self.source = source

    def persistent_load(self, pid: Any) -> Source:
        if pid != "source":
            raise pickle.UnpicklingError("not an entry of serq's")
        return self.source


def load(source: Source) -> tuple[list[A.Item], int] | None:
    """The items and the token count of ``source`` as it parsed before, or None."""
    folder = cache_dir()
    if folder is None or not _trusted(folder):
        return None
    try:
        with open(os.path.join(folder, _name(source.text)), "rb") as f:
            magic, mark, text, items, count = _Unpickler(f, source).load()
    except Exception:  # noqa: BLE001 - missing, unreadable, cut short or of another layout: a miss
        return None
    if magic != MAGIC or mark != fingerprint() or text != source.text:
        return None
    return items, count


def store(source: Source, items: list[A.Item], count: int) -> None:
    """Keep ``source``'s items and token count (nothing when the cache cannot be written)."""
    write_entry(lambda: (_name(source.text),
                         lambda f: _Pickler(f, source).dump((MAGIC, fingerprint(), source.text, items, count))),
                MAX_ENTRIES)


def parse_counted(source: Source, library: bool = False, max_tokens: int | None = None) -> tuple[list[A.Item], int]:
    """:func:`serq.frontend.parse.parse_counted` through the cache: the parser runs
    (and is imported) only for a file not kept, or one kept with more than
    ``max_tokens`` tokens (the parser then raises the error)."""
    got = load(source)
    if got is not None and (max_tokens is None or got[1] <= max_tokens):
        return got
    from .parse import parse_counted as parse

    items, count = parse(source, library, max_tokens)
    store(source, items, count)
    return items, count


def parse_expression(source: Source) -> A.Expr:
    """:func:`serq.frontend.parse.parse_expression`, without the parser for a lone
    number (the usual ``--set`` value): the :class:`~serq.frontend.ast.Num` the parser makes of it."""
    text = source.text
    if NUMBER.fullmatch(text):
        value = number_value(text)
        if value is not None:
            return A.Num(value, Span(source, 0, len(text)))
    from .parse import parse_expression as parse

    return parse(source)

"""The front end: ``.sq`` text → checked :class:`serq.ir.Program`.

The pipeline, one module per step::

    lexer    the lexical pre-pass (exact positions of lexical errors)
    grammar  the Parsimonious PEG          parse/build  → syntax tree (ast)
    library  `use` splicing                defs         → definitions read and checked
    expand   definitions, the two sides, serving forms
    bindings `at admission` substitution
    link     names, constants, `--set`, moments (resolve, declare) → IR
    checks   the lints

Every error is a :class:`serq.SerqError` with a span wherever a location is
known; nothing else escapes :func:`load_program`.
"""

from __future__ import annotations

import sys
from typing import Sequence

from .. import ir
from ..errors import SerqError, Source
from ..reading import STDIO
from .bindings import Bindings
from .checks import lint
from .defs import Defs
from .expand import Expander
from .library import check_text_size, load_items, read_text
from .link import link
from .queues import declare

__all__ = ["load_program"]

#: Python frames the recursive parser and visitor may use (the lexer bounds bracket nesting).
_RECURSION = 12_000


def load_program(
    *,
    path: str | None = None,
    text: str | None = None,
    sets: Sequence[tuple[str, str]] = (),
    trace: str | None = None,
) -> ir.Program:
    """Read, check and link a program given by ``path`` or as ``text``.

    ``sets`` are ``--set NAME=EXPR`` overrides (the last of a name wins);
    ``trace`` replaces the workload's trace file (relative to the current
    directory).  Raises :class:`SerqError` for every program error."""
    if (path is None) == (text is None):
        raise SerqError("load_program needs exactly one of `path` and `text`")
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, _RECURSION))
    try:
        return _load(path, text, sets, trace)
    except RecursionError:
        raise SerqError("the program is nested too deeply to check",
                        helps=["name parts of long expressions with `let`, `set` or `def`"]) from None
    finally:
        sys.setrecursionlimit(old)


def _load(path: str | None, text: str | None, sets: Sequence[tuple[str, str]], trace: str | None) -> ir.Program:
    if text is not None:
        check_text_size(text)
    shown = path
    if path == STDIO:  # standard input: shown as <stdin>; its `use` and trace paths are the current folder's
        shown, path = "<stdin>", None
        text = read_text(STDIO)
    source = Source(read_text(path) if path is not None else text or "", shown)  # type: ignore[arg-type]
    items, stations = declare(load_items(source))
    defs = Defs(items)
    expanded = Expander(items, defs, stations).program()
    expanded = Bindings(expanded).run()
    program, spans = link(expanded, sets=sets, path=path, trace=trace)
    lint(program, spans)
    return program

"""Errors and their rendering.

Every error a user can cause is a :class:`SerqError`. Positions stay character
offsets into a :class:`Source` until rendering, which produces::

    path:line:col: message
      NN | the source line
         |     ^^^^
    help: what to do about it
    note: where else to look

Columns count Unicode characters from 1 (language §1.1).  A source line longer
than :data:`EXCERPT_WIDTH` characters is shown as a window around the column,
``...`` at each cut end (docs/frontend.md, "Long lines in diagnostics").
"""

from __future__ import annotations

from typing import Iterable, Sequence

from .node import record


@record(frozen=True, eq=False)
class Source:
    """One program or library text, with the name errors use for it."""

    text: str
    path: str | None = None  # None: the program was given as text

    @property
    def name(self) -> str:
        return self.path if self.path is not None else "<text>"

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        offset = max(0, min(offset, len(self.text)))
        line = self.text.count("\n", 0, offset) + 1
        start = self.text.rfind("\n", 0, offset) + 1
        return line, offset - start + 1

    def line_text(self, line: int) -> str:
        lines = self.text.split("\n")
        return lines[line - 1] if 0 < line <= len(lines) else ""


@record(frozen=True)
class Span:
    """A range of characters in a source: ``[start, end)``."""

    source: Source
    start: int
    end: int

    @property
    def line_col(self) -> tuple[int, int]:
        return self.source.line_col(self.start)

    def where(self) -> str:
        line, col = self.line_col
        return f"{self.source.name}:{line}:{col}"


@record(frozen=True)
class ViaSpan(Span):
    """A span inside a definition's body, as expanded at one or more use sites:
    ``via`` lists (definition name, use-site span), innermost first.  (Made by
    the front end's expansion; defined here, beside :class:`Span`, because a
    linked program holds them and a kept one is read back without importing
    the front end: serq/linked.py.)"""

    via: tuple[tuple[str, Span], ...] = ()


class SerqError(Exception):
    """An error in a program, its input files or its run, meant for the user.

    ``message`` is the headline; ``helps`` and ``notes`` become ``help:`` and
    ``note:`` lines.  ``span`` points at the offending text when one is known.
    """

    kind = "error"

    def __init__(
        self,
        message: str,
        span: Span | None = None,
        *,
        helps: Sequence[str] = (),
        notes: Sequence[str] = (),
        prefix: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.helps = list(helps)
        self.notes = list(notes)
        self.prefix = prefix  # e.g. "FILE" for run-time errors without a span

    def __str__(self) -> str:  # a one-line form, for logs and exceptions
        return self.headline()

    @property
    def line(self) -> int | None:
        return self.span.line_col[0] if self.span else None

    @property
    def col(self) -> int | None:
        return self.span.line_col[1] if self.span else None

    def headline(self) -> str:
        if self.span is not None:
            return f"{self.span.where()}: {self.message}"
        if self.prefix:
            return f"{self.prefix}: {self.message}"
        return self.message

    def render(self) -> str:
        """The full diagnostic: headline, source line with carets, help and note lines."""
        out = [_escaped(self.headline())]
        if self.span is not None:
            line, col = self.span.line_col
            text = self.span.source.line_text(line)
            gutter = str(line)
            pad = " " * len(gutter)
            # a caret line as wide as the token, at least one, not past the line end
            end_line, end_col = self.span.source.line_col(max(self.span.start, self.span.end))
            width = (end_col - col) if end_line == line else (len(text) - col + 1)
            width = max(1, width)
            # a long line: only a window of it around the column, `...` at each cut end
            lo, hi = _excerpt(len(text), col - 1, col - 1 + width)
            left = EXCERPT_CUT if lo > 0 else ""
            right = EXCERPT_CUT if hi < len(text) else ""
            width = max(1, min(width, hi - (col - 1)))  # the carets stop at the window's end
            out.append(f"{pad} |")
            out.append(f"{gutter} | {left}{_printable(text[lo:hi])}{right}")
            out.append(f"{pad} | {' ' * (len(left) + col - 1 - lo)}{'^' * width}")
        out += [f"help: {h}" for h in self.helps]
        out += [f"note: {n}" for n in self.notes]
        return "\n".join(out)


#: The most characters of a source line a diagnostic shows.  A longer line is
#: cut to a window of this many characters around the column, with
#: :data:`EXCERPT_CUT` at each end that was cut; the headline keeps the true column.
EXCERPT_WIDTH = 100

#: How many characters of a cut line the window shows before the column.
EXCERPT_BEFORE = 40

#: The mark of a cut end of the source line.
EXCERPT_CUT = "..."


def _excerpt(length: int, start: int, end: int) -> tuple[int, int]:
    """``[lo, hi)``: the characters of a line of ``length`` characters to show
    under a diagnostic at character ``start`` (0-based) whose carets run to
    ``end``.  The whole line when it has at most :data:`EXCERPT_WIDTH`
    characters; otherwise :data:`EXCERPT_WIDTH` characters, starting
    :data:`EXCERPT_BEFORE` before ``start``: later when that is what it takes
    to show all the carets (if they fit at all), earlier when the line ends
    first, never before the line's start."""
    if length <= EXCERPT_WIDTH:
        return 0, length
    lo = start - EXCERPT_BEFORE
    end = min(end, length)
    if end - lo > EXCERPT_WIDTH and end - start <= EXCERPT_WIDTH:
        lo = end - EXCERPT_WIDTH
    lo = max(0, min(lo, length - EXCERPT_WIDTH))
    return lo, lo + EXCERPT_WIDTH


def _printable(text: str) -> str:
    """A source line fit for a terminal: each control character (a NUL, an
    escape…) shown as U+FFFD, one column, so the carets stay aligned."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\t" else "\ufffd" for c in text)


def _escaped(text: str) -> str:
    """A message with each control character written as an escape (``\\x00``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\t\n" else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                   for c in text)


class Site(str):
    """The label a run-time error quotes (```hold kv (x)```), knowing where the
    program writes the expression it labels and the ``let`` constants that
    expression reads: ``reads`` holds ``(name, value, set)``, ``set`` true for
    one given by ``--set``.  It is the label itself everywhere else (a ``str``:
    equal to, hashed and printed as its text)."""

    span: Span | None
    reads: tuple[tuple[str, float, bool], ...]

    def __new__(cls, text: str, span: Span | None = None,
                reads: tuple[tuple[str, float, bool], ...] = ()) -> "Site":
        self = super().__new__(cls, text)
        self.span = span
        self.reads = reads
        return self

    def __reduce__(self) -> tuple:
        return (Site, (str(self), self.span, self.reads))

    def note(self) -> str | None:
        """``it reads `pcie` = -2.5e+10 (--set pcie=…) and `kv_bytes` = 131072``, or None."""
        if not self.reads:
            return None
        parts = [f"`{name}` = {value:g}" + (" (from --set)" if given else "") for name, value, given in self.reads]
        listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"the expression reads {listed}"


class SerqRuntimeError(SerqError):
    """An error found while a program runs (a guard that is not 0 or 1, a negative amount…).
    ``at`` is the label of what failed: a :class:`Site` gives the error its
    location and a note of the constants its expression read."""

    kind = "runtime error"

    def __init__(self, message: str, span: Span | None = None, *, at: str | None = None,
                 helps: Sequence[str] = (), notes: Sequence[str] = (), prefix: str | None = None) -> None:
        if isinstance(at, Site):
            span = span if span is not None else at.span
            note = at.note()
            if note is not None:
                notes = [*notes, note]
        super().__init__(message, span, helps=helps, notes=notes, prefix=prefix)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C while a program was simulated: a :class:`KeyboardInterrupt` that
    says how far the run got (``now`` of ``horizon`` simulated seconds)."""

    def __init__(self, now: float, horizon: float) -> None:
        super().__init__(f"interrupted at t={now:g} of {horizon:g}")
        self.now = now
        self.horizon = horizon


class UsageError(SerqError):
    """A bad command line: unknown option, missing or invalid value (CLI exit code 2)."""

    kind = "usage error"


# ---------------------------------------------------------------------------
# did-you-mean (language §7.1)


def levenshtein(a: str, b: str) -> int:
    """Edit distance over Unicode characters."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def suggest(name: str, candidates: Iterable[str]) -> str | None:
    """The unique nearest candidate, if it is close enough (≤1 edit for names
    shorter than 4 characters, ≤2 otherwise); otherwise ``None``."""
    limit = 1 if len(name) < 4 else 2
    best: list[str] = []
    best_d = limit + 1
    for cand in sorted(set(candidates)):
        if cand == name:
            continue
        d = levenshtein(name, cand)
        if d < best_d:
            best, best_d = [cand], d
        elif d == best_d:
            best.append(cand)
    return best[0] if len(best) == 1 and best_d <= limit else None


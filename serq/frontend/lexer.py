"""The lexical pre-pass (language §1).

The PEG does the real parsing; this pass runs first so that lexical errors
(an unterminated comment or string, a bad number, a stray character) are
reported at their exact position, and so that parse errors can name the token
they found.  It also refuses bracket nesting deeper than :data:`MAX_NESTING`,
which keeps the recursive parser and visitor far from Python's stack limit.
"""

from __future__ import annotations

import bisect
import re

from ..errors import SerqError, Source, Span
from ..node import Node, node

MAX_NESTING = 40

#: The program and its libraries together may hold at most this many tokens (language §2.2).
MAX_TOKENS = 100_000

_SPACE = re.compile(r"\s+")
_NAME = re.compile(r"[^\W\d]\w*")
# a number runs over digits, dots and underscores, then an optional exponent (§1.3)
NUMBER = re.compile(r"(?:\d|\.\d)[\d._]*(?:[eE][+-]?\d+)?")
_TWO = ("<=", ">=", "==", "!=", "&&", "||")
_ONE = set("{}()[],;:.=~?+-*/^<>!")
_OPEN = {"(": ")", "[": "]", "{": "}"}


class TooManyTokens(SerqError):
    """More tokens than the program may hold; the span is the first one too many."""


@node
class Token(Node):
    kind: str  # name, number, string, punct
    text: str
    start: int
    end: int


def number_value(text: str) -> float | None:
    """The value of a number token, or None when it does not convert (`1.2.3`)."""
    try:
        return float(text.replace("_", ""))
    except ValueError:
        return None


def _too_many(source: Source, extra: Token) -> TooManyTokens:
    return TooManyTokens(f"the program holds more than {MAX_TOKENS:_} tokens, more than a program can hold"
                         .replace("_", " "), Span(source, extra.start, extra.end),
                         helps=["name repeated parts with `def`, or split the program"])


def tokenize(source: Source, limit: int | None = None) -> list[Token]:
    """The tokens of a source; raises :class:`SerqError` on a lexical error, and
    :class:`TooManyTokens` when there are more than ``limit`` of them."""
    text = source.text
    tokens: list[Token] = []
    opened: list[Token] = []
    pos, n = 0, len(text)
    while pos < n:
        if limit is not None and len(tokens) > limit:
            raise _too_many(source, tokens[limit])
        ch = text[pos]
        m = _SPACE.match(text, pos)
        if m:
            pos = m.end()
            continue
        if text.startswith("//", pos):
            nl = text.find("\n", pos)
            pos = n if nl < 0 else nl
            continue
        if text.startswith("/*", pos):
            close = text.find("*/", pos + 2)
            if close < 0:
                raise SerqError("unterminated block comment", Span(source, pos, pos + 2),
                                helps=["close it with `*/`"])
            pos = close + 2
            continue
        if ch == '"':
            close = text.find('"', pos + 1)
            if close < 0:
                raise SerqError("unterminated string", Span(source, pos, pos + 1),
                                helps=['close it with `"`'])
            tokens.append(Token("string", text[pos:close + 1], pos, close + 1))
            pos = close + 1
            continue
        m = NUMBER.match(text, pos)
        if m:
            if number_value(m.group()) is None:
                raise SerqError(f"bad number `{m.group()}`", Span(source, pos, m.end()),
                                helps=["a number is digits with at most one `.` and an optional exponent"])
            tokens.append(Token("number", m.group(), pos, m.end()))
            pos = m.end()
            continue
        m = _NAME.match(text, pos)
        if m:
            tokens.append(Token("name", m.group(), pos, m.end()))
            pos = m.end()
            continue
        two = text[pos:pos + 2]
        if two in _TWO:
            tokens.append(Token("punct", two, pos, pos + 2))
            pos += 2
            continue
        if ch in _ONE:
            tok = Token("punct", ch, pos, pos + 1)
            tokens.append(tok)
            if ch in _OPEN:
                opened.append(tok)
                if len(opened) > MAX_NESTING:
                    raise SerqError("the program is nested too deeply", Span(source, pos, pos + 1),
                                    helps=[f"at most {MAX_NESTING} brackets may be open at once; "
                                           "name parts with `let`, `set` or `def`"])
            elif ch in ")]}":
                if opened and _OPEN[opened[-1].text] == ch:
                    opened.pop()
            pos += 1
            continue
        shown = f"`{ch}`" if ch.isprintable() else f"U+{ord(ch):04X}"
        raise SerqError(f"unexpected character {shown}", Span(source, pos, pos + 1))
    if limit is not None and len(tokens) > limit:
        raise _too_many(source, tokens[limit])
    return tokens


class Tokens:
    """The tokens of one source, searchable by position (for parse errors)."""

    def __init__(self, source: Source, tokens: list[Token]) -> None:
        self.source = source
        self.tokens = tokens
        self.starts = [t.start for t in tokens]
        self.ends = [t.end for t in tokens]

    def at(self, pos: int) -> Token | None:
        """The token that starts at or after ``pos``."""
        i = bisect.bisect_left(self.ends, pos + 1)
        return self.tokens[i] if i < len(self.tokens) else None

    def index_at(self, pos: int) -> int:
        return bisect.bisect_left(self.ends, pos + 1)

    def trim(self, end: int) -> int:
        """The end of the last token that ends at or before ``end`` (drops trailing space)."""
        i = bisect.bisect_right(self.ends, end)
        return self.ends[i - 1] if i > 0 else end

    def unclosed(self, upto: int) -> Token | None:
        """The outermost bracket opened before ``upto`` and never closed."""
        stack: list[Token] = []
        for t in self.tokens:
            if t.start >= upto:
                break
            if t.kind != "punct":
                continue
            if t.text in _OPEN:
                stack.append(t)
            elif t.text in ")]}" and stack and _OPEN[stack[-1].text] == t.text:
                stack.pop()
        return stack[0] if stack else None

    def unmatched(self) -> Token | None:
        """The first closing bracket that closes nothing, or the wrong opener."""
        stack: list[Token] = []
        for t in self.tokens:
            if t.kind != "punct":
                continue
            if t.text in _OPEN:
                stack.append(t)
            elif t.text in ")]}":
                if not stack or _OPEN[stack[-1].text] != t.text:
                    return t
                stack.pop()
        return None


def describe(tok: Token | None) -> str:
    """How an error names a token it found."""
    if tok is None:
        return "end of input"
    if tok.kind == "string":
        return f"string {tok.text}"
    return f"`{tok.text}`"

"""Diagnostics of the front end: errors that know they come from a definition
expansion, and did-you-mean hints (language §7.1)."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from ..errors import SerqError, Span, ViaSpan, suggest

__all__ = ["ViaSpan", "at", "at_from", "did_you_mean", "error", "unknown"]


def at(span: Span) -> str:
    """``L:C`` of a span."""
    line, col = span.line_col
    return f"{line}:{col}"


def at_from(span: Span, origin: Span | None) -> str:
    """``L:C``, or ``path:L:C`` when ``span`` is in another file than ``origin``."""
    if origin is not None and origin.source is span.source:
        return at(span)
    return f"{span.source.name}:{at(span)}"


def error(
    message: str,
    span: Span | None = None,
    *,
    helps: Sequence[str] = (),
    notes: Sequence[str] = (),
    prefix: str | None = None,
) -> SerqError:
    """A :class:`SerqError`; ``prefix`` is a context such as ``pool `kv```, and a
    span inside an expansion adds *in `NAME`, used at L:C* notes."""
    notes = list(notes)
    if isinstance(span, ViaSpan):
        for name, use in span.via:
            notes.append(f"in `{name}`, used at {at_from(use, span)}")
    text = f"{prefix}: {message}" if prefix else message
    return SerqError(text, span, helps=helps, notes=notes)


def did_you_mean(
    name: str, kind: str, candidates: Mapping[str, Span | None] | Iterable[str]
) -> tuple[list[str], list[str]]:
    """The help and note lines of a did-you-mean over ``candidates`` (empty if none fits)."""
    cands = dict(candidates) if isinstance(candidates, Mapping) else {c: None for c in candidates}
    best = suggest(name, cands)
    if best is None:
        return [], []
    what = f"{kind} `{best}`" if kind else f"`{best}`"
    span = cands.get(best)
    notes = [f"`{best}` declared at {at(span)}"] if isinstance(span, Span) else []
    return [f"did you mean {what}?"], notes


def unknown(
    kind: str,
    name: str,
    span: Span,
    candidates: Mapping[str, Span | None] | Iterable[str],
    *,
    fallback: str | None = None,
    prefix: str | None = None,
    kind_in_help: bool = True,
) -> SerqError:
    """*unknown KIND `name`*, with a did-you-mean or the ``fallback`` help."""
    helps, notes = did_you_mean(name, kind if kind_in_help else "", candidates)
    if not helps and fallback:
        helps = [fallback]
    return error(f"unknown {kind} `{name}`", span, helps=helps, notes=notes, prefix=prefix)

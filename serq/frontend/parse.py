"""Text → syntax tree, and Parsimonious failures → "expected X, found Y".

Parsimonious reports the farthest position where a named rule failed, and the
last such rule tried there (usually the outermost one that starts at that
position).  :func:`parse_failure` turns it into a diagnostic, with special
texts for the cases language §7.2 names.
"""

from __future__ import annotations

from collections import defaultdict

from parsimonious.exceptions import ParseError

from ..errors import SerqError, Source, Span
from . import ast as A
from .build import Builder
from .diag import at, error
from .grammar import GRAMMAR
from .lexer import Tokens, describe, tokenize
from .words import RETIRED

_EXPR_RULES = {
    "expr", "or_expr", "and_expr", "cmp_expr", "add_expr", "mul_expr", "unary", "prefixed",
    "power", "atom", "paren_expr", "call", "number", "arg", "args", "expr_list", "let_value",
    "set_expr", "draw", "aggregate",
}
_PUNCT = {
    "semi": ";", "comma": ",", "colon": ":", "dot": ".", "lbrace": "{", "rbrace": "}",
    "lparen": "(", "rparen": ")", "lbrack": "[", "rbrack": "]", "eq": "=", "question": "?",
    "tilde": "~", "caret": "^", "oror": "||", "andand": "&&",
}
_WHAT = {
    "name": "identifier",
    "string": "string",
    "block": "`{`",
    "block_end": "a statement",
    "stmt": "a statement",
    "item": "an item",
    "pool_end": "a pool option or `}`",
    "pool_clause": "a pool option or `}`",
    "step_end": "a step option or `}`",
    "step_clause": "a step option or `}`",
    "wl_end": "a workload clause or `}`",
    "wl_clause": "a workload clause or `}`",
    "run_end": "a run option or `}`",
    "run_option": "a run option or `}`",
    "ref": "a pool or stage name",
    "hold_pool": "a pool and its units, as in `kv (n)`",
    "binding": "a binding `name = expression`",
    "segment": "a prefix segment `key: length`",
    "params": "a parameter name",
    "array": "`[`",
    "role": "a serving form",
    "arrival": "an arrival process (`poisson(rate)`, `renewal(gap)`, `closed(n)`, `batch(n)`, `trace` or `none`)",
    "counted_arrival": "an arrival process (`poisson(rate)`, `renewal(gap)`, `closed(n)`, `batch(n)`, `trace` or "
                       "`none`)",
}
_AFTER = {
    "evict_how": ("`lru` or `by`", "evict"),
    "preempt_how": ("`lifo` or `none`", "preempt"),
    "queue_how": ("`fifo` or `by`", "queue"),
    "serve_how": ("`admission`, `decode first`, `exclusive prefill`, `exclusive prefills`, `by (keys)` or `only (P)`", "serve"),
    "kw_admission": ("`admission`", "at"),
    "kw_via": ("`via`", "admit"),
}


def parse_source(source: Source, library: bool = False) -> list[A.Item]:
    """The items of one file (``use`` not yet followed)."""
    return parse_counted(source, library)[0]


def parse_counted(source: Source, library: bool = False, max_tokens: int | None = None) -> tuple[list[A.Item], int]:
    """The items of one file and its number of tokens; more than ``max_tokens``
    tokens raise :class:`~serq.frontend.lexer.TooManyTokens` before parsing."""
    tokens = Tokens(source, tokenize(source, max_tokens))
    try:
        items = _items(source, tokens)
    except ParseError as failure:
        opener = tokens.unclosed(len(source.text)) if library and tokens.at(failure.pos) is None else None
        if opener is not None:
            owner = _def_owning(tokens, tokens.tokens.index(opener)) if opener.text == "{" else None
            span = owner.span if owner else Span(source, opener.start, opener.end)
            raise error("this item does not end in the file it starts in: a library's definitions are whole",
                        span, helps=["close it in the library"]) from None
        raise parse_failure(failure, tokens) from None
    return items, len(tokens.tokens)


def _items(source: Source, tokens: Tokens) -> list[A.Item]:
    """``program = _ item* eoi``, one item at a time: each item's parse tree is built
    into syntax and dropped before the next is parsed, and the packrat cache keeps
    only positions not yet passed, so memory follows the largest item, not the file.
    The outcome is the whole-file parse's: one failure record and one cache (pruned
    of positions no later item can ask for) run through all items; a parse error
    anywhere comes before any error of the builder (the first of which is kept
    until the file has parsed)."""
    text, n = source.text, len(source.text)
    builder = Builder(source, tokens)
    item = GRAMMAR["item"]
    failure = ParseError(text)
    cache: defaultdict = defaultdict(dict)
    spacing = GRAMMAR["_"].match_core(text, 0, cache, failure)  # `_` always matches
    pos = spacing.end
    out: list[A.Item] = []
    pending: SerqError | None = None
    while pos < n:
        node = item.match_core(text, pos, cache, failure)
        if node is None or node.end == pos:
            break
        if pending is None:
            try:
                out.append(builder.visit(node))
            except SerqError as err:
                pending = err
        pos = node.end
        cache = defaultdict(dict, {k: kept for k, d in cache.items() if (kept := {p: v for p, v in d.items()
                                                                                   if p >= pos})})
    if pos < n:  # `item*` stopped before the end: `eoi` fails here, then `program` at 0
        for rule, at_pos in ((GRAMMAR["eoi"], pos), (GRAMMAR["program"], 0)):
            if at_pos >= failure.pos:
                failure.expr, failure.pos = rule, at_pos
        raise failure
    if pending is not None:
        raise pending
    return out


def parse_expression(source: Source) -> A.Expr:
    """A lone expression (the value of ``--set``)."""
    tokens = Tokens(source, tokenize(source))
    try:
        tree = GRAMMAR["set_expr"].parse(source.text)
    except ParseError as failure:
        raise parse_failure(failure, tokens) from None
    return Builder(source, tokens).visit(tree)


def _describe_rule(rule: str) -> str:
    if rule in _EXPR_RULES:
        return "an expression"
    if rule in _PUNCT:
        return f"`{_PUNCT[rule]}`"
    if rule.startswith("kw_"):
        return f"`{rule[3:]}`"
    return _WHAT.get(rule, "")


def _name_before_parens(tokens: Tokens, idx: int) -> str | None:
    """The name before the ``(…)`` that ends just before token ``idx``."""
    i, depth = idx - 1, 0
    while i >= 0:
        t = tokens.tokens[i].text
        if t == ")":
            depth += 1
        elif t == "(":
            depth -= 1
            if depth == 0:
                break
        i -= 1
    if i >= 1 and tokens.tokens[i - 1].kind == "name":
        return tokens.tokens[i - 1].text
    return None


def _def_owning(tokens: Tokens, brace_idx: int) -> A.Name | None:
    """The definition a ``{`` opens the body of, if any: ``def NAME(…) {``."""
    if brace_idx < 1 or tokens.tokens[brace_idx - 1].text != ")":
        return None
    i, depth = brace_idx - 1, 0
    while i >= 0:
        t = tokens.tokens[i].text
        depth += t == ")"
        depth -= t == "("
        if depth == 0:
            break
        i -= 1
    if i >= 2 and tokens.tokens[i - 2].text == "def" and tokens.tokens[i - 1].kind == "name":
        name = tokens.tokens[i - 1]
        return A.Name(name.text, Span(tokens.source, name.start, name.end))
    return None


def parse_failure(failure: ParseError, tokens: Tokens) -> SerqError:
    source = tokens.source
    pos = failure.pos
    rule = getattr(failure.expr, "name", "") or ""
    idx = tokens.index_at(pos)
    tok = tokens.at(pos)
    found = describe(tok)
    if tok is not None:
        span = Span(source, tok.start, tok.end)
    else:
        end = tokens.tokens[-1].end if tokens.tokens else 0
        span = Span(source, end, end)

    bad = tokens.unmatched()
    if bad is not None and tok is not None and bad.start == tok.start:
        return error(f"unmatched `{bad.text}`", span, helps=["remove it, or open it before"])
    if tok is not None and tok.kind == "name" and tok.text in RETIRED:
        return error(RETIRED[tok.text], span)
    if tok is not None and tok.text == "." and idx >= 1 and tokens.tokens[idx - 1].text == "args":
        return error("`args.number(\"name\", default)` is accepted only as the whole value of a `let`", span)
    if tok is None:
        opener = tokens.unclosed(len(source.text))
        if opener is not None:
            owner = _def_owning(tokens, tokens.tokens.index(opener)) if opener.text == "{" else None
            if owner is not None:
                return error(f"`def {owner.id}` is not closed", owner.span,
                             helps=["close its body with `}`"])
            want = _describe_rule(rule) or "more"
            return error(f"expected {want}, found end of input", span,
                         notes=[f"the `{opener.text}` at {at(Span(source, opener.start, opener.end))} is never closed"])

    if rule in ("eoi", "program"):
        return error(f"unexpected {found} at top level", span,
                     helps=["a program holds `let`, `use`, `def`, `pool`, `stage`, `workload`, "
                            "`server`, `session` and `run` items"])
    if rule == "stage_kind":
        return error(f"unknown stage kind {found}", span,
                     helps=["a stage is `step { … }`, `fifo`, `fifo(c)`, `ps(φ)` or `delay`"])
    if rule == "def_body":
        name = _name_before_parens(tokens, idx) or "…"
        return error(f"expected `= expression;` or `{{ statements }}` after `def {name}(…)`, found {found}", span)
    if tok is not None and tok.text == ";" and _empty_def_body(tokens, idx):
        return error(f"`def {_name_before_parens(tokens, idx - 1)}` has no expression", span)
    if rule == "use_end":
        name = _name_before_parens(tokens, idx) or "…"
        return error(f"expected `;` after `{name}(…)`, found {found}", span)
    if rule in _AFTER:
        want, after = _AFTER[rule]
        return error(f"expected {want} after `{after}`, found {found}", span)
    want = _describe_rule(rule)
    if not want:
        return error(f"unexpected {found}", span)
    if want == "identifier":
        return error(f"expected identifier, found {found}", span)
    return error(f"expected {want}, found {found}", span)


def _empty_def_body(tokens: Tokens, idx: int) -> bool:
    """Whether token ``idx`` follows ``def NAME(…) =``."""
    toks = tokens.tokens
    if idx < 2 or toks[idx - 1].text != "=" or toks[idx - 2].text != ")":
        return False
    i, depth = idx - 2, 0
    while i >= 0:
        depth += toks[i].text == ")"
        depth -= toks[i].text == "("
        if depth == 0:
            break
        i -= 1
    return i >= 2 and toks[i - 2].text == "def"

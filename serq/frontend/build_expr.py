"""Parse tree → syntax tree for expressions (language §6.1): the visits of the
expression rules, and the small values the builder passes around."""

from __future__ import annotations

from typing import Any

from parsimonious.nodes import Node

from .. import node as nodes
from ..errors import SerqError, Source, Span
from . import ast as A
from .diag import error
from .lexer import Tokens, number_value

#: The most binary operators one chain (``a + b + …``) may hold: each is a level of the syntax tree.
MAX_CHAIN = 1000


@nodes.node
class Tok(nodes.Node):
    text: str
    span: Span


@nodes.node
class Keys(nodes.Node):
    exprs: tuple[A.Expr, ...]
    span: Span


def not_supported(what: str, span: Span, later: bool = False) -> SerqError:
    era = "in this version" if later else "yet"
    return error(f"{what} is not supported {era}", span)


class ExprVisits:
    """The helpers every visit uses, and the ``visit_<rule>`` methods of the
    expression rules; the builder derives from it."""

    source: Source
    tokens: Tokens

    def span(self, node: Node) -> Span:
        """The span of a node, without the spacing after its last token."""
        end = max(node.start, self.tokens.trim(node.end))
        return Span(self.source, node.start, end)

    @staticmethod
    def opt(x: Any) -> Any:
        """The value of an optional ``x?``: None or its single child."""
        return x[0] if isinstance(x, list) and x else None

    # ------------------------------------------------------------ expressions
    def visit_expr(self, node, ch):
        tail = self.opt(ch[1])
        if tail is None:
            return ch[0]
        return A.Cond(ch[0], tail[0], tail[1], self.span(node))

    def visit_ternary(self, node, ch):
        return (ch[1], ch[3])

    def _left(self, node, ch) -> A.Expr:
        x = ch[0]
        tail = ch[1] if isinstance(ch[1], list) else []
        if len(tail) > MAX_CHAIN:
            raise error(f"this expression chains more than {MAX_CHAIN} operators; the program is nested too deeply",
                        tail[MAX_CHAIN][0].span, helps=["name parts of long expressions with `let`, `set` or `def`"])
        for op, y in tail:
            x = A.Binary(op.text, x, y, Span(self.source, x.span.start, y.span.end))
        return x

    visit_or_expr = visit_and_expr = visit_add_expr = visit_mul_expr = _left

    def visit_cmp_expr(self, node, ch):
        tail = ch[1] if isinstance(ch[1], list) else []
        if len(tail) > 1:
            raise error("comparisons do not chain", tail[1][0].span,
                        helps=["write `(a < b) < c`, or `a < b && b < c`"])
        return self._left(node, ch)

    def visit_prefixed(self, node, ch):
        return A.Unary(ch[0].text, ch[1], self.span(node))

    def visit_draw(self, node, ch):
        name: Tok = ch[1]
        return A.Draw(name.text, tuple(self.opt(ch[3]) or ()), self.span(node), name.span)

    def visit_power(self, node, ch):
        tail = self.opt(ch[1])
        if tail is None:
            return ch[0]
        return A.Binary("^", ch[0], tail[1], self.span(node))

    def visit_atom(self, node, ch):
        x = ch[0]
        return A.Name(x.text, x.span) if isinstance(x, Tok) else x

    def visit_number(self, node, ch):
        text = node.children[0].text
        value = number_value(text)
        return A.Num(value if value is not None else float("nan"), Span(self.source, node.start, node.start + len(text)))

    def visit_paren_expr(self, node, ch):
        return ch[1]

    def visit_aggregate(self, node, ch):
        op: Tok = ch[0]
        var: Tok = ch[1]
        return A.Aggregate(op.text, var.text, ch[3], ch[5], self.span(node), var.span)

    def visit_agg_kw(self, node, ch):
        return ch[0]

    def visit_agg_count(self, node, ch):
        x = ch[0]
        return A.Name(x.text, x.span) if isinstance(x, Tok) else x

    def visit_call(self, node, ch):
        name: Tok = ch[0]
        return A.Call(name.text, self.call_args(ch[2]), self.span(node), name.span)

    @staticmethod
    def call_args(args: list[Any]) -> tuple[Any, ...]:
        """Call arguments; ``f()`` has none, and an empty argument elsewhere is None."""
        if args == [None]:
            return ()
        return tuple(args)

    def visit_args(self, node, ch):
        return [ch[0]] + ([pair[1] for pair in ch[1]] if isinstance(ch[1], list) else [])

    def visit_arg(self, node, ch):
        return ch[0]

    def visit_empty_arg(self, node, ch):
        return None

    def visit_ref_arg(self, node, ch):
        name: Tok = ch[0]
        index = self.opt(ch[1])
        field = self.opt(ch[2])
        text = name.text if field is None else f"{name.text}.{field[1].text}"  # `D[j].kv` is `D.kv[j]`
        if index is None:
            return A.Name(text, self.span(node))
        return A.Index(text, index, self.span(node), name.span)

    def visit_dotted(self, node, ch):
        name: Tok = ch[0]
        field: Tok = ch[3]
        if self.opt(ch[1]) is not None:
            raise error(f"`{name.text}[…].{field.text}` reads the request's attribute, which is no member's: "
                        f"write `{name.text}.{field.text}`", self.span(node))
        return A.Name(f"{name.text}.{field.text}", self.span(node))

    def visit_expr_list(self, node, ch):
        return [ch[0]] + ([pair[1] for pair in ch[1]] if isinstance(ch[1], list) else [])

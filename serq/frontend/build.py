"""Parse tree → syntax tree: one ``visit_<rule>`` per grammar rule.

The builder also refuses, at their location, what the grammar accepts only to
name it: advanced features ("not supported yet"), later-era items ("not
supported in this version"), retired words, unknown options, repeated clauses
(decision 4) and chained comparisons.
"""

from __future__ import annotations

import math
from typing import Any

from parsimonious.nodes import Node, NodeVisitor

from .. import node as nodes
from ..errors import SerqError, Source, Span
from . import ast as A
from .build_expr import ExprVisits, Keys, Tok, not_supported
from .choices import let_with_choices
from .diag import at, did_you_mean, error
from .lexer import Tokens
from .words import ADVANCED_ITEMS, ADVANCED_STMTS, LATER, MAX_MEMBERS, RETIRED, too_many_members

_PASS = {
    "item", "let_value", "def_body", "pool_clause", "stage_kind", "step_clause", "wl_clause",
    "run_option", "stmt", "unary", "atom", "role", "run_mode", "run_kw", "arrival_kw",
    "evict_how", "preempt_how", "queue_how", "serve_how", "serve_target",
}
_TOKENS = {"name", "string", "semi", "comma", "colon", "dot", "lbrace", "rbrace", "lparen",
           "rparen", "lbrack", "rbrack", "eq", "question", "tilde", "caret", "oror", "andand",
           "cmp_op", "add_op", "mul_op", "prefix_op"}


@nodes.node
class _Only(nodes.Node):
    """``only (P) [order]`` after ``serve``: the predicate and the order, if one follows."""

    pred: A.Expr
    order: Any


def retired(word: str, span: Span) -> SerqError:
    return error(RETIRED[word], span)


class Builder(ExprVisits, NodeVisitor):
    unwrapped_exceptions = (SerqError, RecursionError)

    def __init__(self, source: Source, tokens: Tokens) -> None:
        self.source = source
        self.tokens = tokens

    # ------------------------------------------------------------ helpers
    def generic_visit(self, node: Node, children: list[Any]) -> Any:
        name = node.expr_name
        if name in _PASS:
            return children[0]
        if name in _TOKENS or name.startswith("kw_"):
            text = node.children[0].text if node.children else node.text
            return Tok(text, Span(self.source, node.start, node.start + len(text)))
        return children or node

    def check_repeats(self, clauses: list[A.Clause], where: str, once: set[str]) -> None:
        """Decision 4: a clause given twice is an error, naming the first."""
        seen: dict[str, A.Clause] = {}
        for c in clauses:
            if c.word in once and c.word in seen:
                shown = "serve only" if c.word == "only" else c.word
                raise error(f"`{shown}` is given twice in {where}", c.span,
                            helps=["keep one of them"],
                            notes=[f"the first is at {at(seen[c.word].span)}"])
            seen.setdefault(c.word, c)

    # ------------------------------------------------------------ program and items
    def visit_program(self, node, ch):
        return list(ch[1]) if isinstance(ch[1], list) else []

    def visit_set_expr(self, node, ch):
        return ch[1]

    def visit_other_item(self, node, ch):
        word: Tok = ch[1]
        if word.text in RETIRED:
            raise error(f"`{word.text}` is a retired word and names nothing: {RETIRED[word.text]}", word.span)
        if word.text in ADVANCED_ITEMS:
            raise not_supported(ADVANCED_ITEMS[word.text], word.span)
        if word.text in LATER:
            raise not_supported(LATER[word.text], word.span, later=True)
        raise error(f"unexpected `{word.text}` at top level", word.span,
                    helps=["a program holds `let`, `use`, `def`, `pool`, `stage`, `workload`, "
                           "`server`, `session` and `run` items"])

    # ------------------------------------------------------------ queue stations (docs/pd.md)
    def visit_queue_item(self, node, ch):
        name: Tok = ch[1]
        roles = [] if self.opt(ch[3]) is None else self.opt(ch[3])
        parts = list(ch[5]) if isinstance(ch[5], list) else []
        pools: list[A.PoolItem] = []
        serve = nic = None
        latency = None
        entries: list[A.QueueEntry] = []
        q = name.text
        for kind, part, span in parts:
            if kind == "pool":
                if serve is not None or nic is not None or entries:
                    raise error(f"queue `{q}` declares its pools first, above its `serve` and entries", span)
                if any(p.name == part.name for p in pools):
                    raise error(f"duplicate pool `{part.name}` in queue `{q}`", part.name_span)
                pools.append(part)
            elif kind == "serve":
                if serve is not None:
                    raise error(f"`serve` twice: queue `{q}` is one stage", span)
                if entries:
                    raise error(f"queue `{q}` declares its `serve` above its entries", span)
                serve, latency = part
            elif kind == "nic":
                if nic is not None:
                    raise error(f"`nic` twice: queue `{q}` has one NIC", span)
                if entries:
                    raise error(f"queue `{q}` declares its `nic` above its entries", span)
                nic = part
            else:
                entries.append(part)
        size = self.array_size(node, ch[2])
        return A.QueueItem(q, size, self.opt(ch[2]) is not None, tuple(roles), tuple(pools), serve, latency,
                           nic, tuple(entries), self.span(node), name.span)

    def visit_roles(self, node, ch):
        toks = [ch[1]] + ([pair[1] for pair in ch[2]] if isinstance(ch[2], list) else [])
        return [(t.text, t.span) for t in toks]

    def visit_queue_part(self, node, ch):
        return ch[0]

    def visit_q_pool(self, node, ch):
        name: Tok = ch[1]
        if self.opt(ch[2]) is not None:
            raise error(f"`pool {name.text}[…]` in a queue: a queue's pool is the member's, one per member; "
                        f"write `pool {name.text}`", name.span)
        clauses = list(ch[4]) if isinstance(ch[4], list) else []
        self.check_repeats(clauses, f"pool `{name.text}`", {"cap", "block", "evict", "preempt", "queue", "admit",
                                                             "spill"})
        return "pool", A.PoolItem(name.text, None, tuple(clauses), self.span(node), name.span), self.span(node)

    def _q_stage(self, word: Tok, kind: tuple, node) -> A.StageItem:
        k, arg, clauses = kind
        if k == "step":
            self.check_repeats(clauses, "the queue's `serve step`", {"budget", "cost", "chunk", "memory", "only"})
            if not any(c.word == "cost" for c in clauses):
                raise error("a step stage needs `cost`", word.span)
        return A.StageItem("", None, k, arg, tuple(clauses), self.span(node), word.span)

    def visit_q_serve(self, node, ch):
        latency = self.opt(ch[2])
        return "serve", (self._q_stage(ch[0], ch[1], node), latency[1] if latency else None), self.span(node)

    def visit_q_nic(self, node, ch):
        return "nic", self._q_stage(ch[0], ch[1], node), self.span(node)

    def visit_q_kind(self, node, ch):
        # `delay` is the bare keyword (a rule that only renames another is merged into it by
        # Parsimonious, so a `q_delay = kw_delay` would never be visited)
        return ("delay", None, []) if isinstance(ch[0], Tok) else ch[0]

    # a queue's `serve` and `nic` kinds: the stage kinds without their `;` (the same children first)
    def visit_q_step(self, node, ch):
        return self.visit_step_kind(node, ch)

    def visit_q_fifo(self, node, ch):
        return self.visit_fifo_kind(node, ch)

    def visit_q_ps(self, node, ch):
        return self.visit_ps_kind(node, ch)

    def visit_q_entry(self, node, ch):
        verb: Tok = ch[0]
        params = self.opt(ch[1])
        names = [] if params is None else (self.opt(params[1]) or [])
        source = self.opt(ch[2])
        seen: set[str] = set()
        for p in names:
            if p.text in seen:
                raise error(f"parameter `{p.text}` twice", p.span)
            seen.add(p.text)
        return "entry", A.QueueEntry(verb.text, tuple(p.text for p in names),
                                     source[1].text if source is not None else None, ch[3], self.span(node),
                                     verb.span), self.span(node)

    def visit_pull_item(self, node, ch):
        reader: Tok = ch[1]  # (ch[0] is the lookahead that keeps item keywords out)
        source: Tok = ch[3]
        latency = self.opt(ch[4])
        share = self.opt(ch[5])
        policy = None
        if share is not None:
            policy = share[1].text
            if policy not in ("maxmin", "bottleneck"):
                raise error(f"`share` takes `maxmin` or `bottleneck`, found `{policy}`", share[1].span)
        return A.PullItem(reader.text, source.text, latency[1] if latency else None, policy, self.span(node),
                          reader.span, source.span)

    def visit_share_item(self, node, ch):
        policy: Tok = ch[1]
        if policy.text not in ("maxmin", "bottleneck"):
            helps, _ = did_you_mean(policy.text, "", ["maxmin", "bottleneck"])
            raise error(f"unknown sharing policy `{policy.text}`", policy.span,
                        helps=helps or ["write `share maxmin;` or `share bottleneck;`"])
        return A.ShareItem(policy.text, self.span(node))

    def visit_let_item(self, node, ch):
        name: Tok = ch[1]
        choices: list[Tok] | None = self.opt(ch[4])
        if choices is None:
            return A.LetItem(name.text, ch[3], self.span(node), name.span)
        return let_with_choices(name, ch[3], choices, self.span(node), self.span(node.children[4]))

    def visit_let_choices(self, node, ch):
        return self.opt(ch[2]) or []

    def visit_choice_names(self, node, ch):
        return [ch[0]] + [pair[1] for pair in ch[1]] if isinstance(ch[1], list) else [ch[0]]

    def visit_gauge_item(self, node, ch):
        name: Tok = ch[1]
        return A.GaugeItem(name.text, ch[3], self.span(node), name.span)

    def visit_claim_item(self, node, ch):
        name: Tok = ch[1]
        given = self.opt(ch[2])
        kind, stage, index, body, stage_span = ch[4]
        return A.ClaimItem(name.text, kind, body, given, stage, index, self.span(node), name.span, stage_span)

    def visit_claim_given(self, node, ch):
        return ch[2]

    def visit_claim_body(self, node, ch):
        return ch[0]

    def visit_claim_iter(self, node, ch):
        stage: Tok = ch[3]
        arr = self.opt(ch[4])
        return (node.children[0].text.strip(), stage.text, None if arr is None else arr[1], ch[6], stage.span)

    def visit_claim_other(self, node, ch):
        span = self.span(node)
        raise error("a claim states `every iteration of STAGE (E)`, `some iteration of STAGE (E)` or `at end (E)`",
                    span if span.end > span.start else Span(span.source, span.start, span.start + 1),
                    helps=["as in `claim fills: every iteration of engine (demand < 8 || tokens == 8);` "
                           "(docs/claims.md)"])

    def visit_claim_end(self, node, ch):
        return ("end", None, None, ch[3], None)

    def visit_args_number(self, node, ch):
        key: Tok = ch[4]
        return A.ArgsNumber(key.text[1:-1], ch[6], self.span(node))

    def visit_use_item(self, node, ch):
        path: Tok = ch[1]
        return A.UseItem(path.text[1:-1], self.span(node), path.span)

    def visit_def_item(self, node, ch):
        name: Tok = ch[1]
        params: list[Tok] = self.opt(ch[3]) or []
        body = ch[5]
        is_expr = not isinstance(body, tuple)
        return A.DefItem(name.text, tuple(p.text for p in params), tuple(p.span for p in params),
                         body, is_expr, self.span(node), name.span)

    def visit_params(self, node, ch):
        return [ch[0]] + [pair[1] for pair in ch[1]] if isinstance(ch[1], list) else [ch[0]]

    def visit_def_expr_body(self, node, ch):
        return ch[1]

    def array_size(self, node: Node, ch: list[Any]) -> int | A.Expr | None:
        """A family's size: a literal is checked here; any other expression (a
        `let`, which `--set` may override; an aggregate) is a constant the
        linker folds (``Declarations.array_size``)."""
        arr = self.opt(ch)
        if arr is None:
            return None
        expr = arr[1]
        if not isinstance(expr, A.Num):
            return expr
        ok = 1 <= expr.value < math.inf and expr.value == int(expr.value)
        if not ok:
            text = self.source.text[expr.span.start:expr.span.end]
            raise error(f"array size must be a positive integer, found `{text}`", expr.span)
        if expr.value > MAX_MEMBERS:
            raise too_many_members(expr.value, expr.span)
        return int(expr.value)

    # ------------------------------------------------------------ pools
    def visit_pool_item(self, node, ch):
        name: Tok = ch[1]
        clauses = list(ch[4]) if isinstance(ch[4], list) else []
        self.check_repeats(clauses, f"pool `{name.text}`", {"cap", "block", "evict", "preempt", "queue", "admit", "spill"})
        return A.PoolItem(name.text, self.array_size(node, ch[2]), tuple(clauses), self.span(node), name.span)

    def _clause(self, node, word: str, value: Any) -> A.Clause:
        return A.Clause(word, value, self.span(node))

    def visit_cap_clause(self, node, ch):
        return self._clause(node, "cap", ch[1])

    def visit_block_clause(self, node, ch):
        return self._clause(node, "block", ch[1])

    def visit_key_list(self, node, ch):
        exprs = self.opt(ch[2]) or []
        return Keys(tuple(exprs), self.span(node))

    def _keys_or_word(self, node, word: str, value: Any, what: str) -> A.Clause:
        if isinstance(value, Keys):
            if not value.exprs:
                raise error(f"{what} needs at least one key", value.span)
            return self._clause(node, word, value.exprs)
        return self._clause(node, word, value.text)

    def visit_evict_clause(self, node, ch):
        return self._keys_or_word(node, "evict", ch[1], "`evict by`")

    def visit_preempt_clause(self, node, ch):
        return self._clause(node, "preempt", ch[1].text)

    def visit_queue_clause(self, node, ch):
        return self._keys_or_word(node, "queue", ch[1], "`queue by`")

    def visit_admit_clause(self, node, ch):
        stage: Tok = ch[2]
        return self._clause(node, "admit", A.Name(stage.text, stage.span))

    def visit_spill_clause(self, node, ch):
        tier: Tok = ch[1]
        link: Tok = ch[3]
        return self._clause(node, "spill", (A.Name(tier.text, tier.span), A.Name(link.text, link.span), ch[5], ch[9]))

    def visit_pool_other(self, node, ch):
        word: Tok = ch[1]
        if word.text in RETIRED:
            raise retired(word.text, word.span)
        helps, _ = did_you_mean(word.text, "", ["cap", "block", "evict", "preempt", "queue", "admit", "spill"])
        raise error(f"unknown pool option `{word.text}`", word.span,
                    helps=helps or ["a pool takes `cap`, `block`, `evict`, `preempt`, `queue`, `admit via` and `spill`"])

    # ------------------------------------------------------------ stages
    def visit_stage_item(self, node, ch):
        name: Tok = ch[1]
        kind, arg, clauses = ch[4]
        if kind == "step":
            self.check_repeats(clauses, f"stage `{name.text}`", {"budget", "cost", "chunk", "memory", "only"})
            serves = [c for c in clauses if c.word == "serve"]
            if len(serves) > 1:
                raise error("a step stage serves its residents in one way: `serve` is given twice",
                            serves[1].span, notes=[f"the first is at {at(serves[0].span)}"])
            if not any(c.word == "cost" for c in clauses):
                raise error("a step stage needs `cost`", name.span,
                            helps=["say what one iteration costs in clock time, e.g. `cost 0.01 + 2e-5 * tokens;`"],
                            prefix=f"stage `{name.text}`")
        return A.StageItem(name.text, self.array_size(node, ch[2]), kind, arg, tuple(clauses),
                           self.span(node), name.span)

    def visit_step_kind(self, node, ch):
        clauses: list[A.Clause] = []
        for c in ch[2] if isinstance(ch[2], list) else []:
            clauses.extend(c if isinstance(c, list) else [c])  # `serve only (P) ORDER;` gives two
        return ("step", None, clauses)

    def visit_fifo_kind(self, node, ch):
        return ("fifo", self.opt(ch[1]), [])

    def visit_ps_kind(self, node, ch):
        return ("ps", ch[2], [])

    def visit_delay_kind(self, node, ch):
        return ("delay", None, [])

    def visit_other_kind(self, node, ch):
        word: Tok = ch[1]
        helps, _ = did_you_mean(word.text, "", ["step", "fifo", "ps", "delay"])
        raise error(f"unknown stage kind `{word.text}`", word.span,
                    helps=helps or ["a stage is `step { … }`, `fifo`, `fifo(c)`, `ps(φ)` or `delay`"])

    def visit_budget_clause(self, node, ch):
        return self._clause(node, "budget", ch[1])

    def visit_cost_clause(self, node, ch):
        return self._clause(node, "cost", ch[1])

    def visit_chunk_clause(self, node, ch):
        return self._clause(node, "chunk", ch[1])

    def visit_memory_clause(self, node, ch):
        pool: Tok = ch[1]
        return self._clause(node, "memory", A.Name(pool.text, pool.span))

    def visit_decode_first(self, node, ch):
        return Tok("decode_first", self.span(node))

    def visit_exclusive_prefill(self, node, ch):
        return Tok("exclusive_prefill", self.span(node))

    def visit_exclusive_prefills(self, node, ch):
        return Tok("exclusive_prefills", self.span(node))

    def visit_serve_clause(self, node, ch):
        how = ch[1]
        if isinstance(how, _Only):  # `serve only (P) [order];`: the clauses `only` and, if given, `serve`
            only = self._clause(node, "only", how.pred)
            if how.order is None:
                return [only]
            return [only, self._keys_or_word(node, "serve", how.order, "`serve by`")]
        return self._keys_or_word(node, "serve", how, "`serve by`")

    def visit_serve_only(self, node, ch):
        return _Only(ch[2], self.opt(ch[4]))

    def visit_serve_order(self, node, ch):
        return ch[0]

    def visit_step_other(self, node, ch):
        word: Tok = ch[1]
        rest = node.children[2].text.split()
        if word.text == "exclusive" and rest[:1] in (["prefill"], ["prefills"]):
            raise error(f"write `serve exclusive {rest[0]};`", word.span)
        if word.text == "decode" and rest[:1] == ["first"]:
            raise error("write `serve decode first;`", word.span)
        helps, _ = did_you_mean(word.text, "", ["budget", "cost", "chunk", "memory", "serve"])
        raise error(f"unknown step option `{word.text}`", word.span,
                    helps=helps or ["a step stage takes `budget`, `cost`, `chunk`, `serve` and `memory`"])

    # ------------------------------------------------------------ workload, server, session, run
    def visit_workload_item(self, node, ch):
        clauses = list(ch[2]) if isinstance(ch[2], list) else []
        sessions = [c for c in clauses if c.word == "session"]
        if len(sessions) > 1:
            raise error("duplicate session in workload", sessions[1].span,
                        notes=[f"the first is at {at(sessions[0].span)}"])
        self.check_repeats(clauses, "the workload", {"arrive", "trace", "init", "turn"})
        return A.WorkloadItem(tuple(clauses), self.span(node))

    def visit_arrive_clause(self, node, ch):
        return self._clause(node, "arrive", ch[1])

    def visit_arrival(self, node, ch):
        x = ch[0]
        return A.Arrival("none", None, x.span) if isinstance(x, Tok) else x

    def visit_counted_arrival(self, node, ch):
        return A.Arrival(ch[0].text, ch[2], self.span(node))

    def visit_trace_arrival(self, node, ch):
        """``arrive trace;`` or ``arrive trace(rate);`` (docs/replay.md)."""
        rate = self.opt(ch[1])
        return A.Arrival("trace", rate[1] if rate is not None else None, self.span(node))

    def visit_trace_clause(self, node, ch):
        path: Tok = ch[1]
        ordered = self.opt(ch[2]) is not None
        return self._clause(node, "trace", A.Trace(path.text[1:-1], ordered, path.span))

    def visit_hidden_clause(self, node, ch):
        toks = [ch[1]] + [pair[1] for pair in ch[2]] if isinstance(ch[2], list) else [ch[1]]
        return self._clause(node, "hidden", tuple(A.Name(t.text, t.span) for t in toks))

    def visit_init_clause(self, node, ch):
        return self._clause(node, "init", ch[1])

    def visit_turn_clause(self, node, ch):
        return self._clause(node, "turn", ch[1])

    def visit_wl_session(self, node, ch):
        return self._clause(node, "session", ch[1])

    def visit_wl_other(self, node, ch):
        word: Tok = ch[1]
        if word.text in RETIRED:
            raise retired(word.text, word.span)
        raise error(f"unexpected `{word.text}` in workload", word.span,
                    helps=["a workload holds `arrive`, `trace`, `hidden`, `init`, `turn` and `session`"])

    def visit_server_item(self, node, ch):
        return A.ServerItem(ch[1], self.span(node))

    def visit_session_item(self, node, ch):
        return A.SessionItem(ch[1], self.span(node))

    def visit_run_item(self, node, ch):
        clauses = list(ch[2]) if isinstance(ch[2], list) else []
        self.check_repeats(clauses, "`run`", {"horizon", "warmup", "seed", "arrivals"})
        return A.RunItem(tuple(clauses), self.span(node))

    def visit_run_known(self, node, ch):
        return self._clause(node, ch[0].text, ch[1])

    def visit_run_other(self, node, ch):
        word: Tok = ch[1]
        helps, _ = did_you_mean(word.text, "", ["horizon", "warmup", "seed", "arrivals"])
        raise error(f"unknown run option `{word.text}`", word.span,
                    helps=helps or ["`run` takes `horizon`, `warmup`, `seed` and `arrivals`"])

    # ------------------------------------------------------------ statements
    def visit_block(self, node, ch):
        return tuple(ch[1]) if isinstance(ch[1], list) else ()

    def visit_turn_stmt(self, node, ch):
        return A.TurnStmt(self.span(node))

    def visit_request_stmt(self, node, ch):
        queue = self.opt(ch[1])
        if queue is not None:
            return A.RequestStmt(self.span(node), queue.text, queue.span)
        return A.RequestStmt(self.span(node))

    def visit_mark_stmt(self, node, ch):
        return A.MarkStmt(ch[1].text, self.span(node), ch[0].span)

    def visit_call_stmt(self, node, ch):
        queue: Tok = ch[0]
        verb: Tok = ch[3]
        source = field = None
        got = self.opt(ch[7])
        if got is not None:
            source, field = got
        to = self.opt(ch[8])
        return A.CallStmt(queue.text, self.opt(ch[1]), verb.text, self.call_args(ch[5]), source,
                          to[0] if to else None, to[1] if to else None, self.span(node), queue.span, field)

    def visit_call_from(self, node, ch):
        name: Tok = ch[1]
        index = self.opt(ch[2])
        field = self.opt(ch[3])
        ref = A.Ref(name.text, index, self.span(node), name.span)
        return ref, (field[1].text if field is not None else None)

    def visit_call_to(self, node, ch):
        return ch[1], ch[3]

    def visit_end_stmt(self, node, ch):
        return A.EndStmt(self.span(node))

    def visit_set_stmt(self, node, ch):
        return A.SetStmt(ch[1].text, ch[3], self.span(node), ch[1].span)

    def visit_observe_stmt(self, node, ch):
        return A.ObserveStmt(ch[1].text, ch[3], self.span(node), ch[1].span)

    def visit_hold_stmt(self, node, ch):
        pools = [ch[1]] + [pair[1] for pair in ch[2]] if isinstance(ch[2], list) else [ch[1]]
        lease = self.opt(ch[8])
        bindings = self.opt(ch[5]) or ()
        prefix = self.opt(ch[3]) or ()
        return A.HoldStmt(tuple(pools), self.opt(ch[4]), tuple(bindings), ch[6], self.opt(ch[7]),
                          self.span(node), ch[0].span, tuple(prefix), lease)

    def visit_hold_pool(self, node, ch):
        return A.HoldPool(ch[0], ch[2], self.opt(ch[4]), self.span(node))

    def visit_prefix_clause(self, node, ch):
        rest = [pair[1] for pair in ch[3]] if isinstance(ch[3], list) else []
        return [ch[2]] + rest

    def visit_segment(self, node, ch):
        return A.Segment(ch[0], ch[2], self.span(node))

    def visit_admission(self, node, ch):
        rest = [pair[1] for pair in ch[4]] if isinstance(ch[4], list) else []
        return [ch[3]] + rest

    def visit_binding(self, node, ch):
        return A.Binding(ch[0].text, ch[2], self.span(node), ch[0].span)

    def _parenthesised(self, node, ch):
        return ch[2]

    visit_reserve_clause = visit_reuse_clause = visit_cache_clause = _parenthesised

    def visit_fifo_count(self, node, ch):
        return ch[1]

    visit_index = visit_fifo_count

    def visit_else_clause(self, node, ch):
        return ch[1]

    def visit_lease_clause(self, node, ch):
        return A.Lease(ch[1], ch[3], ch[0].span)

    def visit_grow_stmt(self, node, ch):
        return A.GrowStmt(ch[1], ch[3], self.span(node), ch[0].span)

    def visit_drop_stmt(self, node, ch):
        return A.DropStmt(ch[1], self.span(node))

    def visit_release_stmt(self, node, ch):
        return A.ReleaseStmt(ch[1], self.span(node), ch[0].span)

    def visit_load_stmt(self, node, ch):
        return A.LoadStmt(ch[1], ch[3], self.span(node), ch[0].span)

    def visit_run_stmt(self, node, ch):
        target = self.opt(ch[1])
        if target is None:  # `run (w);`: the queue's own stage, resolved by the expander
            ref, also = A.Ref("", None, ch[0].span, ch[0].span), ()
        else:
            ref, rest = target
            also = tuple(pair[1] for pair in rest) if isinstance(rest, list) else ()
        mode = self.opt(ch[2])
        growing = self.opt(ch[6])
        return A.RunStmt(ref, mode.text if mode else None, ch[4], growing, self.span(node), ch[0].span,
                         also=also)

    def visit_run_target(self, node, ch):
        return ch[0], ch[1]

    def visit_transfer_stmt(self, node, ch):
        role: Tok = ch[0]
        target = self.opt(ch[1])
        ends = self.opt(ch[3])
        if ends is None:
            raise error("a `transfer` names where the KV goes: `transfer (WORK) from P to Q (N);`", role.span,
                        helps=["it is `run LINK (WORK); load Q (N); release P;`; a link that only takes time "
                               "is a plain `run LINK (WORK);`"])
        index = on = None
        also: tuple[A.Ref, ...] = ()
        if isinstance(target, list):  # `on S, …`
            on, also = target[0], tuple(target[1:])
        elif target is not None:
            index = target
        src, dst, n = ends
        return A.ServingStmt("transfer", index, on, ch[2], None, self.span(node), role.span,
                             also=also, src=src, dst=dst, n=n)

    def visit_transfer_ends(self, node, ch):
        return ch[1], ch[3], ch[5]

    def visit_growing(self, node, ch):
        return ch[1]

    def visit_branch_stmt(self, node, ch):
        draw = self.opt(ch[1]) is not None
        return A.BranchStmt(ch[3], ch[5], self.opt(ch[6]), draw, self.span(node), ch[0].span)

    def visit_loop_stmt(self, node, ch):
        return A.LoopStmt(ch[1], self.span(node))

    def visit_choose_stmt(self, node, ch):
        keys = self.opt(ch[6]) or []
        if not keys:
            raise error("a `choose` needs at least one key", self.span(node.children[5]))
        return A.ChooseStmt(ch[1].text, ch[3], tuple(keys), self.span(node), ch[1].span)

    def visit_spawn_stmt(self, node, ch):
        body = ch[6]
        for s in body:
            if not isinstance(s, A.SetStmt):
                span = getattr(s, "head", None) or getattr(s, "name_span", None) or s.span
                raise error("a `spawn` block may only `set` the children's attributes", span,
                            helps=["write `set NAME = EXPR;`: EXPR is evaluated in the parent, at the spawn"])
        return A.SpawnStmt(ch[2], ch[5].text, tuple(body), self.span(node), ch[0].span, ch[5].span)

    def visit_join_stmt(self, node, ch):
        return A.JoinStmt(ch[1].text, self.span(node), ch[0].span, ch[1].span)

    def visit_serving_stmt(self, node, ch):
        role: Tok = ch[0]
        target = self.opt(ch[1])
        index = on = None
        if isinstance(target, list):  # `on S, …`
            if len(target) > 1:
                raise error(f"`{role.text} on` names one stage", target[1].span,
                            helps=["one job on several stages at once is `run A, B (w);` or "
                                   "`transfer on A, B (w) from P to Q (n);`"])
            on = target[0]
        elif target is not None:
            index = target
        return A.ServingStmt(role.text, index, on, ch[2], self.opt(ch[3]), self.span(node), role.span)

    def visit_serve_index(self, node, ch):
        return ch[1]

    def visit_serve_on(self, node, ch):
        return [ch[1]] + ([pair[1] for pair in ch[2]] if isinstance(ch[2], list) else [])

    def visit_use_stmt(self, node, ch):
        if ch[0].text in RETIRED:
            raise retired(ch[0].text, ch[0].span)
        return A.UseStmt(ch[0].text, self.call_args(ch[2]), self.span(node), ch[0].span)

    def visit_other_stmt(self, node, ch):
        word: Tok = ch[1]
        rest = node.children[2].text.lstrip()
        if word.text in RETIRED:
            raise retired(word.text, word.span)
        if word.text in ADVANCED_STMTS:
            raise not_supported(ADVANCED_STMTS[word.text], word.span)
        if word.text in LATER:
            raise not_supported(LATER[word.text], word.span, later=True)
        return A.UnknownStmt(word.text, self.span(node), word.span, rest.startswith("("))

    def visit_ref(self, node, ch):
        name: Tok = ch[0]
        return A.Ref(name.text, self.opt(ch[1]), self.span(node), name.span)

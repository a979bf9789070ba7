"""The serQ grammar (language §9) as one Parsimonious PEG.

Conventions:

* Every terminal rule eats the spacing after it (``_``), so a rule's node
  starts at its first token; :mod:`serq.frontend.build` trims the trailing
  spacing off spans.
* Every rule is named: Parsimonious reports the farthest failure of a *named*
  rule, and :mod:`serq.frontend.parse` turns that name into "expected X".
  A rule that only renames another (``a = b``) would be the same object as
  ``b``, so the closing rules (``block_end`` …) spell their token out.
* Keywords are contextual (§1.6): ``name`` accepts any identifier, and each
  position tries its keyword alternatives first.  The keyword rules ``kw_*``
  are generated from :data:`KEYWORDS` at the end of the text.
* The text is compiled by :func:`compile_rules`, a small reader of the rule
  syntax that builds the same expressions Parsimonious's ``Grammar(text)``
  builds, ten times faster (Parsimonious parses rule text with its own PEG,
  ~40 ms for this grammar, paid by every ``serq`` process);
  ``tests/frontend/test_grammar.py`` checks the two give the same expressions.
* Catch-all rules (``other_item``, ``other_stmt``, ``pool_other`` …) accept an
  unknown word followed by a balanced "soup" of tokens, so that the builder can
  say *unknown statement `w`*, refuse an advanced feature at its location, or
  name a retired word, instead of a bare "expected".  A negative look-ahead
  keeps them from swallowing a keyword whose own rule failed.
"""

from __future__ import annotations

import ast
import re
from collections import OrderedDict
from typing import Any

from parsimonious.expressions import Expression, Literal, Lookahead, Not, OneOf, Quantifier, Regex, Sequence
from parsimonious.grammar import Grammar, LazyReference
from parsimonious.nodes import RegexNode

KEYWORDS = (
    "let use def pool stage workload server session run "
    "cap block evict lru by preempt lifo none queue fifo admit via spill when "
    "step budget cost chunk memory serve admission decode first exclusive prefill prefills only ps delay "
    "arrive trace ordered hidden init turn poisson renewal closed batch "
    "horizon warmup seed arrivals "
    "request end set observe hold reserve reuse at cache lease grow drop release prefix "
    "branch with else loop choose in tool on growing spawn into join "
    "max min sum args number gauge share maxmin bottleneck load transfer from to nic latency pull mark "
    "claim given every some iteration of"
).split()

GRAMMAR_TEXT = r'''
# ------------------------------------------------------------------ program
program        = _ item* eoi
eoi            = ~r"\Z"
# the value of `--set NAME=EXPR` (language §8)
set_expr       = _ expr eoi
item           = let_item / use_item / def_item / pool_item / stage_item / workload_item
               / server_item / session_item / run_item / gauge_item / share_item / queue_item
               / claim_item / pull_item / other_item
# an unknown word at top level
# and the later era's `fn`, `device`, `engine`, refused by the builder
other_item     = !item_kw name soup (semi / braces)?
item_kw        = kw_let / kw_use / kw_def / kw_pool / kw_stage / kw_workload / kw_server
               / kw_session / kw_run / kw_gauge / kw_share / kw_queue / kw_claim

# how a run over several stages divides them (docs/pd.md, "Flows")
share_item     = kw_share name semi

# queue stations and pull relations (docs/pd.md, "Queue stations"): parse-time forms
queue_item     = kw_queue name array? roles? lbrace queue_part* queue_end
roles          = colon name (comma name)*
queue_end      = "}" _
queue_part     = q_pool / q_serve / q_nic / q_entry
q_pool         = kw_pool name array? lbrace pool_clause* pool_end
q_serve        = kw_serve q_kind q_latency? semi?
q_latency      = kw_latency expr
q_nic          = kw_nic q_kind semi?
q_kind         = q_step / q_fifo / q_ps / kw_delay
q_step         = kw_step lbrace step_clause* step_end
q_fifo         = kw_fifo fifo_count?
q_ps           = kw_ps lparen expr rparen
q_entry        = name entry_params? entry_from? block
entry_params   = lparen params? rparen
entry_from     = kw_from name
pull_item      = !item_kw name kw_pull name q_latency? pull_share? semi
pull_share     = kw_share name

let_item       = kw_let name eq let_value let_choices? semi
let_value      = args_number / expr
# `let router = affinity in (random, affinity);`: the let's choices, by name
# (docs/language.md, "A choice among names"); the value is the chosen one's place
let_choices    = kw_in lparen choice_names? rparen
choice_names   = name (comma name)* comma?
# decision 5: `args.number("name", default)` as the whole initializer of a `let`
args_number    = kw_args dot kw_number lparen string comma expr rparen
use_item       = kw_use string semi
gauge_item     = kw_gauge name eq expr semi
# a property of the program's paths (docs/claims.md)
claim_item     = kw_claim name claim_given? colon claim_body semi
claim_given    = kw_given lparen expr rparen
claim_body     = claim_iter / claim_end / claim_other
# anything else after the colon: refused by the builder, saying what a claim states
claim_other    = soup_tok*
claim_iter     = claim_quant kw_iteration kw_of name array? lparen expr rparen
claim_quant    = kw_every / kw_some
claim_end      = kw_at kw_end lparen expr rparen
def_item       = kw_def name lparen params? rparen def_body
params         = name (comma name)*
def_body       = def_expr_body / block
def_expr_body  = eq expr semi

# ------------------------------------------------------------------ pools (§3)
pool_item      = kw_pool name array? lbrace pool_clause* pool_end
pool_end       = "}" _
array          = lbrack expr rbrack
pool_clause    = cap_clause / block_clause / evict_clause / preempt_clause / queue_clause
               / admit_clause / spill_clause / pool_other
cap_clause     = kw_cap expr semi
block_clause   = kw_block expr semi
evict_clause   = kw_evict evict_how semi
evict_how      = kw_lru / key_list
key_list       = kw_by lparen expr_list? rparen
preempt_clause = kw_preempt preempt_how semi
preempt_how    = kw_lifo / kw_none
queue_clause   = kw_queue queue_how semi
queue_how      = kw_fifo / key_list
admit_clause   = kw_admit kw_via name semi
spill_clause   = kw_spill name kw_via name lparen expr rparen kw_when lparen expr rparen semi
pool_other     = !pool_kw name soup semi
pool_kw        = kw_cap / kw_block / kw_evict / kw_preempt / kw_queue / kw_admit / kw_spill

# ------------------------------------------------------------------ stages (§4)
stage_item     = kw_stage name array? colon stage_kind
stage_kind     = step_kind / fifo_kind / ps_kind / delay_kind / other_kind
step_kind      = kw_step lbrace step_clause* step_end semi?
step_end       = "}" _
fifo_kind      = kw_fifo fifo_count? semi
fifo_count     = lparen expr rparen
ps_kind        = kw_ps lparen expr rparen semi
delay_kind     = kw_delay semi
other_kind     = !kind_kw name soup semi?
kind_kw        = kw_step / kw_fifo / kw_ps / kw_delay
step_clause    = budget_clause / cost_clause / chunk_clause / memory_clause / serve_clause
               / step_other
budget_clause  = kw_budget expr semi
cost_clause    = kw_cost expr semi
chunk_clause   = kw_chunk expr semi
memory_clause  = kw_memory name semi
serve_clause   = kw_serve serve_how semi
serve_how      = kw_admission / decode_first / exclusive_prefills / exclusive_prefill / key_list / serve_only
# `serve only (P) [order];`: which residents an iteration serves, then (optionally) in what
# order; the builder makes it two clauses, `only` and `serve` (docs/language.md, the step engine)
serve_only     = kw_only lparen expr rparen serve_order?
serve_order    = kw_admission / decode_first / exclusive_prefills / exclusive_prefill / key_list
decode_first   = kw_decode kw_first
exclusive_prefill = kw_exclusive kw_prefill
# every waiting prefill that fits, alone (vLLM v0 without chunking; docs/language.md)
exclusive_prefills = kw_exclusive kw_prefills
step_other     = !step_kw name soup semi
step_kw        = kw_budget / kw_cost / kw_chunk / kw_memory / kw_serve

# ------------------------------------------------------------------ workload (§2.6)
workload_item  = kw_workload lbrace wl_clause* wl_end
wl_end         = "}" _
wl_clause      = arrive_clause / trace_clause / hidden_clause / init_clause / turn_clause
               / wl_session / wl_other
arrive_clause  = kw_arrive arrival semi
arrival        = counted_arrival / trace_arrival / kw_none
counted_arrival = arrival_kw lparen expr rparen
arrival_kw     = kw_poisson / kw_renewal / kw_closed / kw_batch
trace_arrival  = kw_trace (lparen expr rparen)?
trace_clause   = kw_trace string kw_ordered? semi
hidden_clause  = kw_hidden name (comma name)* semi
init_clause    = kw_init block
turn_clause    = kw_turn block
wl_session     = kw_session block
wl_other       = !wl_kw name soup (semi / braces)?
wl_kw          = kw_arrive / kw_trace / kw_hidden / kw_init / kw_turn / kw_session

server_item    = kw_server block
session_item   = kw_session block
run_item       = kw_run lbrace run_option* run_end
run_end        = "}" _
run_option     = run_known / run_other
run_known      = run_kw expr semi
run_kw         = kw_horizon / kw_warmup / kw_seed / kw_arrivals
run_other      = !run_kw name soup semi

# ------------------------------------------------------------------ statements (§5)
block          = lbrace stmt* block_end
block_end      = "}" _
stmt           = turn_stmt / request_stmt / end_stmt / set_stmt / observe_stmt / hold_stmt
               / grow_stmt / drop_stmt / release_stmt / run_stmt / branch_stmt / loop_stmt
               / choose_stmt / spawn_stmt / join_stmt / load_stmt / transfer_stmt / serving_stmt
               / mark_stmt / call_stmt / use_stmt / other_stmt
turn_stmt      = kw_turn semi
request_stmt   = kw_request name? semi
end_stmt       = kw_end semi
set_stmt       = kw_set name eq expr semi
observe_stmt   = kw_observe name eq expr semi
hold_stmt      = kw_hold hold_pool (comma hold_pool)* prefix_clause? reuse_clause? admission? block
                 cache_clause? lease_clause? semi?
hold_pool      = ref lparen expr rparen reserve_clause?
# the shared prefix cache (docs/simulator.md "Shared prefix cache"): `KEY: LENGTH` segments
prefix_clause  = kw_prefix lparen segment (comma segment)* rparen
segment        = expr colon expr
reserve_clause = kw_reserve lparen expr rparen
reuse_clause   = kw_reuse lparen expr rparen
admission      = kw_at kw_admission lparen binding (comma binding)* rparen
binding        = name eq expr
cache_clause   = kw_cache lparen expr rparen
lease_clause   = kw_lease ref lparen expr rparen
grow_stmt      = kw_grow ref lparen expr rparen semi
drop_stmt      = kw_drop ref semi
release_stmt   = kw_release ref semi
load_stmt      = kw_load ref lparen expr rparen semi
mark_stmt      = kw_mark name semi
# a queue entry's call: `Q[i].verb (args) [from S[k]] [to POOL (m)];`
call_stmt      = name index? dot name lparen args rparen call_from? call_to? semi
call_from      = kw_from name index? (dot name)?
call_to        = kw_to ref lparen expr rparen
# `transfer [[i] | on S, …] WORK from P to Q (N);` (docs/pd.md); without `from`, the builder refuses it
transfer_stmt  = kw_transfer serve_target? expr transfer_ends? semi
transfer_ends  = kw_from ref kw_to ref lparen expr rparen
run_stmt       = kw_run run_target? run_mode? lparen expr rparen growing? semi
# `run (w);` names no stage: in a queue entry, the queue's own (docs/pd.md)
run_target     = ref (comma ref)*
run_mode       = kw_prefill / kw_decode
growing        = kw_growing ref
branch_stmt    = kw_branch kw_with? lparen expr rparen block else_clause?
else_clause    = kw_else block
loop_stmt      = kw_loop block
choose_stmt    = kw_choose name kw_in expr kw_by lparen expr_list? rparen semi
# subagents (docs/subagents.md): the block holds only `set`s, checked by the builder
spawn_stmt     = kw_spawn lparen expr rparen kw_into name block
join_stmt      = kw_join name semi
# the serving forms (§5.6): the work is any expression, ending at `growing` or `;`
serving_stmt   = role serve_target? expr growing? semi
role           = kw_prefill / kw_decode / kw_tool
serve_target   = serve_index / serve_on
serve_index    = lbrack expr rbrack
serve_on       = kw_on ref (comma ref)*
# a definition use; whether NAME is a statement definition is decided later
use_stmt       = name lparen args rparen use_end
use_end        = ";" _
# an unknown word; also `while`, retired words
other_stmt     = !stmt_kw name soup (semi / braces)?
stmt_kw        = kw_turn / kw_request / kw_end / kw_set / kw_observe / kw_hold / kw_grow
               / kw_drop / kw_release / kw_run / kw_branch / kw_loop / kw_choose / kw_spawn / kw_join
               / kw_prefill / kw_decode / kw_tool / kw_load / kw_transfer / kw_mark
ref            = name index?
index          = lbrack expr rbrack

# ------------------------------------------------------------------ expressions (§6.1)
expr           = or_expr ternary?
ternary        = question expr colon expr
or_expr        = and_expr (oror and_expr)*
and_expr       = cmp_expr (andand cmp_expr)*
# comparisons do not chain: the builder refuses a second operator with a clear message
cmp_expr       = add_expr (cmp_op add_expr)*
add_expr       = mul_expr (add_op mul_expr)*
mul_expr       = unary (mul_op unary)*
unary          = prefixed / draw / power
prefixed       = prefix_op unary
draw           = tilde name lparen expr_list? rparen
power          = atom (caret unary)?
atom           = number / paren_expr / aggregate / call / dotted / name
# `Q.x` (a queue's attribute or pool), `Q[i].x` (a member's pool)
dotted         = name index? dot name
paren_expr     = lparen expr rparen
aggregate      = agg_kw name kw_in agg_count lparen expr rparen
agg_kw         = kw_max / kw_min / kw_sum
agg_count      = number / name / paren_expr
call           = name lparen args rparen
args           = arg (comma arg)*
arg            = ref_arg / expr / empty_arg
ref_arg        = name index? (dot name)? &(comma / rparen)
empty_arg      = ""
expr_list      = expr (comma expr)*

# ------------------------------------------------------------------ soup (balanced tokens)
soup           = soup_tok*
soup_tok       = string / soup_parens / soup_bracks / soup_word
soup_parens    = lparen soup rparen
soup_bracks    = lbrack soup rbrack
soup_word      = ~r"(?:[^;{}()\[\]\"\s/]|/(?![/*]))+" _
braces         = lbrace (soup_tok / semi / braces)* rbrace

# ------------------------------------------------------------------ tokens (§1)
_              = ~r"(?:\s+|//[^\n]*|/\*[\s\S]*?\*/)*"
name           = ~r"[^\W\d]\w*" _
number         = ~r"(?:\d|\.\d)[\d._]*(?:[eE][+-]?\d+)?" _
string         = ~r"\"[^\"]*\"" _
semi           = ";" _
comma          = "," _
colon          = ":" _
dot            = "." _
lbrace         = "{" _
rbrace         = "}" _
lparen         = "(" _
rparen         = ")" _
lbrack         = "[" _
rbrack         = "]" _
eq             = ~r"=(?!=)" _
question       = "?" _
tilde          = "~" _
caret          = "^" _
oror           = "||" _
andand         = "&&" _
cmp_op         = ~r"<=|>=|==|!=|<|>" _
add_op         = ~r"[+-]" _
mul_op         = ~r"[*/]" _
prefix_op      = ~r"-|!(?!=)" _

# the keyword rules follow, one per word of KEYWORDS:  kw_let = ~r"let\b" _
'''

GRAMMAR_SOURCE = GRAMMAR_TEXT + "".join(f'kw_{k} = ~r"{k}\\b" _\n' for k in KEYWORDS)


# ---------------------------------------------------------------------------
# the rule syntax, read without Parsimonious's own (slow) PEG


class _Unsupported(Exception):
    """Rule text :func:`compile_rules` does not read (Parsimonious then does)."""


# The tokens of Parsimonious's rule syntax (``parsimonious.grammar.rule_syntax``):
# spacing and comments, a string literal, a label, a quantifier, and the
# punctuation.  A literal has at most one prefix letter: Parsimonious reads
# ``ur"…"`` as the label ``u`` then ``r"…"``, and so does this (a bytes
# literal is left to Parsimonious).
_TOKEN = re.compile(
    r"""(?:\s+|\#[^\r\n]*)*(?:(?P<end>\Z)"""
    r"""|(?P<literal>[urbURB]?(?s:"[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*'))"""
    r"""|(?P<label>[a-zA-Z_][a-zA-Z_0-9]*)(?!["'])"""
    r"""|(?P<quant>[*+?]|\{\d*,\d+\}|\{\d+,\d*\}|\{\d+\})"""
    r"""|(?P<punct>[=/!&()~]))"""
)
_FLAGS = re.compile(r"[ilmsuxa]*", re.I)
_KEYWORD = re.compile(r"[A-Za-z_]\w*\\b")  # the pattern of a keyword leaf: WORD\b
_QUANT = {"?": (0, 1), "*": (0, float("inf")), "+": (1, float("inf"))}


def _string(text: str) -> str:
    """The value of a rule-text string literal, as ``ast.literal_eval`` gives it."""
    head = text[: text.index(text[-1])].lower()
    if "b" in head:
        raise _Unsupported("a bytes literal")
    body = text[len(head) + 1 : -1]
    if "r" in head or "\\" not in body:
        return body
    value = ast.literal_eval(text)
    assert isinstance(value, str)
    return value


class _Reader:
    """A recursive-descent reader of rule text, building what Parsimonious's
    ``RuleVisitor`` builds from the same text (the same classes, members,
    names, and unresolved references as :class:`LazyReference`)."""

    def __init__(self, text: str, keywords: bool = False) -> None:
        self.keywords = keywords  # a flagless ~r"WORD\\b" becomes a :class:`Keyword`
        tokens: list[tuple[str, str, int]] = []
        pos = 0
        for m in _TOKEN.finditer(text):  # each token with the spacing before it
            kind = m.lastgroup
            if m.start() != pos or kind is None:
                raise _Unsupported(f"rule text at {pos}")
            if kind == "end":
                break
            tokens.append((kind, m.group(kind), m.end()))
            pos = m.end()
        else:
            raise _Unsupported("rule text: no end")
        self.text = text
        self.tokens = tokens
        self.i = 0

    def peek(self, k: int = 0) -> tuple[str, str]:
        j = self.i + k
        return self.tokens[j][:2] if j < len(self.tokens) else ("end", "")

    def take(self, kind: str, value: str | None = None) -> str:
        got_kind, got = self.peek()
        if got_kind != kind or (value is not None and got != value):
            raise _Unsupported(f"expected {value or kind}, found {got!r}")
        self.i += 1
        return got

    def rules(self) -> list[Any]:
        out = []
        while self.peek()[0] != "end":
            label = self.take("label")
            self.take("punct", "=")
            expr = self.expression()
            expr.name = label  # as RuleVisitor.visit_rule: after construction
            out.append(expr)
        return out

    def starts_term(self) -> bool:
        kind, value = self.peek()
        if kind == "label":
            return self.peek(1) != ("punct", "=")  # a label then `=` starts the next rule
        return kind == "literal" or (kind == "punct" and value in "~(!&")

    def terms(self) -> list[Any]:
        if not self.starts_term():
            raise _Unsupported(f"expected a term, found {self.peek()[1]!r}")
        out = [self.term()]
        while self.starts_term():
            out.append(self.term())
        return out

    def expression(self) -> Any:
        first = self.terms()
        if self.peek() == ("punct", "/"):
            alternatives = [first[0] if len(first) == 1 else Sequence(*first)]
            while self.peek() == ("punct", "/"):
                self.i += 1
                terms = self.terms()
                alternatives.append(terms[0] if len(terms) == 1 else Sequence(*terms))
            return OneOf(*alternatives)
        return Sequence(*first) if len(first) > 1 else first[0]

    def term(self) -> Any:
        kind, value = self.peek()
        if kind == "punct" and value == "!":
            self.i += 1
            return Not(self.term())
        if kind == "punct" and value == "&":
            self.i += 1
            return Lookahead(self.term())
        atom = self.atom()
        kind, value = self.peek()
        if kind != "quant":
            return atom
        self.i += 1
        if value in _QUANT:
            low, high = _QUANT[value]
        else:
            parts = value[1:-1].split(",")
            if len(parts) == 1:
                low = high = int(parts[0])
            else:
                low = int(parts[0]) if parts[0] else 0
                high = int(parts[1]) if parts[1] else float("inf")
        return Quantifier(atom, min=low, max=high)

    def atom(self) -> Any:
        kind, value = self.peek()
        self.i += 1
        if kind == "label":
            return LazyReference(value)
        if kind == "literal":
            return Literal(_string(value))
        if kind == "punct" and value == "(":
            expr = self.expression()
            self.take("punct", ")")
            return expr
        if kind == "punct" and value == "~":
            if self.tokens[self.i - 1][2] != self.tokens[self.i][2] - len(self.peek()[1]):
                raise _Unsupported("spacing between `~` and its literal")
            pattern = _string(self.take("literal"))
            end = self.tokens[self.i - 1][2]
            flags = _FLAGS.match(self.text, end)
            assert flags is not None
            if flags.group():  # the flags are spelled right after the literal
                self.take("label", flags.group())
            f = flags.group().upper()
            if self.keywords and not f and _KEYWORD.fullmatch(pattern):
                return Keyword(pattern[:-2])
            return Regex(pattern, ignore_case="I" in f, locale="L" in f, multiline="M" in f,
                         dot_all="S" in f, unicode="U" in f, verbose="X" in f, ascii="A" in f)
        raise _Unsupported(f"expected a term, found {value!r}")


def compile_rules(text: str, fallback: bool = True, keywords: bool = False) -> Grammar:
    """``Grammar(text)``, built without parsing the rules with Parsimonious:
    the same rules, the same expressions, the first rule the default.  Text
    this reader does not know is handed to Parsimonious itself (or, without
    ``fallback``, raises).  With ``keywords``, each ``~r"WORD\\b"`` without
    flags is a :class:`Keyword`, which matches alike without a regex."""
    if not fallback:
        return _grammar(_Reader(text, keywords).rules())
    try:
        return _grammar(_Reader(text, keywords).rules())
    except Exception:  # noqa: BLE001 - anything unusual: let Parsimonious read it (and report it)
        return Grammar(text)


def _grammar(rules: list[Any]) -> Grammar:
    rule_map: OrderedDict[str, Any] = OrderedDict((expr.name, expr) for expr in rules)
    for name, rule in list(rule_map.items()):  # as RuleVisitor.visit_rules
        rule_map[name] = rule.resolve_refs(rule_map)
    grammar = Grammar()
    grammar.update(rule_map)
    grammar.default_rule = rule_map[rules[0].name] if rules else None
    return grammar


class Keyword(Regex):
    """The leaf ``~r"WORD\\b"`` of a keyword rule, matched without compiling
    a regular expression per keyword: the word, then no word character (what
    ``\\b`` means after a word ending in one, with the same engine's ``\\w``).
    Building the grammar compiled 79 keyword patterns, 8 ms of every start;
    the pattern is compiled only if something asks for it (``str(grammar)``)."""

    _WORD = Regex(r"\w").re  # Parsimonious's own regex engine

    def __init__(self, word: str) -> None:  # pylint: disable=super-init-not-called
        Expression.__init__(self, "")
        self.word = word
        self.identity_tuple = ("", word)
        self._pattern: Any = None

    @property  # type: ignore[override]
    def re(self) -> Any:
        if self._pattern is None:
            self._pattern = Regex(self.word + r"\b").re
        return self._pattern

    def _uncached_match(self, text: str, pos: int, cache: Any, error: Any) -> Any:
        word = self.word
        end = pos + len(word)
        if text.startswith(word, pos) and self._WORD.match(text, end) is None:
            node = RegexNode(self, text, pos, end)
            node.match = None
            return node
        return None


GRAMMAR = compile_rules(GRAMMAR_SOURCE, keywords=True)

"""The syntax tree the builder makes from a parse (language §2–§6).

Every node is a frozen dataclass with a ``span``: the whole construct, and
for some nodes a second span on the token errors point at (``name_span``,
``head``).  Names are still text here; :mod:`serq.frontend.link` resolves them.
"""

from __future__ import annotations

from ..node import Node, node
from typing import Union

from ..errors import Span

# ---------------------------------------------------------------------------
# expressions


@node
class Num(Node):
    value: float
    span: Span


@node
class Name(Node):
    id: str
    span: Span


@node
class Index(Node):
    """``NAME[expr]``: a reference to an array member, as a call argument."""

    id: str
    index: "Expr"
    span: Span
    name_span: Span


@node
class Unary(Node):
    op: str  # "-" or "!"
    x: "Expr"
    span: Span


@node
class Binary(Node):
    op: str
    a: "Expr"
    b: "Expr"
    span: Span


@node
class Aggregate(Node):
    """``max|min|sum var in count (body)``: written out term by term when linked."""

    op: str
    var: str
    count: "Expr"
    body: "Expr"
    span: Span
    var_span: Span


@node
class Cond(Node):
    c: "Expr"
    a: "Expr"
    b: "Expr"
    span: Span


@node
class Call(Node):
    """``NAME(args)``: a function, a probe, ``blocksize`` or an expression definition."""

    fn: str
    args: tuple["Expr", ...]
    span: Span
    name_span: Span


@node
class Draw(Node):
    dist: str
    args: tuple["Expr", ...]
    span: Span
    name_span: Span


@node
class ArgsNumber(Node):
    """``args.number("key", default)`` (decision 5): only as a ``let`` initializer."""

    key: str
    default: "Expr"
    span: Span


Expr = Union[Num, Name, Index, Unary, Binary, Cond, Call, Draw, ArgsNumber, Aggregate]


@node
class Ref(Node):
    """A pool or stage named in a statement: ``NAME`` or ``NAME[expr]``."""

    name: str
    index: Expr | None
    span: Span
    name_span: Span


# ---------------------------------------------------------------------------
# statements


@node
class SetStmt(Node):
    name: str
    expr: Expr
    span: Span
    name_span: Span


@node
class ObserveStmt(Node):
    name: str
    expr: Expr
    span: Span
    name_span: Span


@node
class TurnStmt(Node):
    span: Span


@node
class RequestStmt(Node):
    span: Span
    queue: str | None = None  # `request gw;`: the gateway queue whose `route` runs here
    queue_span: Span | None = None


@node
class EndStmt(Node):
    span: Span


@node
class HoldPool(Node):
    ref: Ref
    units: Expr
    reserve: Expr | None
    span: Span


@node
class Binding(Node):
    name: str
    expr: Expr
    span: Span
    name_span: Span


@node
class Segment(Node):
    """``KEY: LENGTH`` of a hold's ``prefix`` (docs/simulator.md, "Shared prefix cache")."""

    key: Expr
    length: Expr
    span: Span


@node
class Lease(Node):
    """``lease P (T)`` after a hold's block: P's allocation outlives the scope."""

    ref: Ref
    time: Expr
    span: Span  # the `lease` keyword


@node
class HoldStmt(Node):
    pools: tuple[HoldPool, ...]
    reuse: Expr | None
    bindings: tuple[Binding, ...]
    body: "Block"
    cache: Expr | None
    span: Span
    head: Span  # the `hold` keyword
    prefix: tuple[Segment, ...] = ()  # `prefix (KEY: LENGTH, …)`, in order
    lease: Lease | None = None


@node
class GrowStmt(Node):
    ref: Ref
    amount: Expr
    span: Span
    head: Span


@node
class DropStmt(Node):
    ref: Ref
    span: Span


@node
class ReleaseStmt(Node):
    ref: Ref
    span: Span
    head: Span


@node
class LoadStmt(Node):
    """``load Q (n)``: the KV of ``n`` tokens arrived; the enclosing hold's position on Q advances."""

    ref: Ref
    amount: Expr
    span: Span
    head: Span


@node
class RunStmt(Node):
    """``run S [mode] (work) [growing P]``; serving forms become this too."""

    ref: Ref
    mode: str | None
    work: Expr
    growing: Ref | None
    span: Span
    head: Span
    form: str = "run"  # or the serving form it came from: prefill, decode, tool, transfer
    also: tuple[Ref, ...] = ()  # `run A, B (w)`: the stages after the first (one flow on all)


@node
class ServingStmt(Node):
    """``prefill|decode|tool [[i] | on S] work [growing P]`` before stage resolution;
    ``transfer [[i] | on S, …] work from P to Q (n)`` with ``also``, ``src``, ``dst``, ``n``."""

    role: str
    index: Expr | None
    on: Ref | None
    work: Expr
    growing: Ref | None
    span: Span
    head: Span
    also: tuple[Ref, ...] = ()  # `transfer on S1, S2, …`: the stages after the first
    src: Ref | None = None
    dst: Ref | None = None
    n: Expr | None = None


@node
class BranchStmt(Node):
    guard: Expr
    then: "Block"
    orelse: "Block | None"
    draw: bool  # `branch with (p)`
    span: Span
    head: Span


@node
class LoopStmt(Node):
    body: "Block"
    span: Span


@node
class ChooseStmt(Node):
    name: str
    count: Expr
    keys: tuple[Expr, ...]
    span: Span
    name_span: Span


@node
class SpawnStmt(Node):
    """``spawn (COUNT) into NAME { set …; }``: ``sets`` are evaluated in the
    parent at the spawn and assigned in each child (docs/subagents.md)."""

    count: Expr
    name: str
    sets: tuple["SetStmt", ...]
    span: Span
    head: Span
    name_span: Span


@node
class JoinStmt(Node):
    """``join NAME;``: wait for the children spawned into NAME since its last join."""

    name: str
    span: Span
    head: Span
    name_span: Span


@node
class UseStmt(Node):
    """``NAME(args);``: a statement definition's use."""

    name: str
    args: tuple[Expr | None, ...]  # None: an empty argument
    span: Span
    name_span: Span


@node
class UnknownStmt(Node):
    """A statement that starts with a word no rule knows (maybe a definition
    used without its ``;``, which only the expander can tell)."""

    name: str
    span: Span
    name_span: Span
    called: bool  # the word is followed by `(`


@node
class MarkStmt(Node):
    """``mark x;`` in a queue entry: ``set Q.x = now;`` (docs/pd.md, "Queue stations")."""

    name: str
    span: Span
    head: Span


@node
class CallStmt(Node):
    """``Q[i].verb (args) [from S[k]] [to P (m)];``: a queue entry, expanded in place.
    ``source`` is the queue (or pool) a ``from`` names, with its index; ``field`` a
    ``from S.p`` spelling, refused."""

    queue: str
    index: Expr | None
    verb: str
    args: tuple[Expr | None, ...]
    source: Ref | None
    to: Ref | None
    to_n: Expr | None
    span: Span
    head: Span  # the queue's name
    source_field: str | None = None


@node
class ServerMark(Node):
    """Where a spliced server block begins or ends (``ir.ServerBegin``/``ServerEnd``)."""

    begin: bool
    span: Span


Stmt = Union[
    SetStmt, ObserveStmt, TurnStmt, RequestStmt, EndStmt, HoldStmt, GrowStmt, DropStmt,
    ReleaseStmt, LoadStmt, RunStmt, ServingStmt, BranchStmt, LoopStmt, ChooseStmt, UseStmt, UnknownStmt,
    ServerMark, SpawnStmt, JoinStmt, MarkStmt, CallStmt,
]
Block = tuple[Stmt, ...]

# ---------------------------------------------------------------------------
# items


@node
class LetItem(Node):
    name: str
    expr: Expr
    span: Span
    name_span: Span
    #: ``let NAME = C in (C0, C1, …)``: the choices' names and spans (empty: a plain ``let``);
    #: ``expr`` is then the :class:`Name` of the default
    choices: tuple[str, ...] = ()
    choice_spans: tuple[Span, ...] = ()


@node
class GaugeItem(Node):
    name: str
    expr: Expr
    span: Span
    name_span: Span


@node
class ClaimItem(Node):
    """``claim NAME [given (G)]: every|some iteration of STAGE (E);`` or ``… at end (E);``."""

    name: str
    kind: str  # "every", "some" or "end"
    expr: Expr
    given: Expr | None
    stage: str | None  # every/some: the step stage's name
    stage_index: Expr | None  # a member of a stage family, `of engine[1]`
    span: Span
    name_span: Span
    stage_span: Span | None = None


@node
class UseItem(Node):
    path: str
    span: Span
    path_span: Span


@node
class DefItem(Node):
    name: str
    params: tuple[str, ...]
    param_spans: tuple[Span, ...]
    body: Union[Expr, Block]
    is_expr: bool
    span: Span
    name_span: Span


@node
class Clause(Node):
    """One clause of a pool, step stage or run block: ``word`` and its value."""

    word: str
    value: object  # an Expr, a key tuple, a keyword string, or a name
    span: Span


@node
class PoolItem(Node):
    name: str
    size: "int | Expr | None"  # an expression: a constant the linker folds
    clauses: tuple[Clause, ...]
    span: Span
    name_span: Span


@node
class StageItem(Node):
    name: str
    size: "int | Expr | None"  # an expression: a constant the linker folds
    kind: str  # delay fifo ps step
    arg: Expr | None  # fifo(c) or ps(φ)
    clauses: tuple[Clause, ...]  # step clauses
    span: Span
    name_span: Span


@node
class WorkloadItem(Node):
    clauses: tuple[Clause, ...]  # arrive, trace, hidden, init, turn, session
    span: Span


@node
class ServerItem(Node):
    body: Block
    span: Span


@node
class SessionItem(Node):
    body: Block
    span: Span


@node
class RunItem(Node):
    clauses: tuple[Clause, ...]
    span: Span


@node
class ShareItem(Node):
    """``share maxmin;`` or ``share bottleneck;``: how one run over several stages divides them."""

    policy: str
    span: Span


@node
class QueueEntry(Node):
    """An entry of a queue station: ``VERB [(params)] [from NAME] { body }``."""

    verb: str
    params: tuple[str, ...]
    source: str | None
    body: "Block"
    span: Span
    name_span: Span


@node
class QueueItem(Node):
    """``queue NAME[size] : role, … { pool …; serve KIND [latency e]; nic KIND; entries }``:
    parse-time sugar the expander turns into pools ``NAME.p``, the stage ``NAME``, the
    stage ``NAME.nic`` and entries called in place (docs/pd.md, "Queue stations")."""

    name: str
    size: "int | Expr | None"
    family: bool
    roles: tuple[tuple[str, Span], ...]
    pools: tuple[PoolItem, ...]
    serve: StageItem | None
    latency: Expr | None
    nic: StageItem | None
    entries: tuple[QueueEntry, ...]
    span: Span
    name_span: Span


@node
class PullItem(Node):
    """``D pull P [latency x] share maxmin|bottleneck;``: D reads KV from P over their NICs."""

    reader: str
    source: str
    latency: Expr | None
    share: str | None
    span: Span
    reader_span: Span
    source_span: Span


Item = Union[LetItem, UseItem, DefItem, PoolItem, StageItem, WorkloadItem, ServerItem, SessionItem, RunItem,
             GaugeItem, ShareItem, QueueItem, PullItem, ClaimItem]


@node
class Arrival(Node):
    kind: str  # poisson renewal closed batch trace none
    arg: Expr | None
    span: Span


@node
class Trace(Node):
    path: str
    ordered: bool
    span: Span


# ---------------------------------------------------------------------------
# walking


def sub_exprs(e: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``e`` (empty call arguments left out)."""
    if isinstance(e, Unary):
        return (e.x,)
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, Cond):
        return (e.c, e.a, e.b)
    if isinstance(e, (Call, Draw)):
        return tuple(a for a in e.args if a is not None)
    if isinstance(e, Index):
        return (e.index,)
    if isinstance(e, ArgsNumber):
        return (e.default,)
    if isinstance(e, Aggregate):
        return (e.count, e.body)
    return ()


def walk_expr(e: Expr):
    """``e`` and every expression inside it, depth first."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(sub_exprs(x)))


def names_read(e: Expr) -> set[str]:
    """The bare names an expression reads (array names of ``kv[i]`` included)."""
    return {x.id for x in walk_expr(e) if isinstance(x, (Name, Index))}


def stmt_refs(s: Stmt) -> tuple[Ref, ...]:
    if isinstance(s, HoldStmt):
        return tuple(p.ref for p in s.pools) + ((s.lease.ref,) if s.lease else ())
    if isinstance(s, (GrowStmt, DropStmt, ReleaseStmt, LoadStmt)):
        return (s.ref,)
    if isinstance(s, RunStmt):
        return (s.ref,) + s.also + ((s.growing,) if s.growing else ())
    if isinstance(s, ServingStmt):
        return (((s.on,) if s.on else ()) + s.also + ((s.growing,) if s.growing else ())
                + tuple(r for r in (s.src, s.dst) if r is not None))
    if isinstance(s, CallStmt):
        return tuple(r for r in (s.source, s.to) if r is not None)
    return ()


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions a statement holds itself (not those of its nested blocks)."""
    out: list[Expr | None] = [r.index for r in stmt_refs(s)]
    if isinstance(s, (SetStmt, ObserveStmt)):
        out.append(s.expr)
    elif isinstance(s, HoldStmt):
        for p in s.pools:
            out += [p.units, p.reserve]
        out += [s.reuse, s.cache] + [b.expr for b in s.bindings]
        for g in s.prefix:
            out += [g.key, g.length]
        if s.lease is not None:
            out.append(s.lease.time)
    elif isinstance(s, (GrowStmt, LoadStmt)):
        out.append(s.amount)
    elif isinstance(s, RunStmt):
        out.append(s.work)
    elif isinstance(s, ServingStmt):
        out += [s.index, s.work, s.n]
    elif isinstance(s, BranchStmt):
        out.append(s.guard)
    elif isinstance(s, ChooseStmt):
        out += [s.count, *s.keys]
    elif isinstance(s, UseStmt):
        out += list(s.args)
    elif isinstance(s, SpawnStmt):
        out += [s.count, *(x.expr for x in s.sets)]
    elif isinstance(s, CallStmt):
        out += [s.index, *s.args, s.to_n]
    return tuple(x for x in out if x is not None)


def child_blocks(s: Stmt) -> tuple[Block, ...]:
    if isinstance(s, HoldStmt):
        return (s.body,)
    if isinstance(s, LoopStmt):
        return (s.body,)
    if isinstance(s, BranchStmt):
        return (s.then,) if s.orelse is None else (s.then, s.orelse)
    return ()


def walk_stmts(block: Block):
    """Every statement of a block and of the blocks nested in it, in source order."""
    for s in block:
        yield s
        for b in child_blocks(s):
            yield from walk_stmts(b)

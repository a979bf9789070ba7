"""The checked program: what the simulator and the drawing read.

The front end (``serq.frontend``) turns text into this: names resolved to
indices, ``let`` constants folded to numbers, definitions expanded, the
server spliced in place of every ``request;``, serving forms rewritten to
``Run``, ``at admission`` bindings substituted.  Nothing here refers to source
text, except short ``label`` strings (a pretty-printed statement such as
```branch (c / K)```) that run-time errors quote.

Expressions are trees of the ``Expr`` classes below; ``serq.expr`` compiles
them once into Python callables.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Literal, Union

from .errors import SerqError
from .node import Node, node

#: The most members of a pool or stage family, terms of an aggregate (with those it
#: is nested in) and candidates of a ``choose``: each is written out or built one
#: by one, a family's members when the run starts (about 100 µs and 5 KB each).
MAX_MEMBERS = 4096
#: The most members of all a program's families together (about 2 s to build).
MAX_ALL_MEMBERS = 16384

# ---------------------------------------------------------------------------
# expressions


@node
class Num(Node):
    value: float


@node
class Attr(Node):
    """A session attribute, by slot in ``Program.attributes``."""

    slot: int
    name: str


@node
class Ctx(Node):
    """A context variable (language §6.4): ``now``, ``waited``, ``size``, ``age``,
    ``last``, ``waiting``, ``present``, ``residents``, ``decoders``,
    ``kv_decode``, ``kv_prefill``, ``tokens``, ``prefilled``, ``attention``,
    ``decoding``, ``admission``, ``remaining``."""

    name: str


@node
class Unary(Node):
    op: Literal["-", "!"]
    x: "Expr"


@node
class Binary(Node):
    """``op`` is one of ``+ - * / ^ < <= > >= == != && ||``."""

    op: str
    a: "Expr"
    b: "Expr"


@node
class Cond(Node):
    c: "Expr"
    a: "Expr"
    b: "Expr"


@node
class Call(Node):
    """A pure function: ``min max abs floor ceil sqrt exp ln pow``; an
    aggregate ``max|min|sum j in n (…)`` is one ``min``, ``max`` or ``sum``
    call with a term per index, folded left to right."""

    fn: str
    args: tuple["Expr", ...]


@node
class PoolRef(Node):
    """A pool, or a member of a pool array (``index`` is then an expression)."""

    pool: int
    index: "Expr | None" = None


@node
class StageRef(Node):
    stage: int
    index: "Expr | None" = None


@node
class Probe(Node):
    """An observable function of the deployment's state (language §6.5):
    ``queue busy work`` and ``budget_left`` of a stage, ``used free cachedin
    holders queued`` of a pool."""

    fn: str
    target: Union[PoolRef, StageRef]
    #: ``cachedin(P, k1, n1, k2, n2, …)``: the chain whose cached prefix is asked for, flat
    args: tuple[Expr, ...] = ()


@node
class Draw(Node):
    """``~dist(args)``: ``exp det uniform erlang h2 bernoulli``."""

    dist: str
    args: tuple["Expr", ...]


@node
class Agg(Node):
    """An aggregate of every sample of observation ``obs`` so far, read by a claim
    ``at end``: ``total``, ``count``, ``largest``, ``smallest`` or ``prefix_total``
    (the sum of the prefix sums of the samples in ascending order)."""

    fn: str
    obs: int


Expr = Union[Num, Attr, Ctx, Unary, Binary, Cond, Call, Probe, Draw, Agg]

# ---------------------------------------------------------------------------
# statements


@node
class Set(Node):
    slot: int
    expr: Expr


@node
class Observe(Node):
    """Record a sample of observation ``obs`` (an index into ``Program.observes``)."""

    obs: int
    expr: Expr


@node
class Turn(Node):
    pass


@node
class End(Node):
    pass


@node
class HoldPool(Node):
    ref: PoolRef
    units: Expr  # moment Admit
    reserve: Expr | None = None  # moment Admit
    label: str = ""  # ```hold kv (units)```, for run-time errors about this amount
    reserve_label: str = ""  # ```hold kv reserve (r)```


@node
class Lease(Node):
    """``lease P (T)`` on a hold: its allocation on ``ref`` outlives the scope until
    ``release P``, ``time`` clock units (moment Session, read at the scope's end) or
    the session's end, and the hold's ``cache`` applies then (docs/pd.md)."""

    ref: PoolRef
    time: Expr
    label: str = field(default="", compare=False, repr=False)  # a ``serq.errors.Site``: where ``time`` is


@node
class Segment(Node):
    """``KEY: LENGTH`` of a hold's ``prefix`` (moment Admit; neither draws nor
    reads state: checked by the linker)."""

    key: Expr
    length: Expr
    label: str = ""  # ```prefix (k: L)```, for run-time errors about the length


@node
class Hold(Node):
    """``hold P(u) [reserve (r)], … [prefix (k: L, …)] [reuse (ρ)] { body } [cache (ℓ)]``.

    ``id`` is unique in the program.  Bindings of ``at admission`` are already
    substituted into the header, and ``set x = e;`` is already at the top of
    ``body`` for the bindings the body reads."""

    id: int
    pools: tuple[HoldPool, ...]
    body: "Block"
    reuse: Expr | None = None  # moment Admit
    cache: Expr | None = None  # moment Session, read at release
    lease: Lease | None = None
    label: str = ""
    prefix: tuple[Segment, ...] = ()  # the listed segments of the chain (shared prefix cache)


@node
class Grow(Node):
    ref: PoolRef
    amount: Expr
    label: str = ""


@node
class Drop(Node):
    ref: PoolRef


@node
class Release(Node):
    ref: PoolRef


@node
class Load(Node):
    """``load Q (n)``: the innermost enclosing hold's computed position on Q advances
    by ``amount`` (within its allocation): the KV of a transfer arrived."""

    ref: PoolRef
    amount: Expr
    label: str = ""


@node
class Run(Node):
    """A job of ``work`` on a stage.  ``mode`` is ``"prefill"`` or ``"decode"``
    exactly when the stage is a step stage.  ``growing`` names the pool whose
    innermost enclosing hold grows as the job advances.  ``also``: the further
    stages of ``run A, B (w)``, one flow that holds them all (``Program.share``)."""

    stage: StageRef
    work: Expr
    mode: Literal["prefill", "decode"] | None = None
    growing: PoolRef | None = None
    label: str = ""
    also: tuple[StageRef, ...] = ()


@node
class Branch(Node):
    """A test: ``guard`` must be exactly 0 or 1 at run time."""

    guard: Expr
    then: "Block"
    orelse: "Block | None" = None
    label: str = ""


@node
class Loop(Node):
    body: "Block"


@node
class Choose(Node):
    slot: int
    count: Expr
    keys: tuple[Expr, ...]
    label: str = ""


@node
class ServerBegin(Node):
    """Where a spliced ``server`` block starts: the turn is sent (client metrics)."""


@node
class ServerEnd(Node):
    """Where a spliced ``server`` block ends: the answer is back (client metrics)."""


@node
class Spawn(Node):
    """``spawn (count) into handle { set slot = expr; … }``: ``sets`` are
    evaluated in the parent at the spawn; each child gets their values after
    its ``init`` (docs/subagents.md).  ``handle`` indexes ``Program.handles``."""

    handle: int
    count: Expr
    sets: tuple[Set, ...] = ()
    label: str = ""


@node
class Join(Node):
    """``join handle;``: wait until the children spawned into it since its last join have ended."""

    handle: int
    label: str = ""


Stmt = Union[
    Set, Observe, Turn, End, Hold, Grow, Drop, Release, Load, Run, Branch, Loop, Choose,
    ServerBegin, ServerEnd, Spawn, Join,
]
Block = tuple[Stmt, ...]

# ---------------------------------------------------------------------------
# declarations


@node
class Spill(Node):
    """A pool's ``spill TIER via LINK (work) when (pred)``: each evicted piece
    for which ``pred`` holds joins its owner's entry in pool ``tier`` and a
    session-less job of ``work`` runs on stage ``link`` (both read at moment
    Evict; docs/offload.md)."""

    tier: int
    link: int
    work: Expr
    pred: Expr
    #: run-time errors' labels of ``work`` and ``pred`` (``serq.errors.Site``: where each is written)
    work_site: str = field(default="", compare=False, repr=False)
    pred_site: str = field(default="", compare=False, repr=False)


@node
class PoolDecl(Node):
    """``pool NAME[size] { … }``.  ``evict`` is ``"lru"`` or a tuple of keys
    (moment Evict); ``queue`` is ``"fifo"`` or a tuple of keys (moment Select);
    ``admit_via`` is the index of a step stage."""

    name: str
    size: int | None = None  # None: not an array
    cap: float = float("inf")
    block: float | None = None
    evict: Union[Literal["lru"], tuple[Expr, ...]] = "lru"
    preempt: Literal["none", "lifo"] = "none"
    queue: Union[Literal["fifo"], tuple[Expr, ...]] = "fifo"
    admit_via: int | None = None
    spill: Spill | None = None

    @property
    def members(self) -> int:
        return 1 if self.size is None else self.size


@node
class StepDecl(Node):
    """The clauses of a ``step`` stage.  ``serve`` is ``"admission"``,
    ``"decode_first"``, ``"exclusive_prefill"``, ``"exclusive_prefills"`` or a tuple of keys (moment
    Serve).  ``memory`` is a pool index.  ``only`` is ``serve only (P)``'s
    predicate (moment Serve, read per resident; None: every resident is
    served), beside ``serve``: it says which residents, ``serve`` in what order."""

    cost: Expr  # moment Step
    budget: Expr = Num(float("inf"))  # moment Budget
    chunk: Expr = Num(0.0)  # moment Budget; 0 means no cap
    serve: Union[str, tuple[Expr, ...]] = "admission"
    memory: int | None = None
    only: Expr | None = None


@node
class StageDecl(Node):
    """``stage NAME[size] : kind``; ``kind`` is ``delay``, ``fifo``, ``ps`` or ``step``."""

    name: str
    kind: Literal["delay", "fifo", "ps", "step"]
    size: int | None = None
    servers: int = 1  # fifo(c)
    phi: Expr | None = None  # ps(φ), moment Ps
    step: StepDecl | None = None
    #: run-time errors' labels of its expressions by clause (``ps``, ``budget``, ``chunk``,
    #: ``cost``: ``serq.errors.Site``, where each is written)
    sites: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def members(self) -> int:
        return 1 if self.size is None else self.size


@node
class Arrival(Node):
    """``arrive …``: ``kind`` in ``poisson renewal closed batch trace none``.
    ``rate`` for poisson, and for trace the replay speed (the trace's arrival
    times are divided by it; 1 without an argument); ``n`` for closed and
    batch; ``gap`` for renewal."""

    kind: Literal["poisson", "renewal", "closed", "batch", "trace", "none"] = "none"
    rate: float = 0.0
    n: int = 0
    gap: Expr | None = None


@node
class TraceDecl(Node):
    """``trace "file.csv" [ordered]``: ``path`` as resolved against the program's folder."""

    path: str
    ordered: bool = False


@node
class RunSettings(Node):
    """``run { … }``; ``horizon`` is None when the program leaves it to ``--horizon``."""

    horizon: float | None = None
    warmup: float = 0.0
    seed: int = 1
    arrivals: int | None = None
    #: the lines of the run block's ``horizon`` and ``warmup`` (None: not written there), for messages
    lines: tuple[int | None, int | None] = field(default=(None, None), compare=False)

    def window(self, horizon: float | None, warmup: float | None) -> tuple[float, float]:
        """The run's ``(horizon, warmup)``: the arguments (``--horizon``,
        ``--warmup``) where given, else this block's values.  An error says
        where each value came from (issue 13: the run block's line, or the flag)."""
        h = self.horizon if horizon is None else horizon
        w = self.warmup if warmup is None else warmup
        if h is None:
            raise SerqError("no horizon (run { horizon T; })", helps=["give one with --horizon T"])
        if not (math.isfinite(h) and h > 0):
            raise SerqError(f"the horizon must be finite and positive, not {h:g}")
        if not (0.0 <= w < h):
            said_w = self._said("warm-up", "--warmup", w, warmup, self.lines[1])
            said_h = self._said("horizon", "--horizon", h, horizon, self.lines[0])
            what = "is negative" if w < 0 else f"is not below {said_h}"
            raise SerqError(f"{said_w} {what}",
                            helps=["statistics start at the warm-up, which must be at least 0 and below the horizon: "
                                   "give a shorter --warmup or a longer --horizon"])
        return float(h), float(w)

    @staticmethod
    def _said(name: str, flag: str, value: float, given: float | None, line: int | None) -> str:
        shown = f"{value:g}"
        if given is not None:
            return f"{flag} {shown}"
        if line is not None:
            return f"{name} {shown} from the program's run block (line {line})"
        return f"the default {name} {shown}"


@node
class ObserveDecl(Node):
    """An observation name.  ``is_test``: some ``observe`` of it is a test (its
    outermost operator a comparison, ``&&``, ``||`` or ``!``), which enables the
    report's constant-0 note."""

    name: str
    is_test: bool = False


#: The nine built-in session attributes, in slot order (language §6.3).
BUILTIN_ATTRIBUTES: tuple[str, ...] = (
    "serial", "turn_no", "cached", "computed", "new", "out", "think", "forced", "more",
)
SERIAL, TURN_NO, CACHED, COMPUTED, NEW, OUT, THINK, FORCED, MORE = range(9)

#: The session tree's read-only attributes; slots after the program's own
#: attributes, only in a program that spawns (otherwise every session is a
#: root and they read as -1, 0 and ``serial``).
TREE_ATTRIBUTES: tuple[str, ...] = ("parent", "depth", "root")


@node
class Gauge(Node):
    """``gauge NAME = expr;``: a function of the deployment's state, averaged over time."""

    name: str
    expr: Expr


@node
class Claim(Node):
    """``claim NAME [given (G)]: every|some iteration of STAGE (E);`` or ``… at end (E);``
    (docs/claims.md).  ``kind`` is ``"every"``, ``"some"`` or ``"end"``; ``stage`` is the
    step stage (a constant member) a claim over iterations reads; ``given`` is read for
    each session after ``init``."""

    name: str
    kind: Literal["every", "some", "end"]
    expr: Expr
    given: Expr | None = None
    stage: StageRef | None = None
    #: where the claim is written (``file:line:col``), for its notes and messages
    site: str = field(default="", compare=False)


@node
class Program(Node):
    """A checked program.  ``attributes[slot]`` names each session attribute;
    the first nine are :data:`BUILTIN_ATTRIBUTES`.  ``constants`` are the
    folded ``let``s in source order.  ``session`` is the whole life of a
    session (the workload's ``session`` with the server spliced in, or the
    top-level ``session``); ``two_sided`` tells which form it came from."""

    pools: tuple[PoolDecl, ...]
    stages: tuple[StageDecl, ...]
    attributes: tuple[str, ...]
    observes: tuple[ObserveDecl, ...]
    session: Block
    init: Block = ()
    turn: Block | None = None  # None: no `turn` block
    arrival: Arrival = Arrival()
    trace: TraceDecl | None = None
    hidden: frozenset[int] = frozenset()
    run: RunSettings = RunSettings()
    constants: dict[str, float] = field(default_factory=dict)
    two_sided: bool = False
    path: str | None = None  # the program file, if it came from one
    block_count: int = 0  # statement blocks, for `serq check`'s summary
    handles: tuple[str, ...] = ()  # spawn handles, their own namespace; empty: the program never spawns
    gauges: tuple[Gauge, ...] = ()
    #: ``share maxmin|bottleneck``: how flows divide the shared stages; None without multi-stage runs
    share: str | None = None
    #: the shared stages (declaration indices): every ``ps`` stage some multi-stage run holds
    shared: tuple[int, ...] = ()
    #: the stages (declaration indices) whose online estimates (``est_*``, ``price``) some expression reads
    estimated: frozenset[int] = frozenset()
    #: the program's claims (docs/claims.md): read on every run, decided by ``serq prove``
    claims: tuple[Claim, ...] = ()

    def pool_index(self, name: str) -> int:
        return next(i for i, p in enumerate(self.pools) if p.name == name)

    def stage_index(self, name: str) -> int:
        return next(i for i, s in enumerate(self.stages) if s.name == name)

    def summary(self) -> str:
        """The one line ``serq check`` prints (semantics §10)."""
        return (
            f"OK: {len(self.pools)} pool(s), {len(self.stages)} stage(s), "
            f"{len(self.attributes)} attribute(s), {self.block_count} block(s)"
        )


def walk_blocks(block: Block):
    """Every statement of a block and of the blocks nested in it, depth first."""
    for stmt in block:
        yield stmt
        if isinstance(stmt, Hold):
            yield from walk_blocks(stmt.body)
        elif isinstance(stmt, Loop):
            yield from walk_blocks(stmt.body)
        elif isinstance(stmt, Branch):
            yield from walk_blocks(stmt.then)
            if stmt.orelse is not None:
                yield from walk_blocks(stmt.orelse)

"""What the figure draws of a session: the checked statement tree reduced to
the parts a reader follows — runs on stages, turns, the end, the holds and the
server around them, branches with their probabilities, and loops.

``set`` and ``observe`` take no time and hold nothing, so they are left out; a
branch left with nothing visible in either arm (``branch (known == prompt) {
observe ttft … }``) is left out with them.  Statements after ``end;`` or
after a ``loop`` (which only ``end;`` leaves, language §5.2) are never
reached and are not drawn.

A ``spawn`` and the ``join`` that waits for its children become a ``Span``:
the stretch of the sequence between them, with a ``Lane`` that sums up the
children (docs/draw.md, "Spawn and join").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal, Union

from .. import ir
from ..expr import NotConstant, draws, fold
from .scene import num, prob

# ---------------------------------------------------------------------------
# expressions as text


_PREC = {"||": 1, "&&": 2, "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3,
         "+": 4, "-": 4, "*": 5, "/": 5, "^": 7}


def ref_text(program: ir.Program, ref: ir.PoolRef | ir.StageRef) -> str:
    """``kv`` or ``kv[j]``."""
    if isinstance(ref, ir.PoolRef):
        name = program.pools[ref.pool].name
    else:
        name = program.stages[ref.stage].name
    if ref.index is None:
        return name
    return f"{name}[{expr_text(program, ref.index)}]"


def expr_text(program: ir.Program, e: ir.Expr, outer: int = 0) -> str:
    """Source-like text of an expression, with only the parentheses it needs
    (precedence as in language §6.1); constants appear as their folded numbers."""
    own, text = _expr(program, e)
    return f"({text})" if own < outer else text


def _expr(program: ir.Program, e: ir.Expr) -> tuple[int, str]:
    t = lambda x, p: expr_text(program, x, p)  # noqa: E731 - local shorthand
    if isinstance(e, ir.Num):
        return (8 if e.value >= 0 else 6), num(e.value)
    if isinstance(e, (ir.Attr, ir.Ctx)):
        return 8, e.name
    if isinstance(e, ir.Unary):
        return 6, f"{e.op}{t(e.x, 6)}"
    if isinstance(e, ir.Binary):
        p = _PREC.get(e.op, 4)
        if e.op == "^":
            return p, f"{t(e.a, 8)}^{t(e.b, 6)}"
        if p == 3:
            return p, f"{t(e.a, 4)} {e.op} {t(e.b, 4)}"
        return p, f"{t(e.a, p)} {e.op} {t(e.b, p + 1)}"
    if isinstance(e, ir.Cond):
        try:  # `law == 1 ? ~exp(1) : …` with `law` a constant: only one arm is ever taken
            return _expr(program, e.a if fold(e.c) != 0.0 else e.b)
        except NotConstant:
            pass
        if e.a == e.b and not draws(e.c):  # `residents > 1 ? 0 : 0`: either way the same
            return _expr(program, e.a)
        return 0, f"{t(e.c, 1)} ? {t(e.a, 0)} : {t(e.b, 0)}"
    if isinstance(e, ir.Call) and e.fn == "sum":  # an aggregate's terms: b0 + b1 + …
        return 4, " + ".join(t(x, 4 if k == 0 else 5) for k, x in enumerate(e.args))
    if isinstance(e, ir.Call):
        return 8, f"{e.fn}({', '.join(t(x, 0) for x in e.args)})"
    if isinstance(e, ir.Draw):
        return 6, f"~{e.dist}({', '.join(t(x, 0) for x in e.args)})"
    if isinstance(e, ir.Probe):
        chain = "".join(", " + t(x, 0) for x in e.args)  # cachedin(P, k1, n1, …)
        return 8, f"{e.fn}({ref_text(program, e.target)}{chain})"
    return 8, "?"


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------
# the flow tree


@dataclass
class Node:
    """One box in the flow: ``arrive``, ``run`` (on ``stage``), ``turn``,
    ``end``, ``cmd`` (grow, drop, release, load, choose), ``spawn`` or ``join``."""

    kind: Literal["arrive", "run", "turn", "end", "cmd", "spawn", "join"]
    lines: tuple[str, ...]
    stage: int | None = None
    stmt: ir.Spawn | ir.Join | None = None  # the statement of a `spawn` or `join` node


@dataclass
class Seq:
    items: list["Item"] = field(default_factory=list)


@dataclass
class Arm:
    label: str
    body: Seq


@dataclass
class Fork:
    """A ``branch``: the decision shows ``guard``; each arm its label.  The
    first arm is drawn on the spine."""

    guard: str
    arms: list[Arm]


@dataclass
class Cycle:
    """A ``loop``: the body, with a back edge from its end to its start."""

    body: Seq


@dataclass
class Box:
    """An enclosure: a ``hold`` (with its ``hold_id``) or a spliced ``server``."""

    kind: Literal["hold", "server"]
    label: str
    body: Seq
    hold_id: int | None = None


@dataclass
class Lane:
    """The children spawned into one handle, drawn as one box beside the flow:
    ``title`` (``kids × k``), what each child runs (``init · set … · session``:
    the session is the one the figure draws, not drawn again, since a session
    that spawns would recurse forever), and, when the lane has no merge in
    its segment, a note on where (or whether) the parent waits for it."""

    handle: str
    title: str
    runs: str
    note: str = ""


@dataclass
class Span:
    """A stretch of a sequence with a child lane below it: ``body`` runs on
    the spine from a ``spawn`` (its items ``forks``, every spawn into the lane's
    handle in the stretch) to the ``join`` that waits for them (``merge``), or
    just the spawns when the join is elsewhere or absent (``merge`` None).  With
    ``lane`` None, ``body`` is a lone ``join`` whose children were spawned
    elsewhere: a dashed stub from below, labelled with the handle, merges into it."""

    body: Seq
    lane: Lane | None
    forks: list[int]
    merge: int | None
    handle: str = ""


Item = Union[Node, Seq, Fork, Cycle, Box, Span]


def ends(item: Item) -> bool:
    """True when no path leaves ``item`` to the next statement."""
    if isinstance(item, Node):
        return item.kind == "end"
    if isinstance(item, Cycle):
        return True
    if isinstance(item, Seq):
        return any(ends(x) for x in item.items)
    if isinstance(item, Fork):
        return all(ends(a.body) for a in item.arms)
    return ends(item.body)  # Box, Span


# ---------------------------------------------------------------------------
# facts about the program the labels need


def attribute_definitions(program: ir.Program) -> dict[int, list[ir.Expr | None]]:
    """Every expression assigned to each attribute slot (``None``: a ``choose``)."""
    found: dict[int, list[ir.Expr | None]] = {}
    blocks = [program.init, program.turn or (), program.session]
    for block in blocks:
        for stmt in ir.walk_blocks(block):
            if isinstance(stmt, ir.Set):
                found.setdefault(stmt.slot, []).append(stmt.expr)
            elif isinstance(stmt, ir.Choose):
                found.setdefault(stmt.slot, []).append(None)
    return found


def chance(e: ir.Expr | None) -> ir.Expr | None:
    """The probability that ``e`` is 1, as an expression, when ``e`` is a
    Bernoulli draw, possibly chosen by a test (``sub ? ~bernoulli(pc) : 0``);
    folded to a ``Num`` when it is constant.  None for anything else."""
    if e is None:
        return None
    if isinstance(e, ir.Draw):
        if e.dist != "bernoulli" or len(e.args) != 1:
            return None
        p: ir.Expr = e.args[0]
    elif isinstance(e, ir.Num):
        if e.value not in (0.0, 1.0):
            return None
        p = e
    elif isinstance(e, ir.Cond):
        a, b = chance(e.a), chance(e.b)
        if a is None or b is None or draws(e.c):
            return None
        p = a if a == b else ir.Cond(e.c, a, b)
    else:
        return None
    try:
        return ir.Num(fold(p))
    except NotConstant:
        return p


def _complement(p: ir.Expr) -> ir.Expr:
    if isinstance(p, ir.Num):
        return ir.Num(1.0 - p.value)
    return ir.Binary("-", ir.Num(1.0), p)


def caching_pools(program: ir.Program, hold: ir.Hold) -> list[int]:
    """The pools a hold leaves a prefix cached in (semantics §2.6).

    Only a hold with ``cache (…)`` caches.  It keeps what a growing run (or
    ``load``) computed on a pool, or, when nothing in its body advances a
    position, the whole allocation of every pool; so ``hold reqs (1), kv (…)``
    with ``… growing kv`` caches in ``kv`` only."""
    if hold.cache is None:
        return []
    held = [p.ref.pool for p in hold.pools]
    advanced: set[int] = set()
    for stmt in ir.walk_blocks(hold.body):
        if isinstance(stmt, ir.Run) and stmt.growing is not None:
            advanced.add(stmt.growing.pool)
        elif isinstance(stmt, ir.Load):
            advanced.add(stmt.ref.pool)
    chosen = [p for p in held if p in advanced]
    return chosen or held


def all_holds(program: ir.Program) -> list[ir.Hold]:
    return [s for s in ir.walk_blocks(program.session) if isinstance(s, ir.Hold)]


def arrival_text(program: ir.Program) -> str:
    a = program.arrival
    if a.kind == "poisson":
        return f"arrive poisson({num(a.rate)})"
    if a.kind in ("closed", "batch"):
        return f"arrive {a.kind}({a.n})"
    if a.kind == "renewal" and a.gap is not None:
        return f"arrive renewal({clip(expr_text(program, a.gap), 24)})"
    if a.kind == "trace":
        return "arrive trace" if a.rate == 1 else f"arrive trace({num(a.rate)})"
    return "arrive none"


# ---------------------------------------------------------------------------
# building the tree


class _Builder:
    def __init__(self, program: ir.Program) -> None:
        self.program = program
        self.defs = attribute_definitions(program)

    def block(self, block: ir.Block) -> Seq:
        seq = Seq()
        i = 0
        while i < len(block):
            stmt = block[i]
            if isinstance(stmt, ir.ServerBegin):
                j, depth = i + 1, 1
                while j < len(block):
                    depth += isinstance(block[j], ir.ServerBegin) - isinstance(block[j], ir.ServerEnd)
                    if depth == 0:
                        break
                    j += 1
                seq.items.append(Box("server", "server", self.block(block[i + 1:j])))
                i = j + 1
            else:
                item = self.stmt(stmt)
                if item is not None:
                    seq.items.append(item)
                i += 1
            if seq.items and ends(seq.items[-1]):
                break
        if self.program.handles:
            seq.items = self.spans(seq.items)
        return seq

    # -- spawn and join: forks to child lanes, merges into joins ------------

    def spans(self, items: list[Item], keep: int | None = None) -> list[Item]:
        """``items`` with every ``spawn`` and ``join`` node wrapped in a ``Span``.

        A spawn whose handle has a join later in the same sequence opens a
        stretch up to that join; the stretch's lane takes every spawn into the
        handle on its way.  Stretches nest and never cross: a spawn inside a
        stretch whose join lies beyond it gets a lane of its own, noted as
        joined later, and that join a stub.  ``keep``: the handle whose spawns
        the caller's stretch collects, left as they are."""
        out: list[Item] = []
        i = 0
        while i < len(items):
            item = items[i]
            h = _handle(item)
            if h is None or h == keep:
                out.append(item)
                i += 1
                continue
            assert isinstance(item, Node) and item.stmt is not None
            if item.kind == "join":
                out.append(Span(Seq([item]), None, [], 0, self.program.handles[h]))
                i += 1
                continue
            j = next((k for k in range(i + 1, len(items)) if _handle(items[k]) == h and _is_join(items[k])), None)
            if j is None:
                out.append(Span(Seq([item]), self.lane([item], False), [0], None))
                i += 1
                continue
            body = [item] + self.spans(items[i + 1:j], keep=h) + [items[j]]
            forks = [k for k, x in enumerate(body) if _handle(x) == h and isinstance(x, Node) and x.kind == "spawn"]
            out.append(Span(Seq(body), self.lane([body[k] for k in forks], True), forks, len(body) - 1))
            i = j + 1
        return out

    def lane(self, spawns: list[Item], merged: bool) -> Lane:
        p = self.program
        stmts = [x.stmt for x in spawns if isinstance(x, Node) and isinstance(x.stmt, ir.Spawn)]
        name = p.handles[stmts[0].handle]
        counts = [expr_text(p, s.count, 5) if len(stmts) > 1 else expr_text(p, s.count) for s in stmts]
        title = f"{name} × {clip(' + '.join(counts), 24)}"
        texts = {self.sets_text(s) for s in stmts}
        sets = texts.pop() if len(texts) == 1 else "its spawn's sets"
        runs = " · ".join(x for x in ("each child: init", sets, "session") if x)
        note = ""
        if not merged:
            joined = any(isinstance(s, ir.Join) and s.handle == stmts[0].handle for s in ir.walk_blocks(p.session))
            note = f"waited for by a later join {name}" if joined else "never joined: the parent goes on"
        return Lane(name, title, runs, note)

    def sets_text(self, spawn: ir.Spawn) -> str:
        if not spawn.sets:
            return ""
        parts = [f"{self.program.attributes[s.slot]} = {expr_text(self.program, s.expr)}" for s in spawn.sets]
        return "set " + clip(", ".join(parts), 40)

    def stmt(self, stmt: ir.Stmt) -> Item | None:
        p = self.program
        if isinstance(stmt, ir.Run):
            work = clip(self.work_text(stmt.work), 30)
            lines = [", ".join(ref_text(p, r) for r in (stmt.stage, *stmt.also))]  # a flow: every stage it holds
            if stmt.mode or stmt.growing is not None:
                grow = f"growing {ref_text(p, stmt.growing)}" if stmt.growing is not None else ""
                lines.append(" · ".join(x for x in (stmt.mode or "", grow) if x))
            lines.append(work)
            return Node("run", tuple(lines), stmt.stage.stage)
        if isinstance(stmt, ir.Turn):
            return Node("turn", ("turn",))
        if isinstance(stmt, ir.End):
            return Node("end", ("end",))
        if isinstance(stmt, ir.Hold):
            return Box("hold", self.hold_label(stmt), self.block(stmt.body), stmt.id)
        if isinstance(stmt, ir.Loop):
            return Cycle(self.block(stmt.body))
        if isinstance(stmt, ir.Branch):
            return self.branch(stmt)
        if isinstance(stmt, (ir.Grow, ir.Load)):
            verb = "grow" if isinstance(stmt, ir.Grow) else "load"
            return Node("cmd", (f"{verb} {ref_text(p, stmt.ref)} ({clip(expr_text(p, stmt.amount), 18)})",))
        if isinstance(stmt, (ir.Drop, ir.Release)):
            verb = "drop" if isinstance(stmt, ir.Drop) else "release"
            return Node("cmd", (f"{verb} {ref_text(p, stmt.ref)}",))
        if isinstance(stmt, ir.Choose):
            count = clip(expr_text(p, stmt.count), 12)
            keys = clip("by " + ", ".join(expr_text(p, k) for k in stmt.keys), 34)  # a router's rule
            return Node("cmd", (f"choose {p.attributes[stmt.slot]} in {count}", keys))
        if isinstance(stmt, ir.Spawn):  # `_spans` gives it its fork to a child lane
            count = clip(expr_text(p, stmt.count), 12)
            return Node("spawn", (f"spawn ({count}) into {p.handles[stmt.handle]}",), stmt=stmt)
        if isinstance(stmt, ir.Join):  # and this its merge
            return Node("join", (f"join {p.handles[stmt.handle]}",), stmt=stmt)
        return None  # set, observe, and the markers handled by `block`

    def work_text(self, work: ir.Expr) -> str:
        """The work of a run; an attribute assigned in one place shows its
        definition too (``s = ~exp(1)``), so the law of a service is in sight."""
        text = expr_text(self.program, work)
        traced = self.program.trace is not None and isinstance(work, ir.Attr) and ir.NEW <= work.slot <= ir.MORE
        if isinstance(work, ir.Attr) and not traced:
            defs = self.defs.get(work.slot, [])
            if len(defs) == 1 and defs[0] is not None:
                return f"{text} = {expr_text(self.program, defs[0])}"
        return text

    def hold_label(self, hold: ir.Hold) -> str:
        p = self.program
        names = [ref_text(p, hp.ref) for hp in hold.pools]
        label = "hold " + ", ".join(names)
        if hold.cache is not None:
            caching = caching_pools(p, hold)
            held = [hp.ref.pool for hp in hold.pools]
            if caching == held:
                label += " · cache"
            else:
                label += " · cache " + ", ".join(p.pools[i].name for i in caching)
        if hold.lease is not None:
            label += f" · lease {ref_text(p, hold.lease.ref)}"
        return label

    def guard(self, e: ir.Expr) -> tuple[str, ir.Expr | None]:
        """The decision's text, and the probability that the guard is 1 as an
        expression (folded where it is constant), or None when it is no draw."""
        if isinstance(e, ir.Unary) and e.op == "!":
            text, p = self.guard(e.x)
            text = f"!{text}" if text.isidentifier() else f"!({text})"
            return text, None if p is None else _complement(p)
        if isinstance(e, ir.Attr):
            if self.program.trace is not None and ir.NEW <= e.slot <= ir.MORE:
                return e.name, None  # each `turn;` loads it from the trace (language §10.4)
            defs = self.defs.get(e.slot, [])
            chances = [chance(d) for d in defs]
            first = chances[0] if chances else None
            if first is not None and all(c == first for c in chances):
                return e.name, first
            return e.name, None
        p = chance(e)
        if isinstance(e, ir.Draw):
            return "with", p
        if p is not None and isinstance(p, ir.Num):
            return num(p.value), p
        return clip(expr_text(self.program, e), 24), p

    def branch(self, b: ir.Branch) -> Fork | None:
        then = self.block(b.then)
        orelse = self.block(b.orelse) if b.orelse is not None else Seq()
        if not then.items and not orelse.items:
            return None
        guard, p = self.guard(b.guard)
        if p is None:
            labels = ("yes", "no")
        elif isinstance(p, ir.Num):
            labels = (prob(p.value), prob(1.0 - p.value))
        else:
            labels = ("p = " + clip(expr_text(self.program, p), 24), "1 - p")
        arms = [Arm(labels[0], then), Arm(labels[1], orelse)]
        if ends(then) and not ends(orelse):
            arms.reverse()  # the arm that goes on stays on the spine; `{ end; }` turns off it
        return Fork(guard, arms)


def _is_join(item: Item) -> bool:
    return isinstance(item, Node) and item.kind == "join"


def _handle(item: Item) -> int | None:
    """The handle of a ``spawn`` or ``join`` node, else None."""
    if isinstance(item, Node) and item.stmt is not None:
        return item.stmt.handle
    return None


def build(program: ir.Program) -> Seq:
    """The session's flow from arrival to the end."""
    lines = [arrival_text(program)]
    if program.trace is not None:
        ordered = " ordered" if program.trace.ordered else ""
        lines.append(f"trace {os.path.basename(program.trace.path)}{ordered}")
    flow = _Builder(program).block(program.session)
    flow.items.insert(0, Node("arrive", tuple(lines)))
    if not ends(flow):
        flow.items.append(Node("end", ("end",)))  # falling off the block ends the session
    return flow

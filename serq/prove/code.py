"""The static side of the exact machine: the fragment's boundary, and the
program compiled once into what :class:`~serq.prove.machine.Machine` runs.

A session's life becomes a flat list of instructions with jumps (a ``loop``
is a jump back, a ``branch`` a conditional jump), so that where a session is
in its program is one integer, ``pc``: a machine is copied and compared by
value, which a Python generator (the simulator's session) cannot be.

For :meth:`Machine.key` the compiler also works out, per resting place of a
session (a ``hold`` it waits at, a ``run`` it waits on), which attributes the
rest of its program can still read (a backward liveness analysis), and which
attributes hold a time that is only ever compared with the clock
(``set t0 = now`` … ``now - t0``): those enter the key relative to ``now``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from .. import ir
from ..expr import walk
from .exact import Env, Fn, Q, Unsupported, compiled, number, refusal

# instruction opcodes: each instruction is a tuple whose first item is one of these
SET, OBS, TURN, END, HOLD, UNHOLD, RUN, BRANCH, JUMP, RETURN = range(10)

#: stage kinds of the fragment
STEP, DELAY = 0, 1


def _name(st: Any) -> str:
    return type(st).__name__.lower()


def check_fragment(p: ir.Program) -> None:
    """Raise :class:`Unsupported` naming the first construct of ``p`` outside
    the exact fragment (the module docstring of :mod:`serq.prove.machine`
    lists it).  The program's own arrival process is checked by the machine
    that would use it (a family supplies its own times)."""
    if p.trace is not None:
        raise Unsupported("a trace")
    if p.handles:
        raise Unsupported("`spawn`")
    if p.gauges:
        raise Unsupported("a gauge")
    if p.share is not None or p.shared:
        raise Unsupported("a flow over shared stages (`share`)")
    if p.estimated:
        raise Unsupported("an online estimate (`est_*`, `price`)")
    for pool in p.pools:
        if pool.size is not None:
            raise Unsupported("a pool array", pool.name)
        if pool.spill is not None:
            raise Unsupported("a spill", pool.name)
        if math.isnan(pool.cap) or pool.cap < 0:
            raise Unsupported("a capacity that is not a number ≥ 0", pool.name)
        if pool.block is not None and not (0 < pool.block < math.inf):
            raise Unsupported("a block that is not finite", pool.name)
        if pool.queue != "fifo":
            for k in pool.queue:
                _expr(k, f"pool `{pool.name}` queue key")
    for st in p.stages:
        if st.size is not None:
            raise Unsupported("a stage array", st.name)
        if st.kind in ("ps", "fifo"):
            raise Unsupported(f"a `{st.kind}` stage", st.name)
        if st.kind == "step":
            step = st.step
            assert step is not None
            for clause, e in (("budget", step.budget), ("chunk", step.chunk), ("cost", step.cost)):
                if clause == "budget" and isinstance(e, ir.Num) and e.value == math.inf:
                    continue  # no budget: unbounded
                _expr(e, st.sites.get(clause, st.name))
                if any(isinstance(x, ir.Attr) for x in walk(e)):
                    raise Unsupported(f"an attribute read in `{clause}`", st.sites.get(clause, st.name))
            if isinstance(step.serve, tuple):
                for k in step.serve:
                    _expr(k, st.name)
            only = getattr(step, "only", None)
            if only is not None:
                _expr(only, st.sites.get("only", st.name))
    if p.turn is not None:
        for s in p.turn:
            if not isinstance(s, (ir.Set, ir.Observe)):
                raise Unsupported(f"`{_name(s)}` in a turn block")
            why = refusal(s.expr)
            if why is not None:
                raise Unsupported(f"{why} in a turn block")
    for s in p.init:
        if not isinstance(s, (ir.Set, ir.Observe)):
            raise Unsupported(f"`{_name(s)}` in an init block")
        why = refusal(s.expr, draws=True)
        if why is not None:
            raise Unsupported(f"{why} in an init block")
    _block(p, p.session)


def _expr(e: ir.Expr, label: str = "") -> None:
    why = refusal(e)
    if why is not None:
        raise Unsupported(why, label)


def _block(p: ir.Program, block: ir.Block) -> None:
    for s in block:
        if isinstance(s, (ir.Set, ir.Observe)):
            _expr(s.expr)
        elif isinstance(s, (ir.Turn, ir.End, ir.ServerBegin, ir.ServerEnd)):
            pass
        elif isinstance(s, ir.Hold):
            if s.prefix:
                raise Unsupported("a `prefix` on a hold", s.label)
            if s.reuse is not None:
                raise Unsupported("`reuse` on a hold", s.label)
            if s.lease is not None:
                raise Unsupported("a `lease`", s.label)
            if s.cache is not None:
                raise Unsupported("a `cache` clause (the prefix cache)", s.label)
            for hp in s.pools:
                if hp.ref.index is not None:
                    raise Unsupported("a member of a pool array", s.label)
                _expr(hp.units, hp.label or s.label)
                if hp.reserve is not None:
                    _expr(hp.reserve, hp.reserve_label or s.label)
            _block(p, s.body)
        elif isinstance(s, ir.Run):
            if s.also:
                raise Unsupported("a flow over several stages", s.label)
            if s.stage.index is not None:
                raise Unsupported("a member of a stage array", s.label)
            if s.growing is not None and s.growing.index is not None:
                raise Unsupported("a member of a pool array", s.label)
            _expr(s.work, s.label)
        elif isinstance(s, ir.Branch):
            _expr(s.guard, s.label)
            _block(p, s.then)
            if s.orelse is not None:
                _block(p, s.orelse)
        elif isinstance(s, ir.Loop):
            _block(p, s.body)
        else:
            raise Unsupported(f"`{_name(s)}`", getattr(s, "label", ""))


def init_attrs(p: ir.Program, serial: int, time: Q,
               draw: Callable[[ir.Draw], Q] | None = None) -> tuple[Q, ...]:
    """A new session's whole attribute vector after ``init`` (semantics §1.4):
    every attribute 0, ``serial`` its number, then the ``init`` block's
    statements in order, read at ``now = time``; a draw is ``draw(e)``
    (None: a draw is :class:`Unsupported`)."""
    a: list[Q] = [0] * len(p.attributes)
    a[ir.SERIAL] = serial
    env = _DrawEnv(a, {"now": time}, draw)
    for s in p.init:
        if isinstance(s, ir.Set):
            a[s.slot] = compiled(s.expr)(env)
        elif isinstance(s, ir.Observe):
            compiled(s.expr)(env)  # (a draw in it takes its value; the sample is the explorer's to make)
        else:
            raise Unsupported(f"`{_name(s)}` in an init block")
    return tuple(a)


class _DrawEnv(Env):
    __slots__ = ("_draw",)

    def __init__(self, attrs: Any, ctx: dict[str, Q], draw: Callable[[ir.Draw], Q] | None) -> None:
        super().__init__(attrs, ctx)
        self._draw = draw

    def draw(self, e: ir.Draw) -> Q:
        if self._draw is None:
            return super().draw(e)
        return self._draw(e)


# ---------------------------------------------------------------------------
# the compiled program


class HoldSpec:
    """A ``hold``'s header: its pools (declaration indices), units and
    reserves, and the labels run-time errors quote."""

    __slots__ = ("id", "pools", "units", "reserve", "labels", "label")

    def __init__(self, st: ir.Hold) -> None:
        self.id = st.id
        self.label = st.label
        self.pools = tuple(hp.ref.pool for hp in st.pools)
        self.units = tuple(compiled(hp.units) for hp in st.pools)
        self.reserve = tuple(compiled(hp.reserve) if hp.reserve is not None else None for hp in st.pools)
        self.labels = tuple(hp.label or st.label for hp in st.pools)

    def __deepcopy__(self, memo: dict) -> "HoldSpec":
        return self


class PoolInfo:
    __slots__ = ("name", "cap", "block", "keys", "admit_via", "lifo", "engines")

    def __init__(self, decl: ir.PoolDecl) -> None:
        self.name = decl.name
        self.cap: Any = math.inf if decl.cap == math.inf else number(decl.cap)
        self.block = None if decl.block is None else number(decl.block)
        self.keys: tuple[Fn, ...] | None = None if decl.queue == "fifo" else tuple(compiled(k) for k in decl.queue)
        self.admit_via = decl.admit_via
        self.lifo = decl.preempt == "lifo"
        self.engines: list[int] = []  # step stages whose `memory` it is


class StageInfo:
    __slots__ = ("name", "kind", "budget", "chunk", "cost", "serve", "keys", "only", "memory", "admit_pools",
                 "sites", "default_order", "serve_totals", "budget_totals")

    def __init__(self, decl: ir.StageDecl) -> None:
        self.name = decl.name
        self.sites = decl.sites
        self.kind = STEP if decl.kind == "step" else DELAY
        self.admit_pools: list[int] = []
        self.budget: Fn | None = None
        self.chunk: Fn | None = None
        self.keys: tuple[Fn, ...] | None = None
        self.only: Fn | None = None
        self.memory = None
        self.serve = ""
        self.default_order = False
        #: whether the serve keys and `serve only` (the budget and chunk) read the stage's totals
        self.serve_totals = self.budget_totals = False
        if decl.step is not None:
            step = decl.step
            b = step.budget
            self.budget = None if isinstance(b, ir.Num) and b.value == math.inf else compiled(b)
            self.chunk = compiled(step.chunk)
            self.cost = compiled(step.cost)
            self.serve = step.serve if isinstance(step.serve, str) else "by"
            if isinstance(step.serve, tuple):
                self.keys = tuple(compiled(k) for k in step.serve)
            only = getattr(step, "only", None)
            self.only = None if only is None else compiled(only)
            self.memory = step.memory
            self.default_order = self.serve in ("admission", "exclusive_prefill", "exclusive_prefills")
            serve_exprs = [*(step.serve if isinstance(step.serve, tuple) else ()), *([only] if only is not None else [])]
            self.serve_totals = any(_reads_totals(e) for e in serve_exprs)
            self.budget_totals = _reads_totals(step.budget) or _reads_totals(step.chunk)


class Code:
    """A program compiled for the machine (shared, never changed, by every copy)."""

    def __init__(self, p: ir.Program) -> None:
        check_fragment(p)
        self.program = p
        self.n_attrs = len(p.attributes)
        self.pools = [PoolInfo(d) for d in p.pools]
        self.stages = [StageInfo(d) for d in p.stages]
        self.engines = [i for i, st in enumerate(self.stages) if st.kind == STEP]
        for i, pool in enumerate(self.pools):
            if pool.admit_via is not None:
                self.stages[pool.admit_via].admit_pools.append(i)
        for i, st in enumerate(self.stages):
            if st.memory is not None:
                self.pools[st.memory].engines.append(i)
        #: the pools a settling pass admits from (no ``admit via``), in declaration order
        self.passed = [i for i, pool in enumerate(self.pools) if pool.admit_via is None]
        self.instrs: list[tuple] = []
        self._reads: list[frozenset[int]] = []  # per instruction: the attributes it reads (resting there too)
        self._compile(p.session)
        self.instrs.append((RETURN,))
        self._reads.append(frozenset())
        exprs = self._all_exprs(p)
        self.time_slots = _time_slots(p, exprs)
        #: whether some expression reads the clock other than as ``now - t0`` of a time slot or
        #: ``set t0 = now``: then the key holds ``now`` itself (the future depends on the date)
        self.dated = _reads_date(exprs, self.time_slots)
        self.waited = any(isinstance(x, ir.Ctx) and x.name == "waited"
                          for pool in p.pools if pool.queue != "fifo" for k in pool.queue for x in walk(k))
        serve_exprs = [k for st in p.stages if st.step is not None and isinstance(st.step.serve, tuple)
                       for k in st.step.serve]
        serve_exprs += [x for st in p.stages if st.step is not None
                        for x in [getattr(st.step, "only", None)] if x is not None]
        #: whether an expression reads `admission` (then admission numbers enter the key as they are)
        self.admission_read = any(isinstance(x, ir.Ctx) and x.name == "admission"
                                  for e in serve_exprs for x in walk(e))
        #: whether `init` reads `serial` (then the next serial enters the key)
        self.init_serial = any(isinstance(x, ir.Attr) and x.slot == ir.SERIAL
                               for s in p.init if isinstance(s, (ir.Set, ir.Observe)) for x in walk(s.expr))
        self.live = self._liveness()

    def __deepcopy__(self, memo: dict) -> "Code":
        return self  # shared by every copy of a machine: never changed

    # -- compiling the session -----------------------------------------------------------

    def _emit(self, ins: tuple, reads: frozenset[int] = frozenset()) -> int:
        self.instrs.append(ins)
        self._reads.append(reads)
        return len(self.instrs) - 1

    def _compile(self, block: ir.Block) -> None:
        p = self.program
        for s in block:
            if isinstance(s, ir.Set):
                self._emit((SET, s.slot, compiled(s.expr)), _attrs(s.expr))
            elif isinstance(s, ir.Observe):
                self._emit((OBS, s.obs, compiled(s.expr)), _attrs(s.expr))
            elif isinstance(s, ir.Turn):
                self._emit((TURN,), frozenset({ir.TURN_NO}))
                self._compile(p.turn or ())  # the turn block in place (sets and observes, no draw)
            elif isinstance(s, ir.End):
                self._emit((END,))
            elif isinstance(s, (ir.ServerBegin, ir.ServerEnd)):
                continue  # the client clock only (§8.5): nothing the fragment's records read
            elif isinstance(s, ir.Hold):
                spec = HoldSpec(s)
                reads: set[int] = set()
                for hp in s.pools:
                    reads |= _attrs(hp.units)
                    if hp.reserve is not None:
                        reads |= _attrs(hp.reserve)
                first = p.pools[s.pools[0].ref.pool]
                if first.queue != "fifo":
                    for k in first.queue:
                        reads |= _attrs(k)
                self._emit((HOLD, spec), frozenset(reads))
                self._compile(s.body)
                self._emit((UNHOLD, spec))
            elif isinstance(s, ir.Run):
                st = p.stages[s.stage.stage]
                reads = set(_attrs(s.work))
                if st.step is not None:
                    if isinstance(st.step.serve, tuple):
                        for k in st.step.serve:
                            reads |= _attrs(k)
                    only = getattr(st.step, "only", None)
                    if only is not None:
                        reads |= _attrs(only)
                growing = -1 if s.growing is None else s.growing.pool
                self._emit((RUN, s.stage.stage, compiled(s.work), s.mode == "prefill", growing, s.label),
                           frozenset(reads))
            elif isinstance(s, ir.Branch):
                at = self._emit((BRANCH,), _attrs(s.guard))
                self._compile(s.then)
                if s.orelse:
                    jump = self._emit((JUMP,))
                    self.instrs[at] = (BRANCH, compiled(s.guard), len(self.instrs), s.label)
                    self._compile(s.orelse)
                    self.instrs[jump] = (JUMP, len(self.instrs))
                else:
                    self.instrs[at] = (BRANCH, compiled(s.guard), len(self.instrs), s.label)
            elif isinstance(s, ir.Loop):
                top = len(self.instrs)
                self._compile(s.body)
                self._emit((JUMP, top))
            else:  # pragma: no cover - check_fragment refused it
                raise Unsupported(f"`{_name(s)}`")

    def _liveness(self) -> list[tuple[int, ...]]:
        """Per instruction, the attributes the session may still read when it
        rests there (waits at that ``hold`` or on that ``run``) or is about to
        execute it: sorted slots."""
        n = len(self.instrs)
        live: list[frozenset[int]] = [frozenset()] * n
        changed = True
        while changed:
            changed = False
            for pc in range(n - 1, -1, -1):
                ins = self.instrs[pc]
                op = ins[0]
                if op in (END, RETURN):
                    out: frozenset[int] = frozenset()
                elif op == JUMP:
                    out = live[ins[1]]
                elif op == BRANCH:
                    out = live[pc + 1] | live[ins[2]]
                else:
                    out = live[pc + 1]
                if op == SET:
                    out = out - {ins[1]}
                new = out | self._reads[pc]
                if new != live[pc]:
                    live[pc] = new
                    changed = True
        return [tuple(sorted(s)) for s in live]

    def _all_exprs(self, p: ir.Program) -> list[ir.Expr]:
        out: list[ir.Expr] = []
        for s in ir.walk_blocks(p.session):
            if isinstance(s, (ir.Set, ir.Observe)):
                out.append(s.expr)
            elif isinstance(s, ir.Hold):
                for hp in s.pools:
                    out.append(hp.units)
                    if hp.reserve is not None:
                        out.append(hp.reserve)
            elif isinstance(s, ir.Run):
                out.append(s.work)
            elif isinstance(s, ir.Branch):
                out.append(s.guard)
        out += [s.expr for s in (*p.init, *(p.turn or ())) if isinstance(s, (ir.Set, ir.Observe))]
        for pool in p.pools:
            if pool.queue != "fifo":
                out += list(pool.queue)
        for st in p.stages:
            if st.step is not None:
                out += [st.step.budget, st.step.chunk, st.step.cost]
                if isinstance(st.step.serve, tuple):
                    out += list(st.step.serve)
                only = getattr(st.step, "only", None)
                if only is not None:
                    out.append(only)
        return out


_TOTALS = frozenset({"residents", "decoders", "kv_decode", "kv_prefill"})


def _reads_totals(e: ir.Expr) -> bool:
    return any(isinstance(x, ir.Ctx) and x.name in _TOTALS for x in walk(e))


def _attrs(e: ir.Expr) -> frozenset[int]:
    return frozenset(x.slot for x in walk(e) if isinstance(x, ir.Attr))


def _is_now(e: ir.Expr) -> bool:
    return isinstance(e, ir.Ctx) and e.name == "now"


def _time_slots(p: ir.Program, exprs: list[ir.Expr]) -> frozenset[int]:
    """Attributes that only ever hold the clock and are only read as
    ``now - x``: the future depends on them only through ``now - x``."""
    sets = [s for s in (*p.init, *(p.turn or ()), *ir.walk_blocks(p.session)) if isinstance(s, ir.Set)]
    slots = {s.slot for s in sets if _is_now(s.expr)}
    slots -= {s.slot for s in sets if not _is_now(s.expr)}
    slots -= {ir.SERIAL, ir.TURN_NO, ir.CACHED, ir.COMPUTED}
    for e in exprs:
        for x in walk(e):
            if isinstance(x, ir.Attr) and x.slot in slots and not _under_age(e, x):
                slots.discard(x.slot)
    return frozenset(slots)


def _under_age(e: ir.Expr, target: ir.Attr) -> bool:
    """Whether every occurrence of ``target`` (by identity) in ``e`` is the
    ``x`` of a ``now - x``."""
    def visit(n: ir.Expr, parent: ir.Expr | None) -> bool:
        if n is target:
            return isinstance(parent, ir.Binary) and parent.op == "-" and parent.b is n and _is_now(parent.a)
        from ..expr import children

        return all(visit(c, n) for c in children(n))
    return visit(e, None)


def _reads_date(exprs: list[ir.Expr], time_slots: frozenset[int]) -> bool:
    from ..expr import children

    def visit(n: ir.Expr, parent: ir.Expr | None) -> bool:
        if _is_now(n):
            if isinstance(parent, ir.Binary) and parent.op == "-" and parent.a is n and \
                    isinstance(parent.b, ir.Attr) and parent.b.slot in time_slots:
                return False
            return True
        return any(visit(c, n) for c in children(n))

    for e in exprs:
        if _is_now(e):
            continue  # `set t0 = now` (only time slots are set so, or the slot is not one and is read as a date)
        if visit(e, None):
            return True
    return False

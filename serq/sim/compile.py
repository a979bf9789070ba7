"""Statements compiled once into Python: the session's life as one generator
function, ``init`` and ``turn`` as plain functions.

A session is a SimPy process running the generator this module writes from
the IR (``serq.ir``): ``loop`` becomes ``while True``, ``branch`` an ``if``
on a guard that must be exactly 0 or 1, a ``run`` a ``yield`` of the event
its stage returns, and a ``hold`` a ``with`` block around its body, inside a
retry loop that a preemption of that hold re-enters (semantics §4.5: the
session unwinds to just before the ``hold``).  Nothing walks the IR while the
simulation runs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

from simpy.exceptions import Interrupt

from .. import expr, ir
from ..errors import SerqError, SerqRuntimeError, Site
from ..expr import Frame, code_of, compile_expr, source
from .pool import REJECTED, HoldSpec

if TYPE_CHECKING:
    from .simulator import Simulator


#: Loop iterations a session may run without waiting before the run is
#: declared not to settle (semantics §1.3: a million statements).
SPIN_LIMIT = 1_000_000


def bad_guard(value: float, label: str) -> None:
    shown = f"{value:g}" if value == value else "NaN"
    raise SerqRuntimeError(f"{label}: the guard is {shown}, not 0 or 1; a draw is written `branch with (p)`", at=label)


def member(i: float, n: int, label: str) -> int:
    """A run-time array index: a whole number in 0 … n−1."""
    if not (i == i and float(i).is_integer() and 0 <= i < n):
        shown = f"{i:g}" if i == i else "NaN"
        raise SerqRuntimeError(f"index `{label}` is {shown}: a member of an array of {n} is 0 to {n - 1}")
    return int(i)


class Members(dict):
    """An array's members by index, for compiled code: ``members[i]`` is one
    dictionary lookup (a float index equal to a whole number finds its member,
    as ``0.0 == 0`` hash alike); any other index raises :func:`member`'s error."""

    __slots__ = ("label",)

    def __init__(self, members: list, label: str) -> None:
        super().__init__(enumerate(members))
        self.label = label

    def __missing__(self, key: Any) -> Any:
        return self[member(key, len(self), self.label)]  # (raises: a whole number in range is a key)


def pool_source(sim: "Simulator", ref: ir.PoolRef, f: Frame) -> str:
    """Compiled code's name for a pool, or for the member an index picks."""
    decl = sim.program.pools[ref.pool]
    return _member_source(sim.pools[ref.pool], decl.name, ref.index, f, "P", decl.members)


def stage_source(sim: "Simulator", ref: ir.StageRef, f: Frame) -> str:
    """Compiled code's name for a stage, or for the member an index picks."""
    decl = sim.program.stages[ref.stage]
    return _member_source(sim.stages[ref.stage], decl.name, ref.index, f, "S", decl.members)


def _member_source(members: list, name: str, index: ir.Expr | None, f: Frame, hint: str, size: int) -> str:
    if len(members) < size:  # a stage's own expression reading itself or a stage declared below it:
        # the family is not built yet, so its list is read when the expression is (language §17)
        family = f.bind(members, hint + "L")
        if index is None:
            return f"{family}[0]"
        return f"{family}[{f.bind(member, 'M')}({source(index, f)}, {size}, {name + '[…]'!r})]"
    if index is None:
        return f.bind(members[0], hint)
    if isinstance(index, ir.Num) and 0 <= index.value < len(members) and float(index.value).is_integer():
        return f.bind(members[int(index.value)], hint)  # a member named by a number (a gauge's, say): bound once
    by_index = f.ns.setdefault("__members__", {})
    table = by_index.get(id(members))
    if table is None:
        table = by_index[id(members)] = Members(members, name + "[…]")
    return f"{f.bind(table, hint + 'A')}[{source(index, f)}]"


class SessionCode:
    """The compiled session: ``init(s)``, ``turn(s)`` (or None) and ``body(s)``."""

    def __init__(self, init: Callable[[Any], None], turn: Callable[[Any], None] | None, body: Callable[[Any], Any], text: str) -> None:
        self.init = init
        self.turn = turn
        self.body = body
        self.text = text  # the generated source, for debugging


class Compiler:
    """Writes the Python source of a program's session and compiles it in a
    namespace bound to one simulator's pools and stages."""

    def __init__(self, sim: "Simulator") -> None:
        self.sim = sim
        ns = sim.ns
        ns.update(_bad_guard=bad_guard, _member=member, _Interrupt=Interrupt, _REJECTED=REJECTED,
                  _sim=sim, _env=sim.env)
        self.ns = ns
        self.lines: list[str] = []
        self.holds: dict[int, HoldSpec] = {}

    # -- frames ----------------------------------------------------------------

    def frame(self, *, attrs: str = "a", ctx: str = "s", session: str | None = "s", stream: str = "s.srng") -> Frame:
        return Frame(self.ns, attrs=attrs, ctx=ctx, session=session, stream=stream,
                     resolve_pool=self._pool, resolve_stage=self._stage)

    def _pool(self, ref: ir.PoolRef, f: Frame) -> str:
        return pool_source(self.sim, ref, f)

    def _stage(self, ref: ir.StageRef, f: Frame) -> str:
        return stage_source(self.sim, ref, f)

    def fn(self, e: ir.Expr, **frame: Any) -> Callable[[Any], float]:
        """An expression as ``lambda c: …`` (attributes of ``c.a``)."""
        kw = dict(attrs="c.a", ctx="c", session="c", stream="c.srng")
        kw.update(frame)
        return compile_expr(e, self.frame(**kw))

    # -- the program -------------------------------------------------------------

    def compile(self, program: ir.Program) -> SessionCode:
        text = "\n".join([
            self._function("_init", program.init, gen=False, stream="_wr"),
            self._function("_turn", program.turn or (), gen=False, stream="_wr"),
            self._function("_body", program.session, gen=True, stream="_sr"),
        ])
        try:
            code = code_of(text, "<serq session>", "exec")
        except (SyntaxError, RecursionError):  # e.g. more than 20 statically nested blocks
            raise SerqError("the program's blocks are nested too deeply to run") from None
        exec(code, self.ns)  # noqa: S102 - our own generated code
        return SessionCode(self.ns["_init"], self.ns["_turn"] if program.turn is not None else None,
                           self.ns["_body"], text)

    def _function(self, name: str, block: ir.Block, *, gen: bool, stream: str) -> str:
        self.lines = [f"def {name}(s):", "    a = s.a", "    _n = 0"]
        self._stream = stream
        self._block(block, 1)
        if gen:
            self.lines += ["    return", "    yield"]  # a generator even if it never waits
        if stream == "_sr" and any(re.search(r"\b_sr\b", line) for line in self.lines):
            # the session's own stream, once (it never changes); not built when nothing draws
            self.lines.insert(2, "    _sr = s.srng")
        if stream == "_wr" and any(re.search(r"\b_wr\b", line) for line in self.lines):
            # the workload stream, once a call (``turn`` re-keys it before the block runs)
            self.lines.insert(2, "    _wr = s.wrng")
        return "\n".join(self.lines) + "\n"

    def _woke(self, depth: int) -> None:
        """After a wait: count the wake-up (§1.3 guard) and restart the statement
        count.  The first wake-up at an instant is counted inline; later ones
        call ``Session.woke``, which checks the limit."""
        self._emit(depth, "if s.woke_at != _env.now:")
        self._emit(depth + 1, "s.woke_at = _env.now")
        self._emit(depth + 1, "s.woke_n = 1")
        self._emit(depth, "else:")
        self._emit(depth + 1, "s.woke()")
        self._emit(depth, "_n = 0")

    def _emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def _x(self, e: ir.Expr) -> str:
        return source(e, self.frame(stream=self._stream))

    def _block(self, block: ir.Block, depth: int) -> None:
        if not block:
            self._emit(depth, "pass")
        i = 0
        while i < len(block):
            j = i
            while j < len(block) and isinstance(block[j], ir.Observe):
                j += 1
            if j - i >= 2:
                self._observes(block[i:j], depth)  # type: ignore[arg-type]
                i = j
            elif i + 1 < len(block) and _chainable(block[i], block[i + 1]):
                self._prefill_then_decode(block[i], block[i + 1], depth)  # type: ignore[arg-type]
                i += 2
            else:
                self._stmt(block[i], depth)
                i += 1

    def _prefill_then_decode(self, pre: ir.Run, dec: ir.Run, d: int) -> None:
        """A prefill and the decode right after it on the same step stage
        (:func:`_chainable`): the decode's tokens read before the prefill (they
        read nothing that changes while it runs), and the engine submits the
        decode itself at the prefill's end (``StepEngine.submit_then``), so the
        session wakes once; when it did not (``s.chained`` false), the session
        submits it as the statement alone would."""
        stage = self._stagex(pre.stage)
        growing = self._poolx(pre.growing) if pre.growing is not None else "None"
        emit = self._emit
        emit(d, f"_then = {self._x(dec.work)}")
        emit(d, f"yield {stage}.submit_then(s, {self._x(pre.work)}, 'prefill', {growing}, "
                f"{self._label(pre.label)}, _then)")
        self._woke(d)
        emit(d, "if not s.chained:")
        emit(d + 1, f"yield {stage}.submit(s, _then, 'decode', {growing}, {self._label(dec.label)})")
        self._woke(d + 1)

    def _observes(self, obs: list[ir.Observe], d: int) -> None:
        """Consecutive ``observe``s: their values in order, then one test of
        warm-up (it cannot end between them: nothing waits) and the samples."""
        for k, st in enumerate(obs):
            self._emit(d, f"_v{k} = {self._x(st.expr)}")
        self._emit(d, "if _sim.stats_on:")
        self._emit(d + 1, "_w, _u = _env.now, int(a[1])")
        for k, st in enumerate(obs):
            samples = self._bind(self.sim.samples[st.obs], "O")
            self._emit(d + 1, f"{samples}.append((_w, s.serial, _u, _v{k}))")

    def _stmt(self, st: ir.Stmt, d: int) -> None:
        emit = self._emit
        if isinstance(st, ir.Set):
            emit(d, f"a[{st.slot}] = {self._x(st.expr)}")
        elif isinstance(st, ir.Observe):
            # recorded after warm-up only (§8.1): (time, session, turn, value)
            # (the value is computed before warm-up too: a draw in it takes its place in the stream)
            samples = self._bind(self.sim.samples[st.obs], "O")
            emit(d, f"_v = {self._x(st.expr)}")
            emit(d, "if _sim.stats_on:")
            emit(d + 1, f"{samples}.append((_env.now, s.serial, int(a[1]), _v))")
        elif isinstance(st, ir.Turn):
            emit(d, "s.do_turn()")
        elif isinstance(st, ir.End):
            emit(d, "s.ending = True")
            emit(d, "return")
        elif isinstance(st, ir.ServerBegin):
            emit(d, "s.server_begin()")
        elif isinstance(st, ir.ServerEnd):
            emit(d, "s.server_end()")
        elif isinstance(st, ir.Loop):
            emit(d, "while True:")
            # the guard of §1.3: a session that never waits does not settle
            emit(d + 1, "_n += 1")
            emit(d + 1, f"if _n > {SPIN_LIMIT}:")
            emit(d + 2, "s.spinning()")
            self._block(st.body, d + 1)
        elif isinstance(st, ir.Branch):
            emit(d, f"_g = {self._x(st.guard)}")
            emit(d, "if _g == 1.0:")
            self._block(st.then, d + 1)
            emit(d, "elif _g == 0.0:")
            self._block(st.orelse or (), d + 1)
            emit(d, "else:")
            emit(d + 1, f"_bad_guard(_g, {self._label(st.label)})")
        elif isinstance(st, ir.Choose):
            keys = ", ".join(self._bind(self.fn(k), "K") for k in st.keys)
            emit(d, f"a[{st.slot}] = s.choose({self._x(st.count)}, ({keys},), {st.slot}, {self._label(st.label)})")
            emit(d, "_n += s.candidates")  # (a loop's guard counts the keys it read: 4 096 a pass, a million passes)
        elif isinstance(st, ir.Run) and st.also:  # one flow on several shared stages (docs/pd.md, "Flows")
            stages = "".join(f"{self._stagex(r)}, " for r in (st.stage, *st.also))
            emit(d, f"yield {self._bind(self.sim.flows, 'G')}.flow(({stages}), s, {self._x(st.work)}, {self._label(st.label)})")
            self._woke(d)
        elif isinstance(st, ir.Run):
            growing = self._poolx(st.growing) if st.growing is not None else "None"
            emit(d, f"yield {self._stagex(st.stage)}.submit(s, {self._x(st.work)}, {st.mode!r}, {growing}, {self._label(st.label)})")
            self._woke(d)
        elif isinstance(st, ir.Spawn):
            values = "".join(f"{self._x(x.expr)}, " for x in st.sets)
            slots = "".join(f"{x.slot}, " for x in st.sets)
            emit(d, f"s.spawn_kids({st.handle}, {self._x(st.count)}, ({values}), ({slots}), {self._label(st.label)})")
        elif isinstance(st, ir.Join):
            emit(d, f"_ev = s.join({st.handle})")
            emit(d, "if _ev is not None:")
            emit(d + 1, "yield _ev")
            self._woke(d + 1)
        elif isinstance(st, ir.Hold):
            self._hold(st, d)
        elif isinstance(st, ir.Grow):
            emit(d, f"_ev = s.grow({self._poolx(st.ref)}, {self._x(st.amount)}, {self._label(st.label)})")
            emit(d, "if _ev is not None:")
            emit(d + 1, "yield _ev")
            self._woke(d + 1)
        elif isinstance(st, ir.Drop):
            emit(d, f"s.drop({self._poolx(st.ref)})")
        elif isinstance(st, ir.Release):
            emit(d, f"s.release({self._poolx(st.ref)})")
        elif isinstance(st, ir.Load):
            emit(d, f"s.load({self._poolx(st.ref)}, {self._x(st.amount)}, {self._label(st.label)})")
        else:
            raise SerqError(f"`{type(st).__name__.lower()}` is not supported by the simulator yet")

    def _bind(self, obj: Any, hint: str) -> str:
        return self.frame().bind(obj, hint)

    def _label(self, label: str) -> str:
        """A statement's label in the generated code: a :class:`Site` bound (it keeps
        its location for run-time errors; a literal would be its text alone)."""
        return self._bind(label, "L") if isinstance(label, Site) else repr(label)

    def _poolx(self, ref: ir.PoolRef) -> str:
        return self._pool(ref, self.frame(stream=self._stream))

    def _stagex(self, ref: ir.StageRef) -> str:
        return self._stage(ref, self.frame(stream=self._stream))

    def _hold(self, st: ir.Hold, d: int) -> None:
        spec = self.hold_spec(st)
        name = self._bind(spec, "H")
        h = f"_h{st.id}"
        emit = self._emit
        emit(d, "while True:")
        emit(d + 1, "try:")
        emit(d + 2, f"with s.hold({name}) as {h}:")
        emit(d + 3, f"if {h}.state == _REJECTED:")
        emit(d + 4, "s.ending = True")
        emit(d + 4, "return")
        emit(d + 3, f"yield {h}")
        self._woke(d + 3)
        self._block(st.body, d + 3)
        emit(d + 2, "break")
        emit(d + 1, "except _Interrupt as _e:")
        emit(d + 2, f"if not s.preempted_at(_e, {name}):")
        emit(d + 3, "raise")

    def hold_spec(self, st: ir.Hold) -> HoldSpec:
        """The run-time form of a ``hold``: pool resolution and header callables."""
        refs = [hp.ref for hp in st.pools]
        resolvers = [self._resolver(r) for r in refs]

        def pools(s: Any) -> list:
            return [r(s) for r in resolvers]

        spec = HoldSpec(
            st.id,
            st.label,
            pools,
            [self.fn(hp.units) for hp in st.pools],
            [self.fn(hp.reserve) if hp.reserve is not None else None for hp in st.pools],
            self.fn(st.reuse) if st.reuse is not None else None,
            self.fn(st.cache) if st.cache is not None else None,
            [(self.fn(g.key), self.fn(g.length), g.label) for g in st.prefix],
            self._lease(st),
            [(hp.label, hp.reserve_label) for hp in st.pools],
        )
        self.holds[st.id] = spec
        if st.prefix:  # the pools it names with a `block` share a trie (docs/simulator.md, "Shared prefix cache")
            for hp in st.pools:
                if self.sim.program.pools[hp.ref.pool].block is not None:
                    for pool in self.sim.pools[hp.ref.pool]:
                        if pool.shared is None:
                            pool.make_shared(pool.cache.keys, self.sim.eviction_stream)
        return spec

    def _lease(self, st: ir.Hold) -> tuple[int, Callable[[Any], float], str] | None:
        if st.lease is None:
            return None
        k = next(i for i, hp in enumerate(st.pools) if hp.ref == st.lease.ref)
        label = st.lease.label or f"`lease {self.sim.program.pools[st.lease.ref.pool].name} (…)`"
        return k, self.fn(st.lease.time), label

    def _resolver(self, ref: ir.PoolRef) -> Callable[[Any], Any]:
        members = self.sim.pools[ref.pool]
        if ref.index is None:
            pool = members[0]
            return lambda s: pool
        index = self.fn(ref.index)
        table = Members(members, f"{self.sim.program.pools[ref.pool].name}[…]")
        return lambda s: table[index(s)]


#: What the decode of a chained pair may read (:func:`_chainable`): numbers, the session's
#: attributes and pure functions of them (each total: none raises) — nothing that moves while
#: the session waits.
_STILL = (ir.Num, ir.Attr, ir.Unary, ir.Binary, ir.Cond, ir.Call)


def _chainable(a: ir.Stmt, b: ir.Stmt) -> bool:
    """Whether ``a`` is a prefill and ``b`` the decode after it that the
    engine may submit itself (``StepEngine.submit_then``): one step stage and
    one pool grown, neither picked by an expression (it would be evaluated
    once, not twice), and the decode's tokens read only numbers, the
    session's attributes and pure functions of them; nothing changes those
    while the session waits for its prefill (a preemption throws it out of
    the wait, and the prefill's decode is not submitted)."""
    if not (isinstance(a, ir.Run) and isinstance(b, ir.Run) and a.mode == "prefill" and b.mode == "decode"):
        return False
    if a.also or b.also or a.stage != b.stage or a.stage.index is not None or a.growing != b.growing:
        return False
    if a.growing is not None and a.growing.index is not None:
        return False
    return all(isinstance(x, _STILL) for x in expr.walk(b.work))

"""A session: its attributes, random streams, holds and client clock, and the
statements its compiled body calls into (semantics §1.4, §2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from simpy.events import Event
from simpy.exceptions import Interrupt

from .. import ir
from ..errors import SerqRuntimeError
from . import choose as _choose
from . import choose_index as _choose_index
from . import rng
from .pool import GRANTED, HoldRequest, HoldSpec, bad_amount

_Keyed = rng.KeyedStream
#: A session's holds before its first: empty, shared, never written (``Holds.enqueue`` makes a list).
_NO_HOLDS: tuple = ()
_INF = float("inf")
_SERIAL = ir.SERIAL

#: Wake-ups of one session at one instant before the run is declared not to settle (§1.3).
READY_LIMIT = 1000

if TYPE_CHECKING:
    from .pool import Pool
    from .simulator import Simulator


class Preemption:
    """The cause a preempted session's process is interrupted with: the hold
    attempt that lost its pools (the new one, already queued at the front, is
    the session's ``requeued``)."""

    __slots__ = ("old",)

    def __init__(self, old: HoldRequest) -> None:
        self.old = old


class Task:
    """A root and its descendants (docs/subagents.md, "Task statistics"),
    kept only in a program that spawns: the sessions of the tree not yet
    ended (the root counts itself), how many it has had and its greatest
    depth, whether one of them was marked stuck at a pool, and the root's
    ``turn_no`` when it ended (the stamp of its ``task_time`` sample)."""

    __slots__ = ("root", "start", "left", "sessions", "depth", "stuck", "turn")

    def __init__(self, root: int, start: float) -> None:
        self.root = root
        self.start = start
        self.left = 1
        self.sessions = 1
        self.depth = 0.0
        self.stuck = False
        self.turn = 0.0


class Session:
    """One session.  ``a`` is its attribute list (slots of ``Program.attributes``)."""

    __slots__ = (
        "sim", "serial", "a", "_srng", "_wrng", "proc", "holds", "job", "queued_at", "ending", "ended",
        "adm_seq", "preempt_pos", "stuck", "requeued", "turns", "trace", "trace_pos",
        "sent", "first_tok", "last_tok", "n_after", "stall", "resumed", "woke_at", "woke_n", "rkey",
        "up", "handle", "n_kids", "waits", "task", "leases", "tok_stage", "candidates", "chained",
    )

    def __init__(self, sim: "Simulator", serial: int, keys: tuple[int, int, int] | None = None) -> None:
        self.sim = sim
        self.serial = serial
        a = self.a = [0.0] * sim.n_attrs
        a[_SERIAL] = float(serial)
        # the keys of (serial,), (serial, 0, SESSION) and (serial, 0, WORKLOAD), mixed in blocks
        self.rkey, own, work = sim.session_keys.get(serial) if keys is None else keys
        # the session tree (docs/subagents.md): its parent and the parent's handle it was spawned into,
        # how many children it has spawned, and per handle [children outstanding, the join's event]
        self.up: Session | None = None
        self.handle = -1
        self.n_kids = 0
        self.waits: dict[int, list] | None = None
        self.task: Task | None = None  # its tree's record, in a program that spawns
        self._srng: Any = own  # the key until the stream is first asked for (most never are)
        self._wrng: Any = work  # the key until the workload stream is first asked for
        self.proc: Any = None
        # granted or waiting attempts, outermost first (a list from the first; none: shared, empty)
        self.holds: list[HoldRequest] = _NO_HOLDS  # type: ignore[assignment]
        self.job: tuple[Any, Any] | None = None  # (stage, job) it runs on
        self.queued_at: float | None = None  # waiting in a pool queue since
        self.ending = False
        self.ended = False
        self.adm_seq = -1  # order of its latest admission (vLLM's `running` order)
        self.preempt_pos: dict[Any, float] | None = None  # per pool, from the first preemption
        self.stuck = False
        self.requeued: HoldRequest | None = None
        self.turns = 0  # the interpreter's own count: re-keys the workload stream
        self.trace: tuple | None = None  # the trace session it replays
        self.trace_pos = 0
        # client clock of the current turn (§8.5)
        self.sent = -1.0
        self.first_tok: float | None = None
        self.last_tok = 0.0
        self.n_after = 0
        self.resumed = False  # preempted since its last prefill ended
        self.stall: Any = None  # a stalled growth: (pool, request, k, units, event or None)
        self.woke_at = -1.0  # the instant of its latest wake-ups, and how many there were
        self.woke_n = 0
        self.candidates = 0  # the last `choose`'s: the loop guard counts them
        #: the engine submitted the decode after a prefill itself (StepEngine.submit_then)
        self.chained = False
        self.leases: list[HoldRequest] | None = None  # its leased allocations, oldest first
        self.tok_stage: Any = None  # the engine whose prefill gave the turn's first token

    @property
    def wrng(self) -> rng.Stream:
        """The workload stream (``init`` and ``turn`` blocks), key (serial, turn, WORKLOAD)."""
        r = self._wrng
        if r.__class__ is int:
            r = self._wrng = _Keyed(r)
        return r  # type: ignore[no-any-return]

    @property
    def srng(self) -> rng.Stream:
        """The stream of the session's own statements, key (serial, 0, SESSION)."""
        r = self._srng
        if r.__class__ is int:
            r = self._srng = _Keyed(r)
        return r  # type: ignore[no-any-return]

    # -- workload ----------------------------------------------------------------

    def do_turn(self) -> None:
        """``turn;``: count it, re-key the workload stream, load the next trace
        turn, run the ``turn`` block (§1.4, §7.4)."""
        sim = self.sim
        a = self.a
        a[ir.TURN_NO] += 1.0
        if sim.stats_on:
            sim.turns += 1
        self.turns += 1
        self._wrng = rng.Stream(self.rkey, self.turns, rng.WORKLOAD)  # = key (root, serial, turn, WORKLOAD)
        if self.trace is not None:
            rows = self.trace
            if self.trace_pos < len(rows):
                t = rows[self.trace_pos]
                self.trace_pos += 1
                a[ir.NEW], a[ir.OUT], a[ir.THINK], a[ir.FORCED] = t.new, t.out, t.think, t.forced
                a[ir.MORE] = 1.0 if self.trace_pos < len(rows) else 0.0
            else:
                a[ir.MORE] = 0.0
        if sim.code.turn is not None:
            sim.code.turn(self)

    def choose(self, count: float, keys: tuple[Callable[[Any], float], ...], slot: int, label: str) -> float:
        """``choose j in n by (keys)``: the index with the smallest keys, ties to the smallest."""
        if not count <= ir.MAX_MEMBERS:  # (NaN too)
            shown = f"{count:,.0f}" if count < float("inf") else f"{count:g}" if count == count else "NaN"
            raise SerqRuntimeError(f"{label} has {shown} candidates: at most {ir.MAX_MEMBERS:,}", at=label)
        n = int(count) if count > 0 else 0
        self.candidates = n
        sim = self.sim
        indexed = sim.choose_index.get(id(label))
        if indexed is not None and indexed[0] is label:  # the keys kept per candidate
            if _choose_index.CHECK:
                return self._checked(indexed[1], n, keys, slot, label)
            got = indexed[1].choose(self, n, keys, slot)
            if got is not None:
                return got
        return _scan(self, n, keys, slot, label)

    def _checked(self, index: Any, n: int, keys: tuple[Callable[[Any], float], ...], slot: int,
                 label: str) -> float:
        """The index's choice, checked against the loop's (tests: ``choose_index.CHECK``)."""
        g = self.srng
        s0 = g._s
        want = _scan(self, n, keys, slot, label)
        after = g._s
        g._s = s0
        got = index.choose(self, n, keys, slot)
        if got is None:
            g._s = after
            return want
        assert (got, g._s) == (want, after), f"{label}: the index chose {got}, the loop {want}"
        return got

    # -- subagents (docs/subagents.md) -------------------------------------------------

    def spawn_kids(self, handle: int, count: float, values: tuple[float, ...], slots: tuple[int, ...],
                   label: str) -> None:
        """``spawn (count) into handle { set … }``: the values were evaluated in this session."""
        if not (0.0 <= count < _INF and count == int(count)):  # NaN and ±inf fail the first test
            shown = f"{count:g}" if count == count else "NaN"
            raise SerqRuntimeError(f"{label}: the count is {shown}, not a non-negative whole number", at=label)
        n = int(count)
        if n == 0:
            return
        waits = self.waits
        if waits is None:
            waits = self.waits = {}
        w = waits.get(handle)
        if w is None:
            w = waits[handle] = [0, None]
        w[0] += n
        sim = self.sim
        for _ in range(n):
            sim.population.spawn_child(self, handle, values, slots)

    def kid_ended(self, handle: int) -> None:
        w = self.waits[handle]  # type: ignore[index]
        w[0] -= 1
        if w[0] == 0 and w[1] is not None:
            ev, w[1] = w[1], None
            ev.succeed()

    def join(self, handle: int) -> Event | None:
        """``join handle;``: None when no child spawned into it is outstanding."""
        waits = self.waits
        w = waits.get(handle) if waits is not None else None
        if w is None or w[0] == 0:
            return None
        ev = w[1] = Event(self.sim.env)
        return ev

    # -- the guards of §1.3 ------------------------------------------------------------

    def woke(self) -> None:
        """Called each time the session resumes after a wait: more than 1 000
        wake-ups at one instant means the run does not settle."""
        now = self.sim.env.now
        if now != self.woke_at:
            self.woke_at = now
            self.woke_n = 0
        self.woke_n += 1
        if self.woke_n > READY_LIMIT:
            raise SerqRuntimeError(
                f"the run does not settle at time {now:g}: session {self.serial} became ready more than "
                f"{READY_LIMIT} times at that instant")

    def spinning(self) -> None:
        raise SerqRuntimeError(
            f"the run does not settle at time {self.sim.env.now:g}: session {self.serial} ran a loop "
            "a million times without waiting (each candidate of a `choose` in it counts as a pass)")

    # -- the client clock (§8.5) -------------------------------------------------------

    def server_begin(self) -> None:
        self.sent = self.sim.env.now
        self.first_tok = None
        self.tok_stage = None
        self.n_after = 0
        self.resumed = False

    def server_end(self) -> None:
        sim = self.sim
        if sim.stats_on:
            now = sim.env.now
            sim.population.client_record(self, now)

    def prefill_done(self, now: float, stage: Any) -> None:
        """A prefill ended: the turn's first token, or after a preemption the
        next token of a turn that already had its first (§4.8).  A prefill on
        another engine before any later token replaces the first: the earlier
        was a remote prefill, whose token the client never sees (docs/pd.md)."""
        if self.resumed and self.first_tok is not None:
            stage.gap(now - self.last_tok)
            self.n_after += 1
        elif self.first_tok is None or (self.n_after == 0 and self.tok_stage is not None
                                         and stage is not self.tok_stage):
            self.first_tok = now
            self.tok_stage = stage
        self.last_tok = now
        self.resumed = False

    # -- holds -----------------------------------------------------------------------

    def hold(self, spec: HoldSpec) -> HoldRequest:
        """Join the queue of the hold's first pool (or pick up the attempt a
        preemption already queued); a request that can never fit is rejected."""
        req = self.requeued
        if req is not None and req.spec is spec:
            self.requeued = None
            return req
        req = HoldRequest(self, spec, spec.pools(self))
        self.sim.holds.enqueue(req)
        return req

    def forget_hold(self, req: HoldRequest) -> None:
        if req in self.holds:
            self.holds.remove(req)

    def preempted_at(self, exc: Interrupt, spec: HoldSpec) -> bool:
        """Whether an interrupt is the preemption of this hold (then the retry
        loop re-enters it); otherwise it unwinds further out."""
        cause = exc.cause
        return isinstance(cause, Preemption) and cause.old.spec is spec

    def innermost(self, pool: "Pool") -> tuple[HoldRequest, int] | None:
        for req in reversed(self.holds):
            if req.state == GRANTED:
                k = req.index_of(pool)
                if k >= 0:
                    return req, k
        return None

    def held_in(self, pool: "Pool") -> float:
        """Units of ``pool`` held by all of this session's holds."""
        total = 0.0
        for req in self.holds:
            if req.state == GRANTED:
                pools = req.pools
                n = len(pools)
                if n == 1 or n == 2:  # (the usual holds: one pool, or a slot and memory) unrolled, in order
                    if pools[0] is pool and req.held[0]:
                        total += req.alloc[0]
                    if n == 2 and pools[1] is pool and req.held[1]:
                        total += req.alloc[1]
                    continue
                held = req.held
                for k, p in enumerate(pools):
                    if p is pool and held[k]:
                        total += req.alloc[k]
        return total

    def grow(self, pool: "Pool", amount: float, label: str) -> Event | None:
        """``grow P (d)``: None when done; an event to wait on when stalled.
        A preemption of this session's own hold unwinds it at once."""
        if not amount >= 0.0:
            raise bad_amount(label, amount)
        found = self.innermost(pool)
        if found is None:
            raise SerqRuntimeError(f"{label}: `grow {pool.label}` outside a hold of `{pool.label}`", at=label)
        req, k = found
        outcome = self.sim.holds.grow(self, req, k, amount)
        if outcome is True:
            return None
        if isinstance(outcome, Preemption):
            raise Interrupt(outcome)
        return outcome  # the event a retried growth triggers

    def release(self, pool: "Pool") -> None:
        """``release P``: the innermost hold on P gives its allocation back now;
        with none, the oldest lease on P ends; with neither, nothing (a hold
        re-executed after a preemption reaches the statement again)."""
        holds = self.sim.holds
        found = self.innermost(pool)
        if found is not None:
            req, k = found
            holds.release_part(req, k)
            if self.preempt_pos:
                self.preempt_pos.pop(pool, None)
        elif self.leases:
            for req in self.leases:
                if req.pools[req.spec.lease[0]] is pool:  # type: ignore[index]
                    holds.end_lease(req)
                    break
        holds.try_admit_all()

    def load(self, pool: "Pool", amount: float, label: str) -> None:
        """``load Q (n)``: the innermost hold's position on Q advances by n tokens,
        which its allocation must cover; they count as computed from now on."""
        if not 0.0 <= amount < _INF:
            raise bad_amount(label, amount)
        found = self.innermost(pool)
        if found is None:
            raise SerqRuntimeError(f"{label}: the session holds nothing of `{pool.label}` here (it was released)", at=label)
        req, k = found
        pos = req.pos[k]
        if pos + amount > req.alloc[k] + 1e-9:
            raise SerqRuntimeError(
                f"{label}: the hold has {req.alloc[k]:g} allocated and {pos:g} computed; a load must fit the "
                "allocation (grow first)", at=label)
        req.pos[k] = pos + amount
        req.grown = True

    def drop(self, pool: "Pool") -> None:
        pool.cache.take(self.serial)
        pool.record()


def _scan(s: Any, n: int, keys: tuple[Callable[[Any], float], ...], slot: int, label: str) -> float:
    """:meth:`choose`, candidate by candidate."""
    planned = s.sim.choose_plans.get(id(label))
    if planned is not None and planned[0] is label:  # the tie-break drawn only where read
        return _choose.choose(s, n, keys, slot, planned[1])
    best_j, best = 0.0, None
    for j in range(n):
        s.a[slot] = float(j)
        k = tuple(f(s) for f in keys)
        if best is None or k < best:
            best_j, best = float(j), k
    return best_j

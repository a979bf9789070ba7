"""The exact reference semantics: a state machine that runs a fragment of a
checked program (``serq.ir.Program``) over integers and fractions.

It is the simulator's semantics (serq/sim: ``simulator.py``, ``kernel.py``,
``session.py``, ``holds.py``, ``pool.py``, ``stages/step.py``) on the
fragment, event for event, ties included, with no float in its arithmetic:

* **time** is an exact rational; events are ordered by (time, the order they
  were scheduled in), as SimPy orders them by (time, event id);
* **an instant settles** as the simulator's ``settle`` does (semantics §1.3):
  the ready sessions run in the order they became ready, then a pass over the
  pools without ``admit via`` admits (in declaration order), again while that
  readied anyone; only when no other event is due at this instant does every
  idle step stage with work start an iteration, in declaration order;
* **an iteration** (``StepEngine.start_iteration``) hands the budget out in
  serving order, admits waiting requests through ``admit via`` with the budget
  left (the admitted session runs at once, until it waits: its job joins this
  iteration if its place in the residents is not behind the planning cursor),
  grows ``growing`` holds, and lasts ``cost``;
* **a hold** queues at its first pool when the session reaches it (its units
  are read then to reject a hold that can never fit, and again at every
  attempt); a completed hold gives back its units and retries admissions at
  once; ``end`` gives every hold back without retrying (the next pass does).

**The fragment** (:func:`check_fragment` refuses the rest with
:class:`Unsupported`): constants; attributes; ``step`` stages (``budget``,
``chunk``, ``cost`` over the iteration's variables, ``serve admission``,
``serve decode first``, ``serve by (keys)``, ``serve exclusive prefill``,
``serve only (P)``, ``memory``) and ``delay`` stages; pools with ``cap``,
``block``, ``queue fifo`` or ``queue by (keys)`` (keys may read ``waited``),
``admit via``, ``preempt none`` (a growth that does not fit stalls until a
pass finds room) — under ``preempt lifo`` a growth that would preempt is
:class:`Unsupported` at that moment; statements ``set``, ``observe``,
``turn`` (a turn block without draws), ``end``, ``hold`` (units and reserve;
no ``prefix``, ``reuse``, ``lease``, ``cache``), ``run`` (prefill or decode,
``growing``, on step stages; plain on delay stages), ``branch``, ``loop``;
the server's begin and end are no-ops.  Probes: ``used free holders queued``
of a pool, ``queue busy work budget_left`` of a stage.  Arrivals: the
program's own constant ``renewal(gap)`` (bounded by ``run { arrivals N; }``
unless ``unbounded``), ``batch(N)``, or no ``arrive``; or exact times given
by the caller.  Out: ``ps`` and ``fifo`` stages, flows and ``share``,
spills, the prefix cache, traces, the program's own ``poisson`` and
``closed`` arrivals, ``spawn``/``join``, ``choose``, ``grow``/``drop``/
``release``/``load``, gauges, estimates, arrays, draws outside ``init``,
``sqrt``/``exp``/``ln``, fractional powers, a division by zero.

**Stepping.**  :meth:`Machine.step` handles the next event (one at a time,
with the settling after it) and returns what happened, in order: the
iterations that started (:class:`Iteration`), the ``observe`` samples
(:class:`Observed`) and the sessions that ended (:class:`Ended`).  When the
next event is an arrival, ``step`` returns ``[NeedSession(serial, time)]``
and the machine pauses (the next arrival is already scheduled); the caller
gives the session's attribute vector after ``init`` with :meth:`supply` (or
:meth:`supply_init`), and the next ``step`` runs it and the settling.  A
``batch(N)`` asks for its N sessions one by one at time 0, then runs them
together, as the simulator does.  Times given to the constructor are handled
as a trace replay's: the first is scheduled at the start, each next one when
the previous arrives.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction
from heapq import heappop, heappush
from typing import Any, Callable, Hashable, Iterable

from .. import ir
from ..errors import SerqRuntimeError
from .code import BRANCH, END, HOLD, JUMP, OBS, RETURN, RUN, SET, STEP, TURN, UNHOLD, Code, check_fragment, init_attrs
from .engine import Engines
from .exact import Env, Q, Unsupported, add, compiled, norm, sub
from .holds import Holds, bad_amount
from .parts import (ARRIVAL, DELAY_END, GRANTED, ITER_END, Ended, Engine, Iteration, Job, NeedSession, Observed,
                    Pool, Record, Req, Session)

__all__ = ["Machine", "Iteration", "NeedSession", "Ended", "Observed", "Record", "check_fragment", "init_attrs",
           "Unsupported"]

#: jumps a session may take without waiting before the run is declared not to settle (§1.3)
SPIN_LIMIT = 1_000_000
_INF = float("inf")


class _MEnv(Env):
    """The machine's expression environment: probes read the machine."""

    __slots__ = ("m",)

    def __init__(self, m: "Machine") -> None:
        super().__init__([], {"now": 0})
        self.m = m

    def probe(self, fn: str, target_kind: str, index: int) -> Q:
        return self.m.probe(fn, target_kind, index)


class Machine(Holds, Engines):
    """One path of a program in the exact semantics (see the module docstring)."""

    __slots__ = ()

    def __init__(self, p: ir.Program, arrivals: Iterable[Q] | None = None, *, unbounded: bool = False) -> None:
        self._code = code = Code(p)
        self.now: Q = 0
        self.done = False
        self.sessions: dict[int, Session] = {}  # live sessions by serial, in arrival order
        self.next_serial = 0
        self.arrived = 0
        self._adm = 0
        self._seq = 0
        self._heap: list[tuple] = []
        self._ready: deque[Session] = deque()
        self._pools = [Pool() for _ in code.pools]
        self._engines: list[Engine | None] = [Engine(i) if st.kind == STEP else None
                                               for i, st in enumerate(code.stages)]
        self._djobs: list[dict[Job, None]] = [{} for _ in code.stages]
        self._stalled = 0
        self._env = _MEnv(self)
        self._ctx = self._env.ctx
        self._out: list[Record] = []
        self._paused = False
        self._attrs: tuple | None = None
        self._announce: NeedSession | None = None
        self._batch = 0
        self._times: list[Q] | None = None
        self._ti = 0
        self._gap: Q | None = None
        self._left: int | None = None  # own arrivals still to schedule (None: no bound)
        self.on_iteration = None
        if arrivals is not None:
            self._times = sorted(norm(Fraction(t)) for t in arrivals)
            if self._times:
                if self._times[0] < 0:
                    raise ValueError("arrival times must be ≥ 0")
                self._push(self._times[0], ARRIVAL, None)
                self._ti = 1
        else:
            self._own_arrivals(p, unbounded)
        self.done = not self._heap and not self._paused

    def _own_arrivals(self, p: ir.Program, unbounded: bool) -> None:
        arr = p.arrival
        if arr.kind == "none":
            return
        if arr.kind == "batch":
            if arr.n >= 1:
                self._batch = arr.n
                self._paused = True
                self._announce = NeedSession(0, 0)  # type: ignore[arg-type]
            return
        if arr.kind == "renewal":
            assert arr.gap is not None
            try:
                gap = compiled(arr.gap)(Env())
            except Unsupported as err:
                raise Unsupported(f"a renewal gap that is not constant ({err.construct})") from None
            if not gap > 0:
                raise SerqRuntimeError(f"`arrive renewal(…)`: the interarrival time is {gap}, not a positive time")
            self._gap = gap
            limit = None if unbounded else p.run.arrivals
            self._left = None if limit is None else limit - 1
            self._push(gap, ARRIVAL, None)
            return
        what = {"poisson": "the program's own `poisson` arrivals (give arrival times)",
                "closed": "a closed population (`closed`)", "trace": "a trace's arrivals"}
        raise Unsupported(what.get(arr.kind, f"`{arr.kind}` arrivals"))

    # -- the interface --------------------------------------------------------------------

    def supply(self, attrs: tuple[Q, ...]) -> None:
        """Answer a :class:`NeedSession`: the session's whole attribute vector after ``init``."""
        if not self._paused or self._announce is not None:
            raise RuntimeError("supply() answers a NeedSession, and none is pending")
        if len(attrs) != self._code.n_attrs:
            raise ValueError(f"a session has {self._code.n_attrs} attributes, not {len(attrs)}")
        self._attrs = tuple(norm(Fraction(x)) if not isinstance(x, int) else x for x in attrs)

    def supply_init(self, draw: Callable[[ir.Draw], Q] | None = None) -> tuple[Q, ...]:
        """:meth:`supply` the attributes the program's ``init`` gives the pending
        session (:func:`init_attrs`); they are returned."""
        a = init_attrs(self._code.program, self.next_serial, self.now, draw)
        self.supply(a)
        return a

    def step(self) -> list[Record]:
        """Handle the next event and settle the instant (see the module docstring)."""
        out = self._out = []
        if self._paused:
            if self._announce is not None:
                rec, self._announce = self._announce, None
                return [rec]
            attrs = self._attrs
            if attrs is None:
                raise RuntimeError("the machine waits for supply()")
            self._attrs = None
            self._paused = False
            self._spawn(attrs)
            if self._batch:  # a batch: every session is made before any runs
                self._batch -= 1
                if self._batch:
                    return self._pause()
            self._settle()
            self.done = not self._heap
            return out
        heap = self._heap
        if not heap:
            self.done = True
            return out
        t, _seq, kind, payload = heappop(heap)
        self.now = t
        self._ctx["now"] = t
        if kind == ARRIVAL:
            self._schedule_arrival()  # (Open.arrive: the next timer before the session)
            return self._pause()
        if kind == ITER_END:
            self._iter_end(self._engines[payload])  # type: ignore[arg-type]
        else:
            self._delay_end(payload)
        self._settle()
        self.done = not heap
        return out

    def next_time(self) -> Q | None:
        """When the next event happens (None: no event is pending); while paused, now."""
        if self._paused:
            return self.now
        return self._heap[0][0] if self._heap else None

    def copy(self) -> "Machine":
        """An independent copy (the program's compiled form is shared)."""
        new = Machine.__new__(Machine)
        new._code = self._code
        for name in ("now", "done", "next_serial", "arrived", "_adm", "_seq", "_stalled", "_paused", "_attrs",
                     "_announce", "_batch", "_times", "_ti", "_gap", "_left", "on_iteration"):
            setattr(new, name, getattr(self, name))  # (immutable values; `_times` is never changed)
        sessions: dict[int, Session] = {}
        smap: dict[int, Session] = {}
        rmap: dict[int, Req] = {}
        for serial, s in self.sessions.items():
            c = Session(serial, list(s.a))
            c.pc, c.adm = s.pc, s.adm
            for r in s.holds:
                q = Req.__new__(Req)
                q.s, q.spec, q.alloc, q.pos, q.held = c, r.spec, list(r.alloc), list(r.pos), list(r.held)
                q.state, q.joined, q.grown = r.state, r.joined, r.grown
                c.holds.append(q)
                rmap[id(r)] = q
            sessions[serial] = smap[id(s)] = c
        jmap: dict[int, Job] = {}

        def job(j: Job) -> Job:
            got = jmap.get(id(j))
            if got is None:
                got = jmap[id(j)] = Job.__new__(Job)
                got.s, got.work, got.prefill = smap[id(j.s)], j.work, j.prefill
                got.hold = None if j.hold is None else rmap[id(j.hold)]
                got.k, got.done, got.stage, got.started = j.k, j.done, j.stage, j.started
            return got

        for serial, s in self.sessions.items():
            c = sessions[serial]
            if s.job is not None:
                c.job = job(s.job)
            if s.stall is not None:
                pidx, r, k, units = s.stall
                c.stall = (pidx, rmap[id(r)], k, units)
        new.sessions = sessions
        new._heap = [(t, e, kind, job(x) if kind == DELAY_END else x) for t, e, kind, x in self._heap]
        new._ready = deque(smap[id(s)] for s in self._ready)
        pools: list[Pool] = []
        for p in self._pools:
            cp = Pool()
            cp.used = p.used
            cp.holders = [rmap[id(r)] for r in p.holders]
            cp.queue = [rmap[id(r)] for r in p.queue]
            cp.growers = [smap[id(s)] for s in p.growers]
            pools.append(cp)
        new._pools = pools
        engines: list[Engine | None] = []
        for eng in self._engines:
            if eng is None:
                engines.append(None)
                continue
            ce = Engine(eng.index)
            ce.residents = [job(j) for j in eng.residents]
            ce.assign = [(job(j), t) for j, t in eng.assign]
            ce.iterating, ce.served, ce.cursor, ce.planning = eng.iterating, eng.served, eng.cursor, eng.planning
            ce.left, ce.admitting = eng.left, eng.admitting
            engines.append(ce)
        new._engines = engines
        new._djobs = [{job(j): None for j in d} for d in self._djobs]
        new._env = _MEnv(new)
        new._ctx = new._env.ctx
        new._ctx.update(self._ctx)
        new._out = []
        return new

    def probe(self, fn: str, kind: str, index: int) -> Q:
        """``fn`` of pool or stage ``index`` now: ``used free holders queued`` of a
        pool, ``queue busy work budget_left`` of a stage."""
        if kind == "pool":
            pool = self._pools[index]
            if fn == "used":
                return pool.used
            if fn == "free":
                cap = self._code.pools[index].cap
                if cap == _INF:
                    raise Unsupported("`free` of a pool without a cap")
                return sub(cap, pool.used)
            if fn == "holders":
                return len(pool.holders)
            if fn == "queued":
                return len(pool.queue)
            raise Unsupported(f"`{fn}`")
        info = self._code.stages[index]
        eng = self._engines[index]
        if eng is not None:
            if fn == "queue":
                return len(eng.residents)
            if fn == "busy":
                return len(eng.assign) if eng.iterating else 0
            if fn == "work":
                total: Q = 0
                for j in eng.residents:
                    total = add(total, j.work)
                return total
            if fn == "budget_left":
                v = self._budget_left(eng) if eng.admitting is None else eng.admitting
                if v == _INF:
                    raise Unsupported("`budget_left` of a stage without a budget", info.name)
                return v  # type: ignore[no-any-return]
            raise Unsupported(f"`{fn}`")
        jobs = self._djobs[index]
        if fn in ("queue", "busy"):
            return len(jobs)
        if fn == "work":
            total = 0
            for j in jobs:
                left = sub(j.work, sub(self.now, j.started))
                if left > 0:
                    total = add(total, left)
            return total
        if fn == "budget_left":
            raise SerqRuntimeError(f"`budget_left({info.name})`: stage `{info.name}` is not a step stage")
        raise Unsupported(f"`{fn}`")

    # -- events ---------------------------------------------------------------------------

    def _push(self, t: Q, kind: int, payload: Any) -> None:
        self._seq += 1
        heappush(self._heap, (t, self._seq, kind, payload))

    def _pause(self) -> list[Record]:
        self._paused = True
        return [NeedSession(self.next_serial, self.now)]  # type: ignore[arg-type]

    def _schedule_arrival(self) -> None:
        times = self._times
        if times is not None:
            if self._ti < len(times):
                self._push(times[self._ti], ARRIVAL, None)
                self._ti += 1
            return
        if self._gap is not None and (self._left is None or self._left > 0):
            self._push(add(self.now, self._gap), ARRIVAL, None)
            if self._left is not None:
                self._left -= 1

    def _spawn(self, attrs: tuple) -> None:
        s = Session(self.next_serial, list(attrs))
        s.a[ir.SERIAL] = s.serial  # (the machine's count, whatever was supplied)
        self.next_serial += 1
        self.sessions[s.serial] = s
        self.arrived += 1
        # an open arrival's session runs at once (no other is ready); a batch's at the first settle
        self._ready.append(s)

    def _settle(self) -> None:
        """§1.3: ready sessions, pool passes until quiet, then iterations."""
        ready = self._ready
        while True:
            self._run_ready()
            if self._pools:
                self._try_admit_all()
                if ready:
                    continue
            break
        heap = self._heap
        if heap and heap[0][0] <= self.now:
            return  # another event at this instant: the iterations wait for it
        for e in self._code.engines:
            eng = self._engines[e]
            assert eng is not None
            if not eng.iterating and self._has_work(eng):
                self._start_iteration(eng)

    def _run_ready(self) -> None:
        ready = self._ready
        while ready:
            self._run(ready.popleft())

    # -- a session's statements ---------------------------------------------------------------

    def _run(self, s: Session) -> None:
        """Run ``s`` from where it waited until it waits again or ends."""
        code = self._code
        instrs = code.instrs
        env = self._env
        a = s.a
        pc = s.pc + 1
        spins = 0
        while True:
            ins = instrs[pc]
            op = ins[0]
            if op == SET:
                env.attrs = a
                a[ins[1]] = ins[2](env)
                pc += 1
            elif op == RUN:
                env.attrs = a
                work = ins[2](env)
                if work < 0:
                    raise bad_amount(ins[5], work)
                s.pc = pc
                if work == 0:  # completes at once: ready again, behind the ready ones
                    self._ready.append(s)
                elif code.stages[ins[1]].kind == STEP:
                    self._submit(s, ins[1], work, ins[3], ins[4], ins[5])
                else:
                    job = s.job = Job(s, work, False, ins[1], self.now)
                    self._djobs[ins[1]][job] = None
                    self._push(add(self.now, work), DELAY_END, job)
                return
            elif op == HOLD:
                s.pc = pc
                if self._enqueue(s, ins[1]):
                    return
                self._unwind(s)  # never fits: rejected, the session ends (as `end`)
                self._end(s)
                return
            elif op == UNHOLD:
                req = s.holds.pop()
                self._release(req)
                a[ir.COMPUTED] = 0
                self._try_admit_all()  # a hold that completes retries admissions at once
                pc += 1
            elif op == BRANCH:
                env.attrs = a
                g = ins[1](env)
                if g == 1:
                    pc += 1
                elif g == 0:
                    pc = ins[2]
                else:
                    raise SerqRuntimeError(f"{ins[3]}: the guard is {g}, not 0 or 1", at=ins[3])
            elif op == JUMP:
                pc = ins[1]
                spins += 1
                if spins > SPIN_LIMIT:
                    raise SerqRuntimeError(f"the run does not settle at time {self.now}: session {s.serial} "
                                           "ran a loop a million times without waiting")
            elif op == OBS:
                env.attrs = a
                self._out.append(Observed(ins[1], s.serial, self.now, ins[2](env)))  # type: ignore[arg-type]
                pc += 1
            elif op == TURN:
                a[ir.TURN_NO] = a[ir.TURN_NO] + 1
                pc += 1
            elif op == END:
                s.pc = pc
                self._unwind(s)  # every hold given back, no admission retried (the next pass does)
                self._end(s)
                return
            else:
                assert op == RETURN
                s.pc = pc
                self._end(s)
                return

    def _end(self, s: Session) -> None:
        del self.sessions[s.serial]
        self._out.append(Ended(s.serial, self.now))  # type: ignore[arg-type]

    def _unwind(self, s: Session) -> None:
        for req in reversed(s.holds):
            if req.state == GRANTED:
                self._release(req)
        s.holds.clear()

    # -- the key ----------------------------------------------------------------------------

    def key(self) -> Hashable:
        """The exact state up to a shift of time and of serial numbers (see :mod:`.state`)."""
        from .state import state_key

        return state_key(self)

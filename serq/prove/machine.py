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

import copy as _copy
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from heapq import heappop, heappush
from typing import Any, Callable, Hashable, Iterable, Union

from .. import ir
from ..errors import SerqRuntimeError
from .code import (BRANCH, DELAY, END, HOLD, JUMP, OBS, RETURN, RUN, SET, STEP, TURN, UNHOLD, Code,
                   HoldSpec, check_fragment, init_attrs)
from .exact import Env, Q, Unsupported, add, ceil, compiled, div, mul, norm, sub

__all__ = ["Machine", "Iteration", "NeedSession", "Ended", "Observed", "Record", "check_fragment", "init_attrs",
           "Unsupported"]

WAITING, GRANTED, RELEASED = 0, 1, 2
ARRIVAL, ITER_END, DELAY_END = 0, 1, 2
#: jumps a session may take without waiting before the run is declared not to settle (§1.3)
SPIN_LIMIT = 1_000_000
_INF = float("inf")


# ---------------------------------------------------------------------------
# what a step reports


@dataclass(frozen=True, slots=True)
class Iteration:
    """An iteration of step stage ``stage`` started at ``now`` and lasts ``cost``:
    the step log's columns (``tokens`` … ``residents``, the residents scheduled
    or not), ``demand`` (what the residents could take with an unlimited
    budget: a prefilling resident its remaining prompt, a decoding one 1),
    ``served`` (tokens of the stage's earlier iterations) and ``arrived``
    (sessions arrived so far).  Numbers are exact (an ``int`` when whole)."""

    stage: int
    now: Fraction
    cost: Fraction
    tokens: Fraction
    decoders: Fraction
    prefilled: Fraction
    kv_decode: Fraction
    kv_prefill: Fraction
    attention: Fraction
    residents: Fraction
    demand: Fraction
    served: Fraction
    arrived: Fraction


@dataclass(frozen=True, slots=True)
class NeedSession:
    """The machine is paused: session ``serial`` arrives at ``time``; its
    attributes after ``init`` are wanted (:meth:`Machine.supply`)."""

    serial: int
    time: Fraction


@dataclass(frozen=True, slots=True)
class Ended:
    """Session ``serial`` ended at ``time``."""

    serial: int
    time: Fraction


@dataclass(frozen=True, slots=True)
class Observed:
    """``observe`` number ``obs`` (an index into ``Program.observes``) by session ``serial``."""

    obs: int
    serial: int
    time: Fraction
    value: Fraction


Record = Union[Iteration, NeedSession, Ended, Observed]


# ---------------------------------------------------------------------------
# the state


class _Session:
    __slots__ = ("serial", "a", "pc", "holds", "job", "adm", "stall")

    def __init__(self, serial: int, a: list) -> None:
        self.serial = serial
        self.a = a
        self.pc = -1  # the instruction it waits at (-1: not started); it resumes after it
        self.holds: list[_Req] = []  # granted or waiting attempts, outermost first
        self.job: _Job | None = None
        self.adm = -1  # the order of its latest admission (vLLM's `running` order)
        self.stall: tuple | None = None  # a stalled growth: (pool, request, k, units)


class _Req:
    __slots__ = ("s", "spec", "alloc", "pos", "held", "state", "joined", "grown")

    def __init__(self, s: _Session, spec: HoldSpec, now: Q) -> None:
        n = len(spec.pools)
        self.s = s
        self.spec = spec
        self.alloc: list[Q] = [0] * n
        self.pos: list[Q] = [0] * n
        self.held = [False] * n
        self.state = WAITING
        self.joined = now
        self.grown = False


class _Job:
    __slots__ = ("s", "work", "prefill", "hold", "k", "done", "stage", "started")

    def __init__(self, s: _Session, work: Q, prefill: bool, stage: int, now: Q) -> None:
        self.s = s
        self.work = work
        self.prefill = prefill
        self.hold: _Req | None = None
        self.k = -1
        self.done = False
        self.stage = stage
        self.started = now


class _Pool:
    __slots__ = ("used", "holders", "queue", "growers")

    def __init__(self) -> None:
        self.used: Q = 0
        self.holders: list[_Req] = []
        self.queue: list[_Req] = []
        self.growers: list[_Session] = []


class _Engine:
    __slots__ = ("index", "residents", "assign", "iterating", "served", "cursor", "planning", "left", "admitting")

    def __init__(self, index: int) -> None:
        self.index = index
        self.residents: list[_Job] = []  # in the order of their sessions' latest admissions
        self.assign: list[tuple[_Job, Q]] = []
        self.iterating = False
        self.served: Q = 0
        self.cursor = 0
        self.planning = False
        self.left: Any = 0
        self.admitting: Any = None  # `budget_left` during an admission attempt


class _MEnv(Env):
    """The machine's expression environment: probes read the machine."""

    __slots__ = ("m",)

    def __init__(self, m: "Machine") -> None:
        super().__init__([], {"now": 0})
        self.m = m

    def probe(self, fn: str, target_kind: str, index: int) -> Q:
        return self.m.probe(fn, target_kind, index)


def _bad_amount(label: str, value: Q) -> SerqRuntimeError:
    return SerqRuntimeError(f"{label}: the amount is {value}, not a number of units, tokens or seconds", at=label)


class Machine:
    """One path of a program in the exact semantics (see the module docstring)."""

    def __init__(self, p: ir.Program, arrivals: Iterable[Q] | None = None, *, unbounded: bool = False) -> None:
        self._code = code = Code(p)
        self.now: Q = 0
        self.done = False
        self.sessions: dict[int, _Session] = {}  # live sessions by serial, in arrival order
        self.next_serial = 0
        self.arrived = 0
        self._adm = 0
        self._eid = 0
        self._heap: list[tuple] = []
        self._ready: deque[_Session] = deque()
        self._pools = [_Pool() for _ in code.pools]
        self._engines: list[_Engine | None] = [_Engine(i) if st.kind == STEP else None
                                               for i, st in enumerate(code.stages)]
        self._djobs: list[dict[_Job, None]] = [{} for _ in code.stages]
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
        t, _eid, kind, payload = heappop(heap)
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
        return _copy.deepcopy(self, {id(self._code): self._code})

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
        self._eid += 1
        heappush(self._heap, (t, self._eid, kind, payload))

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
        s = _Session(self.next_serial, list(attrs))
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

    def _run(self, s: _Session) -> None:
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
                    raise _bad_amount(ins[5], work)
                s.pc = pc
                if work == 0:  # completes at once: ready again, behind the ready ones
                    self._ready.append(s)
                elif code.stages[ins[1]].kind == STEP:
                    self._submit(s, ins[1], work, ins[3], ins[4], ins[5])
                else:
                    job = s.job = _Job(s, work, False, ins[1], self.now)
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

    def _end(self, s: _Session) -> None:
        del self.sessions[s.serial]
        self._out.append(Ended(s.serial, self.now))  # type: ignore[arg-type]

    def _unwind(self, s: _Session) -> None:
        for req in reversed(s.holds):
            if req.state == GRANTED:
                self._release(req)
        s.holds.clear()

    # -- pools -------------------------------------------------------------------------------

    def _round_up(self, pidx: int, x: Q) -> Q:
        b = self._code.pools[pidx].block
        if b is None:
            return x
        return mul(ceil(div(x, b)), b)

    def _amounts(self, req: _Req) -> list[tuple[Q, Q]]:
        """(units, units that must fit) per pool, read now (moment Admit)."""
        spec = req.spec
        env = self._env
        out = []
        for k in range(len(spec.pools)):
            env.attrs = req.s.a
            u = spec.units[k](env)
            if u < 0:
                raise _bad_amount(spec.labels[k], u)
            r_fn = spec.reserve[k]
            need = u
            if r_fn is not None:
                env.attrs = req.s.a
                r = r_fn(env)
                if r < 0:
                    raise _bad_amount(spec.labels[k], r)
                if r > u:
                    need = r
            out.append((u, need))
        return out

    def _enqueue(self, s: _Session, spec: HoldSpec) -> bool:
        """A hold joins its first pool's queue; False: some pool can never fit it."""
        req = _Req(s, spec, self.now)
        infos = self._code.pools
        for pidx, (_u, need) in zip(spec.pools, self._amounts(req)):
            if not self._round_up(pidx, need) <= infos[pidx].cap:
                return False
        s.holds.append(req)
        self._pools[spec.pools[0]].queue.append(req)
        return True

    def _fits(self, req: _Req) -> list[tuple[Q, Q]] | None:
        amounts = self._amounts(req)
        infos = self._code.pools
        for pidx, (_u, need) in zip(req.spec.pools, amounts):
            if not add(self._pools[pidx].used, self._round_up(pidx, need)) <= infos[pidx].cap:
                return None
        return amounts

    def _admit(self, req: _Req, amounts: list[tuple[Q, Q]]) -> None:
        """Grant every pool of a hold at once and make its session ready."""
        for k, pidx in enumerate(req.spec.pools):
            pool = self._pools[pidx]
            need = self._round_up(pidx, amounts[k][0])
            pool.used = add(pool.used, need)
            pool.holders.append(req)
            req.alloc[k] = need
            req.pos[k] = 0
            req.held[k] = True
        s = req.s
        s.adm = self._adm
        self._adm += 1
        s.a[ir.CACHED] = 0
        req.state = GRANTED
        self._ready.append(s)

    def _release(self, req: _Req) -> None:
        for k, pidx in enumerate(req.spec.pools):
            if req.held[k]:
                pool = self._pools[pidx]
                pool.used = sub(pool.used, req.alloc[k])
                pool.holders.remove(req)
                req.held[k] = False
        req.state = RELEASED

    def _select(self, pidx: int) -> _Req | None:
        """The head, or under ``queue by`` the smallest keys (ties in queue order)."""
        q = self._pools[pidx].queue
        if not q:
            return None
        keys = self._code.pools[pidx].keys
        if keys is None:
            return q[0]
        env = self._env
        ctx = self._ctx
        best, best_key = None, None
        for req in q:
            env.attrs = req.s.a
            ctx["waited"] = sub(self.now, req.joined)
            key = tuple(k(env) for k in keys)
            if best_key is None or key < best_key:
                best, best_key = req, key
        return best

    def _trigger_put(self, pidx: int) -> None:
        """Admit from the queue while the selected hold fits (head-of-line blocking)."""
        queue = self._pools[pidx].queue
        while True:
            req = self._select(pidx)
            if req is None:
                return
            amounts = self._fits(req)
            if amounts is None:
                return
            queue.remove(req)
            self._admit(req, amounts)

    def _try_admit_all(self) -> None:
        pools = self._pools
        if not self._stalled:
            for pidx in self._code.passed:
                if pools[pidx].queue:
                    self._trigger_put(pidx)
            return
        infos = self._code.pools
        for pidx, pool in enumerate(pools):
            if pool.growers:
                self._retry_growers(pidx)
            if pool.queue and infos[pidx].admit_via is None:
                self._trigger_put(pidx)

    def _retry_growers(self, pidx: int) -> None:
        """Stalled growths in stall order; the first that still does not fit stops."""
        pool = self._pools[pidx]
        cap = self._code.pools[pidx].cap
        while pool.growers:
            s = pool.growers[0]
            stall = s.stall
            if stall is None:
                pool.growers.pop(0)
                self._stalled -= 1
                continue
            _p, req, k, units = stall
            alloc = req.alloc[k]
            need = sub(self._round_up(pidx, add(alloc, units)), alloc)
            if not add(pool.used, need) <= cap:
                break
            pool.growers.pop(0)
            self._stalled -= 1
            pool.used = add(pool.used, need)
            req.alloc[k] = add(alloc, need)
            s.stall = None

    def _grow(self, s: _Session, req: _Req, k: int, units: Q) -> bool:
        """Grow a hold on one pool by ``units`` (rounded up to blocks); False: stalled."""
        pidx = req.spec.pools[k]
        info = self._code.pools[pidx]
        pool = self._pools[pidx]
        alloc = req.alloc[k]
        need = sub(self._round_up(pidx, add(alloc, units)), alloc)
        if need <= 0:
            return True
        if add(pool.used, need) <= info.cap:
            pool.used = add(pool.used, need)
            req.alloc[k] = add(alloc, need)
            return True
        if info.lifo and self._has_victim(pidx):
            raise Unsupported("a preemption (`preempt lifo`)", info.name)
        s.stall = (pidx, req, k, units)
        pool.growers.append(s)
        self._stalled += 1
        return False

    def _has_victim(self, pidx: int) -> bool:
        """Whether ``Holds.lifo_victim`` would find a session to preempt."""
        engines = self._code.pools[pidx].engines
        for req in self._pools[pidx].holders:
            if req.state != GRANTED:
                continue
            if not engines:
                return True
            job = req.s.job
            if job is not None and job.stage in engines and self._engines[job.stage] is not None:
                return True
        return False

    def _held_in(self, s: _Session, pidx: int) -> Q:
        total: Q = 0
        for req in s.holds:
            if req.state == GRANTED:
                for k, p in enumerate(req.spec.pools):
                    if p == pidx and req.held[k]:
                        total = add(total, req.alloc[k])
        return total

    # -- stages ------------------------------------------------------------------------------

    def _submit(self, s: _Session, stage: int, work: Q, prefill: bool, growing: int, label: str) -> None:
        eng = self._engines[stage]
        assert eng is not None
        job = _Job(s, work, prefill, stage, self.now)
        if growing >= 0:
            found = None
            for req in reversed(s.holds):
                if req.state == GRANTED:
                    for k, p in enumerate(req.spec.pools):
                        if p == growing and req.held[k]:
                            found = (req, k)
                            break
                    if found is not None:
                        break
            if found is None:
                name = self._code.pools[growing].name
                raise SerqRuntimeError(f"{label}: `growing {name}` outside a hold of `{name}`")
            job.hold, job.k = found
        # residents stay in the order of their sessions' admissions (vLLM's `running`)
        key = s.adm
        res = eng.residents
        i = len(res)
        while i > 0 and res[i - 1].s.adm > key:
            i -= 1
        res.insert(i, job)
        if eng.planning and i < eng.cursor:
            eng.cursor += 1
        s.job = job

    def _delay_end(self, job: _Job) -> None:
        job.done = True
        self._djobs[job.stage].pop(job, None)
        job.s.job = None
        self._ready.append(job.s)  # (the simulator resumes it inside the event: nothing else is ready)

    def _has_work(self, eng: _Engine) -> bool:
        if eng.residents:
            return True
        pools = self._pools
        for pidx in self._code.stages[eng.index].admit_pools:
            if pools[pidx].queue:
                return True
        return False

    def _totals(self, eng: _Engine) -> None:
        """The stage's totals as the residents stand (moments Budget and Serve) into the context."""
        mem = self._code.stages[eng.index].memory
        decoders = 0
        kv_d: Q = 0
        kv_p: Q = 0
        for j in eng.residents:
            if not j.prefill:
                decoders += 1
            if mem is not None:
                if j.prefill:
                    kv_p = add(kv_p, self._held_in(j.s, mem))
                else:
                    kv_d = add(kv_d, self._held_in(j.s, mem))
        ctx = self._ctx
        ctx["residents"] = len(eng.residents)
        ctx["decoders"] = decoders
        ctx["kv_decode"] = kv_d
        ctx["kv_prefill"] = kv_p

    def _budget_chunk(self, eng: _Engine) -> tuple[Any, Q]:
        info = self._code.stages[eng.index]
        self._totals(eng)
        env = self._env
        budget = _INF if info.budget is None else info.budget(env)
        assert info.chunk is not None
        return budget, info.chunk(env)

    def _serve_view(self, eng: _Engine, job: _Job) -> None:
        self._totals(eng)
        ctx = self._ctx
        ctx["decoding"] = 0 if job.prefill else 1
        ctx["admission"] = job.s.adm
        ctx["remaining"] = job.work
        self._env.attrs = job.s.a

    def _serves(self, eng: _Engine, job: _Job) -> bool:
        """``serve only (P)`` for ``job``: True without the clause."""
        only = self._code.stages[eng.index].only
        if only is None:
            return True
        self._serve_view(eng, job)
        v = only(self._env)
        if v == 1:
            return True
        if v == 0:
            return False
        raise SerqRuntimeError(f"stage `{self._code.stages[eng.index].name}`: `serve only` is {v} for a resident, "
                               "not 0 or 1")

    @staticmethod
    def _plan_tokens(job: _Job, chunk: Q) -> Q:
        if not job.prefill:
            return 1 if job.work > 1 else job.work
        if chunk > 0 and chunk < job.work:
            return chunk
        return job.work

    def _budget_left(self, eng: _Engine) -> Any:
        budget, chunk = self._budget_chunk(eng)
        want: Q = 0
        only = self._code.stages[eng.index].only is not None
        for j in eng.residents:
            if not only or self._serves(eng, j):
                want = add(want, self._plan_tokens(j, chunk))
        v = budget - want
        if v.__class__ is not int and v != _INF:
            v = norm(v)
        return v if v > 0 else 0

    def _order(self, eng: _Engine) -> list[_Job]:
        info = self._code.stages[eng.index]
        res = eng.residents
        if info.serve == "decode_first":
            return sorted(res, key=lambda j: j.prefill)
        keys = info.keys
        assert keys is not None
        env = self._env
        keyed = []
        for j in res:
            self._serve_view(eng, j)
            keyed.append((tuple(k(env) for k in keys), j))
        order = sorted(range(len(res)), key=lambda i: keyed[i][0])
        return [res[i] for i in order]

    def _next(self, eng: _Engine, served: set[int]) -> _Job | None:
        if self._code.stages[eng.index].default_order:
            res = eng.residents
            if eng.cursor < len(res):
                job = res[eng.cursor]
                eng.cursor += 1
                return job
            return None
        for job in self._order(eng):
            if id(job) not in served:
                served.add(id(job))
                return job
        return None

    def _has_waiting(self, eng: _Engine) -> bool:
        pools = self._pools
        return any(pools[p].queue for p in self._code.stages[eng.index].admit_pools)

    def _admit_next(self, eng: _Engine, left: Any) -> bool:
        """Admit the selected waiting request of the first non-empty pool the
        stage admits for, read with ``budget_left = left``; run it until it waits."""
        for pidx in self._code.stages[eng.index].admit_pools:
            req = self._select(pidx)
            if req is None:
                continue
            eng.admitting = left
            try:
                amounts = self._fits(req)
            finally:
                eng.admitting = None
            if amounts is None:
                return False
            self._pools[pidx].queue.remove(req)
            self._admit(req, amounts)
            self._run_ready()
            return True
        return False

    def _start_iteration(self, eng: _Engine) -> bool:
        """``StepEngine.start_iteration``: plan and start an iteration; False when nothing runs."""
        info = self._code.stages[eng.index]
        budget, chunk = self._budget_chunk(eng)
        eng.left = budget
        assign: list[tuple[_Job, Q]] = []
        eng.assign = assign
        eng.cursor = 0
        eng.planning = True
        exclusive = info.serve == "exclusive_prefill"
        only = info.only is not None
        prefill_resident = exclusive and any(j.prefill and self._serves(eng, j) for j in eng.residents)
        served: set[int] = set()
        attention: Q = 0
        try:
            while True:
                job = self._next(eng, served)
                if job is None:
                    if eng.left > 0 and self._has_waiting(eng) and self._admit_next(eng, eng.left):
                        continue
                    break
                if only and not self._serves(eng, job):
                    continue  # no token this iteration; still a resident
                s = job.s
                wish = self._plan_tokens(job, chunk)
                if exclusive:
                    if not job.prefill:
                        if prefill_resident:
                            continue
                    else:  # the prefill runs alone: earlier decodes leave the batch
                        for j, t in assign:
                            if j.hold is not None:
                                j.hold.pos[j.k] = sub(j.hold.pos[j.k], t)
                        assign.clear()
                        eng.left = budget
                left = eng.left
                tokens = wish if wish < left else left
                if tokens <= 0:
                    continue
                req = job.hold
                if req is not None:
                    if s.stall is not None:
                        continue  # stalled growing from an earlier iteration: no tokens
                    k = job.k
                    pos = req.pos[k]
                    need = sub(add(pos, tokens), req.alloc[k])
                    if need > 0 and not self._grow(s, req, k, need):
                        continue  # stalled
                    if job.prefill:
                        attention = add(attention, mul(tokens, add(pos, div(tokens, 2))))
                    req.pos[k] = add(pos, tokens)
                    req.grown = True
                elif job.prefill:
                    attention = add(attention, div(mul(tokens, tokens), 2))
                assign.append((job, tokens))
                eng.left = left - tokens if left == _INF else sub(left, tokens)
                if eng.left <= 0 or (exclusive and job.prefill):
                    break
        finally:
            eng.planning = False
        if not assign:
            return False
        self._launch(eng, attention)
        return True

    def _launch(self, eng: _Engine, attention: Q) -> None:
        info = self._code.stages[eng.index]
        tokens: Q = 0
        prefilled: Q = 0
        kv_d: Q = 0
        kv_p: Q = 0
        decoders = 0
        mem = info.memory
        for job, t in eng.assign:
            tokens = add(tokens, t)
            if job.prefill:
                prefilled = add(prefilled, t)
                if mem is not None:
                    kv_p = add(kv_p, self._held_in(job.s, mem))
            else:
                decoders += 1
                if mem is not None:
                    kv_d = add(kv_d, self._held_in(job.s, mem))
        ctx = self._ctx
        ctx["tokens"] = tokens
        ctx["prefilled"] = prefilled
        ctx["decoders"] = decoders
        ctx["kv_decode"] = kv_d
        ctx["kv_prefill"] = kv_p
        ctx["residents"] = len(eng.residents)
        ctx["attention"] = attention
        raw = info.cost(self._env)
        cost = raw if raw > 0 else 0
        if tokens > 0 and not cost > 0:
            raise SerqRuntimeError(f"stage `{info.name}`: an iteration of {tokens} tokens costs {raw}; an iteration "
                                   "that schedules tokens lasts a positive time", at=info.sites.get("cost"))
        demand: Q = 0
        for j in eng.residents:
            demand = add(demand, j.work if j.prefill else 1)
        self._out.append(Iteration(eng.index, self.now, cost, tokens, decoders, prefilled, kv_d,  # type: ignore[arg-type]
                                   kv_p, attention, len(eng.residents), demand, eng.served, self.arrived))
        eng.served = add(eng.served, tokens)
        eng.iterating = True
        self._push(add(self.now, cost), ITER_END, eng.index)

    def _iter_end(self, eng: _Engine) -> None:
        """Commit the iteration's tokens; finished jobs' sessions become ready, in batch order."""
        eng.iterating = False
        finished = []
        for job, tokens in eng.assign:
            if job.done:
                continue
            job.work = sub(job.work, tokens)
            if job.work <= 0:
                finished.append(job)
        eng.assign = []
        for job in finished:
            eng.residents.remove(job)
            job.done = True
            job.s.job = None
            self._ready.append(job.s)

    # -- the key ----------------------------------------------------------------------------

    def key(self) -> Hashable:
        """The exact state up to a shift of time and of serial numbers (see :mod:`.state`)."""
        from .state import state_key

        return state_key(self)

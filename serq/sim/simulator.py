"""The simulator: time, events and settling an instant (semantics §1), pools'
admission and release, growth and preemption (§2, §4.5), arrivals (§7).

SimPy's environment holds the events, ordered by (time, priority, id).
Spec events (arrivals, job ends, iteration ends, the end of warm-up) are
``NORMAL``.  A session that becomes ready is woken by an ``URGENT`` event at
the current time, so the ready sessions of an instant run in the order they
became ready, before any other event.  After every event the simulator
*settles* (§1.3): it runs the ready sessions, makes a pass over the pools
(stalled growers, then admissions), repeats while that readied anyone, and
then starts an iteration on every idle step stage with work — only if no
other event is pending at this instant.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import simpy
from simpy.events import URGENT, Event, Timeout
from simpy.exceptions import Interrupt

from .. import ir
from ..errors import SerqError, SerqRuntimeError
from ..expr import Frame, base_namespace, compile_expr
from . import rng
from .cache import EPS, PrefixCache
from .compile import Compiler
from .pool import CANCELLED, GRANTED, REJECTED, RELEASED, WAITING, HoldRequest, Pool
from .session import Preemption, Session
from .stages.base import Stage
from .stages.queueing import DelayStage, FifoStage, PsStage
from .stages.step import StepEngine
from .stats import TimeAverage
from .trace import read_trace

class Simulator:
    """One run of one program."""

    def __init__(self, program: ir.Program, *, seed: int, horizon: float, warmup: float,
                 arrivals: int | None = None, engines: Mapping[str, type] | None = None) -> None:
        self.program = program
        self.seed = seed
        self.horizon = horizon
        self.warmup = warmup
        self.arrival_limit = arrivals
        self.env = simpy.Environment()
        self.ns: dict[str, Any] = base_namespace()
        self.ns["__env__"] = self.env
        self.n_attrs = len(program.attributes)
        self.stats_on = warmup <= 0.0
        self.error: SerqError | None = None
        # counters (§9.1)
        self.events = 0
        self.arrivals = 0
        self.ended = 0
        self.turns = 0
        self.live = 0
        self.live_avg = TimeAverage(0.0, 0.0)
        self.preemptions = 0
        self.next_serial = 0
        self.next_adm = 0
        self.next_release = 0
        self.dirty_ps: list[PsStage] = []
        self.root = rng.root_key(seed)
        self.machine_stream = rng.global_stream(self.root, rng.MACHINE)
        self.arrival_stream = rng.global_stream(self.root, rng.ARRIVAL)
        self.eviction_stream = rng.global_stream(self.root, rng.EVICTION)
        self.trace_stream = rng.global_stream(self.root, rng.TRACE)
        self.ns["_mrng"] = self.machine_stream
        self.ns["_arng"] = self.arrival_stream
        self.ns["_observe"] = self.observe
        self.samples: list[list[tuple[float, int, int, float]]] = [[] for _ in program.observes]
        self.client: dict[str, list[float]] = {"ttft": [], "tpot": [], "response": []}
        self.corpus = read_trace(program.trace.path) if program.trace is not None else None
        self._build(engines or {})
        self.code = Compiler(self).compile(program)

    # -- building the deployment ------------------------------------------------------

    def _build(self, engines: Mapping[str, type]) -> None:
        p = self.program
        unknown = sorted(set(engines) - {s.name for s in p.stages if s.kind == "step"})
        if unknown:
            raise SerqError(f"--engine `{unknown[0]}`: no step stage of that name")
        self.pools: list[list[Pool]] = []
        for decl in p.pools:
            members = [Pool(self, decl, _label(decl.name, i, decl.size), i if decl.size is not None else None)
                       for i in range(decl.members)]
            self.pools.append(members)
        self.all_pools = [m for ms in self.pools for m in ms]
        self.stages: list[list[Stage]] = [[] for _ in p.stages]
        frame = Frame(self.ns, attrs="c.a", ctx="c", session=None, stream="_mrng",
                      resolve_pool=self._resolve_pool_const, resolve_stage=self._resolve_stage_const)
        for si, decl in enumerate(p.stages):
            for i in range(decl.members):
                label = _label(decl.name, i, decl.size)
                index = i if decl.size is not None else None
                if decl.kind == "delay":
                    stage: Stage = DelayStage(self, decl, label, index)
                elif decl.kind == "fifo":
                    stage = FifoStage(self, decl, label, index)
                elif decl.kind == "ps":
                    stage = PsStage(self, decl, label, index, phi=compile_expr(decl.phi, frame))
                else:
                    stage = self._step(decl, label, index, frame, engines.get(decl.name, StepEngine))
                self.stages[si].append(stage)
        self.engines: list[StepEngine] = [s for ms in self.stages for s in ms if isinstance(s, StepEngine)]
        self.ps_stages = [s for ms in self.stages for s in ms if isinstance(s, PsStage)]
        # pools' keys and the pairing of `admit via` / `memory` families (language §3 "Arrays")
        for decl, members in zip(p.pools, self.pools):
            for i, pool in enumerate(members):
                if decl.queue != "fifo":
                    keys = [compile_expr(k, frame.derive(session="c", stream="c.srng")) for k in decl.queue]
                    pool.queue_keys = _keys(keys)
                if decl.evict != "lru":
                    keys = [compile_expr(k, frame.derive(stream="c.srng")) for k in decl.evict]
                    pool.cache = PrefixCache(pool.block, _keys(keys), self.eviction_stream)
                if decl.admit_via is not None:
                    engine = _pair(self.stages[decl.admit_via], i, len(members))
                    engine.admit_pools.append(pool)  # type: ignore[attr-defined]
        for engine in self.engines:
            if engine.memory is not None:
                engine.memory.engines.append(engine)

    def _step(self, decl: ir.StageDecl, label: str, index: int | None, frame: Frame, cls: type) -> StepEngine:
        step = decl.step
        assert step is not None
        memory = None
        if step.memory is not None:
            memory = _pair(self.pools[step.memory], index or 0, decl.members)
        serve_keys = None
        if isinstance(step.serve, tuple):
            serve_keys = _keys([compile_expr(k, frame.derive(session=None)) for k in step.serve])
        if not (isinstance(cls, type) and issubclass(cls, StepEngine)):
            raise SerqError(f"--engine {decl.name}: `{cls!r}` is not a StepEngine subclass")
        return cls(self, decl, label, index,
                   budget=compile_expr(step.budget, frame), chunk=compile_expr(step.chunk, frame),
                   cost=compile_expr(step.cost, frame), serve=step.serve, serve_keys=serve_keys,
                   memory=memory)

    def _resolve_pool_const(self, ref: ir.PoolRef, f: Frame) -> str:
        members = self.pools[ref.pool]
        if ref.index is None:
            return f.bind(members[0], "P")
        from .compile import member

        self.ns["_member"] = member
        from ..expr import source

        return f"{f.bind(members, 'PA')}[_member({source(ref.index, f)}, {len(members)}, 'index')]"

    def _resolve_stage_const(self, ref: ir.StageRef, f: Frame) -> str:
        members = self.stages[ref.stage]
        if ref.index is None:
            return f.bind(members[0], "S")
        from .compile import member

        self.ns["_member"] = member
        from ..expr import source

        return f"{f.bind(members, 'SA')}[_member({source(ref.index, f)}, {len(members)}, 'index')]"

    # -- running --------------------------------------------------------------------------

    def run(self) -> None:
        env = self.env
        if self.warmup > 0.0:
            Timeout(env, self.warmup).callbacks.append(self._end_warmup)  # type: ignore[union-attr]
        self._start_arrivals()
        q = env._queue
        step = simpy.Environment.step
        horizon = self.horizon
        settle = self.settle
        limit = self.arrival_limit
        settle()
        while q and q[0][0] <= horizon:
            step(env)
            if self.error is not None:
                raise self.error
            settle()
            if limit is not None and self.arrivals >= limit and self.live == 0:
                break
        else:
            env._now = horizon
        if limit is not None:
            if self.arrivals < limit:
                raise SerqRuntimeError(
                    f"horizon {horizon:g} reached before requested arrivals: got {self.arrivals}, "
                    f"requested {limit}")
            if self.live:
                raise SerqRuntimeError(f"failed to drain {self.live} active sessions within horizon {horizon:g}")

    def run_ready(self) -> None:
        """Run every ready session (an urgent event at this instant) until it blocks."""
        env = self.env
        q = env._queue
        if not q or q[0][1] != URGENT:
            return
        step = simpy.Environment.step
        while q and q[0][1] == URGENT:
            step(env)
            if self.error is not None:
                raise self.error

    def settle(self) -> None:
        """§1.3: ready sessions, pool passes until quiet, then iterations and ps rates."""
        env = self.env
        q = env._queue
        pools = self.all_pools
        while True:
            self.run_ready()
            if pools:
                self.try_admit_all()
                if q and q[0][1] == URGENT:
                    continue
            break
        if self.engines and not (q and q[0][0] <= env._now):
            for engine in self.engines:
                if not engine.iterating and engine.has_work():
                    engine.start_iteration()
        if self.dirty_ps:
            dirty, self.dirty_ps = self.dirty_ps, []
            for st in dirty:
                st.reschedule()

    def fail(self, err: SerqError) -> None:
        if self.error is None:
            self.error = err

    # -- warm-up and arrivals ---------------------------------------------------------------

    def _end_warmup(self, _ev: Any) -> None:
        self.events += 1
        self.stats_on = True
        now = self.env._now
        self.live_avg.reset(now)
        for pool in self.all_pools:
            for avg in (pool.used_avg, pool.cached_avg, pool.queue_avg, pool.holders_avg):
                avg.reset(now)
        for ms in self.stages:
            for st in ms:
                st.reset_stats(now)

    def _start_arrivals(self) -> None:
        arr = self.program.arrival
        if self.arrival_limit is not None and arr.kind not in ("poisson", "renewal"):
            raise SerqError("run: arrivals applies only to poisson or renewal workloads")
        if arr.kind == "poisson":
            self._at(0.0, self._arrive)
        elif arr.kind == "renewal":
            assert arr.gap is not None
            frame = Frame(self.ns, attrs="c.a", ctx="c", session=None, stream="_arng")
            self._gap = compile_expr(arr.gap, frame)
            self._at(self._renewal_gap(), self._arrive)
        elif arr.kind in ("closed", "batch"):
            for _ in range(arr.n):
                self.spawn()

    def _at(self, delay: float, callback: Any) -> None:
        Timeout(self.env, delay).callbacks.append(callback)  # type: ignore[union-attr]

    def _renewal_gap(self) -> float:
        gap = self._gap(None)
        if not (gap > 0.0 and math.isfinite(gap)):
            raise SerqRuntimeError(f"`arrive renewal(…)`: the interarrival time is {gap:g}, not a positive time")
        return gap

    def _arrive(self, _ev: Any) -> None:
        self.events += 1
        arr = self.program.arrival
        more = self.arrival_limit is None or self.arrivals + 1 < self.arrival_limit
        if more:
            if arr.kind == "poisson":
                gap = -math.log(1.0 - self.arrival_stream.random()) / arr.rate
            else:
                gap = self._renewal_gap()
            self._at(gap, self._arrive)
        self.spawn()

    # -- sessions ---------------------------------------------------------------------------

    def spawn(self) -> Session:
        """A new session: serial, trace session, ``init``, then it is ready (§1.4)."""
        s = Session(self, self.next_serial)
        self.next_serial += 1
        if self.corpus is not None:
            n = len(self.corpus.sessions)
            i = s.serial % n if self.program.trace.ordered else self.trace_stream.integers(n)  # type: ignore[union-attr]
            s.trace = self.corpus.sessions[i]
        self.live += 1
        self.live_avg.set(self.env._now, self.live)
        self.arrivals += 1
        self.code.init(s)
        s.proc = self.env.process(self._main(s))
        return s

    def _main(self, s: Session) -> Any:
        try:
            yield from self.code.body(s)
        except SerqError as err:
            self.fail(err)
            return
        self.end_session(s)

    def end_session(self, s: Session) -> None:
        s.ended = True
        self.live -= 1
        self.live_avg.set(self.env._now, self.live)
        if self.stats_on:
            self.ended += 1
        if self.program.arrival.kind == "closed":
            self.spawn()

    def observe(self, s: Session, k: int, value: float) -> None:
        if self.stats_on:
            self.samples[k].append((self.env._now, s.serial, int(s.a[ir.TURN_NO]), value))

    def client_record(self, s: Session, now: float) -> None:
        c = self.client
        if s.first_tok is not None:
            c["ttft"].append(s.first_tok - s.sent)
            if s.n_after >= 1:
                c["tpot"].append((s.last_tok - s.first_tok) / s.n_after)
        c["response"].append(now - s.sent)

    def unwinding(self, exc: BaseException | None) -> bool:
        """Whether an exception leaving a hold is a preemption unwinding it."""
        return isinstance(exc, Interrupt)

    # -- holds: join, admit, release (§2.2–§2.6) ----------------------------------------------

    def enqueue(self, req: HoldRequest) -> None:
        """A hold joins its first pool's queue, unless some pool can never fit it."""
        s = req.session
        for pool, (_u, need) in zip(req.pools, req.spec.amounts(s)):
            if pool.round_up(need) > pool.cap + EPS:
                pool.rejected += 1
                req.state = REJECTED
                return
        s.holds.append(req)
        req.pools[0].join(req)

    def admit(self, req: HoldRequest, amounts: list[tuple[float, float]]) -> None:
        """Grant every pool of a hold at once (§2.5) and wake its session."""
        s = req.session
        spec = req.spec
        reuse = None
        if spec.reuse is not None:
            reuse = spec.reuse(s)
            reuse = reuse if reuse > 0.0 else 0.0
        own_max = 0.0
        for k, pool in enumerate(req.pools):
            need = pool.round_up(amounts[k][0])
            own = 0.0
            if spec.cache is not None:
                entry = pool.cache.take(s.serial)
                if entry is not None:
                    own = entry.size
                    if reuse is not None:
                        bound = pool.round_down(reuse)
                        if own > bound:
                            pool.cache.put_dead(entry, own - bound)
                            own = bound
            if own > own_max:
                own_max = own
            pool.make_room(need)
            pool.used += need
            pool.holders.append(req)
            pool.admissions += 1
            req.alloc[k] = need
            req.pos[k] = own
            req.held[k] = True
            pool.record()
        first = req.pools[0]
        if self.stats_on:
            first.wait_sum += self.env._now - req.joined
            first.wait_count += 1
        s.adm_seq = self.next_adm
        self.next_adm += 1
        s.a[ir.CACHED] = own_max
        s.queued_at = None
        req.state = GRANTED
        first.record()
        first.trigger(req)

    def release_hold(self, req: HoldRequest, completed: bool) -> None:
        """Give back every pool of a hold, caching per its clause (§2.6).  A
        hold that completed normally also resets ``computed`` and retries
        admissions at once."""
        s = req.session
        for k in range(len(req.pools)):
            if req.held[k]:
                self.release_part(req, k)
        req.state = RELEASED
        if completed:
            for pool in req.pools:
                s.preempt_pos.pop(pool, None)
            s.a[ir.COMPUTED] = 0.0
            self.try_admit_all()

    def release_part(self, req: HoldRequest, k: int) -> None:
        """Give back one pool of a hold: ``min(cache, computed)`` stays cached,
        rounded down to blocks; computed is the position if a growing run
        advanced the hold, else the allocation."""
        s = req.session
        pool = req.pools[k]
        alloc = req.alloc[k]
        pool.used -= alloc
        if pool.used < EPS:
            pool.used = 0.0 if pool.used > -EPS else pool.used
        pool.holders.remove(req)
        req.held[k] = False
        cache = req.spec.cache
        if cache is not None:
            want = cache(s)
            want = want if want > 0.0 else 0.0
            computed = req.pos[k] if req.grown else alloc
            keep = pool.round_down(want if want < computed else computed)
            if keep > 0.0:
                pool.cache.put(s.serial, keep, self.env._now, self.next_release, list(s.a), s)
                self.next_release += 1
        pool.record()

    def try_admit_all(self) -> None:
        """A pass over every pool in declaration order: stalled growers, then
        its queue, unless a step stage admits it (§1.3 step 2)."""
        for pool in self.all_pools:
            if pool.growers:
                self.retry_growers(pool)
            if pool.put_queue and pool.admit_via is None:
                pool._trigger_put()

    # -- growth and preemption (§2.7, §4.5) ----------------------------------------------------

    def grow(self, s: Session, req: HoldRequest, k: int, units: float, engine: StepEngine | None = None) -> Any:
        """Grow a hold's allocation on one pool by ``units`` (rounded up to
        blocks).  True when done; a :class:`Preemption` when ``s`` itself was
        preempted; otherwise ``s`` stalls until a pool pass finds room, and
        the result is the event that wakes it (None inside an iteration)."""
        pool = req.pools[k]
        alloc = req.alloc[k]
        need = pool.round_up(alloc + units) - alloc
        if need <= 0.0:
            return True
        while True:
            if pool.used + need <= pool.cap + EPS:
                pool.make_room(need)
                pool.used += need
                req.alloc[k] = alloc + need
                pool.record()
                return True
            victim = None
            if pool.lifo:
                victim = engine.choose_victim(pool, s) if engine is not None else self.lifo_victim(pool)
            if victim is None:
                ev = None if engine is not None else Event(self.env)
                s.stall = (pool, req, k, units, ev)
                pool.growers.append(s)
                return ev
            cause = self.preempt(victim, pool)
            if victim is s:
                return cause

    def lifo_victim(self, pool: Pool) -> Session | None:
        """vLLM's ``running[-1]``: among the holders of the pool that are
        residents of a step stage whose memory it is, the latest admitted;
        for a pool that is no stage's memory, its latest holder."""
        if pool.engines:
            best = None
            for req in pool.holders:
                s = req.session
                if s.job is not None and s.job[0] in pool.engines and (best is None or s.adm_seq > best.adm_seq):
                    best = s
            return best
        return pool.holders[-1].session if pool.holders else None

    def preempt(self, victim: Session, pool: Pool) -> Preemption:
        """Preempt ``victim``'s innermost hold on ``pool``: its job leaves its
        stage, its holds from that one inwards are released (cached), and the
        hold re-queues at the head of its first pool (§4.5)."""
        found = victim.innermost(pool)
        assert found is not None, "a victim holds the pool"
        req, k = found
        computed = req.pos[k]
        prev = victim.preempt_pos.get(pool)
        if prev is not None and computed <= prev + EPS and not victim.stuck:
            victim.stuck = True
            pool.stuck += 1
        victim.preempt_pos[pool] = computed
        victim.a[ir.COMPUTED] = computed
        self.detach(victim)
        i = victim.holds.index(req)
        for h in reversed(victim.holds[i:]):
            if h.state == GRANTED:
                self.release_hold(h, completed=False)
            elif h.state == WAITING:
                h.pools[0].cancel(h)
        del victim.holds[i:]
        pool.preemptions += 1
        self.preemptions += 1
        new = HoldRequest(victim, req.spec, req.spec.pools(victim), front=True)
        self.enqueue(new)
        victim.requeued = new
        victim.resumed = True
        cause = Preemption(req, new)
        if self.env.active_process is not victim.proc:
            self._interrupt(victim, cause)
        return cause

    def detach(self, s: Session) -> None:
        """Take a session out of the stage job or stalled growth it waits in."""
        if s.job is not None:
            stage, job = s.job
            stage.remove(job)
            s.job = None
        if s.stall is not None:
            pool = s.stall[0]
            if s in pool.growers:
                pool.growers.remove(s)
            s.stall = None

    def _interrupt(self, s: Session, cause: Preemption) -> None:
        """Throw the preemption into the session's process at its ``yield``: like
        SimPy's ``Process.interrupt``, but detached from what it waited on now,
        so nothing it waited on can resume it first."""
        proc = s.proc
        target = proc._target
        if target is not None and target.callbacks is not None:
            try:
                target.callbacks.remove(proc._resume)
            except ValueError:
                pass
        ev = Event(self.env)
        ev._ok = False
        ev._value = Interrupt(cause)
        ev._defused = True
        ev.callbacks = [proc._resume]  # type: ignore[assignment]
        self.env.schedule(ev, URGENT)

    def retry_growers(self, pool: Pool) -> None:
        """Stalled growths in stall order; the first that still does not fit stops."""
        while pool.growers:
            s = pool.growers[0]
            stall = s.stall
            if stall is None:
                pool.growers.pop(0)
                continue
            _pool, req, k, units, ev = stall
            alloc = req.alloc[k]
            need = pool.round_up(alloc + units) - alloc
            if pool.used + need > pool.cap + EPS:
                break
            pool.growers.pop(0)
            pool.make_room(need)
            pool.used += need
            req.alloc[k] = alloc + need
            pool.record()
            s.stall = None
            if ev is not None:
                ev._ok = True
                ev._value = None
                self.env.schedule(ev, URGENT)


def _label(name: str, i: int, size: int | None) -> str:
    return name if size is None else f"{name}[{i}]"


def _pair(members: list[Any], i: int, count: int) -> Any:
    """Member ``i`` of a family of ``count`` paired with another family: one
    for one when the counts match, one for all when the other has one."""
    return members[0] if len(members) == 1 else members[i if count == len(members) else 0]


def _keys(fns: list[Any]) -> Any:
    if len(fns) == 1:
        f = fns[0]
        return lambda c: (f(c),)
    return lambda c: tuple(f(c) for f in fns)


def simulate(program: ir.Program, *, seed: int | None = None, horizon: float | None = None,
             warmup: float | None = None, arrivals: int | None = None,
             engines: Mapping[str, type] | None = None) -> Any:
    """Run ``program`` and return its report (see :func:`serq.run`)."""
    from .results import build_report

    settings = program.run
    seed = settings.seed if seed is None else seed
    horizon = settings.horizon if horizon is None else horizon
    warmup = settings.warmup if warmup is None else warmup
    arrivals = settings.arrivals if arrivals is None else arrivals
    if horizon is None:
        raise SerqError("no horizon (run { horizon T; })", helps=["give one with --horizon T"])
    if not (math.isfinite(horizon) and horizon > 0):
        raise SerqError(f"the horizon must be finite and positive, not {horizon:g}")
    if not (0.0 <= warmup < horizon):
        raise SerqError("run: need 0 <= warmup < horizon")
    if seed < 0:
        raise SerqError(f"the seed must be an unsigned integer, not {seed}")
    sim = Simulator(program, seed=int(seed), horizon=float(horizon), warmup=float(warmup),
                    arrivals=arrivals, engines=engines)
    try:
        sim.run()
    except SerqError:
        raise
    except RecursionError:
        raise SerqRuntimeError("the run recursed too deeply") from None
    except ZeroDivisionError as err:  # pragma: no cover - arithmetic is IEEE in compiled code
        raise SerqRuntimeError(f"arithmetic error: {err}") from None
    return build_report(sim)

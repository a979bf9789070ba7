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
import os
from functools import partial
from typing import Any, Mapping

from .. import ir
from ..errors import RunInterrupted, SerqError, SerqRuntimeError
from ..expr import Frame, base_namespace, compile_expr
from ..fpmath import log as _log
from . import rng
from .cache import PrefixCache
from .compile import Compiler, pool_source, stage_source
from .holds import Holds
from .pool import Pool
from .kernel import EVENTS_PER_INSTANT, EVENTS_PER_SESSION, Kernel, SessionProcess
from .session import Session, Task
from .stages.base import Stage
from .stages.queueing import DelayStage, FifoStage, PsStage
from .stages.step import StepEngine
from .stats import TimeAverage
from .trace import read_trace

#: Run limits (docs/simulator.md, "Run guards and limits").  The first two
#: can be raised with an environment variable of the same name; the live
#: limit also with ``--max-live`` / ``max_live=`` (which win over the variable).
SERQ_MAX_LIVE = 1_000_000  # sessions alive at once (about 2.5 GB of sessions)
#: The serial of the first spawned child; later children count up from it, so
#: roots keep their serials 0, 1, 2 … (and their streams) under any design.
CHILD_SERIALS = 1 << 32
SERQ_MAX_ARRIVALS = 100_000_000  # arrivals an open workload may make over a run
#: Open arrivals at one instant (an interarrival time below the clock's resolution).
ARRIVALS_PER_INSTANT = 1_000
#: Extra closed-population replacements at one instant, beyond one per member.
REPLACEMENTS_PER_INSTANT = 100_000
#: Every this many arrivals, a renewal workload's pace is projected to the horizon.
PACE_CHECK = 1 << 14


def run_limit(name: str, default: int) -> int:
    """A limit from the environment variable ``name``, else ``default``."""
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = float(text.strip().replace("_", ""))
    except ValueError:
        value = math.nan
    if not (value >= 1 and math.isfinite(value) and value == int(value)):
        raise SerqError(f"the environment variable {name}={text!r} is not a positive whole number",
                        helps=[f"unset it to use the default limit of {default:,}"])
    return int(value)


class Simulator(Holds):
    """One run of one program."""

    def __init__(self, program: ir.Program, *, seed: int, horizon: float, warmup: float,
                 arrivals: int | None = None, engines: Mapping[str, type] | None = None,
                 max_live: int | None = None, steps: bool = False) -> None:
        self.program = program
        self.seed = seed
        self.horizon = horizon
        self.warmup = warmup
        self.arrival_limit = arrivals
        self.env = Kernel()
        self.ns: dict[str, Any] = base_namespace()
        self.ns["__env__"] = self.env
        self.n_attrs = len(program.attributes)
        self.stats_on = warmup <= 0.0
        # counters (§9.1)
        self.events = 0
        self.arrivals = 0
        self.ended = 0
        self.turns = 0
        self.live_avg = TimeAverage(0.0, 0.0)
        self.preemptions = 0
        self.next_serial = 0
        self.next_adm = 0
        self.next_release = 0
        self.dirty_ps: list[PsStage] = []
        self._replace_at = -1.0  # the instant closed-population sessions were last replaced at, and how often
        self._replaced = 0
        self.max_live = run_limit("SERQ_MAX_LIVE", SERQ_MAX_LIVE) if max_live is None else max_live
        self.max_arrivals = run_limit("SERQ_MAX_ARRIVALS", SERQ_MAX_ARRIVALS)
        self._arrive_at = -1.0  # the instant of the latest open arrival, and how many there were
        self._arrived = 0
        self._closed = program.arrival.kind == "closed"  # an ended session is replaced at once
        # the session tree (docs/subagents.md): the slots of parent, depth and root, when the program spawns
        self.tree_slots: tuple[int, int, int] | None = None
        if program.handles:
            at = {name: i for i, name in enumerate(program.attributes)}
            self.tree_slots = (at["parent"], at["depth"], at["root"])
        self.next_child = CHILD_SERIALS
        # task statistics (docs/subagents.md, "Task statistics"), in a program that spawns: the tasks
        # completed after warm-up, not stuck, as (root, start, end, sessions, depth, root's turn_no) in
        # completion order; the sessions of every tree live now; the tasks completed with a stuck session
        self.task_log: list[tuple[int, float, float, int, int, float]] = []
        self.tree_live: dict[Session, None] = {}
        self.tasks_stuck = 0
        self.root = rng.root_key(seed)
        self.session_keys = rng.SessionKeys(self.root)
        self.machine_stream = rng.global_stream(self.root, rng.MACHINE)
        self.arrival_stream = rng.global_stream(self.root, rng.ARRIVAL)
        self.eviction_stream = rng.global_stream(self.root, rng.EVICTION)
        self.trace_stream = rng.global_stream(self.root, rng.TRACE)
        self.ns["_mrng"] = self.machine_stream
        self.ns["_arng"] = self.arrival_stream
        self.samples: list[list[tuple[float, int, int, float]]] = [[] for _ in program.observes]
        # the client rows' samples, (time, session, turn, value) as an observe's
        self.client: dict[str, list[tuple[float, int, int, float]]] = {"ttft": [], "tpot": [], "response": []}
        self.corpus = read_trace(program.trace.path) if program.trace is not None else None
        # `arrive trace` (docs/replay.md): the trace sessions in arrival order, the times they
        # arrive at (the trace's, divided by the replay rate), how many arrive; how the run ended
        self.replay_order: list[int] | None = None
        self.replay_times: list[float] = []
        self.replay_total = 0
        self.replay: dict[str, Any] | None = None
        self._build(engines or {})
        if steps:  # the step log (docs/calibration.md): every iteration as its own event, recorded
            from array import array

            for engine in self.engines:
                engine.coalesce = False  # the plain path: the same report (docs/simulator.md)
                engine.step_log = array("d")
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
                      resolve_pool=partial(pool_source, self), resolve_stage=partial(stage_source, self))
        for si, sdecl in enumerate(p.stages):
            for i in range(sdecl.members):
                label = _label(sdecl.name, i, sdecl.size)
                index = i if sdecl.size is not None else None
                if sdecl.kind == "delay":
                    stage: Stage = DelayStage(self, sdecl, label, index)
                elif sdecl.kind == "fifo":
                    stage = FifoStage(self, sdecl, label, index)
                elif sdecl.kind == "ps":
                    assert sdecl.phi is not None
                    stage = PsStage(self, sdecl, label, index, phi=compile_expr(sdecl.phi, frame))
                else:
                    stage = self._step(sdecl, label, index, frame, engines.get(sdecl.name, StepEngine))
                self.stages[si].append(stage)
        self.engines: list[StepEngine] = [s for ms in self.stages for s in ms if isinstance(s, StepEngine)]
        # pools' keys and the pairing of `admit via` / `memory` families (language §3 "Arrays")
        for decl, members in zip(p.pools, self.pools):
            for i, pool in enumerate(members):
                if decl.queue != "fifo":
                    keys = [compile_expr(k, frame.derive(session="c.session", stream="c.srng")) for k in decl.queue]
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

    # -- running --------------------------------------------------------------------------

    @property
    def live(self) -> int:
        """Sessions live now (the kernel's guard reads the same count)."""
        return self.env.live

    def run(self) -> None:
        env = self.env
        if self.warmup > 0.0:
            env.timer(self.warmup, [self._end_warmup])
        self._start_arrivals()
        limit = self.arrival_limit
        # the run stops once `stop` sessions have arrived and none is live: --arrivals N, or the
        # end of the trace under `arrive trace`
        stop = self.replay_total if self.replay_order is not None else limit
        done = None if stop is None else (lambda: self.arrivals >= stop and env.live == 0)
        # With no pool and no step stage, settling is running the ready sessions
        # and rescheduling the dirty ps stages: the kernel does the first itself.
        env.loop(self.horizon, self.settle, bool(self.all_pools or self.engines), self.dirty_ps, done)
        if self.replay_order is not None:
            self._replay_ended()
        if limit is not None:
            if self.arrivals < limit:
                raise SerqRuntimeError(
                    f"horizon {self.horizon:g} reached before requested arrivals: got {self.arrivals}, "
                    f"requested {limit}")
            if self.live:
                raise SerqRuntimeError(f"failed to drain {self.live} active sessions within horizon {self.horizon:g}")

    def settle(self) -> None:
        """§1.3: ready sessions, pool passes until quiet, then iterations and ps rates."""
        env = self.env
        q = env.queue
        pools = self.all_pools
        while True:
            env.run_ready()
            if pools:
                self.try_admit_all()
                if env.ready_pending():
                    continue
            break
        if self.engines and not (q and q[0][0] <= env.now):
            for engine in self.engines:
                if not engine.iterating and engine.has_work():
                    engine.start_iteration()
        if self.dirty_ps:  # (emptied in place: the kernel's loop holds this list)
            dirty = self.dirty_ps[:]
            self.dirty_ps.clear()
            for st in dirty:
                st.reschedule()

    # -- warm-up and arrivals ---------------------------------------------------------------

    def _end_warmup(self, _ev: Any) -> None:
        self.events += 1
        self.stats_on = True
        now = self.env.now
        self.live_avg.reset(now)
        for pool in self.all_pools:
            for avg in (pool.used_avg, pool.cached_avg, pool.queue_avg, pool.holders_avg):
                avg.reset(now)
        for ms in self.stages:
            for st in ms:
                st.reset_stats(now)

    def _start_arrivals(self) -> None:
        arr = self.program.arrival
        self._poisson_rate = arr.rate if arr.kind == "poisson" else None  # None: renewal
        self._arrive_cb = self._arrive
        if self.arrival_limit is not None and arr.kind not in ("poisson", "renewal", "trace"):
            raise SerqError("run: arrivals applies only to poisson, renewal or trace workloads")
        self._check_counts()
        if arr.kind == "trace":
            self._start_replay(arr.rate)
        elif arr.kind == "poisson":
            self._at(0.0, self._arrive)
        elif arr.kind == "renewal":
            assert arr.gap is not None
            frame = Frame(self.ns, attrs="c.a", ctx="c", session=None, stream="_arng")
            self._gap = compile_expr(arr.gap, frame)
            self._at(self._renewal_gap(), self._arrive)
        elif arr.kind in ("closed", "batch"):
            for _ in range(arr.n):
                self.spawn()

    # -- `arrive trace` (docs/replay.md) ---------------------------------------------------

    def _start_replay(self, rate: float) -> None:
        """Each trace session arrives at its first row's ``arrival`` divided by
        ``rate``, in arrival order (ties in file order), once; the first
        ``--arrivals N`` of them when N is given."""
        corpus = self.corpus
        assert corpus is not None, "`arrive trace` is checked to name a trace"
        if corpus.arrivals is None:
            raise SerqRuntimeError(
                f"`arrive trace`: the trace `{corpus.path}` has no `arrival` column",
                helps=["name the columns in a header, with `arrival` (seconds) among them: "
                       "session,turn,new,out,think,arrival (docs/replay.md)",
                       "a public trace can be converted with `serq trace import FORMAT FILE -o OUT.csv`"])
        times = corpus.arrivals
        order = sorted(range(len(times)), key=times.__getitem__)
        total = len(order)
        if self.arrival_limit is not None:
            if self.arrival_limit > total:
                raise SerqRuntimeError(
                    f"--arrivals {self.arrival_limit}: the trace `{corpus.path}` has only {total:,} sessions",
                    helps=[f"ask for at most {total:,} arrivals, or leave --arrivals out to replay the whole trace"])
            total = self.arrival_limit
        self.replay_order = order
        self.replay_times = [times[i] / rate for i in order[:total]]
        self.replay_total = total
        self._replay_next = 0
        self._replay_at(self.replay_times[0])

    def _replay_at(self, when: float) -> None:
        """The next trace arrival, at the instant ``when`` exactly (not ``now + (when - now)``)."""
        self.env.timer_at(when, [self._replay_arrive])

    def _arrivals_at(self, now: float) -> int:
        """Count one open arrival at ``now``: how many arrived at this instant so far."""
        if now != self._arrive_at:
            self._arrive_at, self._arrived = now, 1
        else:
            self._arrived += 1
        return self._arrived

    def _replay_arrive(self, _ev: Any) -> None:
        self.events += 1
        now = self.env.now
        if self._arrivals_at(now) > ARRIVALS_PER_INSTANT:
            raise SerqRuntimeError(
                f"the run does not settle at time {now:g}: more than {ARRIVALS_PER_INSTANT:,} trace sessions "
                f"arrive at that instant", helps=["spread the trace's arrival times, or lower the replay rate"])
        self._replay_next += 1
        if self._replay_next < self.replay_total:
            self._replay_at(self.replay_times[self._replay_next])
        self.spawn(True)

    def _replay_ended(self) -> None:
        """How a replay ended (``Report.replay``; a ``note:`` on stderr): the trace was
        used up and every session ended, or the horizon came first."""
        now = self.env.now
        exhausted = self.arrivals >= self.replay_total and self.live == 0
        self.replay = {"sessions": self.replay_total, "arrived": self.arrivals, "live": self.live,
                       "exhausted": exhausted, "end": now}
        if exhausted and now <= self.warmup:
            raise SerqRuntimeError(
                f"the trace ended at time {now:g}, at or before the warm-up {self.warmup:g}: nothing was measured",
                helps=["lower the warm-up (--warmup), or replay a longer trace"])

    def _check_counts(self) -> None:
        """Refuse, before creating any session, a population or a stream of
        arrivals larger than the run limits (docs/simulator.md)."""
        arr = self.program.arrival
        if arr.kind in ("closed", "batch") and arr.n > self.max_live:
            what = "population" if arr.kind == "closed" else "batch"
            raise SerqError(
                f"`arrive {arr.kind}({arr.n})`: a {what} of {arr.n:,} sessions is more than the limit of "
                f"{self.max_live:,} live sessions",
                helps=[f"lower {self._count_name(arr.n, f'the {arr.kind} count')}",
                       _raise_live(arr.n)])
        if arr.kind == "poisson":
            expected = arr.rate * self.horizon
            if self.arrival_limit is not None:
                expected = min(expected, float(self.arrival_limit))
            if expected > self.max_arrivals:
                raise SerqError(
                    f"`arrive poisson({arr.rate:g})` over the horizon {self.horizon:g} makes about "
                    f"{expected:.3g} arrivals, more than the limit of {self.max_arrivals:,}",
                    helps=[f"lower {self._count_name(arr.rate, 'the rate')} or the horizon (--horizon), "
                           "or stop after N arrivals with --arrivals N",
                           _raise_with("SERQ_MAX_ARRIVALS", math.ceil(expected))])

    def _count_name(self, value: float, what: str) -> str:
        """How to change a number of the workload: the ``let`` it comes from, if one has that value."""
        names = [k for k, v in self.program.constants.items() if v == value]
        if len(names) == 1:
            return f"`{names[0]}` (--set {names[0]}=…)"
        return f"{what} in the program's `workload {{ arrive … }}`"

    def _at(self, delay: float, callback: Any) -> None:
        self.env.timer(delay, [callback])

    def _renewal_gap(self) -> float:
        gap = self._gap(None)
        if not (gap > 0.0 and math.isfinite(gap)):
            raise SerqRuntimeError(f"`arrive renewal(…)`: the interarrival time is {gap:g}, not a positive time")
        return gap

    def _arrive(self, _ev: Any) -> None:
        self.events += 1
        now = self.env.now
        if self._arrivals_at(now) > ARRIVALS_PER_INSTANT:
            raise SerqRuntimeError(
                f"the run does not settle at time {now:g}: more than {ARRIVALS_PER_INSTANT:,} arrivals at "
                f"that instant; the interarrival times are too small to advance the clock at {now:g}",
                helps=[f"lower {self._rate_name()}"])
        if self.arrivals >= self.max_arrivals:
            raise SerqRuntimeError(
                f"at time {now:g}: the workload has made {self.arrivals:,} arrivals, the limit",
                helps=[f"lower {self._rate_name()}, or shorten the horizon (--horizon), or stop after N "
                       "arrivals with --arrivals N",
                       _raise_with("SERQ_MAX_ARRIVALS", 10 * self.max_arrivals)])
        rate = self._poisson_rate
        if rate is None and self.arrivals % PACE_CHECK == 0 and self.arrivals:
            self._check_pace(now)
        limit = self.arrival_limit
        if limit is None or self.arrivals + 1 < limit:
            if rate is not None:
                gap = -_log(1.0 - self.arrival_stream.random()) / rate
            else:
                gap = self._renewal_gap()
            self.env.timer(gap, [self._arrive_cb])
        self.spawn(True)

    def _rate_name(self) -> str:
        arr = self.program.arrival
        if arr.kind == "poisson":
            return f"the arrival rate, {self._count_name(arr.rate, 'the rate')}"
        return "the arrival rate (make the `arrive renewal(…)` gaps longer)"

    def _check_pace(self, now: float) -> None:
        """A renewal workload's arrivals so far, projected to the horizon, must stay under the limit."""
        projected = self.arrivals * (self.horizon / now) if now > 0 else math.inf
        if self.arrival_limit is not None:
            projected = min(projected, float(self.arrival_limit))
        if projected > self.max_arrivals:
            about = f"about {projected:.3g} arrivals" if math.isfinite(projected) else "arrivals without end"
            raise SerqRuntimeError(
                f"`arrive renewal(…)` made {self.arrivals:,} arrivals by time {now:g}; at that pace the horizon "
                f"{self.horizon:g} would see {about}, more than the limit of "
                f"{self.max_arrivals:,}",
                helps=["make the gaps longer, or shorten the horizon (--horizon), or stop after N arrivals with "
                       "--arrivals N",
                       _raise_with("SERQ_MAX_ARRIVALS", 10 * self.max_arrivals)])

    def _too_many_live(self, tree: bool = False) -> SerqError:
        arr = self.program.arrival
        now = self.env.now
        if tree:
            return SerqRuntimeError(
                f"at time {now:g}: a `spawn` would make more than {self.max_live:,} sessions live at once "
                "(the limit): the session trees grow without end",
                helps=["a tree whose sessions spawn one child or more on average never dies out: "
                       "lower the count of the `spawn`, or spawn only on some branch",
                       _raise_live(10 * self.max_live)])
        if arr.kind in ("poisson", "renewal"):
            cause = (f"arrivals outpace the service: lower {self._rate_name()}, or shorten the horizon "
                     "(--horizon), or stop after N arrivals with --arrivals N")
        else:
            cause = "lower the number of sessions the workload creates"
        return SerqRuntimeError(
            f"at time {now:g}: more than {self.max_live:,} sessions are live at once (the limit)",
            helps=[cause, _raise_live(10 * self.max_live)])

    # -- sessions ---------------------------------------------------------------------------

    def spawn(self, run_now: bool = False) -> Session:
        """A new session: serial, trace session, ``init``, then it is ready (§1.4).

        ``run_now`` (an open arrival, the last thing its event does): when no
        other session is ready, the new one is the next to run anyway, so it
        runs here rather than through an urgent start event; the
        events-per-instant guard counts it all the same."""
        if self.live >= self.max_live:
            raise self._too_many_live()
        s = Session(self, self.next_serial)
        self.next_serial += 1
        if self.tree_slots is not None:
            p, d, r = self.tree_slots
            s.a[p], s.a[d], s.a[r] = -1.0, 0.0, float(s.serial)
            s.task = Task(s.serial, self.env.now)
            self.tree_live[s] = None
        if self.corpus is not None:
            if self.replay_order is not None:  # `arrive trace`: the trace session arriving now
                i = self.replay_order[s.serial]
            else:
                n = len(self.corpus.sessions)
                i = s.serial % n if self.program.trace.ordered else self.trace_stream.integers(n)  # type: ignore[union-attr]
            s.trace = self.corpus.sessions[i]
        env = self.env
        self._live_by(1)
        self.arrivals += 1
        self.code.init(s)
        if run_now and not env.ready_pending():
            proc = s.proc = SessionProcess(env, self.code.body(s), s, self, False)
            env.start(proc)
            env.spend()
        else:
            s.proc = SessionProcess(env, self.code.body(s), s, self)
        return s

    def spawn_child(self, parent: Session, handle: int, values: tuple[float, ...], slots: tuple[int, ...]) -> Session:
        """A child of ``parent`` (docs/subagents.md): its keys from its place in
        the tree, ``init``, then the spawn's values, then it is ready at this
        instant, after the sessions already ready (so children go in order)."""
        if self.live >= self.max_live:
            raise self._too_many_live(tree=True)
        keys = rng.child_keys(parent.rkey, parent.n_kids)
        parent.n_kids += 1
        s = Session(self, self.next_child, keys)
        self.next_child += 1
        s.up, s.handle = parent, handle
        p, d, r = self.tree_slots  # type: ignore[misc]
        a, pa = s.a, parent.a
        a[p], a[d], a[r] = float(parent.serial), pa[d] + 1.0, pa[r]
        task = s.task = parent.task
        task.left += 1  # type: ignore[union-attr]
        task.sessions += 1  # type: ignore[union-attr]
        if a[d] > task.depth:  # type: ignore[union-attr]
            task.depth = a[d]  # type: ignore[union-attr]
        self.tree_live[s] = None
        env = self.env
        self._live_by(1)
        self.code.init(s)
        for slot, v in zip(slots, values):
            a[slot] = v
        s.proc = SessionProcess(env, self.code.body(s), s, self)
        return s

    def _live_by(self, delta: int) -> None:
        """The live count moves by ``delta`` now (a session starts or ends)."""
        env = self.env
        live = env.live = env.live + delta
        avg = self.live_avg  # avg.set(now, live), inline
        now = env.now
        avg.integral += avg.value * (now - avg.last)
        avg.last = now
        avg.value = live

    def end_session(self, s: Session) -> None:
        s.ended = True
        self._live_by(-1)
        if self.stats_on:
            self.ended += 1
        if s.task is not None:
            self._task_session_ended(s, s.task)
        if s.up is not None:  # a child: its parent's join may be waiting; no closed-population replacement
            s.up.kid_ended(s.handle)
            return
        if self._closed:
            self._replaced_now()
            self.spawn()

    def _task_session_ended(self, s: Session, task: Task) -> None:
        """A session of ``task``'s tree ended: the task is complete when it was
        the last; recorded when that is after warm-up and none of its sessions
        was stuck at a pool (docs/subagents.md, "Task statistics")."""
        del self.tree_live[s]
        if s.stuck:
            task.stuck = True
        if s.up is None:
            task.turn = s.a[ir.TURN_NO]
        task.left -= 1
        if task.left:
            return
        if task.stuck:
            self.tasks_stuck += 1
        elif self.stats_on:
            self.task_log.append((task.root, task.start, self.env.now, task.sessions, int(task.depth), task.turn))

    def _replaced_now(self) -> None:
        """A closed population replaces an ended session at once; sessions that
        end without time passing, over and over, would never let it pass."""
        now = self.env.now
        if now != self._replace_at:
            self._replace_at, self._replaced = now, 0
        self._replaced += 1
        n = max(1, self.program.arrival.n)
        if self._replaced > min(1000 * n, n + REPLACEMENTS_PER_INSTANT):
            raise SerqRuntimeError(
                f"the run does not settle at time {now:g}: closed-population sessions ended "
                f"{self._replaced} times at that instant, each replaced at once")

    def client_record(self, s: Session, now: float) -> None:
        """The turn's client rows (§8.5), each sample stamped like an
        observe's: the turn's end, the session, its turn number."""
        c = self.client
        serial, turn = s.serial, int(s.a[ir.TURN_NO])
        if s.first_tok is not None:
            c["ttft"].append((now, serial, turn, s.first_tok - s.sent))
            if s.n_after >= 1:
                c["tpot"].append((now, serial, turn, (s.last_tok - s.first_tok) / s.n_after))
        c["response"].append((now, serial, turn, now - s.sent))


def _raise_with(name: str, value: float) -> str:
    shown = f"{value:.0f}" if value < 1e15 else f"{value:.3g}"
    return f"or raise the limit with the environment variable {name} (e.g. `{name}={shown} serq run …`)"


def _raise_live(value: float) -> str:
    shown = f"{value:.0f}"
    return (f"or raise the limit with `--max-live {shown}` (`max_live=` in serq.run and serq.sweep, or the "
            f"environment variable SERQ_MAX_LIVE)")


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
             engines: Mapping[str, type] | None = None, max_live: int | None = None,
             steps: bool = False) -> Any:
    """Run ``program`` and return its report (see :func:`serq.run`)."""
    from .results import build_report

    settings = program.run
    seed = settings.seed if seed is None else seed
    horizon, warmup = settings.window(horizon, warmup)
    arrivals = settings.arrivals if arrivals is None else arrivals
    if seed < 0:
        raise SerqError(f"the seed must be an unsigned integer, not {seed}")
    if arrivals is not None and not (arrivals >= 1 and float(arrivals).is_integer()):
        raise SerqError(f"arrivals must be a positive whole number, not {arrivals}")
    if max_live is not None and not (isinstance(max_live, int) and max_live >= 1):
        raise SerqError(f"max_live must be a positive whole number, not {max_live!r}")
    sim = Simulator(program, seed=int(seed), horizon=float(horizon), warmup=float(warmup),
                    arrivals=arrivals, engines=engines, max_live=max_live, steps=steps)
    try:
        sim.run()
    except SerqError:
        raise
    except KeyboardInterrupt:  # Ctrl-C: say how far the run got (the CLI prints it, exit 130)
        raise RunInterrupted(sim.env.now, horizon) from None
    except RecursionError:
        raise SerqRuntimeError("the run recursed too deeply") from None
    except ZeroDivisionError as err:  # pragma: no cover - arithmetic is IEEE in compiled code
        raise SerqRuntimeError(f"arithmetic error: {err}") from None
    return build_report(sim)

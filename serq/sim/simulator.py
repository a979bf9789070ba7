"""The simulator: one run of one program (semantics §1).

A :class:`Simulator` puts the parts of a run together and runs it: the
event kernel (:mod:`.kernel`), the deployment of pools and stages
(:mod:`.deployment`), the holds on pools (:mod:`.holds`), the session
population (:mod:`.population`), the arrivals (:mod:`.arrivals`) and the
compiled session code (:mod:`.compile`).  What it keeps itself is the run:
its settings and random streams, the report's counters, the end of warm-up,
and *settling* an instant (§1.3) after every event — run the ready sessions,
make a pass over the pools (stalled growers, then admissions), repeat while
that readied anyone, then start an iteration on every idle step stage with
work, only if no other event is pending at this instant.
"""

from __future__ import annotations

import math
import os
from numbers import Integral, Real
from typing import Any, Mapping, Sequence

from .. import ir
from .._collector import fewer
from ..errors import RunInterrupted, SerqError, SerqRuntimeError
from ..expr import base_namespace
from . import choose, choose_index, deployment, lazy, rng
from . import gauges as gauges_mod
from .arrivals import Arrivals, arrivals_of
from .compile import Compiler
from .goodput import Target
from .holds import Holds
from .kernel import Kernel
from .order import ascending
from .pool import HoldRequest, Pool
from .population import Population
from .stages.base import Stage
from .stages.queueing import PsStage
from .stages.step import StepEngine

_ONLY = (0,)  # (`_start_stirred`'s pass over one engine)

#: Run limits (docs/simulator.md, "Run guards and limits").  Both can be
#: raised with an environment variable of the same name; the live limit also
#: with ``--max-live`` / ``max_live=`` (which win over the variable).
SERQ_MAX_LIVE = 1_000_000  # sessions alive at once (about 2.5 GB of sessions)
SERQ_MAX_ARRIVALS = 100_000_000  # arrivals an open workload may make over a run
#: events a run may handle: no bound unless ``--max-events`` / ``max_events=`` or
#: ``SERQ_MAX_EVENTS`` gives one (a deterministic bound on a run's work, for tests and scripts)
SERQ_MAX_EVENTS = None


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


class Simulator:
    """One run of one program."""

    def __init__(self, program: ir.Program, *, seed: int, horizon: float, warmup: float,
                 arrivals: int | None = None, engines: Mapping[str, type] | None = None,
                 max_live: int | None = None, steps: bool = False, max_events: int | None = None,
                 goodput: tuple[Target, ...] = (), timeline: float | None = None,
                 sessions: Sequence[Mapping[str, Any]] | None = None) -> None:
        self.program = program
        #: the sessions to replay instead of the workload's arrivals (``--replay``), or None
        self.listed = sessions
        self.goodput = goodput
        self.seed = seed
        self.horizon = horizon
        self.warmup = warmup
        self.arrival_limit = arrivals
        self.env = Kernel()
        if max_events is None and os.environ.get("SERQ_MAX_EVENTS", "").strip():
            max_events = run_limit("SERQ_MAX_EVENTS", 0)
        self.env.max_events = max_events
        self.env.counter = self
        self.env.horizon = horizon
        self.ns: dict[str, Any] = base_namespace()
        self.ns["__env__"] = self.env
        self.n_attrs = len(program.attributes)
        self.stats_on = warmup <= 0.0
        # the report's counters (§9.1)
        self.events = 0
        self.arrivals = 0
        self.ended = 0
        self.turns = 0
        self.preemptions = 0
        self.dirty_ps: list[PsStage] = []  # ps stages whose rates changed this instant
        self.max_arrivals = run_limit("SERQ_MAX_ARRIVALS", SERQ_MAX_ARRIVALS)
        self.root = rng.root_key(seed)
        self.session_keys = rng.SessionKeys(self.root)
        self.machine_stream = rng.global_stream(self.root, rng.MACHINE)
        self.arrival_stream = rng.global_stream(self.root, rng.ARRIVAL)
        self.eviction_stream = rng.global_stream(self.root, rng.EVICTION)
        self.trace_stream = rng.global_stream(self.root, rng.TRACE)
        self.ns["_mrng"] = self.machine_stream
        self.ns["_arng"] = self.arrival_stream
        self.samples: list[list[tuple[float, int, int, float]]] = [[] for _ in program.observes]
        self.corpus = None
        if program.trace is not None:
            from ..traces.reader import read_trace  # (only a trace replay needs the reader)

            self.corpus = read_trace(program.trace.path)
        self.population = Population(self, run_limit("SERQ_MAX_LIVE", SERQ_MAX_LIVE) if max_live is None
                                     else max_live)
        if self.corpus is not None:
            self.population.trace_of = self._trace_session
        self.holds = Holds(self)
        self.replay: dict[str, Any] | None = None  # how an `arrive trace` replay ended (docs/replay.md)
        self.pools: list[list[Pool]] = []
        self.all_pools: list[Pool] = []
        #: how many pools have a request in their queue (``Pool.join``, ``Pool.unqueue``)
        self.queued_pools = 0
        #: the caches whose `evict by` keys are kept per entry: told when a session starts or
        #: stops waiting (``PrefixCache.touch``)
        self.kept_caches: list[Any] = []
        self.stages: list[list[Stage]] = []
        self.engines: list[StepEngine] = []
        self.gauges: Any = None  # the program's gauges (``serq.sim.gauges.Gauges``), if it has any
        self.flows: Any = None  # the flows on shared stages (``serq.sim.stages.shared.FlowGroup``), if any
        deployment.build(self, engines or {})
        self.holds.passed = [p for p in self.all_pools if p.admit_via is None]
        for i, pool in enumerate(self.holds.passed):
            pool.pass_no = i
        if steps:  # the step log (docs/calibration.md): every iteration as its own event, recorded
            from array import array

            for engine in self.engines:
                engine.coalesce = False  # the plain path: the same report (docs/simulator.md)
                engine.step_log = array("d")
        #: the program's claims, read on this run's path (serq/sim/claims.py); None without any
        self.claims: Any = None
        if program.claims:
            from .claims import ClaimMonitor

            self.claims = ClaimMonitor(self)
        #: after how many arrivals the workload brings no more (None: it goes on to the horizon)
        self.arrivals_stop: int | None = None
        self.code = Compiler(self).compile(program)
        #: the `choose` statements whose random tie-break is drawn only where read (serq/sim/choose.py)
        self.choose_plans = choose.plans(program)
        #: the `choose` statements whose keys are kept per candidate (serq/sim/choose_index.py)
        self.choose_index = choose_index.build(self, program)
        self.pool_by_id = {id(p): p for p in self.all_pools}
        #: the places in ``engines`` of the engines that may start an iteration at the next settle
        #: (an iteration ended there, a job came, a request joined a pool it admits): settle asks
        #: those alone, not every engine after every event; ``stirs`` counts the additions
        self.stirred: set[int] = set(range(len(self.engines)))
        self.stirs = 0
        for i, engine in enumerate(self.engines):
            engine.settle_no = i
            for pool in engine.admit_pools:
                pool.admitters.append(i)
        #: whether those are all that can start (an engine class's own `has_work` may read anything)
        self.stir_only = all(type(e).has_work is StepEngine.has_work and type(e).submit is StepEngine.submit
                             and type(e)._iter_end is StepEngine._iter_end for e in self.engines)
        #: coalesced runs that pass over other events (serq/sim/lazy.py), where the program allows
        self.lazy: Any = None
        if lazy.wanted(self):
            self.lazy = self.env.lazy = lazy.LazyRuns(self)
        if program.gauges:
            # with passing runs on many engines, gauges that read only pools read a log of the pools'
            # changes: the runs' growths need not be replayed before every instant for them
            # (serq/sim/gauges.py)
            logged = (self.lazy is not None and gauges_mod.LOGGED and len(self.engines) >= gauges_mod.LOG_ENGINES
                      and not deployment.gauges_read_stages(program))
            deployment.gauges(self, logged)
            if logged:
                self.lazy.merged = False
        #: the timeline's recorder (serq/sim/timeline.py), with ``timeline=DT``; None: none is kept
        self.timeline: Any = None
        if timeline is not None:
            from .timeline import Recorder

            self.timeline = Recorder(self, timeline)

    def _trace_session(self, serial: int) -> Any:
        """The trace session a new root replays: in file order (``ordered``), or drawn."""
        corpus = self.corpus
        assert corpus is not None and self.program.trace is not None
        n = len(corpus.sessions)
        i = serial % n if self.program.trace.ordered else self.trace_stream.integers(n)
        return corpus.sessions[i]

    # -- the parts' state the report and older callers read ----------------------------------

    @property
    def live(self) -> int:
        """Sessions live now (the kernel's guard reads the same count)."""
        return self.env.live

    @property
    def live_avg(self) -> Any:
        return self.population.live_avg

    def spawn(self, run_now: bool = False) -> Any:
        """A new root session (:meth:`Population.spawn`)."""
        return self.population.spawn(run_now)

    def waiting_changed(self, s: Any) -> None:
        """Session ``s`` started or stopped waiting in a pool's queue, or ended:
        the caches whose `evict by` keys read ``waiting`` key its entry again."""
        caches = self.kept_caches
        if caches:
            if self.lazy is not None:  # the passing runs' evictions before now see the state before
                self.lazy.catch_up(self.env.now)
            for cache in caches:
                cache.touch(s.serial)

    def admit(self, req: HoldRequest, amounts: list[tuple[float, float]]) -> None:
        """Grant a waiting hold (:meth:`Holds.admit`); what an ``admit_next`` override calls."""
        self.holds.admit(req, amounts)

    # -- running --------------------------------------------------------------------------

    def run(self) -> None:
        env = self.env
        if self.warmup > 0.0:
            env.timer(self.warmup, [self._end_warmup])
        arrivals: Arrivals = arrivals_of(self)
        arrivals.check()
        arrivals.start()
        # the run stops once `stop` sessions have arrived and none is live: --arrivals N, or the
        # end of the trace under `arrive trace`
        stop = self.arrivals_stop = arrivals.stop
        done = None if stop is None else (lambda: self.arrivals >= stop and env.live == 0)
        # With no pool and no step stage, settling is running the ready sessions
        # and rescheduling the dirty ps stages: the kernel does the first itself.
        gauges = self.gauges
        env.loop(self.horizon, self.settle, bool(self.all_pools or self.engines), self.dirty_ps, done,
                 None if gauges is None else gauges.sample)
        arrivals.finish()
        limit = self.arrival_limit
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
                self.holds.try_admit_all()
                if env.ready_pending():
                    continue
            break
        if self.engines and not (q and q[0][0] <= env.now):
            idle = False
            if self.stir_only:
                idle = self._start_stirred()
            else:
                for engine in self.engines:
                    if not engine.iterating and engine.has_work() and not engine.start_iteration():
                        idle = True
            if idle and self.lazy is not None:  # it tries again at every settle: the passing runs' ends too
                self.lazy.cut_all()
        if self.dirty_ps:  # (emptied in place: the kernel's loop holds this list)
            dirty = self.dirty_ps[:]
            self.dirty_ps.clear()
            for st in dirty:
                st.reschedule()

    def _start_stirred(self) -> bool:
        """Settle's loop over the engines, in their order, asking only those that
        may start (``stirred``; one added while the loop runs is asked in turn
        if it comes later): whether one was left idle with work."""
        stirred = self.stirred
        if not stirred:
            return False
        engines = self.engines
        idle = False
        # one stirred later in the order: this pass (with one engine there is no later one, and
        # the pass is that engine alone, without `ascending`'s generator)
        for i in _ONLY if len(engines) == 1 else ascending(stirred, self, "stirs"):
            engine = engines[i]
            stirred.discard(i)
            if not engine.iterating and engine.has_work():
                if not engine.start_iteration():
                    idle = True
                if not engine.iterating:  # (still idle: asked again at the next settle)
                    stirred.add(i)
        return idle

    def _end_warmup(self, _ev: Any) -> None:
        self.events += 1
        self.stats_on = True
        now = self.env.now
        self.population.live_avg.reset(now)
        for pool in self.all_pools:
            for avg in (pool.used_avg, pool.cached_avg, pool.queue_avg, pool.holders_avg):
                avg.reset(now)
        for ms in self.stages:
            for st in ms:
                st.reset_stats(now)


def simulate(program: ir.Program, *, seed: int | None = None, horizon: float | None = None,
             warmup: float | None = None, arrivals: int | None = None,
             engines: Mapping[str, type] | None = None, max_live: int | None = None,
             steps: bool = False, progress: bool = False, max_events: int | None = None,
             goodput: tuple[Target, ...] = (), timeline: float | bool | None = None,
             sessions: Sequence[Mapping[str, Any]] | None = None) -> Any:
    """Run ``program`` and return its report (see :func:`serq.run`)."""
    from .results import build_report

    settings = program.run
    for name, x in (("horizon", horizon), ("warmup", warmup), ("arrivals", arrivals)):  # (from Python: the
        if x is not None and (isinstance(x, bool) or not isinstance(x, Real)):  # CLI's are numbers)
            raise SerqError(f"{name} must be a number, not {x!r}")
    seed = settings.seed if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:  # (a NumPy integer is one)
        raise SerqError(f"the seed must be an unsigned integer, not {seed!r}")
    seed = int(seed)
    horizon, warmup = settings.window(horizon, warmup)
    arrivals = settings.arrivals if arrivals is None else arrivals
    if arrivals is not None and not (arrivals >= 1 and float(arrivals).is_integer()):
        raise SerqError(f"arrivals must be a positive whole number, not {arrivals}")
    if max_live is not None and not (isinstance(max_live, int) and max_live >= 1):
        raise SerqError(f"max_live must be a positive whole number, not {max_live!r}")
    if max_events is not None and not (isinstance(max_events, int) and max_events >= 1):
        raise SerqError(f"max_events must be a positive whole number, not {max_events!r}")
    interval = None
    if timeline is not None and timeline is not False:
        from ..timeline import DEFAULT_SAMPLES, check_interval

        interval = float(horizon) / DEFAULT_SAMPLES if timeline is True else timeline
        if timeline is True and not interval > 0.0:  # (a subnormal horizon's 200th rounds to 0: one
            interval = float(horizon)  # interval, the horizon, samples its two ends)
        try:
            check_interval(interval, float(horizon))
        except ValueError as err:
            from ..errors import UsageError

            raise UsageError(str(err)) from None
        interval = float(interval)
    sim = Simulator(program, seed=int(seed), horizon=float(horizon), warmup=float(warmup),
                    arrivals=arrivals, engines=engines, max_live=max_live, steps=steps, max_events=max_events,
                    goodput=goodput, timeline=interval, sessions=sessions)
    try:
        with fewer():  # (serq/_collector.py)
            if progress:
                from ..progress import RunProgress

                env = sim.env
                with RunProgress(lambda: env.now, float(horizon)):
                    sim.run()
            else:
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

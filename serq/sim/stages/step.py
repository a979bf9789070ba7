"""The continuous-batching step engine (semantics §4).

An iteration hands a token budget to the residents in serving order (one
token per decoding job, up to ``chunk`` per prefilling one), growing each
job's hold block by block before its tokens are committed, then admits
waiting requests from the pools it serves (``admit via``) with the budget
left; it lasts ``cost``.  One engine needs one SimPy ``Timeout`` per
iteration and nothing else: no process, resource or store is created per
iteration.

:class:`StepEngine` is a template method: a subclass (picked per stage with
``serq.run(program, engines={"engine": MyEngine})`` or ``--engine
engine=package.module:MyEngine``) overrides *hooks*, each one decision
(``order_residents``, ``plan_tokens``, ``select_waiting``, ``choose_victim``,
``iteration_cost``) or one notification (``on_finish``, ``on_remove``).
:data:`serq.sim.stages.hooks.HOOKS` is the one table of them: what each
decides, which keep the coalesced decode runs, which may be declared
:func:`~serq.sim.stages.hooks.pure`, and the guard an override runs in (one
that raises or returns what the engine cannot use stops the run with a
:class:`~serq.sim.stages.hooks.HookError` naming the class and the hook).

The iteration's state (``assign``, ``left``, ``cursor``) is explicit on the
engine, so an iteration can be reasoned about (and runs of identical decode
iterations coalesced) without re-reading the loop.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

from simpy.events import Event

from ... import expr, ir
from ...errors import SerqError, SerqRuntimeError
from ..cache import EPS
from ..order import total_key
from ..stats import LogHistogram, fold
from . import candidate, hooks, waiting
from .coalesce import RunPlanner
from .decode_run import DecodeRun, minus
from .base import Job, Stage, check_work
from .candidate import Candidate

if TYPE_CHECKING:
    from ..pool import HoldRequest, Pool
    from ..session import Session


class StepView:
    """What ``cost`` reads (moment Step): the iteration as scheduled."""

    __slots__ = ("tokens", "decoders", "prefilled", "kv_decode", "kv_prefill", "residents", "attention", "srng")

    def __init__(self) -> None:
        self.tokens = self.decoders = self.prefilled = 0.0
        self.kv_decode = self.kv_prefill = self.residents = self.attention = 0.0
        self.srng: Any = None


class ServeView:
    """What a ``serve by`` key reads (moment Serve): one resident, its
    session's attributes, and the stage's totals."""

    __slots__ = ("totals", "job", "a", "srng", "decoding", "admission", "remaining")

    def __init__(self, engine: "StepEngine", job: Job) -> None:
        self.totals = _BudgetView(engine)
        self.job = job
        self.a = job.session.a if job.session is not None else None
        self.srng = engine.sim.machine_stream
        self.decoding = 0.0 if job.prefill else 1.0
        self.admission = float(job.session.adm_seq) if job.session is not None else 0.0
        self.remaining = job.work

    def __getattr__(self, name: str) -> float:  # residents, decoders, kv_decode, kv_prefill
        return getattr(self.totals, name)


class StepEngine(Stage):
    """A ``step`` stage: vLLM's scheduler loop (``scheduler.py``)."""

    kind = "step"
    #: Advance runs of identical decode iterations in one event (same report);
    #: False runs every iteration as its own event.
    coalesce = True
    #: The older way to declare ``order_residents``, ``plan_tokens`` and
    #: ``iteration_cost`` overrides pure (all of them): prefer
    #: :func:`~serq.sim.stages.hooks.pure` on each.
    coalesce_safe = False
    #: the timeline's sink (``serq.sim.timeline.Tokens``), told the tokens of every iteration
    #: at its end; None (no timeline asked for): nothing is told
    timeline: Any = None

    def __init__(self, sim: Any, decl: Any, label: str, index: int | None, *,
                 budget: Callable[[Any], float], chunk: Callable[[Any], float],
                 cost: Callable[[Any], float], serve: str | tuple, serve_keys: Any = None,
                 memory: "Pool | None" = None, only: Callable[[Any], float] | None = None) -> None:
        super().__init__(sim, decl, label, index)
        self.budget_fn = budget
        self.chunk_fn = chunk
        self.cost_fn = cost
        self.serve = serve if isinstance(serve, str) else "by"
        self.serve_keys = serve_keys  # callable of a ServeView → tuple, for `serve by`
        #: `serve only (P)`: P of a ServeView, 1 to serve the resident this iteration, 0 to pass it
        #: over (None: every resident is served)
        self.only_fn = only
        self.memory = memory
        self.admit_pools: list["Pool"] = []  # pools with `admit via` this stage, in declaration order
        self.settle_no = -1  # its place in ``sim.engines`` (Simulator.settle)
        self.srng = sim.machine_stream
        self.residents: list[Job] = []  # in the order of their sessions' latest admissions
        # the iteration in flight
        self.iterating = False
        self.assign: list[tuple[Job, float]] = []
        self.epoch = 0
        self.left = 0.0  # while planning: tokens not yet handed out
        self.cursor = 0  # while planning in admission order: the next resident
        self.planning = False
        self.admitting_left: float | None = None  # `budget_left` during an admission attempt
        # statistics (§8.4)
        self.t_prefill_only = self.t_decode_only = self.t_mixed = 0.0
        self.t_decoders = 0.0
        self.dec_iters = 0
        self.dec_sum = 0.0
        self.dec_cost = 0.0
        self.itl = LogHistogram()
        self._default_order = type(self).order_residents is StepEngine.order_residents and self.serve in (
            "admission", "exclusive_prefill", "exclusive_prefills")
        # the serving order of the iteration being planned, and the residents it is of
        self._keep_order = False
        self._order: list[Job] | None = None
        self._order_of: list[Job] = []
        self._prepared = False
        #: the coalesced decode run in flight (None: one iteration), and who plans them
        self.run: DecodeRun | None = None
        self.planner: RunPlanner | None = None
        self._view: StepView | None = None
        #: the step log (``serq run --steps``): None, or a flat array of the
        #: columns :data:`serq.report.STEP_COLUMNS` per iteration; the simulator sets it, and
        #: turns coalescing off for the stage (docs/calibration.md)
        self.step_log: Any = None
        # B8: since when every attempt found work but no budget (None: it scheduled since)
        self.starved_at: float | None = None
        self.starved_budget = 0.0
        # since when every attempt scheduled nothing and `serve only` passed over a resident
        # (None: it scheduled since)
        self.excluded_at: float | None = None
        over = hooks.overridden(type(self))
        cls = type(self)
        # the engine's own `_next` and `has_waiting`, not a subclass's: start_iteration does their work inline
        self._own_next = cls._next is StepEngine._next and cls.has_waiting is StepEngine.has_waiting
        # `select_waiting` overridden: admit_next asks it (else pool.select(), unchanged)
        self._default_select = "select_waiting" not in over
        self._default_admit = "admit_next" not in over
        self._default_plan = "plan_tokens" not in over
        self._slots: dict[str, int] | None = None  # session attribute name → slot, for candidates
        #: lines for the report's warnings (a deprecated override)
        self.notes: list[str] = []
        if over:
            hooks.guard_hooks(self)  # a user's class: its overridden hooks are checked
            if not self._default_admit:
                cls = type(self)
                self.notes.append(
                    f"stage `{label}`: engine class `{cls.__module__}.{cls.__qualname__}` overrides `admit_next`, "
                    "which is deprecated (admitting is the engine's mechanism): override `select_waiting` to "
                    "choose the request, and the engine admits it")
            wrong = hooks.misdeclared(type(self))
            if wrong:
                raise SerqError(f"engine class `{type(self).__qualname__}`: @pure on `{wrong[0]}`, which is not a "
                                "hook that may be declared pure",
                                helps=["@pure applies to order_residents, plan_tokens and iteration_cost "
                                       "(docs/policies.md, \"The hook contract\")"])
        # notifications: called only when overridden (the default engine pays nothing)
        self._on_finish = self.on_finish if "on_finish" in over else None
        self._on_remove = self.on_remove if "on_remove" in over else None
        #: whether a prefill's decode may be submitted by the engine (`submit_then`): no hook and
        #: none of the methods that take a job in or out replaced
        self._chains = not over and all(getattr(cls, m) is getattr(StepEngine, m) for m in _CHAIN_METHODS)

    # -- probes ---------------------------------------------------------------------------

    def present(self) -> float:
        return float(len(self.residents))

    def busy(self) -> float:
        return float(len(self.assign)) if self.iterating else 0.0

    def work(self) -> float:
        return fold(self._work_now(), 0.0)

    def _work_now(self) -> list[float]:
        """Each resident's work left now: in a run passing over other events
        (serq/sim/lazy.py), less a token for each iteration ended by now, whose
        tokens are not committed yet."""
        run = self.run
        if run is not None and run.passing:
            done = self.sim.lazy.committed(self)
            return [minus(j.work, 1.0, done) for j in self.residents]
        return [j.work for j in self.residents]

    def budget_left(self) -> float:
        """Tokens the next iteration leaves for admissions (§4.4)."""
        if self.admitting_left is not None:
            return self.admitting_left
        run = self.run
        if run is not None and run.passing and self.memory is not None:  # `budget` and `chunk`
            self.sim.lazy.read(self.memory)  # may read the memory the residents hold: its growths first
        ctx = _BudgetView(self)
        budget, chunk = self.budget_fn(ctx), self.chunk_fn(ctx)
        if run is not None and run.passing:  # every resident decodes; the engine's own
            want = fold((1.0 if w > 1.0 else w for w in self._work_now()), 0.0)  # plan_tokens: min(1, left)
        elif self.only_fn is None:
            if self._default_plan:  # `plan_tokens`, inline
                want = fold([((1.0 if j.work > 1.0 else j.work) if not j.prefill else
                              (chunk if chunk > 0.0 and chunk < j.work else j.work)) for j in self.residents], 0.0)
            else:
                want = fold((self.plan_tokens(j, chunk) for j in self.residents), 0.0)
        else:  # the residents `serve only` passes over ask for nothing
            want = fold((self.plan_tokens(j, chunk) for j in self.residents if self._serves(j)), 0.0)
        return max(0.0, budget - want)

    # -- jobs -------------------------------------------------------------------------------

    def submit(self, s: "Session", work: float, mode: str | None, growing: Any, label: str) -> Event:
        if not 0.0 <= work < math.inf:  # (NaN too)
            check_work(label, work)
        if work == 0.0:
            return self.immediate()
        run = self.run
        if run is not None and run.passing:  # a new resident: the passing run ends with its iteration
            lazy = self.sim.lazy
            lazy.catch_up(self.env.now)
            lazy.cut(self)
        job = Job(s, work, Event(self.env), self.env.now)
        job.prefill = mode == "prefill"
        if growing is not None:
            found = s.innermost(growing)
            if found is None:
                raise SerqRuntimeError(f"{label}: `growing {growing.label}` outside a hold of `{growing.label}`")
            job.hold, job.k = found
        return self._enter(job)

    def submit_then(self, s: "Session", work: float, mode: str, growing: Any, label: str, then: float) -> Event:
        """:meth:`submit` of a prefill whose session goes on, at its end, to
        submit a decode of ``then`` tokens to this stage, growing the same
        pool, and does nothing else between (the compiler's pairs: ``then`` reads
        nothing that may change meanwhile).  When the prefill ends and ``then``
        is a positive number of tokens, the engine submits the decode itself,
        with the event the session waits on, and sets ``s.chained``: the
        session wakes once, at the decode's end.  Else it wakes at the
        prefill's end and submits the decode as usual (a decode of 0 tokens,
        or an amount that is an error, is then the usual one)."""
        s.chained = False
        ev = self.submit(s, work, mode, growing, label)
        if work != 0.0 and self._chains and 0.0 < then < math.inf:
            s.job[1].then = then  # type: ignore[index]
        return ev

    def _chain(self, prefill: Job, work: float) -> None:
        """The decode of ``work`` tokens that follows ``prefill`` (just ended,
        its session not woken): submitted now, as the session would, with the
        session's event and the prefill's hold."""
        s = prefill.session
        job = Job(s, work, prefill.ev, self.env.now)
        job.hold, job.k = prefill.hold, prefill.k
        s.chained = True
        self._enter(job)

    def _enter(self, job: Job) -> Event:
        """A submitted job joins the residents; the event its session waits on."""
        s = job.session
        sim = self.sim
        sim.stirred.add(self.settle_no)  # it may start at the next settle
        sim.stirs += 1
        # residents stay in the order of their sessions' admissions (vLLM's `running`)
        key = s.adm_seq
        res = self.residents
        i = len(res)
        while i > 0 and res[i - 1].session.adm_seq > key:
            i -= 1
        res.insert(i, job)
        if self.planning and i < self.cursor:
            self.cursor += 1
        self.count(+1)
        s.job = (self, job)
        return job.ev  # type: ignore[return-value]

    def remove(self, job: Job) -> None:
        """A resident leaves without finishing (its session was preempted)."""
        if job.done:
            return
        run = self.run
        if run is not None and run.passing:  # its tokens so far are committed first
            self.sim.lazy.materialize(self)
        job.done = True
        i = self.residents.index(job)
        del self.residents[i]
        if self.planning and i < self.cursor:
            self.cursor -= 1
        # in place: an iteration being planned holds this very list
        self.assign[:] = [(j, t) for j, t in self.assign if j is not job]
        self.count(-1)
        if self._on_remove is not None:
            self._on_remove(job)

    def has_work(self) -> bool:
        if self.residents:
            return True
        for p in self.admit_pools:  # (a loop, not any(): settle asks every idle engine after every event)
            if p.put_queue:
                return True
        return False

    # -- the hooks --------------------------------------------------------------------------

    def order_residents(self) -> list[Job]:
        """The serving order: admission order (``serve admission``), decodes
        first, or ascending ``serve by`` keys, ties in admission order."""
        res = self.residents
        if self.serve in ("admission", "exclusive_prefill", "exclusive_prefills"):
            return res
        if self.serve == "decode_first":
            return sorted(res, key=lambda j: j.prefill)
        keys = self.serve_keys
        return sorted(res, key=lambda j: total_key(keys(ServeView(self, j))))

    def plan_tokens(self, job: Job, chunk: float) -> float:
        """The tokens a resident asks for: one to decode; to prefill, what is
        left, at most ``chunk`` when it is positive (0 means no cap)."""
        if not job.prefill:
            return 1.0 if job.work > 1.0 else job.work
        if chunk > 0.0 and chunk < job.work:
            return chunk
        return job.work

    def _serves(self, job: Job) -> bool:
        """Whether ``serve only (P)`` lets ``job`` take tokens now: P read for
        it (moment Serve, the totals as the residents stand at this read);
        True without the clause.  P is a test: 0 or 1, else a run-time error."""
        only = self.only_fn
        if only is None:
            return True
        v = only(ServeView(self, job))
        if v == 1.0:
            return True
        if v == 0.0:
            return False
        shown = f"{v:g}" if v == v else "NaN"
        raise SerqRuntimeError(f"stage `{self.label}`: `serve only` is {shown} for a resident, not 0 or 1",
                               at=self.decl.sites.get("only"), helps=["write a test such as `decoding` or `x > 0`"])

    def admit_next(self, left: float) -> bool:
        """Admit the selected waiting request of the first non-empty pool this
        engine serves, its header read with ``budget_left = left``; run the
        admitted session until it blocks.  Whether one was admitted: the
        first request that does not fit stops admission for the iteration."""
        for pool in self.admit_pools:
            req = pool.select() if self._default_select else self._select(pool)
            if req is None:
                if pool.put_queue:
                    return False  # select_waiting chose none: admission stops for the iteration
                continue
            self.admitting_left = left
            try:
                amounts = pool.fits(req)
            finally:
                self.admitting_left = None
            if amounts is None:
                return False
            pool.unqueue(req)
            self.admitting_left = left
            try:
                self.sim.holds.admit(req, amounts)
            finally:
                self.admitting_left = None
            self.env.run_ready()
            return True
        return False

    def select_waiting(self, candidates: list[Candidate]) -> Candidate | None:
        """Which waiting request of a pool to try next: one of ``candidates``
        (the pool's waiting requests in queue order, at least one, as read-only
        :class:`~serq.sim.stages.candidate.Candidate` views), or None to admit
        none this iteration.  The engine then admits it if it fits; if not,
        admission stops for the iteration (head-of-line blocking, as vLLM).

        The default is the pool's own choice: the head, or under ``queue by``
        the smallest keys (ties in queue order).  A preempted request at the
        front of the queue is tried first without asking this hook.  An
        override replaces ``queue by`` for this engine's admissions; it must be
        a function of what it reads (no state of its own that calling changes):
        a coalesced decode run does not call it while no candidate could be
        admitted (docs/simulator.md, "Coalesced decode runs")."""
        req = candidates[0]._req.pools[0].select()
        for c in candidates:
            if c._req is req:
                return c
        return candidates[0]

    def _select(self, pool: "Pool") -> "HoldRequest | None":
        """``pool.select()`` through ``select_waiting``: the request to try next."""
        q = pool.put_queue
        if not q:
            return None
        if q[0].front:
            return q[0]  # a preempted hold first, whatever the policy (as `select`)
        chosen = self.select_waiting(candidate.candidates(self, q))
        return None if chosen is None else chosen._req

    def attr_slot(self, name: str) -> int:
        """The slot of session attribute ``name`` in ``session.a`` (what
        :meth:`Candidate.attr` reads); an unknown or hidden name is a
        :class:`~serq.errors.SerqError` with the nearest names.  A policy that
        reads an attribute asks for its slot in ``__init__``, so a program
        without it fails before the run."""
        slots = self._slots
        if slots is None:
            slots = self._slots = candidate.attr_slots(self)
        slot = slots.get(name)
        if slot is None:
            raise candidate.unknown_attr(self, name)
        return slot

    def choose_victim(self, pool: "Pool", grower: "Session") -> "Session | None":
        """Whom a growth that does not fit preempts: vLLM's ``running[-1]``,
        the most recently admitted resident holding the pool (§4.5)."""
        return self.sim.holds.lifo_victim(pool)

    def iteration_cost(self, view: StepView) -> float:
        """The iteration's duration from the ``cost`` expression."""
        return self.cost_fn(view)

    def on_finish(self, job: Job) -> None:
        """Notification: ``job``'s run ended, all its work served (after the
        stage's statistics counted it; ``job.size`` is the work it came with)."""

    def on_remove(self, job: Job) -> None:
        """Notification: ``job`` left without finishing (its session was
        preempted; its tokens will be computed again)."""

    # -- one iteration (§4.3) -----------------------------------------------------------------

    def _prepare(self) -> None:
        """Facts about the stage's expressions, read once before the first iteration."""
        step = self.decl.step
        self._budget_const = step.budget.value if isinstance(step.budget, ir.Num) else None
        self._chunk_const = step.chunk.value if isinstance(step.chunk, ir.Num) else None
        reads = {x.name for x in expr.walk(step.cost) if isinstance(x, ir.Ctx)}
        self._kv_needed = self.memory is not None and bool(reads & {"kv_decode", "kv_prefill"})
        if self.step_log is not None:  # the log records kv_decode and kv_prefill whatever the cost reads
            self._kv_needed = self.memory is not None
        cls = type(self)
        #: the overrides that make this engine run iteration by iteration (docs/policies.md)
        self.run_blockers = hooks.run_blockers(cls)
        safe_hooks = not self.run_blockers
        steady = all(_steady(e) for e in (step.budget, step.chunk, step.cost))
        # `serve only (P)` keeps the runs when P reads nothing a run changes: in a run every
        # resident decodes, none arrives or leaves before its last iteration, so `decoding`,
        # `admission`, `residents`, `decoders` and the attributes are what they were at its first
        # iteration, which served everyone; P on `remaining`, `kv_*` or a probe goes one by one
        steady = steady and (step.only is None or waiting.run_constant(step.only))
        ordered = self.serve in ("admission", "exclusive_prefill", "exclusive_prefills", "decode_first") or (
            isinstance(step.serve, tuple) and waiting.run_ordered(step.serve))
        self._view = StepView() if cls.iteration_cost is StepEngine.iteration_cost else None
        self._keep_order = cls.order_residents is StepEngine.order_residents and (
            self.serve == "decode_first" or (isinstance(step.serve, tuple) and _fixed_while_planning(step.serve)))
        if self.coalesce and safe_hooks and steady and ordered:
            sim = self.sim
            state_pools = frozenset(
                waiting.state_pools(step.budget, sim, self.memory) | waiting.state_pools(step.chunk, sim, self.memory)
                | waiting.state_pools(step.cost, sim, None))
            self.planner = RunPlanner(
                self, kv_tracked=self._kv_needed, state_pools=state_pools,
                heads=waiting.HeadAnalysis(self, self._default_select, self._default_admit),
                default_plan=self._default_plan, view=self._view)
        self._budget_view = _BudgetView(self)
        self._prepared = True

    def start_iteration(self) -> bool:
        """Plan and start an iteration; False when there is nothing to run."""
        if not self._prepared:
            self._prepare()
        sim = self.sim
        budget = self._budget_const
        chunk = self._chunk_const
        if budget is None or chunk is None:
            ctx = self._budget_view  # (one view an engine: it reads the engine as it stands)
            ctx.srng = self.srng
            budget = self.budget_fn(ctx) if budget is None else budget
            chunk = self.chunk_fn(ctx) if chunk is None else chunk
        if budget != budget:
            site = self.decl.sites.get("budget")
            raise SerqRuntimeError(f"stage `{self.label}`: the budget is NaN, not a number of tokens", at=site)
        self.left = budget
        assign: list[tuple[Job, float]] = []
        self.assign = assign
        self.cursor = 0
        self._order = None
        self.planning = True
        preempted0 = sim.preemptions
        # `serve exclusive prefill`: one prefill alone; `… prefills`: every prefill that fits whole
        multi = self.serve == "exclusive_prefills"
        exclusive = multi or self.serve == "exclusive_prefill"
        prefilling = False  # a prefill is in the batch (`exclusive prefills`)
        only = self.only_fn is not None
        # under `serve only`, a prefill the predicate passes over keeps no decode out
        prefill_resident = exclusive and any(j.prefill and self._serves(j) for j in self.residents)
        served: set[int] = set()
        attention = 0.0
        passed = 0
        default_order = self._default_order and self._own_next
        default_plan = self._default_plan
        try:
            if default_order and default_plan and not exclusive and not only:  # the usual engine
                attention = self._plan_plain(budget, chunk, preempted0)
            else:
                while True:
                    if default_order:  # `self._next(served)`, inline: the residents in admission order
                        res = self.residents
                        c = self.cursor
                        if c < len(res):
                            job = res[c]
                            self.cursor = c + 1
                        else:
                            job = None
                    else:
                        job = self._next(served)
                    if job is None:
                        if self.left > 0.0 and sim.preemptions == preempted0:
                            if default_order:
                                for pool in self.admit_pools:  # `self.has_waiting()`, inline
                                    if pool.put_queue:
                                        break
                                else:
                                    break
                            elif not self.has_waiting():
                                break
                            if self.admit_next(self.left):
                                continue
                        break
                    if only and not self._serves(job):
                        passed += 1  # (semantics §4.3 2b) no token this iteration; still a resident
                        continue
                    s = job.session
                    if default_plan:  # `self.plan_tokens(job, chunk)`, inline
                        work = job.work
                        if not job.prefill:
                            wish = 1.0 if work > 1.0 else work
                        elif chunk > 0.0 and chunk < work:
                            wish = chunk
                        else:
                            wish = work
                    else:
                        wish = self.plan_tokens(job, chunk)
                    if exclusive:
                        if not job.prefill:
                            if prefill_resident:
                                continue
                        elif not prefilling:  # the prefill runs alone: earlier decodes leave the batch
                            for j, t in assign:
                                if j.hold is not None:
                                    j.hold.pos[j.k] -= t
                            assign.clear()
                            self.left = budget
                        elif wish > self.left:
                            break  # a later prompt that does not fit whole stops the batch (vLLM v0)
                    left = self.left
                    tokens = wish if wish < left else left
                    if tokens <= 0.0:
                        continue
                    req = job.hold
                    if req is not None:
                        if s.stall is not None:
                            continue  # stalled growing from an earlier iteration: no tokens
                        k = job.k
                        pos = req.pos[k]
                        need = pos + tokens - req.alloc[k]
                        if need > EPS and sim.holds.grow(s, req, k, need, engine=self) is not True:
                            continue  # preempted (it is no longer a resident) or stalled
                        if job.prefill:
                            attention += tokens * (pos + tokens / 2.0)
                        req.pos[k] = pos + tokens
                        req.grown = True
                    elif job.prefill:
                        attention += tokens * tokens / 2.0
                    assign.append((job, tokens))
                    self.left = left - tokens
                    if exclusive and job.prefill:
                        if not multi:
                            break
                        prefilling = prefill_resident = True  # later decodes stay out
                    if self.left <= 0.0:
                        break
        finally:
            self.planning = False
        preempted = sim.preemptions != preempted0
        if not assign and not preempted:
            if budget > 0.0:
                self.starved_at = None
            elif self.starved_at is None:
                self.starved_at = self.env.now  # work waits and no token can be scheduled
                self.starved_budget = budget
            if only:
                if not passed:
                    self.excluded_at = None
                elif self.excluded_at is None:
                    self.excluded_at = self.env.now  # waits for an event that changes what P reads
            return False
        self.starved_at = None
        if only:
            self.excluded_at = None
        return self._launch(attention, preempted, budget)

    def _plan_plain(self, budget: float, chunk: float, preempted0: int) -> float:
        """The loop of :meth:`start_iteration` for an engine that serves its
        residents in admission order, plans tokens its own way and serves
        every resident, without ``exclusive`` prefills: the same steps, with
        the cursor and the budget left in locals (written back to the engine
        around each call that may read or move them: a growth may preempt, an
        admission adds a resident).  The attention of the prefills planned."""
        sim = self.sim
        grow = sim.holds.grow
        res = self.residents
        assign = self.assign
        admit_pools = self.admit_pools
        attention = 0.0
        left = budget
        c = 0
        n = len(res)  # (read again after each call-out: an admission or a preemption changes it)
        while True:
            if c < n:
                job = res[c]
                c += 1
            else:
                if left > 0.0 and sim.preemptions == preempted0:
                    for pool in admit_pools:  # `self.has_waiting()`, inline
                        if pool.put_queue:
                            break
                    else:
                        break
                    self.cursor, self.left = c, left
                    if self.admit_next(left):
                        c, left, n = self.cursor, self.left, len(res)
                        continue
                break
            work = job.work  # `self.plan_tokens(job, chunk)`, inline
            if not job.prefill:
                wish = 1.0 if work > 1.0 else work
            elif chunk > 0.0 and chunk < work:
                wish = chunk
            else:
                wish = work
            tokens = wish if wish < left else left
            if tokens <= 0.0:
                continue
            req = job.hold
            if req is not None:
                s = job.session
                if s.stall is not None:
                    continue  # stalled growing from an earlier iteration: no tokens
                k = job.k
                pos = req.pos[k]
                need = pos + tokens - req.alloc[k]
                if need > EPS:
                    self.cursor, self.left = c, left
                    grew = grow(s, req, k, need, engine=self)
                    c, left, n = self.cursor, self.left, len(res)
                    if grew is not True:
                        continue  # preempted (it is no longer a resident) or stalled
                if job.prefill:
                    attention += tokens * (pos + tokens / 2.0)
                req.pos[k] = pos + tokens
                req.grown = True
            elif job.prefill:
                attention += tokens * tokens / 2.0
            assign.append((job, tokens))
            left = left - tokens
            if left <= 0.0:
                break
        self.cursor, self.left = c, left
        return attention

    @property
    def run_length(self) -> int:
        """Iterations the iteration in flight stands for: a coalesced run's length, else 1."""
        run = self.run
        return 1 if run is None else run.length

    def has_waiting(self) -> bool:
        """Whether a request waits in a pool this stage admits for (``admit via``)."""
        for pool in self.admit_pools:
            if pool.put_queue:
                return True
        return False

    def _next(self, served: set[int]) -> Job | None:
        """The first resident in serving order not yet served this iteration.
        The order is asked for again at each pick (an admission or a
        preemption changes the residents), but kept while the residents are
        the same when nothing else it reads can change while an iteration is
        planned (``_keep_order``)."""
        if self._default_order:
            res = self.residents
            if self.cursor < len(res):
                job = res[self.cursor]
                self.cursor += 1
                return job
            return None
        if self._keep_order:
            order = self._order
            if order is None or self._order_of != self.residents:
                order = self._order = self.order_residents()
                self._order_of = list(self.residents)
        else:
            order = self.order_residents()
        for job in order:
            if id(job) not in served:
                served.add(id(job))
                return job
        return None

    def cost_of(self, tokens: float, prefilled: float, decoders: float, kv_d: float, kv_p: float,
                attention: float) -> float:
        """``iteration_cost`` of an iteration scheduled so (moment Step)."""
        view = self._view
        if view is None:  # a subclass's iteration_cost may keep its view
            view = StepView()
        view.srng = self.srng
        view.tokens, view.prefilled, view.decoders = tokens, prefilled, decoders
        view.kv_decode, view.kv_prefill = kv_d, kv_p
        view.residents = float(len(self.residents))
        view.attention = attention
        return self.iteration_cost(view)

    def _launch(self, attention: float, preempted: bool, budget: float) -> bool:
        tokens = prefilled = decoders = kv_d = kv_p = 0.0
        memory = self.memory if self._kv_needed else None
        assign = self.assign
        # each job's memory, for the planner (which is called only when every job decodes)
        kvs: list[float] | None = [0.0] * len(assign) if memory is not None else None
        for i, (job, t) in enumerate(assign):
            tokens += t
            if job.prefill:
                prefilled += t
                if memory is not None:
                    kv_p += job.session.held_in(memory)
            else:
                decoders += 1.0
                if kvs is not None:
                    kv = kvs[i] = job.session.held_in(memory)  # type: ignore[arg-type]
                    kv_d += kv
        raw = self.cost_of(tokens, prefilled, decoders, kv_d, kv_p, attention)
        cost = raw if raw > 0.0 else 0.0
        if tokens > 0.0 and not cost > 0.0:
            raise SerqRuntimeError(
                f"stage `{self.label}`: an iteration of {tokens:g} tokens costs {raw:g}; "
                "an iteration that schedules tokens lasts a positive time", at=self.decl.sites.get("cost"))
        if not math.isfinite(cost):
            raise SerqRuntimeError(f"stage `{self.label}`: an iteration costs {cost:g}, not a finite time",
                                   at=self.decl.sites.get("cost"))
        now = self.env.now
        if self.step_log is not None:
            self.step_log.extend((now, cost, tokens, decoders, prefilled, kv_d, kv_p, attention,
                                  float(len(self.residents))))
        self.iterations += 1
        self._account(now, cost, prefilled, decoders)
        self.iterating = True
        self.epoch += 1
        run = None
        planner = self.planner
        if planner is not None and not preempted and not prefilled and decoders == len(self.residents) > 0:
            run = planner.plan(now, cost, budget, kvs)
            lazy = self.sim.lazy
            if run is not None and lazy is not None and not lazy.off:  # it may pass over other events
                # (serq/sim/lazy.py)
                run = lazy.admit(self, run, now)
                if run is not None:
                    self.run = run
                    entry = self.env.timer_entry(run.end, [self._iter_end])
                    entry[3].epoch = self.epoch  # type: ignore[attr-defined]
                    lazy.register(self, run, entry)
                    return True
        self.run = run
        end = now + cost if run is None else run.end
        timer = self.env.timer(end - now, [self._iter_end])
        timer.epoch = self.epoch  # type: ignore[attr-defined]
        return True

    def _account(self, start: float, cost: float, prefilled: float, decoders: float) -> None:
        """Step statistics of an iteration that runs [start, start + cost] (§8.4)."""
        sim = self.sim
        lo = start if start > sim.warmup else sim.warmup
        hi = start + cost
        if hi > sim.horizon:
            hi = sim.horizon
        span = hi - lo
        if span > 0.0:
            if decoders:
                if prefilled:
                    self.t_mixed += span
                else:
                    self.t_decode_only += span
                self.t_decoders += decoders * span
            elif prefilled:
                self.t_prefill_only += span
        if decoders and sim.stats_on:
            self.dec_iters += 1
            self.dec_sum += decoders
            self.dec_cost += cost

    def _iter_end(self, timer: Any) -> None:
        """Commit the iteration's tokens; finished jobs' sessions become ready.
        A coalesced run commits each of its iterations in turn, and plans each
        next one (one more token of position per job) at its start."""
        if timer.epoch != self.epoch:
            self.sim.events += 1
            return
        self.iterating = False
        self.sim.stirred.add(self.settle_no)  # it may start again at the next settle
        if self.timeline is not None:
            self.timeline.served(self, self.env.now)
        assign = self.assign
        run = self.run
        if run is not None:
            if run.passing:  # a run that passed over other events: no longer watched (with gauges,
                self.sim.lazy.finish(self)  # every run's growths before now are replayed first)
            gauges = self.sim.gauges
            if gauges is not None:  # a gauge read at a growth sees the run's iteration in flight
                gauges.replaying = self
            run.replay(self, assign)
            if gauges is not None:
                gauges.replaying = None
            self.run = None
        self.sim.events += 1
        now = self.env.now
        finished = []
        itl = self.itl if self.sim.stats_on else None
        x0 = 0.0
        same = 0  # gaps not recorded yet: `same` of them, each `x0` (the decoders of the last iteration share one)
        for job, tokens in assign:
            if job.done:
                continue
            job.work -= tokens
            if not job.prefill:  # a token, the gap since the session's last (equal gaps recorded together)
                s = job.session
                if s.first_tok is None:  # a turn that never prefilled: its first token
                    s.first_tok = s.last_tok = now
                else:
                    x = now - s.last_tok
                    if x == x0:
                        same += 1
                    else:
                        if same and itl is not None:
                            itl.add_repeat(x0, same)
                        x0, same = x, 1
                    s.n_after += 1
                    s.last_tok = now
            if job.work <= EPS:
                finished.append(job)
        if same and itl is not None:
            itl.add_repeat(x0, same)
        self.assign = []
        for job in finished:
            self.residents.remove(job)
            job.done = True
            self.count(-1)
            self.finished(job)
            if self._on_finish is not None:
                self._on_finish(job)
            s = job.session
            if job.prefill:
                s.prefill_done(now, self)
            s.job = None
            if job.then is not None:  # (`submit_then`) its decode, submitted here
                self._chain(job, job.then)
                continue
            self.wake(job)

    def gap(self, x: float) -> None:
        """An inter-token gap ending on this stage (§4.8)."""
        if self.sim.stats_on:
            self.itl.add(x)


#: The methods through which a job comes and goes: an engine class that replaces one does not
#: submit a prefill's decode itself (`StepEngine.submit_then`).
_CHAIN_METHODS = ("submit", "_enter", "finished", "wake", "count", "remove", "_iter_end")


def _steady(e: ir.Expr) -> bool:
    """An expression that gives the same value at every iteration of an
    unchanged batch: no draw, no clock, no stage probe."""
    for x in expr.walk(e):
        if isinstance(x, ir.Draw) or (isinstance(x, ir.Ctx) and x.name == "now"):
            return False
        if isinstance(x, ir.Probe) and isinstance(x.target, ir.StageRef):
            return False
    return True


def _fixed_while_planning(keys: Any) -> bool:
    """`serve by` keys whose values stay the same while an iteration is
    planned, for the same residents: no draw (each evaluation moves the
    stream), no probe and no held memory (growths change them); ``remaining``,
    the mode, the admission number, the counts and attributes do not change
    until the iteration ends (a session admitted or preempted meanwhile
    changes the residents, and the order is asked for again)."""
    for k in keys:
        for x in expr.walk(k):
            if isinstance(x, (ir.Draw, ir.Probe)):
                return False
            if isinstance(x, ir.Ctx) and x.name in ("kv_decode", "kv_prefill"):
                return False
    return True


class _BudgetView:
    """What ``budget`` and ``chunk`` read (moment Budget): the residents as
    they stand, before the iteration."""

    __slots__ = ("engine", "srng")

    def __init__(self, engine: StepEngine) -> None:
        self.engine = engine
        self.srng = engine.srng

    @property
    def residents(self) -> float:
        return float(len(self.engine.residents))

    @property
    def decoders(self) -> float:
        return float(sum(1 for j in self.engine.residents if not j.prefill))

    @property
    def kv_decode(self) -> float:
        return self._held(False)

    @property
    def kv_prefill(self) -> float:
        return self._held(True)

    def _held(self, prefill: bool) -> float:
        """Units the decoding (or prefilling) residents hold in the stage's memory pool."""
        pool = self.engine.memory
        if pool is None:
            return 0.0
        return fold((j.session.held_in(pool) for j in self.engine.residents if j.prefill == prefill), 0.0)

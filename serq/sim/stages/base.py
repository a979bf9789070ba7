"""What every stage has: jobs, the ``run`` entry point and its statistics
(semantics §5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simpy.events import Event

from ...errors import SerqRuntimeError
from ..stats import CountAverage, Estimator

if TYPE_CHECKING:
    from ..pool import HoldRequest
    from ..session import Session
    from ..simulator import Simulator


class Job:
    """One ``run``: ``work`` left (or a ps finish tag), the session waiting for
    it, and for a step stage its mode and the hold it grows.

    A :class:`~serq.sim.stages.step.StepEngine` hook reads a resident's
    ``remaining``, ``size`` (the work it came with), ``decoding``, ``prefill``
    and ``session`` (its attributes are ``session.a``, its admission order
    ``session.adm_seq``) and never changes them: the engine alone does."""

    __slots__ = (
        "session", "work", "size", "prefill", "hold", "k", "enqueued", "started", "ev", "done", "seq",
        "first", "timer", "then",
    )

    def __init__(self, session: "Session", work: float, ev: Event | None, now: float) -> None:
        self.session = session
        self.work = work
        self.size = work  # the work it came with
        self.prefill = False
        self.hold: "HoldRequest | None" = None  # the hold a `growing` job grows
        self.k = -1  # the pool's index in that hold
        self.enqueued = now
        self.started = now
        self.ev = ev
        self.done = False
        self.seq = 0
        self.first = True  # a prefill's end is the turn's first token (§4.8)
        self.timer: Any = None
        #: a prefill's decode, when the engine submits it itself at the prefill's end: its work,
        #: a positive number of tokens (:meth:`StepEngine.submit_then`), else None
        self.then: float | None = None


    @property
    def remaining(self) -> float:
        """Tokens (or seconds) of work left."""
        return self.work

    @property
    def decoding(self) -> bool:
        return not self.prefill


def check_work(label: str, work: float) -> None:
    if not work >= 0.0 or work == float("inf"):
        shown = f"{work:g}" if work == work else "NaN"
        raise SerqRuntimeError(f"{label}: the amount is {shown}, not a number of units, tokens or seconds", at=label)


class Stage:
    """A stage (or one member of a stage array).  Subclasses implement
    :meth:`submit` and keep ``jobs`` (the jobs present) up to date."""

    kind = "stage"

    def __init__(self, sim: "Simulator", decl: Any, label: str, index: int | None) -> None:
        self.sim = sim
        self.env = sim.env
        self.decl = decl
        self.name = decl.name
        self.label = label
        self.index = index
        self.n = 0  # jobs present
        self.presence = CountAverage(sim.env.now)  # their count's time averages (number, util)
        self.completed = 0
        self.wait_sum = 0.0
        self.service_sum = 0.0
        self.iterations = 0
        #: the online estimates, kept when the program reads them (docs/offload.md)
        self.est: Estimator | None = None

    # -- probes -----------------------------------------------------------------

    def present(self) -> float:
        return float(self.n)

    def busy(self) -> float:
        return float(self.n)

    def work(self) -> float:
        return 0.0

    def budget_left(self) -> float:
        raise SerqRuntimeError(f"`budget_left({self.label})`: stage `{self.label}` is not a step stage")

    def est_lambda(self) -> float:
        return self.est.rates()[0] if self.est is not None else 0.0

    def est_rho(self) -> float:
        return self.est.rates()[1] if self.est is not None else 0.0

    def est_wait(self) -> float:
        return self.est.wait if self.est is not None else 0.0

    def price(self, s_hit: float, ds: float) -> float:
        return self.est.price(s_hit, ds) if self.est is not None else ds

    # -- jobs -------------------------------------------------------------------

    def submit(self, s: "Session", work: float, mode: str | None, growing: Any, label: str) -> Event:
        """Start a job of ``work`` for session ``s``; the event the session waits on."""
        raise NotImplementedError

    def immediate(self) -> Event:
        """A run of zero work completes at once: the session is ready again now."""
        ev = Event(self.env)
        self.env.make_ready(ev)
        return ev

    def count(self, delta: int) -> None:
        """``delta`` jobs come (or go) now."""
        n = self.n = self.n + delta
        self.presence.set(self.env.now, n)

    def finished(self, job: Job) -> None:
        """Statistics of a completed job (after warm-up) (§5), and the estimates (always)."""
        est = self.est
        if est is not None:
            est.observe(job.started, job.started - job.enqueued, self.env.now - job.started)
        if self.sim.stats_on:
            now = self.env.now
            self.completed += 1
            self.wait_sum += job.started - job.enqueued
            self.service_sum += now - job.started

    def remove(self, job: Job) -> None:
        """Take a job away (its session was preempted or ended)."""
        raise NotImplementedError

    def wake(self, job: Job) -> None:
        """The job's session becomes ready (ready FIFO: an urgent event now)."""
        ev = job.ev
        if ev is not None and ev.callbacks is not None:
            self.env.make_ready_pending(ev)

    def reset_stats(self, now: float) -> None:
        self.presence.reset(now)

"""The state of an exact machine: its sessions, hold attempts, jobs, pools and
step stages (plain classes with ``__slots__``), and the records a step reports."""

from __future__ import annotations

from dataclasses import dataclass
from collections import deque
from typing import TYPE_CHECKING, Any, Union

from .code import HoldSpec
from .exact import Q

if TYPE_CHECKING:
    from .code import Code

WAITING, GRANTED, RELEASED = 0, 1, 2
ARRIVAL, ITER_END, DELAY_END = 0, 1, 2


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
    now: Q
    cost: Q
    tokens: Q
    decoders: Q
    prefilled: Q
    kv_decode: Q
    kv_prefill: Q
    attention: Q
    residents: Q
    demand: Q
    served: Q
    arrived: Q


@dataclass(frozen=True, slots=True)
class NeedSession:
    """The machine is paused: session ``serial`` arrives at ``time``; its
    attributes after ``init`` are wanted (:meth:`Machine.supply`)."""

    serial: int
    time: Q


@dataclass(frozen=True, slots=True)
class Ended:
    """Session ``serial`` ended at ``time``."""

    serial: int
    time: Q


@dataclass(frozen=True, slots=True)
class Observed:
    """``observe`` number ``obs`` (an index into ``Program.observes``) by session ``serial``."""

    obs: int
    serial: int
    time: Q
    value: Q


Record = Union[Iteration, NeedSession, Ended, Observed]


# ---------------------------------------------------------------------------
# the state


class Session:
    __slots__ = ("serial", "a", "pc", "holds", "job", "adm", "stall")

    def __init__(self, serial: int, a: list) -> None:
        self.serial = serial
        self.a = a
        self.pc = -1  # the instruction it waits at (-1: not started); it resumes after it
        self.holds: list[Req] = []  # granted or waiting attempts, outermost first
        self.job: Job | None = None
        self.adm = -1  # the order of its latest admission (vLLM's `running` order)
        self.stall: tuple | None = None  # a stalled growth: (pool, request, k, units)


class Req:
    __slots__ = ("s", "spec", "alloc", "pos", "held", "state", "joined", "grown")

    def __init__(self, s: Session, spec: HoldSpec, now: Q) -> None:
        n = len(spec.pools)
        self.s = s
        self.spec = spec
        self.alloc: list[Q] = [0] * n
        self.pos: list[Q] = [0] * n
        self.held = [False] * n
        self.state = WAITING
        self.joined = now
        self.grown = False


class Job:
    __slots__ = ("s", "work", "prefill", "hold", "k", "done", "stage", "started")

    def __init__(self, s: Session, work: Q, prefill: bool, stage: int, now: Q) -> None:
        self.s = s
        self.work = work
        self.prefill = prefill
        self.hold: Req | None = None
        self.k = -1
        self.done = False
        self.stage = stage
        self.started = now


class Pool:
    __slots__ = ("used", "holders", "queue", "growers")

    def __init__(self) -> None:
        self.used: Q = 0
        self.holders: list[Req] = []
        self.queue: list[Req] = []
        self.growers: list[Session] = []


class Engine:
    __slots__ = ("index", "residents", "assign", "iterating", "served", "cursor", "planning", "left", "admitting")

    def __init__(self, index: int) -> None:
        self.index = index
        self.residents: list[Job] = []  # in the order of their sessions' latest admissions
        self.assign: list[tuple[Job, Q]] = []
        self.iterating = False
        self.served: Q = 0
        self.cursor = 0
        self.planning = False
        self.left: Any = 0
        self.admitting: Any = None  # `budget_left` during an admission attempt


class Core:
    """The machine's state (the slots of every part: :class:`~serq.prove.holds.Holds`,
    :class:`~serq.prove.engine.Engines`, :class:`~serq.prove.machine.Machine`) and the
    operations one part calls in another."""

    __slots__ = ("_code", "now", "done", "sessions", "next_serial", "arrived", "_adm", "_seq", "_heap", "_ready",
                 "_pools", "_engines", "_djobs", "_stalled", "_env", "_ctx", "_out", "_paused", "_attrs",
                 "_announce", "_batch", "_times", "_ti", "_gap", "_left", "on_iteration")

    _code: "Code"
    now: Q
    done: bool
    sessions: dict[int, Session]  # live sessions by serial, in arrival order
    next_serial: int
    arrived: int
    _adm: int  # the next admission number
    _seq: int  # the last event number given
    _heap: list[tuple]  # (time, event number, kind, payload)
    _ready: deque[Session]
    _pools: list[Pool]
    _engines: list[Engine | None]
    _djobs: list[dict[Job, None]]  # per delay stage, its jobs in submission order
    _stalled: int
    _env: Any
    _ctx: dict[str, Any]
    _out: list[Any]
    _paused: bool
    _attrs: tuple | None
    _announce: NeedSession | None
    _batch: int
    _times: list[Q] | None
    _ti: int
    _gap: Q | None
    _left: int | None
    #: called as ``on_iteration(machine, record)`` when an iteration starts, its batch formed
    #: and its record made, before it is marked running (where the step log is written): a
    #: claim read then sees the pools and stages as they are at that instant (None: nothing)
    on_iteration: Any

    def _push(self, t: Q, kind: int, payload: Any) -> None:
        raise NotImplementedError

    def _run_ready(self) -> None:
        raise NotImplementedError

    def _fits(self, req: Req) -> list[tuple[Q, Q]] | None:
        raise NotImplementedError

    def _admit(self, req: Req, amounts: list[tuple[Q, Q]]) -> None:
        raise NotImplementedError

    def _grow(self, s: Session, req: Req, k: int, units: Q) -> bool:
        raise NotImplementedError

    def _held_in(self, s: Session, pidx: int) -> Q:
        raise NotImplementedError

    def _select(self, pidx: int) -> Req | None:
        raise NotImplementedError

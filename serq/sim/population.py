"""The sessions of a run: creating roots and spawned children, ending them,
the session trees and their task statistics, the client rows, and the live
limit (semantics §1.4, §7, §8.5; docs/subagents.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .. import ir
from ..errors import SerqError, SerqRuntimeError
from . import rng
from .kernel import SessionProcess
from .session import Session, Task
from .goodput import meets
from .settling import WindowSeries, start_width
from .stats import TimeAverage

if TYPE_CHECKING:
    from .simulator import Simulator

#: The serial of the first spawned child; later children count up from it, so
#: roots keep their serials 0, 1, 2 … (and their streams) under any design.
CHILD_SERIALS = 1 << 32
#: Extra closed-population replacements at one instant, beyond one per member.
REPLACEMENTS_PER_INSTANT = 100_000


def raise_live(value: float) -> str:
    """The help line that says how to raise the live limit."""
    shown = f"{value:.0f}"
    return (f"or raise the limit with `--max-live {shown}` (`max_live=` in serq.run and serq.sweep, or the "
            f"environment variable SERQ_MAX_LIVE)")


class Population:
    """Every session of one run.  Roots get serials 0, 1, 2 … in arrival order,
    children serials from :data:`CHILD_SERIALS` up; the kernel's ``live`` is
    the count of sessions alive, ``live_avg`` its time average."""

    def __init__(self, sim: "Simulator", max_live: int) -> None:
        self.sim = sim
        self.kernel = sim.env
        program = sim.program
        self.max_live = max_live
        self.next_serial = 0
        self.next_child = CHILD_SERIALS
        self.created = 0  # sessions created, counted against an event budget only when there is one
        self.live_avg = TimeAverage(0.0, 0.0)
        #: the live count over equal windows of the whole run, for the settling verdict
        self.backlog = WindowSeries(start_width(sim.horizon))
        self.closed = program.arrival.kind == "closed"  # an ended root is replaced at once
        self.closed_n = max(1, program.arrival.n) if self.closed else 1
        self._replace_at = -1.0  # the instant closed-population sessions were last replaced at, and how often
        self._replaced = 0
        #: which trace session a new root replays (None: the program reads no trace)
        self.trace_of: Callable[[int], Any] | None = None
        # the session tree (docs/subagents.md): the slots of parent, depth and root, when the program spawns
        self.tree_slots: tuple[int, int, int] | None = None
        if program.handles:
            at = {name: i for i, name in enumerate(program.attributes)}
            self.tree_slots = (at["parent"], at["depth"], at["root"])
        # task statistics (docs/subagents.md, "Task statistics"), in a program that spawns: the tasks
        # completed after warm-up, not stuck, as (root, start, end, sessions, depth, root's turn_no) in
        # completion order; the sessions of every tree live now; the tasks completed with a stuck session
        self.task_log: list[tuple[int, float, float, int, int, float]] = []
        self.tree_live: dict[Session, None] = {}
        self.tasks_stuck = 0
        # the client rows' samples, (time, session, turn, value) as an observe's
        self.client: dict[str, list[tuple[float, int, int, float]]] = {"ttft": [], "tpot": [], "response": []}
        if sim.goodput:
            self.client["goodput"] = []
        #: listed sessions (``--replay``): sets a new root's listed attributes after ``init``
        self.override: Callable[[Session], None] | None = None
        #: what to do about a workload that makes more sessions than the limit (the arrivals say)
        self.outpace: Callable[[], str] = lambda: "lower the number of sessions the workload creates"

    # -- creating sessions -------------------------------------------------------------------

    def spawn(self, run_now: bool = False) -> Session:
        """A new root session: serial, trace session, ``init``, then it is ready (§1.4).

        ``run_now`` (an open arrival, the last thing its event does): when no
        other session is ready, the new one is the next to run anyway, so it
        runs here rather than through an urgent start event; the
        events-per-instant guard counts it all the same."""
        kernel = self.kernel
        if kernel.live >= self.max_live:
            raise self.too_many_live()
        sim = self.sim
        if kernel.max_events is not None:
            self.budget()
        s = Session(sim, self.next_serial)
        self.next_serial += 1
        if self.tree_slots is not None:
            p, d, r = self.tree_slots
            s.a[p], s.a[d], s.a[r] = -1.0, 0.0, float(s.serial)
            s.task = Task(s.serial, kernel.now)
            self.tree_live[s] = None
        if self.trace_of is not None:
            s.trace = self.trace_of(s.serial)
        self.live_by(1)
        sim.arrivals += 1
        code = sim.code
        code.init(s)
        if self.override is not None:
            self.override(s)
        if sim.claims is not None:
            sim.claims.session_started(s)
        if run_now and not kernel.ready_pending():
            proc = s.proc = SessionProcess(kernel, code.body(s), s, sim, False)
            kernel.start(proc)
            kernel.spend()
        else:
            s.proc = SessionProcess(kernel, code.body(s), s, sim)
        return s

    def spawn_child(self, parent: Session, handle: int, values: tuple[float, ...], slots: tuple[int, ...]) -> Session:
        """A child of ``parent`` (docs/subagents.md): its keys from its place in
        the tree, ``init``, then the spawn's values, then it is ready at this
        instant, after the sessions already ready (so children go in order)."""
        kernel = self.kernel
        if kernel.live >= self.max_live:
            raise self.too_many_live(tree=True)
        sim = self.sim
        if kernel.max_events is not None:
            self.budget()
        keys = rng.child_keys(parent.rkey, parent.n_kids)
        parent.n_kids += 1
        s = Session(sim, self.next_child, keys)
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
        self.live_by(1)
        sim.code.init(s)
        for slot, v in zip(slots, values):
            a[slot] = v
        if sim.claims is not None:
            sim.claims.session_started(s)
        s.proc = SessionProcess(kernel, sim.code.body(s), s, sim)
        return s

    def budget(self) -> None:
        """A new session counts against the run's event budget (``--max-events``) as an
        event does: `spawn (1e9)`, `batch(1e6)` start all their sessions inside one event."""
        self.created += 1
        kernel = self.kernel
        if self.sim.events + self.created > kernel.max_events:  # type: ignore[operator]
            raise kernel.exhausted(kernel.now)

    def live_by(self, delta: int) -> None:
        """The live count moves by ``delta`` now (a session starts or ends)."""
        kernel = self.kernel
        live = kernel.live = kernel.live + delta
        self.live_avg.set(kernel.now, live)
        self.backlog.set(kernel.now, live)

    def too_many_live(self, tree: bool = False) -> SerqError:
        now = self.kernel.now
        if tree:
            return SerqRuntimeError(
                f"at time {now:g}: a `spawn` would make more than {self.max_live:,} sessions live at once "
                "(the limit): the session trees grow without end",
                helps=["a tree whose sessions spawn one child or more on average never dies out: "
                       "lower the count of the `spawn`, or spawn only on some branch",
                       raise_live(10 * self.max_live)])
        return SerqRuntimeError(
            f"at time {now:g}: more than {self.max_live:,} sessions are live at once (the limit)",
            helps=[self.outpace(), raise_live(10 * self.max_live)])

    # -- ending sessions -----------------------------------------------------------------------

    def end_session(self, s: Session) -> None:
        """The session's body returned (its process calls this)."""
        sim = self.sim
        if s.leases:
            sim.holds.end_leases(s)
        s.ended = True
        sim.waiting_changed(s)
        self.live_by(-1)
        if sim.stats_on:
            sim.ended += 1
        if sim.claims is not None:
            sim.claims.session_ended()
        if s.task is not None:
            self._task_session_ended(s, s.task)
        if s.up is not None:  # a child: its parent's join may be waiting; no closed-population replacement
            s.up.kid_ended(s.handle)
            return
        if self.closed:
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
        elif self.sim.stats_on:
            self.task_log.append((task.root, task.start, self.kernel.now, task.sessions, int(task.depth), task.turn))

    def _replaced_now(self) -> None:
        """A closed population replaces an ended session at once; sessions that
        end without time passing, over and over, would never let it pass."""
        now = self.kernel.now
        if now != self._replace_at:
            self._replace_at, self._replaced = now, 0
        self._replaced += 1
        n = self.closed_n
        if self._replaced > min(1000 * n, n + REPLACEMENTS_PER_INSTANT):
            raise SerqRuntimeError(
                f"the run does not settle at time {now:g}: closed-population sessions ended "
                f"{self._replaced} times at that instant, each replaced at once")

    # -- the client rows (§8.5) ----------------------------------------------------------------

    def client_record(self, s: Session, now: float) -> None:
        """The turn's client rows, each sample stamped like an observe's: the
        turn's end, the session, its turn number."""
        c = self.client
        serial, turn = s.serial, int(s.a[ir.TURN_NO])
        ttft = tpot = None
        if s.first_tok is not None:
            ttft = s.first_tok - s.sent
            c["ttft"].append((now, serial, turn, ttft))
            if s.n_after >= 1:
                tpot = (s.last_tok - s.first_tok) / s.n_after
                c["tpot"].append((now, serial, turn, tpot))
        response = now - s.sent
        c["response"].append((now, serial, turn, response))
        goodput = self.sim.goodput
        if goodput:  # --goodput: 1 when the turn met every target (docs/report.md, "Goodput")
            c["goodput"].append((now, serial, turn, 1.0 if meets(goodput, ttft, tpot, response) else 0.0))

"""The event kernel: SimPy's environment, subclassed, and everything that
reaches inside SimPy (semantics §1).

:class:`Kernel` is a :class:`simpy.Environment` (as SimPy's own ``rt.py``
subclasses it) that owns the run loop: events in (time, priority, id) order,
the ready FIFO of §1.3 as ``URGENT`` events at the current time, the
events-per-instant guard, cheap timers, and throwing a preemption into a
session's process.  :class:`SessionProcess` is the session's SimPy process
with a leaner resume than SimPy's.

This module is the only one that touches SimPy's underscored fields
(``_now``, ``_queue``, ``_eid``, ``_ok``, ``_value``, ``_defused``,
``_resume``, ``_target``…); ``tests/sim/test_kernel.py`` greps for them.  The
rest of the simulator reads the clock as ``kernel.now`` (a plain attribute,
kept equal to SimPy's ``_now``), looks at the heap as ``kernel.queue`` and
makes events ready, timed or failed through the methods below.
"""

from __future__ import annotations

import heapq
import math
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any, Callable

import simpy
from simpy.events import NORMAL, PENDING, URGENT, Event, Initialize, Process, Timeout
from simpy.exceptions import Interrupt

from ..errors import SerqError, SerqRuntimeError

if TYPE_CHECKING:
    from .session import Session
    from .simulator import Simulator

_new = object.__new__

#: Events handled at one instant (sessions' wake-ups included) before the run
#: is declared not to settle: this many, plus ``EVENTS_PER_SESSION`` for every
#: session live when the instant began (a session can become ready at most
#: 1 000 times at one instant, §1.3; each wake-up may follow a job's end).
EVENTS_PER_INSTANT = 100_000
EVENTS_PER_SESSION = 3_000


class Kernel(simpy.Environment):
    """The simulator's environment: SimPy's, with the loop serQ runs.

    ``now`` is a plain attribute here (SimPy's is a property over ``_now``):
    the kernel sets both whenever time moves, which only its loop does."""

    now: float = 0.0  # shadows Environment.now: an instance attribute, read at C speed

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        #: the event heap, (time, priority, id, event): ``queue[0]`` is the next event
        self.queue: list[Any] = self._queue  # (time, priority, id, event) tuples
        # the events-per-instant guard: the instant it counts, the events it has left, its cap
        self.instant = -1.0
        self.room = 0
        self.cap = 0
        #: sessions live now (the guard's cap grows with them); the population keeps it
        self.live = 0
        #: the first run-time error a callback recorded (raised by the loop after its event)
        self.error: SerqError | None = None
        #: the coalesced runs that pass over other events (``serq.sim.lazy.LazyRuns``), told
        #: of every timer set at one of their iterations' ends before it is pushed; None: none
        self.lazy: Any = None
        #: the most events a run handles, as its report counts them (``Simulator.events``, a
        #: coalesced run's iterations one by one), sessions created counted too
        #: (``Population.budget``); None: no bound (``--max-events``)
        self.max_events: int | None = None
        self.counter: Any = None  # what holds that count (the simulator)
        self.horizon = math.inf

    # -- time and the guard -----------------------------------------------------------------

    def set_now(self, t: float) -> None:
        """Move the clock to ``t`` (the end of a run: the horizon)."""
        self._now = self.now = t

    def new_instant(self, t: float) -> None:
        """Start counting the events of the instant ``t`` (§1.3's guard)."""
        self.instant = t
        self.room = self.cap = EVENTS_PER_INSTANT + EVENTS_PER_SESSION * self.live

    def spend(self) -> None:
        """Count one event (or a wake-up handled without one) against the instant."""
        self.room -= 1
        if self.room < 0:
            raise self.unsettled(self.now)

    def unsettled(self, t: float) -> SerqError:
        return SerqRuntimeError(
            f"the run does not settle at time {t:g}: it handled more than {self.cap:,} events at that instant "
            "without time advancing",
            helps=["look for sessions that end or finish work of 0 seconds at once, over and over "
                   f"(in a closed population each is replaced at once), or for times too small to change "
                   f"the clock at {t:g}"])

    def exhausted(self, t: float) -> SerqError:
        return SerqRuntimeError(
            f"the run stopped at time {t:g} of {self.horizon:g}: it handled its budget of {self.max_events:,} events "
            "(sessions created count as events)",
            helps=["raise it (--max-events N, max_events=N, SERQ_MAX_EVENTS=N) or shorten the horizon"])

    def fail(self, err: SerqError) -> None:
        """Record a run-time error met inside a callback; the loop raises it."""
        if self.error is None:
            self.error = err

    # -- events -------------------------------------------------------------------------------

    def ready_pending(self) -> bool:
        """Whether a session is ready (an urgent event waits at this instant)."""
        q = self._queue
        return bool(q) and q[0][1] == URGENT

    def make_ready(self, ev: Event) -> None:
        """Succeed ``ev`` now, ahead of the instant's other events (the ready FIFO)."""
        ev._ok = True
        ev._value = None
        heappush(self._queue, (self._now, URGENT, next(self._eid), ev))  # (``schedule(ev, URGENT)``)

    def make_ready_pending(self, ev: Event) -> None:
        """:meth:`make_ready` unless ``ev`` was triggered already (a job's end
        its session waits on, woken once)."""
        if ev._value is PENDING:
            ev._ok = True
            ev._value = None
            heappush(self._queue, (self._now, URGENT, next(self._eid), ev))

    def timer(self, delay: float, callbacks: list[Any]) -> Timeout:
        """``Timeout(self, delay)`` with these ``callbacks``: the same event, at the
        same time (``now + delay``) and in the same place among its ties (the next
        event id), without the constructor's calls.  ``delay`` is a checked,
        non-negative time."""
        t = _new(Timeout)
        t.env = self
        t.callbacks = callbacks
        t._value = None
        t._delay = delay
        t._ok = True
        when = self._now + delay
        lazy = self.lazy
        if lazy is not None and when <= lazy.latest:
            lazy.tie(when)
        heappush(self._queue, (when, NORMAL, next(self._eid), t))
        return t

    def timer_entry(self, when: float, callbacks: list[Any]) -> tuple[float, int, int, Timeout]:
        """:meth:`timer_at`, giving the heap entry (for :meth:`unschedule`), and
        without telling the passing runs: a run's own end, placed by them."""
        t = _new(Timeout)
        t.env = self
        t.callbacks = callbacks
        t._value = None
        t._delay = when - self._now
        t._ok = True
        entry = (when, NORMAL, next(self._eid), t)
        heappush(self._queue, entry)
        return entry

    def unschedule(self, entry: tuple[float, int, int, Event]) -> None:
        """Take a timer out of the heap: it never happens (a coalesced run cut short)."""
        q: list[Any] = self._queue
        i = q.index(entry)
        last = q.pop()
        if i < len(q):  # the last entry takes its place, and moves down or up to where it belongs
            q[i] = last
            heapq._siftup(q, i)  # type: ignore[attr-defined]
            heapq._siftdown(q, 0, i)  # type: ignore[attr-defined]

    def timer_at(self, when: float, callbacks: list[Any]) -> Timeout:
        """A timer that fires at the instant ``when`` exactly (not ``now + (when − now)``)."""
        lazy = self.lazy
        if lazy is not None and when <= lazy.latest:
            lazy.tie(when)
        return self.timer_entry(when, callbacks)[3]  # type: ignore[return-value]

    def fire(self, ev: Event) -> None:
        """Succeed ``ev`` and run its callbacks now, without an event: the
        waiter would be the next to run anyway (no other session is ready).
        The guard counts it as an event."""
        ev._ok = True
        ev._value = None
        callbacks, ev.callbacks = ev.callbacks, None  # type: ignore[assignment]
        for callback in callbacks:  # type: ignore[union-attr]
            callback(ev)
        self.room -= 1
        if self.room < 0:
            raise self.unsettled(self._now)

    def wake(self, ev: Event) -> None:
        """``ev``'s waiter becomes ready: at once when no other session is
        ready (:meth:`fire`), else behind the ready ones (:meth:`make_ready`)."""
        q = self._queue
        if q and q[0][1] == URGENT:
            self.make_ready(ev)
        else:
            self.fire(ev)

    def throw(self, proc: "SessionProcess", cause: Any) -> None:
        """Throw ``Interrupt(cause)`` into a session's process at its ``yield``:
        like SimPy's ``Process.interrupt``, but detached from what it waited on
        now, so nothing it waited on can resume it first."""
        target = proc._target
        if target is not None and target.callbacks is not None:
            try:
                target.callbacks.remove(proc._resume)
            except ValueError:
                pass
        ev = Event(self)
        ev._ok = False
        ev._value = Interrupt(cause)
        ev._defused = True
        ev.callbacks = [proc._resume]
        self.schedule(ev, URGENT)

    # -- the loop -------------------------------------------------------------------------------

    def run_ready(self) -> None:
        """Run every ready session (an urgent event at this instant) until it blocks."""
        q = self._queue
        if not q or q[0][1] != URGENT:
            return
        now = self._now
        if now != self.instant:
            self.new_instant(now)
        while q and q[0][1] == URGENT:
            # SimPy's Environment.step; a session's end may count against the room
            _t, _, _, event = heappop(q)
            callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                raise _failure(event)
            self.room -= 1
            if self.room < 0:
                raise self.unsettled(now)
            if self.error is not None:
                raise self.error

    def loop(self, horizon: float, settle: Callable[[], None], heavy: bool, dirty: list[Any],
             done: Callable[[], bool] | None, sample: Callable[[float], None] | None = None) -> None:
        """Handle events up to ``horizon``; the clock ends at the horizon or at
        the last event when ``done()`` says the run is over.  After each event
        the run settles (``settle()``); with ``heavy`` false (no pool, no step
        stage) settling is only running the ready sessions, and ``settle()``
        is called only while ``dirty`` (ps stages to reschedule) is not empty.
        ``sample(t)`` (the gauges) is called at the end of every instant: once
        its events are handled and the next event is later."""
        q = self._queue
        self.horizon = horizon
        limit = math.inf if self.max_events is None else float(self.max_events)
        counter = self.counter if self.counter is not None else _NO_COUNT
        # passing runs' growths, replayed before every new instant when gauges read them (serq/sim/lazy.py)
        eager = self.lazy if self.lazy is not None and self.lazy.merged else None
        settle()
        if sample is not None:
            sample(self.now)
        while q:
            t = q[0][0]
            if t > horizon:
                self._now = self.now = horizon
                return
            if t != self.instant:  # self.new_instant(t), inline
                self.instant = t
                self.room = self.cap = EVENTS_PER_INSTANT + EVENTS_PER_SESSION * self.live
                if eager is not None and eager.soonest < t:
                    eager.catch_up(t)  # the gauges read the growths at their times, in the state before t
            self.room -= 1
            if self.room < 0:
                raise self.unsettled(t)
            if counter.events >= limit:
                raise self.exhausted(t)
            # SimPy's Environment.step, inline (no StopSimulation in a run)
            self._now, _, _, event = heappop(q)
            self.now = self._now
            callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                raise _failure(event)
            if self.error is not None:
                raise self.error
            if heavy:
                settle()
            else:
                if q and q[0][1] == URGENT:
                    self.run_ready()
                if dirty:
                    settle()
            if sample is not None and not (q and q[0][0] == self._now):
                sample(self.now)
            if done is not None and done():
                return
        self._now = self.now = horizon

    # -- sessions -------------------------------------------------------------------------------

    def start(self, proc: "SessionProcess") -> None:
        """Run a new session's process now, until it first waits."""
        proc._resume(GO)


class _NoCount:
    events = 0


_NO_COUNT = _NoCount()


def _failure(event: Any) -> BaseException:
    """The exception of an event that failed and nobody handled, as SimPy's
    ``Environment.step`` raises it."""
    exc = type(event._value)(*event._value.args)
    exc.__cause__ = event._value
    return exc


class _Go:
    """What a process started at once resumes with (an event that succeeded with None)."""

    _ok = True
    _value = None


GO: Any = _Go()


class SessionProcess(Process):
    """A session's SimPy process, with a leaner resume than SimPy's own.

    It runs the compiled body directly (no wrapping generator) and, when the
    body returns, ends the session (``Population.end_session``) from inside the
    process as before.  A process whose generator returns is itself an event
    SimPy schedules at once; nothing ever waits on a session's process, so when
    the run has no pool and no step stage that event is not scheduled at all:
    it has no callbacks and would only make the simulator settle once more at
    the same instant, which then changes nothing.  The events-per-instant guard
    still counts it.  A step stage keeps it (its iterations start only once no
    event is left at the instant), and so does a pool (a pool pass may evaluate
    ``queue by`` keys, which can draw)."""

    def __init__(self, env: Kernel, generator: Any, s: "Session", sim: "Simulator", ready: bool = True) -> None:
        # Process.__init__ without its generator check; ``ready=False``: the
        # caller starts it at once with ``Kernel.start``
        self.env = env
        self.callbacks = []
        self._generator = generator
        self.session = s
        self.sim = sim
        self._resume = self._resume  # type: ignore[method-assign]  # one bound method for every wait
        if not ready:
            self._target = GO
            return
        # Initialize(env, self), inline: the process starts as a ready session
        init = self._target = _new(Initialize)
        init.env = env
        init.callbacks = [self._resume]
        init._value = None
        init._ok = True
        heappush(env._queue, (env._now, URGENT, next(env._eid), init))

    def _resume(self, event: Event) -> None:
        env = self.env
        env._active_proc = self
        gen = self._generator
        while True:
            try:
                if event._ok:
                    event = gen.send(event._value)
                else:
                    event._defused = True  # type: ignore[attr-defined]
                    exc = type(event._value)(*event._value.args)
                    exc.__cause__ = event._value
                    event = gen.throw(exc)
            except StopIteration:
                event = None  # type: ignore[assignment]
                self._end(True)
                break
            except SerqError as err:
                event = None  # type: ignore[assignment]
                env.fail(err)  # type: ignore[attr-defined]
                self._end(False)
                break
            except BaseException as e:
                self._ok = False
                e.__traceback__ = e.__traceback__.tb_next  # type: ignore[union-attr]
                self._value = e
                env.schedule(self)
                self._target = None  # type: ignore[assignment]
                env._active_proc = None
                return
            cbs = event.callbacks
            if cbs is not None:
                cbs.append(self._resume)
                break
            if not hasattr(event, "callbacks"):
                raise RuntimeError(f"a session yielded {event!r}, not an event")
        self._target = event
        env._active_proc = None

    def _end(self, returned: bool) -> None:
        """The body returned (or failed with a run-time error, already recorded)."""
        sim = self.sim
        if returned:
            try:
                sim.population.end_session(self.session)
            except SerqError as err:
                self.env.fail(err)  # type: ignore[attr-defined]
        self._ok = True
        self._value = None
        if sim.engines or sim.all_pools or self.callbacks:
            self.env.schedule(self)
        else:
            self.env.room -= 1  # type: ignore[attr-defined]  # the end event this run skips still counts

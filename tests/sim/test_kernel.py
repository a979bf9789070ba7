"""The event kernel (serq/sim/kernel.py): the one module that reaches inside
SimPy, and what it promises the rest of the simulator."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from simpy.events import Event

from serq.errors import SerqRuntimeError
from serq.sim.kernel import EVENTS_PER_INSTANT, Kernel

ROOT = Path(__file__).resolve().parents[2]
#: SimPy's private fields: the kernel's alone
PRIVATE = re.compile(r"\._(now|queue|eid|ok|value|defused|resume|target|delay|active_proc|generator)\b")


def test_only_the_kernel_touches_simpys_private_fields() -> None:
    found = []
    for path in sorted((ROOT / "serq").rglob("*.py")):
        if path.name == "kernel.py" and path.parent.name == "sim":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PRIVATE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == [], "\n".join(found)


def test_now_is_simpys_now_and_moves_only_in_the_loop() -> None:
    k = Kernel()
    seen = []
    k.timer(2.5, [lambda ev: seen.append((k.now, k._now))])
    k.timer_at(1.25, [lambda ev: seen.append((k.now, k._now))])
    k.loop(10.0, lambda: None, True, [], None)
    assert seen == [(1.25, 1.25), (2.5, 2.5)]
    assert k.now == 10.0 and k._now == 10.0  # the horizon
    assert Kernel.now == 0.0 and k.now == k._now  # SimPy's property is shadowed, not broken


def test_timers_at_one_time_run_in_creation_order_after_the_ready_sessions() -> None:
    k = Kernel()
    order: list[str] = []
    k.timer(1.0, [lambda ev: order.append("a")])
    k.timer(1.0, [lambda ev: order.append("b")])

    def at_one(ev: Event) -> None:
        order.append("c")
        ready = Event(k)
        ready.callbacks.append(lambda ev: order.append("ready"))
        k.make_ready(ready)  # urgent: before "d", though "d" was scheduled first

    k.timer(1.0, [at_one])
    k.timer(1.0, [lambda ev: order.append("d")])
    k.loop(5.0, lambda: None, False, [], None)
    assert order == ["a", "b", "c", "ready", "d"]


def test_wake_runs_the_waiter_at_once_unless_another_session_is_ready() -> None:
    k = Kernel()
    k.new_instant(0.0)
    order: list[str] = []
    first = Event(k)
    first.callbacks.append(lambda ev: order.append("first"))
    k.wake(first)  # nobody ready: runs now
    assert order == ["first"] and k.room == k.cap - 1
    other, second = Event(k), Event(k)
    other.callbacks.append(lambda ev: order.append("other"))
    second.callbacks.append(lambda ev: order.append("second"))
    k.make_ready(other)
    k.wake(second)  # "other" is ready: "second" goes behind it
    assert order == ["first"]
    k.run_ready()
    assert order == ["first", "other", "second"]


def test_throw_detaches_the_process_from_what_it_waited_on() -> None:
    from simpy.exceptions import Interrupt

    k = Kernel()
    caught = []

    def body():
        try:
            yield waited
        except Interrupt as e:
            caught.append((k.now, e.cause))

    waited = Event(k)
    proc = k.process(body())
    k.run_ready()  # the process starts and waits on `waited`
    k.throw(proc, "preempted")  # type: ignore[arg-type]
    waited.succeed()  # later: it must not resume the process a second time
    k.loop(1.0, lambda: None, False, [], None)
    assert caught == [(0.0, "preempted")]


def test_the_guard_stops_an_instant_that_never_ends() -> None:
    k = Kernel()

    def again(ev: Event) -> None:
        k.timer(0.0, [again])

    k.timer(0.0, [again])
    with pytest.raises(SerqRuntimeError, match=f"more than {EVENTS_PER_INSTANT:,} events at that instant"):
        k.loop(1.0, lambda: None, False, [], None)


def test_a_failed_event_nobody_handled_stops_the_loop() -> None:
    k = Kernel()
    ev = Event(k)
    ev.fail(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        k.loop(1.0, lambda: None, False, [], None)


def test_a_job_end_wakes_its_waiter_once() -> None:
    k = Kernel()
    k.new_instant(0.0)
    order: list[str] = []
    ev = Event(k)
    ev.callbacks.append(lambda e: order.append("woke"))
    k.make_ready_pending(ev)
    k.make_ready_pending(ev)  # already triggered: not scheduled a second time
    assert len(k.queue) == 1 and ev.triggered
    k.run_ready()
    assert order == ["woke"] and k.queue == []

"""The ready FIFO of semantics §1.3, on SimPy, and a cheap timer.

A session waits on an event; it becomes *ready* when that event succeeds
with ``URGENT`` priority at the current time.  SimPy handles urgent events
before any other event of the instant and in the order they were scheduled,
which is the order in which sessions became ready.
"""

from __future__ import annotations

from heapq import heappush
from typing import Any

from simpy import Environment
from simpy.events import NORMAL, URGENT, Event, Timeout

_new = object.__new__


def make_ready(env: Environment, ev: Event) -> None:
    """Succeed ``ev`` now, ahead of the instant's other events."""
    ev._ok = True
    ev._value = None
    env.schedule(ev, URGENT)


def timer(env: Environment, delay: float, callbacks: list[Any]) -> Timeout:
    """``Timeout(env, delay)`` with these ``callbacks``: the same event, at the
    same time (``now + delay``) and in the same place among its ties (the next
    event id), without the constructor's calls.  ``delay`` is a checked,
    non-negative time."""
    t = _new(Timeout)
    t.env = env
    t.callbacks = callbacks
    t._value = None
    t._delay = delay
    t._ok = True
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), t))
    return t

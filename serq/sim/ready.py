"""The ready FIFO of semantics §1.3, on SimPy.

A session waits on an event; it becomes *ready* when that event succeeds
with ``URGENT`` priority at the current time.  SimPy handles urgent events
before any other event of the instant and in the order they were scheduled,
which is the order in which sessions became ready.
"""

from __future__ import annotations

from simpy import Environment
from simpy.events import URGENT, Event


def make_ready(env: Environment, ev: Event) -> None:
    """Succeed ``ev`` now, ahead of the instant's other events."""
    ev._ok = True
    ev._value = None
    env.schedule(ev, URGENT)

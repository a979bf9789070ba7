"""How often Python's cycle collector runs while serQ loads and simulates.

The collector runs after every 700 new objects, by default.  Loading serQ's
modules (and typer's, for the ``serq`` command) makes some hundred thousand
objects that live as long as the process, and a run makes and drops many
small ones, with few garbage cycles either way.  The collections took
0.15–0.20 s of a 4–5 s run of ``programs/pd/llmd.sq`` (docs/pd.md, "Speed"),
and about 13 ms (38 collections) of a ``serq run`` of ``mg1.sq`` to horizon 5,
which with the command's setting collects twice and executes 2.3 % fewer
instructions (docs/speed.md, "Stop 69").  So:

* :func:`fewer`: a run collects the youngest generation after :data:`YOUNG`
  new objects, and puts the setting back after;
* :func:`for_the_command`: the ``serq`` command's process keeps that setting
  from its start (the process is the command's own).

Nothing serQ computes depends on when the collector runs.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

#: The youngest generation's threshold during a run and in the ``serq`` command (Python's
#: default is 700).
YOUNG = 10_000


def _raise_young() -> tuple[int, ...]:
    """Set the youngest generation's threshold to :data:`YOUNG` where it is lower
    (0 is the collector turned off: left so); the setting before."""
    old = gc.get_threshold()
    if 0 < old[0] < YOUNG:
        gc.set_threshold(YOUNG, *old[1:])
    return old


@contextmanager
def fewer() -> Iterator[None]:
    """The block (a run) with the youngest generation collected after
    :data:`YOUNG` new objects; the setting put back after."""
    old = _raise_young()
    try:
        yield
    finally:
        gc.set_threshold(*old)


def for_the_command() -> None:
    """The ``serq`` command's process collects as a run does, from now on."""
    _raise_young()

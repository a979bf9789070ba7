"""What the suite waits for, bounded by work and never by the clock (issue 38: a
test suite that passes on a busy machine).

* A simulation is bounded by events: ``max_events=`` in this process, and
  ``SERQ_MAX_EVENTS`` in a child's environment (:func:`env`), which every run
  reads, a sweep's workers' too.  Past it a run ends with a SerqError at the
  same point on every machine, so a run that would go on for ever fails, and
  a slow machine changes nothing.  A child that only computes (a run, a check,
  an import of a trace we hand it) has no timeout.
* A child that waits on something outside itself (a signal we send, a FIFO, a
  terminal, a thread, Ray, a shell pipeline, LaTeX) has :data:`HANG` seconds,
  a guard against a true hang only: ten minutes, hundreds of times what any of
  them takes on a loaded machine.  Each use says what it waits on.
* A test that waits for a state polls for it (:func:`wait_for`), as long as
  the child it waits on is alive, and never decides by the clock that the
  state will not come (but for the same guard against a true hang).
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Callable

#: ``SERQ_MAX_EVENTS`` of the suite's command-line runs: 14x the most events any of
#: them handles (702 578: one bundled program at horizon 300, tests/test_same_bytes.py;
#: then 184 149, vllm.sq at horizon 300; measured, issue 38).  A run that reaches it
#: stops with an error instead of running for ever.
EVENTS = 10_000_000

#: Seconds: a guard against a true hang of a child that waits on something
#: outside itself, never reached by a slow machine (see the module).
HANG = 600


def env(base: dict[str, str] | None = None, **more: str) -> dict[str, str]:
    """A child's environment: ``base`` (this process's by default) with the
    event budget of :data:`EVENTS` and ``more``."""
    out = dict(os.environ if base is None else base)
    out["SERQ_MAX_EVENTS"] = str(EVENTS)
    out.update(more)
    return out


def wait_for(ready: Callable[[], bool], what: str, proc: subprocess.Popen[Any] | None = None,
             every: float = 0.05) -> None:
    """Poll until ``ready()``.  Fail if ``proc`` ends first (the state can no
    longer come), or after :data:`HANG` seconds (a true hang)."""
    guard = time.monotonic() + HANG
    while not ready():
        if proc is not None and proc.poll() is not None:
            if ready():  # the state came as the process ended
                return
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}")
        if time.monotonic() > guard:
            raise AssertionError(f"still waiting for {what} after {HANG} s: a hang")
        time.sleep(every)

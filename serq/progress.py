"""A long single run's progress on standard error (``serq run``; issue 25).

A daemon thread reads the run's clock every half second and rewrites one line,
``simulated 812.4 of 2000 s (41 %) · 12 s · about 17 s left``; it says nothing for the first
second (``SERQ_PROGRESS_AFTER`` seconds), so a short run prints nothing, and it clears its line when the run
ends.  Reading a float the simulator writes is safe under the GIL, and the
event loop pays nothing for it.

The time left is the wall time so far scaled by the simulated time still to
go, at the pace so far; it shows once the run has taken a second, so that a
horizon far past what was meant (a closed system at ``--horizon 1e308``) says
so on the line rather than only in a share that stays at 0 %.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from typing import Any, Callable, TextIO


class RunProgress:
    """A context manager showing ``now()`` against ``horizon`` on ``stream``."""

    def __init__(self, now: Callable[[], float], horizon: float, stream: TextIO | None = None,
                 delay: float | None = None, period: float = 0.5) -> None:
        self.now = now
        self.horizon = horizon
        self.stream = stream if stream is not None else sys.stderr
        self.delay = after() if delay is None else delay
        self.period = period
        self.shown = 0  # the width of the line on screen (0: nothing shown)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0

    def line(self) -> str:
        """What the line says now."""
        t = self.now()
        horizon = self.horizon
        share = f" ({100.0 * t / horizon:.0f} %)" if horizon > 0 else ""
        spent = time.monotonic() - self._start
        text = f"simulated {t:.6g} of {horizon:.6g} s{share} · {spent:.0f} s"
        if spent >= 1.0 and 0.0 < t < horizon:
            left = (horizon - t) / t * spent  # (in this order: no overflow for a horizon near the largest float)
            if left < 0.5:
                text += " · less than a second left"
            elif left < math.inf:
                text += f" · about {wall(left)} left"
        return text

    def _show(self) -> None:
        text = self.line()
        pad = " " * max(0, self.shown - len(text))
        self.stream.write("\r" + text + pad)
        self.stream.flush()
        self.shown = len(text)

    def _loop(self) -> None:
        if self._stop.wait(self.delay):
            return
        while True:
            try:
                self._show()
            except (OSError, ValueError):  # the terminal went away: stop showing
                return
            if self._stop.wait(self.period):
                return

    def __enter__(self) -> "RunProgress":
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="serq-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.shown:
            try:
                self.stream.write("\r" + " " * self.shown + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                pass


def wall(seconds: float) -> str:
    """A wall-clock duration as the line gives it: seconds, minutes, hours,
    days or years, whichever reads best (``17 s``, ``4 min``, ``2.5e+299 years``)."""
    if seconds < 99.5:
        return f"{seconds:.0f} s"
    if seconds < 99.5 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 47.5 * 3600:
        return f"{seconds / 3600:.0f} h"
    if seconds < 730 * 86400:
        return f"{seconds / 86400:.0f} days"
    return f"{seconds / (365.25 * 86400):.3g} years"


def after() -> float:
    """Seconds a run lasts before its line shows: 1, or ``SERQ_PROGRESS_AFTER``."""
    try:
        x = float(os.environ.get("SERQ_PROGRESS_AFTER", "1"))
    except ValueError:
        return 1.0
    return x if x >= 0.0 else 1.0


def stderr_is_terminal() -> bool:
    """Whether standard error is a terminal a progress line can be rewritten on."""
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (ValueError, AttributeError):
        return False

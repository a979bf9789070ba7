"""Where a sweep's runs execute: in this process, on a process pool, or on Ray.

Every backend calls ``fn(task)`` for each task and hands each result to
``receive`` in this process, in completion order; the sweep puts rows in plan
order afterwards, so the backend and the number of workers never change
the result.

* ``local`` with one job: in this process, one task after another.
* ``local`` with N > 1 jobs: a :mod:`multiprocessing` pool started with
  ``spawn`` — each worker is a fresh interpreter that imports serq and loads
  the program itself (tasks are plain data), so nothing depends on ``fork``
  copying the parent's state, and the design is the same on Linux, macOS and
  Windows.  Workers ignore SIGINT: Ctrl-C reaches the parent alone, which
  terminates the pool (no worker prints a traceback).
* ``ray``: one Ray task per run (``pip install 'serq[ray]'``); a local Ray
  with ``jobs`` CPUs, or the cluster at ``address``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
from typing import Any, Callable, Iterator, Sequence

from ..errors import SerqError, UsageError

BACKENDS = ("local", "ray")


#: With the default worker count, a sweep's runs start in this process, and
#: worker processes start for the rest only once the runs left are expected to
#: take longer than this many seconds here (the mean of the runs so far times
#: the runs left).  Starting two spawned workers that import the simulator
#: takes 0.25–0.34 s on a 2-core machine (docs/experiments.md, "Workers by
#: default"), so a sweep of short runs is faster in one process, and a long
#: one gains nearly the cores.
PARALLEL_AFTER = 1.0


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread for the block (a Ctrl-C then waits), where
    the platform has signal masks; processes started inside inherit the mask."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _main_not_rerun() -> Iterator[None]:
    """Start spawned workers without re-running the caller's ``__main__``.

    A spawned worker normally re-imports the parent's main script (as
    ``__mp_main__``) so that functions defined there can be unpickled.  A
    sweep's workers never need it — a task is plain data and the function it
    runs lives in serq — and re-running it fails in the two common cases: a
    script without an ``if __name__ == "__main__":`` guard (each worker would
    start a sweep of its own; multiprocessing refuses, and the pool restarts
    the dying workers for ever) and a script read from standard input (there
    is no file to import).  So while the workers start, the main module shows
    neither a ``__spec__`` nor a ``__file__``, which is how multiprocessing
    tells an interactive session, whose workers skip the step."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved: dict[str, Any] = {k: main.__dict__[k] for k in ("__spec__", "__file__") if k in main.__dict__}
    main.__dict__["__spec__"] = None
    main.__dict__.pop("__file__", None)
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def _run_here_while_short(tasks: Sequence[Any], fn: Callable[[Any], Any],
                          receive: Callable[[Any], None]) -> Sequence[Any]:
    """Run ``tasks`` in this process, in order, until those left are expected
    to take longer than :data:`PARALLEL_AFTER` seconds; return those left (none
    when all ran here)."""
    import time

    start = time.perf_counter()
    for k, task in enumerate(tasks):
        receive(fn(task))
        left = len(tasks) - k - 1
        if left > 1 and (time.perf_counter() - start) / (k + 1) * left > PARALLEL_AFTER:
            return tasks[k + 1:]
    return ()


def _ignore_sigint() -> None:
    """A worker's initializer: Ctrl-C is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class Runner:
    """Workers kept for several batches of tasks (``--find-max`` runs one batch
    per value): a process pool or a Ray session, started at the first batch
    that needs it and stopped by :meth:`close`."""

    def __init__(self, jobs: int | None = None, backend: str = "local", address: str | None = None) -> None:
        if backend not in BACKENDS:
            raise UsageError(f"unknown backend `{backend}`; expected local or ray")
        if jobs is not None and jobs < 1:
            raise UsageError(f"invalid value for --jobs: {jobs} (must be >= 1)")
        if backend == "local" and address is not None:
            raise UsageError("--address joins a Ray cluster: use it with --backend ray")
        self.jobs, self.backend, self.address = jobs, backend, address
        self.pool: Any = None
        self.ray: Any = None

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(failed=exc[0] is not None)

    def run(self, tasks: Sequence[Any], fn: Callable[[Any], Any], receive: Callable[[Any], None]) -> None:
        """Run ``fn`` on every task; ``receive`` each result as it ends.  An
        exception from ``receive`` (or Ctrl-C) stops the workers and propagates."""
        if not tasks:
            return
        if self.backend == "ray":
            self._run_ray(tasks, fn, receive)
            return
        jobs = self.jobs or default_jobs()
        if jobs == 1 or (len(tasks) == 1 and self.pool is None):
            for task in tasks:
                receive(fn(task))
            return
        if self.pool is None and self.jobs is None:  # the default: workers only once they pay
            tasks = _run_here_while_short(tasks, fn, receive)
            if not tasks:
                return
        if self.pool is None:
            # SIGINT blocked while the workers start (they inherit the mask), so that a
            # Ctrl-C then cannot hit a worker before its initializer ignores it
            with _sigint_blocked(), _main_not_rerun():
                self.pool = multiprocessing.get_context("spawn").Pool(jobs, initializer=_ignore_sigint)
        try:
            for result in self.pool.imap_unordered(fn, tasks, chunksize=1):
                receive(result)
        except BaseException:
            self.close(failed=True)
            raise

    def close(self, failed: bool = False) -> None:
        """Stop the workers (at once when ``failed``)."""
        pool, self.pool = self.pool, None
        if pool is not None:
            if failed:
                pool.terminate()
            else:
                pool.close()
            pool.join()
        if self.ray is not None:
            ray, self.ray = self.ray, None
            ray.shutdown()

    def _run_ray(self, tasks: Sequence[Any], fn: Callable[[Any], Any], receive: Callable[[Any], None]) -> None:
        try:
            import ray
        except ImportError:
            raise SerqError("--backend ray needs Ray: pip install 'serq[ray]'") from None
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                       "configure_logging": False}
            # SIGINT blocked while a local Ray starts: its processes (GCS, raylet, and the
            # workers the raylet starts) inherit the mask, so a Ctrl-C at the terminal reaches
            # this process alone, which cancels the tasks and shuts Ray down in order — rather
            # than killing the raylet under a waiting driver
            with _sigint_blocked():
                if self.address is not None:
                    ray.init(address=self.address, **options)
                else:
                    ray.init(num_cpus=self.jobs or default_jobs(), **options)
            self.ray = ray  # ours to shut down
        pending: list[Any] = []
        try:
            remote = ray.remote(num_cpus=1)(fn)
            pending = [remote.remote(t) for t in tasks]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    receive(ray.get(ref))
        except BaseException:
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - best effort: the task may have ended
                    pass
            raise


def run_tasks(
    tasks: Sequence[Any],
    fn: Callable[[Any], Any],
    receive: Callable[[Any], None],
    *,
    jobs: int | None = None,
    backend: str = "local",
    address: str | None = None,
) -> None:
    """One batch on a :class:`Runner` of its own."""
    with Runner(None if jobs is None else min(jobs, max(1, len(tasks))), backend, address) as runner:
        runner.run(tasks, fn, receive)

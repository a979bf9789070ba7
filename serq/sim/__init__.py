"""The simulator: sessions as SimPy processes, pools with a prefix cache, stages."""

from __future__ import annotations

import sys
import threading
import types
from typing import Any


def _import_simpy() -> None:
    """Import SimPy without importing :mod:`importlib.metadata` for it.

    SimPy's ``__init__`` asks ``importlib.metadata`` for its own version, and
    that import (``email``, ``zipfile``, ``socket``, ``importlib.resources``)
    plus the search of ``sys.path`` for SimPy's metadata is about 40 ms of the
    50 ms SimPy costs to import: a fifth of a short ``serq run``
    (docs/speed.md, "Start-up").  While SimPy's package runs, a stand-in whose
    ``version`` finds nothing takes that module's place, so SimPy sets no
    ``__version__``; ``simpy.__version__`` is then looked up on first use, from
    the real ``importlib.metadata``.  Done only while this is the process's
    one thread and nothing has imported the real module or SimPy; otherwise
    SimPy is imported as usual.
    """
    import importlib

    if ("simpy" in sys.modules or "importlib.metadata" in sys.modules
            or hasattr(importlib, "metadata") or threading.active_count() != 1):
        import simpy  # noqa: F401
        return

    class PackageNotFoundError(ModuleNotFoundError):
        """What the stand-in's ``version`` raises: SimPy then sets no version."""

    def version(name: str) -> str:
        raise PackageNotFoundError(name)

    stand_in = types.ModuleType("importlib.metadata", "A stand-in while SimPy is imported (serq.sim).")
    stand_in.PackageNotFoundError = PackageNotFoundError  # type: ignore[attr-defined]
    stand_in.version = version  # type: ignore[attr-defined]
    sys.modules["importlib.metadata"] = stand_in
    importlib.metadata = stand_in  # type: ignore[attr-defined]  # (`import a.b` reads a's attribute b)
    try:
        import simpy
    finally:
        if sys.modules.get("importlib.metadata") is stand_in:
            del sys.modules["importlib.metadata"]
        if getattr(importlib, "metadata", None) is stand_in:
            del importlib.metadata  # type: ignore[attr-defined]
    if "__version__" not in vars(simpy) and "__getattr__" not in vars(simpy):
        setattr(simpy, "__getattr__", _simpy_version)  # (a module-level __getattr__: PEP 562)


def _simpy_version(name: str) -> Any:
    """``simpy.__version__`` on first use, as SimPy's own ``__init__`` would have set it."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        simpy = sys.modules["simpy"]
        try:
            found = version("simpy")
        except PackageNotFoundError:  # (SimPy not installed as a distribution: no version, as SimPy does)
            pass
        else:
            setattr(simpy, "__version__", found)
            return found
    raise AttributeError(f"module 'simpy' has no attribute {name!r}")


_import_simpy()

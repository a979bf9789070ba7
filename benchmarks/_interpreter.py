"""Which Python a benchmark ran on, in one line for its header.

serQ is pure Python, so its times move with the interpreter's own build as much as with
serQ's code: on one machine the same reports took 14-20 % less time under Debian's CPython
3.11 (built with profile-guided and link-time optimisation) than under a CPython 3.11 built
from source without them (docs/speed.md, "Which Python runs serQ").  Every figure a
benchmark prints is for the interpreter this line names.
"""

from __future__ import annotations

import os
import platform
import sys
import sysconfig


def describe() -> str:
    """``Python 3.11.7 (CPython, /path/to/python3.11, libpython shared, GCC 12.2.0, built
    May 9 2026)``: the version, the executable behind a virtual environment, whether the
    interpreter loads libpython as a shared library, the compiler and the build date."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    shared = "libpython shared" if _libpython_shared() else "libpython static"
    return (f"Python {platform.python_version()} ({platform.python_implementation()}, "
            f"{os.path.realpath(base)}, {shared}, {platform.python_compiler()}, "
            f"built {platform.python_build()[1]})")


def _libpython_shared() -> bool:
    """Whether this process loaded libpython as a shared library: read off the process's
    mappings where Linux shows them (Debian configures with ``--enable-shared`` yet links
    its ``python3.11`` statically, so the build variable alone would say shared), else the
    build variable."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any("libpython" in line for line in maps)
    except OSError:
        return bool(sysconfig.get_config_var("Py_ENABLE_SHARED"))

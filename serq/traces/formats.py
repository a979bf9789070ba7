"""The trace formats ``serq trace import`` reads, by name: one module each.

A new format is a module with a ``read`` function and a ``FORMAT``
(:class:`serq.traces.base.Format`), listed in ``_MODULES`` below.
"""

from __future__ import annotations

from ..errors import SerqError
from . import azure, burstgpt, mooncake, splitwise
from .base import Format

_MODULES = (splitwise, azure, mooncake, burstgpt)

#: Each format by its canonical name, in the order the documentation lists them.
FORMATS: dict[str, Format] = {m.FORMAT.name: m.FORMAT for m in _MODULES}

_ALIASES = {alias: f for f in FORMATS.values() for alias in (f.name, *f.aliases)}


def format_names() -> list[str]:
    """Every accepted format name, aliases included, sorted."""
    return sorted(_ALIASES)


def get_format(name: str) -> Format:
    """The format called ``name`` (or an alias); a :class:`SerqError` naming the choices otherwise."""
    fmt = _ALIASES.get(name.strip().lower())
    if fmt is None:
        raise SerqError(f"unknown trace format `{name}`",
                        helps=[f"the formats are {', '.join(format_names())}"])
    return fmt

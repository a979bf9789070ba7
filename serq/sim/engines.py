"""Importing a user's :class:`~serq.sim.stages.step.StepEngine` subclass.

``--engine STAGE=SPEC`` and ``--policy STAGE=SPEC`` (CLI) resolve ``SPEC``
the same way, through :func:`serq.policies.resolve`: a ready-made policy's
short name, or ``package.module:Class``, which :func:`load_class` imports
(the one place that does).  The hooks a class overrides and their guards
are :mod:`serq.sim.stages.hooks`' (re-exported here: ``HookError``).
"""

from __future__ import annotations

import importlib
from typing import Iterable

from ..errors import UsageError, suggest
from .stages.hooks import HOOKS, HookError, guard_hooks, overridden
from .stages.step import StepEngine

__all__ = ["HOOKS", "HookError", "guard_hooks", "load_class", "load_engine_classes", "overridden"]


def load_class(path: str) -> type[StepEngine]:
    """Import ``package.module:Class`` and check it is a StepEngine subclass."""
    module_name, colon, attr = path.partition(":")
    if not colon or not module_name or not attr:
        raise UsageError(f"engine class `{path}`: expected package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - any import failure is the user's to fix
        raise UsageError(f"engine class `{path}`: cannot import `{module_name}`: {err}") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise UsageError(f"engine class `{path}`: module `{module_name}` has no `{attr}`")
    if not (isinstance(cls, type) and issubclass(cls, StepEngine)):
        raise UsageError(f"engine class `{path}`: `{attr}` is not a subclass of serq.sim.stages.StepEngine")
    return cls


def load_engine_classes(specs: Iterable[str]) -> dict[str, type[StepEngine]]:
    """``STAGE=SPEC`` strings → {stage: class}; ``SPEC`` a policy's name or
    ``package.module:Class`` (:func:`serq.policies.resolve`)."""
    from ..policies import resolve

    out: dict[str, type[StepEngine]] = {}
    for spec in specs:
        stage, eq, path = spec.partition("=")
        if not eq or not stage.strip() or not path.strip():
            raise UsageError(f"invalid --engine `{spec}`; expected STAGE=package.module:Class (or a policy's name)")
        out[stage.strip()] = resolve(path.strip())
    return out


def check_stages(program: object, options: Iterable[tuple[str, str]]) -> None:
    """Each ``(option, stage)`` of ``--engine``/``--policy`` names a step stage of
    ``program``: else a usage error with a did-you-mean (exit 2 in every command)."""
    steps = [s.name for s in getattr(program, "stages", ()) if s.kind == "step"]
    for option, stage in options:
        if stage not in steps:
            best = suggest(stage, steps)
            helps = [f"did you mean `{best}`?"] if best else []
            helps.append(f"--{option} gives a step stage its scheduler; the program has "
                         + (", ".join(f"`{k}`" for k in steps) if steps else "none"))
            raise UsageError(f"unknown step stage `{stage}`", helps=helps)

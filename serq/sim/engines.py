"""Choosing a :class:`~serq.sim.stages.step.StepEngine` subclass by name.

``--engine STAGE=package.module:Class`` (CLI) and ``engines={"STAGE": Class}``
(Python) give one step stage a user's scheduler.  This is the one place that
imports a class from a ``module:Class`` path.
"""

from __future__ import annotations

import importlib
from typing import Iterable

from ..errors import SerqError, UsageError
from .stages.step import StepEngine


def load_class(path: str) -> type[StepEngine]:
    """Import ``package.module:Class`` and check it is a StepEngine subclass."""
    module_name, colon, attr = path.partition(":")
    if not colon or not module_name or not attr:
        raise SerqError(f"engine class `{path}`: expected package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - any import failure is the user's to fix
        raise SerqError(f"engine class `{path}`: cannot import `{module_name}`: {err}") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise SerqError(f"engine class `{path}`: module `{module_name}` has no `{attr}`")
    if not (isinstance(cls, type) and issubclass(cls, StepEngine)):
        raise SerqError(f"engine class `{path}`: `{attr}` is not a subclass of serq.sim.stages.StepEngine")
    return cls


def load_engine_classes(specs: Iterable[str]) -> dict[str, type[StepEngine]]:
    """``STAGE=module:Class`` strings → {stage: class}."""
    out: dict[str, type[StepEngine]] = {}
    for spec in specs:
        stage, eq, path = spec.partition("=")
        if not eq or not stage.strip():
            raise UsageError(f"invalid --engine `{spec}`; expected STAGE=package.module:Class")
        out[stage.strip()] = load_class(path.strip())
    return out

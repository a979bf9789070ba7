"""Ready-made admission policies: :class:`~serq.sim.stages.StepEngine`
subclasses, one short class per policy, chosen by a short name.

``--policy engine=sjf`` (CLI) or ``serq.run(program, engines={"engine":
serq.policies.resolve("sjf")})`` (Python).  :func:`resolve` takes a short
name from :data:`POLICIES`, a short name with its parameter (``priority:tier``,
``slo:0.5``), or a user's ``package.module:Class`` (docs/policies.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import UsageError, suggest

if TYPE_CHECKING:
    from ..sim.stages.step import StepEngine

#: Short name → ``module:Class`` (modules of this package).
POLICIES: dict[str, str] = {
    "fcfs": "fcfs:FCFS",
    "sjf": "sjf:ShortestPromptFirst",
    "lpm": "lpm:LongestPrefixFirst",
    "fair": "fair:FairShare",
    "priority": "priority:Priority",
    "slo": "slo:LeastSlack",
}

#: Short names that take a parameter after a colon, and the class attribute it sets.
PARAMETERS: dict[str, str] = {"priority": "key", "slo": "target"}


def resolve(spec: str) -> "type[StepEngine]":
    """The engine class of a policy: ``sjf``, ``priority:tier``, ``slo:0.5``,
    or ``package.module:Class``.  An unknown name or a bad parameter is a
    :class:`~serq.errors.UsageError` (a SerqError; the nearest name, if one is
    close); a class that cannot be imported, a SerqError (``--engine``'s)."""
    spec = spec.strip()
    name, colon, arg = spec.partition(":")
    if name in POLICIES:
        cls = _builtin(name)
        if not colon:
            return cls
        if name not in PARAMETERS or not arg.strip():
            takes = ", ".join(f"`{n}:…`" for n in PARAMETERS)
            raise UsageError(f"policy `{spec}`: `{name}` takes no parameter" if name not in PARAMETERS
                            else f"policy `{spec}`: the parameter after `{name}:` is empty",
                            helps=[f"parameters go with {takes}"])
        return _with(cls, PARAMETERS[name], arg.strip())
    if colon:  # a user's class (`--engine`'s errors: cannot import, not a StepEngine)
        from ..sim.engines import load_class

        return load_class(spec)
    near = suggest(name, POLICIES)
    helps = [f"did you mean `{near}`?"] if near else []
    helps.append(f"the policies: {', '.join(POLICIES)}; or a class as package.module:Class")
    raise UsageError(f"unknown policy `{spec}`", helps=helps)


def _builtin(name: str) -> "type[StepEngine]":
    module, _, attr = POLICIES[name].partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)  # type: ignore[no-any-return]


def _with(cls: "type[StepEngine]", field: str, arg: str) -> "type[StepEngine]":
    """A subclass of ``cls`` with one class attribute set (``slo``'s target: a
    number when it reads as one, else a name)."""
    value: float | str = arg
    if field == "target":
        try:
            value = float(arg)
        except ValueError:
            pass
    return type(f"{cls.__name__}_{arg}", (cls,), {field: value, "__module__": cls.__module__})


def from_options(policies: "list[str] | None", engines: "dict[str, type[StepEngine]]") -> "dict[str, type[StepEngine]]":
    """``--policy STAGE=NAME`` options added to the ``--engine`` classes
    (``STAGE → class``); a stage given both is a usage error."""
    out = dict(engines)
    for opt in policies or []:
        stage, eq, spec = opt.partition("=")
        stage = stage.strip()
        if not eq or not stage or not spec.strip():
            raise UsageError(f"invalid --policy `{opt}`; expected STAGE=NAME (NAME one of {', '.join(POLICIES)}, "
                             "or package.module:Class)")
        if stage in out:
            given = "--engine" if stage in engines else "--policy"
            raise UsageError(f"--policy `{opt}`: stage `{stage}` already has {given}; give one engine per stage")
        out[stage] = resolve(spec)
    return out

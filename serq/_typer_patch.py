"""A quick coercion of the ``serq`` command's option values, without pydantic.

Typer ≥ 0.2x coerces every option value through a pydantic ``TypeAdapter``,
built when the first value is processed: importing pydantic and building the
adapters is ~80 ms, most of a ``serq check``.  :func:`quick_coercion` gives
each plain option (a ``str``, a list of them, a ``float``, an ``int``, a flag)
a coercion that returns exactly what the adapter would for the plain forms
serq's options take, and hands any other value to typer's own, so that every
refusal and its message are typer's.  On a typer without this machinery
(older versions coerce with click) nothing changes.  ``tests/test_startup.py``
checks the values against typer's and that ``serq check``/``serq run`` never
import pydantic; ``benchmarks/bench_startup.py`` times it.
"""

from __future__ import annotations

import math
import re
import typing
from typing import Any

_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_INT_TEXT = re.compile(r"[0-9]{1,18}\Z")
#: What :func:`quick_value` returns for a value it is not sure of.
SLOW = object()


def quick_value(kind: str, value: Any, low: Any, high: Any) -> Any:
    """``value`` coerced as typer's pydantic adapter would, for the plain forms
    serq's options take (a string; decimal digits; a plain decimal number), or
    ``SLOW`` for anything else, which then goes to typer's own coercion (so
    every refusal, and its message, is typer's)."""
    if kind == "str":
        return value if type(value) is str else SLOW
    if kind == "bool":  # a flag: True or False already (typer skips those itself)
        return value if type(value) is bool else SLOW
    if kind == "list":
        if not isinstance(value, (list, tuple)) or any(type(v) is not str for v in value):
            return SLOW
        return list(value)
    if type(value) is not str:
        return SLOW
    number: float | int
    if kind == "float":
        if not _FLOAT_TEXT.match(value):
            return SLOW
        number = float(value)
        if not math.isfinite(number):
            return SLOW
    elif kind == "int":
        if not _INT_TEXT.match(value):
            return SLOW
        number = int(value)
    else:
        return SLOW
    if (low is not None and number < low) or (high is not None and number > high):
        return SLOW
    return number


def _kind(annotation: Any) -> str | None:
    """The kind of value :func:`quick_value` coerces for an option of this type, if any."""
    if annotation is str or annotation is float or annotation is int or annotation is bool:
        return annotation.__name__
    if typing.get_origin(annotation) is list and typing.get_args(annotation) == (str,):
        return "list"
    return None


def quick_coercion(command: Any) -> None:
    """Give each option of ``command`` (and of its subcommands) a coercion
    without pydantic for the plain values it takes (see the module's docstring)."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:  # pragma: no cover - depends on the installed typer
        return

    class QuickParam(RuntimeParam):  # type: ignore[misc]
        """A typer runtime parameter: the quick path, else typer's own."""

        def __init__(self, descriptor: Any, kind: str) -> None:
            info = descriptor.parameter_info
            super().__init__(parameter_info=info, annotation=descriptor.annotation)
            object.__setattr__(self, "_quick", (kind, info.min, info.max))
            object.__setattr__(self, "_descriptor", descriptor)
            object.__setattr__(self, "_full", None)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            kind, low, high = self._quick  # type: ignore[attr-defined]
            quick = quick_value(kind, value, low, high)
            if quick is not SLOW:
                return quick
            if self._full is None:  # type: ignore[attr-defined]
                object.__setattr__(self, "_full", build_runtime_param(self._descriptor))  # type: ignore[attr-defined]
            return self._full._coerce_value(value, param=param, ctx=ctx)  # type: ignore[attr-defined]

    def install(param: Any) -> None:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", False) is not None:
            return
        info = descriptor.parameter_info
        kind = _kind(descriptor.annotation)
        if kind is None or descriptor.file_annotation is not None or info.parser is not None \
                or info.clamp or getattr(info, "click_type", None) is not None:
            return
        param._runtime_param = QuickParam(descriptor, kind)

    def with_help(cmd: Any) -> None:
        get_help_option = cmd.get_help_option

        def quick_help_option(ctx: Any) -> Any:  # click makes --help when it is first asked for
            option = get_help_option(ctx)
            if option is not None:
                install(option)
            return option

        cmd.get_help_option = quick_help_option

    def walk(cmd: Any) -> Any:  # a command, its subcommands, theirs (`serq trace import`)
        yield cmd
        for sub in getattr(cmd, "commands", {}).values():
            yield from walk(sub)

    for cmd in walk(command):
        for param in cmd.params:
            install(param)
        if callable(getattr(cmd, "get_help_option", None)):
            with_help(cmd)

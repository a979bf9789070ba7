"""The base of the frozen dataclasses of the syntax tree (:mod:`serq.frontend.ast`)
and the IR (:mod:`serq.ir`).

``@node`` makes a frozen, slotted dataclass that behaves as
``dataclass(frozen=True, slots=True)`` makes it — the same ``__init__``,
equality (the fields compared as a tuple), hash (of that tuple), repr
(``Name(field=value, …)``), ``FrozenInstanceError`` on assignment, and
``dataclasses.fields`` and ``replace`` — but compiles one function per class,
its ``__init__``, where ``dataclass`` compiles six: the other five are
:class:`Node`'s, written once here.  The two modules' 83 classes are made at
every start of ``serq``; this takes their import from 62 ms to 23 ms (``python
-X importtime``, bytecode written; issue 21, item 2).  ``tests/test_node.py`` holds the equivalence.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, FrozenInstanceError, dataclass, field, fields
from types import CodeType, FunctionType
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")

_NAMES: dict[type, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}
#: the module and ``__init__`` source of every ``@node`` class made so far, in order
#: (:func:`write_inits` writes serq's own into ``serq/_node_inits.py``)
SOURCES: list[tuple[str, str]] = []
_CODES: dict[str, CodeType] | None = None


def _precompiled() -> dict[str, CodeType]:
    """The code of each ``__init__`` source, from ``serq/_node_inits.py``: compiling
    the 98 classes' ``__init__`` one by one was ~13 ms of every start (issue 42)."""
    global _CODES
    if _CODES is None:
        from . import _node_inits

        _CODES = _node_inits.CODES
    return _CODES


def write_inits() -> str:
    """The text of ``serq/_node_inits.py`` for the classes made so far: each
    ``__init__`` source once, as a function whose code :func:`node` takes (the
    defaults are given there, so each is written ``=None`` here)."""
    out = ['"""The ``__init__`` of every ``@node`` class, compiled with the package',
           "(written by ``python -m serq.node``; tests/test_node.py checks it is current).",
           '"""', "", "# ruff: noqa", "# mypy: ignore-errors", "CODES = {}"]
    for src in dict.fromkeys(src for module, src in SOURCES if module.startswith("serq.")):
        head, _, rest = src.partition("\n")
        head = re.sub(r"=(?:_d_\w+|MISSING)", "=None", head)
        out += ["", "", head, rest.rstrip("\n"), f"CODES[{src!r}] = __init__.__code__"]
    return "\n".join(out) + "\n"


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def node(cls: type[T]) -> type[T]:
    """``dataclass(frozen=True, slots=True)`` for a class deriving from :class:`Node`."""
    if cls.__doc__ is None and cls.__init__ is object.__init__:
        # what dataclass would write (the signature of an ``__init__`` not yet made), without
        # ``inspect.signature``: for a class it parses ``object``'s text signature each time
        cls.__doc__ = f"{cls.__name__}()"
    made: Any = dataclass(init=False, repr=False, eq=False, slots=True)(cls)
    params: list[str] = []
    body: list[str] = []
    names: dict[str, Any] = {"_set": object.__setattr__, "MISSING": MISSING}
    for f in fields(made):
        if f.default is not MISSING:
            names[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not MISSING:
            names[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=MISSING")
            body.append(f"  if {f.name} is MISSING: {f.name} = _f_{f.name}()")
        else:
            params.append(f.name)
        body.append(f"  _set(self, {f.name!r}, {f.name})")
    src = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["  pass"]) + "\n"
    SOURCES.append((cls.__module__, src))
    code = _precompiled().get(src)
    if code is None:  # a class changed since serq/_node_inits.py was written: compiled here
        exec(src, names)  # noqa: S102 - the fields' own names, as dataclass writes it
        init = names["__init__"]
    else:  # the same function exec would make, from bytecode Python keeps (no compile at start-up)
        defaults = tuple(names[p.split("=", 1)[1]] for p in params if "=" in p)
        init = FunctionType(code, names, "__init__", defaults or None)
    init.__qualname__ = f"{made.__qualname__}.__init__"
    made.__init__ = init
    return made  # type: ignore[no-any-return]


def _names(cls: type) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The fields that take part in equality, in the hash and in the repr, and
    every field (a pickle's state: a kept parse, serq/frontend/parsed.py, sets
    thousands of nodes at each start)."""
    names = _NAMES.get(cls)
    if names is None:
        fs = fields(cls)
        names = _NAMES[cls] = (
            tuple(f.name for f in fs if f.compare),
            tuple(f.name for f in fs if (f.compare if f.hash is None else f.hash)),
            tuple(f.name for f in fs if f.repr),
            tuple(f.name for f in fs),
        )
    return names


class Node:
    """Equality, hash, repr and the frozen guard of a ``@node`` class."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = _names(self.__class__)[0]
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in _names(self.__class__)[1]))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(self.__class__)[2])
        return f"{self.__class__.__qualname__}({inner})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in _names(self.__class__)[3])

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(_names(self.__class__)[3], state):
            object.__setattr__(self, name, value)


if __name__ == "__main__":  # python -m serq.node: write serq/_node_inits.py anew
    import pathlib

    import serq.frontend.ast
    import serq.ir  # noqa: F401 - the classes, made by the package's own serq.node
    import serq.node

    pathlib.Path(serq.node.__file__).with_name("_node_inits.py").write_text(serq.node.write_inits())

"""The base of the frozen dataclasses of the syntax tree (:mod:`serq.frontend.ast`)
and the IR (:mod:`serq.ir`), and the dataclasses made at every start.

``@node`` makes a frozen, slotted dataclass that behaves as
``dataclass(frozen=True, slots=True)`` makes it — the same ``__init__``,
equality (the fields compared as a tuple), hash (of that tuple), repr
(``Name(field=value, …)``), ``FrozenInstanceError`` on assignment, and
``dataclasses.fields`` and ``replace`` — but compiles one function per class,
its ``__init__``, where ``dataclass`` compiles six: the other five are
:class:`Node`'s, written once here.  The two modules' 83 classes are made at
every start of ``serq``; this takes their import from 62 ms to 23 ms (``python
-X importtime``, bytecode written; issue 21, item 2).  ``tests/test_node.py`` holds the equivalence.

``@record`` and ``@record(frozen=True)`` do the same for a plain dataclass
(``dataclass`` and ``dataclass(frozen=True)``, not slotted): ``dataclass``
compiles three to six functions for each (~0.5 ms a class); the report's,
the front end's and the engine's records that every ``serq run`` makes were
~20 ms of its start (issue 42, item 3).  Every ``__init__`` is compiled with
the package, in ``serq/_node_inits.py`` (``python -m serq.node`` writes it).
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import MISSING, Field, FrozenInstanceError, dataclass, field, fields
from reprlib import recursive_repr
from types import CodeType, FunctionType
from typing import Any, Callable, TypeVar, dataclass_transform, overload

T = TypeVar("T")

_NAMES: dict[type, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}
#: the module and ``__init__`` source of every ``@node`` and ``@record`` class made so far, in
#: order (:func:`write_inits` writes serq's own into ``serq/_node_inits.py``)
SOURCES: list[tuple[str, str]] = []
#: serq's modules that make ``@node`` or ``@record`` classes (tests/test_node.py checks the list)
MAKERS = ("serq.errors", "serq.frontend.ast", "serq.frontend.build", "serq.frontend.build_expr", "serq.frontend.defs",
          "serq.frontend.expand", "serq.frontend.lexer", "serq.frontend.link",
          "serq.frontend.queues", "serq.frontend.resolve", "serq.ir", "serq.report",
          "serq.sim.goodput", "serq.sim.stages.hooks", "serq.sim.stages.waiting", "serq.units")
_CODES: dict[str, CodeType] | None = None


def _precompiled() -> dict[str, CodeType]:
    """The code of each ``__init__`` source, from ``serq/_node_inits.py``: compiling
    the classes' ``__init__`` one by one was ~13 ms of every start (issue 42)."""
    global _CODES
    if _CODES is None:
        from . import _node_inits

        _CODES = _node_inits.CODES
    return _CODES


def write_inits() -> str:
    """The text of ``serq/_node_inits.py``: each ``__init__`` source of the
    classes :data:`MAKERS` make, once, in the order of their text, as a
    function whose code :func:`node` and :func:`record` take (the defaults
    are given there, so each is written ``=None`` here)."""
    for module in MAKERS:
        importlib.import_module(module)
    out = ['"""The ``__init__`` of every ``@node`` and ``@record`` class, compiled with the package',
           "(written by ``python -m serq.node``; tests/test_node.py checks it is current).",
           '"""', "", "# ruff: noqa", "# mypy: ignore-errors", "CODES = {}"]
    for src in sorted({src for module, src in SOURCES if module.startswith("serq.")}):
        head, _, rest = src.partition("\n")
        head = re.sub(r"=(?:_d_\w+|MISSING)", "=None", head)
        out += ["", "", head, rest.rstrip("\n"), f"CODES[{src!r}] = __init__.__code__"]
    return "\n".join(out) + "\n"


def _init(made: Any, frozen: bool) -> None:
    """Give the dataclass ``made`` (made without one) the ``__init__`` that
    ``dataclass`` writes: its code from ``serq/_node_inits.py`` when that
    holds its source, else compiled here."""
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
        body.append(f"  _set(self, {f.name!r}, {f.name})" if frozen else f"  self.{f.name} = {f.name}")
    src = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["  pass"]) + "\n"
    SOURCES.append((made.__module__, src))
    code = _precompiled().get(src)
    if code is None:  # a class changed since serq/_node_inits.py was written: compiled here
        exec(src, names)  # noqa: S102 - the fields' own names, as dataclass writes it
        init = names["__init__"]
    else:  # the same function exec would make, from bytecode Python keeps (no compile at start-up)
        defaults = tuple(names[p.split("=", 1)[1]] for p in params if "=" in p)
        init = FunctionType(code, names, "__init__", defaults or None)
    init.__qualname__ = f"{made.__qualname__}.__init__"
    made.__init__ = init


def _no_signature_doc(cls: type) -> None:
    """What dataclass writes as a class's missing docstring (the signature of
    an ``__init__`` not yet made), without ``inspect.signature``: for a class
    it parses ``object``'s text signature each time."""
    if cls.__doc__ is None and getattr(cls, "__init__") is object.__init__:
        cls.__doc__ = f"{cls.__name__}()"


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def node(cls: type[T]) -> type[T]:
    """``dataclass(frozen=True, slots=True)`` for a class deriving from :class:`Node`."""
    _no_signature_doc(cls)
    made: Any = dataclass(init=False, repr=False, eq=False, slots=True)(cls)
    _init(made, True)
    return made  # type: ignore[no-any-return]


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, frozen: bool = False, eq: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field,))
def record(cls: type[T] | None = None, /, *, frozen: bool = False, eq: bool = True) -> Any:
    """``dataclass`` (or ``dataclass(frozen=True)``, ``eq=False``): the same ``__init__``,
    equality (the compared fields as a tuple, between instances of one
    class), hash (None, or of the hashed fields when frozen), repr, and
    ``FrozenInstanceError`` on assignment when frozen; ``dataclasses.fields``,
    ``replace`` and ``asdict`` as usual (its ``__dataclass_params__`` are those
    of ``dataclass(init=False, repr=False, eq=False)``: a frozen record's
    subclass is checked by ``@record(frozen=True)``, which refuses a mutable
    base).  A class with ``__post_init__``,
    ``InitVar`` or ``kw_only`` fields, fields out of ``__init__``, or its own
    ``__eq__``, ``__repr__``, ``__setattr__`` or ``__delattr__`` is made by
    ``dataclass`` itself."""
    def make(c: type[T]) -> type[T]:
        if not _plain(c):
            return dataclass(frozen=frozen, eq=eq)(c)
        bases = [vars(b)["__record__"] for b in c.__mro__[1:] if "__record__" in vars(b)]
        if bases and any(b != frozen for b in bases):  # (dataclass's own words)
            raise TypeError("cannot inherit frozen dataclass from a non-frozen one" if frozen else
                            "cannot inherit non-frozen dataclass from a frozen one")
        _no_signature_doc(c)
        made: Any = dataclass(init=False, repr=False, eq=False)(c)
        _init(made, frozen)
        made.__repr__ = _record_repr
        if eq:
            made.__eq__ = _record_eq
            if "__hash__" not in c.__dict__:  # (dataclass: None when mutable, the fields' hash when frozen)
                made.__hash__ = _record_hash if frozen else None
        if frozen:
            _freeze(made)
        made.__record__ = frozen
        return made  # type: ignore[no-any-return]
    return make if cls is None else make(cls)


def _freeze(cls: Any) -> None:
    """The guard ``dataclass(frozen=True)`` writes: assigning or deleting a
    field, or any attribute of an instance of ``cls`` itself, raises
    ``FrozenInstanceError``; a subclass's own attributes pass."""
    names = frozenset(f.name for f in fields(cls))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    __setattr__.__qualname__ = f"{cls.__qualname__}.__setattr__"
    __delattr__.__qualname__ = f"{cls.__qualname__}.__delattr__"
    cls.__setattr__, cls.__delattr__ = __setattr__, __delattr__


def _plain(cls: type) -> bool:
    """Whether :func:`record` writes what ``dataclass`` would for ``cls``:
    none of the methods it writes or calls is the class's own, no base is a
    dataclass but a record, and every
    field is a plain one in ``__init__`` (no ``InitVar``, ``KW_ONLY``,
    ``init=False`` or ``kw_only``)."""
    own = cls.__dict__
    if any(k in own for k in ("__post_init__", "__eq__", "__repr__", "__setattr__", "__delattr__")):
        return False
    if any("__dataclass_fields__" in vars(b) and "__record__" not in vars(b) for b in cls.__mro__[1:]):
        return False  # (a dataclass base: dataclass checks what it allows, frozen or not)
    for name, note in inspect.get_annotations(cls).items():  # (its own, on every Python)
        if "InitVar" in str(note) or "KW_ONLY" in str(note):
            return False
        value = own.get(name)
        if isinstance(value, Field) and (not value.init or value.kw_only is True):
            return False
    return True


def _record_eq(self: Any, other: object) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _names(self.__class__)[0]
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _record_hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in _names(self.__class__)[1]))


@recursive_repr()
def _record_repr(self: Any) -> str:
    inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(self.__class__)[2])
    return f"{self.__class__.__qualname__}({inner})"


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

    import serq.node  # (the package's own module makes the classes, not this __main__)

    pathlib.Path(serq.node.__file__).with_name("_node_inits.py").write_text(serq.node.write_inits())

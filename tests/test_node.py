"""``@node`` (serq/node.py) against ``dataclass(frozen=True, slots=True)``:
the same constructor, equality, hash, repr, frozen guard, pickling,
``fields`` and ``replace``, on twin classes and on every class of the
syntax tree and the IR."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

from serq import ir
from serq.frontend import ast
from serq.node import Node, node


@node
class Ours(Node):
    a: float
    b: tuple = ()
    c: list = field(default_factory=list, compare=False)
    d: str = field(default="x", repr=False)


@dataclass(frozen=True, slots=True)
class Theirs:
    a: float
    b: tuple = ()
    c: list = field(default_factory=list, compare=False)
    d: str = field(default="x", repr=False)


CASES = [((1.0,), {}), ((1.0, (2,)), {}), ((float("nan"),), {}), ((1.0,), {"c": [1], "d": "y"}), ((), {"a": -0.0})]


@pytest.mark.parametrize("args,kw", CASES)
def test_a_node_behaves_as_a_frozen_slotted_dataclass(args: tuple, kw: dict) -> None:
    o, t = Ours(*args, **kw), Theirs(*args, **kw)
    assert repr(o).replace("Ours", "X") == repr(t).replace("Theirs", "X")
    assert hash(o) == hash(t)
    o2, t2 = Ours(*args, **kw), Theirs(*args, **kw)
    assert (o == o2) == (t == t2)  # NaN fields: unequal, as tuples of distinct NaNs are
    assert (o == o) == (t == t)  # the same object: equal, as the tuple comparison's identity shortcut
    assert Ours(1.0, c=[1]) == Ours(1.0, c=[2])  # c is not compared
    assert Ours(1.0) != Ours(2.0) and Ours(1.0) != Theirs(1.0)
    assert [f.name for f in dataclasses.fields(o)] == [f.name for f in dataclasses.fields(t)]
    assert dataclasses.replace(o, a=5.0).a == 5.0 and dataclasses.replace(o, a=5.0).b == o.b
    assert pickle.loads(pickle.dumps(o)) == o or o.a != o.a
    for act in (lambda x: setattr(x, "a", 2.0), lambda x: delattr(x, "a"), lambda x: setattr(x, "z", 1)):
        with pytest.raises((FrozenInstanceError, AttributeError)):
            act(o)
    with pytest.raises(FrozenInstanceError):
        o.a = 2.0  # type: ignore[misc]
    assert not hasattr(o, "__dict__")


def test_missing_and_extra_arguments_are_refused_as_dataclass_refuses_them() -> None:
    with pytest.raises(TypeError):
        Ours()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Ours(1.0, z=2)  # type: ignore[call-arg]
    assert Ours(1.0).c is not Ours(1.0).c  # a fresh default per instance


def test_every_tree_and_ir_class_is_a_node() -> None:
    for mod in (ast, ir):
        classes = [c for c in vars(mod).values()
                   if isinstance(c, type) and c.__module__ == mod.__name__ and dataclasses.is_dataclass(c)]
        assert len(classes) > 30
        for c in classes:
            assert issubclass(c, Node) and "__slots__" in vars(c), c
            assert c.__init__.__qualname__ == f"{c.__qualname__}.__init__"


def _package_classes() -> list[type]:
    return [c for m in (ir, ast) for c in vars(m).values()
            if isinstance(c, type) and issubclass(c, Node) and c.__module__ == m.__name__]


def test_serq_node_inits_holds_every_class_s_init_as_written_now() -> None:
    """serq/_node_inits.py is current: `python -m serq.node` would write the same text."""
    from pathlib import Path

    import serq.node

    written = Path(serq.node.__file__).with_name("_node_inits.py").read_text()
    assert serq.node.write_inits() == written


def test_a_precompiled_init_is_the_function_exec_makes() -> None:
    """Each class's ``__init__`` (bytecode kept with the package) has the code,
    defaults and globals of the one its source compiles to at run time."""
    import serq.node

    classes = _package_classes()
    assert len(classes) >= 90
    sources = dict.fromkeys(src for module, src in serq.node.SOURCES if module.startswith("serq."))
    for cls in classes:
        init = cls.__init__
        assert init.__code__.co_filename.endswith("_node_inits.py"), cls  # not compiled at start-up
        src = next(s for s in sources if serq.node._precompiled()[s] is init.__code__)
        names = dict(init.__globals__)
        exec(src, names)  # noqa: S102 - as node() did before
        made = names["__init__"]
        assert init.__code__.co_code == made.__code__.co_code, cls
        assert init.__code__.co_varnames == made.__code__.co_varnames, cls
        assert init.__code__.co_consts == made.__code__.co_consts, cls
        assert init.__defaults__ == made.__defaults__, cls
        assert init.__qualname__ == f"{cls.__qualname__}.__init__"


def test_a_class_with_a_default_factory_gets_a_fresh_value_from_the_precompiled_init() -> None:
    a, b = ir.Program((), (), (), (), ()), ir.Program((), (), (), (), ())
    assert a.constants == {} and a.constants is not b.constants

"""``@node`` (serq/node.py) against ``dataclass(frozen=True, slots=True)``:
the same constructor, equality, hash, repr, frozen guard, pickling,
``fields`` and ``replace``, on twin classes and on every class of the
syntax tree and the IR; ``@record`` against ``dataclass`` and
``dataclass(frozen=True)`` the same way, on twins and on serq's records."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import FrozenInstanceError, InitVar, dataclass, field
from pathlib import Path

import pytest

from serq import ir
from serq.frontend import ast
from serq.node import MAKERS, Node, node, record


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
    """Every ``@node`` and ``@record`` class of serq's modules (those with
    an ``__init__`` of their own: not a fallback to ``dataclass``)."""
    import importlib

    modules = [importlib.import_module(m) for m in MAKERS]
    return [c for m in modules for c in vars(m).values()
            if isinstance(c, type) and c.__module__ == m.__name__ and dataclasses.is_dataclass(c)
            and not c.__dataclass_params__.init]


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
    assert len(classes) >= 110
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


def _twin(name: str) -> type:
    """A class of the four fields every twin has (``c`` not compared, ``d`` not shown)."""
    return type(name, (), {"__module__": __name__, "__annotations__": {"a": "float", "b": "tuple", "c": "list", "d": "str"},
                           "b": (), "c": field(default_factory=list, compare=False), "d": field(default="x", repr=False)})


MineMutable, TheirsMutable = record(_twin("MineMutable")), dataclass(_twin("TheirsMutable"))
MineFrozen, TheirsFrozen = record(frozen=True)(_twin("MineFrozen")), dataclass(frozen=True)(_twin("TheirsFrozen"))


@pytest.mark.parametrize("mine,theirs", [(MineMutable, TheirsMutable), (MineFrozen, TheirsFrozen)])
@pytest.mark.parametrize("args,kw", CASES)
def test_a_record_behaves_as_a_dataclass(mine: type, theirs: type, args: tuple, kw: dict) -> None:
    o, t = mine(*args, **kw), theirs(*args, **kw)
    assert repr(o).replace(mine.__name__, "X") == repr(t).replace(theirs.__name__, "X")
    assert (mine.__hash__ is None) == (theirs.__hash__ is None)
    if theirs.__hash__ is not None:
        assert hash(o) == hash(t)
    o2 = mine(*args, **kw)
    assert (o == o2) == (t == theirs(*args, **kw)) and (o == o) == (t == t)
    assert mine(1.0, c=[1]) == mine(1.0, c=[2]) and mine(1.0) != mine(2.0) and mine(1.0) != theirs(1.0)
    assert [f.name for f in dataclasses.fields(o)] == [f.name for f in dataclasses.fields(t)]
    assert dataclasses.replace(o, a=5.0).a == 5.0 and dataclasses.asdict(o) == dataclasses.asdict(t)
    assert pickle.loads(pickle.dumps(o)) == o or o.a != o.a
    assert mine.__match_args__ == theirs.__match_args__ and mine(1.0).c is not mine(1.0).c
    if mine is MineFrozen:
        for act in (lambda x: setattr(x, "a", 2.0), lambda x: delattr(x, "a"), lambda x: setattr(x, "z", 1)):
            with pytest.raises(FrozenInstanceError):
                act(o)
    else:
        o.a = 3.0
        assert o.a == 3.0
    with pytest.raises(TypeError):
        mine()
    with pytest.raises(TypeError):
        mine(1.0, z=2)


def test_a_recursive_record_repr_stops_as_a_dataclass_s_does() -> None:
    o, t = MineMutable(1.0, c=[]), TheirsMutable(1.0, c=[])
    o.b, t.b = (o,), (t,)  # type: ignore[assignment]
    assert repr(o).replace("MineMutable", "X") == repr(t).replace("TheirsMutable", "X")


def test_a_record_that_needs_what_record_does_not_write_is_a_dataclass() -> None:
    """``__post_init__``, a field out of ``__init__``, ``kw_only``, ``InitVar``,
    an own ``__eq__``: ``dataclass`` makes the class, so it behaves as one."""
    @record
    class Post:
        a: int
        b: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            self.b = self.a + 1

    @record
    class KwOnly:
        a: int = field(kw_only=True)

    @record(frozen=True)
    class OwnEq:
        a: int

        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    assert Post(1).b == 2 and Post.__dataclass_params__.init
    assert KwOnly(a=1).a == 1 and KwOnly.__dataclass_params__.init
    with pytest.raises(TypeError):
        KwOnly(1)  # type: ignore[misc]
    @record
    class Init:
        a: int
        scale: InitVar[int] = 1

        def __post_init__(self, scale: int) -> None:
            self.a *= scale

    @record
    class NotInInit:
        a: int
        b: list = field(init=False, default_factory=list)

    assert OwnEq(1) == OwnEq(2) and OwnEq.__dataclass_params__.init
    assert Init(2, 3).a == 6 and Init.__dataclass_params__.init
    assert NotInInit(1).b == [] and NotInInit.__dataclass_params__.init
    with pytest.raises(TypeError):
        NotInInit(1, [2])  # type: ignore[call-arg]


def test_makers_lists_every_module_that_makes_nodes_or_records() -> None:
    """``write_inits`` imports :data:`MAKERS` to write every class's ``__init__``:
    a module that uses ``@node``/``@record`` and is not listed would have its
    classes' ``__init__`` compiled at every start."""
    root = Path(__file__).resolve().parents[1] / "serq"
    using = set()
    for path in root.rglob("*.py"):
        text = path.read_text()
        if path.name != "node.py" and ("\n@record" in text or "\n@node" in text):
            using.add(".".join(path.relative_to(root.parent).with_suffix("").parts))
    assert using == set(MAKERS)


def test_serq_run_makes_no_dataclass_function_at_start_up() -> None:
    """No ``compile`` of a dataclass's generated source while ``serq run`` loads and
    runs mg1.sq (its records and nodes take theirs from serq/_node_inits.py)."""
    import subprocess
    import sys

    code = ("import sys, io, contextlib\n"
            "seen = []\n"
            "def hook(ev, args):\n"
            "    f = sys._getframe(1) if ev == 'compile' else None\n"
            "    while f and f.f_code.co_name != '_process_class': f = f.f_back\n"
            "    if f and f.f_locals['cls'].__module__.startswith('serq'): seen.append(f.f_locals['cls'].__qualname__)\n"
            "sys.addaudithook(hook)\n"
            "sys.argv = ['serq', 'run', 'programs/single-turn/mg1.sq', '--horizon', '5', '--warmup', '0']\n"
            "from serq.cli import main\n"
            "try:\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()): main()\n"
            "except SystemExit: pass\n"
            "print(sorted(set(seen)))\n")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "[]", out.stdout

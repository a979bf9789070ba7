"""Start-up stays light (issue 9, item 4) — what is imported, not how fast.

* ``import serq``, and the ``serq check`` and ``serq run`` commands, never
  import pydantic (typer coerces through it), tabulate, or the drawing code;
  ``serq check`` never imports the simulator or NumPy either.  Each is checked
  in a fresh interpreter, by looking at ``sys.modules``.
* The grammar reader builds exactly the expressions Parsimonious builds from
  the same rule text.
* The quick coercion of the command's options gives what typer's own (through
  pydantic) gives, and hands everything else to it.

``benchmarks/bench_startup.py`` measures the times.
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bounds import env

ROOT = Path(__file__).resolve().parent.parent
MG1 = "programs/single-turn/mg1.sq"

NEVER = ("pydantic", "pydantic_core", "tabulate", "serq.draw", "rich")


def modules_after(code: str) -> set[str]:
    """The modules loaded once ``code`` has run, in a fresh interpreter."""
    probe = (
        "import sys, json\n"
        f"{code}\n"
        "sys.__stdout__.write('\\n@@' + json.dumps(sorted(sys.modules)))\n"
    )
    last = last_line_after(probe)
    assert last.startswith("@@"), last
    return set(json.loads(last[2:]))


def command(*argv: str) -> str:
    """Run ``serq ARGV`` in the probe's process (its exit is caught)."""
    return (
        "from serq import cli\n"
        f"sys.argv = ['serq', *{list(argv)!r}]\n"
        "try:\n    cli.main()\nexcept SystemExit as done:\n"
        "    assert done.code in (0, None), done.code\n"
    )


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_import_serq_is_light() -> None:
    mods = modules_after("import serq")
    assert not loaded(mods, NEVER + ("typer", "numpy", "simpy", "serq.sim", "serq.report"))


def test_serq_check_imports_no_pydantic_tabulate_draw_or_simulator() -> None:
    mods = modules_after(command("check", MG1))
    assert {"serq.linked", "serq.ir"} <= mods  # it did load the program (linked, or as kept: serq/linked.py)
    assert not loaded(mods, NEVER + ("numpy", "simpy", "serq.sim"))


def test_serq_run_imports_no_pydantic_tabulate_or_draw() -> None:
    mods = modules_after(command("run", MG1, "--horizon", "5", "--warmup", "0", "--seed", "2", "--set", "lam=0.5"))
    assert "serq.sim.simulator" in mods  # it did run the program
    assert not loaded(mods, NEVER)


def last_line_after(probe: str, environ: dict[str, str] | None = None) -> str:
    """The last line ``probe`` prints in a fresh interpreter (which must exit 0); it only
    computes, its runs bounded by events (tests/bounds.py): no timeout."""
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                          env=env() if environ is None else environ)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_serq_run_imports_simpy_without_importlib_metadata() -> None:
    # SimPy's __init__ asks importlib.metadata for its version: ~40 ms of imports (email, zipfile,
    # socket) in every run; serq.sim imports SimPy with a stand-in there (serq/sim/__init__.py)
    mods = modules_after(command("run", MG1, "--horizon", "5", "--warmup", "0"))
    assert "simpy" in mods and "serq.sim.simulator" in mods
    assert not loaded(mods, ("importlib.metadata", "email", "zipfile"))


def _simpy_after(code: str) -> list[object]:
    """What a fresh interpreter sees of SimPy once ``code`` has run: its version (as the real
    importlib.metadata gives it too), whether that module is the real one, and SimPy's API."""
    probe = (f"{code}\nimport sys, json, importlib, importlib.metadata as m, simpy\n"
             "print(json.dumps([simpy.__version__, m.version('simpy'), m.__file__ is not None,"
             " importlib.metadata is m, simpy.Environment.__name__, hasattr(simpy, 'nothing')]))")
    return json.loads(last_line_after(probe))


@pytest.mark.parametrize("first", [
    "import serq.sim",  # the stand-in: SimPy's version on first use
    "import importlib.metadata\nimport serq.sim",  # the real module already there: a plain import
    "import threading, time\nthreading.Thread(target=time.sleep, args=(0.5,)).start()\nimport serq.sim",
])
def test_simpy_keeps_its_version_and_importlib_metadata_is_the_real_one(first: str) -> None:
    seen = _simpy_after(first)
    assert seen[0] == seen[1] and re.fullmatch(r"\d+\.\d+(\.\d+)?\S*", seen[0])
    assert seen[2:] == [True, True, "Environment", False]


def _blas_threads_after(code: str, **environ: str | None) -> str:
    """``OPENBLAS_NUM_THREADS`` as a fresh interpreter sees it once ``code`` has run."""
    probe = f"import os, sys\n{code}\nprint(os.environ.get('OPENBLAS_NUM_THREADS', 'unset'))"
    child = env(**{k: v for k, v in environ.items() if v is not None})
    for k in [k for k, v in environ.items() if v is None]:
        child.pop(k, None)
    return last_line_after(probe, child)


def test_the_command_starts_blas_with_one_thread_unless_the_user_chose() -> None:
    # serq never calls BLAS; OpenBLAS's threads only take CPU from the run (serq/cli.py, one_blas_thread)
    call = "from serq import cli\ncli.one_blas_thread()"
    assert _blas_threads_after(call, OPENBLAS_NUM_THREADS=None) == "1"
    assert _blas_threads_after(call, OPENBLAS_NUM_THREADS="4") == "4"  # the user's choice stands
    # NumPy loaded already (its pool started): nothing to change; and a library caller's process is left alone
    assert _blas_threads_after("import numpy\n" + call, OPENBLAS_NUM_THREADS=None) == "unset"
    assert _blas_threads_after("import serq\nserq.run(serq.load('programs/single-turn/mg1.sq'), horizon=5, warmup=0)",
                               OPENBLAS_NUM_THREADS=None) == "unset"


def test_a_refused_option_value_still_gets_typer_s_message() -> None:
    from frontend_util import cli_main

    code, out = cli_main("run", MG1, "--seed", "-1")
    assert code == 2
    assert "Invalid value for '--seed': Input should be greater than or equal to 0" in out
    code, out = cli_main("run", MG1, "--horizon", "ten")
    assert code == 2
    assert "Invalid value for '--horizon'" in out


# ---------------------------------------------------------------------------
# the grammar reader


def _same(mine: object, ref: object, pairs: dict[int, int]) -> None:
    """Structural identity: the same classes, names, literals, patterns,
    bounds, and the same sharing (one object for one object)."""
    if id(mine) in pairs:
        assert pairs[id(mine)] == id(ref), f"sharing differs at {getattr(mine, 'name', mine)!r}"
        return
    pairs[id(mine)] = id(ref)
    assert type(mine) is type(ref), (mine, ref)
    for attr in ("name", "identity_tuple", "literal", "min", "max", "negativity"):
        if hasattr(ref, attr):
            assert getattr(mine, attr) == getattr(ref, attr), (attr, mine, ref)
    if hasattr(ref, "re"):
        assert (mine.re.pattern, mine.re.flags) == (ref.re.pattern, ref.re.flags)  # type: ignore[attr-defined]
    if hasattr(ref, "members"):
        assert len(mine.members) == len(ref.members)  # type: ignore[attr-defined]
        for a, b in zip(mine.members, ref.members):  # type: ignore[attr-defined]
            _same(a, b, pairs)


def _check_reader(text: str) -> None:
    from parsimonious.grammar import Grammar

    from serq.frontend.grammar import compile_rules

    ref = Grammar(text)
    mine = compile_rules(text, fallback=False)
    assert list(mine) == list(ref)
    assert str(mine) == str(ref)
    pairs: dict[int, int] = {}
    _same(mine.default_rule, ref.default_rule, pairs)
    for name in ref:
        _same(mine[name], ref[name], pairs)


def test_the_grammar_reader_builds_what_parsimonious_builds() -> None:
    from serq.frontend.grammar import GRAMMAR_SOURCE

    _check_reader(GRAMMAR_SOURCE)


def test_the_grammar_reader_on_the_rest_of_the_rule_syntax() -> None:
    _check_reader(r'''
        # a comment
        top   = alias (a / b c)+ d{2} e{1,} f{,3} g{2,5} &h !(a b)* "x\ty" 'q' r'\d'
        alias = b
        a     = ~"[a-z]+"i b
        b     = ~r"\s*"ms
        c = "c" / 'c2' / ~'c'ixa
        d = ""
        e = "\\"
        f = ~"f" g / h
        g = "g"
        h = !!g &&g
    ''')


def _match(expr: object, text: str, pos: int) -> object:
    from parsimonious.exceptions import ParseError

    try:
        node = expr.match(text, pos)  # type: ignore[attr-defined]
    except ParseError as err:
        return ("fail", err.pos)
    return (node.start, node.end)


def test_keyword_leaves_match_what_their_regexes_match() -> None:
    """The grammar's keyword rules end in a :class:`Keyword` leaf instead of
    ``~r"WORD\\b"`` (no regex compiled per keyword at start-up); the rest of the
    grammar is what the reader builds, and each leaf matches and fails where
    its regex does: at the end of the text, before a space, a digit, ``_``, a
    non-ASCII letter or mark, punctuation, and on a prefix of the word."""
    from parsimonious.expressions import Regex

    from serq.frontend.grammar import GRAMMAR, GRAMMAR_SOURCE, KEYWORDS, Keyword, compile_rules

    plain = compile_rules(GRAMMAR_SOURCE, fallback=False)
    assert list(GRAMMAR) == list(plain)
    assert str(GRAMMAR) == str(plain)  # the printed rules too (the leaf's pattern, on demand)
    for k in KEYWORDS:
        leaf = GRAMMAR[f"kw_{k}"].members[0]
        assert isinstance(leaf, Keyword) and leaf.word == k
        ref = Regex(k + r"\b")
        for tail in ("", " x", "1", "_", "é", "\u0301", "(", ";", "x", "\n"):
            for text in (k + tail, "  " + k + tail, k[:-1] + tail):
                for pos in (0, 2):
                    assert _match(leaf, text, pos) == _match(ref, text, pos), (k, text, pos)


def test_the_grammar_reader_hands_what_it_does_not_know_to_parsimonious() -> None:
    from parsimonious.exceptions import UndefinedLabel

    from serq.frontend.grammar import compile_rules

    assert compile_rules('a = b"x"')["a"].literal == b"x"  # a bytes literal: Parsimonious read it
    with pytest.raises(UndefinedLabel):
        compile_rules("a = nowhere")


# ---------------------------------------------------------------------------
# the quick coercion of option values


def _typer_value(annotation: object, low: object, value: object) -> tuple[str, object]:
    """What typer's adapter makes of ``value``: ("ok", result) or ("error", message)."""
    from pydantic import ValidationError
    from typer._adapters import try_build_adapter
    from typer.models import OptionInfo

    adapter = try_build_adapter(annotation, OptionInfo(min=low))
    assert adapter is not None
    try:
        return "ok", adapter.validate_python(value)
    except ValidationError as err:
        return "error", str(err)


def _strings(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "0123456789.eE+-_ xinf\t٣"
    out = ["0", "1", "007", "-0", "+3", "1.", ".5", "1e5", "1E-5", "1e999", "-1e999", "1e-400", "inf",
           "nan", "-1", "1_0", " 2", "2 ", "", "0x1f", "1.5e", "٣", "99999999999999999999", "1e+308",
           "123456789012345678", "1234567890123456789", "0.1", "2.5e-3", "0000", "-0.0", "+.5e+2"]
    for _ in range(n):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))))
    return out


@pytest.mark.parametrize("annotation,low", [(float, None), (int, 0), (int, 1)])
def test_quick_numbers_are_what_typer_makes_of_them(annotation: type, low: int | None) -> None:
    pytest.importorskip("pydantic")
    pytest.importorskip("typer._adapters")
    from serq._typer_patch import SLOW, quick_value

    kind = annotation.__name__
    quick_count = 0
    for text in _strings(7, 600):
        quick = quick_value(kind, text, low, None)
        if quick is SLOW:
            continue
        quick_count += 1
        status, value = _typer_value(annotation, low, text)
        assert status == "ok", (text, value)
        assert type(quick) is type(value), text
        assert quick == value and math.copysign(1, quick) == math.copysign(1, value), (text, quick, value)
    assert quick_count > 50


def test_quick_strings_and_lists_are_what_typer_makes_of_them() -> None:
    pytest.importorskip("pydantic")
    pytest.importorskip("typer._adapters")
    from typing import List

    from serq._typer_patch import SLOW, quick_value

    for text in ["mg1.sq", "", " a b ", "\udcff", "é", "x=1", "a\x00b"]:
        assert quick_value("str", text, None, None) == _typer_value(str, None, text)[1]
    many = ("a=1", "b=2")
    assert quick_value("list", many, None, None) == _typer_value(List[str], None, many)[1]
    assert quick_value("bool", True, None, None) is True
    assert quick_value("bool", "yes", None, None) is SLOW
    assert quick_value("int", 3, 0, None) is SLOW  # not text: typer's own coercion

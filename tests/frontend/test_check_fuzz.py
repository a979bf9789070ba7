"""`serq check` never shows a traceback: random text and random mutations of the
bundled programs (characters and tokens deleted, inserted, swapped) all end in
exit code 0, 1 or 2 with a message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from frontend_util import cli_main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "programs").glob("*/*.sq"))}
SOURCES["lib/vllm.sq"] = (ROOT / "lib" / "vllm.sq").read_text()
NAMES = sorted(SOURCES)
TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
WORDS = ["hold", "run", "set", "let", "def", "use", "at", "admission", "cache", "reuse", "reserve", "request",
         "turn", "end", "loop", "branch", "with", "else", "choose", "in", "by", "prefill", "decode", "tool", "on",
         "growing", "pool", "stage", "step", "workload", "server", "session", "kv", "engine", "inf", "now",
         "blocksize", "cachedin", "~exp", "0", "1", "0.5", "1e9", "1.2.3", '"x.sq"', "{", "}", "(", ")", "[", "]",
         ";", ",", "=", "==", "?", ":", "&&", "||", "!", "-", "^", "//", "/*", "*/", "\n", "λ", "\x00", "%"]
SETTINGS = settings(max_examples=400, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A copy of the layout a program's `use "../../lib/vllm.sq"` needs (`write` points it there)."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "lib").mkdir()
    (root / "programs" / "x").mkdir(parents=True)
    return root


def serq_check(path: Path, *sets: str) -> tuple[int, str]:
    """Run `serq check` in this process; its exit code and everything it printed."""
    return cli_main("check", str(path), *(a for s in sets for a in ("--set", s)))


def write(tree: Path, name: str, text: str) -> Path:
    """Put a (mutated) program or library in place; the other one stays as bundled."""
    lib = text if name == "lib/vllm.sq" else SOURCES["lib/vllm.sq"]
    prog = SOURCES["programs/multi-turn/vllm.sq"] if name == "lib/vllm.sq" else text
    prog = prog.replace('use "std/vllm";', 'use "../../lib/vllm.sq";')  # the copy's library, mutated or not
    # (a lone surrogate that `st.characters()` inserted is written as the bytes no UTF-8 file holds,
    # as the random text below is: the check must refuse those too)
    (tree / "lib" / "vllm.sq").write_text(lib, encoding="utf-8", errors="surrogatepass")
    path = tree / "programs" / "x" / "p.sq"
    path.write_text(prog, encoding="utf-8", errors="surrogatepass")
    return path


def assert_clean(code: int, output: str) -> None:
    assert code in (0, 1, 2)
    assert "Traceback" not in output
    assert output.strip(), "a check always says something"


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(NAMES))
    source = SOURCES[name]
    tokens = draw(st.booleans())
    parts = TOKEN.findall(source) if tokens else list(source)
    for _ in range(draw(st.integers(1, 5))):
        if not parts:
            break
        op = draw(st.sampled_from(["delete", "insert", "swap"]))
        i = draw(st.integers(0, len(parts) - 1))
        if op == "delete":
            del parts[i]
        elif op == "insert":
            parts.insert(i, draw(st.sampled_from(WORDS)) if tokens else draw(st.characters()))
        else:
            j = draw(st.integers(0, len(parts) - 1))
            parts[i], parts[j] = parts[j], parts[i]
    return name, "".join(parts)


@SETTINGS
@given(mutated())
def test_a_mutated_bundled_program_checks_or_fails_without_a_traceback(tree, case):
    name, text = case
    assert_clean(*serq_check(write(tree, name, text)))


@SETTINGS
@given(st.one_of(st.text(max_size=300), st.lists(st.sampled_from(WORDS), max_size=60).map(" ".join)))
def test_random_text_checks_or_fails_without_a_traceback(tree, text):
    path = tree / "random.sq"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    assert_clean(*serq_check(path))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.text(max_size=40))
def test_a_random_set_value_is_refused_or_taken_without_a_traceback(text):
    code, output = serq_check(ROOT / "programs" / "subagent" / "vllm_subagents.sq", f"q={text}")
    assert_clean(code, output)


def test_the_bundled_programs_check_through_the_same_path(tree):
    for name in NAMES:
        if name.startswith("programs/"):
            code, output = serq_check(ROOT / name)
            assert (code, output.startswith("OK: ")) == (0, True)


# ---------------------------------------------------------------- hostile files and huge counts (issue 8)
# docs/frontend.md, "Limits and hostile input": none of these may reach a traceback, an
# internal error, a hang or an unbounded read; each is exit 1 with a message.
HOSTILE = settings(max_examples=25, deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                          HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Paths that are not readable program text, by kind."""
    import os

    root = tmp_path_factory.mktemp("hostile")
    (root / "dir").mkdir()
    (root / "latin1.sq").write_bytes("let café = 1;".encode("latin-1"))
    with open(root / "sparse.sq", "wb") as f:
        f.truncate(3 << 20)  # over the size limit, instantly
    kinds = {"dir": root / "dir", "missing": root / "none.sq", "latin1": root / "latin1.sq",
             "sparse": root / "sparse.sq", "nul": "a\x00b.sq", "empty-name": ""}
    if hasattr(os, "mkfifo"):
        os.mkfifo(root / "fifo")
        kinds["fifo"] = root / "fifo"
    for dev in ("/dev/zero", "/dev/urandom", "/dev/null"):
        if os.path.exists(dev):
            kinds[dev] = Path(dev)
    return root, kinds


@HOSTILE
@given(st.data())
def test_a_file_that_is_not_program_text_is_refused_as_program_or_library(hostile, data):
    root, kinds = hostile
    kind = data.draw(st.sampled_from(sorted(kinds)))
    target = str(kinds[kind])
    if data.draw(st.booleans()):
        if kind in ("nul", "empty-name"):  # argv cannot hold a NUL; the API can
            from serq import SerqError, load
            with pytest.raises(SerqError):
                load(Path(target))
            return
        code, output = serq_check(Path(target))
    else:
        prog = root / "uses.sq"
        prog.write_text('let a = 1;\nuse "' + target.replace('"', "") + '";\n', encoding="utf-8")
        code, output = serq_check(prog)
    assert_clean(code, output)
    assert code == 1 and ("cannot read" in output or "more than a program can hold" in output), output


def numbered(text: str, draw) -> str:
    """``text`` with some number literals made huge, tiny or very long."""
    huge = st.sampled_from(["9" * 400, "9" * 5000, "1e999", "1e-999", "1e" + "9" * 50, "0." + "0" * 400 + "1",
                            "1" + "_0" * 300, ".5e-99999", "1" + "0" * 20000])
    parts = re.split(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])", text)
    for i in range(1, len(parts), 2):
        if draw(st.integers(0, 3)) == 0:
            parts[i] = draw(huge)
    return "".join(parts)


@HOSTILE
@given(st.data())
def test_huge_numbers_in_the_bundled_programs_check_or_fail_cleanly(tree, data):
    name = data.draw(st.sampled_from(NAMES))
    assert_clean(*serq_check(write(tree, name, numbered(SOURCES[name], data.draw))))


ITEMS = ["let c{i} = {i};", "def f{i}(x) = x + {i};", "pool p{i} {{ cap {i}; }}", "stage s{i} : delay;",
         "def g{i}() {{ set a{i} = 1; }}", "let c = 1;", "use \"std/args\";", ";", "// {i}", "/* {i} */"]
DEEP = ["(", "-", "!", "1 ? 2 : ", "1 + ", "1 ^ ", "1 * ", "1 < ", "1 && ", "f(", "branch (1) { ", "loop { ",
        "hold kv (1) { ", "[", "{"]


@HOSTILE
@given(st.sampled_from(ITEMS), st.one_of(st.integers(1, 1500), st.integers(25_000, 150_000)))
def test_a_huge_number_of_items_is_checked_or_refused_in_bounded_time(tree, item, n):
    path = tree / "many.sq"
    body = "\n".join(item.format(i=i) for i in range(n))
    path.write_text(SOURCES["programs/single-turn/mg1.sq"].replace("stage svc", body + "\nstage svc"))
    assert_clean(*serq_check(path))


@HOSTILE
@given(st.sampled_from(DEEP), st.integers(1, 6000), st.sampled_from(["let x = {};", "session {{ set x = {}; }}"]))
def test_deep_nesting_is_refused_with_a_message(tree, opener, depth, where):
    path = tree / "deep.sq"
    path.write_text(where.format(opener * depth + "1"), encoding="utf-8")
    assert_clean(*serq_check(path))


def whole_file_parse(source):
    """The reference: Parsimonious on the whole file, then the builder (the parser
    before it went item by item)."""
    from parsimonious.exceptions import ParseError

    from serq.frontend.build import Builder
    from serq.frontend.grammar import GRAMMAR
    from serq.frontend.lexer import Tokens, tokenize
    from serq.frontend.parse import parse_failure

    tokens = Tokens(source, tokenize(source))
    try:
        tree = GRAMMAR.parse(source.text)
    except ParseError as failure:
        raise parse_failure(failure, tokens) from None
    return Builder(source, tokens).visit(tree)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_parsing_item_by_item_gives_the_whole_file_parse(case):
    from serq.errors import SerqError, Source
    from serq.frontend.parse import parse_source

    def outcome(parse, source):
        try:
            return repr(parse(source))
        except SerqError as err:
            return err.render()

    source = Source(case[1], None)
    assert outcome(parse_source, source) == outcome(whole_file_parse, source)

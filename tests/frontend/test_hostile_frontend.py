"""Hostile input to the front end and the trace reader (issue 8, B4–B6; docs/frontend.md,
"Limits and hostile input"): unreadable paths, files that are not regular, files too
large, programs with too many tokens, and definitions by the thousand.  Each ends in a
one-line message, exit 1, in bounded time and memory; none is an internal error."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest
from frontend_util import cli_main, fails, where

import serq
from serq import reading
from serq.errors import SerqError
from serq.frontend import defs as defs_module
from serq.frontend import load_program
from serq.frontend.lexer import MAX_TOKENS
from serq.frontend.library import MAX_BYTES
from serq.traces import reader as trace_module

TRACE_PROGRAM = """
stage think : delay;
workload {
  arrive batch(1);
  trace "t.csv" ordered;
  session { turn; loop { request; branch (more) { run think (think); turn; } else { end; } } }
}
server { observe new_tokens = new; }
run { horizon 10; }
"""

posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
has_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")


cli_run = cli_main


def one_clean_error(code: int, output: str, *needles: str) -> None:
    assert code == 1, output
    assert "Traceback" not in output and "internal error" not in output, output
    for needle in needles:
        assert needle in output, output


# ---------------------------------------------------------------- B4: unreadable paths
def test_a_use_path_with_a_nul_byte_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "p.sq").write_text('let a = 1;\nuse "x\x00y";\n')
    err = fails(path=str(tmp_path / "p.sq"))
    assert err.message == "cannot read `x\\x00y`: the path holds a NUL byte"
    assert where(err) == (2, 5)
    one_clean_error(*cli_run("check", str(tmp_path / "p.sq")), "p.sq:2:5: cannot read `x\\x00y`")


def test_a_program_or_trace_path_with_a_nul_byte_is_an_error_not_a_crash(tmp_path: Path) -> None:
    err = fails(path="p\x00.sq")
    assert err.message == "cannot read `p\\x00.sq`: the path holds a NUL byte"
    with pytest.raises(SerqError, match=r"cannot read trace `t\\x00.csv`: the path holds a NUL byte"):
        trace_module.read_trace("t\x00.csv")


def test_directories_are_refused_as_program_library_and_trace(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "p.sq").write_text('use "d";\n')
    err = fails(path=str(tmp_path / "p.sq"))
    assert err.message == "cannot read `d`: it is a directory" and where(err) == (1, 5)
    assert fails(path=str(tmp_path / "d")).message.endswith(": it is a directory")
    with pytest.raises(SerqError, match="it is a directory"):
        trace_module.read_trace(str(tmp_path / "d"))


def test_permission_denied_is_the_system_reason(tmp_path: Path) -> None:
    (tmp_path / "p.sq").write_text("let a = 1;")
    with mock.patch.object(reading.os, "open", side_effect=PermissionError(13, "Permission denied")):
        err = fails(path=str(tmp_path / "p.sq"))
        assert err.message == f"cannot read `{tmp_path / 'p.sq'}`: Permission denied"
        with pytest.raises(SerqError, match="Permission denied"):
            trace_module.read_trace(str(tmp_path / "p.sq"))


def test_text_that_is_not_utf8_is_located_at_its_first_bad_byte(tmp_path: Path) -> None:
    (tmp_path / "p.sq").write_bytes(b"let a = 1;\nlet b = \xff;\n")
    err = fails(path=str(tmp_path / "p.sq"))
    assert err.message.endswith("it is not UTF-8 text (byte 0xFF)") and where(err) == (2, 9)
    (tmp_path / "lib.sq").write_bytes(b"def f(x) = x;\n// caf\xe9\n")
    (tmp_path / "q.sq").write_text('use "lib.sq";\n')
    err = fails(path=str(tmp_path / "q.sq"))
    assert err.span.source.path.endswith("lib.sq") and where(err) == (2, 7)
    (tmp_path / "t.csv").write_bytes(b"1,1,1,1,1\n1,2,\xfe,1,1\n")
    with pytest.raises(SerqError) as info:
        trace_module.read_trace(str(tmp_path / "t.csv"))
    assert info.value.headline() == f"{tmp_path / 't.csv'}:2:5: not UTF-8 text (byte 0xFE)"


# ---------------------------------------------------------------- B5: files that are not regular, sizes
@has_dev_zero
def test_dev_zero_is_refused_as_program_library_and_trace(tmp_path: Path) -> None:
    one_clean_error(*cli_run("check", "/dev/zero"), "cannot read `/dev/zero`: it is a device, not a regular file")
    (tmp_path / "p.sq").write_text('use "/dev/zero";\n')
    one_clean_error(*cli_run("check", str(tmp_path / "p.sq")), "p.sq:1:5: cannot read `/dev/zero`: it is a device")
    (tmp_path / "t.sq").write_text(TRACE_PROGRAM)
    one_clean_error(*cli_run("run", str(tmp_path / "t.sq"), "--trace", "/dev/zero"),
                    "cannot read trace `/dev/zero`: it is a device, not a regular file")


@posix_only
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f")
    (tmp_path / "p.sq").write_text('use "f";\n')
    err = fails(path=str(tmp_path / "p.sq"))
    assert err.message == "cannot read `f`: it is a pipe (FIFO), not a regular file"
    assert fails(path=str(tmp_path / "f")).message.endswith("it is a pipe (FIFO), not a regular file")
    with pytest.raises(SerqError, match="it is a pipe"):
        trace_module.read_trace(str(tmp_path / "f"))


@has_dev_zero
def test_reading_stops_one_byte_past_the_limit_however_much_the_file_offers() -> None:
    """A file that grows while it is read (here: /dev/zero passed off as regular)."""
    with mock.patch.object(reading, "_kind", return_value=None):
        with pytest.raises(reading.Unreadable) as info:
            reading.read_bytes("/dev/zero", 3 * reading.MiB + 5)
    assert info.value.too_large and info.value.reason == "it is larger than 3145733 bytes"


def test_a_program_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.sq"
    with open(path, "wb") as f:
        f.truncate(MAX_BYTES + 1)  # sparse: no time spent writing it
    err = fails(path=str(path))
    assert err.message == f"cannot read `{path}`: it is larger than 2 MiB"
    assert err.helps == ["a program and its libraries hold at most 2 MiB and 100 000 tokens"]


def test_libraries_share_the_size_limit_with_the_program(tmp_path: Path) -> None:
    (tmp_path / "a.sq").write_text("// " + "x" * (MAX_BYTES // 2) + "\n")
    (tmp_path / "b.sq").write_text("// " + "y" * (MAX_BYTES // 2) + "\n")
    (tmp_path / "p.sq").write_text('use "a.sq";\nuse "b.sq";\n')
    err = fails(path=str(tmp_path / "p.sq"))
    assert err.message == "the libraries are more than a program can hold" and where(err) == (2, 5)


def test_a_program_given_as_text_has_the_same_size_limit() -> None:
    err = fails("// " + "x" * MAX_BYTES)
    assert err.message.startswith("the program text is longer than 2 097 152 characters")


def test_a_trace_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    with open(path, "wb") as f:
        f.truncate(trace_module.MAX_TRACE_BYTES + 1)
    with pytest.raises(SerqError) as info:
        trace_module.read_trace(str(path))
    assert info.value.message == f"cannot read trace `{path}`: it is larger than 64 MiB"


def test_a_trace_error_names_the_trace_line_once(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("1,1,1,1,1\n1,2,x,1,1\n")
    (tmp_path / "t.sq").write_text(TRACE_PROGRAM)
    code, output = cli_run("run", str(tmp_path / "t.sq"))
    one_clean_error(code, output)
    assert output.startswith(f"{tmp_path / 't.csv'}:2: column 3 (new): invalid number `x`")


# ---------------------------------------------------------------- B6: counts
def test_a_program_of_more_than_the_token_limit_is_refused_at_the_first_token_too_many() -> None:
    text = "let a = 1;\n" * (MAX_TOKENS // 5) + "session { }\n"
    err = fails(text)
    assert err.message == "the program holds more than 100 000 tokens, more than a program can hold"
    assert where(err) == (MAX_TOKENS // 5 + 1, 1)


def test_libraries_share_the_token_limit(tmp_path: Path) -> None:
    (tmp_path / "lib.sq").write_text("def f(x) = x;\n" * (MAX_TOKENS // 7))
    (tmp_path / "p.sq").write_text('use "lib.sq";\nlet a = 1;\nlet b = 2;\n')
    err = fails(path=str(tmp_path / "p.sq"))
    assert err.message == "the libraries are more than a program can hold" and where(err) == (1, 5)
    assert err.notes == ["`lib.sq` holds more than the 99 987 tokens left"]


def test_definitions_are_read_in_linear_time() -> None:
    """Each definition's body is walked once, not once per later definition (was n²/2 walks)."""
    n = 300
    text = "".join(f"def f{i}(x) = x + {i};\n" for i in range(n)) + "session { }\n"
    with mock.patch.object(defs_module, "body_uses", wraps=defs_module.body_uses) as walks:
        load_program(text=text)
    assert walks.call_count == n


def test_a_use_before_the_definition_is_still_found_among_many() -> None:
    text = "".join(f"def f{i}(x) = x + {i};\n" for i in range(50))
    text += "def g(x) = late(x) + f3(x);\n" + "".join(f"def k{i}(x) = x;\n" for i in range(50))
    err = fails(text + "def late(x) = x;\nsession { }\n")
    assert err.message == "`g` uses `late`, which is defined after it" and where(err) == (51, 12)


def test_a_long_operator_chain_is_a_located_error() -> None:
    err = fails("let c = " + "+".join(["1"] * 1100) + ";\nsession { }\n")
    assert err.message.startswith("this expression chains more than 1000 operators")
    assert where(err) == (1, 9 + 2 * 1000 + 1)


@pytest.mark.parametrize("literal", ["9" * 400, "1e999", "1" + "0" * 5000])
def test_a_huge_array_size_is_refused_not_a_crash(literal: str) -> None:
    err = fails(f"pool p[{literal}] {{ cap 1; }}\nsession {{ }}\n")
    assert err.message.startswith("array size must be a positive integer") and where(err) == (1, 8)


def test_parsing_keeps_one_items_tree_at_a_time() -> None:
    """The parse tree and packrat cache of the whole file were kept until it was built:
    about 11 KB a `let`.  Item by item, 2 000 lets peak far below that."""
    import tracemalloc

    from serq.errors import Source
    from serq.frontend.parse import parse_source

    source = Source("".join(f"let c{i} = {i} + 1;\n" for i in range(2000)), None)
    tracemalloc.start()
    try:
        items = parse_source(source)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(items) == 2000
    assert peak < 8 * reading.MiB, peak


@pytest.mark.parametrize("kind", ["closed", "batch"])
def test_a_population_over_a_million_is_refused_when_checked(kind: str) -> None:
    # semantics §7.1: closed/batch counts are at most 10⁶; found at `serq check`,
    # before the run's lower live-session limit is ever reached
    src = f"let N = 5;\nstage s : fifo;\nworkload {{ arrive {kind}(N); }}\nsession {{ run s (1); end; }}\n"
    assert serq.load(src, sets=[("N", "1e6")]) is not None
    with pytest.raises(serq.SerqError) as err:
        serq.load(src, sets=[("N", "1000001")])
    assert "1,000,001; at most 1,000,000 sessions" in err.value.render()
    assert err.value.render().splitlines()[0].endswith("(semantics §7.1)")


def test_control_characters_in_the_source_line_are_not_sent_to_the_terminal() -> None:
    # the excerpt under a diagnostic shows a NUL or an escape as U+FFFD, keeping the carets in place
    with pytest.raises(SerqError) as err:
        serq.load('use "a\x00\x1b[2Jb";\n')
    lines = err.value.render().splitlines()
    assert '1 | use "a\ufffd\ufffd[2Jb";' in lines
    assert "  |     ^^^^^^^^^" in lines
    assert lines[0].startswith('<text>:1:5: `use "a\\x00\\x1b[2Jb"`')  # the message writes them as escapes


# -- one bound for families, aggregates and `choose` (issue 38) -----------------------------

def test_a_family_of_a_million_members_is_refused_at_its_size() -> None:
    # each member is built when the run starts (about 100 µs and 5 KB): a million never started
    err = fails("pool p[4097] { cap 1; }\nsession { }\n")
    assert err.message == "a family of 4,097 members: at most 4,096" and where(err) == (1, 8)
    assert serq.load("pool p[4096] { cap 1; }\nsession { }\n") is not None
    llmd = Path(__file__).resolve().parents[2] / "programs" / "pd" / "llmd.sq"
    with pytest.raises(serq.SerqError) as caught:
        serq.load(llmd, sets=[("NP", "1e6")])
    assert caught.value.render().splitlines()[0].endswith(
        "llmd.sq:66:9: a family of `NP` = 1,000,000 members: at most 4,096")


def test_the_members_of_all_families_together_are_bounded() -> None:
    decls = "let N = 4096;\npool a[N] { }\npool b[N] { }\nstage c[N] : delay;\nstage d[N] : delay;\n"
    assert serq.load(decls + "session { }\n") is not None  # 16 384: the bound
    err = fails(decls + "pool e { }\nsession { }\n")
    assert err.message == "the program's pools and stages have 16,385 members in all: at most 16,384"
    assert where(err) == (2, 6)  # the first of the largest families


@pytest.mark.parametrize("count, shown", [("inf", "inf"), ("1e9", "1,000,000,000"), ("1/0", "inf"),
                                          ("4097", "4,097")])
def test_a_choose_count_has_the_bound_of_a_family(count: str, shown: str) -> None:
    # inf was an OverflowError, 1e9 ran for ever (issue 38)
    err = fails(f"let N = {count};\nstage s : delay;\nsession {{ choose j in N by (j); run s (1); }}\n")
    assert err.message == f"session: `choose … in (N)` has {shown} candidates: at most 4,096" and where(err) == (3, 23)


def test_a_choose_count_read_at_run_time_has_the_same_bound() -> None:
    src = ("stage s : delay;\nworkload { arrive batch(1); init { set m = 1/0; } }\n"
           "session { choose j in m by (j); run s (1); }\nrun { horizon 5; }\n")
    with pytest.raises(serq.SerqError) as err:
        serq.run(serq.load(src))
    assert err.value.render().splitlines()[0] == "<text>:3:23: `choose … in (m)` has inf candidates: at most 4,096"
    report = serq.run(serq.load(src.replace("1/0", "4096")))  # the bound itself runs
    assert report.ended == 1

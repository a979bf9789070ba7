"""Parsed files kept on disk (serq/frontend/parsed.py): a kept parse is the
parse, to the pickled byte; it is never read for another text or another front
end; a file with errors is never kept; the cache that cannot be used is not;
and a program read from kept parses never imports the parser."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bounds import env

from serq.errors import SerqError, Source
from serq.frontend import library, parse, parsed
from serq.frontend.lexer import TooManyTokens

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(ROOT.glob("programs/**/*.sq")) + sorted(Path(library.BUNDLED).glob("*.sq"))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh, empty cache folder of this test's own."""
    folder = tmp_path / "parsed"
    monkeypatch.setenv("SERQ_CACHE_DIR", str(folder))
    return folder


def pickled(items, source: Source) -> bytes:
    """The bytes a syntax tree pickles to, its source left out, once it has been
    through a pickle (equal trees, with their nodes shared alike, give equal bytes;
    the first trip makes the sharing of equal strings alike too)."""
    out = io.BytesIO()
    parsed._Pickler(out, source).dump(items)
    out = io.BytesIO(out.getvalue())
    again = parsed._Unpickler(out, source).load()
    out = io.BytesIO()
    parsed._Pickler(out, source).dump(again)
    return out.getvalue()


def source_of(path: Path) -> Source:
    return Source(path.read_text(), str(path))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT) if ROOT in p.parents else p.name))
def test_a_kept_parse_is_the_parse(path, cache):
    fresh = source_of(path)
    items, count = parse.parse_counted(fresh)
    first = source_of(path)
    made = parsed.parse_counted(first)  # parsed, then kept
    assert made[1] == count and pickled(made[0], first) == pickled(items, fresh)
    assert list(cache.glob("*.pickle"))
    again = source_of(path)
    kept = parsed.load(again)
    assert kept is not None
    assert kept[1] == count
    assert repr(kept[0]) == repr(items)
    assert pickled(kept[0], again) == pickled(items, fresh)  # the same tree, its sharing too
    assert all(item.span.source is again for item in kept[0])  # its spans point into the text read now


def test_the_entry_holds_the_text_and_the_front_end(cache, monkeypatch):
    source = Source("let a = 1;\n", "a.sq")
    parsed.parse_counted(source)
    assert parsed.load(Source("let a = 1;\n", "b.sq")) is not None  # (the path is not part of the parse)
    assert parsed.load(Source("let a = 2;\n", "a.sq")) is None
    monkeypatch.setattr(parsed, "_FINGERPRINT", b"another front end")
    assert parsed.load(source) is None


def test_an_entry_under_the_name_of_another_text_is_a_miss(cache):
    one, two = Source("let a = 1;\n"), Source("let b = 2;\n")
    parsed.parse_counted(one)
    parsed.parse_counted(two)
    shutil.copy(cache / parsed._name(one.text), cache / parsed._name(two.text))
    assert parsed.load(two) is None  # the text kept in the entry is compared in full


def test_editing_the_front_end_changes_the_fingerprint(tmp_path, monkeypatch):
    copy = tmp_path / "serq"
    shutil.copytree(Path(parsed._ROOT), copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(parsed, "_ROOT", str(copy))

    def fresh() -> bytes:
        monkeypatch.setattr(parsed, "_FINGERPRINT", None)  # (computed once a process otherwise)
        return parsed.fingerprint()

    first = fresh()
    assert first == fresh()
    grammar = copy / "frontend" / "grammar.py"
    grammar.write_text(grammar.read_text() + "\n")
    after_grammar = fresh()
    assert after_grammar != first
    node = copy / "node.py"
    node.write_text(node.read_text().replace("Equality", "equality", 1))
    assert fresh() != after_grammar


def test_another_python_has_another_fingerprint(monkeypatch):
    monkeypatch.setattr(parsed, "_FINGERPRINT", None)
    here = parsed.fingerprint()
    monkeypatch.setattr(parsed, "_FINGERPRINT", None)
    monkeypatch.setattr(sys, "version", sys.version + " (another build)")
    assert parsed.fingerprint() != here


def test_the_fingerprint_covers_every_module_the_parser_imports():
    probe = ("import sys, json, serq.frontend.parse\n"
             "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items() if n.split('.')[0] == 'serq')))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=env())
    assert done.returncode == 0, done.stderr
    files = {os.path.relpath(f, parsed._ROOT) for f in json.loads(done.stdout)}
    covered = set(parsed.OWN) | {os.path.join("frontend", n) for n in os.listdir(Path(parsed._ROOT) / "frontend")}
    assert "frontend/grammar.py" in files and "node.py" in files
    assert files <= covered, sorted(files - covered)


def test_a_file_with_errors_is_not_kept(cache):
    bad = "let a = ;\n"
    with pytest.raises(SerqError) as first:
        parsed.parse_counted(Source(bad, "bad.sq"))
    assert not cache.exists() or not list(cache.glob("*.pickle"))
    with pytest.raises(SerqError) as second:
        parsed.parse_counted(Source(bad, "bad.sq"))
    assert first.value.render() == second.value.render()


def test_a_damaged_entry_is_parsed_again_and_rewritten(cache):
    source = Source("let a = 1;\nlet b = a + 2;\n")
    items, count = parsed.parse_counted(source)
    entry = cache / parsed._name(source.text)
    entry.write_bytes(entry.read_bytes()[:40])
    assert parsed.load(source) is None
    assert parsed.parse_counted(source) == (items, count)  # (one source: its spans compare equal)
    assert parsed.load(source) == (items, count)


def test_a_kept_file_over_the_token_budget_gets_the_parsers_error(cache):
    source = Source("let a = 1;\nlet b = 2;\n")
    parsed.parse_counted(source)
    assert parsed.load(source)[1] == 10
    with pytest.raises(TooManyTokens):
        parsed.parse_counted(source, max_tokens=9)
    assert parsed.parse_counted(source, max_tokens=10)[1] == 10


def test_no_cache_when_it_is_off_or_cannot_be_written(tmp_path, monkeypatch):
    source = Source("let a = 1;\n")
    monkeypatch.setenv("SERQ_CACHE_DIR", "")
    assert parsed.cache_dir() is None
    assert parsed.parse_counted(source)[1] == 5
    assert parsed.load(source) is None
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SERQ_CACHE_DIR", str(blocker / "parsed"))
    assert parsed.parse_counted(source)[1] == 5
    assert parsed.load(source) is None
    assert blocker.read_text() == "not a folder"


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="a system without file owners")
def test_a_folder_others_may_write_in_is_not_used(cache):
    source = Source("let a = 1;\n")
    parsed.parse_counted(source)
    assert parsed.load(source) is not None
    cache.chmod(0o777)
    assert parsed.load(source) is None  # (someone else could have put a pickle there)
    entries = sorted(cache.iterdir())
    other = Source("let b = 2;\n")
    parsed.parse_counted(other)
    assert sorted(cache.iterdir()) == entries  # nor is anything written there
    cache.chmod(0o700)
    assert parsed.load(source) is not None


def test_the_default_folder_is_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("SERQ_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert parsed.cache_dir() == str(tmp_path / "serq" / "parsed")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert parsed.cache_dir() == str(tmp_path / "home" / ".cache" / "serq" / "parsed")


def test_the_oldest_entries_go_past_the_limit(cache, monkeypatch):
    monkeypatch.setattr(parsed, "MAX_ENTRIES", 4)
    sources = [Source(f"let a = {k};\n") for k in range(5)]
    for k, s in enumerate(sources[:4]):
        parsed.parse_counted(s)
        entry = cache / parsed._name(s.text)
        os.utime(entry, ns=(k * 10**9, k * 10**9))
    assert len(list(cache.glob("*.pickle"))) == 4
    parsed.parse_counted(sources[4])
    left = sorted(p.name for p in cache.glob("*.pickle"))
    assert left == sorted(parsed._name(s.text) for s in sources[3:])
    assert not list(cache.glob("*.tmp"))


@pytest.mark.parametrize("text", ["0.9", "3", "1e-3", "2E+10", "1_000", ".5", "007", "1.", "12.5e3"])
def test_a_lone_number_is_read_as_the_parser_reads_it(text):
    source = Source(text)
    quick = parsed.parse_expression(source)
    slow = parse.parse_expression(source)
    assert quick == slow and repr(quick) == repr(slow)
    assert (quick.span.start, quick.span.end) == (slow.span.start, slow.span.end)


@pytest.mark.parametrize("text", ["-1", "1 + 2", " 3", "1.2.3", "x", "2 ms"])
def test_anything_else_goes_to_the_parser(text, monkeypatch):
    called = []
    real = parse.parse_expression
    monkeypatch.setattr(parse, "parse_expression", lambda s: called.append(s) or real(s))
    try:
        parsed.parse_expression(Source(text))
    except SerqError:
        pass
    assert called


def test_a_program_read_from_kept_parses_never_imports_the_parser(cache):
    probe = ("import sys, serq\n"
             "serq.load('programs/multi-turn/vllm.sq', sets=[('Lambda', '0.9')])\n"
             "print('parsimonious' in sys.modules, 'serq.frontend.grammar' in sys.modules)")
    first = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=env())
    assert first.stdout.split() == ["True", "True"], first.stderr
    assert len(list(cache.glob("*.pickle"))) == 2  # the program and std/vllm
    again = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, env=env())
    assert again.stdout.split() == ["False", "False"], again.stderr


def test_processes_writing_the_same_entries_at_once_leave_whole_ones(cache):
    probe = ("import serq, sys\n"
             "p = serq.load('programs/multi-turn/vllm.sq')\n"
             "print(len(p.stages))")
    procs = [subprocess.Popen([sys.executable, "-c", probe], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env()) for _ in range(4)]
    outs = [p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _out, err in outs]
    assert len({out for out, _err in outs}) == 1
    assert len(list(cache.glob("*.pickle"))) == 2 and not list(cache.glob("*.tmp"))
    for path in ("programs/multi-turn/vllm.sq", str(Path(library.BUNDLED) / "vllm.sq")):
        assert parsed.load(source_of(ROOT / path)) is not None  # each entry whole and readable

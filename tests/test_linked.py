"""Kept linked programs (serq/linked.py): a program loaded again from the same
files comes back equal without the front end, and never stale."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import serq
import serq.frontend
from serq import linked
from serq.errors import SerqError

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """\
use "extra.sq";
let lam = 0.5;
stage svc : fifo;
workload { arrive poisson(lam); }
session { run svc (~exp(speed())); observe response = now; }
"""
LIBRARY = "def speed() = 1.0;\n"


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """A cache folder of the test's own, and a count of the loads that went
    through the front end (``calls["front"]``)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("SERQ_CACHE_DIR", str(folder))
    monkeypatch.delenv("SERQ_PATH", raising=False)
    calls = {"front": 0}
    real = serq.frontend.load_program

    def counted(**kw):  # type: ignore[no-untyped-def]
        calls["front"] += 1
        return real(**kw)

    monkeypatch.setattr(serq.frontend, "load_program", counted)
    return calls


def write(folder: Path, program: str = PROGRAM, library: str | None = LIBRARY) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prog.sq").write_text(program)
    if library is not None:
        (folder / "extra.sq").write_text(library)
    return folder / "prog.sq"


def speed(program: serq.ir.Program) -> str:
    """The service law as linked (where the library's definition lands)."""
    return repr(program.session)


def test_a_program_loaded_again_comes_back_equal_without_the_front_end(tmp_path: Path, kept: dict[str, int]) -> None:
    path = write(tmp_path / "p")
    first = serq.load(path)
    assert kept["front"] == 1
    assert len(list((tmp_path / "cache").glob("*.linked"))) == 1
    again = serq.load(path)
    assert kept["front"] == 1  # read back, not linked again
    assert again == first
    assert serq.run(again, seed=3, horizon=200, warmup=20).to_json() == serq.run(first, seed=3, horizon=200,
                                                                                warmup=20).to_json()
    assert serq.load(path, sets={"lam": "0.25"}).constants["lam"] == 0.25  # other --set values: their own entry
    assert kept["front"] == 2


def test_a_kept_run_imports_no_part_of_the_front_end(tmp_path: Path) -> None:
    env = {**os.environ, "SERQ_CACHE_DIR": str(tmp_path / "cache")}
    probe = ("import sys, serq; serq.load('programs/multi-turn/vllm.sq');"
             "print(sorted(m for m in sys.modules if m.startswith('serq.frontend')))")
    runs = [subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert "serq.frontend.link" in runs[0].stdout  # the first load links
    assert runs[1].stdout.strip() == "[]"  # the second reads it back


def test_an_edited_program_or_library_is_linked_again(tmp_path: Path, kept: dict[str, int]) -> None:
    path = write(tmp_path / "p")
    serq.load(path)
    path.write_text(PROGRAM.replace("let lam = 0.5;", "let lam = 0.75;"))
    assert serq.load(path).constants["lam"] == 0.75
    assert kept["front"] == 2
    (tmp_path / "p" / "extra.sq").write_text("def speed() = 2.0;\n")
    changed = serq.load(path)
    assert kept["front"] == 3
    assert "2.0" in speed(changed)


def test_a_library_that_appears_where_none_was_is_read(tmp_path: Path, kept: dict[str, int],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "p", library=None)
    write(tmp_path / "libs", program="", library=LIBRARY)  # found on SERQ_PATH, none next to the program
    monkeypatch.setenv("SERQ_PATH", str(tmp_path / "libs"))
    assert "1.0" in speed(serq.load(path))
    assert "1.0" in speed(serq.load(path))
    assert kept["front"] == 1
    (tmp_path / "p" / "extra.sq").write_text("def speed() = 3.0;\n")  # next to the program: it comes first
    assert "3.0" in speed(serq.load(path))
    assert kept["front"] == 2


def test_another_serq_path_is_another_entry(tmp_path: Path, kept: dict[str, int],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "p", library=None)
    write(tmp_path / "a", program="", library="def speed() = 1.0;\n")
    write(tmp_path / "b", program="", library="def speed() = 4.0;\n")
    monkeypatch.setenv("SERQ_PATH", str(tmp_path / "a"))
    assert "1.0" in speed(serq.load(path))
    monkeypatch.setenv("SERQ_PATH", os.pathsep.join([str(tmp_path / "b"), str(tmp_path / "a")]))
    assert "4.0" in speed(serq.load(path))
    assert kept["front"] == 2


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")
def test_a_library_whose_link_moves_is_read_from_its_new_target(tmp_path: Path, kept: dict[str, int]) -> None:
    path = write(tmp_path / "p", library=None)
    write(tmp_path / "x", program="", library="def speed() = 1.0;\n")
    write(tmp_path / "y", program="", library="def speed() = 5.0;\n")
    link = tmp_path / "p" / "extra.sq"
    link.symlink_to(tmp_path / "x" / "extra.sq")
    assert "1.0" in speed(serq.load(path))
    link.unlink()
    link.symlink_to(tmp_path / "y" / "extra.sq")
    assert "5.0" in speed(serq.load(path))
    assert kept["front"] == 2


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")
def test_a_library_named_twice_is_read_twice_once_the_names_part(tmp_path: Path, kept: dict[str, int]) -> None:
    """Two names of one file are read once; the second is never read, so only
    its canonical path tells that it became a file of its own."""
    path = write(tmp_path / "p", program=PROGRAM.replace('use "extra.sq";\n', 'use "extra.sq";\nuse "more.sq";\n'))
    (tmp_path / "p" / "more.sq").symlink_to(tmp_path / "p" / "extra.sq")
    first = serq.load(path)
    assert serq.load(path) == first
    assert kept["front"] == 1
    (tmp_path / "p" / "more.sq").unlink()
    (tmp_path / "p" / "more.sq").write_text(LIBRARY)  # the same text, now a second file: defined twice
    with pytest.raises(SerqError, match="speed"):
        serq.load(path)


def test_a_change_of_serq_itself_is_a_miss(tmp_path: Path, kept: dict[str, int],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "p")
    serq.load(path)
    monkeypatch.setattr(linked, "_STAMP", b"another serq")
    serq.load(path)
    assert kept["front"] == 2


def test_a_program_with_an_error_is_not_kept(tmp_path: Path, kept: dict[str, int]) -> None:
    path = write(tmp_path / "p", program=PROGRAM.replace("~exp(speed())", "~exp(sped())"))
    for _ in range(2):
        with pytest.raises(SerqError, match="sped"):
            serq.load(path)
    assert kept["front"] == 2
    assert not list((tmp_path / "cache").glob("*.linked"))


def test_a_damaged_entry_is_a_miss_and_is_written_anew(tmp_path: Path, kept: dict[str, int]) -> None:
    path = write(tmp_path / "p")
    first = serq.load(path)
    (entry,) = (tmp_path / "cache").glob("*.linked")
    entry.write_bytes(entry.read_bytes()[:40])
    assert serq.load(path) == first
    assert kept["front"] == 2
    magic, key, found, program = pickle.loads(entry.read_bytes())  # written anew, whole
    assert (magic, key, program) == (linked.MAGIC, entry.stem, first)
    assert found[0][:2] == ("read", str(path)) and ("realpath", str(path), os.path.realpath(path)) in found


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="owners and modes")
def test_a_folder_others_may_write_in_is_not_read(tmp_path: Path, kept: dict[str, int]) -> None:
    path = write(tmp_path / "p")
    serq.load(path)
    (tmp_path / "cache").chmod(0o777)
    try:
        assert linked.load(str(path), []) is None
    finally:
        (tmp_path / "cache").chmod(0o700)
    assert linked.load(str(path), []) is not None


def test_programs_given_as_text_or_on_standard_input_are_not_kept(tmp_path: Path, kept: dict[str, int]) -> None:
    text = PROGRAM.replace('use "extra.sq";\n', "").replace("speed()", "1.0")
    serq.load(text)
    serq.load(text)
    assert kept["front"] == 2
    assert linked.load("-", []) is None
    done = subprocess.run([sys.executable, "-m", "serq", "check", "-"], input=text, cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert not list((tmp_path / "cache").glob("*.linked"))


def test_a_load_from_a_folder_that_is_gone_links_as_before(tmp_path: Path, kept: dict[str, int],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "p")
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # (os.getcwd() now fails: the key cannot be made, so nothing is kept or read)
    assert serq.load(path) == serq.load(path)
    assert kept["front"] == 2


def test_the_key_follows_the_parser_libraries_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "site" / "fakeparser"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("RULES = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(linked, "PARSER_LIBRARIES", ("fakeparser",))
    monkeypatch.setattr(linked, "_STAMP", None)
    before = linked.package_stamp()
    (lib / "__init__.py").write_text("RULES = 22\n")  # (another size: an upgrade of the parser)
    monkeypatch.setattr(linked, "_STAMP", None)
    assert linked.package_stamp() != before


def test_with_keeping_off_nothing_is_stamped_or_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # SERQ_CACHE_DIR= turns keeping off: a load then neither reads nor writes an entry, and
    # does not work out an entry's key (it stamps every file of serQ and of the parser)
    from serq.frontend import parsed

    monkeypatch.setenv("SERQ_CACHE_DIR", "")
    monkeypatch.chdir(tmp_path)
    stamped = []
    monkeypatch.setattr(linked, "_STAMP", None)
    monkeypatch.setattr(parsed, "_FINGERPRINT", None)
    real_files = linked.stamp_files
    monkeypatch.setattr(linked, "stamp_files", lambda *a: stamped.append(a[1]) or real_files(*a))
    monkeypatch.setattr(parsed, "stamp_parser_libraries", lambda h: stamped.append("parser"))
    path = write(tmp_path / "p")
    assert serq.load(path) == serq.load(path)
    assert stamped == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["extra.sq", "p", "prog.sq"]

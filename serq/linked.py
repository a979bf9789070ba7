"""Linked programs kept on disk, so that a program loaded again skips the front end.

A ``serq run`` of a small program spends about a fifth of its start in the
front end even when every parse is kept (serq/frontend/parsed.py): importing
the binding, expansion and linking steps, and running them.  A program loaded
from a file without error is kept as its IR (:class:`serq.ir.Program`),
pickled.  The next load of the same file with the same ``--set`` values reads it
back in about a millisecond, and imports none of :mod:`serq.frontend`.

Never stale.  An entry's name hashes everything the load depended on besides
the files it read:

* the interpreter's version;
* every file of the serq package and of the parser's libraries (Parsimonious,
  ``regex``), by name, size and modification time, as Python's bytecode cache
  checks a source;
* the program's path as given and absolute, and the current folder (a trace's
  path is kept relative to them);
* ``SERQ_PATH`` and the ``--set`` pairs in order.

The entry lists what the load found on disk, and each item is checked again
before the entry is used:

* every file it read (the program and each library), with the hash of its text;
* every place where it looked for a library, with whether something was there
  (a library added where none was would change the program);
* the canonical path of the program and of every library named (a file is read
  once however it is named).

Only a load that succeeded is kept.  A program with an error goes through the
front end every time, and its errors come from there.  Programs given as text
or on standard input are not kept.

Where: the kept parses' folder (``SERQ_CACHE_DIR``, else
``$XDG_CACHE_HOME/serq/parsed``, else ``~/.cache/serq/parsed``), as files
``HASH.linked``, at most :data:`MAX_ENTRIES` of them, with the same trust
rules as the kept parses.  An entry that cannot be read, or that does not
match, counts as a miss.
"""

from __future__ import annotations

import os
import pickle
import sys
import threading
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Sequence

from . import reading

# SHA-256 from the interpreter's own module where it has one: hashlib loads OpenSSL's library,
# about 11 M instructions, 3 % of a small run's start-up (the digests are the same)
try:
    from _sha256 import sha256  # (CPython 3.11)
except ImportError:  # pragma: no cover - the interpreter decides
    try:
        from _sha2 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]  # (CPython 3.12 on)
    except ImportError:
        from hashlib import sha256  # type: ignore[assignment,unused-ignore]

if TYPE_CHECKING:
    from .ir import Program

#: The format of an entry (raise it when the entry's layout changes).
MAGIC = b"serq-linked-2"

#: Entries kept at most; writing one more removes the oldest half.
MAX_ENTRIES = 1000

SUFFIX = ".linked"

_PACKAGE = os.path.dirname(os.path.abspath(__file__))

_STAMP: bytes | None = None

#: A file read again to be compared is read up to this size (past the front end's own bound for a
#: program and its libraries, so a file that grew past that bound differs and is a miss).
_READ_LIMIT = 8 * reading.MiB


class _Recording(threading.local):
    """What the load being recorded in this thread finds on disk (:func:`recording`)."""

    found: list[tuple[Any, ...]] | None = None  # (None: nothing is recorded)


_recording = _Recording()


def cache_dir() -> str | None:
    """The folder of the entries, or None when keeping is off (``SERQ_CACHE_DIR=``)."""
    given = os.environ.get("SERQ_CACHE_DIR")
    if given is not None:
        return given or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "serq", "parsed")


def trusted(folder: str) -> bool:
    """Whether entries in ``folder`` may be read: it is this user's, and no one
    else may write in it (a pickle from someone else could run their code)."""
    if not hasattr(os, "getuid"):
        return True
    try:
        st = os.stat(folder)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


#: The libraries the parser runs on (as the kept parses' fingerprint names them): their files
#: count in the key too, as serQ's own do.
PARSER_LIBRARIES = ("parsimonious", "regex")


def stamp_files(h: Any, name: str, root: str) -> None:
    """Add to ``h`` every file under ``root`` (``__pycache__`` left out) by its
    path, size and modification time, as Python's bytecode cache checks a source:
    a folder's files in name order, then each subfolder's in turn, as
    ``os.walk`` visits them (a link to a folder is not followed), in one update."""
    parts: list[str] = [f"\0{name}\0"]
    _stamp_folder(parts, root, "")
    h.update("".join(parts).encode())


def _stamp_folder(parts: list[str], folder: str, rel: str) -> None:
    """:func:`stamp_files` of ``folder`` (``rel``, its path under the root), into ``parts``."""
    with os.scandir(folder) as found:
        entries = sorted(found, key=lambda e: e.name)
    below = []
    for entry in entries:
        if entry.is_dir():
            if entry.name != "__pycache__" and not entry.is_symlink():
                below.append(entry)
            continue
        st = entry.stat()  # (a link's target, as os.stat)
        parts.append(f"{rel}{entry.name}\0{st.st_size}\0{st.st_mtime_ns}\0")
    for entry in below:
        _stamp_folder(parts, entry.path, f"{rel}{entry.name}{os.sep}")


def stamp_parser_libraries(h: Any) -> None:
    """:func:`stamp_files` of each of :data:`PARSER_LIBRARIES`, found without importing it."""
    import importlib.util

    for lib in PARSER_LIBRARIES:
        spec = importlib.util.find_spec(lib)
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            stamp_files(h, lib, root)


def package_stamp() -> bytes:
    """The interpreter's version and the files of the serq package and of the
    parser's libraries (read once a process)."""
    global _STAMP
    if _STAMP is None:
        h = sha256(MAGIC)
        h.update(sys.version.encode())
        stamp_files(h, "serq", _PACKAGE)
        stamp_parser_libraries(h)
        _STAMP = h.digest()
    return _STAMP


def _key(path: str, sets: Sequence[tuple[str, str]]) -> str:
    """The hex digest naming the entry of ``path`` loaded with ``sets`` (see the module)."""
    h = sha256(package_stamp())
    for part in (path, os.path.abspath(path), os.getcwd(), os.environ.get("SERQ_PATH", "")):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    h.update(repr(list(sets)).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _digest(text: str) -> str:
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# -- what a load finds on disk (called by serq/frontend/library.py) ----------------------------


def read(path: str, text: str) -> None:
    """The load being recorded read ``text`` from ``path``."""
    found = _recording.found
    if found is not None:
        found.append(("read", path, _digest(text)))


def looked(kind: str, path: str, found: Any) -> None:
    """The load being recorded asked :mod:`os.path` ``kind`` of ``path``
    (``"lexists"``, ``"isfile"`` or ``"realpath"``) and was told ``found``."""
    record = _recording.found
    if record is not None:
        record.append((kind, path, found))


@contextmanager
def recording() -> Iterator[list[tuple[Any, ...]]]:
    """Record what the loads inside (in this thread) find on disk, into the list given."""
    was = _recording.found
    found: list[tuple[Any, ...]] = []
    _recording.found = found
    try:
        yield found
    finally:
        _recording.found = was


def _same(found: list[tuple[Any, ...]]) -> bool:
    """Whether the disk still holds what a load found there (a file that cannot
    be read now raises: :func:`load` takes that as a miss)."""
    for kind, path, seen in found:
        if kind == "read":
            now: Any = _digest(reading.read_text(path, _READ_LIMIT))
        elif kind == "lexists":
            now = os.path.lexists(path)
        elif kind == "isfile":
            now = os.path.isfile(path)
        elif kind == "realpath":
            now = os.path.realpath(path)
        else:
            return False
        if now != seen:
            return False
    return True


# -- entries ----------------------------------------------------------------------------------


def load(path: str, sets: Sequence[tuple[str, str]]) -> "Program | None":
    """The program ``path`` linked with ``sets`` as kept, if the disk holds
    what it was linked from; else None."""
    if path == reading.STDIO:
        return None
    folder = cache_dir()
    if folder is None or not trusted(folder):
        return None
    try:
        key = _key(path, sets)
        with open(os.path.join(folder, key + SUFFIX), "rb") as f:
            magic, mark, found, program = pickle.load(f)
        if magic != MAGIC or mark != key or not _same(found):
            return None
    except Exception:  # noqa: BLE001 - missing, unreadable, cut short, of another layout, no current folder: a miss
        return None
    return program  # type: ignore[no-any-return]


def store(path: str, sets: Sequence[tuple[str, str]], program: "Program", found: list[tuple[Any, ...]]) -> None:
    """Keep ``program``, linked from ``path`` with ``sets`` after finding
    ``found`` on disk (nothing when the folder cannot be written)."""
    if path == reading.STDIO:
        return

    def entry() -> tuple[str, Callable[[IO[bytes]], None]]:
        key = _key(path, sets)  # (an OSError when the current folder is gone: not kept)
        return key + SUFFIX, lambda f: pickle.dump((MAGIC, key, found, program), f, protocol=pickle.HIGHEST_PROTOCOL)
    write_entry(entry, MAX_ENTRIES)


def write_entry(entry: Callable[[], tuple[str, Callable[[IO[bytes]], None]]], most: int) -> None:
    """Write an entry into :func:`cache_dir`: ``entry()`` gives its file name and
    the function that writes it into a file, asked only when there is a folder
    to keep it in (its key stamps serQ's files).  Whole or not at all (a
    temporary file, then a rename), and at most ``most`` entries of its suffix
    kept (:func:`prune`); nothing when keeping is off, the folder is not this
    user's alone, or the entry cannot be written (a read-only or full disk,
    something that does not pickle).  The kept parses' and the linked
    programs' writer."""
    folder = cache_dir()
    if folder is None:
        return
    import tempfile  # (only an entry written needs it, not one read back: with `random`, ~3 ms a start)

    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if not trusted(folder):
            return
        name, dump = entry()
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                dump(f)
            os.replace(tmp, os.path.join(folder, name))
        except BaseException:
            os.unlink(tmp)
            raise
        prune(folder, os.path.splitext(name)[1], most)
    except Exception:  # noqa: BLE001 - not kept
        return


def prune(folder: str, suffix: str, most: int) -> None:
    """Keep at most ``most`` entries named ``*suffix`` in ``folder``: past that,
    remove the oldest half (the kept parses' and the linked programs' alike)."""
    entries = [e for e in os.scandir(folder) if e.name.endswith(suffix)]
    if len(entries) <= most:
        return
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for e in entries[:len(entries) - most // 2]:
        try:
            os.unlink(e.path)
        except OSError:
            pass

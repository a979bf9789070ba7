"""File output.  A regular file is written atomically (a temporary file in the
same folder, then a rename): a failed run leaves nothing half-written.  A
symbolic link is followed and its target written that way (a dangling link's
target is created).  ``-``, ``/dev/stdout`` and ``/dev/fd/N`` write to that
open file (standard output for ``-``; its offset, its ``O_APPEND``), whatever it
is; a reader gone from a pipe raises :class:`BrokenPipeError`, which the
command line ends on quietly.  A character device or a FIFO
(``/dev/null``, a named pipe) is written through, as a shell's ``>`` would; a
folder, a block device or a socket is refused.  New files and folders get the
usual modes (``0666``/``0777`` less the process umask); a replaced regular file
keeps its permission bits."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import secrets
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterator, TextIO

#: The write buffer of :func:`open_atomic`.
_BUFFER = 1 << 20


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path``; see the module's rules."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path``: a regular file (or a missing one) through a
    temporary sibling and a rename, a symbolic link's target likewise, a
    character device or a FIFO straight through."""
    with _target_fd(path) as fd:
        _write_all(fd, data)


@contextlib.contextmanager
def open_atomic(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A text stream (UTF-8, ``\\n`` line ends) put in place as
    :func:`write_bytes_atomic` puts its bytes, but written a line at a time (a
    trace import of millions of rows never holds its output).  On an exception
    nothing is put in place (a FIFO or a device has had what was written)."""
    with _target_fd(path) as fd:
        out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, "w", closefd=False), _BUFFER),
                               encoding="utf-8", newline="\n")
        try:
            yield out
            out.flush()
        finally:
            try:
                out.close()  # the descriptor stays open: _target_fd closes it
            except OSError:
                pass


@contextlib.contextmanager
def _target_fd(path: str | os.PathLike[str]) -> Iterator[int]:
    """A descriptor to write ``path``'s new content to, closed afterwards: the open
    file itself for ``/dev/stdout`` and ``/dev/fd/N`` (offset and all), the target
    of a character device or FIFO, else a temporary sibling renamed over the
    regular file (or the missing one; symbolic links followed) when the block
    ends normally and removed when it raises.  Folders, block devices and
    sockets are refused."""
    if os.fspath(path) == "-":  # standard output (flushed first: what was printed comes before)
        import sys

        if sys.stdout is not None:
            sys.stdout.flush()
        alias: int | None = 1
    else:
        alias = _own_fd(path)
    if alias is not None:
        fd = os.dup(alias)
        try:
            yield fd
        finally:
            os.close(fd)
        return
    dest = Path(os.path.realpath(path))  # follows symbolic links, dangling ones too
    st = _stat(dest)
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = _refused_kind(st.st_mode)
        if kind is not None:
            raise _os_error(errno.EISDIR if kind == "a folder" else errno.EINVAL, f"is {kind}", path)
        fd = os.open(dest, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            yield fd
        finally:
            os.close(fd)
        return
    mode = stat.S_IMODE(st.st_mode) if st is not None else None
    fd, tmp = _temp_file(dest.parent, dest.name)
    try:
        try:
            yield fd
        finally:
            os.close(fd)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_dir_atomic(path: str | os.PathLike[str], fill: Callable[[Path], None]) -> None:
    """Create folder ``path`` with the files ``fill(tmp)`` writes into a temporary
    sibling folder, then move them in.  An existing folder keeps its other files;
    each written file replaces its namesake as :func:`write_bytes_atomic` would
    (a rename for a regular file).  A symbolic link to a folder is followed (a
    dangling one: its target is created); an existing non-folder is refused."""
    target = Path(os.path.realpath(path))
    st = _stat(target)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise _os_error(errno.ENOTDIR, "exists and is not a folder", path)
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_dir(parent, target.name)
    try:
        fill(tmp)
        if st is None:
            os.rename(tmp, target)
            return
        _merge(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------
# helpers


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


_PROC_FD = re.compile(r"/proc/(?:self|thread-self|(\d+)(?:/task/\d+)?)/fd/(\d+)\Z")


def _own_fd(path: str | os.PathLike[str]) -> int | None:
    """N when ``path`` leads (through symbolic links) to ``/proc/<this process>/fd/N``,
    as ``/dev/stdout`` and ``/dev/fd/N`` do on Linux.  Such a "link" names an open
    file of ours, not a path: ``realpath`` of it is e.g. ``pipe:[1234]``."""
    current = os.path.abspath(path)
    for _ in range(40):
        current = os.path.join(os.path.realpath(os.path.dirname(current)), os.path.basename(current))
        m = _PROC_FD.match(current)
        if m is not None and (m.group(1) is None or int(m.group(1)) == os.getpid()):
            return int(m.group(2))
        if not os.path.islink(current):
            return None
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    return None


def _refused_kind(mode: int) -> str | None:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return None
    return "not a regular file"


def _os_error(code: int, message: str, path: str | os.PathLike[str]) -> OSError:
    return OSError(code, message, os.fspath(path))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _temp_name(folder: Path, name: str) -> Path:
    return folder / f".{name}.{secrets.token_hex(4)}.tmp"


def _temp_file(folder: Path, name: str) -> tuple[int, Path]:
    """A new file next to ``name``, mode 0666 less the umask (``mkstemp`` gives 0600)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = _temp_name(folder, name)
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise _os_error(errno.EEXIST, "no free temporary file name", folder)


def _temp_dir(folder: Path, name: str) -> Path:
    """A new folder next to ``name``, mode 0777 less the umask (``mkdtemp`` gives 0700)."""
    for _ in range(100):
        tmp = _temp_name(folder, name)
        try:
            os.mkdir(tmp, 0o777)
            return tmp
        except FileExistsError:
            continue
    raise _os_error(errno.EEXIST, "no free temporary folder name", folder)


def _merge(src: Path, dst: Path) -> None:
    """Move what ``src`` holds into the existing folder ``dst``."""
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        here = Path(entry.path)
        there = dst / entry.name
        if entry.is_dir(follow_symlinks=False):
            real = Path(os.path.realpath(there))
            st = _stat(real)
            if st is None:
                real.parent.mkdir(parents=True, exist_ok=True)
                os.rename(here, real)
            elif stat.S_ISDIR(st.st_mode):
                _merge(here, real)
            else:
                raise _os_error(errno.ENOTDIR, "exists and is not a folder", there)
            continue
        try:
            st = os.lstat(there)
        except FileNotFoundError:
            st = None
        if st is None:
            os.replace(here, there)
        elif stat.S_ISREG(st.st_mode):
            os.chmod(here, stat.S_IMODE(st.st_mode))
            os.replace(here, there)
        else:  # a symbolic link, a FIFO, a device, a folder: the general rules
            write_bytes_atomic(there, here.read_bytes())

"""A text file written as a stream and put in place atomically.

The rules are those of :mod:`serq.files` (a regular file through a temporary
sibling and a rename, a symbolic link's target likewise, ``/dev/stdout`` and
``/dev/fd/N`` to that open file, a character device or a FIFO written through,
a folder, a block device or a socket refused), but the text arrives a line at a
time, so that an import of millions of rows never holds its output in memory.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
from pathlib import Path
from typing import Iterator, TextIO

from .. import files

_BUFFER = 1 << 20


@contextlib.contextmanager
def open_atomic(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A text stream (UTF-8, ``\\n`` line ends) whose content replaces ``path``
    when the block ends normally; on an exception nothing is put in place (a
    FIFO or a device has had what was written so far)."""
    alias = files._own_fd(path)
    if alias is not None:  # /dev/stdout, /dev/fd/N: the open file itself
        fd = os.dup(alias)
        with _stream(fd) as out:
            yield out
        return
    dest = Path(os.path.realpath(path))
    st = files._stat(dest)
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = files._refused_kind(st.st_mode)
        if kind is not None:
            raise files._os_error(errno.EISDIR if kind == "a folder" else errno.EINVAL, f"is {kind}", path)
        fd = os.open(dest, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        with _stream(fd) as out:
            yield out
        return
    mode = stat.S_IMODE(st.st_mode) if st is not None else None
    fd, tmp = files._temp_file(dest.parent, dest.name)
    try:
        with _stream(fd) as out:
            yield out
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _stream(fd: int) -> Iterator[TextIO]:
    raw = io.FileIO(fd, "w", closefd=True)
    out = io.TextIOWrapper(io.BufferedWriter(raw, _BUFFER), encoding="utf-8", newline="\n")
    try:
        yield out
        out.flush()
    finally:
        try:
            out.close()
        except OSError:
            pass

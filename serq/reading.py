"""Bounded reading of the files serq is given: a program, its libraries, a trace.

Every read here is refused unless the path names a regular file, and reads at
most ``limit + 1`` bytes, so a device (``/dev/zero``), a FIFO, a directory or a
file that keeps growing cannot make serq read without bound or block.  The
limits themselves belong to the callers (``docs/frontend.md``, "Limits and
hostile input").  Problems come back as :class:`Unreadable`, whose ``reason``
completes "cannot read `PATH`: …"; the caller adds the path and a location.
"""

from __future__ import annotations

import errno
import os
import sys
import stat

MiB = 1 << 20

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO must not block the open
_BINARY = getattr(os, "O_BINARY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class Unreadable(Exception):
    """A file that cannot be read as bounded UTF-8 text.

    ``reason`` completes "cannot read `PATH`: …".  For text that is not UTF-8,
    ``text`` is the content decoded with replacement characters and ``offset``
    the character offset of the first bad byte, so that the caller can point at
    it.  ``too_large`` is set when the file holds more than the limit."""

    def __init__(self, reason: str, *, text: str | None = None, offset: int | None = None,
                 too_large: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.text = text
        self.offset = offset
        self.too_large = too_large


def show_path(path: str) -> str:
    """A path as an error message shows it: unprintable characters escaped (a NUL is ``\\x00``)."""
    if path.isprintable():
        return path
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in path)


def size_text(n: int) -> str:
    """``1 MiB``, ``64 MiB``, or a byte count for other sizes."""
    return f"{n // MiB} MiB" if n % MiB == 0 and n else f"{n} bytes"


def _kind(mode: int) -> str | None:
    """Why a file of this mode is refused, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "it is a directory"
    if stat.S_ISFIFO(mode):
        return "it is a pipe (FIFO), not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "it is a device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "it is a socket, not a regular file"
    return "it is not a regular file"


def _os_reason(err: OSError) -> str:
    if err.errno == errno.EISDIR:
        return "it is a directory"
    return err.strerror or str(err)


#: The name that means standard input where a file is read (and standard output where one is written).
STDIO = "-"


def read_stdin(limit: int) -> bytes:
    """At most ``limit`` bytes of standard input (``-`` as a file name);
    :class:`Unreadable` when it is closed or holds more."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise Unreadable("standard input is closed")
    try:
        data = stream.read(limit + 1)
    except (OSError, ValueError) as err:
        raise Unreadable(getattr(err, "strerror", None) or str(err)) from None
    if len(data) > limit:
        raise Unreadable(f"it is larger than {size_text(limit)}", too_large=True)
    return data


def read_bytes(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``path`` (standard input for
    ``-``); :class:`Unreadable` otherwise."""
    if path == STDIO:
        return read_stdin(limit)
    try:
        kind = _kind(os.stat(path).st_mode)  # refuse a device or FIFO before opening it
        if kind is not None:
            raise Unreadable(kind)
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _BINARY | _CLOEXEC)
    except ValueError:  # a NUL byte, or a character the file system cannot name
        bad = "a NUL byte" if "\x00" in path else "a character no file name can hold"
        raise Unreadable(f"the path holds {bad}") from None
    except OSError as err:
        raise Unreadable(_os_reason(err)) from None
    try:
        kind = _kind(os.fstat(fd).st_mode)  # it may have been replaced since the stat
        if kind is not None:
            raise Unreadable(kind)
        chunks: list[bytes] = []
        left = limit + 1  # one byte more than allowed tells "too large", however fast the file grows
        while left > 0:
            chunk = os.read(fd, min(left, MiB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise Unreadable(_os_reason(err)) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise Unreadable(f"it is larger than {size_text(limit)}", too_large=True)
    return data


def decode_utf8(data: bytes) -> str:
    """``data`` as UTF-8 text; :class:`Unreadable` if it is not."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        good = data[:err.start].decode("utf-8")
        raise Unreadable(f"it is not UTF-8 text (byte 0x{data[err.start]:02X})",
                         text=data.decode("utf-8", errors="replace"), offset=len(good)) from None
    return text


def read_text(path: str, limit: int) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes long."""
    return decode_utf8(read_bytes(path, limit))

"""Helpers of the front-end tests: load a program from text, or get its error."""

from __future__ import annotations

import contextlib
import io
import sys
from unittest import mock

import pytest

from serq import cli
from serq.errors import SerqError
from serq.frontend import load_program
from serq.ir import Program


def load(text: str, **kw) -> Program:
    return load_program(text=text, **kw)


def fails(text: str | None = None, *, path: str | None = None, **kw) -> SerqError:
    """The error a program gives; the test fails if it loads."""
    with pytest.raises(SerqError) as info:
        if path is not None:
            load_program(path=path, **kw)
        else:
            load_program(text=text, **kw)
    err = info.value
    err.render()  # rendering never raises
    return err


def where(err: SerqError) -> tuple[int | None, int | None]:
    return err.line, err.col


def attr(p: Program, name: str) -> int:
    return p.attributes.index(name)


def cli_main(*argv: str) -> tuple[int, str]:
    """Run the `serq` command in this process: its exit code and everything it printed."""
    code, out, err = cli_streams(*argv)
    return code, out + err


def cli_streams(*argv: str) -> tuple[int, str, str]:
    """Run the `serq` command in this process: its exit code, standard output and standard error."""
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.object(sys, "argv", ["serq", *argv]), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            cli.main()
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def default_sigint() -> None:
    """A child's ``preexec_fn``: Ctrl-C handled as a terminal's would be, even
    where the tests run under a shell that started them in the background
    (such a shell sets SIGINT to be ignored, and the child would inherit it)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)

"""An internal error (a bug in serq) is one line on standard error and exit 3,
never a traceback nor what the exception carries after its first line
(README's exit codes; issue 38)."""

from __future__ import annotations

from pathlib import Path

import pytest
from parsimonious.exceptions import VisitationError
from parsimonious.grammar import Grammar

from serq import cli

ROOT = Path(__file__).resolve().parents[1]
MG1 = str(ROOT / "programs" / "single-turn" / "mg1.sq")


def _visitation_error() -> VisitationError:
    """A parser's error as Parsimonious makes it: its message holds the whole parse tree."""
    node = Grammar('rule = "a" "b"').parse("ab")
    try:
        raise TypeError("cannot unpack non-iterable Tok object")
    except TypeError as err:
        return VisitationError(err, type(err), node)


@pytest.mark.parametrize("error", [_visitation_error(), ValueError("x" * 5000), KeyError("")])
def test_an_internal_error_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                       error: Exception) -> None:
    def broken(*args: object, **kw: object) -> None:
        raise error

    monkeypatch.setattr("serq.api.load", broken)
    monkeypatch.setattr("sys.argv", ["serq", "check", MG1])
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert done.value.code == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("internal error (a bug in serq, please report it): ")
    assert "Parse tree" not in err and "Traceback" not in err and len(err) < 300, err
    assert type(error).__name__ in err


def test_the_first_line_of_a_parsers_error_is_kept() -> None:
    line = cli.internal_error_line(_visitation_error())
    assert line == ("internal error (a bug in serq, please report it): VisitationError: "
                    "TypeError: cannot unpack non-iterable Tok object")

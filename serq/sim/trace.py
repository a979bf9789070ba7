"""The trace CSV of a workload (language §10.4, semantics §7.3).

``session,turn,new,out,think[,forced]``; empty lines, ``#`` lines and the
header are skipped; consecutive rows with the same ``session`` value form one
trace session, in file order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import SerqError

COLUMNS = ("session", "turn", "new", "out", "think", "forced")


@dataclass(frozen=True, slots=True)
class TraceTurn:
    new: float
    out: float
    think: float
    forced: float


@dataclass(frozen=True, slots=True)
class Corpus:
    sessions: tuple[tuple[TraceTurn, ...], ...]


def _number(text: str, path: str, line: int, col: int) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise SerqError(
            f"{path}:{line}: column {col} ({COLUMNS[col - 1]}): invalid number `{text.strip()}`",
            helps=["replace it with a numeric value"],
        ) from None


def parse_trace(text: str, path: str) -> Corpus:
    """Parse trace text; errors name ``path:line``."""
    sessions: list[list[TraceTurn]] = []
    last_key: float | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("session"):
            continue
        fields = line.split(",")
        if len(fields) not in (5, 6):
            raise SerqError(
                f"{path}:{lineno}: expected 5 or 6 fields, got {len(fields)}",
                helps=["the columns are session,turn,new,out,think[,forced]"],
            )
        values = [_number(f, path, lineno, i) for i, f in enumerate(fields, 1)]
        key = values[0]
        turn = TraceTurn(values[2], values[3], values[4], values[5] if len(values) == 6 else 0.0)
        if last_key is None or key != last_key:
            sessions.append([])
            last_key = key
        sessions[-1].append(turn)
    if not sessions:
        raise SerqError(f"{path}: empty trace", helps=["a trace needs at least one data row"])
    return Corpus(tuple(tuple(s) for s in sessions))


def read_trace(path: str) -> Corpus:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise SerqError(f"cannot read trace `{path}`: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise SerqError(f"cannot read trace `{path}`: not UTF-8 text") from None
    return parse_trace(text, path)

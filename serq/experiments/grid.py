"""The command line's experiment syntax: axes, seeds and SLOs, parsed.

* ``NAME=START:STOP:STEP`` — a range.  Values are computed in decimal
  arithmetic on the text as written (``START + i·STEP`` with Python's
  :class:`~decimal.Decimal`), so ``0.2:0.8:0.1`` gives exactly 0.2, 0.3, …,
  0.8 — never 0.30000000000000004 — and STOP is included when a step lands on
  it.  (A value is then the float nearest that decimal, printed in shortest
  form.)  ``NAME=START:STOP`` (no step) is the interval ``--find-max`` bisects.
* ``NAME=A,B,C`` — a list; ``NAME=A`` — one value.  A list item is a number or
  any expression a ``let`` accepts (``--set B=2*K``); the rows and the summary
  show the value the constant took (:func:`shown_value`), a choice's name as
  written.
* Seeds: ``1-10``, ``1,3,5``, ``7``, or a mix (``1-3,9``); unsigned integers,
  each once.
* SLOs: ``FIGURE<=NUMBER`` (also ``<``, ``>=``, ``>``), FIGURE a column of the
  sweep's rows (``client.ttft.p99``).

Every mistake is a :class:`~serq.errors.UsageError` (exit 2) naming the
option and what was expected.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Mapping, Sequence

from ..errors import UsageError, suggest
from ..report import shortest

#: Most values one range may give, and most points a grid may have: a typo
#: (``0:1:0.0000001``) is refused instead of queuing millions of runs.
MAX_POINTS = 100_000

_NAME = re.compile(r"[^\W\d]\w*\Z")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")


@dataclass(frozen=True)
class Axis:
    """One axis of the grid: its column name and values (numbers, or
    expression text for a ``--set`` item that is not a number; class specs
    for ``--policy``/``--engine``).  ``kind`` is ``set``, ``policy`` or
    ``engine``; ``target`` the constant or stage it sets."""

    name: str
    values: tuple[Any, ...]
    kind: str = "set"
    target: str = ""
    #: (low, high) of a ``START:STOP`` interval for --find-max, else None
    interval: tuple[float, float] | None = None


def number_or_text(text: str) -> Any:
    """``4096`` → 4096, ``0.5`` → 0.5, anything else stays text."""
    t = text.strip()
    if re.fullmatch(r"[+-]?[0-9]+", t):
        return int(t)
    if _NUMBER.match(t):
        return float(t)
    return t


def value_text(value: Any) -> str:
    """A value as a ``--set`` expression and a table cell: numbers in shortest form."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, float)):
        return shortest(value)
    return str(value)


def shown_value(axis: Axis, value: Any, constants: Mapping[str, float]) -> Any:
    """What a point's rows hold in ``axis``'s column: the value as given, but
    for a ``--set`` item that is an expression, the value its constant took in
    the loaded program (``constants``): ``--set BwD=BwP`` shows 200000, not
    ``BwP`` (issue 39).  A bare name that is no ``let`` — a choice's name
    (``--set router=affinity``) or ``inf`` — stays as written, as does a value
    that is not finite (a JSON row has no number for it)."""
    if axis.kind != "set" or not isinstance(value, str):
        return value
    text = value.strip()
    if _NAME.match(text) and text not in constants:
        return value
    folded = constants.get(axis.target)
    if folded is None or not math.isfinite(folded):
        return value
    return folded


def _decimal(text: str, what: str, spec: str) -> Decimal:
    t = text.strip()
    if not _NUMBER.match(t):
        raise UsageError(f"invalid --set `{spec}`: the range's {what} `{t}` is not a number")
    try:
        d = Decimal(t)
    except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
        raise UsageError(f"invalid --set `{spec}`: the range's {what} `{t}` is not a number") from None
    if not math.isfinite(float(d)):
        raise UsageError(f"invalid --set `{spec}`: the range's {what} `{t}` is not finite")
    return d


def decimal_range(start: Decimal, stop: Decimal, step: Decimal, spec: str) -> list[float]:
    """``start, start+step, …`` up to ``stop`` included, in exact decimal arithmetic."""
    if step <= 0:
        raise UsageError(f"invalid --set `{spec}`: the step must be > 0, not {step}",
                         helps=["write START:STOP:STEP with START <= STOP and a positive STEP"])
    if stop < start:
        raise UsageError(f"invalid --set `{spec}`: the range is empty (stop {stop} < start {start})",
                         helps=["write START:STOP:STEP with START <= STOP and a positive STEP"])
    count = int((stop - start) / step) + 1
    if count > MAX_POINTS:
        raise UsageError(f"invalid --set `{spec}`: {count} values, more than {MAX_POINTS}")
    return [float(start + i * step) for i in range(count)]


def parse_set_axis(item: str, *, allow_interval: bool = False) -> Axis:
    """``NAME=RANGE|LIST|VALUE`` → an :class:`Axis`."""
    name, eq, rhs = item.partition("=")
    name = name.strip()
    if not eq:
        raise UsageError(f"invalid --set `{item}`; expected NAME=START:STOP:STEP, NAME=A,B,… or NAME=VALUE")
    if not _NAME.match(name):
        raise UsageError(f"invalid set name `{name}`; expected an identifier")
    if not rhs.strip():
        raise UsageError(f"invalid --set `{item}`: no value")
    if ":" in rhs:
        parts = rhs.split(":")
        if len(parts) == 2 and allow_interval:
            lo, hi = (_decimal(p, w, item) for p, w in zip(parts, ("start", "stop")))
            if hi <= lo:
                raise UsageError(f"invalid --set `{item}`: the interval is empty (stop {hi} <= start {lo})")
            return Axis(name, (float(lo), float(hi)), "set", name, (float(lo), float(hi)))
        if len(parts) != 3:
            need = "START:STOP:STEP (or START:STOP with --find-max)" if len(parts) == 2 else "START:STOP:STEP"
            raise UsageError(f"invalid --set `{item}`: a range is {need}")
        start, stop, step = (_decimal(p, w, item) for p, w in zip(parts, ("start", "stop", "step")))
        return Axis(name, tuple(decimal_range(start, stop, step, item)), "set", name)
    items = [p.strip() for p in rhs.split(",")]
    if any(not p for p in items):
        raise UsageError(f"invalid --set `{item}`: an empty item in the list")
    values = [number_or_text(p) for p in items]
    if len({value_text(v) for v in values}) != len(values):
        raise UsageError(f"invalid --set `{item}`: a value is listed twice")
    return Axis(name, tuple(values), "set", name)


def parse_class_axis(item: str, kind: str) -> tuple[str, list[str]]:
    """``STAGE=spec,spec`` (``--policy`` or ``--engine``) → (stage, specs)."""
    stage, eq, rhs = item.partition("=")
    stage = stage.strip()
    example = "fcfs,sjf" if kind == "policy" else "pkg.mod:A,pkg.mod:B"
    if not eq or not stage or not rhs.strip():
        raise UsageError(f"invalid --{kind} `{item}`; expected STAGE={example}")
    specs = [p.strip() for p in rhs.split(",")]
    if any(not s for s in specs):
        raise UsageError(f"invalid --{kind} `{item}`: an empty item in the list")
    if len(set(specs)) != len(specs):
        raise UsageError(f"invalid --{kind} `{item}`: a value is listed twice")
    return stage, specs


def parse_seeds(text: str) -> list[int]:
    """``1-10``, ``1,3,5``, ``7`` or a mix → the seeds in the order given."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"([0-9]{1,18})(?:\s*-\s*([0-9]{1,18}))?", part)
        if m is None:
            raise UsageError(f"invalid --seeds `{text}`: `{part}` is not a seed or a range A-B",
                             helps=["seeds are unsigned integers: --seeds 1-10, --seeds 1,3,5 or --seeds 7"])
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise UsageError(f"invalid --seeds `{text}`: the range `{part}` is empty")
        if hi - lo + 1 > MAX_POINTS:
            raise UsageError(f"invalid --seeds `{text}`: more than {MAX_POINTS} seeds")
        seeds.extend(range(lo, hi + 1))
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"invalid --seeds `{text}`: a seed is listed twice")
    return seeds


_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
}


@dataclass(frozen=True)
class Slo:
    """``figure op bound``: a run (or a mean) meets it when the comparison holds.
    A figure with no value (``null``: no samples) does not meet it."""

    figure: str
    op: str
    bound: float

    def met(self, value: Any) -> bool:
        if value is None or isinstance(value, str):
            return False
        v = float(value)
        return not math.isnan(v) and _OPS[self.op](v, self.bound)

    def __str__(self) -> str:
        return f"{self.figure}{self.op}{shortest(self.bound)}"


def parse_slo(text: str) -> Slo:
    """``client.ttft.p99<=0.5`` → an :class:`Slo`."""
    m = re.fullmatch(r"\s*([^\s<>=!]+)\s*(<=|>=|<|>)\s*(\S+)\s*", text)
    if m is None or not _NUMBER.match(m.group(3)) or not math.isfinite(float(m.group(3))):
        raise UsageError(f"invalid --slo `{text}`; expected FIGURE<=NUMBER (or <, >=, >)",
                         helps=["for example --slo 'client.ttft.p99<=0.5'"])
    return Slo(m.group(1), m.group(2), float(m.group(3)))


def parse_baseline(spec: str, axes: Sequence[Axis]) -> tuple[str, Any]:
    """``--baseline AXIS=VALUE`` (or a ``VALUE`` that one axis alone has): the
    axis and its value the other designs are paired against, checked before
    any run."""
    name, eq, text = spec.partition("=")
    if not eq:
        name, text = "", spec
    name, text = name.strip(), text.strip()
    with_values = [a for a in axes if len(a.values) > 1]
    if name:
        axis = next((a for a in axes if a.name == name), None)
        if axis is None:
            best = suggest(name, [a.name for a in axes])
            raise UsageError(f"--baseline `{spec}`: no axis `{name}`",
                             helps=[f"did you mean `{best}`?"] if best else
                             [f"the axes are {', '.join(a.name for a in axes) or 'none'}: --baseline AXIS=VALUE names "
                              "one of them and one of its values"])
        found = [axis]
    else:
        found = [a for a in with_values if any(_same(v, text) for v in a.values)]
        if len(found) != 1:
            why = "no axis has" if not found else f"the axes {', '.join(a.name for a in found)} have"
            raise UsageError(f"--baseline `{spec}`: {why} the value `{text}`",
                             helps=["write --baseline AXIS=VALUE, e.g. --baseline policy=fcfs"])
    axis = found[0]
    match = next((v for v in axis.values if _same(v, text)), None)
    if match is None:
        raise UsageError(f"--baseline `{spec}`: `{text}` is not a value of axis `{axis.name}`",
                         helps=[f"its values are {', '.join(value_text(v) for v in axis.values)}"])
    if len(axis.values) < 2:
        raise UsageError(f"--baseline `{spec}`: axis `{axis.name}` has one value, so there is nothing to compare with it",
                         helps=["give the axis the designs to compare, e.g. --policy engine=fcfs,sjf"])
    return axis.name, match


def _same(value: Any, text: str) -> bool:
    if value_text(value) == text:
        return True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return False

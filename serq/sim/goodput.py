"""Goodput (issue 39): the share of turns that meet every latency target.

DistServe (Zhong et al., OSDI 2024) plans with goodput — the requests served
a second within their TTFT and TPOT targets — and its successors do too.
``--goodput 'ttft<=0.5,tpot<=0.05'`` makes every turn after warm-up record
a client row ``goodput``: 1 when the turn met every target, 0 otherwise.  The
row is summarised like the others, so ``client.goodput.mean`` is the share
of turns that met the targets, with its batch-means interval, and the
goodput *rate* is that share times the turns a second.

A target reads one client figure of the turn (``ttft``, ``tpot``,
``response``).  A turn without a first token (a server that never prefills)
has no ``ttft``: a ``ttft`` target fails.  A turn with one output token has
no ``tpot``: a ``tpot`` target holds, as there is no gap between tokens to
miss (docs/report.md, "Goodput").
"""

from __future__ import annotations

import math
import operator
import re
from typing import Callable

from ..errors import UsageError
from ..node import record

#: The client figures a target may read.
FIGURES = ("ttft", "tpot", "response")
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
}
_TARGET = re.compile(r"\s*(?:client\.)?([A-Za-z_]\w*)\s*(<=|>=|<|>)\s*([^\s,]+?)\s*(ms|s)?\s*")


@record(frozen=True)
class Target:
    """``figure op bound`` (seconds) on one turn's client figure."""

    figure: str
    op: str
    bound: float

    def met(self, value: float | None) -> bool:
        """Whether the turn's ``value`` meets the target (``None``: the turn has no such figure)."""
        if value is None:
            return self.figure == "tpot"  # one output token: no gap to miss
        return _OPS[self.op](value, self.bound)

    def __str__(self) -> str:
        return f"{self.figure}{self.op}{self.bound:g}"


def parse_goodput(text: str) -> tuple[Target, ...]:
    """``'ttft<=0.5,tpot<=50ms'`` → targets (bounds in seconds; ``ms`` accepted)."""
    targets = []
    for part in text.split(","):
        m = _TARGET.fullmatch(part)
        number = None
        if m is not None:
            try:
                number = float(m.group(3))
            except ValueError:
                number = None
        if m is None or number is None or not math.isfinite(number):
            raise UsageError(f"invalid --goodput `{text}`: `{part.strip()}` is not FIGURE<=SECONDS",
                             helps=["for example --goodput 'ttft<=0.5,tpot<=0.05' (seconds; 50ms also reads)"])
        figure = m.group(1)
        if figure not in FIGURES:
            from ..errors import suggest

            best = suggest(figure, FIGURES)
            raise UsageError(f"invalid --goodput `{text}`: `{figure}` is not a client figure",
                             helps=([f"did you mean `{best}`?"] if best else [])
                             + ["the client figures are " + ", ".join(f"`{f}`" for f in FIGURES)])
        if m.group(4) == "ms":
            number /= 1000.0
        targets.append(Target(figure, m.group(2), number))
    return tuple(targets)


def meets(targets: tuple[Target, ...], ttft: float | None, tpot: float | None, response: float) -> bool:
    """Whether one turn meets every target."""
    values = {"ttft": ttft, "tpot": tpot, "response": response}
    return all(t.met(values[t.figure]) for t in targets)

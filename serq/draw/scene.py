"""The figure as a list of shapes, independent of the output format.

Layout places shapes in pixel coordinates (y grows downwards); ``svg`` and
``tikz`` only translate them.  Text is measured as monospace (DejaVu Sans
Mono's advance is 0.602 em), so the layout knows every label's width without
a font file and no two labels overlap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

#: Font sizes in pixels.
TITLE, BODY, SMALL = 13.0, 12.0, 10.5
#: Advance of one monospace character, in em (a little above DejaVu Sans Mono's 0.602).
CHAR_EM = 0.61
FONT_FAMILY = "DejaVu Sans Mono, Menlo, Consolas, monospace"


def text_width(text: str, size: float = BODY) -> float:
    """Width of ``text`` set at ``size`` pixels in the monospace font."""
    return len(text) * size * CHAR_EM


def line_height(size: float = BODY) -> float:
    return round(size * 1.35, 2)


def num(v: float) -> str:
    """A number as a label shows it: integers without a point, else 4 significant digits."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    text = f"{v:.4g}"
    return text.replace("e-0", "e-").replace("e+0", "e").replace("e+", "e")


def prob(v: float) -> str:
    """A probability with at most 3 significant digits: ``0.9``, ``0.1``, ``0.89``."""
    text = f"{v:.3g}"
    return text if "e" not in text else f"{v:.2e}"


# ---------------------------------------------------------------------------
# colours: (stroke, fill) pairs


INK = "#222222"
GREY = "#6b6b6b"
LIGHT = "#f6f6f6"
WHITE = "#ffffff"
HOLD_STROKE = "#b86e00"
HOLD_FILL = "#fff4e0"
HOLD_INK = "#8a5200"
SERVER_STROKE = "#8c8c8c"
#: A child lane (``spawn``/``join``): its dashed box, edges and labels.
LANE_STROKE = "#4b54a8"
LANE_FILL = "#eef0fb"
LANE_INK = "#333b85"
#: Stage colours, by stage index (cycled): stroke and a light fill.
STAGE_COLOURS: tuple[tuple[str, str], ...] = (
    ("#2f6db5", "#e3eefa"),
    ("#2e8b57", "#e2f4e9"),
    ("#7b4fb0", "#efe7f8"),
    ("#b03a48", "#f9e4e6"),
    ("#1f8a8a", "#dff3f3"),
    ("#8a6d1f", "#f5efdc"),
)


def stage_colour(index: int) -> tuple[str, str]:
    return STAGE_COLOURS[index % len(STAGE_COLOURS)]


# ---------------------------------------------------------------------------
# shapes


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    stroke: str | None = INK
    fill: str | None = None
    radius: float = 0.0
    width: float = 1.2
    dash: bool = False
    role: str = ""  # what it stands for, e.g. "hold", "server", "pool", "stage", "run"


@dataclass(frozen=True)
class Poly:
    """A closed polygon (the decision hexagon)."""

    points: tuple[tuple[float, float], ...]
    stroke: str | None = INK
    fill: str | None = None
    width: float = 1.2
    role: str = ""


@dataclass(frozen=True)
class Circle:
    cx: float
    cy: float
    r: float
    stroke: str | None = INK
    fill: str | None = None
    width: float = 1.2
    role: str = ""


@dataclass(frozen=True)
class Line:
    """An open polyline; ``arrow`` puts a head at its last point."""

    points: tuple[tuple[float, float], ...]
    stroke: str = INK
    width: float = 1.2
    dash: bool = False
    arrow: bool = False
    role: str = ""


@dataclass(frozen=True)
class Text:
    """A one-line label; ``y`` is its baseline."""

    x: float
    y: float
    text: str
    size: float = BODY
    anchor: Literal["start", "middle", "end"] = "start"
    bold: bool = False
    fill: str = INK
    role: str = ""


Shape = Union[Rect, Poly, Circle, Line, Text]


@dataclass
class Scene:
    """Shapes in drawing order (later on top), and the canvas size."""

    width: float = 0.0
    height: float = 0.0
    title: str = ""
    shapes: list[Shape] = field(default_factory=list)

    def add(self, shape: Shape) -> None:
        self.shapes.append(shape)

    def colours(self) -> list[str]:
        """Every colour used, sorted (the TikZ preamble defines each once)."""
        found: set[str] = set()
        for s in self.shapes:
            for attr in ("stroke", "fill"):
                value = getattr(s, attr, None)
                if value:
                    found.add(value)
        return sorted(found)

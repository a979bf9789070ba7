"""``serq draw``: the deployment figure, as SVG or as a standalone TikZ document.

The figure has two parts.  On top, the deployment: a card per pool (its cap,
block, policies, and a ``cache`` badge when a hold leaves a prefix cached in
it) and a card per stage.  Below, the session's flow from its arrival to its
end, left to right: runs on stages, turns, branches with their
probabilities, loops with their back edges, the spliced server, for every
``hold`` an enclosure around what it spans, labelled with its pools, and for
every ``spawn`` a fork to a child lane that merges back at its ``join``.

``render`` is pure: the same program always gives the same text.
"""

from __future__ import annotations

import os

from .. import ir
from ..errors import UsageError
from . import scene as sc
from .deploy import CARD_GAP, Card, pool_cards, stage_cards
from .flow import build
from .layout import baseline, place

__all__ = ["render", "figure"]

MARGIN = 20.0
SECTION_GAP = 22.0
MIN_WIDTH = 560.0


def _heading(scene: sc.Scene, y: float, text: str) -> float:
    scene.add(sc.Text(MARGIN, baseline(y, sc.SMALL), text, size=sc.SMALL, bold=True,
                      fill=sc.GREY, role="heading"))
    return y + sc.line_height(sc.SMALL) + 6.0


def _rows(cards: list[Card], width: float) -> list[list[Card]]:
    """Cards in reading order, wrapped to ``width``."""
    rows: list[list[Card]] = [[]]
    used = 0.0
    for card in cards:
        need = card.width + (CARD_GAP if rows[-1] else 0.0)
        if rows[-1] and used + need > width:
            rows.append([])
            used, need = 0.0, card.width
        rows[-1].append(card)
        used += need
    return [row for row in rows if row]


def figure(program: ir.Program) -> sc.Scene:
    """The figure of a checked program, as shapes."""
    flow = place(build(program))
    cards = pool_cards(program) + stage_cards(program)
    widest_card = max((c.width for c in cards), default=0.0)
    inner = max(flow.w, MIN_WIDTH, widest_card)
    name = os.path.basename(program.path) if program.path else "program"
    scene = sc.Scene(title=f"{name}: deployment and session flow")

    y = MARGIN
    scene.add(sc.Text(MARGIN, baseline(y, sc.TITLE), name, size=sc.TITLE, bold=True, role="title"))
    y += sc.line_height(sc.TITLE) + 10.0
    if cards:
        y = _heading(scene, y, "deployment: pools and stages")
        for row in _rows(cards, inner):
            h = max(c.height for c in row)
            x = MARGIN
            for card in row:
                card.draw(scene, x, y, h)
                x += card.width + CARD_GAP
            y += h + CARD_GAP
        y += SECTION_GAP - CARD_GAP
    y = _heading(scene, y, "session: arrival to end, left to right")
    spine = y + flow.up
    flow.draw(scene, MARGIN, spine)
    y = spine + flow.down
    kinds = [s.role for s in scene.shapes if isinstance(s, sc.Rect) and s.role in ("hold", "server", "lane")]
    if kinds:
        y = _legend(scene, y + SECTION_GAP, sorted(set(kinds)))
    scene.width = round(inner + 2 * MARGIN)
    scene.height = round(y + MARGIN)
    return scene


LEGEND = {
    "hold": "hold: its pools are taken at admission and given back where the box ends",
    "server": "server: what the deployment does with one request",
    "lane": "child lane: the sessions a spawn starts, each runs the session; join waits",
}


def _legend(scene: sc.Scene, y: float, kinds: list[str]) -> float:
    """One line per kind of enclosure in the figure: a small swatch and what it means."""
    lh = sc.line_height(sc.SMALL) + 4.0
    for kind in kinds:
        hold = kind == "hold"
        fill: str | None
        if kind == "lane":
            stroke, fill, width = sc.LANE_STROKE, sc.LANE_FILL, 1.3
        else:
            stroke, fill = (sc.HOLD_STROKE, sc.HOLD_FILL) if hold else (sc.SERVER_STROKE, None)
            width = 1.4 if hold else 1.1
        scene.add(sc.Rect(MARGIN, y + 2.0, 22.0, lh - 6.0, radius=4.0, stroke=stroke, fill=fill, width=width,
                          dash=not hold, role="legend"))
        scene.add(sc.Text(MARGIN + 30.0, baseline(y + 1.0, sc.SMALL), LEGEND[kind], size=sc.SMALL,
                          fill=sc.GREY, role="legend-label"))
        y += lh
    return y


def render(program: ir.Program, fmt: str) -> str:
    """The figure of ``program`` as ``"svg"`` or ``"tikz"`` text."""
    scene = figure(program)
    if fmt == "svg":
        from .svg import to_svg

        return to_svg(scene)
    if fmt == "tikz":
        from .tikz import to_tikz

        return to_tikz(scene)
    raise UsageError(f"invalid value for --format: `{fmt}` (expected svg or tikz)")

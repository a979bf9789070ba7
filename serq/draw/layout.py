"""Placing the flow tree left to right.

Every item is measured first — its width and how far it reaches above and
below the *spine*, the horizontal line the session travels along — and then
drawn at a position.  A sequence puts its items side by side on one spine; a
fork keeps its first arm on the spine and stacks the others below; a loop
draws its back edge above its body; an enclosure pads its body and puts its
label on top; a spawn's stretch puts its child lane below its items.  Since
every extent is known before anything is drawn, no two items overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import fsum
from typing import Callable

from . import scene as sc
from .flow import Box, Cycle, Fork, Item, Node, Seq, Span

GAP = 26.0  # length of an edge between two items
PAD = 7.0  # inside a node, around its text
BOX_PAD = 12.0  # inside an enclosure, around its body
ARM_GAP = 18.0  # between two arms of a fork
LOOP_RISE = 14.0  # between a loop's body and its back edge
HEX_H = 26.0
LANE_GAP = 24.0  # between the spine's items and a child lane below them
STUB = 22.0  # length of the merge stub under a join whose children come from elsewhere


@dataclass
class Placed:
    """An item measured: ``draw(scene, x, y)`` draws it with its left end at
    ``x`` and its spine at ``y``."""

    w: float
    up: float
    down: float
    exits: bool
    head: bool  # an edge arriving at the entry ends in an arrowhead
    draw: Callable[[sc.Scene, float, float], None]


def edge(scene: sc.Scene, points: list[tuple[float, float]], arrow: bool, role: str = "edge") -> None:
    pts = tuple((round(x, 2), round(y, 2)) for x, y in points)
    if len(pts) >= 2 and pts[0] != pts[-1]:
        scene.add(sc.Line(pts, stroke=sc.INK, width=1.2, arrow=arrow, role=role))


def baseline(top: float, size: float) -> float:
    """Baseline of a line of text whose line box starts at ``top``."""
    return top + (sc.line_height(size) - size) / 2 + size * 0.8


# ---------------------------------------------------------------------------
# nodes


def _node_style(node: Node) -> tuple[str, str, str, bool, bool]:
    """(stroke, fill, text colour, pill-shaped, dashed) of a node."""
    if node.kind == "run" and node.stage is not None:
        stroke, fill = sc.stage_colour(node.stage)
        return stroke, fill, sc.INK, False, False
    if node.kind == "end":
        return sc.INK, sc.INK, sc.WHITE, True, False
    if node.kind == "cmd":
        return sc.GREY, sc.WHITE, sc.INK, False, True
    if node.kind == "arrive":
        return sc.INK, sc.LIGHT, sc.INK, True, False
    if node.kind in ("spawn", "join"):
        return sc.LANE_STROKE, sc.WHITE, sc.LANE_INK, False, False
    return sc.INK, sc.WHITE, sc.INK, True, False  # turn


def place_node(node: Node) -> Placed:
    sizes = [sc.BODY] + [sc.SMALL] * (len(node.lines) - 1)
    if node.kind in ("cmd", "spawn", "join"):
        sizes = [sc.SMALL] * len(node.lines)
    heights = [sc.line_height(s) for s in sizes]
    pad_x = PAD + (6.0 if node.kind in ("turn", "end", "arrive") else 0.0)
    w = max(sc.text_width(t, s) for t, s in zip(node.lines, sizes)) + 2 * pad_x
    h = fsum(heights) + 2 * PAD - 2.0
    stroke, fill, ink, pill, dash = _node_style(node)

    def draw(scene: sc.Scene, x: float, y: float) -> None:
        top = y - h / 2
        scene.add(sc.Rect(x, top, w, h, stroke=stroke, fill=fill, radius=h / 2 if pill else 5.0,
                          width=1.4 if node.kind == "run" else 1.2, dash=dash, role=node.kind))
        line_top = top + PAD - 1.0
        for i, (text, size, lh) in enumerate(zip(node.lines, sizes, heights)):
            bold = i == 0 and node.kind in ("run", "end")
            colour = ink if i == 0 else sc.GREY
            scene.add(sc.Text(x + w / 2, baseline(line_top, size), text, size=size,
                              anchor="middle", bold=bold, fill=colour, role=f"{node.kind}-label"))
            line_top += lh

    return Placed(w, h / 2, h / 2, node.kind != "end", True, draw)


# ---------------------------------------------------------------------------
# sequences


def place_seq(seq: Seq) -> Placed:
    parts = [place(item) for item in seq.items]
    if not parts:
        return Placed(0.0, 0.0, 0.0, True, False, lambda scene, x, y: None)
    w = fsum(p.w for p in parts) + GAP * (len(parts) - 1)
    up = max(p.up for p in parts)
    down = max(p.down for p in parts)

    def draw(scene: sc.Scene, x: float, y: float) -> None:
        for i, part in enumerate(parts):
            if i:
                edge(scene, [(x - GAP, y), (x, y)], part.head)
            part.draw(scene, x, y)
            x += part.w + GAP

    return Placed(w, up, down, all(p.exits for p in parts), parts[0].head, draw)


# ---------------------------------------------------------------------------
# forks


def place_fork(fork: Fork) -> Placed:
    arms = [place_seq(a.body) for a in fork.arms]
    label_up = sc.line_height(sc.SMALL) + 2.0
    hex_w = sc.text_width(fork.guard) + 2 * PAD + HEX_H
    lead = max(GAP, max(sc.text_width(a.label, sc.SMALL) for a in fork.arms) + 16.0)
    arm_x = hex_w + lead
    # spines of the arms, relative to the fork's spine
    ys = [0.0]
    for k in range(1, len(arms)):
        ys.append(ys[-1] + arms[k - 1].down + ARM_GAP + max(arms[k].up, label_up))
    up = max(arms[0].up, label_up, HEX_H / 2)
    down = max(HEX_H / 2, ys[-1] + arms[-1].down)
    exiting = [k for k, a in enumerate(arms) if a.exits]
    widest = max(a.w for a in arms)
    merge_x = arm_x + widest + (GAP / 2 if exiting else 0.0)
    w = merge_x

    def draw(scene: sc.Scene, x: float, y: float) -> None:
        half, cx = HEX_H / 2, x + hex_w / 2
        pts = ((x, y), (x + half, y - half), (x + hex_w - half, y - half), (x + hex_w, y),
               (x + hex_w - half, y + half), (x + half, y + half))
        scene.add(sc.Poly(tuple((round(a, 2), round(b, 2)) for a, b in pts),
                          stroke=sc.INK, fill=sc.WHITE, role="branch"))
        scene.add(sc.Text(cx, baseline(y - sc.line_height() / 2, sc.BODY), fork.guard,
                          anchor="middle", role="branch-label"))
        ax = x + arm_x
        for k, (arm, part) in enumerate(zip(fork.arms, arms)):
            ay = y + ys[k]
            if k == 0:
                start = [(x + hex_w, y), (ax, y)]
                label_x = x + hex_w + (lead / 2)
            else:
                start = [(cx, y + half), (cx, ay), (ax, ay)]
                label_x = cx + (ax - cx) / 2
            edge(scene, start, part.head)
            scene.add(sc.Text(label_x, ay - 5.0, arm.label, size=sc.SMALL, anchor="middle",
                              fill=sc.GREY, role="arm-label"))
            part.draw(scene, ax, ay)
            if k in exiting:
                end = ax + part.w
                route = [(end, ay), (x + merge_x, ay)] + ([(x + merge_x, y)] if k else [])
                edge(scene, route, False)
        if len(exiting) > 1:
            scene.add(sc.Circle(x + merge_x, y, 3.0, stroke=sc.INK, fill=sc.INK, role="merge"))

    return Placed(w, up, down, bool(exiting), True, draw)


# ---------------------------------------------------------------------------
# loops and enclosures


def place_cycle(cycle: Cycle) -> Placed:
    body = place_seq(cycle.body)
    lead = GAP * 0.8
    tail = 14.0 if body.exits else 0.0
    label_h = sc.line_height(sc.SMALL)
    up = body.up + LOOP_RISE + label_h
    w = 4.0 + lead + body.w + tail

    def draw(scene: sc.Scene, x: float, y: float) -> None:
        jx = x + 4.0
        scene.add(sc.Circle(jx, y, 3.5, stroke=sc.INK, fill=sc.WHITE, role="loop"))
        edge(scene, [(jx + 3.5, y), (jx + lead, y)], body.head)
        body.draw(scene, jx + lead, y)
        if body.exits:
            top = y - body.up - LOOP_RISE
            right = jx + lead + body.w + tail
            edge(scene, [(jx + lead + body.w, y), (right, y), (right, top), (jx, top), (jx, y - 3.5)],
                 True, role="back-edge")
            scene.add(sc.Text((jx + right) / 2, top - 4.0, "loop", size=sc.SMALL, anchor="middle",
                              fill=sc.GREY, role="loop-label"))

    # the item before a loop meets its junction dot, not a node: no arrowhead
    return Placed(w, up, body.down, False, False, draw)


def place_box(box: Box) -> Placed:
    body = place_seq(box.body)
    label_size = sc.SMALL
    label_h = sc.line_height(label_size) + 2.0
    label_w = sc.text_width(box.label, label_size)
    inner_w = max(body.w, label_w + 4.0, 20.0)
    w = inner_w + 2 * BOX_PAD
    up = max(body.up, 6.0) + BOX_PAD + label_h
    down = max(body.down, 6.0) + BOX_PAD
    hold = box.kind == "hold"
    stroke = sc.HOLD_STROKE if hold else sc.SERVER_STROKE
    fill = sc.HOLD_FILL if hold else None
    ink = sc.HOLD_INK if hold else sc.GREY

    def draw(scene: sc.Scene, x: float, y: float) -> None:
        top = y - up
        scene.add(sc.Rect(x, top, w, up + down, stroke=stroke, fill=fill, radius=9.0,
                          width=1.6 if hold else 1.1, dash=not hold, role=box.kind))
        scene.add(sc.Text(x + BOX_PAD - 4.0, baseline(top + 3.0, label_size), box.label,
                          size=label_size, bold=hold, fill=ink, role=f"{box.kind}-label"))
        bx = x + BOX_PAD
        edge(scene, [(x, y), (bx, y)], body.head)
        body.draw(scene, bx, y)
        if body.exits:
            edge(scene, [(bx + body.w, y), (x + w, y)], False)

    return Placed(w, up, down, body.exits, False, draw)


# ---------------------------------------------------------------------------
# spawn and join: a child lane below the spine


def _dashed(scene: sc.Scene, points: list[tuple[float, float]], role: str) -> None:
    pts = tuple((round(x, 2), round(y, 2)) for x, y in points)
    scene.add(sc.Line(pts, stroke=sc.LANE_STROKE, width=1.3, dash=True, arrow=True, role=role))


def place_span(span: Span) -> Placed:
    """The body on the spine; below it the child lane (or, for a lone join,
    the stub its children merge by).  A dashed edge forks from the bottom of
    every spawn down into the lane, and one rises from the lane into the
    bottom of the join, ending on a merge bar."""
    parts = [place(item) for item in span.body.items]
    offs, at = [], 0.0
    for part in parts:
        offs.append(at)
        at += part.w + GAP
    body_w = at - GAP
    up = max(p.up for p in parts)
    below = max(p.down for p in parts)
    lane = span.lane
    if lane is None:  # a lone join: a stub from below, labelled with the handle
        label = f"from {span.handle}"
        label_h = sc.line_height(sc.SMALL)
        w = max(body_w, sc.text_width(label, sc.SMALL) + 4.0)
        down = parts[0].down + STUB + label_h

        def draw_stub(scene: sc.Scene, x: float, y: float) -> None:
            left = x + (w - parts[0].w) / 2
            parts[0].draw(scene, left, y)
            cx, bottom = left + parts[0].w / 2, y + parts[0].down
            _merge_bar(scene, cx, bottom)
            _dashed(scene, [(cx, bottom + STUB), (cx, bottom + 3.0)], "merge-edge")
            scene.add(sc.Text(cx, baseline(bottom + STUB, sc.SMALL), label, size=sc.SMALL, anchor="middle",
                              fill=sc.LANE_INK, role="lane-stub"))
            if w > parts[0].w:
                edge(scene, [(x, y), (left, y)], parts[0].head)
                if parts[0].exits:
                    edge(scene, [(left + parts[0].w, y), (x + w, y)], False)

        return Placed(w, up, down, parts[0].exits, parts[0].head if w == parts[0].w else False, draw_stub)

    lines = [lane.title, lane.runs] + ([lane.note] if lane.note else [])
    heights = [sc.line_height(sc.SMALL) for _ in lines]
    text_w = max(sc.text_width(t, sc.SMALL) for t in lines)
    lane_h = fsum(heights) + 2 * PAD - 2.0
    lane_top = below + LANE_GAP
    first = span.forks[0]
    last = span.merge if span.merge is not None else span.forks[-1]
    x0 = offs[first]
    lane_w = max(offs[last] + parts[last].w - x0, text_w + 2 * PAD)
    w = max(body_w, x0 + lane_w)
    exits = all(p.exits for p in parts)

    def draw(scene: sc.Scene, x: float, y: float) -> None:
        for k, part in enumerate(parts):
            if k:
                edge(scene, [(x + offs[k] - GAP, y), (x + offs[k], y)], part.head)
            part.draw(scene, x + offs[k], y)
        if exits and w > body_w:
            edge(scene, [(x + body_w, y), (x + w, y)], False)
        top = y + lane_top
        scene.add(sc.Rect(x + x0, top, lane_w, lane_h, stroke=sc.LANE_STROKE, fill=sc.LANE_FILL, radius=6.0,
                          width=1.3, dash=True, role="lane"))
        line_top = top + PAD - 1.0
        for i, (text, lh) in enumerate(zip(lines, heights)):
            scene.add(sc.Text(x + x0 + PAD, baseline(line_top, sc.SMALL), text, size=sc.SMALL, bold=i == 0,
                              fill=sc.LANE_INK if i == 0 else sc.GREY, role="lane-label"))
            line_top += lh
        for k in span.forks:
            cx = x + offs[k] + parts[k].w / 2
            _dashed(scene, [(cx, y + parts[k].down), (cx, top)], "fork-edge")
            _edge_label(scene, cx, y + parts[k].down, top, "fork")
        if span.merge is not None:
            m = span.merge
            cx = x + offs[m] + parts[m].w / 2
            _merge_bar(scene, cx, y + parts[m].down)
            _dashed(scene, [(cx, top), (cx, y + parts[m].down + 3.0)], "merge-edge")
            _edge_label(scene, cx, y + parts[m].down + 3.0, top, "merge")

    return Placed(w, up, lane_top + lane_h, exits, parts[0].head, draw)


def _edge_label(scene: sc.Scene, cx: float, y0: float, y1: float, text: str) -> None:
    """``fork`` just right of a vertical edge from ``y0`` down to ``y1``, ``merge``
    just left of it: a spawn box is wide enough to cover its label, and a
    narrow join's label reaches into the gap before it, never into what
    follows the stretch (a branch's merge dot may be half a gap away)."""
    right = text == "fork"
    scene.add(sc.Text(cx + 5.0 if right else cx - 5.0, baseline((y0 + y1 - sc.line_height(sc.SMALL)) / 2, sc.SMALL),
                      text, size=sc.SMALL, anchor="start" if right else "end", fill=sc.LANE_INK,
                      role=f"{text}-label"))


def _merge_bar(scene: sc.Scene, cx: float, bottom: float) -> None:
    """The bar under a join that its children's edge ends on."""
    scene.add(sc.Rect(round(cx - 14.0, 2), round(bottom, 2), 28.0, 3.0, stroke=None, fill=sc.LANE_STROKE,
                      role="merge-bar"))


def place(item: Item) -> Placed:
    if isinstance(item, Node):
        return place_node(item)
    if isinstance(item, Seq):
        return place_seq(item)
    if isinstance(item, Fork):
        return place_fork(item)
    if isinstance(item, Cycle):
        return place_cycle(item)
    if isinstance(item, Span):
        return place_span(item)
    return place_box(item)

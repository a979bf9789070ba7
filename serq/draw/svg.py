"""The scene as an SVG document (SVG 1.1, no scripts, no external files)."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from . import scene as sc


def n(v: float) -> str:
    """A coordinate: at most two decimals, no trailing zeros, never ``-0``."""
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _paint(stroke: str | None, fill: str | None, width: float, dash: bool = False) -> str:
    parts = [f'fill="{fill or "none"}"']
    if stroke:
        parts.append(f'stroke="{stroke}" stroke-width="{n(width)}"')
        if dash:
            parts.append('stroke-dasharray="5 3"')
    else:
        parts.append('stroke="none"')
    return " ".join(parts)


def _cls(role: str) -> str:
    return f' class="{role}"' if role else ""


def _shape(s: sc.Shape) -> str:
    if isinstance(s, sc.Rect):
        rx = f' rx="{n(s.radius)}"' if s.radius else ""
        return (f'<rect{_cls(s.role)} x="{n(s.x)}" y="{n(s.y)}" width="{n(s.w)}" height="{n(s.h)}"{rx} '
                f"{_paint(s.stroke, s.fill, s.width, s.dash)}/>")
    if isinstance(s, sc.Poly):
        pts = " ".join(f"{n(x)},{n(y)}" for x, y in s.points)
        return f'<polygon{_cls(s.role)} points="{pts}" {_paint(s.stroke, s.fill, s.width)}/>'
    if isinstance(s, sc.Circle):
        return (f'<circle{_cls(s.role)} cx="{n(s.cx)}" cy="{n(s.cy)}" r="{n(s.r)}" '
                f"{_paint(s.stroke, s.fill, s.width)}/>")
    if isinstance(s, sc.Line):
        pts = " ".join(f"{n(x)},{n(y)}" for x, y in s.points)
        head = ' marker-end="url(#arrow)"' if s.arrow else ""
        return (f'<polyline{_cls(s.role)} points="{pts}" {_paint(s.stroke, None, s.width, s.dash)}'
                f' stroke-linejoin="round"{head}/>')
    weight = ' font-weight="bold"' if s.bold else ""
    anchor = f' text-anchor="{s.anchor}"' if s.anchor != "start" else ""
    return (f'<text{_cls(s.role)} x="{n(s.x)}" y="{n(s.y)}" font-size="{n(s.size)}"{anchor}{weight} '
            f'fill="{s.fill}">{escape(s.text)}</text>')


def to_svg(scene: sc.Scene) -> str:
    """The whole document, ending with a newline."""
    w, h = n(scene.width), n(scene.height)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" font-family={quoteattr(sc.FONT_FAMILY)}>',
        f"<title>{escape(scene.title)}</title>",
        "<defs>",
        '<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
        f'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{sc.INK}"/></marker>',
        "</defs>",
        f'<rect class="background" width="{w}" height="{h}" fill="{sc.WHITE}"/>',
    ]
    out.extend(_shape(s) for s in scene.shapes)
    out.append("</svg>")
    return "\n".join(out) + "\n"

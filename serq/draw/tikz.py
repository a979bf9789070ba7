"""The scene as a standalone LaTeX document drawn with TikZ.

Coordinates stay the layout's pixels, mapped with ``x=0.75pt, y=-0.75pt`` (a
CSS pixel is 0.75 pt and y grows downwards), so the TikZ figure is the SVG
figure.  Labels are escaped for LaTeX; a character LaTeX's fonts cannot show
becomes ``?``.
"""

from __future__ import annotations

from . import scene as sc
from .svg import n

PT = 0.75  # points per pixel

_ESCAPES = {
    "\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
    "%": r"\%", "_": r"\_", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}",
    "·": r"\textperiodcentered{}", "…": r"\dots{}", "→": r"\textrightarrow{}", "×": r"\texttimes{}",
}


def latex_escape(text: str) -> str:
    """``text`` safe inside a TikZ node: LaTeX's special characters escaped."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append("?")
    return "".join(out)


def _pt(px: float) -> str:
    return f"{n(px * PT)}pt"


class _Colours:
    def __init__(self, scene: sc.Scene) -> None:
        self.names = {c: f"serq{i}" for i, c in enumerate(scene.colours())}

    def preamble(self) -> list[str]:
        return [rf"\definecolor{{{name}}}{{HTML}}{{{c.lstrip('#').upper()}}}" for c, name in self.names.items()]

    def __getitem__(self, colour: str) -> str:
        return self.names[colour]


def _style(cs: _Colours, stroke: str | None, fill: str | None, width: float, dash: bool = False) -> list[str]:
    opts = []
    if stroke:
        opts += [f"draw={cs[stroke]}", f"line width={_pt(width)}"]
        if dash:
            opts.append(f"dash pattern=on {_pt(5)} off {_pt(3)}")
    if fill:
        opts.append(f"fill={cs[fill]}")
    return opts


def _xy(x: float, y: float) -> str:
    return f"({n(x)},{n(y)})"


def _shape(cs: _Colours, s: sc.Shape) -> str:
    if isinstance(s, sc.Rect):
        opts = _style(cs, s.stroke, s.fill, s.width, s.dash)
        if s.radius:
            opts.append(f"rounded corners={_pt(s.radius)}")
        return rf"\path[{', '.join(opts)}] {_xy(s.x, s.y)} rectangle {_xy(s.x + s.w, s.y + s.h)};"
    if isinstance(s, sc.Poly):
        pts = " -- ".join(_xy(x, y) for x, y in s.points)
        return rf"\path[{', '.join(_style(cs, s.stroke, s.fill, s.width))}] {pts} -- cycle;"
    if isinstance(s, sc.Circle):
        opts = _style(cs, s.stroke, s.fill, s.width)
        return rf"\path[{', '.join(opts)}] {_xy(s.cx, s.cy)} circle[radius={_pt(s.r)}];"
    if isinstance(s, sc.Line):
        opts = _style(cs, s.stroke, None, s.width, s.dash)
        if s.arrow:
            opts.append(f"-{{Stealth[length={_pt(7)}, width={_pt(6)}]}}")
        opts.append("line join=round")
        pts = " -- ".join(_xy(x, y) for x, y in s.points)
        return rf"\path[{', '.join(opts)}] {pts};"
    anchor = {"start": "base west", "middle": "base", "end": "base east"}[s.anchor]
    size = s.size * PT
    font = rf"\fontsize{{{n(size)}}}{{{n(size * 1.2)}}}\selectfont\ttfamily" + (r"\bfseries" if s.bold else "")
    return (rf"\node[anchor={anchor}, inner sep=0pt, text={cs[s.fill]}, font={font}] "
            f"at {_xy(s.x, s.y)} {{{latex_escape(s.text)}}};")


def to_tikz(scene: sc.Scene) -> str:
    """A complete document: ``\\documentclass[tikz]{standalone}`` to ``\\end{document}``."""
    cs = _Colours(scene)
    out = [
        r"\documentclass[tikz,border=4pt]{standalone}",
        f"% {latex_escape(scene.title)}",
        r"\usepackage[T1]{fontenc}",
        r"\usepackage{lmodern}",
        r"\usepackage{textcomp}",
        r"\usetikzlibrary{arrows.meta}",
        *cs.preamble(),
        r"\begin{document}",
        rf"\begin{{tikzpicture}}[x={n(PT)}pt, y=-{n(PT)}pt]",
        rf"\path[use as bounding box] (0,0) rectangle {_xy(scene.width, scene.height)};",
    ]
    out.extend(_shape(cs, s) for s in scene.shapes)
    out += [r"\end{tikzpicture}", r"\end{document}"]
    return "\n".join(out) + "\n"

"""The deployment's cards: one per pool and one per stage.

A pool card is drawn in the colour of the holds (they are what take the
pool); a stage card in its stage's colour, the same as the runs on it in the
flow, so a reader matches a run to its stage by colour as well as by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from . import scene as sc
from .flow import all_holds, caching_pools, clip, expr_text
from .layout import PAD, baseline

CARD_GAP = 16.0
BADGE = "cache"


@dataclass
class Card:
    role: str  # "pool" or "stage"
    header: str
    lines: list[str]
    stroke: str
    fill: str
    badge: bool = False  # the pool keeps a prefix cache

    @property
    def width(self) -> float:
        head = sc.text_width(self.header, sc.BODY)
        if self.badge:
            head += 10.0 + badge_width()
        rest = [sc.text_width(t, sc.SMALL) for t in self.lines]
        return max([head, *rest]) + 2 * PAD + 4.0

    @property
    def height(self) -> float:
        return sc.line_height(sc.BODY) + sc.line_height(sc.SMALL) * len(self.lines) + 2 * PAD

    def draw(self, scene: sc.Scene, x: float, y: float, h: float) -> None:
        """Draw at top-left ``(x, y)`` with height ``h`` (a row's cards share one)."""
        w = self.width
        scene.add(sc.Rect(x, y, w, h, stroke=self.stroke, fill=self.fill, radius=4.0,
                          width=1.4, role=self.role))
        top = y + PAD - 1.0
        scene.add(sc.Text(x + PAD + 2.0, baseline(top, sc.BODY), self.header, bold=True,
                          fill=sc.INK, role=f"{self.role}-label"))
        if self.badge:
            bw, bh = badge_width(), sc.line_height(sc.SMALL)
            bx = x + w - PAD - bw
            scene.add(sc.Rect(bx, top + 1.0, bw, bh, stroke=None, fill=sc.HOLD_STROKE,
                              radius=bh / 2, role="cache-badge"))
            scene.add(sc.Text(bx + bw / 2, baseline(top + 1.0, sc.SMALL), BADGE, size=sc.SMALL,
                              anchor="middle", bold=True, fill=sc.WHITE, role="cache-badge-label"))
        top += sc.line_height(sc.BODY)
        for line in self.lines:
            scene.add(sc.Text(x + PAD + 2.0, baseline(top, sc.SMALL), line, size=sc.SMALL,
                              fill=sc.GREY, role=f"{self.role}-detail"))
            top += sc.line_height(sc.SMALL)


def badge_width() -> float:
    return sc.text_width(BADGE, sc.SMALL) + 12.0


def _keys(program: ir.Program, keys: tuple[ir.Expr, ...]) -> str:
    return clip("by (" + ", ".join(expr_text(program, k) for k in keys) + ")", 30)


def _array(name: str, size: int | None) -> str:
    return name if size is None else f"{name}[{size}]"


def pool_cards(program: ir.Program) -> list[Card]:
    caching: set[int] = set()
    for hold in all_holds(program):
        caching.update(caching_pools(program, hold))
    cards = []
    for i, pool in enumerate(program.pools):
        first = f"cap {sc.num(pool.cap)}"
        if pool.block is not None:
            first += f" · block {sc.num(pool.block)}"
        lines = [first]
        policy = []
        if pool.evict != "lru":
            policy.append("evict " + _keys(program, pool.evict))  # type: ignore[arg-type]
        elif i in caching:
            policy.append("evict lru")
        if pool.preempt == "lifo":
            policy.append("preempt lifo")
        if policy:
            lines.append(" · ".join(policy))
        if pool.queue != "fifo":
            lines.append("queue " + _keys(program, pool.queue))  # type: ignore[arg-type]
        if pool.admit_via is not None:
            lines.append(f"admit via {program.stages[pool.admit_via].name}")
        sp = pool.spill
        if sp is not None:  # the tier below it and the link the pieces take (docs/offload.md)
            lines.append(f"spill → {program.pools[sp.tier].name} via {program.stages[sp.link].name}")
            lines.append(clip(f"when ({expr_text(program, sp.pred)}) · work ({expr_text(program, sp.work)})", 34))
        above = [q.name for q in program.pools if q.spill is not None and q.spill.tier == i]
        if above:
            lines.append("tier under " + ", ".join(above))
        cards.append(Card("pool", "pool " + _array(pool.name, pool.size), lines,
                          sc.HOLD_STROKE, sc.HOLD_FILL, badge=i in caching))
    return cards


def _kind(program: ir.Program, stage: ir.StageDecl) -> str:
    if stage.kind == "fifo":
        return "fifo" if stage.servers == 1 else f"fifo({stage.servers})"
    if stage.kind == "ps":
        phi = expr_text(program, stage.phi) if stage.phi is not None else "1"
        return f"ps({clip(phi, 16)})"
    return stage.kind


def stage_cards(program: ir.Program) -> list[Card]:
    cards = []
    for i, stage in enumerate(program.stages):
        lines: list[str] = []
        step = stage.step
        if step is not None:
            first = []
            budget = expr_text(program, step.budget)
            if budget != "inf":
                first.append("budget " + clip(budget, 16))
            chunk = expr_text(program, step.chunk)
            if chunk != "0":  # 0: no cap (language §4)
                first.append("chunk " + clip(chunk, 16))
            if first:
                lines.append(" · ".join(first))
            if step.memory is not None:
                lines.append(f"memory {program.pools[step.memory].name}")
            if isinstance(step.serve, tuple):
                lines.append("serve " + _keys(program, step.serve))
            elif step.serve != "admission":
                lines.append("serve " + step.serve.replace("_", " "))
            if step.only is not None:
                lines.append("serve only (" + clip(expr_text(program, step.only), 36) + ")")
        elif stage.kind == "delay":
            lines.append("infinite servers, no queue")
        elif stage.kind == "fifo":
            lines.append("first come, first served")
        elif i in program.shared:
            lines.append(f"shared by flows · {program.share}")
        else:
            lines.append("processor sharing")
        spilling = [q.name for q in program.pools if q.spill is not None and q.spill.link == i]
        if spilling:
            lines.append("spill link of " + ", ".join(spilling))
        stroke, fill = sc.stage_colour(i)
        cards.append(Card("stage", f"stage {_array(stage.name, stage.size)} : {_kind(program, stage)}",
                          lines, stroke, fill))
    return cards

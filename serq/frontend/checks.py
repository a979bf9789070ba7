"""The lints of language §7.6: errors for what is almost certainly a bug.

Both run over the ``init``, ``turn`` and ``session`` blocks of the linked
program: a branch guard that folds to a constant other than 0 or 1, and a
hold header that reads an attribute ``set`` from live pool or stage state
before the hold (the ``set`` is evaluated when the session reaches it, the
header at admission).
"""

from __future__ import annotations

from .. import ir
from ..errors import Span
from ..expr import walk
from .diag import at, error
from .pretty import number

Live = dict[int, tuple[str, Span | None]]  # attribute slot → (the state its `set` read, where)


class Lints:
    def __init__(self, program: ir.Program, spans: dict[int, Span]) -> None:
        self.p = program
        self.spans = spans

    def run(self) -> None:
        for prefix, block in (("init", self.p.init), ("turn", self.p.turn or ()), ("session", self.p.session)):
            self.block(block, {}, prefix)

    def probe_text(self, e: ir.Probe) -> str:
        t = e.target
        name = self.p.pools[t.pool].name if isinstance(t, ir.PoolRef) else self.p.stages[t.stage].name
        return f"{e.fn}({name}{'[…]' if t.index is not None else ''})"

    def block(self, block: ir.Block, live: Live, prefix: str) -> None:
        live = dict(live)
        for s in block:
            if isinstance(s, ir.ServerBegin):
                prefix = "server"
            elif isinstance(s, ir.ServerEnd):
                prefix = "session"
            elif isinstance(s, ir.Set):
                probes = [x for x in walk(s.expr) if isinstance(x, ir.Probe)]
                if probes:
                    live[s.slot] = (self.probe_text(probes[0]), self.spans.get(id(s)))
                else:
                    live.pop(s.slot, None)
            elif isinstance(s, ir.Choose):
                live.pop(s.slot, None)
            elif isinstance(s, ir.Branch):
                self.guard(s, prefix)
                self.block(s.then, live, prefix)
                if s.orelse is not None:
                    self.block(s.orelse, live, prefix)
            elif isinstance(s, ir.Loop):
                self.block(s.body, live, prefix)
            elif isinstance(s, ir.Hold):
                self.header(s, live, prefix)
                self.block(s.body, live, prefix)

    def guard(self, s: ir.Branch, prefix: str) -> None:
        g = s.guard
        if not isinstance(g, ir.Num) or g.value in (0.0, 1.0):
            return
        span = self.spans.get(id(s))
        if 0 < g.value < 1:
            raise error(f"{s.label}: the guard is the constant {number(g.value)}, which is not a test: "
                        "a constant strictly between 0 and 1 is a probability", span, prefix=prefix,
                        helps=[f"write `branch with ({number(g.value)})` to draw it"])
        raise error(f"{s.label}: a guard is 0 or 1, and this one is always {number(g.value)}", span,
                    prefix=prefix, helps=["a branch tests a condition such as `x > 0`"])

    def header(self, h: ir.Hold, live: Live, prefix: str) -> None:
        if not live:
            return
        first = self.p.pools[h.pools[0].ref.pool].name
        parts = [(self.p.pools[hp.ref.pool].name, e) for hp in h.pools for e in (hp.units, hp.reserve)]
        parts += [(first, h.reuse), (first, h.cache)]
        parts += [(first, e) for g in h.prefix for e in (g.key, g.length)]
        for pool, e in parts:
            if e is None:
                continue
            for x in walk(e):
                if isinstance(x, ir.Attr) and x.slot in live:
                    state, where = live[x.slot]
                    notes = [f"`{x.name}` is set at {at(where)}"] if where is not None else []
                    raise error(f"`{x.name}` is set from `{state}` when the session reaches the `set`, but the "
                                f"header of the hold on `{pool}` reads it at admission, when that state may "
                                "have changed", self.spans.get(id(h)), prefix=prefix, notes=notes,
                                helps=[f"bind it in the hold instead: `at admission ({x.name} = …)`"])


def lint(program: ir.Program, spans: dict[int, Span]) -> None:
    Lints(program, spans).run()

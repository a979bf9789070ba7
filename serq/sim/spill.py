"""A pool's ``spill TIER via LINK (work) when (pred)``: evicted pieces move
down a tier (docs/offload.md).

The pool's cache tells its :class:`Spiller` of every piece of a live entry
it evicts, one at a time, as eviction takes them (a block from the tail, or
the whole entry for a pool without ``block``).  ``pred`` and then ``work``
are read at that moment (Evict: the piece's ``size``, the entry's ``age``,
``last`` and ``waiting``, its owner's attributes; draws from the eviction
stream).  When ``pred`` is not 0 the tier makes room for the piece by its own
eviction (which may spill further down), the piece joins its owner's entry
there, released now, the pool counts a spill, and a job of ``work`` with no
session starts on the link.  A piece the tier cannot hold even with
nothing cached there is lost like any evicted piece: no spill, no job.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

from ..errors import SerqRuntimeError, Site
from .cache import EPS, Entry, EvictView
from .stages.base import check_work

if TYPE_CHECKING:
    from .pool import Pool
    from .simulator import Simulator
    from .stages.base import Stage


class NoSession:
    """The owner of a spill's link job: nobody waits for it and nothing
    preempts it; the stage notes the job here as it would on a session."""

    __slots__ = ("job",)

    def __init__(self) -> None:
        self.job: Any = None


class Spiller:
    """The spill of one pool member, to its tier member over its link member.
    ``pred`` is None when it is a constant other than 0, ``work`` a number when
    it is a constant: neither is then read per piece (a constant draws nothing)."""

    __slots__ = ("sim", "source", "tier", "link", "work", "pred", "owner", "label", "dirty", "work_site",
                 "pred_site")

    def __init__(self, sim: "Simulator", source: "Pool", tier: "Pool", link: "Stage",
                 work: Callable[[EvictView], float] | float, pred: Callable[[EvictView], float] | None) -> None:
        self.sim = sim
        self.source = source
        self.tier = tier
        self.link = link
        self.work = work
        self.pred = pred
        self.owner = NoSession()
        self.label = f"pool `{source.label}`: `spill {tier.label} via {link.label} (…)`"
        self.dirty = False  # the tier changed since its last record
        # the labels of run-time errors about the two expressions: this member's, where the program writes them
        self.work_site = Site(f"{self.label} (its work)")
        self.pred_site = Site(f"{self.label}: `when (…)`")

    def locate(self, spill: Any) -> None:
        """Run-time errors about the work and the predicate say where ``spill`` (the
        ``ir.Spill``) writes them and the constants they read."""
        for name, site in (("work_site", spill.work_site), ("pred_site", spill.pred_site)):
            if isinstance(site, Site):
                mine = getattr(self, name)
                setattr(self, name, Site(str(mine), site.span, site.reads))

    def __call__(self, serial: int, e: Entry, piece: float, now: float) -> None:
        """``piece`` units of ``e`` (the entry of ``serial``) were just evicted, at ``now``."""
        sim = self.sim
        if now != sim.env.now:  # a replayed growth evicted: the planner should have ended the run before
            raise SerqRuntimeError(f"{self.label}: an eviction at {now:g} was replayed at {sim.env.now:g} "
                                   "(an internal error: please report it)")
        pred, work = self.pred, self.work
        view = None
        if pred is not None:
            view = EvictView(e, now, sim.eviction_stream)
            view.size = piece
            ok = pred(view)
            if math.isnan(ok):
                raise SerqRuntimeError(f"{self.pred_site} is NaN, neither true nor false", at=self.pred_site)
            if ok == 0.0:
                return
        if not isinstance(work, float):
            if view is None:
                view = EvictView(e, now, sim.eviction_stream)
                view.size = piece
            work = work(view)
            if not 0.0 <= work < math.inf:
                check_work(self.work_site, work)
        tier = self.tier
        tier.make_room(piece, now)
        if tier.used + tier.cache.total + piece > tier.cap + EPS:
            return  # more than the tier can hold beside what it has in use: lost
        holds = sim.holds
        tier.cache.append(serial, piece, now, holds.next_release, e)
        holds.next_release += 1
        self.dirty = True
        self.source.spills += 1
        if work > 0.0:
            self.link.submit(self.owner, work, None, None, self.label)  # type: ignore[arg-type]

    def flush(self, now: float) -> None:
        """The eviction that spilled is over: the tier's signals are recorded
        once (every piece spilled at this one instant)."""
        if self.dirty:
            self.dirty = False
            self.tier.record(now)

"""One coalesced decode run of the step engine: what was planned, and its replay.

When an iteration is a pure-decode batch, the planner
(:class:`~serq.sim.stages.coalesce.RunPlanner`) works out how many like it
follow back to back and leaves them as a :class:`DecodeRun`; the engine keeps
it as ``engine.run`` (None while it runs iteration by iteration) and
schedules one event at the run's end, where :meth:`DecodeRun.replay` commits
iterations 1 … m−1 — the tokens, the growths, the statistics — with the same
floating-point operations in the same order as one by one, and the engine's
``_iter_end`` commits the m-th as usual (docs/simulator.md, "Coalesced decode
runs").  What repeats is folded in C (``accumulate``, ``reduce``,
:func:`serq.sim.stats.fold`), in the same order.
"""

from __future__ import annotations

import math
import sys
from bisect import bisect_left
from functools import reduce
from itertools import accumulate, islice, repeat
from math import fmod, frexp, ldexp, ulp
from operator import add, sub
from typing import TYPE_CHECKING, Any

from ..stats import _SHORT, fold, fold_same

if TYPE_CHECKING:
    from .base import Job
    from .step import StepEngine

_NORMAL = sys.float_info.min  # the smallest positive normal float
#: A run of this many segments or more has its statistics counted in arrays (vector.account).
_ARRAY_SEGS = 96
_VECTOR = "serq.sim.stages.vector"
#: Below this a float's ulp is at most 1/2: whole steps from it are exact inside a binade.
_TWO52 = 2.0**52
#: A finite float of at least 1 below this has at most 53 bits: whole tokens off it are exact.
_TWO53 = 2.0**53

#: A growth event of a planned run: the index of the iteration's start among
#: the ends, the growths (job index, units) it makes, the budget left to read
#: the waiting head's header with again (None when nothing it reads moved),
#: and the time it starts.
RunEvent = tuple[int, list[tuple[int, float]], "float | None", float]


class DecodeRun:
    """A planned run of ``length`` decode iterations of one batch, the first
    starting at ``start`` and costing ``cost``, the last ending at ``end``.

    Its plan: ``first``, the end of iteration 1; ``segs``, iterations 2 … m
    as runs ``[cost, how many in a row, the end before the first, the end of
    the last]`` (each end the previous plus the cost); ``events``, the
    iterations that grow a hold (:data:`RunEvent`); ``final``, the tokens of
    the last iteration when it finishes a job with a fraction of one (None
    when every job takes one token).  What the waiting requests allow:
    ``head``, the waiting request (or :class:`~.waiting.HeadSet`) whose
    header the admission attempts of the run evaluate again after a growth
    that changed what it reads, and ``blocking``, the pool of that head that
    does not fit; ``budget``, the budget of every iteration."""

    __slots__ = ("start", "cost", "budget", "length", "end", "first", "_segs", "_events", "cols", "final", "head",
                 "blocking", "grown", "watch", "grows", "passing", "ends", "entry")

    def __init__(self, start: float, cost: float, budget: float, head: Any, blocking: int) -> None:
        self.start = start
        self.cost = cost
        self.budget = budget
        self.head = head
        self.blocking = blocking
        self.first = start + cost
        self.length = 1
        self.end = self.first
        self._segs: list[list] = []
        self._events: list[RunEvent] = []
        #: a run planned in arrays keeps its plan as arrays (:class:`.vector.Cols`) until
        #: something reads ``segs`` or ``events`` as lists (then they are made, and this is None)
        self.cols: Any = None
        self.final: list[float] | None = None
        #: the growth events already replayed (a run that passes over other events
        #: replays its growths when something reads its pools, :mod:`serq.sim.lazy`)
        self.grown = 0
        #: the ids of the pools whose state the plan read (planned growths, the head's
        #: header, ``budget``/``chunk``/``cost``), set by the planner
        self.watch: frozenset[int] = frozenset()
        self.grows: frozenset[int] = frozenset()  # (the pools its jobs grow, for a passing run)
        #: whether it passes over other events (:mod:`serq.sim.lazy`); then ``ends``, the
        #: ends of its iterations once some use needed them all (:meth:`all_ends`), and
        #: ``entry``, the heap entry of its timer
        self.passing = False
        self.ends: list[float] | None = None
        self.entry: Any = None

    @property
    def segs(self) -> list[list]:
        """Iterations 2 … m as runs ``[cost, count, end before, end of the last]``."""
        if self.cols is not None:
            self._lists()
        return self._segs

    @property
    def events(self) -> list[RunEvent]:
        """The growth events of iterations 2 … m (:data:`RunEvent`)."""
        if self.cols is not None:
            self._lists()
        return self._events

    def _lists(self) -> None:
        """The plan kept in arrays, made into the lists the walk writes."""
        cols = self.cols
        self.cols = None
        self._segs, self._events = cols.segs(), cols.events()

    def add_last(self, cost: float, t: float, t2: float, event: RunEvent | None) -> None:
        """Iteration m + 1 (costing ``cost`` from the end ``t`` to ``t2``, with its
        growth event if any) joins the plan; the caller sets ``length`` and ``end``."""
        cols = self.cols
        if cols is not None:
            if event is None or cols.add_event(event):
                cols.add_iteration(cost, t, t2)
                return
            self._lists()
        if event is not None:
            self._events.append(event)
        add_iters(self._segs, cost, 1, t, t2)

    def n_events(self) -> int:
        """How many growth events the plan has."""
        cols = self.cols
        return cols.n_events() if cols is not None else len(self._events)

    def event_start(self, e: int) -> float:
        """The start of growth event ``e``'s iteration."""
        cols = self.cols
        return cols.event_start(e) if cols is not None else self._events[e][3]

    # -- the replay -------------------------------------------------------------------------

    def replay(self, engine: "StepEngine", assign: list[tuple["Job", float]]) -> None:
        """Iterations 1 … m−1, exactly as one by one: commit each at its end
        (a token per job, as ``StepEngine._iter_end`` does),
        then plan the next at that time (its growths, a token of position per
        job) and account for it (as ``_account``).  With a fractional last
        iteration, ``assign`` becomes its tokens for ``_iter_end``."""
        k = self.length - 1  # commits replayed here; the m-th is `_iter_end`'s
        self._commit(engine, assign, k)
        self._grow(engine, assign)
        self._account(engine, len(assign), k)
        final = self.final
        if final is not None:  # `_iter_end` commits the last iteration with its own tokens
            assign[:] = [(job, x) for (job, _t), x in zip(assign, final)]

    def _commit(self, engine: "StepEngine", assign: list[tuple["Job", float]], k: int) -> None:
        """The tokens of iterations 1 … k: each job's work and position, its
        session's token times and the gap to the first iteration's end."""
        first = self.first
        cols = self.cols
        if cols is not None:
            before_last = cols.end_of(k)  # the end of iteration k
        else:
            c, n, t0, _t_last = self._segs[-1]
            before_last = t0 if n == 1 else fold_same(c, n - 1, t0)  # the end of iteration k
        itl = engine.itl if engine.sim.stats_on else None
        final = self.final
        x0 = 0.0
        same = 0  # gaps to the first end not recorded yet: `same` of them, each `x0` (as `_iter_end`)
        for i, (job, tokens) in enumerate(assign):
            w = job.work  # `minus(w, tokens, k)`, its one-subtraction case inline
            job.work = w - k if tokens == 1.0 and w >= k and w < _TWO53 else minus(w, tokens, k)
            s = job.session
            if s.first_tok is None:
                s.first_tok = first
                s.n_after += k - 1
            else:
                if itl is not None:  # (the jobs that had a token at the last iteration's end share one)
                    x = first - s.last_tok
                    if x == x0:
                        same += 1
                    else:
                        if same:
                            itl.add_repeat(x0, same)
                        x0, same = x, 1
                s.n_after += k
            s.last_tok = before_last
            req = job.hold
            if req is not None:
                pos = req.pos
                kk = job.k
                p = pos[kk]
                d = k if final is None else k - 1
                q = p + d  # `plus_ones(p, d)` when p and q share a binade below 2^52 (p ≥ 0)
                if not (0.0 <= p < _TWO52 and ulp(q) == ulp(p)):
                    q = plus_ones(p, d)
                pos[kk] = q if final is None else q + final[i]  # (the last iteration's tokens may be a fraction)
        if same:
            itl.add_repeat(x0, same)  # type: ignore[union-attr]

    def _grow(self, engine: "StepEngine", assign: list[tuple["Job", float]], upto: int | None = None) -> None:
        """The growths of iterations 2 … m at their starts, in turn (those not
        replayed yet, up to the event ``upto``).  Growths
        in one pool go to ``Pool.allocate_run`` together, up to an admission
        attempt that reads them or a growth in another pool; an attempt whose
        header reads what a growth changed is evaluated again there."""
        cols = self.cols
        if cols is not None and cols.left is None:  # kept in arrays, no admission attempt to evaluate again
            lo = self.grown
            hi = cols.n_events() if upto is None else upto
            if lo < hi:
                self.grown = hi
                cols.grow(assign, lo, hi)
            return
        events = self.events
        lo = self.grown
        hi = len(events) if upto is None else upto
        if lo >= hi:
            return
        self.grown = hi
        if lo or hi < len(events):
            events = events[lo:hi]
        head = self.head
        if len(assign) == 1 and head is None:  # one job: its hold and pool looked up once
            req = assign[0][0].hold
            if req is not None:
                _grow_one(req, assign[0][0].k, events)
            return
        pending: Any = None
        needs: list[float] = []
        times: list[float] = []
        for _j, growths, again, start in events:
            for i, need in growths:
                job = assign[i][0]
                req = job.hold
                kk = job.k
                pool = req.pools[kk]  # type: ignore[union-attr]
                if pool is not pending:
                    if needs:
                        pending.allocate_run(needs, times)
                        needs = []
                        times = []
                    pending = pool
                needs.append(need)
                times.append(start)
                req.alloc[kk] = req.alloc[kk] + need  # type: ignore[union-attr]
            if again is not None:  # the admission attempt of that iteration reads what changed
                if needs:
                    pending.allocate_run(needs, times)
                    needs = []
                    times = []
                engine.admitting_left = again  # (its budget_left)
                try:
                    head.spec.amounts(head.session)
                finally:
                    engine.admitting_left = None
        if needs:
            pending.allocate_run(needs, times)

    def grow_until(self, engine: "StepEngine", t: float) -> None:
        """Replay the growths of the iterations that start before ``t``."""
        cols = self.cols
        if cols is not None and cols.left is None:
            self._grow(engine, engine.assign, cols.events_before(self.grown, t))
            return
        events = self.events
        hi = self.grown
        n = len(events)
        while hi < n and events[hi][3] < t:
            hi += 1
        self._grow(engine, engine.assign, hi)

    def end_list(self) -> list[float]:
        """The end of every iteration, in order (the last is ``end``)."""
        cols = self.cols
        if cols is not None:
            return cols.ends.tolist()
        ends = [self.first]
        for c, n, t0, _t1 in self._segs:
            ends.extend(islice(accumulate(repeat(c, n), add, initial=t0), 1, None))
        return ends

    def all_ends(self) -> list[float]:
        """:meth:`end_list`, made once and kept (:meth:`cut` cuts it too)."""
        ends = self.ends
        if ends is None:
            ends = self.ends = self.end_list()
        return ends

    def end_index(self, t: float) -> int:
        """The index of the iteration end equal to ``t`` in :meth:`end_list`'s
        order, or −1 when no iteration ends at ``t``; worked out from the
        segments without making the list (:func:`_step_index`)."""
        ends = self.ends
        if ends is None and self.cols is not None:
            ends = self.all_ends()
        if ends is not None:
            j = bisect_left(ends, t)
            return j if j < len(ends) and ends[j] == t else -1
        if t == self.first:
            return 0
        if not t > self.first:
            return -1
        j = 0  # the index of the end before the segment (its t0)
        for c, n, t0, t1 in self.segs:
            if t <= t1:
                k = _step_index(c, n, t0, t1, t)
                return j + k if k > 0 else -1
            j += n
        return -1

    def cut(self, length: int, ends: list[float]) -> None:
        """Keep the first ``length`` iterations (``ends``, :meth:`end_list`, is
        cut too): the later ones will not be run as planned."""
        if length >= self.length:
            return
        cols = self.cols
        if cols is not None:
            cols.cut(length)
            self.grown = min(self.grown, cols.n_events())
            self.final = None
            self.length = length
            del ends[length:]
            self.end = ends[-1]
            return
        keep = length - 1  # iterations 2 … length, in the segments
        segs = self.segs
        acc = 0
        for i, seg in enumerate(segs):
            if acc + seg[1] >= keep:
                c = keep - acc
                if c > 0:
                    seg[1] = c
                    seg[3] = ends[length - 1]
                    del segs[i + 1:]
                else:
                    del segs[i:]
                break
            acc += seg[1]
        events = self.events
        while events and events[-1][0] > length - 2:  # (event j: iteration j + 2)
            events.pop()
        if self.grown > len(events):
            self.grown = len(events)
        self.final = None
        self.length = length
        del ends[length:]
        self.end = ends[-1]

    def _account(self, engine: "StepEngine", jobs: int, k: int) -> None:
        """The statistics of iterations 2 … m, as ``_account`` and ``gap`` of
        the engine count them one by one: every job's inter-token gaps (from
        the second commit on), the decode-only time and its decoders, the
        iterations, their decoders and costs."""
        cols = self.cols
        if cols is not None:  # planned in arrays: its sums in arrays too
            cols.account(self, engine, jobs, k)
            return
        segs = self._segs
        vector = sys.modules.get(_VECTOR)
        if vector is not None and len(segs) >= _ARRAY_SEGS:  # a long run of many costs: its sums in arrays
            vector.account(self, engine, jobs, k)  # (once the planner has imported numpy), the same floats
            return
        sim = engine.sim
        stats = sim.stats_on
        if not (stats and k > 1 and self.first >= sim.warmup and self._sums_in_one(engine, segs, jobs)):
            self._sums_by_passes(engine, segs, jobs, k)
        if stats:
            engine.dec_iters += k
            nf = float(jobs)
            d = engine.dec_sum  # whole numbers: one addition is exact below 2**53
            engine.dec_sum = d + k * nf if d.is_integer() and d + k * nf < 2.0 ** 52 else reduce(add, repeat(nf, k), d)
        engine.iterations += k
        sim.events += k

    def _sums_by_passes(self, engine: "StepEngine", segs: list[list], jobs: int, k: int) -> None:
        """The sums :meth:`_account` adds (the gaps, the spans, the costs), a
        pass over the lengths for each."""
        sim = engine.sim
        stats = sim.stats_on
        # the iterations' lengths, k of them, as [length, how many in a row]
        lengths = _length_runs(segs)
        lo: float | None = None  # the smallest of the first k − 1, when taken
        if stats and k > 1:
            last = lengths[-1]
            gaps = lengths[:-1]
            if last[1] > 1:
                gaps.append([last[0], last[1] - 1])
            lo = min([x for x, _c in gaps])
            engine.itl.add_runs(gaps, jobs, lo)
        spans = self._spans(sim, lengths, lo, k)
        nf = float(jobs)
        if spans:
            if nf == 1.0:  # (x * 1.0 is x for every float: one decoder adds the spans themselves)
                engine.t_decode_only, engine.t_decoders = _fold_runs2(spans, engine.t_decode_only,
                                                                      engine.t_decoders)
            else:
                engine.t_decode_only = _fold_runs(spans, engine.t_decode_only)
                engine.t_decoders = _fold_runs([[nf * x, c] for x, c in spans], engine.t_decoders)
        if stats:
            engine.dec_cost = _fold_runs(segs, engine.dec_cost)

    def _sums_in_one(self, engine: "StepEngine", segs: list[list], jobs: int) -> bool:
        """:meth:`_sums_by_passes` for the usual run (statistics on, after the
        warm-up, more than one iteration replayed, every end in one binade) in
        one pass over ``segs``: each segment's length (:func:`_length_runs`),
        its gaps, spans and cost folded into their sums — each sum takes the
        same additions in the same order.  False, with nothing changed, when
        some segment's iterations do not all have one length."""
        t_first = segs[0][2]
        if not (t_first >= _NORMAL and frexp(t_first)[1] == frexp(segs[-1][3])[1]):
            return False
        u = ulp(t_first)
        itl = engine.itl
        nf = float(jobs)
        total = itl.total  # the gaps' sum: each job's gap at every commit but the last
        t_only, t_dec, dec_cost = engine.t_decode_only, engine.t_decoders, engine.dec_cost
        gaps: list[list] = []
        lo = hi = 0.0
        m = 0
        last = len(segs) - 1
        for j, (c, n, t0, _t1) in enumerate(segs):
            if n > 1 and fmod(c, u) * 2.0 == u:
                return False  # (before anything is written)
            x = (t0 + c) - t0
            g = n if j < last else n - 1
            if g:
                gn = g * jobs
                total = fold(repeat(x, gn), total) if gn < _SHORT else fold_same(x, gn, total)
                if m == 0:
                    lo = hi = x
                elif x < lo:
                    lo = x
                elif x > hi:
                    hi = x
                m += g
                gaps.append([x, g])
            if x > 0.0:  # a span (the run starts after the warm-up: its lengths)
                if n < _SHORT:
                    t_only = fold(repeat(x, n), t_only)
                    t_dec = fold(repeat(nf * x, n), t_dec)
                else:
                    t_only = fold_same(x, n, t_only)
                    t_dec = fold_same(nf * x, n, t_dec)
            dec_cost = fold(repeat(c, n), dec_cost) if n < _SHORT else fold_same(c, n, dec_cost)
        itl.add_summed(gaps, jobs, lo, hi, m, total)
        engine.t_decode_only, engine.t_decoders, engine.dec_cost = t_only, t_dec, dec_cost
        return True

    def _spans(self, sim: Any, lengths: list[list], lo: float | None, k: int) -> list[list]:
        """The spans the step statistics add for iterations 2 … m, as runs
        ``[span, count]``: span = min(end, horizon) − max(start, warm-up),
        added when positive; a run ends by the horizon, and one that starts
        after the warm-up spans its lengths."""
        first = self.first
        segs = self.segs
        if first >= sim.warmup:
            spans = lengths  # as runs
            smin = min(lo, lengths[-1][0]) if lo is not None else min([x for x, _c in spans])
        elif segs[-1][3] <= sim.warmup:  # every span ≤ end − warm-up ≤ 0: none is added
            return []
        else:
            ends = self.end_list()  # ends[j]: the end of iteration j + 1
            spans = [[x, 1] for x in map(sub, map(min, ends[1:], repeat(sim.horizon)),
                                         map(max, ends[:k], repeat(sim.warmup)))]
            smin = min([x for x, _c in spans]) if spans else 0.0
        if spans and not smin > 0.0:
            spans = [r for r in spans if r[0] > 0.0]
        return spans


def _grow_one(req: Any, kk: int, events: list[RunEvent]) -> None:
    """The growths of a run of one job and no waiting head (no admission
    attempt is evaluated): its hold and pool looked up once, the pool's side
    in one ``allocate_run``."""
    ra = req.alloc
    a = ra[kk]
    needs: list[float] = []
    times: list[float] = []
    for _j, growths, _again, start in events:
        if growths:
            need = growths[0][1]
            needs.append(need)
            times.append(start)
            a = a + need
    ra[kk] = a
    req.pools[kk].allocate_run(needs, times)


def add_iters(segs: list[list], cur: float, n: int, t: float, t_end: float) -> None:
    """``n`` more iterations of cost ``cur`` after the end ``t``, the last
    ending at ``t_end`` (``t`` plus ``cur``, ``n`` times in turn)."""
    if segs and segs[-1][0] == cur:  # (costs are > 0: equal is the same float; segs[-1][3] is t)
        seg = segs[-1]
        seg[1] += n
        seg[3] = t_end
    else:
        segs.append([cur, n, t, t_end])


# -- sums of a run, folded in the order one by one makes them ---------------------------------

def minus(w: float, tokens: float, k: int) -> float:
    """``w`` less ``tokens`` ``k`` times in turn (one subtraction when every
    step is exact: whole tokens off a float of at most 53 bits that stays ≥ 0)."""
    if tokens == 1.0 and w >= k and w < _TWO53:  # (a finite w ≥ 1 below 2**53 is
        return w - k  # at most 53 bits: its numerator as_integer_ratio() is below 2**53)
    return reduce(sub, repeat(tokens, k), w)


def plus_ones(p: float, k: int) -> float:
    """``p + 1.0`` ``k`` times in turn, in one addition a binade.  With ``0 ≤ q
    < 2^52`` in the binade ``[2^(e-1), 2^e)``, ``q`` and ``1.0`` are multiples
    of ``ulp(q)``, so every ``q + j`` below ``2^e`` is a float and the steps to
    it are exact; the step that leaves the binade may round (to the doubled
    ulp) and is taken alone.  A position crosses a few binades, not one a token."""
    q = p + k
    # (q rounds past the binade's top 2^e iff p + k is past it; 2^e is 1.0 for p = 0, as frexp gives e = 0)
    if (q < ldexp(1.0, frexp(p)[1]) and p < _TWO52) or exact_steps(p, k):
        return q
    q = p
    while k > 0:
        if not (q >= 0.0 and q < _TWO52):
            return reduce(add, repeat(1.0, k), q)
        inside = exact_below(q) - 1  # steps that stay below the binade's top
        if k <= inside:
            return q + k
        q = (q + inside) + 1.0  # the last exact step, then the one that leaves the binade
        k -= inside + 1
    return q


def exact_below(p: float) -> int:
    """The steps ``d`` for which ``p + d`` is :func:`plus_ones` ``(p, d)``
    whatever ``d`` below this (those that stay in ``p``'s binade)."""
    if not (p >= 0.0 and p < _TWO52):
        return 0
    return math.ceil(ldexp(1.0, frexp(p)[1]) - p)  # (the binade's top minus p is exact)


def exact_steps(p: float, cap: int) -> bool:
    """Whether ``p + 1.0`` repeated up to ``cap + 2`` times is exact (every
    ``p + d`` a float), so the position at any iteration is one addition."""
    if not (p >= 0.0 and p < 2.0 ** 51):
        return False
    num, den = p.as_integer_ratio()
    return num + (cap + 2) * den < 1 << 53


def _fold_runs(runs: list[list], acc: float) -> float:
    """``acc`` plus each ``x`` of the runs ``[x, count]``, ``count`` times in turn."""
    for r in runs:  # ([x, count, …]: the plan's runs of costs too)
        x = r[0]
        c = r[1]
        acc = fold(repeat(x, c), acc) if c < _SHORT else fold_same(x, c, acc)
    return acc


def _fold_runs2(runs: list[list], a: float, b: float) -> tuple[float, float]:
    """``_fold_runs`` of the same runs into two sums, in one loop."""
    for r in runs:
        x = r[0]
        c = r[1]
        if c < _SHORT:
            a = fold(repeat(x, c), a)
            b = fold(repeat(x, c), b)
        else:
            a = fold_same(x, c, a)
            b = fold_same(x, c, b)
    return a, b


def _one_step(c: float, t0: float, t1: float) -> bool:
    """Whether every iteration of a segment (cost ``c``, from the end ``t0`` to
    ``t1``) has the one length ``(t0 + c) − t0``: ``t0`` and ``t1`` lie in one
    binade ``[2^p, 2^(p+1))`` and ``c`` is not halfway between two multiples
    of its ulp ``u`` (each end is then ``fl(e + c)`` with ``e`` a multiple of
    ``u``, ``e`` plus the multiple of ``u`` nearest ``c``; see
    :func:`serq.sim.stats.fold_same`)."""
    if not (t0 >= _NORMAL and frexp(t0)[1] == frexp(t1)[1]):
        return False
    u = ulp(t0)
    return fmod(c, u) * 2.0 != u


def _step_index(c: float, n: int, t0: float, t1: float, t: float) -> int:
    """The ``k`` in 1 … n for which ``t`` is the ``k``-th end of a segment of
    ``n`` iterations of cost ``c`` after the end ``t0`` (its last ``t1``),
    or 0; ``t0 < t ≤ t1``.  Where every iteration has one length ``s``
    (:func:`_one_step`), the ``k``-th end is exactly ``t0 + k·s``
    and ``t − t0`` is exact: ``t`` is an end when that difference is a whole
    multiple of ``s``.  Else the ends are added up one by one."""
    if _one_step(c, t0, t1):
        s = (t0 + c) - t0
        if s > 0.0:
            d = t - t0
            if fmod(d, s) != 0.0:
                return 0
            q = d / s
            return int(q) if 1.0 <= q <= n else 0
    ends = list(accumulate(repeat(c, n), add, initial=t0))
    k = bisect_left(ends, t)
    return k if 0 < k <= n and ends[k] == t else 0


def _length_runs(segs: list[list]) -> list[list]:
    """The lengths (end minus the end before) of a planned run's iterations
    2 … m as runs ``[length, count]``, in order.  The iterations of one run of
    ``segs`` (cost ``c``, from the end ``t0`` to ``t1``) have one length when
    ``t0`` and ``t1`` lie in one binade ``[2^p, 2^(p+1))`` and ``c`` is not
    halfway between two multiples of its ulp ``u``: each end is ``fl(e + c)``
    with ``e`` a multiple of ``u``, which is ``e`` plus the multiple of ``u``
    nearest ``c`` (the same for every ``e``), and the difference of two floats
    of one binade is exact (:func:`serq.sim.stats.fold_same`).  Else the ends
    are added again one by one and each length is computed."""
    out: list[list] = []
    if not segs:
        return out
    t_first = segs[0][2]
    # every segment in one binade (the usual run): `_one_step` is the ulp test alone
    u = ulp(t_first) if t_first >= _NORMAL and frexp(t_first)[1] == frexp(segs[-1][3])[1] else None
    for c, n, t0, t1 in segs:
        if n > 1 and (fmod(c, u) * 2.0 == u if u is not None else not _one_step(c, t0, t1)):
            ends = list(accumulate(repeat(c, n), add, initial=t0))
            out.extend([x, 1] for x in map(sub, islice(ends, 1, None), ends))
            continue
        out.append([(t0 + c) - t0, n])
    return out

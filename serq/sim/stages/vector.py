"""Long coalesced decode runs, planned and replayed in arrays (docs/simulator.md,
"Long runs, planned in arrays").

In a decode run every iteration costs the same until a hold needs another
block, and then the cost steps up with ``kv_decode``.  The planner's walk
(:meth:`RunPlanner._plan_one <.coalesce.RunPlanner._plan_one>`,
``_plan_by_growths``) takes it a growth at a time; a decode of 20 000 tokens
is 1 250 growths, each a few microseconds of Python.  :func:`plan` gives the
same run from numpy operations over all its growths and iterations at once;
:func:`account` and :func:`grow_pool` replay its statistics and its pool's
growths the same way.

Exactness is the whole point, and it rests on two facts:

* numpy's elementwise ``+ - * /``, comparisons, ``floor``, ``ceil``, ``abs``
  and a ``where``-built ``min``/``max`` are the IEEE-754 operations Python's
  floats do, rounded the same way on every processor and SIMD path;
* ``np.add.accumulate`` adds left to right, one element after the other (it
  is not ``sum``: no pairwise or vectorised reassociation), so each end is
  the previous end plus one cost, as the iterations one by one add them.

So every float is the one the scalar walk computes.  Anything else — a cost
that reads ``exp``, ``ln``, ``sqrt``, ``^``, a draw, a probe, the clock — is
not compiled (:func:`compile_cost` gives None) and the scalar walk plans it.
:func:`plan` also gives None, for the walk to take over, whenever the run
is not the periodic one it assumes (a block that is not a whole number of
tokens, a growth of other than one block, a growth test that is not exactly
periodic); tests/sim/stages/test_vector_runs.py holds it to the walk.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ... import expr, ir
from ..cache import _BIG, EPS
from ..stats import _INF_KEY, _LOG_W, _NORMAL, _ZERO_KEY, _bucket, fold_same
from .decode_run import _TWO52, _TWO53, exact_below, exact_steps, plus_ones

if TYPE_CHECKING:
    from .coalesce import RunPlanner

#: The names a decode iteration's cost reads from the view besides ``kv_decode``.
_VIEW = frozenset({"tokens", "decoders", "prefilled", "kv_prefill", "residents", "attention"})

VectorCost = Callable[[Any, "np.ndarray"], "np.ndarray"]


class _Unsupported(Exception):
    """The expression reads something whose array form may round otherwise."""


def compile_cost(e: ir.Expr) -> VectorCost | None:
    """``cost`` as a function of the engine's view and an array of
    ``kv_decode`` values, computing for each what the scalar expression
    computes; None when ``e`` reads anything outside the exact subset."""
    try:
        text = _source(e)
    except _Unsupported:
        return None
    ns = {"_np": np, "_inf": math.inf, "_nan": math.nan, "_max": _max, "_min": _min, "_div": _div}
    fn = eval(expr.code_of(f"lambda v, kv: {text}", "<serq vector cost>", "eval"), ns)  # noqa: S307 - our code

    def cost(view: Any, kv: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            out = fn(view, kv)
        if type(out) is np.ndarray and out.dtype == np.float64 and out.shape == kv.shape:
            return out  # (the usual cost: one that reads kv_decode)
        return np.broadcast_to(np.asarray(out, dtype=np.float64), kv.shape)
    return cost


def _max(a: Any, b: Any) -> Any:
    """``expr.f_max``: b when a is a NaN or b is greater, else a.  Against a
    number (a float that is not a NaN) one comparison decides: ``a >= b``
    fails for a NaN ``a``, and ``b > a`` for a NaN ``b``."""
    if isinstance(b, float) and b == b:
        return np.where(a >= b, a, b)
    if isinstance(a, float) and a == a:
        return np.where(b > a, b, a)
    return np.where((a != a) | (b > a), b, a)


def _min(a: Any, b: Any) -> Any:
    """``expr.f_min``: b when a is a NaN or b is smaller, else a (one
    comparison against a number, as :func:`_max`)."""
    if isinstance(b, float) and b == b:
        return np.where(a <= b, a, b)
    if isinstance(a, float) and a == a:
        return np.where(b < a, b, a)
    return np.where((a != a) | (b < a), b, a)


def _div(a: Any, b: Any) -> Any:
    """``expr.f_div``, which is IEEE division (no exception on a zero divisor)."""
    return np.true_divide(a, b)


def _source(e: ir.Expr) -> str:
    if isinstance(e, ir.Num):
        return expr.num_source(e.value)
    if isinstance(e, ir.Ctx):
        if e.name == "kv_decode":
            return "kv"
        if e.name in _VIEW:
            return f"v.{e.name}"
        raise _Unsupported(e.name)
    if isinstance(e, ir.Unary):
        x = _source(e.x)
        return f"(-{x})" if e.op == "-" else f"_np.where({x} == 0.0, 1.0, 0.0)"
    if isinstance(e, ir.Binary):
        a, b, op = _source(e.a), _source(e.b), e.op
        if op in ("+", "-", "*"):
            return f"({a} {op} {b})"
        if op == "/":
            return f"_div({a}, {b})"
        if op in ("<", "<=", ">", ">=", "==", "!="):
            return f"_np.where({a} {op} {b}, 1.0, 0.0)"
        if op == "&&":
            return f"_np.where(({a} != 0.0) & ({b} != 0.0), 1.0, 0.0)"
        if op == "||":
            return f"_np.where(({a} != 0.0) | ({b} != 0.0), 1.0, 0.0)"
        raise _Unsupported(op)  # ^: pow rounds by the library
    if isinstance(e, ir.Cond):
        return f"_np.where({_source(e.c)} != 0.0, {_source(e.a)}, {_source(e.b)})"
    if isinstance(e, ir.Call):
        args = [_source(x) for x in e.args]
        if e.fn in ("min", "max") and args:
            out = args[0]
            for x in args[1:]:  # the fold left to right, as f_min/f_max and f_minn/f_maxn
                out = f"_{e.fn}({out}, {x})"
            return out
        if e.fn == "sum" and expr.is_aggregate(e):
            return "(" + " + ".join(args) + ")" if len(args) > 1 else args[0]
        if e.fn in ("floor", "ceil", "abs") and len(args) == 1:
            return f"_np.{'absolute' if e.fn == 'abs' else e.fn}({args[0]})"
        raise _Unsupported(e.fn)
    raise _Unsupported(type(e).__name__)


def positions(p: float, d: np.ndarray) -> np.ndarray:
    """``plus_ones(p, k)`` for each ``k`` of the int array ``d``: ``p`` plus
    1.0 ``k`` times in turn, from the binades the position crosses (the steps
    of :func:`.decode_run.plus_ones`, each binade's start kept)."""
    k_max = int(d.max()) if d.size else 0
    if exact_steps(p, k_max):
        return p + d.astype(np.float64)
    starts = [0]
    bases = [p]
    q, done = p, 0
    while True:  # each binade's first step and the position there (plus_ones' loop)
        inside = exact_below(q) - 1  # (q stays below 2^52: p + k_max does)
        if done + inside >= k_max:
            break
        q = (q + inside) + 1.0
        done += inside + 1
        starts.append(done)
        bases.append(q)
    st = np.asarray(starts, dtype=np.int64)
    i = st.searchsorted(d, side="right") - 1
    return np.asarray(bases)[i] + (d - st[i]).astype(np.float64)


def plan(planner: "RunPlanner", cost: float, vcost: VectorCost | None, view: Any, firsts: list[int]) -> float | None:
    """The run the planner's walk plans from iteration 2 (``_plan_one``,
    ``_plan_by_growths``), in arrays: its ``segs``, ``events``, length and end
    written into the run and the planner's state (positions, allocations,
    ``kv``, ``used``) left as the walk leaves it; the cost of its last
    iteration.  None, with nothing written, when the walk must plan it.
    ``firsts`` holds each job's first growth iteration (as ``idx``), ``vcost``
    the compiled cost (None when the cost reads no memory), ``view`` the
    engine's view, filled for the batch.

    The arrays first reach a quarter past the iterations the first cost
    allows before the next event (the usual cost grows with ``kv_decode``,
    so the run ends before); a run that gets there is planned again to its
    jobs' ends."""
    run = planner.run
    assert run is not None
    cap = planner.cap
    room = (min(planner.limit, planner.horizon) - run.first) / cost * 1.25 + 64.0
    if room < cap:
        got = _plan(planner, cost, vcost, view, firsts, int(room))
        if got is not _FURTHER:
            return got  # type: ignore[return-value]
    return _plan(planner, cost, vcost, view, firsts, cap)  # type: ignore[return-value]


#: What :func:`_plan` gives when the run reaches the iterations it was asked to plan.
_FURTHER = object()


def _plan(planner: "RunPlanner", cost: float, vcost: VectorCost | None, view: Any, firsts: list[int],
          upto: int) -> float | None | object:
    """:func:`plan` of iterations up to ``upto`` (at most the jobs' ``cap``):
    :data:`_FURTHER`, with nothing written, when the run would reach it
    before the jobs' ends."""
    run = planner.run
    assert run is not None
    cap, limit, horizon = upto, planner.limit, planner.horizon
    short = upto < planner.cap
    idx, pools = planner.idx, planner.pools
    if not idx or len(idx) != len(pools) or (planner.kv_tracked and (vcost is None or view is None)):
        return None
    pool = pools[0]
    if not pool or any(q is not pool for q in pools):
        return None  # every job grows the one pool (a run that must end at a growth: the walk)
    b = pool.block
    if b is None or not (1.0 <= b < 2.0**31 and b == int(b)):
        return None
    p0 = [planner.pos[i] for i in idx]
    a0 = [planner.alloc[i] for i in idx]
    if not all(0.0 <= p and p + cap < _TWO52 for p in p0) or not all(
            0.0 <= a < 2.0**52 and a == int(a) for a in a0):
        return None  # (whole allocations below 2^52: a + k·b is the walk's sum of k blocks)
    u0, pcap, _b, left, spilled = planner._one_pool(pool)
    # each job's growths, g0, g0 + b, … up to cap, if each takes one block: checked as the walk tests them
    gs: list[np.ndarray] = []
    for n, g0 in enumerate(firsts):
        g = growths(p0[n], a0[n], g0, b, cap)
        if g is None:
            return None
        gs.append(g)
    one = len(gs) == 1  # (the usual run: one job, its growths in order, one a growth iteration)
    who: Any = None  # (each row's job, when there are several)
    if one:
        g_all = gs[0]
    else:
        g_all = np.concatenate(gs)
        who = np.arange(len(gs)).repeat([g.size for g in gs])
    if not g_all.size:
        return _FURTHER if short else None  # no growth: the walk's one fold
    if not one:
        order = np.lexsort((who, g_all))  # by iteration, then in serving order (the walk's heap)
        g_all, who = g_all[order], who[order]
    fu = np.empty(g_all.size)
    fu.fill(b)
    fu[0] = u0
    u_before = np.add.accumulate(fu)  # the pool's used before each growth: the walk's `used += need`
    room = u_before + b > pcap
    if spilled is not None:
        room |= (u_before + spilled) + b > pcap
    r = int(room.argmax())
    g_stop = int(g_all[r]) if room[r] else cap + 1  # the run ends before it
    grow_at = g_all[:int(g_all.searchsorted(g_stop))]  # the iterations with growths (sorted)
    if not one and grow_at.size > 1:
        new = np.empty(grow_at.size, dtype=bool)
        new[0] = True
        np.not_equal(grow_at[1:], grow_at[:-1], out=new[1:])
        grow_at = grow_at[new]  # (jobs growing at once: one)
    n_grow = grow_at.size
    if vcost is not None:  # the cost from each growth iteration on: kv_decode summed as reduce(add, kv, 0.0)
        tracked = pool is planner.kv_pool
        kv_sum: Any = 0.0
        at = {i: n for n, i in enumerate(idx)}
        for i, kv in enumerate(planner.kv):
            jn = at.get(i)
            if tracked and jn is not None:  # its allocation once it has grown at each growth iteration
                grown = np.arange(1, n_grow + 1) if one else gs[jn].searchsorted(grow_at, side="right")
                kv_sum = kv_sum + (a0[jn] + b * grown)
            else:
                kv_sum = kv_sum + kv
        if type(kv_sum) is not np.ndarray:
            kv_sum = np.full(n_grow, kv_sum)
        costs = vcost(view, kv_sum)
        if n_grow and not (costs.min() > 0.0 and costs.max() < math.inf):  # (a NaN fails both)
            bad = int((~((costs > 0.0) & np.isfinite(costs))).argmax())
            g_stop = int(grow_at[bad])
            grow_at, costs = grow_at[:bad], costs[:bad]
            n_grow = bad
    else:
        costs = np.full(n_grow, cost)
    last = g_stop - 1 if g_stop <= cap else cap
    # iterations 2 … first growth − 1 at `cost`, then from each growth iteration to the next at its cost
    starts = np.empty(n_grow + 1, dtype=np.int64)
    starts[0] = 2
    starts[1:] = grow_at
    stops = np.empty(n_grow + 1, dtype=np.int64)
    np.subtract(grow_at, 1, out=stops[:-1])
    stops[-1] = last
    chunk_costs = np.empty(n_grow + 1)
    chunk_costs[0] = cost
    chunk_costs[1:] = costs
    ends, m = _ends(run.first, chunk_costs, stops - starts + 1, limit, horizon)
    if short and m >= last and g_stop > cap:
        return _FURTHER  # (it runs to the last iteration planned: the jobs' ends decide)
    kept = int(starts.searchsorted(m, side="right"))  # chunks with an iteration in the run
    # (every chunk but the first has an iteration: the growth iterations are distinct and ≤ last;
    # the first has none when the first growth is iteration 2)
    lo = 1 if kept and starts[0] > stops[0] else 0
    s, e = starts[lo:kept], stops[lo:kept]
    if e.size and e[-1] > m:
        e = e.copy()
        e[-1] = m
    n_it, seg_costs = e - s + 1, chunk_costs[lo:kept]
    t0 = t1 = seg_costs
    if s.size:
        t0, t1 = ends[s - 2], ends[e - 1]
        if s.size > 1:
            same = seg_costs[1:] == seg_costs[:-1]  # equal costs in a row: one segment (`add_iters`)
            if same.any():
                new = np.empty(s.size, dtype=bool)
                new[0] = True
                np.logical_not(same, out=new[1:])
                firsts_ = new.nonzero()[0]
                lasts = np.append(firsts_[1:] - 1, s.size - 1)
                n_it = np.add.reduceat(n_it, firsts_)
                seg_costs, t0, t1 = seg_costs[firsts_], t0[firsts_], t1[lasts]
    # the growths of iterations 2 … m: one event per growth iteration, its jobs in serving order
    done = int(g_all.searchsorted(min(m, g_stop - 1), side="right"))
    g_done = g_all[:done]
    assert not run._segs and not run._events  # (the walk has written nothing yet)
    rows = np.full(done, idx[0], dtype=np.int64) if one else np.asarray(idx, dtype=np.int64)[who[:done]]
    run.cols = Cols(seg_costs, n_it, t0, t1, ends[:m], g_done - 2, rows, ends[g_done - 2], float(b), left,
                    distinct=one)
    # the state the walk leaves: positions before the next iteration, allocations, kv, used
    if one:
        counts = [done]
    else:
        counts = np.bincount(who[:done], minlength=len(idx)).tolist() if done else [0] * len(idx)
    for n, i in enumerate(idx):
        planner.pos[i] = plus_ones(p0[n], m - 1)
        planner.alloc[i] = a0[n] + b * counts[n]
        if pool is planner.kv_pool:
            planner.kv[i] = planner.alloc[i]
    if done:
        planner.used[id(pool)] = float(u_before[done - 1]) + b
    run.length, run.end = m, float(ends[m - 1])
    return float(seg_costs[-1]) if s.size else cost


def growths(p: float, a: float, g0: int, b: float, cap: int) -> np.ndarray | None:
    """The iterations ``g0``, ``g0 + b``, … up to ``cap`` at which a job grows
    (position ``p`` before iteration 2, allocation ``a``, a whole number
    below 2^52, block ``b``, whole), if each growth takes one block and none
    comes between two of them, as the walk tests it; None when not.
    When every ``p + d`` is exact (:func:`.decode_run.exact_steps`), each
    growth's units ``(p + (g − 2) + 1) − (a + j·b)`` is the same exact float
    (the numbers are multiples of ``p``'s ulp below 2^53 and ``g − j·b`` does
    not change), and so is the test between two growths: both are worked
    out once, not over the array (tests/sim/stages/test_vector_runs.py
    holds the two ways equal)."""
    bi = int(b)
    g = np.arange(g0, g0 + bi * max(0, (cap - g0) // bi + 1), bi, dtype=np.int64)
    if not g.size:
        return g
    exact = exact_steps(p, cap)
    if exact:
        units: Any = ((p + float(g0 - 2)) + 1.0) - a
        if not units > EPS or (g.size > 1 and ((p + float(g0 + bi - 3)) + 1.0) - (a + b) > EPS):
            return None  # (no growth at g0, or one between two the period predicts)
        f = units / b
        if bi & (bi - 1) == 0 and a % b == 0.0 and 1e-6 <= f <= 1.0 and a / b + g.size < 2.0**30:
            # each need is ceil(K + f − EPS)·b − K·b with K = a_j / b a whole number below 2^30 and
            # K + f exact (b a power of two): K + f − EPS rounds above K (its ulp is below 2^-22)
            # and not above K + 1, so every need is one block
            return g
    a_before = a + b * np.arange(g.size, dtype=np.float64)
    if not exact:
        # the positions before the iteration ahead of each growth but the first (the test between
        # two), and one step on, before each growth's iteration: plus_ones(p, g − 2)
        before = positions(p, g[1:] - 3)
        at_g = np.empty(g.size)
        at_g[0] = plus_ones(p, g0 - 2)
        np.add(before, 1.0, out=at_g[1:])
        units = (at_g + 1.0) - a_before
        if not (units > EPS).all() or (g.size > 1 and bool(((before + 1.0) - a_before[1:] > EPS).any())):
            return None  # (as above)
    need = np.ceil((a_before + units) / b - EPS) * b - a_before
    return g if (need == b).all() else None


class Cols:
    """A run planned in arrays, kept as arrays: its segments (``costs``,
    ``counts``, ``t0``, ``t1``: :attr:`DecodeRun.segs <.decode_run.DecodeRun.segs>`
    as columns), the ends of its iterations (``ends[j]`` that of iteration
    ``j + 1``), and its growths, one row each (``g`` the event's index as in
    :data:`~.decode_run.RunEvent`, ``who`` the job, ``at`` the iteration's
    start; every growth ``need`` units, every event re-reading the budget
    ``left``), an event being the rows of one iteration (``first``, the first
    row of each, and the number of rows after the last)."""

    __slots__ = ("costs", "counts", "t0", "t1", "ends", "g", "who", "at", "need", "left", "first")

    def __init__(self, costs: np.ndarray, counts: np.ndarray, t0: np.ndarray, t1: np.ndarray, ends: np.ndarray,
                 g: np.ndarray, who: np.ndarray, at: np.ndarray, need: float, left: float | None,
                 distinct: bool = False) -> None:
        """``distinct``: every row is an iteration of its own (``g`` strictly increasing)."""
        self.costs, self.counts, self.t0, self.t1, self.ends = costs, counts, t0, t1, ends
        self.g, self.who, self.at, self.need, self.left = g, who, at, need, left
        if distinct:
            self.first = np.arange(g.size + 1)
        else:
            new = np.empty(g.size + 1, dtype=bool)
            new[0] = new[-1] = True
            np.not_equal(g[1:], g[:-1], out=new[1:-1])
            self.first = new.nonzero()[0]

    def n_events(self) -> int:
        return self.first.size - 1

    def end_of(self, k: int) -> float:
        """The end of iteration ``k``."""
        return float(self.ends[k - 1])

    def segs(self) -> list[list]:
        """The segments as the walk's lists."""
        return [list(r) for r in zip(self.costs.tolist(), self.counts.tolist(), self.t0.tolist(), self.t1.tolist())]

    def events(self) -> list[Any]:
        """The growth events as the walk's tuples."""
        need, left = self.need, self.left
        who = self.who.tolist()
        g, at = self.g.tolist(), self.at.tolist()
        first = self.first.tolist()
        return [(g[a], [(i, need) for i in who[a:z]], left, at[a]) for a, z in zip(first, first[1:])]

    def add_iteration(self, cost: float, t: float, t2: float) -> None:
        """One more iteration, without growths, costing ``cost`` from ``t`` to ``t2``."""
        if self.costs.size and self.costs[-1] == cost:
            self.counts = self.counts.copy()  # (the arrays may be views of the plan's)
            self.t1 = self.t1.copy()
            self.counts[-1] += 1
            self.t1[-1] = t2
        else:
            self.costs = np.append(self.costs, cost)
            self.counts = np.append(self.counts, 1)
            self.t0 = np.append(self.t0, t)
            self.t1 = np.append(self.t1, t2)
        self.ends = np.append(self.ends, t2)

    def add_event(self, event: Any) -> bool:
        """Append a growth event after the last (a run's finishing iteration) when
        its growths are one block each and it reads the budget the others read;
        False, with nothing done, when it does not fit the columns."""
        g, growths, again, at = event
        if again != self.left or (again is None) != (self.left is None) or any(x != self.need for _i, x in growths):
            return False
        if not growths or (self.g.size and g <= self.g[-1]):
            return False
        n = len(growths)
        self.first = np.append(self.first[:-1], [self.g.size, self.g.size + n])
        self.g = np.append(self.g, np.full(n, g, dtype=np.int64))
        self.who = np.append(self.who, np.asarray([i for i, _x in growths], dtype=np.int64))
        self.at = np.append(self.at, np.full(n, at))
        return True

    def event_start(self, e: int) -> float:
        """The start of growth event ``e``'s iteration."""
        return float(self.at[self.first[e]])

    def events_before(self, lo: int, t: float) -> int:
        """The first event from ``lo`` on whose iteration starts at ``t`` or later."""
        starts = self.at[self.first[lo:-1]]
        return lo + int(np.searchsorted(starts, t, side="left"))

    def cut(self, length: int) -> None:
        """Keep iterations 1 … ``length`` (``DecodeRun.cut``)."""
        keep = length - 1  # iterations 2 … length, in the segments
        cum = np.cumsum(self.counts)
        i = int(np.searchsorted(cum, keep, side="left"))
        if keep > 0:
            self.counts = self.counts[:i + 1].copy()
            self.counts[i] = keep - (int(cum[i]) - int(self.counts[i]))
            self.t1 = self.t1[:i + 1].copy()
            self.t1[i] = self.ends[length - 1]
            self.costs, self.t0 = self.costs[:i + 1], self.t0[:i + 1]
        else:
            self.costs, self.counts, self.t0, self.t1 = (a[:0] for a in (self.costs, self.counts, self.t0, self.t1))
        self.ends = self.ends[:length]
        r = int(np.searchsorted(self.g, length - 2, side="right"))  # (event j: iteration j + 2)
        self.g, self.who, self.at = self.g[:r], self.who[:r], self.at[:r]
        e = int(np.searchsorted(self.first[:-1], r, side="left"))
        self.first = np.append(self.first[:e], r)

    def grow(self, assign: list[Any], lo: int, hi: int) -> None:
        """``DecodeRun._grow`` of events ``lo`` … ``hi − 1`` when none evaluates
        an admission attempt again: every growth is one block of the one pool
        (:func:`plan`), so the pool takes them in one call, and each hold's
        allocation grows by its count of blocks (whole numbers, exact)."""
        a, z = int(self.first[lo]), int(self.first[hi])
        if a >= z:
            return
        need = self.need
        who = self.who[a:z]
        counts = np.bincount(who, minlength=len(assign)).tolist()
        pool = None
        for i, c in enumerate(counts):
            if c:
                job = assign[i][0]
                req = job.hold
                kk = job.k
                pool = req.pools[kk]
                x = req.alloc[kk]
                if x == int(x) and x + c * need < 2.0**53:
                    req.alloc[kk] = x + c * need
                else:  # (not whole: the sums in turn)
                    req.alloc[kk] = fold_same(need, c, x)
        assert pool is not None
        pool.allocate_blocks(need, self.at[a:z])

    def account(self, run: Any, engine: Any, jobs: int, k: int) -> None:
        """``DecodeRun._account`` (:func:`account`) from the columns: the
        iterations' lengths as stretches of one value, a segment each
        (:func:`_steps`), where the ends stay in one binade."""
        costs, counts = self.costs, self.counts
        _account(run, engine, jobs, k, costs, counts, self.ends, float(self.t1[-1]),
                 _steps(costs, self.t0, self.ends))


def _ends(first: float, costs: np.ndarray, lengths: np.ndarray, limit: float,
          horizon: float) -> tuple[np.ndarray, int]:
    """The end of every iteration (``ends[i]`` that of iteration ``i + 1``;
    ``ends[0]`` is ``first``) as the iterations one by one add their costs,
    and how many of them end before ``limit`` and by ``horizon``.  Computed a
    piece at a time, as far as the limit needs."""
    per = costs.repeat(lengths)
    total = per.size
    stop = min(limit, horizon)
    cheapest = float(costs.min()) if total else 1.0  # (of every chunk's, even an empty one's: a guess)
    guess = total if not (stop < math.inf) else int(min(total, (stop - first) / cheapest * 1.001 + 64))
    # an end past the run: at `limit` or later, or past the horizon (the ends only grow: costs are > 0)
    past = min(limit, math.nextafter(horizon, math.inf))
    acc = first
    pieces: list[np.ndarray] = []
    lo = 0
    while True:
        hi = min(total, max(guess, lo + 1024))
        buf = np.empty(hi - lo + 1)  # the last end so far, then this piece's, summed in place
        buf[0] = acc
        buf[1:] = per[lo:hi]
        np.add.accumulate(buf, out=buf)
        part = buf[1:]
        pieces.append(part if pieces else buf)
        j = int(part.searchsorted(past))
        if j < part.size:
            return (buf if len(pieces) == 1 else np.concatenate(pieces)), lo + 1 + j
        lo = hi
        if lo >= total:
            return (buf if len(pieces) == 1 else np.concatenate(pieces)), total + 1
        acc = float(part[-1])
        guess = lo + (lo or 1024)


# -- the statistics of a run, in arrays ---------------------------------------------------------

#: From this many values (or this many, each added more than once) a sum is tried in whole
#: ulps (:func:`fold_in_binade`): its passes cost less than an accumulate that waits on each
#: addition (about 20 µs for 7 000 values against 27 µs, and 86 µs for each twice;
#: benchmarks in docs/speed.md).
_BINADE_FOLD = 4096
_BINADE_FOLD_REPEATED = 256


def fold_runs(acc: float, vals: np.ndarray, counts: np.ndarray, n: int = 1) -> float:
    """``acc`` plus each of ``vals`` in turn, ``counts`` (times ``n``) times
    each: ``functools.reduce(add, numpy.repeat(vals, counts * n), acc)``,
    in whole ulps over the stretches where that is the same (many values),
    else the additions in turn over them all."""
    size = int(counts.sum()) * n
    if not size:
        return acc
    if size >= _BINADE_FOLD or (n > 1 and size >= _BINADE_FOLD_REPEATED):
        got = fold_in_binade(acc, vals, n, counts)
        if got is not None:
            return got
    buf = np.empty(size + 1)
    buf[0] = acc
    buf[1:] = vals.repeat(counts * n if n > 1 else counts)
    np.add.accumulate(buf, out=buf)
    return float(buf[-1])


def fold_in_binade(acc: float, xs: np.ndarray, n: int = 1, counts: np.ndarray | None = None) -> float | None:
    """:func:`fold_runs` without the additions in turn, when every partial sum stays
    in the binade ``[2^(e-1), 2^e)`` of ``acc`` (a positive normal float): there
    every float is a whole multiple of the binade's ulp ``u``, and
    ``fl(a + x)`` of such an ``a`` and an ``x ≥ 0`` whose sum stays below
    ``2^e`` is ``a`` plus the multiple of ``u`` nearest ``x`` — the same for
    every ``a`` unless ``x`` lies halfway between two (the tie goes to the
    even neighbour, which depends on ``a``).  So the fold is ``acc`` plus
    ``u`` times the sum of those multiples, whole numbers summed exactly in
    any order while the total stays below 2^53 (:func:`.stats.fold_same`'s
    argument, for many values).  With ``counts``, each ``xs[i]`` is added
    ``counts[i] * n`` times (whole numbers below 2^53 when the sum is: a
    product or partial sum past it rounds to at least 2^53, and is refused).
    A value halfway between two multiples (:func:`_ties`) is added as the
    rounding to even adds it, from the parity the sum has then.  None when a
    value is negative or not finite, or the sum leaves the binade."""
    if not (acc >= _MIN_ACC and acc < math.inf):
        return None
    frac, e = math.frexp(acc)
    sh = 53 - e
    scale = math.ldexp(1.0, sh)
    if not (xs.min() >= 0.0 and float(xs.max()) * scale < _TWO53):  # (a NaN fails both)
        return None
    q = xs * scale  # each value in units of u (a power of two: exact)
    d = np.rint(q)
    r = q - d  # (exact: |q − d| ≤ 1/2)
    np.abs(r, out=r)
    a = math.ldexp(frac, 53)  # the sum in units of u: a whole number below 2^53
    if not r.max() < 0.5:
        units = _ties(a, q, d, r == 0.5, np.full(q.size, n, dtype=np.int64) if counts is None else counts * n)
        x = a + units
    else:
        units = float(d.sum()) if counts is None else float((d * counts).sum())
        x = a + n * units  # (whole numbers: exact while below 2^53)
    return math.ldexp(x, -sh) if x < _TWO53 else None


def _ties(a: float, q: np.ndarray, d: np.ndarray, half: np.ndarray, c: np.ndarray) -> float:
    """The units :func:`fold_in_binade` adds to ``a`` (whole units of the
    binade's ulp, below 2^53) when some values ``q`` (in units) lie halfway
    between two whole numbers (``half``); each ``q[i]`` is added ``c[i]``
    times in turn, and ``d`` is ``rint(q)``.  Adding ``k + 1/2`` to a whole
    ``s`` gives the even one of ``s + k`` and ``s + k + 1`` (ties to even):
    afterwards the sum is even, and each further ``k + 1/2`` adds the even one
    of ``k`` and ``k + 1``.  So only the first of a stretch of ties depends on
    the sum's parity, and that is ``a``'s, flipped by each odd number of
    units the other values add, since the last stretch of ties (which left
    it even).  Whole numbers throughout: exact while the total is below 2^53,
    and at least 2^53 when it is not."""
    h = np.flatnonzero(half & (c > 0))  # (a value added no times: no step, no parity)
    per = d * c  # each other stretch's units
    per[h] = 0.0
    upto = np.cumsum(per)  # (sequential, whole numbers: exact below 2^53)
    since = upto[h]  # the other stretches' units before each stretch of ties, since the one before
    since[1:] -= upto[h[:-1]]
    if h.size:
        since[0] += a
    k = np.floor(q[h])
    odd = k.astype(np.int64) & 1  # (whole numbers below 2^53: their parities, exactly)
    first = k + ((since.astype(np.int64) + odd) & 1)  # the even one of s + k and s + k + 1
    return float(upto[-1] + (first + (c[h] - 1) * (k + odd)).sum())


#: The least accumulator :func:`fold_in_binade` takes (its ulp's inverse is a float).
_MIN_ACC = 2.0 ** -900


def account(run: Any, engine: Any, jobs: int, k: int) -> None:
    """``DecodeRun._account`` from the run's ends in an array: the same sums
    in the same order (each a sequential ``np.add.accumulate``, or whole ulps
    where that is the same), the same histogram buckets, for iterations 2 … m."""
    segs = run.segs
    seg = np.array(segs, dtype=np.float64)
    costs, counts = seg[:, 0], seg[:, 1].astype(np.int64)
    ends = np.add.accumulate(np.concatenate(([run.first], np.repeat(costs, counts))))  # ends[j]: iteration j + 1's
    _account(run, engine, jobs, k, costs, counts, ends, segs[-1][3], None)


def _steps(costs: np.ndarray, t0: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
    """The length of each iteration of each segment (``costs``, starting at
    the ends ``t0``) when every end of the run (``ends``) lies in one binade
    and no cost is halfway between two multiples of its ulp ``u``: there
    ``fl(e + c) = e + s`` for every end ``e``, with ``s`` the multiple of
    ``u`` nearest ``c`` (:func:`.stats.fold_same`'s argument), so each
    iteration of a segment lasts ``s = (t0 + c) − t0`` (a difference within the
    binade: exact), the value ``ends[1:] − ends[:-1]`` gives for all of them.
    None otherwise (the lengths are then read off the ends)."""
    if ends.size < 2 or not costs.size:
        return None
    first, last = float(ends[0]), float(ends[-1])
    if not (first >= _NORMAL and math.frexp(first)[1] == math.frexp(last)[1]):
        return None
    q = costs * (1.0 / math.ulp(first))  # each cost in units of the ulp (a power of two: exact)
    q -= np.floor(q)
    if (q == 0.5).any():
        return None
    return (t0 + costs) - t0


def _stretches(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``xs`` as stretches of one value: ``(values, counts)``, each value
    ``counts`` times in a row (a NaN is a stretch of its own)."""
    if xs.size < 2:
        return xs, np.ones(xs.size, dtype=np.int64)
    starts = np.flatnonzero(xs[1:] != xs[:-1])
    starts += 1
    starts = np.concatenate(([0], starts))
    counts = np.empty(starts.size, dtype=np.int64)
    np.subtract(starts[1:], starts[:-1], out=counts[:-1])
    counts[-1] = xs.size - starts[-1]
    return xs[starts], counts


def _account(run: Any, engine: Any, jobs: int, k: int, costs: np.ndarray, counts: np.ndarray, ends: np.ndarray,
             last: float, steps: np.ndarray | None) -> None:
    """:func:`account` from the costs of iterations 2 … m (each of ``costs``
    ``counts`` times), the ends of 1 … m and the last end; ``steps``: the
    iterations' lengths a segment at a time (:func:`_steps`: each of its
    lengths is the segment's), or None to take them from ``ends``.  Every sum
    goes over stretches of one value (:func:`fold_runs`)."""
    sim = engine.sim
    stats = sim.stats_on
    if steps is not None:  # (a segment's iterations: one length each, as the ends' differences give them)
        l_vals, l_counts = steps, counts
    else:
        l_vals, l_counts = _stretches(ends[1:] - ends[:-1])  # the lengths of iterations 2 … m (`_length_runs`)
    if stats and k > 1:  # each job's gaps: every iteration's but the last
        g_counts = l_counts.copy()
        g_counts[-1] -= 1
        add_stretches(engine.itl, l_vals, g_counts, jobs)
    if run.first >= sim.warmup:
        s_vals, s_counts = l_vals, l_counts
    elif last <= sim.warmup:
        s_vals, s_counts = l_vals[:0], l_counts[:0]
    else:
        s_vals, s_counts = _stretches(np.minimum(ends[1:], sim.horizon) - np.maximum(ends[:k], sim.warmup))
    if s_vals.size and not s_vals.min() > 0.0:
        keep = s_vals > 0.0
        s_vals, s_counts = s_vals[keep], s_counts[keep]
    if stats:
        nf = float(jobs)
        engine.dec_iters += k
        d = engine.dec_sum  # whole numbers: one addition is exact below 2**53
        if d.is_integer() and d + k * nf < 2.0 ** 52:
            engine.dec_sum = d + k * nf
        else:
            engine.dec_sum = fold_same(nf, k, d)
    n = int(s_counts.sum())
    if n >= _BINADE_FOLD:  # (each sum in whole ulps where it can be: `fold_runs`)
        engine.t_decode_only = fold_runs(engine.t_decode_only, s_vals, s_counts)
        engine.t_decoders = fold_runs(engine.t_decoders, s_vals if jobs == 1 else float(jobs) * s_vals, s_counts)
        if stats:
            engine.dec_cost = fold_runs(engine.dec_cost, costs, counts)
    elif n and stats and n == k:  # the three sums in one accumulate, a row each (each in turn)
        buf = np.empty((3, n + 1))
        buf[0, 0], buf[1, 0], buf[2, 0] = engine.t_decode_only, engine.t_decoders, engine.dec_cost
        buf[0, 1:] = s_vals.repeat(s_counts)
        if jobs == 1:
            buf[1, 1:] = buf[0, 1:]
        else:
            np.multiply(float(jobs), buf[0, 1:], out=buf[1, 1:])
        buf[2, 1:] = costs.repeat(counts)
        engine.t_decode_only, engine.t_decoders, engine.dec_cost = np.add.accumulate(buf, axis=1)[:, -1].tolist()
    else:
        if n:
            engine.t_decode_only = fold_runs(engine.t_decode_only, s_vals, s_counts)
            engine.t_decoders = fold_runs(engine.t_decoders, s_vals if jobs == 1 else float(jobs) * s_vals, s_counts)
        if stats:
            engine.dec_cost = fold_runs(engine.dec_cost, costs, counts)
    engine.iterations += k
    sim.events += k


#: At most this many distinct stretches of gaps are bucketed one by one in Python (a logarithm
#: each) rather than in arrays.
_FEW = 24


def add_stretches(h: Any, vals: np.ndarray, counts: np.ndarray, n: int) -> None:
    """``LogHistogram.add_runs`` of ``numpy.repeat(vals, counts)`` (each of
    ``vals`` ``counts`` times in a row, a count of 0 none), each value recorded
    ``n`` times in a row: the total takes the same additions in the same
    order, the buckets the same counts, smallest and largest (serq/sim/stats.py).
    A run's gaps come in stretches of one value (the iterations between two
    growths): a few stretches go through ``LogHistogram``'s own fill; many are
    left for later (:func:`count_later`), to be bucketed with other runs',
    when none is a NaN or negative (whose buckets would depend on the order)."""
    if not counts.all():
        keep = counts > 0
        vals, counts = vals[keep], counts[keep]
    if not vals.size or n <= 0:
        return
    h.total = fold_runs(h.total, vals, counts, n)
    size = int(counts.sum())
    h.count += n * size
    if vals.size > _FEW and vals.min() >= 0.0:  # (the usual gaps: a NaN fails the test)
        h._later.append((vals, counts, n))
        h._held += vals.size
        if h._held >= _LATER:
            count_later(h)
        return
    v = vals.tolist()
    lo, hi = min(v), max(v)
    h._fill(lambda: zip(v, counts.tolist()), n, lo, hi, size, v[-1])


#: The stretches' values a histogram holds for later (``LogHistogram._later``) before they are
#: counted in: a megabyte of arrays.
_LATER = 1 << 16


def count_later(h: Any) -> None:
    """Count the stretches ``h._later`` holds into the buckets of ``h`` (a
    ``LogHistogram``), all at once: each value's key, and for each key the
    count, the least and the greatest value added to its bucket (its count,
    smallest and largest as one by one, in any order)."""
    later = h._later
    vals = np.concatenate([v for v, _c, _n in later])
    counts = np.concatenate([c * n for _v, c, n in later])
    later.clear()  # (each stretch counted at least once: add_stretches leaves out the others)
    h._held = 0
    positive = (vals > 0.0) & (vals < math.inf)
    if positive.all():
        keys = _keys(vals)
    else:  # zeros and infinities have buckets of their own (their keys far apart: np.unique below)
        keys = np.full(vals.size, _ZERO_KEY, dtype=np.int64)
        keys[positive] = _keys(vals[positive])
        keys[vals == math.inf] = _INF_KEY
    k0 = int(keys.min())
    span = int(keys.max()) - k0 + 1
    if span <= 4 * vals.size + 4096:  # the keys' range as an index (gaps span a few hundred keys)
        at = keys - k0
        per_f = np.bincount(at, weights=counts, minlength=span)  # (whole numbers: exact below 2^53)
        where = np.flatnonzero(per_f)
        uniq = where + k0
        per = per_f[where].astype(np.int64)
        inverse, size = at, span
    else:
        uniq, inverse = np.unique(keys, return_inverse=True)
        per = np.zeros(uniq.size, dtype=np.int64)
        np.add.at(per, inverse, counts)
        where, size = None, uniq.size
    lo = np.full(size, math.inf)
    hi = np.full(size, -math.inf)
    np.minimum.at(lo, inverse, vals)
    np.maximum.at(hi, inverse, vals)
    if where is not None:
        lo, hi = lo[where], hi[where]
    buckets = h._buckets
    for key, c, x_lo, x_hi in zip(uniq.tolist(), per.tolist(), lo.tolist(), hi.tolist()):
        b = buckets.get(key)
        if b is None:
            buckets[key] = [c, x_lo, x_hi]
            continue
        b[0] += c
        if x_lo < b[1]:
            b[1] = x_lo
        if x_hi > b[2]:
            b[2] = x_hi


def _keys(fx: np.ndarray) -> np.ndarray:
    """The log bucket of each of the positive finite values ``fx``, as
    ``stats._bucket`` gives it: a quotient within 1e-9 of a bucket's edge is
    decided by serQ's own logarithm."""
    y = np.log(fx) / _LOG_W
    kf = np.floor(y)
    frac = y - kf
    kk = kf.astype(np.int64)
    for i in (~((frac > 1e-9) & (frac < 0.999999999))).nonzero()[0].tolist():
        kk[i] = _bucket(float(fx[i]))
    return kk


# -- a run's growths of one pool, in arrays -------------------------------------------------------

def grow_pool(pool: Any, needs: list[float], times: list[float]) -> bool:
    """``Pool.allocate_run`` for growths of one block each under LRU with
    whole amounts (:meth:`PrefixCache.whole_blocks`), no gauge and no
    timeline: the cache's totals after each growth by phases (none evicted
    while the slack lasts; then each growth takes one block of the oldest
    entry while it holds more than one — the slack stays what it was — and
    the growth that empties an entry is done by ``make_room_whole`` itself),
    and the four time averages as sequential sums.  False, with nothing done,
    when that is not the case."""
    b = pool.cache.block
    if b is None or needs.count(b) != len(needs):
        return False
    return grow_blocks(pool, b, np.asarray(times))


def grow_blocks(pool: Any, b: float, t: np.ndarray) -> bool:
    """:func:`grow_pool` of ``t.size`` growths of ``b`` units at the times ``t``
    (an array; ``b`` must be the cache's block)."""
    cache = pool.cache
    n = int(t.size)
    ua, ca, qa, ha = pool.used_avg, pool.cached_avg, pool.queue_avg, pool.holders_avg
    last = ua.last
    if (pool.gauged or pool.timeline is not None or cache.spill is not None or b != cache.block
            or not (ca.last == last and qa.last == last and ha.last == last)
            or not (pool.used + n * b <= _BIG and cache.whole_blocks(pool.used, [b], pool.cap))):
        # (`whole_blocks(used, [b] * n, cap)`: n whole blocks from `used` stay exact up to _BIG)
        return False
    cap = pool.cap
    used = pool.used
    totals = np.empty(n)
    entries = cache.entries
    j = 0
    while j < n:
        total = cache.total
        slack = cap - used - total  # a whole number: growths fit in it without evicting
        if not used + total + b > cap + EPS:
            c = min(n - j, int(slack // b))
            totals[j:j + c] = total
            used += c * b
            j += c
            continue
        e = next(iter(entries.values())) if entries else None
        c = 0
        if e is not None and e.size > b and slack >= 0.0:  # each growth takes one block of it (k = 1: slack < b)
            c = min(n - j, math.ceil(e.size / b) - 1)
            if cache.evicted_units + c * b > _BIG:
                c = 0
        if c > 0:
            assert e is not None
            totals[j:j + c] = total - b * np.arange(1, c + 1, dtype=np.float64)
            taken = c * b
            e.size -= taken
            cache.total = total - taken
            cache.evicted_units += taken
            used += taken
            j += c
            continue
        totals[j] = cache.make_room_whole(used, [b], cap)[0]  # an entry emptied, or the sums past exact
        used += b
        j += 1
    dts = np.empty(n)
    dts[0] = t[0] - last
    np.subtract(t[1:], t[:-1], out=dts[1:])
    qn, hn = len(pool.put_queue), len(pool.holders)
    # each average's value before each growth times the time since the one before, added in turn to its
    # integral: one row each, accumulated along the rows (each row in turn, as four folds); an empty
    # queue before and during the run adds 0.0 to its integral each time, which leaves it as it is
    rows = 3 if qn == 0 and qa.value == 0 else 4
    buf = np.empty((rows, n + 1))
    buf[0, 0], buf[1, 0], buf[2, 0] = ua.integral, ca.integral, ha.integral
    buf[0, 1], buf[1, 1], buf[2, 1] = ua.value, ca.value, ha.value
    buf[0, 2:] = pool.used + b * np.arange(1, n, dtype=np.float64)  # whole numbers: `used += need` in turn
    buf[1, 2:] = totals[:-1]
    buf[2, 2:] = float(hn)
    if rows == 4:
        buf[3, 0], buf[3, 1] = qa.integral, qa.value
        buf[3, 2:] = float(qn)
    buf[:, 1:] *= dts
    sums = np.add.accumulate(buf, axis=1)[:, -1].tolist()
    ua.integral, ca.integral, ha.integral = sums[0], sums[1], sums[2]
    if rows == 4:
        qa.integral = sums[3]
    pool.used = used
    end = float(t[-1])
    ua.last = ca.last = qa.last = ha.last = end
    ua.value, ca.value, qa.value, ha.value = used, float(totals[-1]), qn, hn
    return True

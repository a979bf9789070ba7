"""Gauges over many replicas, read term by term (a cluster's cost flat in N).

A gauge such as ``max r in N (used(kv[r]))`` is compiled as one call over its
``N`` terms (``_maxn(t0, …, tN-1)``), and read again whenever a pool it
reads changes: ``N`` terms evaluated in Python at every change of any replica
makes a cluster's gauges cost N² over a run.  Here each term of an aggregate
whose terms read only pools is a function of its own, its value kept; a
reading after one pool changed evaluates again the terms that read that pool
(and those of any pool changed since the latest reading that is still to be
read), then the aggregate over the kept values (the same function over the
same values, in order: the same float), then the gauges' expressions with the
aggregates' values in their place.  Where one term changed, a ``max`` or
``min`` follows it from its value before, and a ``sum`` does while all its
terms are small whole numbers (counts, whole blocks): each is then exact, and
only an aggregate that cannot tell so (its largest term fell, a fraction) is
read over all its terms.  Gauges that read a stage are read at every instant
and keep the plain functions.
"""

from __future__ import annotations

from math import copysign
from typing import TYPE_CHECKING, Any, Callable

from .. import ir
from ..expr import AGGREGATES, Frame, children, code_of, f_maxn, f_minn, f_sumn, is_aggregate, source, walk

if TYPE_CHECKING:
    from .simulator import Simulator

#: aggregates of fewer terms are read whole (a few terms cost less than the bookkeeping)
MIN_TERMS = 8


def install(sim: "Simulator", raw: Frame) -> None:
    """Replace the gauges' full and per-pool readers by term-keeping ones
    (see the module), when some gauge has an aggregate of pool terms."""
    gauges = sim.gauges
    program = sim.program
    if gauges is None or gauges.always:
        return
    ns = raw.ns
    values: list[float] = []  # each aggregate's value
    kinds: list[Callable[..., float]] = []
    terms: list[list[Callable[[Any], float]]] = []
    kept: list[list[float]] = []
    by_pool: dict[int, list[tuple[int, int]]] = {}  # pool id → (aggregate, term) that read it
    name = raw.bind(values, "GV")
    texts: list[str] = []
    for g in program.gauges:
        text = source(g.expr, raw)
        for node in _outermost_aggregates(g.expr):
            pools = [_pools(sim, arg) for arg in node.args]
            if len(node.args) < MIN_TERMS or any(p is None for p in pools):
                continue
            whole = source(node, raw)
            if whole not in text:
                continue
            k = len(values)
            text = text.replace(whole, f"{name}[{k}]")
            lambdas = ", ".join(f"lambda c: {source(arg, raw)}" for arg in node.args)  # one compile for all
            fns = list(eval(code_of(f"({lambdas},)", "<serq gauge term>", "eval"), ns))  # noqa: S307
            for r, ids in enumerate(pools):
                for pid in ids:  # type: ignore[union-attr]
                    by_pool.setdefault(pid, []).append((k, r))
            values.append(0.0)
            kinds.append(AGGREGATES[node.fn])  # type: ignore[union-attr]
            terms.append(fns)
            kept.append([0.0] * len(fns))
        texts.append(text)
    if not values:
        return

    def tops(idx: tuple[int, ...]) -> Callable[[Any], tuple]:
        return eval(code_of(f"lambda c: ({', '.join(texts[i] for i in idx)},)", "<serq gauges>", "eval"), ns)  # noqa: S307

    # a sum follows one term's change while every term is a small whole number (`_odd`: how
    # many are not): each partial sum is exact then, so the sum less the old term plus the new
    # is the left-to-right sum of the new terms; a sum of more than MAX_SUMMED terms is read whole
    summed = [kinds[k] is f_sumn and len(fns) <= MAX_SUMMED for k, fns in enumerate(terms)]
    odd = [0] * len(terms)

    def count_odd(k: int) -> None:
        if summed[k]:
            odd[k] = sum(map(_odd, kept[k]))

    def fresh_all() -> None:
        for k, fns in enumerate(terms):
            vals = kept[k]
            vals[:] = [f(None) for f in fns]  # (in place: each pool's entries hold these lists)
            values[k] = kinds[k](*vals)
            count_odd(k)

    # each pool's terms: (the aggregate, its kept values, the term's place, its function, how the
    # aggregate follows one term's change: _STEPS), and the aggregates to take again after them
    of_pool: dict[int, tuple[list[tuple[int, list[float], int, Callable[[Any], float], Any]], list[int]]] = {
        pid: ([(k, kept[k], r, terms[k][r], _SUM if summed[k] else _STEPS.get(kinds[k])) for k, r in pairs],
              sorted({k for k, _r in pairs}))
        for pid, pairs in by_pool.items()}
    started: list[bool] = []  # (empty until the first reading, which reads every term)

    def again(pid: int) -> None:
        got = of_pool.get(pid)
        if got is not None:
            whole: list[int] = []  # the aggregates to read over all their terms
            for k, vals, r, f, step in got[0]:
                old = vals[r]
                new = vals[r] = f(None)
                if step is _SUM:  # (every term whole before and after: the sum before was exact too)
                    was = _odd(old)
                    o = odd[k] = odd[k] + _odd(new) - was
                    if not (o or was) and k not in whole:
                        values[k] = values[k] - old + new
                        continue
                elif step is not None and k not in whole:
                    v = step(values[k], old, new)
                    if v is not None:
                        values[k] = v
                        continue
                whole.append(k)
            for k in got[1]:
                if k in whole:
                    values[k] = kinds[k](*kept[k])

    def fresh(pid: int | None) -> None:
        """The terms of pool ``pid``, of the pools changed since the latest look
        (``Gauges.movers``) and of the one still to be read (``Gauges.moved``)."""
        movers = gauges.movers
        if not started:
            started.append(True)
            movers.clear()
            fresh_all()
            return
        moved = gauges.moved
        if not movers and (moved is None or moved is gauges or id(moved) == pid):  # (the usual)
            if pid is not None:
                again(pid)
            return
        pids = {id(p) for p in movers}
        movers.clear()
        if pid is not None:
            pids.add(pid)
        if moved is not None and moved is not gauges:
            pids.add(id(moved))
        # each pool's terms in turn, each aggregate followed by one term's change where its step
        # tells (each step leaves the aggregate the fold of the terms as kept then, so the order of
        # the pools does not matter), not read whole over its N terms: two pools of a replica
        # changing at one instant (a request's slot and memory) would make the gauges cost N²
        for q in pids:
            again(q)

    every = tops(tuple(range(len(texts))))

    def read_all(c: Any) -> tuple:
        fresh(None)
        return every(c)

    gauges.read = read_all
    parts: dict[tuple[int, ...], Callable[[Any], tuple]] = {}
    for pool in sim.all_pools:
        for attr in ("gauge_part", "gauge_any"):
            part = getattr(pool, attr)
            if part is None:
                continue
            idx = part[1]
            if idx not in parts:
                parts[idx] = tops(idx)
            setattr(pool, attr, (_reader(fresh, id(pool), parts[idx]), idx))


def _max_after(cur: float, old: float, new: float) -> float | None:
    """``f_maxn`` over the terms after one of them went from ``old`` to ``new``,
    from ``cur``, the value before; None when only reading every term tells:
    the largest term fell, or a NaN, or an equal term whose bits may differ
    (a zero's sign: the fold keeps the first of equals), or not all floats."""
    if not (type(cur) is float and type(old) is float and type(new) is float and cur == cur and old == old
            and new == new):
        return None
    if new > cur:
        return new
    if old == cur and new < old:
        return None  # it was the largest, perhaps the only one
    if new == cur and copysign(1.0, new) != copysign(1.0, cur):
        return None
    return cur


def _min_after(cur: float, old: float, new: float) -> float | None:
    """:func:`_max_after` for ``f_minn``."""
    got = _max_after(-cur, -old, -new)
    return None if got is None else -got


#: a sum's step (``install``: while its terms are small whole numbers)
_SUM: Any = object()

#: how an aggregate follows a change of one term without reading the others (a cluster's gauge
#: over N replicas then costs O(1) at most changes, not O(N)); a sum's is ``_SUM``, in ``install``
_STEPS: dict[Callable[..., float], Any] = {f_maxn: _max_after, f_minn: _min_after}

#: a sum of more terms than this is read whole (with terms up to 2⁴⁰, its partial sums stay under 2⁵²)
MAX_SUMMED = 4096


def _odd(x: Any) -> int:
    """1 unless ``x`` is a whole number from 0 to 2⁴⁰ (a float, and not −0.0), else 0."""
    if type(x) is float and 0.0 <= x <= 1099511627776.0 and x.is_integer() and (x or copysign(1.0, x) > 0.0):
        return 0
    return 1


def _reader(fresh: Callable[[int | None], None], pid: int, top: Callable[[Any], tuple]) -> Callable[[Any], tuple]:
    def read(c: Any) -> tuple:
        fresh(pid)
        return top(c)
    return read


def _outermost_aggregates(e: ir.Expr) -> list[ir.Call]:
    """The aggregate calls of ``e`` that no other aggregate holds, in order."""
    if isinstance(e, ir.Call) and is_aggregate(e):
        return [e]
    out: list[ir.Call] = []
    for sub in children(e):
        out.extend(_outermost_aggregates(sub))
    return out


def _pools(sim: "Simulator", e: ir.Expr) -> list[int] | None:
    """The ids of the pools a term reads, or None when it reads anything else
    (a stage, a context value) or nothing at all."""
    found: list[int] = []
    for x in walk(e):
        if isinstance(x, ir.Probe):
            target = x.target
            if not isinstance(target, ir.PoolRef) or not isinstance(target.index, (ir.Num, type(None))):
                return None
            member = 0 if target.index is None else int(target.index.value)
            pid = id(sim.pools[target.pool][member])
            if pid not in found:
                found.append(pid)
        elif not isinstance(x, (ir.Num, ir.Unary, ir.Binary, ir.Cond, ir.Call, ir.PoolRef)):
            return None
    return found or None

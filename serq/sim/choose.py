"""``choose j in n by (…, ~uniform(lo, hi))`` without drawing what no comparison reads.

A router's last key is a random tie-break (serq/lib/routers.sq): ``choose``
evaluates the keys of every candidate in turn, so candidate ``j`` draws the
``j``-th value of the session's stream, and the choice draws ``n`` values
whether or not two candidates tie.  The stream is SplitMix64 (serq/sim/rng.py),
whose ``j``-th value is a function of its state and ``j`` alone; so a choice
whose keys draw nothing but that last ``~uniform`` with constant bounds works
out a candidate's value only when a comparison reaches it (its keys before
tie with the best's so far), and moves the stream on by ``n`` values at the
end.  The values compared, the choice and the stream after it are exactly
those of the candidate-by-candidate loop (:meth:`Session.choose`).
"""

from __future__ import annotations

from typing import Any, Callable

from .. import expr, ir
from .rng import _GAMMA, _M, _UNIT, _mix

#: what :func:`plans` finds for a ``choose``: the bounds ``lo``, ``hi`` of its last key
Plan = tuple[float, float]


def plans(program: ir.Program) -> dict[int, tuple[Any, Plan]]:
    """The ``choose`` statements whose last key is ``~uniform`` of constant
    bounds and whose other keys draw nothing, by ``id`` of their label (with
    the label, to tell it from another object at that id): a label two
    statements of different shapes share is left out."""
    found: dict[int, tuple[Any, Plan | None]] = {}
    for block in (program.init, program.turn or (), program.session):
        for st in ir.walk_blocks(block):
            if not isinstance(st, ir.Choose):
                continue
            plan = _plan(st)
            key = id(st.label)
            if key in found and found[key][1] != plan:
                plan = None
            found[key] = (st.label, plan)
    return {k: (label, plan) for k, (label, plan) in found.items() if plan is not None}


def _plan(st: ir.Choose) -> Plan | None:
    keys = st.keys
    last = keys[-1] if keys else None
    if not (isinstance(last, ir.Draw) and last.dist == "uniform" and len(last.args) == 2
            and all(isinstance(x, ir.Num) for x in last.args)):
        return None
    if any(expr.draws(k) for k in keys[:-1]):
        return None
    lo, hi = last.args
    assert isinstance(lo, ir.Num) and isinstance(hi, ir.Num)
    return (float(lo.value), float(hi.value))


def choose(s: Any, n: int, keys: tuple[Callable[[Any], float], ...], slot: int, plan: Plan) -> float:
    """:meth:`Session.choose` of ``n`` candidates for a planned statement (see
    the module): the candidates' keys but the last, compared as the tuples of
    all keys would be; the last key's value of candidate ``j`` is
    ``lo + (hi − lo)·u_j``, ``u_j`` the stream's ``j``-th next value."""
    g = s.srng
    s0 = g._s
    if s0 < 0:  # (a stream keyed on its first draw: keyed now)
        g.random()
        s0 = (g._s - _GAMMA) & _M
    lo, hi = plan
    width = hi - lo
    a = s.a
    firsts = keys[:-1]
    one = firsts[0] if len(firsts) == 1 else None
    best_j = 0
    best: Any = None
    best_u: float | None = None
    for j in range(n):
        a[slot] = float(j)
        if one is not None:
            k: Any = one(s)
            same = best is not None and (k is best or k == best)  # (a tuple's element test)
        else:
            k = tuple([f(s) for f in firsts])
            same = best is not None and k == best
        if best is None:
            best_j, best, best_u = j, k, None
        elif same:  # the keys before the last tie: the draws decide
            if best_u is None:
                best_u = lo + width * _nth(s0, best_j)
            u = lo + width * _nth(s0, j)
            if u < best_u:
                best_j, best, best_u = j, k, u
        elif k < best:
            best_j, best, best_u = j, k, None
    g._s = (s0 + n * _GAMMA) & _M  # (the stream as after n draws)
    return float(best_j)


def _nth(s0: int, j: int) -> float:
    """The stream's ``j``-th value (from 0) after its state ``s0`` (``Stream.random``)."""
    return (_mix((s0 + (j + 1) * _GAMMA) & _M) >> 11) * _UNIT

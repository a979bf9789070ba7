"""The fit's linear algebra: sums, dot products, Householder QR, least squares and
non-negative least squares (NNLS), in machine-independent arithmetic, and SciPy's
NNLS beside them (``--solver scipy``).  ``serq fit`` (:mod:`serq.calibration.fit`)
uses them; docs/calibration.md tells why the digits are the same on every machine.
"""

from __future__ import annotations

import math
import sys
from typing import Sequence

import numpy as np

from ..errors import SerqError


# -- machine-independent arithmetic -------------------------------------------------------------
#
# The built-in solver and every printed figure use only IEEE-754 double +, −, ×, ÷ and square
# root (Python's operators, math.sqrt, and numpy's element-wise ufuncs, whose every element is
# one correctly rounded operation whatever SIMD kernel the processor gets), comparisons, sorting,
# and sums by math.fsum (correctly rounded, hence independent of the order).  Nothing here calls
# BLAS/LAPACK (np.linalg, ``@``, np.dot), a numpy reduction (sum, mean, quantile: their order and
# kernel depend on the processor) or a libm function (log, exp, pow: glibc picks a variant per
# processor), so a fit prints the same digits on every machine.  The only exception is
# ``--solver scipy`` (SciPy's compiled NNLS on numpy's QR), whose coefficients may differ in the
# last digits across machines.

_EPS = sys.float_info.epsilon


def array_sum(a: np.ndarray) -> float:
    """The correctly rounded sum of a 1-D float array."""
    return math.fsum(np.ascontiguousarray(a, dtype=float).data)  # a memoryview: Python floats


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """Σ aᵢ·bᵢ: the products rounded element-wise, their sum correctly rounded."""
    return array_sum(a * b)


def combine(cols: Sequence[np.ndarray], x: Sequence[float]) -> np.ndarray:
    """``Σ x_j · col_j``, element-wise, the columns added left to right (``X @ x`` in a fixed order)."""
    acc = cols[0] * x[0]
    for col, xj in zip(cols[1:], x[1:]):
        acc = acc + col * xj
    return acc


def qr(cols: Sequence[np.ndarray], b: np.ndarray | None = None) -> tuple[list[list[float]], list[float]]:
    """Householder QR of the m × k matrix whose columns are ``cols``: ``R``, its first min(m, k)
    rows (lists of k floats, zero below the diagonal), and the first min(m, k) entries of ``Qᵀb``.
    Column i's reflector is ``H = I − v vᵀ / (α·|v₀|)``, ``v = x − β e₀``, ``β = −sign(x₀)·α``,
    ``α = ‖x‖`` (Lawson and Hanson, ch. 10; ``vᵀv = 2α|v₀|``); every dot product by :func:`dot`."""
    m = len(cols[0]) if len(cols) else (0 if b is None else len(b))
    k = len(cols)
    work = [np.array(c, dtype=float) for c in cols]  # copies: reflected in place
    bw = None if b is None else np.array(b, dtype=float)
    rows = min(m, k)
    R = [[0.0] * k for _ in range(rows)]
    qb = [0.0] * rows
    for i in range(rows):
        v = work[i][i:]
        alpha = math.sqrt(dot(v, v))
        if alpha == 0.0:  # nothing left in this column: no reflection
            for j in range(i + 1, k):
                R[i][j] = float(work[j][i])
            if bw is not None:
                qb[i] = float(bw[i])
            continue
        x0 = float(v[0])
        beta = -alpha if x0 >= 0.0 else alpha
        v[0] = x0 - beta  # |x₀| + α: no cancellation
        half = alpha * abs(float(v[0]))  # vᵀv / 2
        R[i][i] = beta
        for j in range(i + 1, k):
            a = work[j][i:]  # a view: reflected in place
            a -= (dot(v, a) / half) * v
            R[i][j] = float(a[0])
        if bw is not None:
            a = bw[i:]
            a -= (dot(v, a) / half) * v
            qb[i] = float(a[0])
    return R, qb


def _lstsq(A: list[list[float]], b: list[float], cols: Sequence[int]) -> list[float]:
    """``min ‖A[:, cols] z − b‖`` for a small dense ``A`` (rows as lists): Householder QR and
    back-substitution.  A column whose diagonal vanishes (``|r_ii| ≤ ε · max(m, k) · max|r_jj|``,
    numerically dependent on the ones before it) gets 0: the basic solution."""
    k = len(cols)
    R, qb = qr([np.array([row[j] for row in A], dtype=float) for j in cols], np.array(b, dtype=float))
    z = [0.0] * k
    dmax = max((abs(R[i][i]) for i in range(len(R))), default=0.0)
    floor = dmax * _EPS * max(len(b), k)
    for i in reversed(range(len(R))):
        if not abs(R[i][i]) > floor:
            continue
        z[i] = math.fsum([qb[i], *(-R[i][j] * z[j] for j in range(i + 1, k))]) / R[i][i]
    return z


def _lh(A: list[list[float]], b: list[float], n: int, *, scale: float | None = None,
        max_iter: int | None = None) -> list[float]:
    """``min ‖Ax − b‖`` subject to ``x ≥ 0`` for a small dense ``A`` (rows as lists, ``n``
    columns): the active-set method of Lawson and Hanson (Solving Least Squares Problems, 1974,
    ch. 23).  ``scale``: the norm the tolerance is relative to (default ‖b‖)."""
    m = len(A)
    if scale is None:
        scale = math.sqrt(math.fsum([v * v for v in b]))
    tol = 1e-12 * max(scale, sys.float_info.min)
    limit = max_iter if max_iter is not None else 3 * n + 30
    x = [0.0] * n
    passive = [False] * n
    blocked = [False] * n  # entered with a non-positive solution: skipped until x moves

    def solve() -> list[float]:
        cols = [j for j in range(n) if passive[j]]
        z = [0.0] * n
        for j, v in zip(cols, _lstsq(A, b, cols) if cols else []):
            z[j] = v
        return z

    def fail() -> SerqError:
        return SerqError("non-negative least squares did not converge (the terms may be collinear)")

    it = 0
    while True:
        r = [math.fsum([b[i], *(-A[i][j] * x[j] for j in range(n))]) for i in range(m)]
        w = [math.fsum([A[i][j] * r[i] for i in range(m)]) for j in range(n)]
        cand = [j for j in range(n) if not passive[j] and not blocked[j] and w[j] > tol]
        if not cand:
            return x
        it += 1
        if it > limit:
            raise fail()
        j = max(cand, key=lambda c: w[c])  # the first of the largest
        passive[j] = True
        z = solve()
        if not z[j] > 0.0:  # no progress along j (rounding): leave it out until x changes
            passive[j] = False
            blocked[j] = True
            continue
        blocked = [False] * n
        while not all(z[c] > 0.0 for c in range(n) if passive[c]):
            it += 1
            if it > limit:
                raise fail()
            # step back to the boundary: the largest step keeping every passive x ≥ 0
            neg = [c for c in range(n) if passive[c] and z[c] <= 0.0]
            ratios = [x[c] / (x[c] - z[c]) if x[c] - z[c] > 0.0 else 0.0 for c in neg]
            q = min(range(len(neg)), key=lambda i: ratios[i])  # the first of the smallest
            step = ratios[q]
            x = [x[c] + step * (z[c] - x[c]) for c in range(n)]
            x[neg[q]] = 0.0  # the variable that reached the boundary leaves (exactly, whatever the rounding)
            passive = [passive[c] and x[c] > 0.0 for c in range(n)]
            x = [x[c] if passive[c] else 0.0 for c in range(n)]
            z = solve()
        x = z


def _reduced(cols: Sequence[np.ndarray], b: np.ndarray) -> tuple[list[float], list[list[float]], list[float]]:
    """The least-squares problem ``min ‖Ax − b‖`` (``A``'s columns ``cols``) reduced to its
    triangular factor with unit-norm columns: ``(norms, Rs, c)`` such that
    ``‖Ax − b‖² = ‖Rs·(norms ∘ x) − c‖² + const``.  Householder QR is column-wise backward
    stable, so scaling the columns of ``R`` is scaling those of ``A`` (the terms' scales differ
    by orders of magnitude); a zero column keeps the scale 1."""
    R, c = qr(cols, b)
    k = len(cols)
    norms = []
    for j in range(k):
        nj = math.sqrt(math.fsum([row[j] * row[j] for row in R]))
        norms.append(nj if nj > 0.0 else 1.0)
    return norms, [[row[j] / norms[j] for j in range(k)] for row in R], c


def _polish(Rs: list[list[float]], c: list[float], z: list[float]) -> list[float]:
    """The unconstrained least squares on the columns NNLS left positive, if it keeps them all
    positive (the same answer, to the last digits: an NNLS may stop a little short)."""
    cols = [j for j, v in enumerate(z) if v > 0.0]
    if not cols:
        return z
    sol = _lstsq(Rs, c, cols)
    if not all(v > 0.0 for v in sol):
        return z
    out = [0.0] * len(z)
    for j, v in zip(cols, sol):
        out[j] = v
    return out


def _solve_builtin(cols: Sequence[np.ndarray], b: np.ndarray, bnorm: float, *, polish: bool = True) -> list[float]:
    """Non-negative least squares, machine-independent: the reduction, Lawson–Hanson, the polish."""
    norms, Rs, c = _reduced(cols, b)
    z = _lh(Rs, c, len(cols), scale=bnorm)
    if polish:
        z = _polish(Rs, c, z)
    return [zj / nj for zj, nj in zip(z, norms)]


# -- SciPy's solver (--solver scipy) -------------------------------------------------------------


def _nnls_scipy(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """scipy.optimize.nnls on the columns scaled to unit norm, a tall system first reduced to its
    triangular factor by numpy's QR.  Compiled code and BLAS: the last digits may differ across
    machines."""
    from scipy.optimize import nnls as scipy_nnls

    norms = np.sqrt((A * A).sum(axis=0))
    norms[norms == 0.0] = 1.0
    As = A / norms
    if As.shape[0] > 2 * As.shape[1]:  # the same minimiser on R x = Qᵀb (‖Ax − b‖² = ‖Rx − Qᵀb‖² + const)
        Q, R = np.linalg.qr(As)
        As, b = R, Q.T @ b
    return np.asarray(scipy_nnls(As, b)[0], dtype=float) / norms


def _polish_scipy(A: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """:func:`_polish` for ``--solver scipy``, with numpy's least squares on the full columns."""
    cols = np.flatnonzero(x > 0.0)
    if not len(cols):
        return x
    norms = np.sqrt((A[:, cols] ** 2).sum(axis=0))
    z = np.linalg.lstsq(A[:, cols] / norms, b, rcond=None)[0] / norms
    if (z > 0.0).all():
        out = np.zeros_like(x)
        out[cols] = z
        return out
    return x


# -- the solvers ---------------------------------------------------------------------------------

#: The NNLS solvers: ``builtin`` (machine-independent, the default) and ``scipy``.
SOLVERS = ("builtin", "scipy")
#: Other names accepted for a solver: ``auto`` (the default's old name) and ``numpy`` (the
#: built-in solver's old name).
SOLVER_ALIASES = {"auto": "builtin", "numpy": "builtin"}


def solver_name(method: str) -> str:
    """The solver a ``method`` names (``builtin`` or ``scipy``); ValueError for another."""
    name = SOLVER_ALIASES.get(method, method)
    if name not in SOLVERS:
        raise ValueError(f"nnls method {method!r}: expected builtin or scipy (auto and numpy: builtin)")
    return name


def nnls_builtin(A: np.ndarray, b: np.ndarray, *, max_iter: int | None = None) -> np.ndarray:
    """min ‖Ax − b‖ subject to x ≥ 0 on ``A`` as it is (no scaling, no reduction): Lawson and
    Hanson's active-set method in machine-independent arithmetic (:func:`_lh`)."""
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    return np.asarray(_lh(A.tolist(), b.tolist(), A.shape[1], max_iter=max_iter), dtype=float)


def nnls(A: np.ndarray, b: np.ndarray, method: str = "builtin") -> np.ndarray:
    """Non-negative least squares: ``builtin`` (Lawson–Hanson in machine-independent arithmetic,
    on the problem reduced by Householder QR with unit-norm columns: :func:`_reduced`; ``auto``
    and ``numpy`` are other names for it) or ``scipy`` (scipy.optimize.nnls on the same scaling
    and numpy's QR; its last digits may differ across machines)."""
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    if solver_name(method) == "scipy":
        return _nnls_scipy(A, b)
    cols = [A[:, j] for j in range(A.shape[1])]
    return np.asarray(_solve_builtin(cols, b, math.sqrt(dot(b, b)), polish=False), dtype=float)


def solve_nnls(cols: Sequence[np.ndarray], b: np.ndarray, method: str, bnorm: float) -> list[float]:
    """NNLS then the polish, by the solver ``method`` (``builtin`` or ``scipy``)."""
    if method == "scipy":
        A = np.column_stack(cols)
        return [float(v) for v in _polish_scipy(A, b, _nnls_scipy(A, b))]
    return _solve_builtin(cols, b, bnorm)

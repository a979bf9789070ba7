"""``serq fit``: a step stage's cost fitted to measured iterations (docs/calibration.md).

The input is a CSV with a ``duration`` column (seconds) and any of the step
context variables (``tokens``, ``decoders``, ``prefilled``, ``kv_decode``,
``kv_prefill``, ``attention``, ``residents``; other numeric columns may be
used as terms too): a step log of ``serq run --dump DIR --steps``, or one made
from a real engine's measurements.  Two models:

* **linear** (``--terms c,decoders,kv_decode``): ``duration = k_c + Σ k_T · T``
  over the chosen terms, ``c`` the constant.  The constants print as ``let``
  lines named ``k_c`` and ``k_T`` (a ``let`` may not take a context variable's
  name, and ``c`` is a session attribute in lib/vllm.sq), with the ``cost``
  expression that uses them.
* **roofline** (``--roofline``): ``duration = c0 + max(omega + beta · kv,
  a · tokens)`` with ``kv = kv_decode + kv_prefill``, the bundled programs'
  cost; the constants print as ``let`` lines and as their ``--set`` flags.

Every coefficient is non-negative (non-negative least squares: SciPy's
``nnls`` when SciPy is installed, the ``fit`` extra, otherwise the
Lawson–Hanson active-set method in numpy below; both give the same answer).
The roofline form is fitted by alternation: each row is assigned to the
branch of the ``max`` that is larger under the current constants, the four
constants are refitted by NNLS on that assignment (a linear model:
``c0 + omega·[memory] + beta·kv·[memory] + a·tokens·[compute]``), until the
assignment no longer changes.  The alternation starts from several fixed
assignments (the rows with the most tokens on the compute branch, at the
token quantiles 0.5 … 0.99, and none) and keeps the fit of least residual sum
of squares, the first on a tie: the result is deterministic.

``--relative`` weights each row by ``1 / duration``: it minimises the
squared relative residuals, the right weighting when the noise grows with the
duration (measured step times), and the intervals follow the weighted model.

Statistics: R² and the mean absolute percentage error (rows with a zero
duration left out), and for each coefficient not clamped at 0 its standard
error ``sqrt(s² · diag((XᵀX)⁻¹))`` over the active columns, ``s²`` the
residual variance ``RSS / (n − p)``, and the 95 % interval ``± t(0.975, n − p) ·
se`` (for the roofline, conditional on the final branch assignment).  A
coefficient clamped at 0 has no interval.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .errors import SerqError, suggest

#: The step context variables a step log carries (language §4).
CONTEXT = ("tokens", "decoders", "prefilled", "kv_decode", "kv_prefill", "attention", "residents")
#: The bundled programs' constant names in the roofline form.
ROOFLINE_NAMES = ("a", "omega", "beta", "c0")


# -- non-negative least squares ---------------------------------------------------------------


def nnls_numpy(A: np.ndarray, b: np.ndarray, *, max_iter: int | None = None) -> np.ndarray:
    """min ‖Ax − b‖ subject to x ≥ 0: the active-set method of Lawson and
    Hanson (Solving Least Squares Problems, 1974, ch. 23), in numpy."""
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    m, n = A.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    blocked = np.zeros(n, dtype=bool)  # entered with a non-positive solution: skipped until x moves
    tol = 1e-12 * max(float(np.linalg.norm(b)), np.finfo(float).tiny)
    limit = max_iter if max_iter is not None else 3 * n + 30

    def solve(mask: np.ndarray) -> np.ndarray:
        z = np.zeros(n)
        cols = np.flatnonzero(mask)
        if len(cols):
            z[cols] = np.linalg.lstsq(A[:, cols], b, rcond=None)[0]
        return z

    it = 0
    while True:
        w = A.T @ (b - A @ x)
        cand = ~passive & ~blocked & (w > tol)
        if not cand.any():
            return x
        it += 1
        if it > limit:
            raise SerqError("non-negative least squares did not converge (the terms may be collinear)")
        j = int(np.argmax(np.where(cand, w, -np.inf)))
        passive[j] = True
        z = solve(passive)
        if not z[j] > 0.0:  # no progress along j (rounding): leave it out until x changes
            passive[j] = False
            blocked[j] = True
            continue
        blocked[:] = False
        while not (z[passive] > 0.0).all():
            it += 1
            if it > limit:
                raise SerqError("non-negative least squares did not converge (the terms may be collinear)")
            # step back to the boundary: the largest step keeping every passive x ≥ 0
            neg = np.flatnonzero(passive & (z <= 0.0))
            den = x[neg] - z[neg]
            ratios = np.where(den > 0.0, x[neg] / np.where(den > 0.0, den, 1.0), 0.0)
            k = int(np.argmin(ratios))
            x = x + float(ratios[k]) * (z - x)
            x[neg[k]] = 0.0  # the variable that reached the boundary leaves (exactly, whatever the rounding)
            passive &= x > 0.0
            x[~passive] = 0.0
            z = solve(passive)
        x = z


def nnls(A: np.ndarray, b: np.ndarray, method: str = "auto") -> np.ndarray:
    """Non-negative least squares: ``scipy`` (scipy.optimize.nnls), ``numpy``
    (:func:`nnls_numpy`) or ``auto`` (SciPy when it is installed).  The
    columns are scaled to unit norm first (the terms' scales differ by orders
    of magnitude) and the result scaled back; a tall system is reduced to its
    triangular factor first (a QR decomposition), which has the same minimiser."""
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    norms = np.sqrt((A * A).sum(axis=0))
    norms[norms == 0.0] = 1.0
    As = A / norms
    if As.shape[0] > 2 * As.shape[1]:  # the same minimiser on R x = Qᵀb (‖Ax − b‖² = ‖Rx − Qᵀb‖² + const)
        Q, R = np.linalg.qr(As)
        As, b = R, Q.T @ b
    if method == "auto":
        try:
            import scipy.optimize  # noqa: F401
            method = "scipy"
        except ImportError:
            method = "numpy"
    if method == "scipy":
        from scipy.optimize import nnls as scipy_nnls

        x = scipy_nnls(As, b)[0]
    elif method == "numpy":
        x = nnls_numpy(As, b)
    else:
        raise ValueError(f"nnls method {method!r}: expected auto, scipy or numpy")
    return np.asarray(x, dtype=float) / norms


def _polish(A: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The unconstrained least squares on the columns NNLS left positive (the
    same answer, to the last digits: NNLS's own solve may stop a little short)."""
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


def t_quantile(p: float, dof: float, *, exact: bool = True) -> float:
    """The ``p`` quantile of Student's t with ``dof`` degrees of freedom:
    SciPy's when installed, else the Cornish–Fisher expansion about the
    normal quantile (error below 1e-3 from 5 degrees of freedom on)."""
    if not dof > 0:
        return math.nan
    try:
        if not exact:
            raise ImportError
        from scipy.special import stdtrit

        return float(stdtrit(dof, p))
    except ImportError:
        pass
    from statistics import NormalDist

    z = NormalDist().inv_cdf(p)
    v = float(dof)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3)
            + (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / (92160 * v ** 4))


# -- reading -----------------------------------------------------------------------------------


def read_csv(path: str | os.PathLike[str]) -> tuple[list[str], dict[str, np.ndarray]]:
    """A step log's columns: the header and each column as floats.  A missing
    ``duration`` column, a row of the wrong width or a value that is not a
    finite number is an error ``FILE:LINE: …``."""
    name = os.fspath(path)
    try:
        f = open(name, newline="", encoding="utf-8")
    except OSError as err:
        raise SerqError(f"{name}: cannot read: {err.strerror or err}") from None
    with f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise SerqError(f"{name}:1: empty file: expected a header with a `duration` column") from None
        except (csv.Error, UnicodeDecodeError) as err:
            raise SerqError(f"{name}:1: {err}") from None
        header = [h.strip() for h in header]
        if "duration" not in header:
            hint = suggest("duration", header)
            raise SerqError(f"{name}:1: no `duration` column in the header ({', '.join(header)})",
                            helps=[f"did you mean `{hint}`?"] if hint else
                            ["the step log of `serq run --dump DIR --steps` has one"])
        seen = set()
        for h in header:
            if h in seen or not h:
                raise SerqError(f"{name}:1: " + (f"column `{h}` appears twice" if h else "an empty column name"))
            seen.add(h)
        width = len(header)
        cols: list[list[float]] = [[] for _ in header]
        line = 1
        try:
            for row in reader:
                line = reader.line_num
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                if len(row) != width:
                    raise SerqError(f"{name}:{line}: {len(row)} fields, the header has {width}")
                for k, cell in enumerate(row):
                    try:
                        v = float(cell)
                    except ValueError:
                        raise SerqError(f"{name}:{line}: `{header[k]}` is `{cell.strip()}`, not a number") from None
                    if not math.isfinite(v):
                        raise SerqError(f"{name}:{line}: `{header[k]}` is `{cell.strip()}`, not a finite number")
                    cols[k].append(v)
        except (csv.Error, UnicodeDecodeError) as err:
            raise SerqError(f"{name}:{line + 1}: {err}") from None
    if not cols[0]:
        raise SerqError(f"{name}:2: no rows after the header")
    return header, {h: np.asarray(c, dtype=float) for h, c in zip(header, cols)}


# -- fitting -----------------------------------------------------------------------------------


@dataclass
class Coef:
    """One fitted constant: its ``let`` name, the term it multiplies, the
    value, standard error and 95 % interval (NaN when clamped at 0)."""

    name: str
    term: str
    value: float
    se: float
    lo: float
    hi: float
    clamped: bool

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return None if math.isnan(x) else float(x)
        return {"name": self.name, "term": self.term, "value": float(self.value), "se": num(self.se),
                "ci95": None if self.clamped else [num(self.lo), num(self.hi)], "clamped": self.clamped}


@dataclass
class Fit:
    """A fit's constants and figures."""

    model: str  # "linear" or "roofline"
    source: str
    rows: int
    coefs: list[Coef]
    r2: float
    mape: float
    rmse: float
    cost: str  # the cost expression with the `let` names
    fitted: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    branches: tuple[int, int] | None = None  # roofline: rows on the memory, compute branch
    rounds: int = 0  # roofline: alternations of the best start
    solver: str = "auto"
    relative: bool = False  # rows weighted by 1 / duration

    def value(self, name: str) -> float:
        for c in self.coefs:
            if c.name == name:
                return c.value
        raise KeyError(name)

    def lets(self) -> list[str]:
        return [f"let {c.name} = {_num(c.value)};" for c in self.coefs]

    def sets(self) -> str:
        return " ".join(f"--set {c.name}={_num(c.value)}" for c in self.coefs)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model, "source": self.source, "rows": self.rows, "cost": self.cost,
            "coefficients": [c.to_json() for c in self.coefs], "r2": _jnum(self.r2), "mape": _jnum(self.mape),
            "rmse": _jnum(self.rmse), "lets": self.lets(), "sets": self.sets(), "relative": self.relative,
        }
        if self.branches is not None:
            out["branches"] = {"memory": self.branches[0], "compute": self.branches[1]}
            out["alternations"] = self.rounds
        return out

    def text(self) -> str:
        weighting = ", relative (rows weighted by 1/duration)" if self.relative else ""
        lines = [f"fit of {self.source}: {self.rows} rows, {self.model} model{weighting}",
                 f"  duration = {self.cost}"]
        if self.branches is not None:
            lines.append(f"  branches: memory {self.branches[0]} rows, compute {self.branches[1]} rows "
                         f"({self.rounds} alternations)")
        lines.append("")
        width = max(4, *(len(c.name) for c in self.coefs))
        lines.append(f"{'name':<{width}}  {'term':<22}  {'value':>14}  {'std err':>11}  95% interval")
        for c in self.coefs:
            if c.clamped:
                tail = f"{'-':>11}  clamped at 0"
            else:
                tail = f"{_num(c.se, 4):>11}  [{_num(c.lo, 6)}, {_num(c.hi, 6)}]"
            lines.append(f"{c.name:<{width}}  {c.term:<22}  {_num(c.value):>14}  {tail}")
        lines.append("")
        lines.append(f"R² {self.r2:.9f}   MAPE {self.mape:.4g} %   RMSE {_num(self.rmse, 4)} s")
        lines.append("")
        lines.extend(self.lets())
        if self.model == "roofline":
            lines.append("")
            lines.append(self.sets())
        else:
            lines.append(f"// cost {self.cost};")
        return "\n".join(lines) + "\n"


def _num(x: float, digits: int = 10) -> str:
    if math.isnan(x):
        return "nan"
    return f"{x:.{digits}g}"


def _jnum(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _column(cols: dict[str, np.ndarray], header: Sequence[str], term: str, source: str) -> np.ndarray:
    if term in cols:
        return cols[term]
    avail = [h for h in header if h not in ("duration", "time")]
    hint = suggest(term, avail)
    raise SerqError(f"{source}: no column `{term}` for the term `{term}` (the file has {', '.join(avail) or 'none'})",
                    helps=[f"did you mean `{hint}`?"] if hint else [])


def _figures(y: np.ndarray, fitted: np.ndarray) -> tuple[float, float, float]:
    resid = y - fitted
    rss = float(resid @ resid)
    tss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - rss / tss if tss > 0 else (1.0 if rss == 0 else math.nan)
    nz = y != 0.0
    mape = float(np.mean(np.abs(resid[nz] / y[nz])) * 100.0) if nz.any() else math.nan
    rmse = math.sqrt(rss / len(y))
    return r2, mape, rmse


def _intervals(X: np.ndarray, y: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standard errors and the 95 % half-widths of the active coefficients
    (NaN for the clamped ones and when no degree of freedom is left)."""
    n, p = X.shape
    se = np.full(p, math.nan)
    half = np.full(p, math.nan)
    act = np.flatnonzero(x > 0.0)
    dof = n - len(act)
    if len(act) and dof > 0:
        resid = y - X @ x
        s2 = float(resid @ resid) / dof
        Xa = X[:, act]
        norms = np.sqrt((Xa * Xa).sum(axis=0))
        Xs = Xa / norms
        try:
            inv = np.linalg.inv(Xs.T @ Xs)
        except np.linalg.LinAlgError:
            inv = np.linalg.pinv(Xs.T @ Xs)
        var = np.clip(np.diag(inv), 0.0, None) * s2 / norms ** 2
        se[act] = np.sqrt(var)
        half[act] = t_quantile(0.975, dof) * se[act]
    return se, half


def _coefs(names: Sequence[str], terms: Sequence[str], x: np.ndarray, se: np.ndarray,
           half: np.ndarray) -> list[Coef]:
    out = []
    for k, (name, term) in enumerate(zip(names, terms)):
        clamped = not x[k] > 0.0
        out.append(Coef(name, term, float(x[k]), float(se[k]), float(x[k] - half[k]), float(x[k] + half[k]),
                        clamped))
    return out


def let_name(term: str) -> str:
    """The ``let`` name of a linear term's coefficient: ``k_TERM`` (``k_c``
    for the constant ``c``): a ``let`` may not take a context variable's
    name, and a plain ``c`` is a session attribute of lib/vllm.sq's requests."""
    return f"k_{term}"


def _weights(y: np.ndarray, relative: bool) -> np.ndarray | None:
    """Row weights ``1 / duration`` for a relative fit (None: unweighted)."""
    if not relative:
        return None
    bad = np.flatnonzero(~(y > 0.0))
    if len(bad):
        raise SerqError(f"--relative: row {int(bad[0]) + 1} of the data has duration {y[bad[0]]:g}; "
                        "a relative fit needs every duration > 0")
    return 1.0 / y


def fit_linear(cols: dict[str, np.ndarray], header: Sequence[str], terms: Sequence[str], *,
               source: str = "the data", method: str = "auto", relative: bool = False) -> Fit:
    """``duration = Σ coef · term`` by NNLS; the term ``c`` is the constant.
    ``relative``: minimise the squared *relative* residuals (rows weighted by
    ``1 / duration``), for noise proportional to the duration."""
    if not terms:
        raise SerqError("--terms: no terms; expected e.g. c,decoders,kv_decode")
    if len(set(terms)) != len(terms):
        raise SerqError(f"--terms: a term appears twice in {','.join(terms)}")
    y = cols["duration"]
    n = len(y)
    X = np.column_stack([np.ones(n) if t == "c" else _column(cols, header, t, source) for t in terms])
    w = _weights(y, relative)
    Xw, yw = (X, y) if w is None else (X * w[:, None], y * w)
    x = _polish(Xw, yw, nnls(Xw, yw, method))
    fitted = X @ x
    se, half = _intervals(Xw, yw, x)
    r2, mape, rmse = _figures(y, fitted)
    names = [let_name(t) for t in terms]
    cost = " + ".join(n_ if t == "c" else f"{n_} * {t}" for n_, t in zip(names, terms))  # k_c + k_T * T …
    return Fit("linear", source, n, _coefs(names, terms, x, se, half), r2, mape, rmse, cost, fitted, y,
               solver=method, relative=relative)


def fit_roofline(cols: dict[str, np.ndarray], header: Sequence[str], *, c0: bool = True,
                 source: str = "the data", method: str = "auto", max_rounds: int = 100,
                 relative: bool = False) -> Fit:
    """``duration = c0 + max(omega + beta·kv, a·tokens)`` by alternating
    branch assignment and NNLS (see the module's docstring); ``relative`` as
    :func:`fit_linear`."""
    y = cols["duration"]
    n = len(y)
    w = _weights(y, relative)
    tokens = _column(cols, header, "tokens", source)
    have = [h for h in ("kv_decode", "kv_prefill") if h in cols]
    if not have:
        _column(cols, header, "kv_decode", source)  # the error, with a hint
    kv = sum((cols[h] for h in have), np.zeros(n))
    ones = np.ones(n)

    def design(mem: np.ndarray) -> np.ndarray:
        memf = mem.astype(float)
        parts = [tokens * (1.0 - memf), memf, kv * memf]  # a, omega, beta
        if c0:
            parts.append(ones)
        return np.column_stack(parts)

    def solve(mem: np.ndarray) -> np.ndarray:
        X = design(mem)
        if w is not None:
            X, yy = X * w[:, None], y * w
            return _polish(X, yy, nnls(X, yy, method))
        return _polish(X, y, nnls(X, y, method))

    def assign(x: np.ndarray) -> np.ndarray:
        return x[1] + x[2] * kv >= x[0] * tokens

    starts = [tokens <= np.quantile(tokens, q) for q in (0.5, 0.75, 0.9, 0.95, 0.99)]
    starts.append(np.ones(n, dtype=bool))
    best: tuple[float, np.ndarray, np.ndarray, int] | None = None
    for mem in starts:
        seen: set[bytes] = set()
        x = solve(mem)
        rounds = 1
        while rounds < max_rounds:
            new = assign(x)
            if np.array_equal(new, mem):
                break
            key = np.packbits(new).tobytes()
            if key in seen:  # a cycle: keep the better of its fits below
                break
            seen.add(key)
            mem = new
            x = solve(mem)
            rounds += 1
        fitted = (x[3] if c0 else 0.0) + np.maximum(x[1] + x[2] * kv, x[0] * tokens)
        r = y - fitted if w is None else (y - fitted) * w
        rss = float(r @ r)
        if best is None or rss < best[0]:
            best = (rss, x, assign(x), rounds)
    assert best is not None
    _rss, x, mem, rounds = best
    X = design(mem)
    fitted = X @ x
    se, half = _intervals(X, y, x) if w is None else _intervals(X * w[:, None], y * w, x)
    r2, mape, rmse = _figures(y, fitted)
    names = ["a", "omega", "beta"] + (["c0"] if c0 else [])
    terms = ["tokens [compute]", "1 [memory]", "kv [memory]"] + (["1"] if c0 else [])
    kvtext = " + ".join(have) if len(have) > 1 else have[0]
    cost = f"{'c0 + ' if c0 else ''}max(omega + beta * ({kvtext}), tokens * a)"
    nmem = int(mem.sum())
    return Fit("roofline", source, n, _coefs(names, terms, x, se, half), r2, mape, rmse, cost, fitted, y,
               branches=(nmem, n - nmem), rounds=rounds, solver=method, relative=relative)


def plot_residuals(fit: Fit, out: str) -> None:
    """A residual plot (residual against fitted duration, and the relative
    residual against fitted) into ``out`` (.svg or .png); needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SerqError(f"--plot {out}: the residual plot needs matplotlib, which is not installed",
                        helps=["install the plot extra: pip install 'serq[plot]'"]) from None
    resid = fit.y - fit.fitted
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].scatter(fit.fitted, resid, s=3, alpha=0.4, rasterized=True)
    axes[0].axhline(0.0, color="k", lw=0.8)
    axes[0].set_xlabel("fitted duration (s)")
    axes[0].set_ylabel("residual (s)")
    axes[0].set_xscale("log")
    nz = fit.y != 0.0
    axes[1].scatter(fit.fitted[nz], 100.0 * resid[nz] / fit.y[nz], s=3, alpha=0.4, rasterized=True)
    axes[1].axhline(0.0, color="k", lw=0.8)
    axes[1].set_xlabel("fitted duration (s)")
    axes[1].set_ylabel("residual (% of measured)")
    axes[1].set_xscale("log")
    fig.suptitle(f"{fit.source}: {fit.model} fit, R² {fit.r2:.6f}, MAPE {fit.mape:.3g} %")
    fig.tight_layout()
    try:
        fig.savefig(out)
    except OSError as err:
        raise SerqError(f"cannot write {out}: {err.strerror or err}") from None
    finally:
        plt.close(fig)

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

Every coefficient is non-negative (non-negative least squares).  The default
solver, ``builtin``, is the Lawson–Hanson active-set method on a Householder QR
reduction, written in machine-independent arithmetic
(:mod:`serq.calibration.linalg`): the same file prints the same digits on every
machine.  ``scipy`` (``scipy.optimize.nnls``, the ``fit`` extra) gives the same
answer to rounding, but its compiled code and numpy's BLAS may change the last
digits from one processor to another.

The roofline form is fitted by alternation: each row is assigned to the
branch of the ``max`` that is larger under the current constants, the four
constants are refitted by NNLS on that assignment (a linear model:
``c0 + omega·[memory] + beta·kv·[memory] + a·tokens·[compute]``), until the
assignment no longer changes.  The alternation starts from several fixed
assignments (the rows with the most tokens on the compute branch, above the
order statistics at the percentiles 50 … 99, and none) and keeps the fit of
least residual sum of squares, the first on a tie: the result is deterministic.

``--relative`` weights each row by ``1 / duration``: it minimises the
squared relative residuals, the right weighting when the noise grows with the
duration (measured step times), and the intervals follow the weighted model.

Statistics: R² and the mean absolute percentage error (rows with a zero
duration left out), and for each coefficient not clamped at 0 its standard
error ``sqrt(s² · diag((XᵀX)⁻¹))`` over the active columns, ``s²`` the
residual variance ``RSS / (n − p)``, and the 95 % interval ``± t(0.975, n − p) ·
se``, ``t`` by :func:`serq.experiments.stats.t_quantile` (for the roofline,
conditional on the final branch assignment).  A coefficient clamped at 0 has
no interval.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import SerqError, suggest
from .linalg import array_sum, combine, dot, qr, solve_nnls, solver_name

#: The step context variables a step log carries (language §4).
CONTEXT = ("tokens", "decoders", "prefilled", "kv_decode", "kv_prefill", "attention", "residents")
#: The bundled programs' constant names in the roofline form.
ROOFLINE_NAMES = ("a", "omega", "beta", "c0")


# -- reading -----------------------------------------------------------------------------------


#: The largest magnitude a step log's value may have, and the inverse the smallest duration of a
#: relative fit: every value a fit squares (divided by a duration) and sums stays far inside the floats.
_LARGEST = 1e50


def read_csv(path: str | os.PathLike[str]) -> tuple[list[str], dict[str, np.ndarray]]:
    """A step log's columns (``-``: standard input): the header and each column as floats.  A missing
    ``duration`` column, a row of the wrong width or a value that is not a
    finite number is an error ``FILE:LINE: …``."""
    name = os.fspath(path)
    try:
        if name == "-":  # standard input
            import sys

            name = "<stdin>"
            f = open(sys.stdin.fileno(), newline="", encoding="utf-8", closefd=False)
        else:
            f = open(name, newline="", encoding="utf-8")
    except (OSError, ValueError, AttributeError) as err:
        raise SerqError(f"cannot read `{name}`: {getattr(err, 'strerror', None) or err}") from None
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
        dur = header.index("duration")
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
                    if not abs(v) <= _LARGEST:
                        raise SerqError(f"{name}:{line}: `{header[k]}` is `{cell.strip()}`, beyond ±{_LARGEST:g}",
                                        helps=["a fit squares and sums each column (divided by the durations "
                                               "with --relative): values this large leave the floats"])
                    if k == dur and v < 0.0:
                        raise SerqError(f"{name}:{line}: `duration` is `{cell.strip()}`, a negative time")
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
    solver: str = "builtin"
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
    """R², MAPE (%) and RMSE, every sum by math.fsum."""
    n = len(y)
    resid = y - fitted
    rss = dot(resid, resid)
    dev = y - array_sum(y) / n
    tss = dot(dev, dev)
    r2 = 1.0 - rss / tss if tss > 0 else (1.0 if rss == 0 else math.nan)
    nz = y != 0.0
    count = int(np.count_nonzero(nz))
    mape = array_sum(np.abs(resid[nz] / y[nz])) / count * 100.0 if count else math.nan
    rmse = math.sqrt(rss / n)
    return r2, mape, rmse


def _intervals(X: Sequence[np.ndarray], y: np.ndarray, x: Sequence[float]) -> tuple[list[float], list[float]]:
    """Standard errors and the 95 % half-widths of the active coefficients (NaN for the clamped
    ones, when no degree of freedom is left, and when the active columns are exactly collinear).
    ``diag((XᵀX)⁻¹)`` over the active columns, scaled to unit norm, from the Householder factor:
    ``(RᵀR)⁻¹ = R⁻¹R⁻ᵀ``, so the diagonal is the squared norms of ``R⁻¹``'s rows."""
    from ..experiments.stats import t_quantile

    p, n = len(X), len(y)
    se = [math.nan] * p
    half = [math.nan] * p
    act = [j for j in range(p) if x[j] > 0.0]
    k = len(act)
    dof = n - k
    if not k or dof <= 0:
        return se, half
    resid = y - combine(X, x)
    s2 = dot(resid, resid) / dof
    R, _ = qr([X[j] for j in act])
    norms = [math.sqrt(math.fsum([row[j] * row[j] for row in R])) for j in range(k)]
    if len(R) < k or not all(R[i][i] != 0.0 and norms[i] > 0.0 for i in range(k)):
        return se, half
    Rs = [[row[j] / norms[j] for j in range(k)] for row in R]
    inv = [[0.0] * k for _ in range(k)]  # Rs⁻¹, upper triangular: Rs · inv = I by back-substitution
    for col in range(k):
        for i in range(col, -1, -1):
            acc = math.fsum([1.0 if i == col else 0.0, *(-Rs[i][j] * inv[j][col] for j in range(i + 1, col + 1))])
            inv[i][col] = acc / Rs[i][i]
    t = t_quantile(0.975, dof)
    for i, j in enumerate(act):
        d = math.fsum([inv[i][c] * inv[i][c] for c in range(i, k)])
        se[j] = math.sqrt(d * s2 / (norms[i] * norms[i]))
        half[j] = t * se[j]
    return se, half


def _coefs(names: Sequence[str], terms: Sequence[str], x: Sequence[float], se: Sequence[float],
           half: Sequence[float]) -> list[Coef]:
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
    bad = np.flatnonzero(~(y >= 1.0 / _LARGEST))
    if len(bad):
        raise SerqError(f"--relative: row {int(bad[0]) + 1} of the data has duration {y[bad[0]]:g}; "
                        f"a relative fit needs every duration at least {1.0 / _LARGEST:g} (it divides by them)")
    return 1.0 / y


def fit_linear(cols: dict[str, np.ndarray], header: Sequence[str], terms: Sequence[str], *,
               source: str = "the data", method: str = "builtin", relative: bool = False) -> Fit:
    """``duration = Σ coef · term`` by NNLS; the term ``c`` is the constant.
    ``relative``: minimise the squared *relative* residuals (rows weighted by
    ``1 / duration``), for noise proportional to the duration.  ``method``:
    the NNLS solver (:func:`solver_name`)."""
    method = solver_name(method)
    if not terms:
        raise SerqError("--terms: no terms; expected e.g. c,decoders,kv_decode")
    if len(set(terms)) != len(terms):
        raise SerqError(f"--terms: a term appears twice in {','.join(terms)}")
    y = np.asarray(cols["duration"], dtype=float)
    n = len(y)
    X = [np.ones(n) if t == "c" else np.asarray(_column(cols, header, t, source), dtype=float) for t in terms]
    w = _weights(y, relative)
    Xw, yw = (X, y) if w is None else ([col * w for col in X], y * w)
    x = solve_nnls(Xw, yw, method, math.sqrt(dot(yw, yw)))
    fitted = combine(X, x)
    se, half = _intervals(Xw, yw, x)
    r2, mape, rmse = _figures(y, fitted)
    names = [let_name(t) for t in terms]
    cost = " + ".join(n_ if t == "c" else f"{n_} * {t}" for n_, t in zip(names, terms))  # k_c + k_T * T …
    return Fit("linear", source, n, _coefs(names, terms, x, se, half), r2, mape, rmse, cost, fitted, y,
               solver=method, relative=relative)


#: The roofline's starting assignments: the rows whose token count is at most this percentile
#: (an order statistic, see :func:`roofline_starts`) on the memory branch, the others on compute.
START_PERCENTILES = (50, 75, 90, 95, 99)


def roofline_starts(tokens: np.ndarray) -> list[np.ndarray]:
    """The roofline fit's starting assignments (True: the memory branch): for P in
    :data:`START_PERCENTILES`, the rows with ``tokens ≤ t₍ₖ₎``, ``t₍ₖ₎`` the k-th smallest
    token count (0-based) for ``k = ⌊(n − 1)·P / 100⌋`` in integer arithmetic (numpy's
    ``lower`` percentile: an order statistic, no interpolation); then every row."""
    n = len(tokens)
    order = np.sort(tokens)  # a permutation: no arithmetic
    starts = [tokens <= order[(n - 1) * q // 100] for q in START_PERCENTILES]
    starts.append(np.ones(n, dtype=bool))
    return starts


def fit_roofline(cols: dict[str, np.ndarray], header: Sequence[str], *, c0: bool = True,
                 source: str = "the data", method: str = "builtin", max_rounds: int = 100,
                 relative: bool = False) -> Fit:
    """``duration = c0 + max(omega + beta·kv, a·tokens)`` by alternating
    branch assignment and NNLS (see the module's docstring); ``relative`` and
    ``method`` as :func:`fit_linear`; the starts are :func:`roofline_starts`."""
    method = solver_name(method)
    y = np.asarray(cols["duration"], dtype=float)
    n = len(y)
    w = _weights(y, relative)
    tokens = np.asarray(_column(cols, header, "tokens", source), dtype=float)
    have = [h for h in ("kv_decode", "kv_prefill") if h in cols]
    if not have:
        _column(cols, header, "kv_decode", source)  # the error, with a hint
    kv = np.asarray(cols[have[0]], dtype=float)
    for h in have[1:]:
        kv = kv + cols[h]  # kv_decode + kv_prefill, element-wise
    ones = np.ones(n)
    yw = y if w is None else y * w
    ynorm = math.sqrt(dot(yw, yw))

    def design(mem: np.ndarray) -> list[np.ndarray]:
        memf = mem.astype(float)
        parts = [tokens * (1.0 - memf), memf, kv * memf]  # a, omega, beta
        if c0:
            parts.append(ones)
        return parts if w is None else [part * w for part in parts]

    solved: dict[bytes, list[float]] = {}  # an assignment met again (from another start) is not refitted

    def solve(mem: np.ndarray) -> list[float]:
        key = np.packbits(mem).tobytes()
        if key not in solved:
            solved[key] = solve_nnls(design(mem), yw, method, ynorm)
        return solved[key]

    def assign(x: Sequence[float]) -> np.ndarray:
        return x[1] + x[2] * kv >= x[0] * tokens

    starts = roofline_starts(tokens)
    best: tuple[float, list[float], np.ndarray, int] | None = None
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
        rss = dot(r, r)
        if best is None or rss < best[0]:
            best = (rss, x, assign(x), rounds)
    assert best is not None
    _rss, x, mem, rounds = best
    Xw = design(mem)
    memf = mem.astype(float)
    fitted = combine([tokens * (1.0 - memf), memf, kv * memf] + ([ones] if c0 else []), x)
    se, half = _intervals(Xw, yw, x)
    r2, mape, rmse = _figures(y, fitted)
    names = ["a", "omega", "beta"] + (["c0"] if c0 else [])
    terms = ["tokens [compute]", "1 [memory]", "kv [memory]"] + (["1"] if c0 else [])
    kvtext = " + ".join(have) if len(have) > 1 else have[0]
    cost = f"{'c0 + ' if c0 else ''}max(omega + beta * ({kvtext}), tokens * a)"
    nmem = int(np.count_nonzero(mem))
    return Fit("roofline", source, n, _coefs(names, terms, x, se, half), r2, mape, rmse, cost, fitted, y,
               branches=(nmem, n - nmem), rounds=rounds, solver=method, relative=relative)


#: The residual plot's formats, by the suffix of its file.
PLOT_FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf"}


def check_plot(out: str) -> str:
    """``--plot FILE``'s format, checked before the fit: a known suffix, not
    ``-`` (standard output has the fit), matplotlib installed."""
    from ..errors import UsageError

    if out == "-":
        raise UsageError("--plot -: standard output has the fit; write the plot to a file (.svg, .png or .pdf)")
    fmt = PLOT_FORMATS.get(os.path.splitext(out)[1].lower())
    if fmt is None:
        raise UsageError(f"invalid --plot `{out}`: the name must end in .svg, .png or .pdf")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SerqError(f"--plot {out}: the residual plot needs matplotlib, which is not installed",
                        helps=["install the plot extra: pip install 'serq[plot]'"]) from None
    return fmt


def plot_residuals(fit: Fit, out: str) -> None:
    """A residual plot (residual against fitted duration, and the relative
    residual against fitted) into ``out`` (.svg, .png or .pdf, written
    atomically); needs matplotlib."""
    import io

    from ..files import write_bytes_atomic

    fmt = check_plot(out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
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
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=fmt, metadata={"Date": None} if fmt == "svg" else {})
    finally:
        plt.close(fig)
    try:
        write_bytes_atomic(out, buf.getvalue())
    except BrokenPipeError:
        raise
    except OSError as err:
        raise SerqError(f"cannot write {out}: {err.strerror or err}") from None

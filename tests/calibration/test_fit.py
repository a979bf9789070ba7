"""The step log (``serq run --dump DIR --steps``, ``serq.run(steps=True)``) and
``serq fit`` (docs/calibration.md)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import serq
from serq.calibration import fit as fitting
from serq.calibration import linalg
from serq.errors import SerqError
from serq.report import STEP_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
VLLM = ROOT / "programs" / "multi-turn" / "vllm.sq"
HORIZON = 300.0


def serq_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "serq", *args], capture_output=True, text=True, cwd=cwd)


def _linear_program(tmp_path: Path) -> Path:
    """vllm.sq with the linear cost of the A100 replay fit (language §10.3)."""
    text = VLLM.read_text()
    text = text.replace("let c0 = 0;", "let c0 = 0;\nlet c_it = 0.004;\nlet d = 4.1053e-5;\nlet e = 1.3786e-7;\n"
                        "let ap = 5.1527e-5;\nlet b = 4.0196e-9;")
    old = "cost c0 + max(omega + beta * (kv_decode + kv_prefill), tokens * a);"
    assert old in text
    text = text.replace(old, "cost c_it + d * decoders + e * kv_decode + ap * prefilled + b * attention;")
    path = tmp_path / "linear.sq"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def vllm_runs() -> tuple:
    plain = serq.run(VLLM, horizon=HORIZON, warmup=0.0)
    logged = serq.run(VLLM, horizon=HORIZON, warmup=0.0, steps=True)
    return plain, logged


def _have_scipy() -> bool:
    try:
        import scipy.optimize  # noqa: F401
    except ImportError:
        return False
    return True


#: The solvers to try: the built-in one, and SciPy's when it is installed.
SOLVERS = ["builtin"] + (["scipy"] if _have_scipy() else [])


def _cols(log: serq.report.StepLog) -> tuple[list[str], dict[str, np.ndarray]]:
    return list(STEP_COLUMNS), {c: np.asarray(log.column(c)) for c in STEP_COLUMNS}


# -- the step log ------------------------------------------------------------------------------


def test_steps_leave_the_report_unchanged(vllm_runs: tuple) -> None:
    # vllm.sq runs ~99 % of its iterations in coalesced runs; --steps runs them one by one
    plain, logged = vllm_runs
    assert plain.text() == logged.text()
    assert plain.to_json() == logged.to_json()
    assert plain.steps == {}
    assert list(logged.steps) == ["engine"]


def test_the_step_log_has_a_row_per_iteration_in_time_order(vllm_runs: tuple) -> None:
    _plain, logged = vllm_runs
    log = logged.steps["engine"]
    assert len(log) == logged.stage("engine").iterations > 10_000
    t = np.asarray(log.column("time"))
    d = np.asarray(log.column("duration"))
    assert (np.diff(t) > 0).all()
    assert (t[1:] >= t[:-1] + d[:-1] - 1e-12).all()  # an iteration starts when the previous has ended
    row = log[5]
    assert row._fields == STEP_COLUMNS
    assert log[-1] == log[len(log) - 1]


def test_every_duration_is_the_cost_expression_of_its_row(vllm_runs: tuple) -> None:
    _plain, logged = vllm_runs
    a, omega, beta, c0 = 2e-5, 2e-4, 2e-9, 0.0
    for r in logged.steps["engine"]:
        assert r.duration == c0 + max(omega + beta * (r.kv_decode + r.kv_prefill), r.tokens * a)


@pytest.fixture(scope="module")
def cli_steps(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    """`serq run vllm.sq --horizon 250 --dump DIR --steps`, run once for the two tests that read it
    (the run with --steps is the dearest part of each: every iteration one by one)."""
    folder = tmp_path_factory.mktemp("steps") / "a"
    return serq_cli("run", str(VLLM), "--horizon", "250", "--dump", str(folder), "--steps"), folder


def test_the_cli_writes_stage_steps_csv_and_the_same_report(tmp_path: Path, cli_steps: tuple) -> None:
    a, folder_a = cli_steps
    b = serq_cli("run", str(VLLM), "--horizon", "250", "--dump", str(tmp_path / "b"))
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout
    files_a = sorted(p.name for p in folder_a.iterdir())
    files_b = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert files_a == sorted(files_b + ["engine.steps.csv"])
    for name in files_b:
        assert (folder_a / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    lines = (folder_a / "engine.steps.csv").read_text().splitlines()
    assert lines[0] == ",".join(STEP_COLUMNS)
    assert len(lines) > 1000


def test_steps_without_dump_is_a_usage_error() -> None:
    r = serq_cli("run", str(VLLM), "--horizon", "250", "--steps")
    assert r.returncode == 2
    assert "--steps needs --dump" in r.stderr


def test_kv_columns_are_logged_when_the_cost_does_not_read_them(tmp_path: Path) -> None:
    text = VLLM.read_text()
    text = text.replace("cost c0 + max(omega + beta * (kv_decode + kv_prefill), tokens * a);",
                        "cost c0 + max(omega, tokens * a);")
    prog = tmp_path / "p.sq"
    prog.write_text(text)
    plain = serq.run(prog, horizon=150.0, warmup=0.0)
    logged = serq.run(prog, horizon=150.0, warmup=0.0, steps=True)
    assert plain.text() == logged.text()
    assert max(logged.steps["engine"].column("kv_decode")) > 0


# -- exact recovery ----------------------------------------------------------------------------


def test_a_roofline_fit_of_vllm_recovers_its_constants(vllm_runs: tuple) -> None:
    _plain, logged = vllm_runs
    header, cols = _cols(logged.steps["engine"])
    for method in SOLVERS:
        f = fitting.fit_roofline(cols, header, method=method)
        for name, true in (("a", 2e-5), ("omega", 2e-4), ("beta", 2e-9)):
            assert f.value(name) == pytest.approx(true, rel=1e-9), (method, name)
        assert abs(f.value("c0")) < 1e-15
        assert f.r2 == pytest.approx(1.0, abs=1e-12)
        assert f.branches is not None and min(f.branches) > 0  # both branches are in the data


def test_a_roofline_fit_recovers_c0() -> None:
    prog = serq.load(VLLM, sets={"c0": "0.001", "a": "3e-5"})
    report = serq.run(prog, horizon=200.0, warmup=0.0, steps=True)
    header, cols = _cols(report.steps["engine"])
    f = fitting.fit_roofline(cols, header)
    for name, true in (("a", 3e-5), ("omega", 2e-4), ("beta", 2e-9), ("c0", 1e-3)):
        assert f.value(name) == pytest.approx(true, rel=1e-9), name


def test_a_linear_fit_recovers_a_linear_cost(tmp_path: Path) -> None:
    prog = _linear_program(tmp_path)
    report = serq.run(prog, horizon=200.0, warmup=0.0, steps=True)
    header, cols = _cols(report.steps["engine"])
    f = fitting.fit_linear(cols, header, ["c", "decoders", "kv_decode", "prefilled", "attention"])
    true = {"k_c": 0.004, "k_decoders": 4.1053e-5, "k_kv_decode": 1.3786e-7, "k_prefilled": 5.1527e-5,
            "k_attention": 4.0196e-9}
    for name, v in true.items():
        assert f.value(name) == pytest.approx(v, rel=1e-9), name
    # the printed lets and cost make a program that loads
    lets = "\n".join(f.lets())
    text = prog.read_text().replace("run {", lets + "\nrun {")
    text = text.replace("cost c_it + d * decoders + e * kv_decode + ap * prefilled + b * attention;",
                        f"cost {f.cost};")
    (tmp_path / "refit.sq").write_text(text)
    assert "OK" in serq.check(tmp_path / "refit.sq")


def test_the_cli_fit_prints_lets_and_sets(cli_steps: tuple) -> None:
    # the step log of the module's `serq run --horizon 250 --dump DIR --steps` (this test ran its own
    # with --warmup 0: the log has every iteration from time 0 whatever the warm-up, the same bytes)
    r, folder = cli_steps
    assert r.returncode == 0, r.stderr
    steps = folder / "engine.steps.csv"
    r = serq_cli("fit", str(steps), "--roofline")
    assert r.returncode == 0, r.stderr
    assert "let a = 2e-05;" in r.stdout
    assert "let omega = 0.0002;" in r.stdout
    assert "let beta = 2e-09;" in r.stdout
    assert "--set a=2e-05 --set omega=0.0002 --set beta=2e-09" in r.stdout
    j = json.loads(serq_cli("fit", str(steps), "--roofline", "--json").stdout)
    assert j["model"] == "roofline"
    assert {c["name"] for c in j["coefficients"]} == {"a", "omega", "beta", "c0"}
    r = serq_cli("fit", str(steps), "--terms", "c,decoders,kv_decode,prefilled,attention")
    assert r.returncode == 0, r.stderr
    assert "let k_decoders = " in r.stdout and "let k_c = " in r.stdout
    r = serq_cli("fit", str(steps), "--terms", "c,tokens", "--roofline")
    assert r.returncode == 2


# -- noisy data --------------------------------------------------------------------------------


def test_the_95_percent_intervals_cover_the_true_values() -> None:
    true = np.array([3e-3, 5e-5, 1.5e-7, 4e-5])  # c, decoders, kv_decode, prefilled
    hits = np.zeros(4)
    runs = 200
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        n = 400
        dec = rng.integers(1, 64, n).astype(float)
        kv = dec * rng.uniform(200, 4000, n)
        pre = np.where(rng.random(n) < 0.3, rng.uniform(1, 2048, n), 0.0)
        y = true[0] + true[1] * dec + true[2] * kv + true[3] * pre + rng.normal(0, 1e-3, n)
        cols = {"duration": y, "decoders": dec, "kv_decode": kv, "prefilled": pre}
        f = fitting.fit_linear(cols, list(cols), ["c", "decoders", "kv_decode", "prefilled"])
        for k, c in enumerate(f.coefs):
            assert not c.clamped
            hits[k] += c.lo <= true[k] <= c.hi
    coverage = hits / runs
    assert ((coverage > 0.90) & (coverage < 0.99)).all(), coverage


def test_a_noisy_roofline_fit_has_the_truth_in_its_intervals() -> None:
    rng = np.random.default_rng(7)
    n = 5000
    tokens = np.where(rng.random(n) < 0.2, rng.uniform(200, 8192, n), rng.integers(1, 64, n).astype(float))
    kv = rng.uniform(1e3, 2e5, n)
    a, omega, beta, c0 = 5.2e-5, 8e-3, 7.2e-8, 1e-3
    y = c0 + np.maximum(omega + beta * kv, a * tokens) + rng.normal(0, 2e-4, n)  # the intervals assume additive noise
    cols = {"duration": y, "tokens": tokens, "kv_decode": kv}
    f = fitting.fit_roofline(cols, list(cols))
    for name, v in (("a", a), ("omega", omega), ("beta", beta), ("c0", c0)):
        c = next(c for c in f.coefs if c.name == name)
        assert c.lo <= v <= c.hi, (name, c)
        assert c.value == pytest.approx(v, rel=0.1)


def test_the_fit_is_deterministic() -> None:
    rng = np.random.default_rng(3)
    n = 2000
    tokens = rng.uniform(1, 4000, n)
    kv = rng.uniform(0, 1e5, n)
    y = np.maximum(1e-3 + 1e-8 * kv, 2e-5 * tokens) + rng.normal(0, 1e-4, n)
    cols = {"duration": y, "tokens": tokens, "kv_decode": kv}
    a = fitting.fit_roofline(cols, list(cols)).to_json()
    b = fitting.fit_roofline(cols, list(cols)).to_json()
    assert a == b


# -- NNLS --------------------------------------------------------------------------------------


def test_nnls_clamps_a_negative_coefficient_to_zero() -> None:
    rng = np.random.default_rng(1)
    n = 500
    x1 = rng.uniform(0, 10, n)
    x2 = rng.uniform(0, 10, n)
    y = 2.0 * x1 - 0.5 * x2 + 10.0 + rng.normal(0, 0.1, n)
    cols = {"duration": y, "x1": x1, "x2": x2}
    ols = np.linalg.lstsq(np.column_stack([np.ones(n), x1, x2]), y, rcond=None)[0]
    assert ols[2] < 0  # unconstrained, x2's coefficient is negative
    for method in SOLVERS:
        f = fitting.fit_linear(cols, list(cols), ["c", "x1", "x2"], method=method)
        assert f.value("k_x2") == 0.0
        c = next(c for c in f.coefs if c.name == "k_x2")
        assert c.clamped and math.isnan(c.se)
        assert f.value("k_x1") > 1.5
    assert "clamped at 0" in f.text()


def test_the_builtin_nnls_gives_scipys_answer() -> None:
    pytest.importorskip("scipy")
    rng = np.random.default_rng(0)
    for _ in range(300):
        m, n = int(rng.integers(3, 80)), int(rng.integers(1, 9))
        A = rng.normal(size=(m, n)) * rng.uniform(0.01, 100, n)
        b = rng.normal(size=m)
        x1 = linalg.nnls(A, b, "scipy")
        x2 = linalg.nnls(A, b, "builtin")
        assert (x1 >= 0).all() and (x2 >= 0).all()
        r1 = np.linalg.norm(A @ x1 - b)
        r2 = np.linalg.norm(A @ x2 - b)
        assert r2 == pytest.approx(r1, rel=1e-9, abs=1e-12)
        assert np.allclose(x1, x2, rtol=1e-6, atol=1e-9)
        # Lawson-Hanson on the unreduced, unscaled problem: the same minimiser
        x3 = linalg.nnls_builtin(A, b)
        assert np.linalg.norm(A @ x3 - b) == pytest.approx(r1, rel=1e-9, abs=1e-12)


def test_the_solver_names() -> None:
    assert linalg.solver_name("builtin") == linalg.solver_name("auto") == linalg.solver_name("numpy") == "builtin"
    assert linalg.solver_name("scipy") == "scipy"
    with pytest.raises(ValueError, match="expected builtin or scipy"):
        linalg.solver_name("lapack")
    r = serq_cli("fit", "x.csv", "--solver", "lapack")
    assert r.returncode == 2 and "expected builtin or scipy" in r.stderr
    rng = np.random.default_rng(4)
    tokens = rng.uniform(1, 4000, 500)
    kv = rng.uniform(0, 1e5, 500)
    cols = {"duration": np.maximum(1e-3 + 1e-8 * kv, 2e-5 * tokens) + rng.normal(0, 1e-4, 500), "tokens": tokens,
            "kv_decode": kv}
    want = fitting.fit_roofline(cols, list(cols)).text()
    assert fitting.fit_roofline(cols, list(cols), method="auto").text() == want
    assert fitting.fit_roofline(cols, list(cols), method="numpy").text() == want


# -- the machine-independent linear algebra -------------------------------------------------------


def _well_conditioned(rng: np.random.Generator, m: int, k: int) -> np.ndarray:
    """An m × k matrix with singular values in [1, 10], columns scaled by up to 1e6."""
    U = np.linalg.qr(rng.normal(size=(m, k)))[0]
    V = np.linalg.qr(rng.normal(size=(k, k)))[0]
    return (U * rng.uniform(1, 10, k)) @ V.T * (10.0 ** rng.uniform(-6, 6, k))


def test_the_householder_qr_matches_numpys() -> None:
    rng = np.random.default_rng(11)
    for _ in range(100):
        m, k = int(rng.integers(1, 300)), int(rng.integers(1, 7))
        A = _well_conditioned(rng, m, k) if m >= k else rng.normal(size=(m, k))
        b = rng.normal(size=m)
        R, qb = linalg.qr([A[:, j] for j in range(k)], b)
        Rn = np.linalg.qr(A, mode="r")
        Q = np.linalg.qr(A)[0]
        # unique up to the sign of each row of R (and of Qᵀb with it)
        sign = np.where(np.diag(Rn[:len(R), :len(R)]) * np.diag(np.asarray(R)[:, :len(R)]) < 0, -1.0, 1.0)
        R_ = np.asarray(R) * sign[:, None]
        scale = np.abs(A).max(axis=0)
        assert np.allclose(R_ / scale, Rn[:len(R)] / scale, rtol=1e-10, atol=1e-12)
        assert np.allclose(np.asarray(qb) * sign, (Q.T @ b)[:len(R)], rtol=1e-10, atol=1e-12)


def test_the_least_squares_match_numpys() -> None:
    rng = np.random.default_rng(12)
    for _ in range(100):
        m, k = int(rng.integers(8, 300)), int(rng.integers(1, 7))
        A = _well_conditioned(rng, m, k)
        b = rng.normal(size=m)
        cols = sorted(rng.choice(k, size=int(rng.integers(1, k + 1)), replace=False).tolist())
        norms = np.linalg.norm(A[:, cols], axis=0)  # numpy's SVD on the raw columns loses digits to their scales
        want = np.linalg.lstsq(A[:, cols] / norms, b, rcond=None)[0] / norms
        got = linalg._lstsq(A.tolist(), b.tolist(), cols)
        assert np.allclose(got, want, rtol=1e-10, atol=0), (got, want)


def test_the_standard_errors_and_figures_match_numpys() -> None:
    from serq.experiments.stats import t_quantile

    rng = np.random.default_rng(13)
    for _ in range(50):
        n, k = int(rng.integers(10, 2000)), int(rng.integers(1, 6))
        A = np.abs(_well_conditioned(rng, n, k))
        x = rng.uniform(0.5, 2, k) / np.abs(A).max(axis=0)
        y = A @ x * (1 + rng.normal(0, 0.05, n))
        X = [A[:, j] for j in range(k)]
        se, half = fitting._intervals(X, y, x.tolist())
        resid = y - A @ x
        s2 = resid @ resid / (n - k)
        norms = np.linalg.norm(A, axis=0)
        As = A / norms
        want = np.sqrt(np.diag(np.linalg.inv(As.T @ As)) * s2) / norms
        assert np.allclose(se, want, rtol=1e-9, atol=0)
        assert np.allclose(half, t_quantile(0.975, n - k) * want, rtol=1e-9, atol=0)
        r2, mape, rmse = fitting._figures(y, A @ x)
        assert r2 == pytest.approx(1 - resid @ resid / ((y - y.mean()) ** 2).sum(), rel=1e-12)
        assert mape == pytest.approx(np.mean(np.abs(resid / y)) * 100, rel=1e-12)
        assert rmse == pytest.approx(np.sqrt(resid @ resid / n), rel=1e-12)


def test_the_roofline_starts_are_order_statistics() -> None:
    rng = np.random.default_rng(14)
    for n in (1, 2, 3, 10, 101, 1000, 4321):
        tokens = np.where(rng.random(n) < 0.2, rng.uniform(200, 8192, n), rng.integers(1, 64, n).astype(float))
        starts = fitting.roofline_starts(tokens)
        assert len(starts) == len(fitting.START_PERCENTILES) + 1 and starts[-1].all()
        for mask, q in zip(starts, fitting.START_PERCENTILES):
            assert np.array_equal(mask, tokens <= np.percentile(tokens, q, method="lower"))
            assert np.array_equal(mask, tokens <= np.quantile(tokens, q / 100))  # the rule before: the same rows


def test_the_builtin_fit_calls_no_blas_nor_numpy_reduction(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(15)
    n = 3000
    tokens = np.where(rng.random(n) < 0.2, rng.uniform(200, 8192, n), rng.integers(1, 64, n).astype(float))
    kv = rng.uniform(1e3, 2e5, n)
    y = (1e-3 + np.maximum(8e-3 + 7.2e-8 * kv, 5.2e-5 * tokens)) * (1 + rng.normal(0, 0.02, n))
    cols = {"duration": y, "tokens": tokens, "kv_decode": kv}

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("BLAS/LAPACK or a numpy reduction in the built-in fit")

    for name in ("lstsq", "qr", "inv", "pinv", "solve", "norm", "cholesky", "svd"):
        monkeypatch.setattr(np.linalg, name, refuse)
    for name in ("dot", "matmul", "vdot", "inner", "einsum", "sum", "mean", "quantile", "percentile", "median",
                 "std", "var", "average"):
        monkeypatch.setattr(np, name, refuse)
    for relative in (False, True):
        fitting.fit_roofline(cols, list(cols), relative=relative).text()
        fitting.fit_linear(cols, list(cols), ["c", "tokens", "kv_decode"], relative=relative).text()


# -- the same digits on every machine ----------------------------------------------------------

#: Environments that change numpy's BLAS kernels (OpenBLAS picks one per processor) and glibc's
#: libm variants (FMA or not): the built-in fit prints the same bytes under each.
MACHINES = [{}, {"OPENBLAS_CORETYPE": "Haswell"}, {"OPENBLAS_CORETYPE": "Prescott"},
            {"OPENBLAS_CORETYPE": "Sandybridge"}, {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA"}]

_PRINT_FITS = r"""
import sys
from typer.testing import CliRunner
from serq.cli import app
path = sys.argv[1]
for args in (["--roofline"], ["--roofline", "--json"], ["--roofline", "--relative"],
             ["--roofline", "--no-c0", "--json"], ["--terms", "c,decoders,kv_decode,prefilled"],
             ["--terms", "c,decoders,kv_decode,prefilled", "--relative", "--json"]):
    r = CliRunner().invoke(app, ["fit", path, *args])
    assert r.exit_code == 0, r.output
    sys.stdout.write("### " + " ".join(args) + "\n" + r.stdout)
"""


def test_the_builtin_fit_prints_the_same_bytes_on_every_machine(tmp_path: Path) -> None:
    import os

    rng = np.random.default_rng(16)
    n = 5000  # enough for numpy's QR and SciPy's NNLS to print other digits under these variables
    tokens = np.where(rng.random(n) < 0.2, rng.uniform(200, 8192, n), rng.integers(1, 64, n).astype(float))
    dec = rng.integers(1, 64, n).astype(float)
    kv = dec * rng.uniform(200, 4000, n)
    pre = np.where(tokens > 64, tokens, 0.0)
    y = (1e-3 + np.maximum(8e-3 + 7.2e-8 * kv, 5.2e-5 * tokens)) * (1 + rng.normal(0, 0.03, n))
    path = tmp_path / "steps.csv"
    with open(path, "w") as f:
        f.write("duration,tokens,decoders,prefilled,kv_decode\n")
        for row in zip(y, tokens, dec, pre, kv):
            f.write(",".join(repr(float(v)) for v in row) + "\n")
    outputs = []
    for extra in MACHINES:
        env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "GLIBC_TUNABLES")}
        r = subprocess.run([sys.executable, "-c", _PRINT_FITS, str(path)], capture_output=True, text=True,
                           env={**env, **extra})
        assert r.returncode == 0, (extra, r.stderr)
        outputs.append(r.stdout)
    for extra, out in zip(MACHINES[1:], outputs[1:]):
        assert out == outputs[0], f"{extra}: the built-in fit printed other bytes"
    assert outputs[0].count("### ") == 6 and outputs[0].count("let a = ") == 4


# -- bad input ---------------------------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "steps.csv"
    p.write_text(text)
    return str(p)


def test_a_bad_value_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "time,duration,tokens\n0,0.1,5\n0.1,0.2,abc\n")
    with pytest.raises(SerqError, match=r"steps\.csv:3: `tokens` is `abc`, not a number"):
        fitting.read_csv(path)


def test_a_short_row_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "time,duration,tokens\n0,0.1,5\n0.1,0.2\n")
    with pytest.raises(SerqError, match=r"steps\.csv:3: 2 fields, the header has 3"):
        fitting.read_csv(path)


def test_a_non_finite_value_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "duration,tokens\n0.1,nan\n")
    with pytest.raises(SerqError, match=r"steps\.csv:2: `tokens` is `nan`, not a finite number"):
        fitting.read_csv(path)


def test_values_whose_squares_leave_the_floats_and_negative_times_are_refused(tmp_path: Path) -> None:
    # a value of 1e308 made the fit's sums overflow: an internal error (exit 3) from math.fsum
    path = _write(tmp_path, "duration,tokens\n0.1,5\n0.2,1e308\n0.3,7\n")
    with pytest.raises(SerqError, match=r"steps\.csv:3: `tokens` is `1e308`, beyond ±1e\+50"):
        fitting.read_csv(path)
    r = serq_cli("fit", path)
    assert r.returncode == 1 and "beyond ±1e+50" in r.stderr and "internal error" not in r.stderr
    # a negative duration was fitted (R² nan)
    with pytest.raises(SerqError, match=r"steps\.csv:3: `duration` is `-1`, a negative time"):
        fitting.read_csv(_write(tmp_path, "duration,tokens\n0.1,5\n-1,6\n"))
    # a relative fit divides by the durations: one of 1e-300 is as far out as a value of 1e300
    header, cols = fitting.read_csv(_write(tmp_path, "duration,tokens\n0.1,5\n1e-300,6\n0.3,7\n"))
    with pytest.raises(SerqError, match=r"row 2 of the data has duration 1e-300; .* at least 1e-50"):
        fitting.fit_linear(cols, header, ["c", "tokens"], relative=True)
    # at the bounds, every fit runs
    text = "duration,tokens\n" + "".join(f"{1e-50 * (1 + k % 5)!r},{1e50 / (1 + k % 7)!r}\n" for k in range(40))
    header, cols = fitting.read_csv(_write(tmp_path, text))
    for relative in (False, True):
        assert math.isfinite(fitting.fit_linear(cols, header, ["c", "tokens"], relative=relative).r2)


def test_a_missing_duration_column_suggests_a_name(tmp_path: Path) -> None:
    path = _write(tmp_path, "time,durations,tokens\n0,0.1,5\n")
    with pytest.raises(SerqError) as err:
        fitting.read_csv(path)
    assert "steps.csv:1: no `duration` column" in err.value.render()
    assert "did you mean `durations`?" in err.value.render()


def test_a_missing_term_column_suggests_a_name(tmp_path: Path) -> None:
    path = _write(tmp_path, "duration,decoders,kv_decode\n0.1,5,100\n0.2,6,300\n0.3,2,50\n")
    r = serq_cli("fit", path, "--terms", "c,decoder,kv_decode")
    assert r.returncode == 1
    assert "no column `decoder`" in r.stderr
    assert "did you mean `decoders`?" in r.stderr
    r = serq_cli("fit", path, "--roofline")
    assert r.returncode == 1 and "no column `tokens`" in r.stderr


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SerqError, match=r"steps\.csv:1: empty file"):
        fitting.read_csv(_write(tmp_path, ""))
    with pytest.raises(SerqError, match=r"steps\.csv:2: no rows"):
        fitting.read_csv(_write(tmp_path, "duration,tokens\n"))


# -- the residual plot -------------------------------------------------------------------------


def _small_fit() -> fitting.Fit:
    rng = np.random.default_rng(0)
    x = rng.uniform(1, 10, 50)
    cols = {"duration": 1 + 2 * x + rng.normal(0, 0.1, 50), "x": x}
    return fitting.fit_linear(cols, list(cols), ["c", "x"])


def test_the_residual_plot_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "res.svg"
    fitting.plot_residuals(_small_fit(), str(out))
    assert out.read_text().lstrip().startswith("<?xml")


def test_the_residual_plot_without_matplotlib_says_which_extra(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SerqError) as err:
        fitting.plot_residuals(_small_fit(), str(tmp_path / "res.svg"))
    assert "needs matplotlib" in err.value.render()
    assert "serq[plot]" in err.value.render()


def test_without_scipy_the_fit_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # the built-in solver and the t quantile (serq.experiments.stats.t_quantile) use no SciPy:
    # the printed fit does not depend on whether SciPy is installed
    rng = np.random.default_rng(5)
    n = 300
    x = rng.uniform(0, 100, n)
    z = rng.uniform(0, 10, n)
    cols = {"duration": 0.5 + 0.01 * x + 0.2 * z + rng.normal(0, 0.05, n), "x": x, "z": z}
    want = fitting.fit_linear(cols, list(cols), ["c", "x", "z"])
    for mod in ("scipy", "scipy.optimize", "scipy.special"):
        monkeypatch.setitem(sys.modules, mod, None)
    got = fitting.fit_linear(cols, list(cols), ["c", "x", "z"])
    assert got.text() == want.text() and got.to_json() == want.to_json()
    for c in got.coefs:
        assert c.lo < c.value < c.hi


def test_a_relative_fit_covers_multiplicative_noise() -> None:
    rng = np.random.default_rng(7)
    n = 5000
    tokens = np.where(rng.random(n) < 0.2, rng.uniform(200, 8192, n), rng.integers(1, 64, n).astype(float))
    kv = rng.uniform(1e3, 2e5, n)
    a, omega, beta, c0 = 5.2e-5, 8e-3, 7.2e-8, 1e-3
    y = (c0 + np.maximum(omega + beta * kv, a * tokens)) * (1 + rng.normal(0, 0.01, n))
    cols = {"duration": y, "tokens": tokens, "kv_decode": kv}
    f = fitting.fit_roofline(cols, list(cols), relative=True)
    assert f.relative and "relative" in f.text()
    for name, v in (("a", a), ("omega", omega), ("beta", beta), ("c0", c0)):
        c = next(c for c in f.coefs if c.name == name)
        assert c.lo <= v <= c.hi, (name, c)
    with pytest.raises(SerqError, match="needs every duration at least 1e-50"):
        fitting.fit_linear({"duration": np.array([1.0, 0.0]), "x": np.array([1.0, 2.0])}, ["duration", "x"],
                           ["c", "x"], relative=True)

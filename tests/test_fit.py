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
from serq import fit as fitting
from serq.errors import SerqError
from serq.report import STEP_COLUMNS

ROOT = Path(__file__).resolve().parent.parent
VLLM = ROOT / "programs" / "multi-turn" / "vllm.sq"
HORIZON = 300.0


def serq_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "serq", *args], capture_output=True, text=True, cwd=cwd)


def _linear_program(tmp_path: Path) -> Path:
    """vllm.sq with the linear cost of the A100 replay fit (language §10.3)."""
    text = VLLM.read_text()
    text = text.replace('use "../../lib/vllm.sq";', f'use "{ROOT / "lib" / "vllm.sq"}";')
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


def test_the_cli_writes_stage_steps_csv_and_the_same_report(tmp_path: Path) -> None:
    a = serq_cli("run", str(VLLM), "--horizon", "250", "--dump", str(tmp_path / "a"), "--steps")
    b = serq_cli("run", str(VLLM), "--horizon", "250", "--dump", str(tmp_path / "b"))
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout
    files_a = sorted(p.name for p in (tmp_path / "a").iterdir())
    files_b = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert files_a == sorted(files_b + ["engine.steps.csv"])
    for name in files_b:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    lines = (tmp_path / "a" / "engine.steps.csv").read_text().splitlines()
    assert lines[0] == ",".join(STEP_COLUMNS)
    assert len(lines) > 1000


def test_steps_without_dump_is_a_usage_error() -> None:
    r = serq_cli("run", str(VLLM), "--horizon", "250", "--steps")
    assert r.returncode == 2
    assert "--steps needs --dump" in r.stderr


def test_kv_columns_are_logged_when_the_cost_does_not_read_them(tmp_path: Path) -> None:
    text = VLLM.read_text().replace('use "../../lib/vllm.sq";', f'use "{ROOT / "lib" / "vllm.sq"}";')
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
    for method in ("numpy", "auto"):
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


def test_the_cli_fit_prints_lets_and_sets(tmp_path: Path) -> None:
    r = serq_cli("run", str(VLLM), "--horizon", "250", "--warmup", "0", "--dump", str(tmp_path), "--steps")
    assert r.returncode == 0, r.stderr
    steps = tmp_path / "engine.steps.csv"
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
    for method in ("numpy", "auto"):
        f = fitting.fit_linear(cols, list(cols), ["c", "x1", "x2"], method=method)
        assert f.value("k_x2") == 0.0
        c = next(c for c in f.coefs if c.name == "k_x2")
        assert c.clamped and math.isnan(c.se)
        assert f.value("k_x1") > 1.5
    assert "clamped at 0" in f.text()


def test_the_numpy_nnls_gives_scipys_answer() -> None:
    pytest.importorskip("scipy")
    rng = np.random.default_rng(0)
    for _ in range(300):
        m, n = int(rng.integers(3, 80)), int(rng.integers(1, 9))
        A = rng.normal(size=(m, n)) * rng.uniform(0.01, 100, n)
        b = rng.normal(size=m)
        x1 = fitting.nnls(A, b, "scipy")
        x2 = fitting.nnls(A, b, "numpy")
        assert (x1 >= 0).all() and (x2 >= 0).all()
        r1 = np.linalg.norm(A @ x1 - b)
        r2 = np.linalg.norm(A @ x2 - b)
        assert r2 == pytest.approx(r1, rel=1e-9, abs=1e-12)
        assert np.allclose(x1, x2, rtol=1e-6, atol=1e-9)


def test_the_t_quantile_without_scipy_is_close() -> None:
    for dof in (5, 10, 30, 100, 10_000):
        approx = fitting.t_quantile(0.975, dof, exact=False)
        if dof >= 30:
            assert approx == pytest.approx(fitting.t_quantile(0.975, dof), rel=1e-6)
        assert 1.95 < approx < 2.6


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


def test_without_scipy_the_fit_is_the_numpy_one(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    n = 300
    x = rng.uniform(0, 100, n)
    z = rng.uniform(0, 10, n)
    cols = {"duration": 0.5 + 0.01 * x + 0.2 * z + rng.normal(0, 0.05, n), "x": x, "z": z}
    want = fitting.fit_linear(cols, list(cols), ["c", "x", "z"], method="numpy")
    for mod in ("scipy", "scipy.optimize", "scipy.special"):
        monkeypatch.setitem(sys.modules, mod, None)
    got = fitting.fit_linear(cols, list(cols), ["c", "x", "z"])  # auto: numpy, t by Cornish-Fisher
    assert [c.value for c in got.coefs] == pytest.approx([c.value for c in want.coefs], rel=1e-12)
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
    with pytest.raises(SerqError, match="needs every duration > 0"):
        fitting.fit_linear({"duration": np.array([1.0, 0.0]), "x": np.array([1.0, 2.0])}, ["duration", "x"],
                           ["c", "x"], relative=True)

"""``serq roofline``: the bundled programs' constants from a model's shape and a GPU (docs/calibration.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from serq.calibration import roofline as rl
from serq.errors import SerqError


def serq_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "serq", *args], capture_output=True, text=True)


def test_qwen3_8b_on_an_a100_80g_by_hand() -> None:
    # Qwen3-8B: 8.2e9 parameters, 36 layers, 8 KV heads of 128; A100 80 GB SXM: 312e12 BF16 FLOP/s
    # dense, 2.039e12 bytes/s. By hand:
    #   a     = 2 * 8.2e9 / 312e12            = 5.2564e-5 s per token
    #   omega = 8.2e9 * 2 / 2.039e12          = 8.0432e-3 s per step
    #   beta  = 2 * 36 * 8 * 128 * 2 / 2.039e12 = 147456 / 2.039e12 = 7.2318e-8 s per KV token
    r = rl.compute(model_name="Qwen3-8B", gpu_name="A100-80G")
    assert r.a == pytest.approx(5.2564e-5, rel=1e-4)
    assert r.omega == pytest.approx(8.0432e-3, rel=1e-4)
    assert r.beta == pytest.approx(7.2318e-8, rel=1e-4)
    assert r.sets() == "--set a=5.25641e-05 --set omega=0.00804316 --set beta=7.23178e-08"


def test_the_flags_give_the_same_as_the_built_ins() -> None:
    a = rl.compute(model_name="Llama-3.1-70B", gpu_name="H100-SXM")
    b = rl.compute(params=70.6e9, layers=80, kv_heads=8, head_dim=128, flops=989.4e12, bandwidth=3.35e12)
    assert (a.a, a.omega, a.beta) == (b.a, b.omega, b.beta)


def test_fp8_weights_halve_omega_and_use_the_fp8_peak() -> None:
    bf = rl.compute(model_name="Llama-3.1-8B", gpu_name="H100-SXM")
    f8 = rl.compute(model_name="Llama-3.1-8B", gpu_name="H100-SXM", dtype="fp8", kv_dtype="bf16")
    assert f8.omega == pytest.approx(bf.omega / 2)
    assert f8.beta == bf.beta
    assert f8.a == pytest.approx(bf.a / 2, rel=1e-4)  # 1978.9 vs 2 x 989.4 TFLOP/s


def test_efficiencies_scale_the_peaks() -> None:
    r = rl.compute(model_name="Qwen3-8B", gpu_name="A100-80G", flops_eff=0.5, bw_eff=0.8)
    p = rl.compute(model_name="Qwen3-8B", gpu_name="A100-80G")
    assert r.a == pytest.approx(2 * p.a)
    assert r.omega == pytest.approx(p.omega / 0.8)


def test_errors() -> None:
    with pytest.raises(SerqError, match="unknown GPU `A100`"):
        rl.compute(model_name="Qwen3-8B", gpu_name="A100")
    with pytest.raises(SerqError, match="no built-in fp8 FLOP/s"):
        rl.compute(model_name="Qwen3-8B", gpu_name="A100-80G", dtype="fp8")
    with pytest.raises(SerqError, match="needs --layers"):
        rl.compute(params=8e9, kv_heads=8, head_dim=128, gpu_name="L40S")
    with pytest.raises(SerqError, match="--gpu NAME or both --flops"):
        rl.compute(model_name="Qwen3-8B", flops=1e15)


def test_figures_that_leave_the_floats_are_refused() -> None:
    # each figure finite and > 0, and still a constant of inf or 0: no cost a program can run
    with pytest.raises(SerqError, match="make a inf s"):
        rl.compute(model_name="Qwen3-8B", gpu_name="H100-SXM", flops_eff=1e-320)
    with pytest.raises(SerqError, match="make omega 0 s"):
        rl.compute(model_name="Qwen3-8B", gpu_name="H100-SXM", bw_eff=1e308)
    with pytest.raises(SerqError, match="make beta inf s"):
        rl.compute(params=1.0, layers=10**6, kv_heads=10**6, head_dim=10**6, flops=1e15, bandwidth=1e-300)
    with pytest.raises(SerqError, match="make gamma inf s"):
        rl.compute(model_name="Qwen3-8B", gpu_name="H100-SXM", tp=4, link_bandwidth=5e-324)
    with pytest.raises(SerqError, match="make c0 inf s"):
        rl.compute(model_name="Qwen3-8B", gpu_name="H100-SXM", tp=4, ar_latency=1e308)


def test_every_built_in_names_its_source() -> None:
    for g in rl.GPUS.values():
        assert "datasheet" in g.source
    for m in rl.MODELS.values():
        assert "huggingface.co/" in m.source


def test_the_cli_shows_the_arithmetic_and_the_sets() -> None:
    r = serq_cli("roofline", "--model", "Qwen3-8B", "--gpu", "A100-80G")
    assert r.returncode == 0, r.stderr
    assert "a     = 2 * P / F" in r.stdout
    assert "--set a=5.25641e-05 --set omega=0.00804316 --set beta=7.23178e-08" in r.stdout
    j = json.loads(serq_cli("roofline", "--model", "Qwen3-8B", "--gpu", "A100-80G", "--json").stdout)
    assert j["a"] == pytest.approx(5.2564e-5, rel=1e-4)
    r = serq_cli("roofline", "--model", "Qwen3-8B", "--gpu", "A100")
    assert r.returncode == 2
    assert "did you mean one of A100-40G, A100-80G, A100-80G-PCIE?" in r.stderr
    r = serq_cli("roofline", "--list")
    assert r.returncode == 0 and "L40S" in r.stdout and "Llama-3.1-70B" in r.stdout

"""``serq roofline --tp K``: tensor parallelism's split and all-reduces, the grown tables (docs/calibration.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from serq.calibration import hardware
from serq.calibration import roofline as rl
from serq.errors import SerqError

# A made-up model and GPU small enough to work every term out by hand.
TINY = hardware.Model("tiny", 1e9, 2, 4, 64, "made up", hidden=256)
TOY = hardware.Gpu("toy", 1e12, None, 1e11, "made up", memory=4e9, link=2e10, link_latency=1e-5)


def serq_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "serq", *args], capture_output=True, text=True)


def test_two_way_tensor_parallel_splits_the_roofs_and_adds_the_all_reduces_by_hand() -> None:
    # tiny: P = 1e9, L = 2 layers, H = 4 KV heads of D = 64, hidden 256; bf16 (2 B weights, KV, activations).
    # toy: F = 1e12 FLOP/s, W = 1e11 B/s, link 2e10 B/s both ways = 1e10 a direction, latency 1e-5 s.  K = 2:
    #   a     = 2 P / (K F)      = 2e9 / 2e12                       = 1e-3 s a token
    #   omega = P * 2 / (K W)    = 2e9 / 2e11                       = 1e-2 s a step
    #   beta  = 2 L (H/K) D 2 / W = 2 * 2 * 2 * 64 * 2 / 1e11 = 1024 / 1e11 = 1.024e-8 s a KV token
    #   gamma = 2 L * 2(K-1)/K * hidden * 2 / link = 4 * 1 * 512 / 1e10 = 2.048e-7 s a token
    #   c0    = 2 L * latency    = 4 * 1e-5                         = 4e-5 s a step
    r = rl.compute(model_entry=TINY, gpu_entry=TOY, tp=2)
    assert r.a == pytest.approx(1e-3, rel=1e-12)
    assert r.omega == pytest.approx(1e-2, rel=1e-12)
    assert r.beta == pytest.approx(1.024e-8, rel=1e-12)
    assert r.gamma == pytest.approx(2.048e-7, rel=1e-12)
    assert r.c0 == pytest.approx(4e-5, rel=1e-12)
    # A step of 100 tokens holding 1000 KV tokens: compute-bound, 4e-5 + max(1e-2 + 1.024e-5, 0.1) + 2.048e-5.
    assert r.cost() == "cost 4e-05 + max(0.01 + 1.024e-08 * (kv_decode + kv_prefill), tokens * 0.001) + tokens * 2.048e-07;"
    assert r.sets() == "--set a=0.001 --set omega=0.01 --set beta=1.024e-08 --set c0=4e-05"


def test_four_way_splits_the_kv_heads_one_each_and_eight_way_replicates_them() -> None:
    # K = 4: H/K = 1 KV head a GPU, beta = 2 * 2 * 1 * 64 * 2 / 1e11 = 5.12e-9;
    #   gamma = 4 * (2 * 3/4) * 512 / 1e10 = 3072 / 1e10 = 3.072e-7.
    r4 = rl.compute(model_entry=TINY, gpu_entry=TOY, tp=4)
    assert r4.beta == pytest.approx(5.12e-9, rel=1e-12)
    assert r4.gamma == pytest.approx(3.072e-7, rel=1e-12)
    assert r4.a == pytest.approx(5e-4, rel=1e-12)
    # K = 8 > H = 4: each KV head is on two GPUs, still one a GPU; the weights and FLOPs split 8 ways.
    r8 = rl.compute(model_entry=TINY, gpu_entry=TOY, tp=8)
    assert r8.beta == r4.beta
    assert r8.omega == pytest.approx(2.5e-3, rel=1e-12)
    # gamma = 4 * (2 * 7/8) * 512 / 1e10 = 3584 / 1e10
    assert r8.gamma == pytest.approx(3.584e-7, rel=1e-12)


def test_one_gpu_has_no_all_reduce_and_keeps_the_single_gpu_output() -> None:
    one = rl.compute(model_name="Llama-3.1-8B", gpu_name="H100-SXM", tp=1)
    assert (one.gamma, one.c0) == (0.0, 0.0)
    assert "gamma" not in one.text() and "tp" not in one.to_json()
    assert one.sets() == "--set a=1.62321e-05 --set omega=0.00479403 --set beta=3.9126e-08"


def test_the_flags_override_the_link_and_latency() -> None:
    # --link-bandwidth is one direction: 1e10 as the toy's 2e10 both ways; latency 0 drops c0.
    r = rl.compute(model_entry=TINY, gpu_entry=TOY, tp=2, link_bandwidth=1e10, ar_latency=0.0)
    assert r.gamma == pytest.approx(2.048e-7, rel=1e-12)
    assert r.c0 == 0.0


def test_a_mixture_of_experts_computes_with_its_active_parameters_and_reads_them_all() -> None:
    # Mixtral-8x7B on one H100: a = 2 * 12.9e9 / 989.4e12 = 2.6076e-5; omega = 46.7e9 * 2 / 3.35e12 = 2.7881e-2.
    r = rl.compute(model_name="Mixtral-8x7B", gpu_name="H100-SXM")
    assert r.a == pytest.approx(2.6076e-5, rel=1e-4)
    assert r.omega == pytest.approx(2.7881e-2, rel=1e-4)
    assert "a     = 2 * P_active / F" in r.text()


def test_llama_70b_on_four_h100s_by_hand() -> None:
    # a = 2 * 70.6e9 / (4 * 989.4e12) = 3.5678e-5; omega = 70.6e9 * 2 / (4 * 3.35e12) = 1.05373e-2;
    # beta = 2 * 80 * 2 * 128 * 2 / 3.35e12 = 2.4454e-8; gamma = 160 * 1.5 * 8192 * 2 / 450e9 = 8.7381e-6;
    # c0 = 160 * 2e-6 = 3.2e-4.
    r = rl.compute(model_name="Llama-3.1-70B", gpu_name="H100-SXM", tp=4)
    for got, want in ((r.a, 3.5678e-5), (r.omega, 1.05373e-2), (r.beta, 2.4454e-8), (r.gamma, 8.7381e-6),
                      (r.c0, 3.2e-4)):
        assert got == pytest.approx(want, rel=1e-4)


def test_tensor_parallel_refuses_what_it_cannot_compute() -> None:
    with pytest.raises(SerqError, match="no built-in GPU-to-GPU link"):
        rl.compute(model_name="Llama-3.1-8B", gpu_name="L40S", tp=2)
    with pytest.raises(SerqError, match="no sourced all-reduce latency"):
        rl.compute(model_name="Llama-3.1-8B", gpu_name="B200", tp=2)
    with pytest.raises(SerqError, match="does not split 8 KV heads evenly"):
        rl.compute(model_name="Llama-3.1-8B", gpu_name="H100-SXM", tp=3)
    with pytest.raises(SerqError, match="needs the model's hidden size"):
        rl.compute(params=8e9, layers=32, kv_heads=8, head_dim=128, gpu_name="H100-SXM", tp=2)
    with pytest.raises(SerqError, match="--tp: 0 must be a positive"):
        rl.compute(model_name="Llama-3.1-8B", gpu_name="H100-SXM", tp=0)
    # with the latency given, B200 runs: its NVLink 5 is 1.8 TB/s both ways
    b = rl.compute(model_name="Llama-3.1-8B", gpu_name="B200", tp=2, ar_latency=0.0)
    assert b.link == 900e9


def test_every_new_entry_names_its_source() -> None:
    for name in ("B200", "MI300X"):
        assert "datasheet" in hardware.GPUS[name].source and hardware.GPUS[name].link_source
    for name in ("Llama-3.1-405B", "Qwen2.5-7B", "Qwen2.5-72B", "Qwen3-30B-A3B", "Mixtral-8x7B"):
        m = hardware.MODELS[name]
        assert "huggingface.co/" in m.source and m.hidden
    assert hardware.MODELS["Qwen3-30B-A3B"].active == 3.3e9


def test_the_cli_prints_the_70b_tp4_constants() -> None:
    r = serq_cli("roofline", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "4")
    assert r.returncode == 0, r.stderr
    assert "--set a=3.56782e-05 --set omega=0.0105373 --set beta=2.44537e-08 --set c0=0.00032" in r.stdout
    assert "+ tokens * 8.73813e-06;" in r.stdout
    j = json.loads(serq_cli("roofline", "--model", "Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "4", "--json").stdout)
    assert j["tp"] == 4 and j["gamma"] == pytest.approx(8.7381e-6, rel=1e-4)
    r = serq_cli("roofline", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--tp", "3")
    assert r.returncode == 2 and "does not split 8 KV heads evenly" in r.stderr

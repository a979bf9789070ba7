"""``serq roofline``: first-principles priors for the step cost constants (docs/calibration.md).

The bundled vLLM programs' step cost is ``c0 + max(omega + beta · kv, a · tokens)``.
From a model's shape and a GPU's peak figures:

* ``a = 2 · P / F``: seconds of compute per scheduled token (a forward pass
  costs about two FLOPs per parameter per token; attention's own FLOPs are
  left out), ``P`` parameters, ``F`` the peak dense FLOP/s at the dtype;
* ``omega = P · w / W``: seconds to read the weights once per step, ``w``
  bytes per weight, ``W`` the memory bandwidth in bytes/s;
* ``beta = 2 · L · H · D · k / W``: seconds to read one resident token's K
  and V once per step, ``L`` layers, ``H`` KV heads, ``D`` the head size,
  ``k`` bytes per KV element.

These are floors (peak figures, perfect overlap); a fit to measured
iterations (``serq fit``) finds the real ones.  ``--flops-eff`` and
``--bw-eff`` scale the peaks by an achieved fraction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import SerqError, suggest

#: Bytes per element of each dtype.
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
#: The tensor-core FLOP/s column a dtype computes at (fp16 = bf16 on these GPUs).
_FLOPS_COLUMN = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8"}


@dataclass(frozen=True)
class Gpu:
    """A GPU's peak dense (no 2:4 sparsity) tensor FLOP/s by dtype and its
    memory bandwidth in bytes/s, with where the figures come from."""

    name: str
    bf16: float
    fp8: float | None
    bandwidth: float
    source: str


#: Built-in GPUs.  NVIDIA's datasheets list tensor FLOP/s "with sparsity" for
#: Hopper and Ada; the dense figure is half of it (the datasheets' footnote).
#: "checked" names a public page found with this project's search tool that
#: gives the same figures; the others are from the datasheet and not checked here.
GPUS: dict[str, Gpu] = {g.name: g for g in [
    Gpu("A100-40G", 312e12, None, 1555e9,
        "NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): BF16 312 TFLOPS dense, "
        "40 GB HBM2 1,555 GB/s (SXM); checked: glennklockwood.com/garden/processors/A100"),
    Gpu("A100-80G", 312e12, None, 2039e9,
        "NVIDIA A100 datasheet: BF16 312 TFLOPS dense, 80 GB HBM2e 2,039 GB/s (SXM); "
        "checked: glennklockwood.com/garden/processors/A100"),
    Gpu("A100-80G-PCIE", 312e12, None, 1935e9,
        "NVIDIA A100 datasheet: BF16 312 TFLOPS dense, 80 GB HBM2e 1,935 GB/s (PCIe); not checked here"),
    Gpu("H100-SXM", 989.4e12, 1978.9e12, 3.35e12,
        "NVIDIA H100 datasheet: BF16 1,979 TFLOPS with sparsity (989.4 dense), FP8 3,958 with sparsity, "
        "HBM3 3.35 TB/s (SXM5); checked: glennklockwood.com/garden/processors/h100, "
        "archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html"),
    Gpu("H100-PCIE", 756.5e12, 1513e12, 2.0e12,
        "NVIDIA H100 datasheet: BF16 1,513 TFLOPS with sparsity (756.5 dense), FP8 3,026 with sparsity, "
        "HBM2e 2,000 GB/s (PCIe); checked: archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html"),
    Gpu("H200", 989.4e12, 1978.9e12, 4.8e12,
        "NVIDIA H200 datasheet: the H100 SXM's tensor cores, 141 GB HBM3e 4.8 TB/s; not checked here"),
    Gpu("L40S", 362.05e12, 733e12, 864e9,
        "NVIDIA L40S datasheet: BF16 362.05 TFLOPS dense (733 with sparsity), FP8 733 dense, "
        "48 GB GDDR6 864 GB/s; checked: www.mullet.se/product.html?product_id=355414 (the datasheet table)"),
]}


@dataclass(frozen=True)
class Model:
    """A model's parameters, layers, KV heads and head size, with their source."""

    name: str
    params: float
    layers: int
    kv_heads: int
    head_dim: int
    source: str


#: Built-in models (the Hugging Face config.json and model card of each).
MODELS: dict[str, Model] = {m.name: m for m in [
    Model("Qwen3-8B", 8.2e9, 36, 8, 128,
          "huggingface.co/Qwen/Qwen3-8B: model card 8.2B parameters; config.json num_hidden_layers 36, "
          "num_key_value_heads 8, head_dim 128 (config checked)"),
    Model("Qwen3-32B", 32.8e9, 64, 8, 128,
          "huggingface.co/Qwen/Qwen3-32B: model card 32.8B parameters; config.json 64 layers, 8 KV heads, "
          "head_dim 128 (config checked on a copy)"),
    Model("Llama-3.1-8B", 8.03e9, 32, 8, 128,
          "huggingface.co/meta-llama/Llama-3.1-8B: 8.03B parameters; config.json 32 layers, 8 KV heads, "
          "hidden 4096 / 32 heads = head size 128 (the Llama 3 8B config checked)"),
    Model("Llama-3.1-70B", 70.6e9, 80, 8, 128,
          "huggingface.co/meta-llama/Llama-3.1-70B: 70.6B parameters; config.json 80 layers, 8 KV heads, "
          "hidden 8192 / 64 heads = head size 128 (the Llama 3 70B config checked)"),
]}


def _lookup(table: dict[str, Any], name: str, what: str, flag: str) -> Any:
    for k, v in table.items():
        if k.lower() == name.lower():
            return v
    starts = [k for k in table if k.lower().startswith(name.lower())]
    hint = suggest(name, list(table))
    helps = ([f"did you mean one of {', '.join(starts)}?"] if starts else
             [f"did you mean `{hint}`?"] if hint else [])
    helps.append(f"the built-in {what}s: {', '.join(table)}; or give the figures with {flag}")
    raise SerqError(f"unknown {what} `{name}`", helps=helps)


def gpu(name: str) -> Gpu:
    return _lookup(GPUS, name, "GPU", "--flops and --bandwidth")  # type: ignore[no-any-return]


def model(name: str) -> Model:
    return _lookup(MODELS, name, "model", "--params, --layers, --kv-heads and --head-dim")  # type: ignore[no-any-return]


@dataclass
class Roofline:
    """The constants and the figures they came from."""

    a: float
    omega: float
    beta: float
    params: float
    layers: int
    kv_heads: int
    head_dim: int
    w_bytes: float
    kv_bytes: float
    flops: float
    bandwidth: float
    model_name: str | None
    gpu_name: str | None
    dtype: str
    kv_dtype: str
    flops_eff: float
    bw_eff: float
    sources: list[str]

    def sets(self) -> str:
        return f"--set a={_g(self.a)} --set omega={_g(self.omega)} --set beta={_g(self.beta)}"

    def text(self) -> str:
        F = self.flops * self.flops_eff
        W = self.bandwidth * self.bw_eff
        who = " on ".join(x for x in (self.model_name, self.gpu_name) if x) or "the given figures"
        eff = ""
        if self.flops_eff != 1.0 or self.bw_eff != 1.0:
            eff = f" (peaks scaled by --flops-eff {_g(self.flops_eff)}, --bw-eff {_g(self.bw_eff)})"
        lines = [
            f"roofline constants for {who}, weights {self.dtype}, KV cache {self.kv_dtype}{eff}",
            f"  P = {_g(self.params)} parameters, L = {self.layers} layers, H = {self.kv_heads} KV heads, "
            f"D = {self.head_dim}",
            f"  F = {_g(F)} FLOP/s, W = {_g(W)} bytes/s",
            "",
            f"a     = 2 * P / F            = 2 * {_g(self.params)} / {_g(F)} = {_g(self.a)} s per token",
            f"omega = P * {_g(self.w_bytes)} B / W        = {_g(self.params)} * {_g(self.w_bytes)} / {_g(W)} "
            f"= {_g(self.omega)} s per step",
            f"beta  = 2 * L * H * D * {_g(self.kv_bytes)} B / W = 2 * {self.layers} * {self.kv_heads} * "
            f"{self.head_dim} * {_g(self.kv_bytes)} / {_g(W)} = {_g(self.beta)} s per resident KV token",
            "",
            self.sets(),
        ]
        if self.sources:
            lines.append("")
            lines.extend(f"# {s}" for s in self.sources)
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "omega": self.omega, "beta": self.beta, "sets": self.sets(),
                "params": self.params, "layers": self.layers, "kv_heads": self.kv_heads, "head_dim": self.head_dim,
                "weight_bytes": self.w_bytes, "kv_bytes": self.kv_bytes, "flops": self.flops,
                "bandwidth": self.bandwidth, "flops_eff": self.flops_eff, "bw_eff": self.bw_eff,
                "model": self.model_name, "gpu": self.gpu_name, "dtype": self.dtype, "kv_dtype": self.kv_dtype,
                "sources": self.sources}


def _g(x: float) -> str:
    return f"{x:.6g}"


def _positive(name: str, x: float | None) -> None:
    if x is not None and not (math.isfinite(x) and x > 0):
        raise SerqError(f"--{name}: {x:g} must be finite and > 0")


def compute(*, model_name: str | None = None, params: float | None = None, layers: int | None = None,
            kv_heads: int | None = None, head_dim: int | None = None, dtype: str = "bf16",
            kv_dtype: str | None = None, gpu_name: str | None = None, flops: float | None = None,
            bandwidth: float | None = None, flops_eff: float = 1.0, bw_eff: float = 1.0) -> Roofline:
    """The roofline constants; a flag given with ``--model`` or ``--gpu``
    overrides that figure of the built-in entry."""
    sources: list[str] = []
    dtype = dtype.lower()
    kv_dtype = (kv_dtype or dtype).lower()
    for flag, d in (("dtype", dtype), ("kv-dtype", kv_dtype)):
        if d not in DTYPE_BYTES:
            hint = suggest(d, list(DTYPE_BYTES))
            raise SerqError(f"--{flag}: unknown dtype `{d}`",
                            helps=([f"did you mean `{hint}`?"] if hint else []) + [
                                f"the dtypes: {', '.join(DTYPE_BYTES)}"])
    m = model(model_name) if model_name is not None else None
    if m is not None:
        sources.append(f"{m.name}: {m.source}")
        params = m.params if params is None else params
        layers = m.layers if layers is None else layers
        kv_heads = m.kv_heads if kv_heads is None else kv_heads
        head_dim = m.head_dim if head_dim is None else head_dim
    missing = [f for f, v in (("--params", params), ("--layers", layers), ("--kv-heads", kv_heads),
                              ("--head-dim", head_dim)) if v is None]
    if missing:
        raise SerqError(f"the model's shape needs {', '.join(missing)} (or --model NAME)",
                        helps=[f"the built-in models: {', '.join(MODELS)}"])
    g = gpu(gpu_name) if gpu_name is not None else None
    if g is not None:
        sources.append(f"{g.name}: {g.source}")
        if flops is None:
            col = _FLOPS_COLUMN.get(dtype)
            peak = None if col is None else getattr(g, col)
            if peak is None:
                raise SerqError(f"--gpu {g.name}: no built-in {dtype} FLOP/s figure",
                                helps=["give the peak with --flops F"])
            flops = peak
        bandwidth = g.bandwidth if bandwidth is None else bandwidth
    if flops is None or bandwidth is None:
        raise SerqError("the GPU needs --gpu NAME or both --flops F and --bandwidth B",
                        helps=[f"the built-in GPUs: {', '.join(GPUS)}"])
    for name, v in (("params", params), ("flops", flops), ("bandwidth", bandwidth), ("flops-eff", flops_eff),
                    ("bw-eff", bw_eff)):
        _positive(name, v)
    for name, iv in (("layers", layers), ("kv-heads", kv_heads), ("head-dim", head_dim)):
        if not (isinstance(iv, int) and iv > 0):
            raise SerqError(f"--{name}: {iv} must be a positive whole number")
    assert params is not None and layers is not None and kv_heads is not None and head_dim is not None
    wb = DTYPE_BYTES[dtype]
    kb = DTYPE_BYTES[kv_dtype]
    F = flops * flops_eff
    W = bandwidth * bw_eff
    return Roofline(a=2.0 * params / F, omega=params * wb / W, beta=2.0 * layers * kv_heads * head_dim * kb / W,
                    params=params, layers=layers, kv_heads=kv_heads, head_dim=head_dim, w_bytes=wb, kv_bytes=kb,
                    flops=flops, bandwidth=bandwidth, model_name=m.name if m else None,
                    gpu_name=g.name if g else None, dtype=dtype, kv_dtype=kv_dtype, flops_eff=flops_eff,
                    bw_eff=bw_eff, sources=sources)


def listing() -> str:
    """The built-in GPUs and models, with their sources."""
    lines = ["GPU            BF16 TFLOP/s  FP8 TFLOP/s  bandwidth GB/s  source"]
    for g in GPUS.values():
        fp8 = f"{g.fp8 / 1e12:g}" if g.fp8 else "-"
        lines.append(f"{g.name:<14} {g.bf16 / 1e12:>12g}  {fp8:>11}  {g.bandwidth / 1e9:>14g}  {g.source}")
    lines.append("")
    lines.append("model          params  layers  KV heads  head size  source")
    for m in MODELS.values():
        lines.append(f"{m.name:<14} {m.params / 1e9:>5g}B  {m.layers:>6}  {m.kv_heads:>8}  {m.head_dim:>9}  {m.source}")
    return "\n".join(lines) + "\n"

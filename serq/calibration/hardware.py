"""The built-in GPUs and models of ``serq roofline`` (docs/calibration.md), each figure with its source.

A figure that could not be sourced is ``None`` (left out, never guessed): a
GPU without a sourced interconnect latency needs ``--ar-latency`` for
``--tp``, as a model without its hidden size needs ``--hidden``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    """A GPU's peak dense (no 2:4 sparsity) tensor FLOP/s by dtype, its memory
    bandwidth in bytes/s, and (where sourced) its memory in bytes, its
    GPU-to-GPU link bandwidth (bytes/s, both directions together, as the
    datasheets give it) and that link's latency (s), with their sources."""

    name: str
    bf16: float
    fp8: float | None
    bandwidth: float
    source: str
    memory: float | None = None
    link: float | None = None
    link_latency: float | None = None
    link_source: str = ""


#: NVLink per GPU, both directions together (NVLink 3.0: 12 links, 4.0: 18 links of 50 GB/s;
#: 5.0: 18 links of 100 GB/s): wikimili.com/en/NVLink (from NVIDIA's architecture papers),
#: alpha-one-index.github.io/ai-infra-index/specs/networking-interconnects.html, textbookofai.com/glossary/nvlink.
_NVLINK = "NVLink {v} {bw} GB/s per GPU (both directions; wikimili.com/en/NVLink, alpha-one-index.github.io networking table)"
#: NVLink 4.0's latency: "~1-2 us" (fridayswithfaraday.com/posts/gpu-hw-nvlink-nvswitch-interconnect, its H100 DGX
#: table): a link's latency, the floor of an all-reduce's; NCCL's measured small-message all-reduce is slower.
_NVLINK4_LATENCY = "latency 2 us, the upper end of NVLink 4.0's ~1-2 us (fridayswithfaraday.com H100 DGX table)"

#: Built-in GPUs.  NVIDIA's datasheets list tensor FLOP/s "with sparsity" for
#: Hopper, Ada and Blackwell; the dense figure is half of it (the datasheets' footnote).
#: "checked" names a public page found with this project's search tool that
#: gives the same figures; the others are from the datasheet and not checked here.
GPUS: dict[str, Gpu] = {g.name: g for g in [
    Gpu("A100-40G", 312e12, None, 1555e9,
        "NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): BF16 312 TFLOPS dense, "
        "40 GB HBM2 1,555 GB/s (SXM); checked: glennklockwood.com/garden/processors/A100",
        memory=40e9, link=600e9, link_source=_NVLINK.format(v="3.0", bw=600)),
    Gpu("A100-80G", 312e12, None, 2039e9,
        "NVIDIA A100 datasheet: BF16 312 TFLOPS dense, 80 GB HBM2e 2,039 GB/s (SXM); "
        "checked: glennklockwood.com/garden/processors/A100",
        memory=80e9, link=600e9, link_source=_NVLINK.format(v="3.0", bw=600)),
    Gpu("A100-80G-PCIE", 312e12, None, 1935e9,
        "NVIDIA A100 datasheet: BF16 312 TFLOPS dense, 80 GB HBM2e 1,935 GB/s (PCIe); not checked here",
        memory=80e9),
    Gpu("H100-SXM", 989.4e12, 1978.9e12, 3.35e12,
        "NVIDIA H100 datasheet: BF16 1,979 TFLOPS with sparsity (989.4 dense), FP8 3,958 with sparsity, "
        "HBM3 3.35 TB/s (SXM5); checked: glennklockwood.com/garden/processors/h100, "
        "archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html",
        memory=80e9, link=900e9, link_latency=2e-6,
        link_source=_NVLINK.format(v="4.0", bw=900) + "; " + _NVLINK4_LATENCY),
    Gpu("H100-PCIE", 756.5e12, 1513e12, 2.0e12,
        "NVIDIA H100 datasheet: BF16 1,513 TFLOPS with sparsity (756.5 dense), FP8 3,026 with sparsity, "
        "HBM2e 2,000 GB/s (PCIe); checked: archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html",
        memory=80e9),
    Gpu("H200", 989.4e12, 1978.9e12, 4.8e12,
        "NVIDIA H200 datasheet: the H100 SXM's tensor cores, 141 GB HBM3e 4.8 TB/s; checked: "
        "itkb.uw.cz/2026/06/nvidia-h200-vs-b300-precisions-cores.html (BF16 ~989 dense, 141 GB, 4.8 TB/s, NVLink 900 GB/s)",
        memory=141e9, link=900e9, link_latency=2e-6,
        link_source=_NVLINK.format(v="4.0", bw=900) + "; " + _NVLINK4_LATENCY),
    Gpu("L40S", 362.05e12, 733e12, 864e9,
        "NVIDIA L40S datasheet: BF16 362.05 TFLOPS dense (733 with sparsity), FP8 733 dense, "
        "48 GB GDDR6 864 GB/s; checked: www.mullet.se/product.html?product_id=355414 (the datasheet table)",
        memory=48e9),
    Gpu("B200", 2250e12, 4500e12, 8.0e12,
        "NVIDIA HGX B200 datasheet (1,000 W): BF16 4.5 PFLOPS with sparsity (2,250 TFLOPS dense), FP8 4,500 dense, "
        "192 GB HBM3e 8 TB/s; checked: glennklockwood.com/garden/processors/B200 (NVIDIA's HGX table), "
        "hmc-tech.com/gpus/nvidia-b200-vs-nvidia-b100",
        memory=192e9, link=1800e9, link_source=_NVLINK.format(v="5.0", bw=1800)),
    Gpu("MI300X", 1307.4e12, 2614.9e12, 5.3e12,
        "AMD Instinct MI300X datasheet: BF16 1,307.4 TFLOPS dense (2,614.9 with sparsity), FP8 2,614.9 dense, "
        "192 GB HBM3 5.3 TB/s; checked: jaredwatkins.com/research/ai-accelerators/amd-instinct/mi300-series "
        "(~1.3 PFLOPS FP16, ~2.6 FP8, 192 GB, 5.3 TB/s)",
        memory=192e9, link=896e9,
        link_source="Infinity Fabric 896 GB/s per GPU (7 links, both directions; a fully connected 8-GPU mesh): "
                    "gpu.blog/gpus/instinct-mi300x-mi300x"),
]}


@dataclass(frozen=True)
class Model:
    """A model's parameters (for a mixture of experts, ``params`` is the
    total and ``active`` those one token runs through), layers, KV heads and
    head size, and (where sourced) its hidden size, attention heads, MLP
    (or per-expert) intermediate size, vocabulary and experts, with their source."""

    name: str
    params: float
    layers: int
    kv_heads: int
    head_dim: int
    source: str
    hidden: int | None = None
    heads: int | None = None
    intermediate: int | None = None
    vocab: int | None = None
    active: float | None = None
    experts: int | None = None
    experts_active: int | None = None


#: Built-in models (the Hugging Face config.json and model card of each).
MODELS: dict[str, Model] = {m.name: m for m in [
    Model("Qwen3-8B", 8.2e9, 36, 8, 128,
          "huggingface.co/Qwen/Qwen3-8B: model card 8.2B parameters; config.json num_hidden_layers 36, "
          "num_key_value_heads 8, head_dim 128 (config checked)",
          hidden=4096, heads=32, intermediate=12288, vocab=151936),
    Model("Qwen3-32B", 32.8e9, 64, 8, 128,
          "huggingface.co/Qwen/Qwen3-32B: model card 32.8B parameters; config.json 64 layers, 8 KV heads, "
          "head_dim 128 (config checked on a copy)",
          hidden=5120, heads=64, intermediate=25600, vocab=151936),
    Model("Llama-3.1-8B", 8.03e9, 32, 8, 128,
          "huggingface.co/meta-llama/Llama-3.1-8B: 8.03B parameters; config.json 32 layers, 8 KV heads, "
          "hidden 4096 / 32 heads = head size 128 (the Llama 3 8B config checked)",
          hidden=4096, heads=32, intermediate=14336, vocab=128256),
    Model("Llama-3.1-70B", 70.6e9, 80, 8, 128,
          "huggingface.co/meta-llama/Llama-3.1-70B: 70.6B parameters; config.json 80 layers, 8 KV heads, "
          "hidden 8192 / 64 heads = head size 128 (the Llama 3 70B config checked)",
          hidden=8192, heads=64, intermediate=28672, vocab=128256),
    # 405.85e9 from the config's shapes: embeddings and output head 2 * 128256 * 16384 = 4.203e9, and
    # 126 layers of q, o 16384^2 each, k, v 16384 * 1024 each, MLP 3 * 16384 * 53248 = 3.1877e9 a layer.
    Model("Llama-3.1-405B", 405.85e9, 126, 8, 128,
          "huggingface.co/meta-llama/Llama-3.1-405B: config.json hidden 16384, 126 layers, 128 heads, 8 KV heads, "
          "intermediate 53248, vocab 128256 (checked: oumi configs/recipes/llama3_1/README.md); "
          "405.85B parameters counted from those shapes (the model card says 405B)",
          hidden=16384, heads=128, intermediate=53248, vocab=128256),
    Model("Qwen2.5-7B", 7.61e9, 28, 4, 128,
          "huggingface.co/Qwen/Qwen2.5-7B: model card 7.61B parameters; config.json hidden 3584, 28 layers, "
          "28 heads, 4 KV heads (head size 128), intermediate 18944, vocab 152064 "
          "(checked: a copy of the layer shapes, q 3584x3584, k 512x3584, MLP 18944x3584)",
          hidden=3584, heads=28, intermediate=18944, vocab=152064),
    Model("Qwen2.5-72B", 72.7e9, 80, 8, 128,
          "huggingface.co/Qwen/Qwen2.5-72B: model card 72.7B parameters; config.json hidden 8192, 80 layers, "
          "64 heads, 8 KV heads (head size 128), intermediate 29568, vocab 152064 (checked: a copy of the config)",
          hidden=8192, heads=64, intermediate=29568, vocab=152064),
    Model("Qwen3-30B-A3B", 30.5e9, 48, 4, 128,
          "huggingface.co/Qwen/Qwen3-30B-A3B: model card 30.5B parameters, 3.3B activated; config.json hidden 2048, "
          "48 layers, 32 heads, 4 KV heads, head_dim 128, 128 experts, 8 a token, moe_intermediate_size 768, "
          "vocab 151936 (checked: slime scripts/models/qwen3-30B-A3B.sh)",
          hidden=2048, heads=32, intermediate=768, vocab=151936, active=3.3e9, experts=128, experts_active=8),
    Model("Mixtral-8x7B", 46.7e9, 32, 8, 128,
          "huggingface.co/mistralai/Mixtral-8x7B-v0.1: 46.7B parameters, 12.9B active (Mistral's announcement); "
          "config.json hidden 4096, 32 layers, 32 heads, 8 KV heads, intermediate 14336, 8 experts, 2 a token, "
          "vocab 32000 (checked: a copy of the config)",
          hidden=4096, heads=32, intermediate=14336, vocab=32000, active=12.9e9, experts=8, experts_active=2),
]}


def listing() -> str:
    """The built-in GPUs and models, with their sources."""
    lines = ["GPU            BF16 TFLOP/s  FP8 TFLOP/s  bandwidth GB/s  memory GB  link GB/s  source"]
    for g in GPUS.values():
        fp8 = f"{g.fp8 / 1e12:g}" if g.fp8 else "-"
        mem = f"{g.memory / 1e9:g}" if g.memory else "-"
        link = f"{g.link / 1e9:g}" if g.link else "-"
        src = g.source + (f"; {g.link_source}" if g.link_source else "")
        lines.append(f"{g.name:<14} {g.bf16 / 1e12:>12g}  {fp8:>11}  {g.bandwidth / 1e9:>14g}  {mem:>9}  {link:>9}  {src}")
    lines.append("")
    lines.append(f"{'model':<15} {'params':>7}  {'active':>6}  layers  KV heads  head size  hidden  experts  source")
    for m in MODELS.values():
        act = f"{m.active / 1e9:g}B" if m.active else "-"
        hid = str(m.hidden) if m.hidden else "-"
        exp = f"{m.experts_active}/{m.experts}" if m.experts else "-"
        lines.append(f"{m.name:<15} {m.params / 1e9:>6g}B  {act:>6}  {m.layers:>6}  {m.kv_heads:>8}  {m.head_dim:>9}  "
                     f"{hid:>6}  {exp:>7}  {m.source}")
    return "\n".join(lines) + "\n"

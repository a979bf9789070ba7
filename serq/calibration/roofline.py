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
from . import hardware

#: Bytes per element of each dtype.
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
#: The tensor-core FLOP/s column a dtype computes at (fp16 = bf16 on these GPUs).
_FLOPS_COLUMN = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8"}


#: The tables live in hardware.py; these names stay importable from here.
GPUS = hardware.GPUS
MODELS = hardware.MODELS
Gpu = hardware.Gpu
Model = hardware.Model
listing = hardware.listing


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
    """The constants and the figures they came from (``tp`` GPUs; one when 1)."""

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
    tp: int = 1
    active: float | None = None
    hidden: int | None = None
    link: float | None = None
    ar_latency: float | None = None
    act_bytes: float = 2.0
    gamma: float = 0.0
    c0: float = 0.0
    memory: float | None = None

    def sets(self) -> str:
        s = f"--set a={_g(self.a)} --set omega={_g(self.omega)} --set beta={_g(self.beta)}"
        return s + (f" --set c0={_g(self.c0)}" if self.tp > 1 else "")

    def cost(self) -> str:
        """The step cost these constants make (with numbers), as a ``cost`` line."""
        roof = f"max({_g(self.omega)} + {_g(self.beta)} * (kv_decode + kv_prefill), tokens * {_g(self.a)})"
        if self.tp == 1:
            return f"cost {roof};"
        return f"cost {_g(self.c0)} + {roof} + tokens * {_g(self.gamma)};"

    def text(self) -> str:
        F = self.flops * self.flops_eff
        W = self.bandwidth * self.bw_eff
        K = self.tp
        who = " on ".join(x for x in (self.model_name, self.gpu_name) if x) or "the given figures"
        if K > 1:
            who += f" x {K}, tensor parallel"
        eff = ""
        if self.flops_eff != 1.0 or self.bw_eff != 1.0:
            eff = f" (peaks scaled by --flops-eff {_g(self.flops_eff)}, --bw-eff {_g(self.bw_eff)})"
        act = "" if self.active is None else f" ({_g(self.active)} active a token)"
        lines = [
            f"roofline constants for {who}, weights {self.dtype}, KV cache {self.kv_dtype}{eff}",
            f"  P = {_g(self.params)} parameters{act}, L = {self.layers} layers, H = {self.kv_heads} KV heads, "
            f"D = {self.head_dim}" + ("" if K == 1 else f", hidden = {self.hidden}"),
            f"  F = {_g(F)} FLOP/s, W = {_g(W)} bytes/s" + ("" if K == 1 else " per GPU"),
        ]
        if K > 1:
            assert self.link is not None and self.ar_latency is not None
            lines.append(f"  K = {K} GPUs, link = {_g(self.link)} bytes/s a direction, all-reduce latency "
                         f"t = {_g(self.ar_latency)} s, activations {_g(self.act_bytes)} B")
        lines.append("")
        pa, pa_name = (self.params, "P") if self.active is None else (self.active, "P_active")
        hk = _kv_heads_per_gpu(self.kv_heads, K)
        if K == 1:
            lines += [
                f"a     = 2 * {pa_name} / F            = 2 * {_g(pa)} / {_g(F)} = {_g(self.a)} s per token",
                f"omega = P * {_g(self.w_bytes)} B / W        = {_g(self.params)} * {_g(self.w_bytes)} / {_g(W)} "
                f"= {_g(self.omega)} s per step",
                f"beta  = 2 * L * H * D * {_g(self.kv_bytes)} B / W = 2 * {self.layers} * {self.kv_heads} * "
                f"{self.head_dim} * {_g(self.kv_bytes)} / {_g(W)} = {_g(self.beta)} s per resident KV token",
            ]
        else:
            assert self.hidden is not None and self.link is not None and self.ar_latency is not None
            lines += [
                f"a     = 2 * {pa_name} / (K * F)      = 2 * {_g(pa)} / ({K} * {_g(F)}) = {_g(self.a)} s per token",
                f"omega = P * {_g(self.w_bytes)} B / (K * W)  = {_g(self.params)} * {_g(self.w_bytes)} / ({K} * {_g(W)}) "
                f"= {_g(self.omega)} s per step",
                f"beta  = 2 * L * H_gpu * D * {_g(self.kv_bytes)} B / W = 2 * {self.layers} * {_g(hk)} * "
                f"{self.head_dim} * {_g(self.kv_bytes)} / {_g(W)} = {_g(self.beta)} s per resident KV token "
                f"(H_gpu = {_g(hk)} KV heads a GPU)",
                f"gamma = 2 * L * 2(K-1)/K * hidden * {_g(self.act_bytes)} B / link = 2 * {self.layers} * "
                f"{_g(2 * (K - 1) / K)} * {self.hidden} * {_g(self.act_bytes)} / {_g(self.link)} = {_g(self.gamma)} "
                f"s per token (two ring all-reduces a layer)",
                f"c0    = 2 * L * t                = 2 * {self.layers} * {_g(self.ar_latency)} = {_g(self.c0)} s per step",
            ]
            wgpu = self.params * self.w_bytes / K
            fit = ""
            if self.memory is not None:
                fit = f" of the GPU's {_g(self.memory / 1e9)} GB" + (" (does not fit)" if wgpu > self.memory else "")
            lines += ["", f"weights a GPU: P * {_g(self.w_bytes)} B / K = {_g(wgpu / 1e9)} GB{fit}"]
        lines += ["", self.sets()]
        if K > 1:
            lines += ["", "step cost (the bundled programs' cost plus the all-reduces, tokens * gamma):",
                      self.cost()]
        if self.sources:
            lines.append("")
            lines.extend(f"# {s}" for s in self.sources)
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        j = {"a": self.a, "omega": self.omega, "beta": self.beta, "sets": self.sets(),
             "params": self.params, "layers": self.layers, "kv_heads": self.kv_heads, "head_dim": self.head_dim,
             "weight_bytes": self.w_bytes, "kv_bytes": self.kv_bytes, "flops": self.flops,
             "bandwidth": self.bandwidth, "flops_eff": self.flops_eff, "bw_eff": self.bw_eff,
             "model": self.model_name, "gpu": self.gpu_name, "dtype": self.dtype, "kv_dtype": self.kv_dtype,
             "sources": self.sources}
        if self.active is not None:
            j["active_params"] = self.active
        if self.tp > 1:  # a single GPU's JSON keeps its keys (and bytes)
            j.update({"tp": self.tp, "gamma": self.gamma, "c0": self.c0, "hidden": self.hidden, "link": self.link,
                      "ar_latency": self.ar_latency, "act_bytes": self.act_bytes, "cost": self.cost()})
        return j


def _g(x: float) -> str:
    return f"{x:.6g}"


def _kv_heads_per_gpu(kv_heads: int, tp: int) -> float:
    """KV heads a GPU holds: ``H / K``, or one (replicated) when ``K`` exceeds ``H``
    (vLLM's ``QKVParallelLinear`` replicates a KV head over ``K / H`` GPUs)."""
    return kv_heads / tp if tp <= kv_heads else 1.0


def _positive(name: str, x: float | None) -> None:
    if x is not None and not (math.isfinite(x) and x > 0):
        raise SerqError(f"--{name}: {x:g} must be finite and > 0")


def compute(*, model_name: str | None = None, params: float | None = None, layers: int | None = None,
            kv_heads: int | None = None, head_dim: int | None = None, dtype: str = "bf16",
            kv_dtype: str | None = None, gpu_name: str | None = None, flops: float | None = None,
            bandwidth: float | None = None, flops_eff: float = 1.0, bw_eff: float = 1.0, tp: int = 1,
            hidden: int | None = None, active_params: float | None = None, link_bandwidth: float | None = None,
            ar_latency: float | None = None, model_entry: Model | None = None,
            gpu_entry: Gpu | None = None) -> Roofline:
    """The roofline constants; a flag given with ``--model`` or ``--gpu``
    overrides that figure of the built-in entry.  ``model_entry`` and
    ``gpu_entry`` pass a table entry directly (a test's made-up model and GPU).

    With ``tp = K`` GPUs in tensor parallel (Megatron-LM's split, as vLLM
    runs it): each GPU holds ``1/K`` of every weight matrix and ``H/K`` of the
    KV heads (one, replicated, when ``K > H``), computes ``1/K`` of the FLOPs,
    and the layer's two row-parallel outputs (attention's output projection
    and the MLP's down projection) are summed by an all-reduce of the step's
    activations, ``tokens * hidden * b`` bytes.  A ring all-reduce moves
    ``2(K-1)/K`` of that over each GPU's link, one direction at a time, plus
    a latency ``t``: over the ``2L`` all-reduces of a step that is
    ``tokens * gamma + c0``, added to the step (not overlapped with the
    compute or the memory reads), with
    ``gamma = 2L * 2(K-1)/K * hidden * b / link`` and ``c0 = 2L * t``.
    ``link`` is a direction's bandwidth: half the datasheet's both-ways figure.
    For a mixture of experts ``a`` counts the active parameters and ``omega``
    every weight (a batch of more than a few tokens reads every expert)."""
    sources: list[str] = []
    dtype = dtype.lower()
    kv_dtype = (kv_dtype or dtype).lower()
    for flag, d in (("dtype", dtype), ("kv-dtype", kv_dtype)):
        if d not in DTYPE_BYTES:
            hint = suggest(d, list(DTYPE_BYTES))
            raise SerqError(f"--{flag}: unknown dtype `{d}`",
                            helps=([f"did you mean `{hint}`?"] if hint else []) + [
                                f"the dtypes: {', '.join(DTYPE_BYTES)}"])
    m = model_entry if model_entry is not None else model(model_name) if model_name is not None else None
    if m is not None:
        sources.append(f"{m.name}: {m.source}")
        params = m.params if params is None else params
        layers = m.layers if layers is None else layers
        kv_heads = m.kv_heads if kv_heads is None else kv_heads
        head_dim = m.head_dim if head_dim is None else head_dim
        hidden = m.hidden if hidden is None else hidden
        active_params = m.active if active_params is None else active_params
    missing = [f for f, v in (("--params", params), ("--layers", layers), ("--kv-heads", kv_heads),
                              ("--head-dim", head_dim)) if v is None]
    if missing:
        raise SerqError(f"the model's shape needs {', '.join(missing)} (or --model NAME)",
                        helps=[f"the built-in models: {', '.join(MODELS)}"])
    g = gpu_entry if gpu_entry is not None else gpu(gpu_name) if gpu_name is not None else None
    link: float | None = link_bandwidth
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
        if tp > 1:
            if link is None and g.link is not None:
                link = g.link / 2
            if ar_latency is None:
                ar_latency = g.link_latency
            if g.link_source:
                sources.append(f"{g.name} link: {g.link_source}")
    if flops is None or bandwidth is None:
        raise SerqError("the GPU needs --gpu NAME or both --flops F and --bandwidth B",
                        helps=[f"the built-in GPUs: {', '.join(GPUS)}"])
    for name, v in (("params", params), ("flops", flops), ("bandwidth", bandwidth), ("flops-eff", flops_eff),
                    ("bw-eff", bw_eff), ("active-params", active_params), ("link-bandwidth", link_bandwidth)):
        _positive(name, v)
    if ar_latency is not None and not (math.isfinite(ar_latency) and ar_latency >= 0):
        raise SerqError(f"--ar-latency: {ar_latency:g} must be finite and >= 0")
    for name, iv in (("layers", layers), ("kv-heads", kv_heads), ("head-dim", head_dim), ("tp", tp)):
        if not (isinstance(iv, int) and iv > 0):
            raise SerqError(f"--{name}: {iv} must be a positive whole number")
    assert params is not None and layers is not None and kv_heads is not None and head_dim is not None
    if active_params is not None and active_params > params:
        raise SerqError(f"--active-params: {active_params:g} exceeds the {params:g} parameters")
    if tp > 1:
        where = f"--gpu {g.name}" if g is not None else "the given GPU"
        if hidden is None:
            raise SerqError("--tp needs the model's hidden size: give --hidden N (or a --model with one)")
        if not (isinstance(hidden, int) and hidden > 0):
            raise SerqError(f"--hidden: {hidden} must be a positive whole number")
        if link is None:
            raise SerqError(f"--tp: {where} has no built-in GPU-to-GPU link bandwidth",
                            helps=["give a direction's bandwidth with --link-bandwidth B (bytes/s)"])
        if ar_latency is None:
            raise SerqError(f"--tp: {where} has no sourced all-reduce latency",
                            helps=["give it with --ar-latency S (seconds; 0 for none)"])
        if (kv_heads % tp if tp <= kv_heads else tp % kv_heads) != 0:
            raise SerqError(f"--tp {tp} does not split {kv_heads} KV heads evenly",
                            helps=["vLLM needs the KV heads a multiple of the tensor-parallel size, or the reverse"])
    wb = DTYPE_BYTES[dtype]
    kb = DTYPE_BYTES[kv_dtype]
    ab = 4.0 if dtype == "fp32" else 2.0  # activations: the compute dtype, bf16 for 16- and 8-bit weights
    F = flops * flops_eff
    W = bandwidth * bw_eff
    K = tp
    pa = params if active_params is None else active_params
    gamma = c0 = 0.0
    if K > 1:
        assert hidden is not None and link is not None and ar_latency is not None
        gamma = 2.0 * layers * (2.0 * (K - 1) / K) * hidden * ab / link
        c0 = 2.0 * layers * ar_latency
    a = 2.0 * pa / (K * F) if K > 1 else 2.0 * pa / F
    omega = params * wb / (K * W) if K > 1 else params * wb / W
    beta = 2.0 * layers * _kv_heads_per_gpu(kv_heads, K) * head_dim * kb / W
    # each figure given is finite and > 0, and still a product or quotient of them can leave the
    # floats (an efficiency of 1e-320, a bandwidth of 1e308): a constant of inf or 0 is no cost
    for name, x in (("a", a), ("omega", omega), ("beta", beta)) + ((("gamma", gamma),) if K > 1 else ()):
        if not (math.isfinite(x) and x > 0.0):
            raise SerqError(f"the figures given make {name} {x:g} s, not a finite time above 0",
                            helps=["a FLOP/s, bandwidth, efficiency or model size this far from a real one "
                                   "leaves the floats: check --flops, --bandwidth, --flops-eff, --bw-eff and "
                                   "--link-bandwidth"])
    if not math.isfinite(c0):
        raise SerqError(f"the figures given make c0 {c0:g} s, not a finite time",
                        helps=["check --ar-latency: two all-reduces a layer take it each"])
    return Roofline(a=a, omega=omega, beta=beta,
                    params=params, layers=layers, kv_heads=kv_heads, head_dim=head_dim, w_bytes=wb, kv_bytes=kb,
                    flops=flops, bandwidth=bandwidth, model_name=m.name if m else None,
                    gpu_name=g.name if g else None, dtype=dtype, kv_dtype=kv_dtype, flops_eff=flops_eff,
                    bw_eff=bw_eff, sources=sources, tp=K, active=active_params, hidden=hidden,
                    link=link if K > 1 else None, ar_latency=ar_latency if K > 1 else None, act_bytes=ab,
                    gamma=gamma, c0=c0, memory=g.memory if g is not None else None)

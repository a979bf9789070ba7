"""Compare the ready-made admission policies on common random numbers.

    python benchmarks/compare_admission.py [--seeds 10] [--horizon 1000] [--jobs N]
                                           [--policies fcfs,sjf,lpm,fair,slo]
                                           [--loads 0.4,0.55,0.65] [--trace-load 30]
                                           [--figures DIR] [--no-trace] [--azure FILE]
                                           [--system-loads 30,45,60] [--system-horizon 100]
                                           [--no-agent] [--no-system]

Three experiments, each one :func:`serq.sweep`:

1. **The agent** (``programs/multi-turn/vllm.sq``) at three loads — below, near
   and past the knee (``Lambda`` 0.4, 0.55, 0.65) — for every policy and seeds
   1…N.  The same seed gives every policy the same sessions (arrival times,
   task and tool lengths, output lengths: the streams are keyed by session and
   turn, not by what the engine did), so a policy's figure minus FCFS's on the
   same seed is a *paired* difference: its spread across seeds is much smaller
   than either figure's own, and the Student-t interval of the mean difference
   says whether the policy really differs.
2. **System prompts on the shared prefix cache**
   (``programs/single-turn/vllm_system_prompt.sq``, issue 14): single-turn
   requests, each beginning with one of 8 system prompts that every request
   with the same prompt shares in the cache, at three loads (``Lambda`` 30, 45,
   60 requests per second: engine busy 0.84, 0.96 and 0.99 at seed 1).  ``lpm``
   reads the shared cache here: a waiting request's ``cachedin(kv)`` is its
   system prompt's cached blocks.  Skipped with ``--no-system``.
3. **A replayed trace**: the Azure LLM inference trace 2023 (conversation)
   from ``../shared/data/azure-llm-2023/conv.csv`` or ``--azure FILE`` (not
   part of serQ; docs/policies.md says where to get it), one single-turn session per request in file
   order (``trace … ordered``: prompt and output lengths from the trace,
   arrivals Poisson at ``--trace-load`` requests per second), on the same
   engine.  Skipped when the file is absent or with ``--no-trace``.

Prints, per experiment, a table of the means across seeds (± the 95 %
Student-t half-width across seeds) and a table of paired differences against
FCFS; with ``--figures DIR`` also writes ``policies_agent.svg`` (TTFT p99
against load, one line per policy; needs ``serq[plot]``).  The output and
how to read it are in ``docs/policies.md``.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import serq
from serq.experiments.stats import across
from serq.experiments.summary import paired

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "programs" / "multi-turn" / "vllm.sq"
SYSTEM = ROOT / "programs" / "single-turn" / "vllm_system_prompt.sq"
AZURE = ROOT.parent / "shared" / "data" / "azure-llm-2023" / "conv.csv"

#: (column, heading, decimals) of the tables.
FIGURES: list[tuple[str, str, int]] = [
    ("client.ttft.mean", "ttft mean", 3),
    ("client.ttft.p99", "ttft p99", 3),
    ("client.response.mean", "response mean", 3),
    ("pools.kv.preemptions", "preempt", 1),
]
#: The system-prompt experiment's: TTFT of 10–40 ms want more digits, and what the cache saved.
SYSTEM_FIGURES: list[tuple[str, str, int]] = [
    ("client.ttft.mean", "ttft mean", 4),
    ("client.ttft.p99", "ttft p99", 4),
    ("client.response.mean", "response mean", 4),
    ("observes.prefill_tokens.mean", "prefill", 1),
    ("pools.kv.preemptions", "preempt", 1),
]

#: The single-turn replay: the engine of lib/vllm.sq, prompt and output from the trace.
REPLAY = """\
use "{lib}";

let B = 8192;          // the engine of the four bundled vLLM programs
let max_seqs = 16;
let blocks = 10000;
let bs = 16;
let chunk_cap = 0;
let a = 2e-5;
let omega = 2e-4;
let beta = 2e-9;
let c0 = 0;

let Lambda = 30;       // requests per second (the trace's own times are not replayed)

pool kv {{ cap blocks * bs; block bs; evict lru; preempt lifo; }}
pool reqs {{ cap max_seqs; admit via engine; }}
stage engine : step {{
  budget B;
  chunk long_prefill(reqs, chunk_cap);
  cost c0 + max(omega + beta * (kv_decode + kv_prefill), tokens * a);
  memory kv;
}}

server {{
  set prompt = K + new;
  vllm_request(reqs, kv, engine, prompt, out);
}}

workload {{
  arrive poisson(Lambda);
  trace "{trace}" ordered;   // one session per trace request, in file order
  hidden out;
  init {{ set K = 0; }}
  session {{ turn; request; end; }}
}}
"""


def azure_trace(src: Path, dst: Path) -> int:
    """Write the Azure conversation trace as a serQ trace (one single-turn
    session per request); the number of requests."""
    n = 0
    with src.open(newline="") as f, dst.open("w") as out:
        out.write("session,turn,new,out,think\n")
        for row in csv.DictReader(f):
            out.write(f"{n},1,{row['num_prefill_tokens']},{row['num_decode_tokens']},0\n")
            n += 1
    return n


def fmt(x: float, decimals: int) -> str:
    return "-" if not math.isfinite(x) else f"{x:.{decimals}f}"


def cell(values: Sequence[Any], decimals: int) -> str:
    iv = across(values)
    if iv.n == 0:
        return "-"
    return f"{fmt(iv.mean, decimals)} ± {fmt(iv.half, decimals)}"


def tables(rows: list[Mapping[str, Any]], axis: str, policies: Sequence[str], base: str = "fcfs",
           figures: Sequence[tuple[str, str, int]] = FIGURES) -> str:
    """Markdown: the means across seeds, then the paired differences against ``base``."""
    points = list(dict.fromkeys(r[axis] for r in rows))
    by = {(r[axis], r["policy"], r["seed"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    heads = [h for _, h, _ in figures]
    out = [f"| {axis} | policy | " + " | ".join(heads) + " |", "|---" * (2 + len(heads)) + "|"]
    for p in points:
        for pol in policies:
            vals = [cell([by[p, pol, s].get(c) for s in seeds if (p, pol, s) in by], d) for c, _, d in figures]
            out.append(f"| {p} | {pol} | " + " | ".join(vals) + " |")
    out += ["", f"Paired differences against {base} (policy − {base}, same seed; mean ± 95 % half-width):", ""]
    out += [f"| {axis} | policy | " + " | ".join(f"Δ {h}" for h in heads) + " |", "|---" * (2 + len(heads)) + "|"]
    # the paired differences `serq sweep --baseline policy=fcfs` prints (serq.experiments.summary.paired)
    diffs = paired(rows, [axis, "policy"], [c for c, _, _ in figures], "policy", base)
    for values, stats in diffs.points:
        vals = []
        for c, _, d in figures:
            iv = stats[c]
            mark = " *" if iv.n > 1 and math.isfinite(iv.half) and abs(iv.mean) > iv.half else ""
            vals.append("-" if iv.n == 0 else f"{iv.mean:+.{d}f} ± {fmt(iv.half, d)}{mark}")
        out.append(f"| {values[axis]} | {values['policy']} | " + " | ".join(vals) + " |")
    out.append("")
    out.append("`*`: the interval excludes 0 (the policy differs from FCFS at 95 %).")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds 1…N (default 10)")
    ap.add_argument("--horizon", type=float, default=1000.0, help="agent runs' horizon (warm-up a tenth)")
    ap.add_argument("--trace-horizon", type=float, default=300.0, help="replay runs' horizon (warm-up a tenth)")
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: the cores)")
    ap.add_argument("--policies", default="fcfs,sjf,lpm,fair,slo")
    ap.add_argument("--loads", default="0.4,0.55,0.65", help="the agent's Lambda values")
    ap.add_argument("--trace-load", type=float, default=30.0, help="replay arrivals per second")
    ap.add_argument("--figures", type=Path, default=None, help="write policies_agent.svg here")
    ap.add_argument("--no-trace", action="store_true", help="skip the replayed trace")
    ap.add_argument("--no-agent", action="store_true", help="skip the agent")
    ap.add_argument("--system-loads", default="30,45,60", help="the system-prompt program's Lambda values")
    ap.add_argument("--system-horizon", type=float, default=100.0,
                    help="system-prompt runs' horizon (warm-up a tenth)")
    ap.add_argument("--no-system", action="store_true", help="skip the system-prompt program")
    ap.add_argument("--azure", type=Path, default=AZURE,
                    help="the Azure conversation trace (arrived_at,num_prefill_tokens,num_decode_tokens)")
    args = ap.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if "fcfs" not in policies:
        policies.insert(0, "fcfs")
    seeds = range(1, args.seeds + 1)
    loads = [float(x) for x in args.loads.split(",")]

    if not args.no_agent:
        t0 = time.perf_counter()
        agent = serq.sweep(AGENT, grid={"Lambda": loads}, policies={"engine": policies}, seeds=seeds,
                           jobs=args.jobs, horizon=args.horizon, warmup=args.horizon / 10)
        print(f"## The agent (programs/multi-turn/vllm.sq), horizon {args.horizon:g}, "
              f"seeds 1-{args.seeds}: {len(agent.rows)} runs in {time.perf_counter() - t0:.0f} s\n")
        print(tables(agent.rows, "Lambda", policies))
        if args.figures is not None:
            from serq.experiments.plot import plot_sweep

            args.figures.mkdir(parents=True, exist_ok=True)
            plot_sweep(agent, x="Lambda", y="client.ttft.p99", hue="policy",
                       out=args.figures / "policies_agent.svg")
            print(f"\nwrote {args.figures / 'policies_agent.svg'}")

    if not args.no_system:
        t0 = time.perf_counter()
        system_loads = [float(x) for x in args.system_loads.split(",")]
        system = serq.sweep(SYSTEM, grid={"Lambda": system_loads}, policies={"engine": policies}, seeds=seeds,
                            jobs=args.jobs, horizon=args.system_horizon, warmup=args.system_horizon / 10)
        print(f"\n## System prompts on the shared prefix cache (programs/single-turn/vllm_system_prompt.sq), "
              f"horizon {args.system_horizon:g}, seeds 1-{args.seeds}: {len(system.rows)} runs in "
              f"{time.perf_counter() - t0:.0f} s\n")
        print(tables(system.rows, "Lambda", policies, figures=SYSTEM_FIGURES))

    if args.no_trace:
        return 0
    if not args.azure.is_file():
        print(f"\n(no replayed trace: {args.azure} is absent; see docs/policies.md for where to get it)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "conv.csv"
        n = azure_trace(args.azure, trace)
        program = Path(tmp) / "replay.sq"
        program.write_text(REPLAY.format(lib=ROOT / "lib" / "vllm.sq", trace=trace.name))
        t0 = time.perf_counter()
        replay = serq.sweep(program, grid={"Lambda": [args.trace_load]}, policies={"engine": policies},
                            seeds=seeds, jobs=args.jobs, horizon=args.trace_horizon,
                            warmup=args.trace_horizon / 10)
        print(f"\n## The Azure conversation trace ({n} requests, replayed in order), "
              f"horizon {args.trace_horizon:g}, seeds 1-{args.seeds}: "
              f"{len(replay.rows)} runs in {time.perf_counter() - t0:.0f} s\n")
        print(tables(replay.rows, "Lambda", policies))
    return 0


if __name__ == "__main__":
    sys.exit(main())

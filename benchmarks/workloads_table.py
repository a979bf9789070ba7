"""The workloads table of the seed (`docs/workloads.md`): the four vLLM
workload programs on the shared engine, seed by seed.

    python benchmarks/workloads_table.py [--seeds 1 2 3] [--horizon 2000 --warmup 200]

Columns: requests/s (turns answered after warm-up per second), hit rate (mean
of `hit`), prefill tokens (mean of `prefill_tokens`), TTFT and response
(client means, ms), engine busy (the engine stage's utilisation); then the wall
time of the row.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import serq

ROOT = Path(__file__).resolve().parent.parent

ROWS = [
    ("vllm_single_turn", "programs/single-turn/vllm_single_turn.sq", {}),
    ("vllm_chat", "programs/multi-turn/vllm_chat.sq", {}),
    ("vllm", "programs/multi-turn/vllm.sq", {}),
    ("vllm_subagents --set q=0", "programs/subagent/vllm_subagents.sq", {"q": "0"}),
    ("vllm_subagents", "programs/subagent/vllm_subagents.sq", {}),
]


def row(report: serq.Report) -> tuple[float, ...]:
    span = report.end - report.warmup
    return (
        report.observe("response").count / span,
        report.observe("hit").mean,
        report.observe("prefill_tokens").mean,
        report.observe("ttft").mean * 1000,
        report.observe("response").mean * 1000,
        report.stage("engine").utilization,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--horizon", type=float, default=2000.0)
    ap.add_argument("--warmup", type=float, default=200.0)
    args = ap.parse_args()
    print("| program | seed | requests/s | hit rate | prefill tokens | TTFT (ms) | response (ms) | engine busy | wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, path, sets in ROWS:
        program = serq.load(ROOT / path, sets=sets)
        for seed in args.seeds:
            t = time.perf_counter()
            report = serq.run(program, seed=seed, horizon=args.horizon, warmup=args.warmup)
            wall = time.perf_counter() - t
            r = row(report)
            print(f"| `{name}` | {seed} | {r[0]:.2f} | {r[1]:.2f} | {r[2]:,.0f} | {r[3]:.0f} | {r[4]:.0f} | "
                  f"{r[5]:.2f} | {wall:.1f} |".replace(",", " "))


if __name__ == "__main__":
    main()

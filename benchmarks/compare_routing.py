"""Compare the routers of lib/routers.sq on the two cluster programs, paired on
common random numbers, and find the fewest replicas each workload needs.

    python benchmarks/compare_routing.py [--seeds 10] [--jobs N] [--figures DIR]
        [--agent-loads 0.3,0.5,0.65] [--agent-horizon 300]
        [--system-loads 6,14,20] [--system-horizon 120]
        [--no-agent] [--no-system] [--no-replicas] [--replica-seeds 3]

1. **The agent** (``programs/cluster/agents.sq``: the multi-turn agent on 4
   replicas of the vLLM engine) at three loads per replica — below, near and
   past the knee — for routers 0-5 (random, round robin, least outstanding
   requests, least KV usage, power of two choices, session affinity).
2. **System prompts** (``programs/cluster/system_prompt.sq``: single-turn
   requests opening with one of 200 system prompts, each replica with its own
   content-keyed prefix cache) at three loads per replica, routers 0-6 (6:
   prefix-cache aware).
3. **The fewest replicas** (``--find-min N``) that keep the TTFT p99 under an
   SLO at a fixed total traffic, for the best router of each workload and for
   random, on ``--replica-seeds`` seeds (every seed must meet it).

Every router runs the same seeds: a seed gives every router the same sessions
(arrival times, prompts, output lengths, tool times: the streams are keyed by
session and turn, not by where a request went), so a router's figure minus
random's on the same seed is a paired difference, whose interval across seeds
says whether the two really differ.  Prints markdown tables (means across seeds
± the 95 % Student-t half-width, then the paired differences against random)
and, with ``--figures DIR``, ``routing_agent.svg`` and ``routing_system.svg``
(TTFT p99 and hit rate against load, one line per router; needs
``serq[plot]``) with the rows beside them (``routing_*.jsonl``, to draw again
with ``serq plot``).  The output and how to read it are in docs/cluster.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import serq
from serq.experiments.grid import parse_set_axis, parse_slo
from serq.experiments.search import find_min
from serq.experiments.stats import across

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "programs" / "cluster" / "agents.sq"
SYSTEM = ROOT / "programs" / "cluster" / "system_prompt.sq"

ROUTERS = {0: "random", 1: "round robin", 2: "least requests", 3: "least KV", 4: "power of two",
           5: "affinity", 6: "prefix aware"}

#: (column or sum over the replicas' pools, heading, decimals)
FIGURES: list[tuple[str, str, int]] = [
    ("client.ttft.mean", "ttft mean", 4),
    ("client.ttft.p99", "ttft p99", 4),
    ("observes.hit.mean", "hit", 3),
    ("observes.prefill_tokens.mean", "prefill", 0),
    ("preemptions", "preempt", 1),
    ("gauges.busiest.mean", "busiest", 2),
    ("gauges.kv_spread.mean", "kv spread", 0),
]


def figure(row: Mapping[str, Any], column: str) -> float | None:
    """A row's figure; ``preemptions`` is the sum over every KV pool of the family."""
    if column == "preemptions":
        values = [v for k, v in row.items() if k.startswith("pools.kv[") and k.endswith(".preemptions")]
        return float(sum(values)) if values else None
    v = row.get(column)
    return None if v is None else float(v)


def fmt(x: float, decimals: int) -> str:
    return "-" if not math.isfinite(x) else f"{x:.{decimals}f}"


def tables(rows: list[Mapping[str, Any]], routers: Sequence[int], base: int = 0) -> str:
    """Markdown: means across seeds, then paired differences against router ``base``."""
    loads = list(dict.fromkeys(r["Lambda"] for r in rows))
    by = {(r["Lambda"], int(r["router"]), r["seed"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    heads = [h for _, h, _ in FIGURES]
    out = ["| Lambda | router | " + " | ".join(heads) + " |", "|---" * (2 + len(heads)) + "|"]
    for lam in loads:
        for k in routers:
            cells = []
            for column, _, d in FIGURES:
                iv = across(figure(by[lam, k, s], column) for s in seeds if (lam, k, s) in by)
                cells.append("-" if iv.n == 0 else f"{fmt(iv.mean, d)} ± {fmt(iv.half, d)}")
            out.append(f"| {lam:g} | {ROUTERS[k]} | " + " | ".join(cells) + " |")
    out += ["", f"Paired differences against {ROUTERS[base]} (router − {ROUTERS[base]}, same seed; "
                "mean ± 95 % half-width; `*`: the interval excludes 0):", ""]
    out += ["| Lambda | router | " + " | ".join(f"Δ {h}" for h in heads) + " |", "|---" * (2 + len(heads)) + "|"]
    for lam in loads:
        for k in routers:
            if k == base:
                continue
            cells = []
            for column, _, d in FIGURES:
                diffs = []
                for s in seeds:
                    a, b = by.get((lam, k, s)), by.get((lam, base, s))
                    if a is None or b is None:
                        continue
                    x, y = figure(a, column), figure(b, column)
                    if x is not None and y is not None:
                        diffs.append(x - y)
                iv = across(diffs)
                mark = " *" if iv.n > 1 and math.isfinite(iv.half) and abs(iv.mean) > iv.half else ""
                cells.append("-" if iv.n == 0 else f"{iv.mean:+.{d}f} ± {fmt(iv.half, d)}{mark}")
            out.append(f"| {lam:g} | {ROUTERS[k]} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def study(program: Path, routers: Sequence[int], loads: Sequence[float], seeds: range, horizon: float,
          jobs: int | None, title: str, figures: Path | None, name: str) -> None:
    t0 = time.perf_counter()
    result = serq.sweep(program, grid={"router": list(routers), "Lambda": list(loads)}, seeds=seeds, jobs=jobs,
                        horizon=horizon, warmup=horizon / 10)
    print(f"## {title} ({program.relative_to(ROOT)}), horizon {horizon:g}, seeds {seeds[0]}-{seeds[-1]}: "
          f"{len(result.rows)} runs in {time.perf_counter() - t0:.0f} s\n")
    print(tables(result.rows, routers))
    print()
    if figures is not None:
        from serq.experiments.plot import plot_sweep

        figures.mkdir(parents=True, exist_ok=True)
        out = figures / f"routing_{name}.svg"
        named = [{**r, "router": ROUTERS[int(r["router"])]} for r in result.rows]  # the legend says the names
        plot_sweep(named, x="Lambda", y=["client.ttft.p99", "observes.hit.mean"], hue="router", out=out)
        rows = figures / f"routing_{name}.jsonl"  # to draw again without running
        rows.write_text("".join(json.dumps(r) + "\n" for r in result.rows))
        print(f"wrote {out} and {rows}\n")


def fewest(program: Path, router: int, total: float, slo: str, top: int, seeds: range, horizon: float,
           jobs: int | None) -> str:
    """``--find-min N`` at ``total`` arrivals a second: the fewest replicas meeting ``slo``."""
    axes = [parse_set_axis(f"N=1:{top}", allow_interval=True), parse_set_axis(f"router={router}"),
            parse_set_axis(f"total={total:g}")]
    t0 = time.perf_counter()
    result = find_min(str(program), axes, "N", [parse_slo(slo)], list(seeds),
                      run_options={"jobs": jobs}, plan_options={"horizon": horizon, "warmup": horizon / 10})
    steps = ", ".join(f"{int(s['value'])} {'meets' if s['met'] else 'fails'}" for s in result.steps)
    answer = "none up to " + str(top) if result.value is None else str(int(result.value))
    return (f"| {program.name} | {total:g} | {ROUTERS[router]} | {slo} | {answer} | {steps} | "
            f"{time.perf_counter() - t0:.0f} s |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds 1…N (default 10)")
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: the cores)")
    ap.add_argument("--agent-loads", default="0.3,0.5,0.65", help="agents.sq's Lambda (per replica)")
    ap.add_argument("--agent-horizon", type=float, default=300.0, help="warm-up a tenth")
    ap.add_argument("--system-loads", default="6,14,20", help="system_prompt.sq's Lambda (per replica)")
    ap.add_argument("--system-horizon", type=float, default=120.0, help="warm-up a tenth")
    ap.add_argument("--replica-seeds", type=int, default=3, help="seeds of the --find-min searches")
    ap.add_argument("--figures", type=Path, default=None, help="write routing_*.svg here")
    ap.add_argument("--no-agent", action="store_true")
    ap.add_argument("--no-system", action="store_true")
    ap.add_argument("--no-replicas", action="store_true", help="skip the --find-min searches")
    args = ap.parse_args(argv)
    seeds = range(1, args.seeds + 1)
    if not args.no_agent:
        study(AGENT, [0, 1, 2, 3, 4, 5], [float(x) for x in args.agent_loads.split(",")], seeds,
              args.agent_horizon, args.jobs, "The agent on 4 replicas", args.figures, "agent")
    if not args.no_system:
        study(SYSTEM, [0, 1, 2, 3, 4, 5, 6], [float(x) for x in args.system_loads.split(",")], seeds,
              args.system_horizon, args.jobs, "System prompts on 4 replicas", args.figures, "system")
    if not args.no_replicas:
        rs = range(1, args.replica_seeds + 1)
        print("## The fewest replicas under a TTFT p99 SLO (`--find-min N`, every seed must meet it)\n")
        print("| program | total arrivals/s | router | SLO | fewest N | evaluations | time |")
        print("|---|---|---|---|---|---|---|")
        for program, router, total, horizon in ((AGENT, 0, 2.4, args.agent_horizon),
                                                (AGENT, 5, 2.4, args.agent_horizon),
                                                (SYSTEM, 0, 60.0, args.system_horizon),
                                                (SYSTEM, 6, 60.0, args.system_horizon)):
            print(fewest(program, router, total, "client.ttft.p99<=0.5", 12, rs, horizon, args.jobs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

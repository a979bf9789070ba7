"""The subagent study of issue 11, item 5 (docs/subagents.md, "What it shows").

    python benchmarks/study_subagents.py            # the full study (tables of the doc, figure)
    python benchmarks/study_subagents.py --quick    # a small version (minutes -> seconds)

It compares `programs/subagent/vllm_spawn.sq` (feedback: a delegating parent
spawns k children and joins them) with `programs/subagent/vllm_subagents.sq`
(the seed's approximation: children in their own Poisson stream, the parent
waits a constant `W`):

1. the parents' mean join wait at the default parameters, across seeds, against
   the approximation's fixed point W = 14.7 s, and what makes the difference;
2. `--set q=0`: the two programs' shared figures, compared exactly;
3. the cliff: task time and TTFT (mean, p99) against Lambda for both programs,
   the approximation with `W` re-solved at each Lambda by the seed's fixed-point
   iteration (W <- the mean of the slowest of k `subagent` samples);
4. a control: the feedback model with the approximation's child contexts.

Run time: the full study is 10.5 CPU-minutes (about 6 min on two idle cores;
29 min of wall time on a shared 2-core machine at load average 7); --quick is
about 20 CPU-seconds. `--replot docs/img/subagents_cliff.json --figure F.svg`
redraws the figure without running.

The programs are run unchanged except for observes added to a temporary copy
(an observe draws nothing, so every other figure is the same as the program's):
the approximation gets `observe task = now - t_s` for a parent at its end (its
task time: there are no trees in it), the spawn program `observe ctx = K` at a
spawn (the context its children copy). Runs go to a pool of `--jobs` processes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPAWN = ROOT / "programs" / "subagent" / "vllm_spawn.sq"
APPROX = ROOT / "programs" / "subagent" / "vllm_subagents.sq"
K = 3  # subagents per delegation in both programs
W_SEED = 14.7  # the approximation's fixed point at the defaults (the seed's)
CHILD_SERIALS = 1 << 32

FULL = dict(
    seeds1=list(range(1, 21)), horizon1=2000.0, warmup1=200.0,
    lambdas=[0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3],
    seeds3=list(range(1, 7)), horizon3=2000.0, warmup3=200.0, iterations=3,
    seeds_q0=[1, 2, 3],
)
QUICK = dict(
    seeds1=[1, 2, 3, 4], horizon1=600.0, warmup1=60.0,
    lambdas=[0.02, 0.1, 0.25],
    seeds3=[1, 2], horizon3=600.0, warmup3=60.0, iterations=2,
    seeds_q0=[1],
)
MAX_LIVE = 20_000


def variant(path: Path, kind: str, tmp: Path) -> Path:
    """A copy of the program with the study's observes (and the `use` made absolute)."""
    text = path.read_text(encoding="utf-8")
    if kind == "approx":
        old = "branch (sub) { observe subagent = now - t_s; }"
        new = "branch (sub) { observe subagent = now - t_s; } else { observe task = now - t_s; }"
    elif kind == "spawn":
        old = "spawn (k) into kids"
        new = "observe ctx = K;\n          spawn (k) into kids"
    else:  # "spawn4k": the children start from the approximation's context, not the parent's
        old = "spawn (k) into kids { set K = K;"
        new = "spawn (k) into kids { set K = ~uniform(2000, 6000);"
    assert text.count(old) == 1, f"{path.name}: the study's anchor `{old}` is not there once"
    out = tmp / f"study_{kind}.sq"
    out.write_text(text.replace(old, new), encoding="utf-8")
    return out


def expected_max(values: list[float], k: int = K) -> float:
    """E[max of k independent draws] from the empirical distribution of `values`:
    the seed's "mean of the slowest of k subagent samples"."""
    x = sorted(values)
    n = len(x)
    if n == 0:
        return float("nan")
    return sum(v * (((i + 1) / n) ** k - (i / n) ** k) for i, v in enumerate(x))


def one(job: tuple) -> dict:
    """One run; returns plain numbers (and the samples the fixed point needs)."""
    import serq

    kind, path, sets, seed, horizon, warmup = job
    spawnlike = kind.startswith("spawn")
    r = serq.run(serq.load(path, sets=sets), seed=seed, horizon=horizon, warmup=warmup, max_live=MAX_LIVE)
    ttft = r.client["ttft"]
    out = dict(kind=kind, sets=dict(sets), seed=seed, ttft_mean=ttft.mean, ttft_p99=ttft.p99,
               util=r.stage("engine").utilization, preempt=r.pool("kv").preemptions,
               mean_live=r.mean_live, requests=ttft.count)
    sub = [s.value for s in r.samples.get("subagent", [])]
    out["sub_mean"] = sum(sub) / len(sub) if sub else float("nan")
    out["sub_values"] = sub
    if spawnlike:
        jw = r.observe("join_wait")
        out["join_mean"], out["join_count"] = jw.mean, jw.count
        out["ctx_mean"] = r.observe("ctx").mean if "ctx" in r.observes else float("nan")
        if r.tasks is not None:
            out["task_mean"], out["task_p99"] = r.tasks.time.mean, r.tasks.time.p99
            out["task_count"], out["task_open"] = r.tasks.time.count, r.tasks.open
        # the children of one spawn are consecutive serials (every spawn has k children):
        # the slowest of each complete sibling group is that join's wait
        groups: dict[int, list[float]] = {}
        for s in r.samples.get("subagent", []):
            groups.setdefault((s.session - CHILD_SERIALS) // K, []).append(s.value)
        maxima = [max(g) for g in groups.values() if len(g) == K]
        out["sibling_max_mean"] = sum(maxima) / len(maxima) if maxima else float("nan")
    else:
        t = r.observe("task") if "task" in r.observes else None
        if t is not None and t.count:
            out["task_mean"], out["task_p99"], out["task_count"] = t.mean, t.p99, t.count
    return out


def across(values):
    from serq.experiments.stats import across as _across

    return _across([v for v in values if v is not None and v == v])


def fmt(iv, digits: int = 4) -> str:
    if iv.n == 0:
        return "-"
    if iv.half is None or iv.n < 2:
        return f"{iv.mean:.{digits}g}"
    return f"{iv.mean:.{digits}g} ± {iv.half:.2g}"


def table(header: list[str], rows: list[list[str]]) -> str:
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.rjust(w[i]) for i, c in enumerate(cells))  # noqa: E731
    return "\n".join([line(header), "  ".join("-" * x for x in w), *map(line, rows)])


def part1(pool, cfg, spawn: Path, approx: Path) -> dict:
    """The join wait at the defaults against W = 14.7."""
    h, wu, seeds = cfg["horizon1"], cfg["warmup1"], cfg["seeds1"]
    jobs = [("spawn", str(spawn), (), s, h, wu) for s in seeds]
    jobs += [("spawn", str(spawn), (("Lambda", "0.005"),), s, h * 4, wu) for s in seeds]
    jobs += [("approx", str(approx), (), s, h, wu) for s in seeds]
    res = pool.map(one, jobs)
    n = len(seeds)
    sp, lo, ap = res[:n], res[n:2 * n], res[2 * n:]
    pooled = lambda rs: expected_max([v for r in rs for v in r["sub_values"]])  # noqa: E731
    figures = {
        "join_wait (spawn, Lambda 0.1)": across(r["join_mean"] for r in sp),
        "slowest of k siblings (spawn, Lambda 0.1)": across(r["sibling_max_mean"] for r in sp),
        "E[max of k iid child times] (spawn, Lambda 0.1)": across(expected_max(r["sub_values"]) for r in sp),
        "mean child time (spawn, Lambda 0.1)": across(r["sub_mean"] for r in sp),
        "context a child copies, ctx (spawn, Lambda 0.1)": across(r["ctx_mean"] for r in sp),
        "join_wait (spawn, Lambda 0.005)": across(r["join_mean"] for r in lo),
        "mean child time (spawn, Lambda 0.005)": across(r["sub_mean"] for r in lo),
        "E[max of k iid child times] (approx, W 14.7)": across(expected_max(r["sub_values"]) for r in ap),
        "mean child time (approx, W 14.7)": across(r["sub_mean"] for r in ap),
        "TTFT mean (spawn, Lambda 0.1)": across(r["ttft_mean"] for r in sp),
        "TTFT mean (approx, W 14.7)": across(r["ttft_mean"] for r in ap),
        "engine utilization (spawn, Lambda 0.1)": across(r["util"] for r in sp),
        "engine utilization (approx, W 14.7)": across(r["util"] for r in ap),
    }
    print(f"\n## 1. Join wait against the fixed point W = {W_SEED} s "
          f"({n} seeds, horizon {h:g}, warm-up {wu:g}; Lambda 0.005 runs {h * 4:g} s)\n")
    print(table(["figure", "mean ± 95% CI across seeds"], [[k, fmt(v)] for k, v in figures.items()]))
    print(f"\npooled over the seeds: E[max of {K}] of the approximation's subagent samples = "
          f"{pooled(ap):.4g} s (the fixed-point statistic at W = {W_SEED}); "
          f"of the spawn program's = {pooled(sp):.4g} s")
    return {k: v.to_dict() for k, v in figures.items()}


def part2(cfg) -> dict:
    """`--set q=0`: are the two programs' shared figures identical?"""
    import serq

    out = {}
    print("\n## 2. --set q=0: the shared figures of the two programs\n")
    for seed in cfg["seeds_q0"]:
        a = serq.run(serq.load(SPAWN, sets={"q": "0"}), seed=seed).to_dict()
        b = serq.run(serq.load(APPROX, sets={"q": "0"}), seed=seed).to_dict()
        a["observes"].pop("join_wait", None)
        b["stages"].pop("delegate", None) if isinstance(b["stages"], dict) else None
        if isinstance(b["stages"], list):
            b["stages"] = [s for s in b["stages"] if s.get("name") != "delegate"]
        same = {key: json.dumps(a[key], sort_keys=True) == json.dumps(b[key], sort_keys=True)
                for key in ("client", "observes", "stages", "pools")}
        run_a = {k: a[k] for k in ("events", "arrivals", "ended", "turns", "mean_live")}
        run_b = {k: b[k] for k in ("events", "arrivals", "ended", "turns", "mean_live")}
        same["run line"] = run_a == run_b
        out[seed] = same
        print(f"seed {seed}: " + ", ".join(f"{k} {'identical' if v else 'DIFFERENT'}" for k, v in same.items())
              + f"; TTFT mean {a['client']['ttft']['mean']:.6g} s, {run_a['arrivals']} parents, "
              f"{run_a['events']} events")
    return out


def part3(pool, cfg, spawn: Path, approx: Path) -> dict:
    """The cliff: task time and TTFT against Lambda, W re-solved at each Lambda for the approximation."""
    h, wu, seeds, lambdas = cfg["horizon3"], cfg["warmup3"], cfg["seeds3"], cfg["lambdas"]
    sp = pool.map(one, [("spawn", str(spawn), (("Lambda", repr(L)),), s, h, wu) for L in lambdas for s in seeds])
    n = len(seeds)
    sp_at = {L: sp[i * n:(i + 1) * n] for i, L in enumerate(lambdas)}
    # the seed's fixed point at every Lambda: run with W, set W to the mean of the slowest of k
    # `subagent` samples (pooled over the seeds), repeat; the last run's W is the one reported
    W = {L: W_SEED for L in lambdas}
    history = {L: [W_SEED] for L in lambdas}
    ap_at, held = {}, {}
    for it in range(cfg["iterations"]):
        res = pool.map(one, [("approx", str(approx), (("Lambda", repr(L)), ("W", repr(W[L]))), s, h, wu)
                             for L in lambdas for s in seeds])
        for i, L in enumerate(lambdas):
            ap_at[L] = res[i * n:(i + 1) * n]
            if it == 0:
                held[L] = ap_at[L]
            new = expected_max([v for r in ap_at[L] for v in r["sub_values"]])
            history[L].append(new)
            if it < cfg["iterations"] - 1:
                W[L] = round(new, 3)
    rows, data = [], []
    for L in lambdas:
        s_, a_ = sp_at[L], ap_at[L]
        d = dict(Lambda=L, W=W[L], W_next=history[L][-1], W_history=history[L],
                 spawn={f: across(r.get(f) for r in s_).to_dict()
                        for f in ("task_mean", "task_p99", "ttft_mean", "ttft_p99", "join_mean", "util",
                                  "mean_live", "task_open", "preempt")},
                 approx={f: across(r.get(f) for r in a_).to_dict()
                         for f in ("task_mean", "task_p99", "ttft_mean", "ttft_p99", "util", "mean_live",
                                   "preempt")},
                 approx_held={f: across(r.get(f) for r in held[L]).to_dict()
                              for f in ("task_mean", "task_p99", "ttft_mean", "ttft_p99")})
        data.append(d)
        ratio = lambda f: d["approx"][f]["mean"] / d["spawn"][f]["mean"]  # noqa: E731
        rows.append([f"{L:g}", f"{W[L]:.4g}", f"{history[L][-1]:.4g}",
                     fmt(across(r.get("task_mean") for r in s_)), fmt(across(r.get("task_mean") for r in a_)),
                     f"{ratio('task_mean'):.2f}",
                     fmt(across(r.get("task_p99") for r in s_)), fmt(across(r.get("task_p99") for r in a_)),
                     f"{ratio('task_p99'):.2f}",
                     fmt(across(r["ttft_mean"] for r in s_), 3), fmt(across(r["ttft_mean"] for r in a_), 3),
                     fmt(across(r["ttft_p99"] for r in s_), 3), fmt(across(r["ttft_p99"] for r in a_), 3),
                     fmt(across(r["util"] for r in s_), 2), fmt(across(r["util"] for r in a_), 2)])
    print(f"\n## 3. The cliff ({n} seeds a point, horizon {h:g}, warm-up {wu:g}; approximation: W after "
          f"{cfg['iterations'] - 1} fixed-point updates from {W_SEED}, W' = the statistic of the last run)\n")
    print(table(["Lambda", "W", "W'", "task mean fb", "task mean ap", "ap/fb", "task p99 fb", "task p99 ap",
                 "ap/fb", "TTFT mean fb", "TTFT mean ap", "TTFT p99 fb", "TTFT p99 ap", "util fb", "util ap"],
                rows))
    print(f"\nthe approximation with W held at {W_SEED} (the first iteration's runs):\n")
    print(table(["Lambda", "task mean", "task p99", "TTFT mean", "TTFT p99"],
                [[f"{L:g}"] + [fmt(across(r.get(f) for r in held[L]), 3)
                               for f in ("task_mean", "task_p99", "ttft_mean", "ttft_p99")] for L in lambdas]))
    print("\nfixed-point iterates W0, W1, ... per Lambda:")
    for L in lambdas:
        print(f"  Lambda {L:g}: " + " -> ".join(f"{w:.4g}" for w in history[L]))
    return {"seeds": seeds, "horizon": h, "warmup": wu, "points": data}


def part4(pool, cfg, spawn4k: Path) -> dict:
    """A control: the feedback model with the approximation's child contexts (uniform(2000, 6000),
    one draw per spawn) instead of the parent's, to separate the context a child copies from
    the feedback itself."""
    h, wu, seeds, lambdas = cfg["horizon3"], cfg["warmup3"], cfg["seeds3"], cfg["lambdas"]
    res = pool.map(one, [("spawn4k", str(spawn4k), (("Lambda", repr(L)),), s, h, wu) for L in lambdas for s in seeds])
    n = len(seeds)
    rows, data = [], []
    for i, L in enumerate(lambdas):
        rs = res[i * n:(i + 1) * n]
        data.append(dict(Lambda=L, **{f: across(r.get(f) for r in rs).to_dict()
                                      for f in ("task_mean", "task_p99", "ttft_mean", "ttft_p99", "join_mean",
                                                "util")}))
        rows.append([f"{L:g}"] + [fmt(across(r.get(f) for r in rs), 3)
                                  for f in ("task_mean", "task_p99", "ttft_mean", "ttft_p99", "join_mean", "util")])
    print(f"\n## 4. Control: vllm_spawn.sq with the children's context ~uniform(2000, 6000) "
          f"({n} seeds a point, horizon {h:g}, warm-up {wu:g})\n")
    print(table(["Lambda", "task mean", "task p99", "TTFT mean", "TTFT p99", "join wait", "util"], rows))
    return {"points": data}


def figure(data: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "serq"
    import matplotlib.pyplot as plt

    pts = data["points"]
    L = [p["Lambda"] for p in pts]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for ax, (fm, fp, title) in zip(axes, [("task_mean", "task_p99", "task time (s)"),
                                          ("ttft_mean", "ttft_p99", "TTFT (s)")]):
        for side, label, color in (("spawn", "feedback (vllm_spawn.sq)", "C3"),
                                   ("approx", "approximation, W at its fixed point (vllm_subagents.sq)", "C0")):
            for f, style, what in ((fm, "-o", "mean"), (fp, "--s", "p99")):
                m = [p[side][f]["mean"] for p in pts]
                e = [p[side][f]["ci"] or 0 for p in pts]
                lower = [min(x, 0.9 * y) for x, y in zip(e, m)]  # a log axis: a bar past zero is cut at 10 % of the mean
                ax.errorbar(L, m, yerr=[lower, e], fmt=style, color=color, ms=4, capsize=2, label=f"{label}: {what}")
        # where the approximation's fixed point no longer settles (the last update moved W by > 5 %)
        loose = [p["Lambda"] for p in pts if abs(p["W_next"] - p["W"]) > 0.05 * p["W"]]
        if loose:
            i = L.index(loose[0])
            left = (L[i - 1] + L[i]) / 2 if i else L[i]
            ax.axvspan(left, L[-1] + 0.01, color="0.85", alpha=0.5, lw=0)
            ax.text(left, 0.02, " fixed-point iteration of W not settled (last step > 5 %)", transform=ax.get_xaxis_transform(),
                    fontsize=7, color="0.3")
        ax.set_yscale("log")
        ax.set_xlabel("Lambda: parents arriving per second")
        ax.set_ylabel(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_title("task time: a parent's arrival to its end")
    axes[1].set_title("TTFT of every request (parents and children)")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Subagents with feedback vs the fixed-point approximation "
                 f"({len(data['seeds'])} seeds a point, horizon {data['horizon']:g} s; bars: 95 % CI across seeds)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small version (short horizons, few seeds)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--parts", default="1,2,3,4")
    ap.add_argument("--replot", default=None, help="draw --figure from a --json file of an earlier run, run nothing")
    ap.add_argument("--figure", default=None, help="write the cliff figure here (.svg)")
    ap.add_argument("--json", default=None, help="write the study's numbers here")
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.replot:
        data = json.loads(Path(args.replot).read_text(encoding="utf-8"))
        figure(data.get("cliff", data), Path(args.figure))
        return 0
    parts = set(args.parts.split(","))
    t0 = time.time()
    result = {}
    with tempfile.TemporaryDirectory() as d, mp.get_context("spawn").Pool(args.jobs) as pool:
        spawn, approx = variant(SPAWN, "spawn", Path(d)), variant(APPROX, "approx", Path(d))
        spawn4k = variant(SPAWN, "spawn4k", Path(d))
        if "1" in parts:
            result["join_wait"] = part1(pool, cfg, spawn, approx)
        if "2" in parts:
            result["q0"] = part2(cfg)
        if "3" in parts:
            result["cliff"] = part3(pool, cfg, spawn, approx)
        if "4" in parts:
            result["control"] = part4(pool, cfg, spawn4k)
    if args.figure and "cliff" in result:
        figure(result["cliff"], Path(args.figure))
    if args.figure and "cliff" in result:
        Path(args.figure).with_suffix(".json").write_text(json.dumps(result["cliff"], indent=1) + "\n",
                                                          encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"\n{'quick' if args.quick else 'full'} study: {time.time() - t0:.0f} s wall with {args.jobs} jobs",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

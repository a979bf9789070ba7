"""The cost of an admission policy against the default engine.

    python benchmarks/bench_policies.py [--horizon 2000] [--repeat 3] [--loads 0.4 0.6] [--plain]

For each bundled policy (``serq.policies``: fcfs, sjf, lpm, fair, priority
on the attribute ``n``, slo) on ``programs/multi-turn/vllm.sq`` at each load
(seed 1, horizon 2000, warm-up a tenth of it), in-process ``serq.run``:

* ``wall``, ``cpu``: seconds, best of ``--repeat``; ``×fcfs``, ``cpu×``: the
  wall and the CPU time over the default engine's at the same load (the
  target is ≤ 1.2: a policy that only chooses which waiting request to admit
  keeps coalesced runs);
* ``iters``: engine iterations; ``simpy``: the events SimPy scheduled (a
  coalesced run is one); ``coalesced``: the share of iterations inside runs
  of two or more;
* ``ttft``: the client's mean time to first token (what the policy changes).

A policy changes the run (which requests wait, how long the queue is), so
its time differs from the default's for two reasons.  The row ``queue by``
separates them: the default engine on the same program with ``queue by
(prompt);`` on its request pool, the same run as ``sjf`` (the same report),
so ``sjf`` over ``queue by`` is the cost of the Python hook alone.

``--plain`` also runs each policy iteration by iteration (``coalesce =
False``) and says whether the report is byte-identical.  A shared machine
is noisy: the ratios of runs made one after the other are what to quote.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import serq
from serq.policies import resolve

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "programs/multi-turn/vllm.sq"
POLICIES = ["fcfs", "sjf", "lpm", "fair", "priority:n", "slo"]


def counting(cls: Any) -> Any:
    """``cls`` counting the iterations that ran inside coalesced runs."""

    def _iter_end(self: Any, timer: Any) -> None:
        if timer.epoch == self.epoch and self.run_length > 1:
            type(self).coalesced_iters += self.run_length
        cls._iter_end(self, timer)

    def __init__(self: Any, *args: Any, **kw: Any) -> None:
        cls.__init__(self, *args, **kw)
        type(self).env = self.sim.env

    return type(f"Counting{cls.__name__}", (cls,), {"_iter_end": _iter_end, "__init__": __init__,
                                                    "coalesced_iters": 0, "env": None})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=float, default=2000.0)
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs (default 3)")
    ap.add_argument("--loads", nargs="+", default=["0.4", "0.6"], help="values of Lambda (default 0.4 0.6)")
    ap.add_argument("--only", nargs="+", default=None, help="only these policies (fcfs always runs)")
    ap.add_argument("--plain", action="store_true", help="also run without coalescing and compare")
    args = ap.parse_args()
    horizon = args.horizon
    warmup = horizon / 10
    names = [n for n in POLICIES if n == "fcfs" or not args.only or n in args.only]
    print(f"vllm.sq, horizon {horizon:g}, warm-up {warmup:g}, seed 1; best of {args.repeat}; "
          f"python {sys.version.split()[0]}")
    print(f"{'Lambda':<6} {'policy':<11} {'wall':>6} {'cpu':>6} {'×fcfs':>6} {'cpu×':>6} {'iters':>8} {'simpy':>8} "
          f"{'coalesced':>9} {'ttft':>7}")
    text = PROGRAM.read_text().replace(
        "pool reqs { cap max_seqs; admit via engine; }", "pool reqs { cap max_seqs; admit via engine; queue by (prompt); }")
    folder = tempfile.TemporaryDirectory()
    queue_by = Path(folder.name) / "vllm_queue_by.sq"
    queue_by.write_text(text)
    for load in args.loads:
        program = serq.load(PROGRAM, sets={"Lambda": load})
        language = serq.load(queue_by, sets={"Lambda": load})
        base = base_cpu = 0.0
        for name in names + ["queue by"]:
            cls = counting(resolve("fcfs" if name == "queue by" else name))
            best = best_cpu = float("inf")
            report = None
            for _ in range(args.repeat):
                cls.coalesced_iters = 0  # type: ignore[attr-defined]
                t, c = time.perf_counter(), time.process_time()
                report = serq.run(language if name == "queue by" else program, seed=1, horizon=horizon,
                                  warmup=warmup, engines={"engine": cls})
                best = min(best, time.perf_counter() - t)
                best_cpu = min(best_cpu, time.process_time() - c)
            assert report is not None
            if not base:
                base, base_cpu = best, best_cpu
            iters = report.stage("engine").iterations
            simpy_events = next(cls.env._eid)  # type: ignore[attr-defined]
            share = cls.coalesced_iters / iters if iters else 0.0  # type: ignore[attr-defined]
            ttft = report.client["ttft"].mean if "ttft" in report.client else float("nan")
            print(f"{load:<6} {name:<11} {best:>6.2f} {best_cpu:>6.2f} {best / base:>6.2f} {best_cpu / base_cpu:>6.2f} {iters:>8} "
                  f"{simpy_events:>8} {share:>9.1%} {ttft:>7.3f}", flush=True)
            if args.plain and name != "queue by":
                plain_cls = type(f"Plain{cls.__name__}", (resolve(name),), {"coalesce": False})
                t = time.perf_counter()
                plain = serq.run(program, seed=1, horizon=horizon, warmup=warmup, engines={"engine": plain_cls})
                wall = time.perf_counter() - t
                same = plain.to_json() == report.to_json()
                print(f"       iteration by iteration: {wall:.2f} s; report {'identical' if same else 'DIFFERENT'}",
                      flush=True)


if __name__ == "__main__":
    main()

"""What a cluster costs to simulate, against its replicas one at a time.

    python benchmarks/bench_cluster.py [--n 8] [--horizon 300] [--rounds 3] [--router 2]
                                       [--program programs/cluster/agents.sq]
                                       [--no-gauges] [--no-passing]
    python benchmarks/bench_cluster.py --scale 8,64,256 [--horizon 200] [--rounds 3]
    python benchmarks/bench_cluster.py --parts 8,64 [--horizon 200]

Runs the cluster program with ``N = n`` replicas (``Lambda`` per replica, so
``n`` times the traffic) and with ``N = 1`` (one replica at the same per-replica
load), each in a fresh process, alternated ``--rounds`` times; keeps each one's
best CPU time (``time.process_time`` around ``serq.run``, the load and NumPy's
import excluded: a run imports it once its sessions pass 32 768 — 2048 before
2026-12-05 — which a cluster's may and a single's does not) and prints both,
the ratio of the cluster to ``n`` single runs (issue 22 asks for at most 1.2), events and iterations of each, and the share
of iterations that ran inside coalesced decode runs.  ``--no-gauges`` runs the program without its
``gauge`` lines (what the gauges cost: docs/speed.md, "A cluster's gauges, from a
log"); ``--no-passing`` makes runs end before the next
event again, as before they could pass over other engines' events
(``serq.sim.lazy.ENABLED``).

``--scale N1,N2,…`` times instead the whole process, as a planner runs it
(``serq run PROGRAM --horizon H --warmup H/10 --set N=n --set router=… --quiet``,
start-up included), for each ``n`` in turn, ``--rounds`` times alternated, and
prints each one's best wall and CPU time, the CPU time per replica and against
the first ``n``'s (issue 42 asks N = 64 for at most 1.3× N = 8's per replica),
and the process's peak memory (its maximum resident set).

``--parts N1,N2,…`` runs ``serq.run`` once in this process for each ``n``, with
the wall seconds of the parts whose cost per replica may grow with N added up
(``time.perf_counter`` around each call, about 1 µs a call; a part inside
another counts in both: ``bench_launches.py``'s ``timed_run``): the passing
runs' catching up, admission and release (serq/sim/lazy.py), the router's
index, the gauges' readings, the engines' iteration start and end.  Prints
each part's milliseconds per replica, for each ``n``: where a larger cluster's
extra cost per replica goes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import _interpreter  # (benchmarks/_interpreter.py: the script's folder is on the path)

ROOT = Path(__file__).resolve().parent.parent

CODE = r'''
import json, sys, time, serq
import numpy  # noqa: F401  (not timed: see the docstring)
from serq.sim.simulator import Simulator
from serq.sim.results import build_report
from serq.sim.stages.step import StepEngine

class Counting(StepEngine):
    """The default engine, counting the iterations that ran inside coalesced runs."""
    coalesced = total = 0
    def _iter_end(self, timer):
        if timer.epoch == self.epoch:
            Counting.total += self.run_length
            if self.run_length > 1:
                Counting.coalesced += self.run_length
        super()._iter_end(timer)

prog, n, router, horizon = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
if sys.argv[5] == "off":
    import serq.sim.lazy
    serq.sim.lazy.ENABLED = False
loaded = serq.load(prog, sets=[("N", n), ("router", router)])
sim = Simulator(loaded, seed=1, horizon=horizon, warmup=horizon / 10, engines={"engine": Counting})
t = time.process_time()
sim.run()
report = build_report(sim)
cpu = time.process_time() - t
print(json.dumps({"cpu": cpu, "events": report.events, "iters": Counting.total, "coalesced": Counting.coalesced}))
'''


def once(program: str, n: int, router: int, horizon: float, passing: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", CODE, program, str(n), str(router), str(horizon),
                          "on" if passing else "off"], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def whole(program: str, n: int, router: int, horizon: float) -> dict:
    """One whole ``serq run`` process: wall and CPU seconds, peak memory (MB)."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "serq", "run", program, "--horizon", f"{horizon:g}",
                             "--warmup", f"{horizon / 10:g}", "--set", f"N={n}", "--set", f"router={router}",
                             "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"serq run {program} with N={n} failed ({proc.returncode})")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "mb": usage.ru_maxrss / 1024}


def scale(program: str, ns: list[int], router: int, horizon: float, rounds: int) -> None:
    """``--scale``: see the module."""
    best: dict[int, dict] = {}
    for _ in range(rounds):
        for n in ns:
            got = whole(program, n, router, horizon)
            if n not in best or got["cpu"] < best[n]["cpu"]:
                best[n] = got
    print(_interpreter.describe())
    print(f"{program}, router {router}, horizon {horizon:g}, whole process, best of {rounds} (seconds)")
    base = best[ns[0]]["cpu"] / ns[0]
    for n in ns:
        got = best[n]
        per = got["cpu"] / n
        print(f"N = {n:<4d} wall {got['wall']:7.2f} s  CPU {got['cpu']:7.2f} s  {per:.3f} s a replica"
              f"  ({per / base:.2f}x N = {ns[0]})  peak memory {got['mb']:6.0f} MB")


def parts(program: str, ns: list[int], router: int, horizon: float) -> None:
    """``--parts``: each part's wall milliseconds per replica, for each N (see the module)."""
    from bench_launches import timed_run

    import serq
    from serq.sim.choose_index import Index
    from serq.sim.gauges import Gauges
    from serq.sim.lazy import LazyRuns
    from serq.sim.stages.step import StepEngine

    spots = ((LazyRuns, "catch_up"), (LazyRuns, "admit"), (LazyRuns, "release"), (Index, "choose"),
             (Gauges, "sample"), (StepEngine, "start_iteration"), (StepEngine, "_iter_end"))
    print(f"{program}, router {router}, horizon {horizon:g}: wall ms a replica (one run each)")
    print(f"{'N':>5} {'run':>8} " + " ".join(f"{name:>15}" for _cls, name in spots))
    for n in ns:
        loaded = serq.load(str(ROOT / program), sets=[("N", str(n)), ("router", str(router))])
        total, spent = timed_run(loaded, horizon, spots)
        print(f"{n:>5} {total / n * 1e3:8.1f} " + " ".join(f"{spent[name] / n * 1e3:15.1f}" for _c, name in spots))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--horizon", type=float, default=300.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--router", type=int, default=2)
    ap.add_argument("--program", default="programs/cluster/agents.sq")
    ap.add_argument("--no-gauges", action="store_true", help="the program without its gauge lines")
    ap.add_argument("--no-passing", action="store_true", help="runs end before the next event of any engine")
    ap.add_argument("--scale", help="N1,N2,…: whole `serq run` processes for each N (see the module)")
    ap.add_argument("--parts", help="N1,N2,…: the parts' wall time a replica, for each N (see the module)")
    args = ap.parse_args()
    if args.scale:
        try:
            ns = [int(x) for x in args.scale.split(",")]
        except ValueError:
            ap.error(f"--scale takes replica counts like 8,64,256, not {args.scale!r}")
        scale(args.program, ns, args.router, args.horizon, args.rounds)
        return
    if args.parts:
        try:
            ns = [int(x) for x in args.parts.split(",")]
        except ValueError:
            ap.error(f"--parts takes replica counts like 8,64, not {args.parts!r}")
        parts(args.program, ns, args.router, args.horizon)
        return
    program = args.program
    stripped = None
    if args.no_gauges:  # a copy beside it (its `use` paths are relative), without the gauges
        src = ROOT / program
        stripped = src.with_name(f".{src.stem}-no-gauges.sq")
        stripped.write_text("".join(line for line in src.read_text().splitlines(keepends=True)
                                    if not line.startswith("gauge ")))
        program = str(stripped.relative_to(ROOT))
    best: dict[int, dict] = {}
    try:
        for _ in range(args.rounds):
            for n in (args.n, 1):
                got = once(program, n, args.router, args.horizon, not args.no_passing)
                if n not in best or got["cpu"] < best[n]["cpu"]:
                    best[n] = got
    finally:
        if stripped is not None:
            stripped.unlink()
    many, one = best[args.n], best[1]
    what = (" without gauges" if args.no_gauges else "") + (", runs stop at every event" if args.no_passing else "")
    print(f"{args.program}{what}, router {args.router}, horizon {args.horizon:g}, best of {args.rounds} "
          "(CPU seconds)")
    for n, got in ((args.n, many), (1, one)):
        share = got["coalesced"] / got["iters"] if got["iters"] else float("nan")
        print(f"N = {n:<3d} {got['cpu']:8.2f} s  events {got['events']:>9,}  iterations {got['iters']:>10,}"
              f"  in coalesced runs {share:6.1%}")
    print(f"N = {args.n} against {args.n} runs of N = 1: {many['cpu'] / (args.n * one['cpu']):.2f}x")


if __name__ == "__main__":
    main()

"""Wall time of the bundled P/D programs (programs/pd/, docs/pd.md).

    python benchmarks/bench_pd.py [--horizon 2000] [--repeat 3]

For each program at seed 1, horizon H, warm-up a tenth of it: ``process``, the
whole ``serq run`` as a subprocess (start-up included), wall seconds, best of
``--repeat``; ``in-proc``, ``serq.run`` of the loaded program in this process,
wall seconds, best of ``--repeat``; the report's ``events`` and the simulated
seconds per wall second.  Issue 23's target: every bundled P/D program under
3 s at horizon 2000.  Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import serq

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ["programs/pd/llmd.sq", "programs/pd/llmd_flat.sq", "programs/pd/colocated.sq"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=float, default=2000.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    h = args.horizon
    w = h / 10
    print(f"{'program':28} {'process':>8} {'in-proc':>8} {'events':>9} {'sim s / s':>10}")
    for rel in PROGRAMS:
        path = ROOT / rel
        proc = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "serq", "run", str(path), "--horizon", str(h),
                            "--warmup", str(w), "--seed", "1"], check=True, capture_output=True)
            proc.append(time.perf_counter() - t)
        program = serq.load(path)
        inproc = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            report = serq.run(program, seed=1, horizon=h, warmup=w)
            inproc.append(time.perf_counter() - t)
        best = min(inproc)
        print(f"{rel:28} {min(proc):8.2f} {best:8.2f} {report.events:9d} {h / best:10.0f}")


if __name__ == "__main__":
    main()

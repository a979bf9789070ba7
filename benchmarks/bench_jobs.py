"""The default worker count of `serq sweep` against --jobs 1 and --jobs N (issue 25).

    python benchmarks/bench_jobs.py [--repeat 2]

Three sweeps from the command line, whole process (start-up included), best of
``--repeat``: a sweep of short runs (the M/G/1 program, 20 runs of a few
milliseconds each), the guide's paired comparison (the vLLM agent, 20 runs of
about 0.4 s) and a longer one (40 runs of about 0.8 s).  Each runs with the
default, ``--jobs 1`` and ``--jobs N`` (N the cores).  The default starts in
this process and starts N workers only once the runs left are expected to
take over a second (``serq.experiments.backends.PARALLEL_AFTER``): it should
be within noise of the faster of the other two on every row.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serq.experiments.backends import default_jobs  # noqa: E402

SWEEPS = [
    ("M/G/1, 20 short runs",
     ["programs/single-turn/mg1.sq", "--set", "lam=0.5,0.7", "--seeds", "1-10", "--horizon", "200", "--warmup", "10"]),
    ("vLLM paired, 20 runs",
     ["programs/multi-turn/vllm.sq", "--set", "Lambda=0.55", "--policy", "engine=fcfs,sjf", "--seeds", "1-10",
      "--horizon", "300", "--warmup", "30"]),
    ("vLLM load x seeds, 40 runs",
     ["programs/multi-turn/vllm.sq", "--set", "Lambda=0.3,0.4,0.5,0.6", "--seeds", "1-10", "--horizon", "600",
      "--warmup", "60"]),
]


def wall(args: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "serq", "sweep", *args, "--quiet"], check=True, capture_output=True,
                       cwd=ROOT)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    n = default_jobs()
    print(f"{'sweep':28} {'default':>8} {'--jobs 1':>9} {f'--jobs {n}':>9}")
    for label, sweep in SWEEPS:
        times = [wall(sweep, args.repeat), wall([*sweep, "--jobs", "1"], args.repeat),
                 wall([*sweep, "--jobs", str(n)], args.repeat)]
        print(f"{label:28} {times[0]:8.2f} {times[1]:9.2f} {times[2]:9.2f}")


if __name__ == "__main__":
    main()

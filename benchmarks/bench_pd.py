"""Wall time of the bundled P/D programs (programs/pd/, docs/pd.md).

    python benchmarks/bench_pd.py [--horizon 2000] [--repeat 3]

For each program at seed 1, horizon H, warm-up a tenth of it: ``process``, the
whole ``serq run`` as a subprocess (start-up included), wall seconds, best of
``--repeat``, and ``cpu``, that process's CPU seconds (user + system), best of
``--repeat``; ``in-proc``, ``serq.run`` of the loaded program in this process,
wall seconds, best of ``--repeat``; the report's ``events`` and the simulated
seconds per wall second.  Issue 23's target: every bundled P/D program under
3 s at horizon 2000.  Timings on a shared machine are noisy: the CPU seconds
move less than the wall seconds when other work shares the machine, but its
clock speed moves them too.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import _interpreter  # (benchmarks/_interpreter.py: the script's folder is on the path)

import serq

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ["programs/pd/llmd.sq", "programs/pd/llmd_flat.sq", "programs/pd/colocated.sq"]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def time_program(rel: str, h: float, repeat: int,
                 sets: tuple[str, ...] = ()) -> tuple[float, float, float, int]:
    """``(process, cpu, in-proc, events)`` of one program at seed 1, horizon ``h``, warm-up
    ``h / 10``, best of ``repeat``; ``sets`` are ``NAME=VALUE`` overrides."""
    path = ROOT / rel
    w = h / 10
    flags = [x for kv in sets for x in ("--set", kv)]
    proc = []
    cpu = []
    for _ in range(repeat):
        t = time.perf_counter()
        c = _children_cpu()
        subprocess.run([sys.executable, "-m", "serq", "run", str(path), "--horizon", str(h),
                        "--warmup", str(w), "--seed", "1", *flags], check=True, capture_output=True)
        proc.append(time.perf_counter() - t)
        cpu.append(_children_cpu() - c)
    program = serq.load(path, sets=[tuple(kv.split("=", 1)) for kv in sets])  # type: ignore[misc]
    inproc = []
    for _ in range(repeat):
        t = time.perf_counter()
        report = serq.run(program, seed=1, horizon=h, warmup=w)
        inproc.append(time.perf_counter() - t)
    return min(proc), min(cpu), min(inproc), report.events


def table(rows: list[tuple[str, tuple[str, ...]]], h: float, repeat: int) -> None:
    """Print the timing table of ``rows`` (a program and its overrides each)."""
    print(_interpreter.describe())
    print(f"{'program':44} {'process':>8} {'cpu':>6} {'in-proc':>8} {'events':>9} {'sim s / s':>10}")
    for rel, sets in rows:
        proc, cpu, best, events = time_program(rel, h, repeat, sets)
        label = rel + "".join(f" {kv}" for kv in sets)
        print(f"{label:44} {proc:8.2f} {cpu:6.2f} {best:8.2f} {events:9d} {h / best:10.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=float, default=2000.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    table([(rel, ()) for rel in PROGRAMS], args.horizon, args.repeat)


if __name__ == "__main__":
    main()

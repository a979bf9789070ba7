"""Python calls per turn of a run, counted by cProfile (deterministic).

    python benchmarks/bench_turn_calls.py [--horizon 2000] [--top 0] PROGRAM[:NAME=VALUE,...]...

For each program (seed 1, warm-up a tenth of the horizon, the constants after a colon set as
``--set`` would): a short run first
(imports and the first compiles drop out), then ``serq.run`` under cProfile,
and prints the calls it made (Python functions and built-ins alike), the
turns it started (calls of ``Session.do_turn``, warm-up included) and the
calls per turn.  ``--top N`` also lists the N functions called most often,
per turn.  Run it under two checkouts (``PYTHONPATH=CHECKOUT python -P …``)
to compare them (docs/speed.md, "Per turn").
"""

from __future__ import annotations

import argparse
import cProfile
import pstats

import serq


def count(case: str, horizon: float, top: int) -> None:
    path, _, sets = case.partition(":")
    program = serq.load(path, sets=[tuple(x.split("=", 1)) for x in sets.split(",") if x])  # type: ignore[misc]
    serq.run(program, seed=1, horizon=5.0, warmup=0.0)
    prof = cProfile.Profile()
    prof.enable()
    serq.run(program, seed=1, horizon=horizon, warmup=horizon / 10)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    calls = sum(v[1] for v in stats.values())
    turns = sum(v[1] for k, v in stats.items() if k[2] == "do_turn")
    print(f"{case:45s} calls {calls:>10,}  turns {turns:>7,}  calls/turn {calls / max(turns, 1):7.1f}")
    rows = sorted(((v[1], f"{k[0].rsplit('/', 1)[-1]}:{k[2]}") for k, v in stats.items()), reverse=True)
    for n, name in rows[:top]:
        print(f"    {n / max(turns, 1):8.2f}  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("programs", nargs="+")
    ap.add_argument("--horizon", type=float, default=2000.0)
    ap.add_argument("--top", type=int, default=0)
    args = ap.parse_args()
    for path in args.programs:
        count(path, args.horizon, args.top)


if __name__ == "__main__":
    main()

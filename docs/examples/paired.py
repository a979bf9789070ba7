"""docs/guide.md: paired differences between two designs of a sweep, against
the interval the same runs would give if they were unpaired.

    python docs/examples/paired.py RESULTS.csv --axis policy --a fcfs --b sjf \
        --figure client.ttft.mean --figure client.ttft.p99

RESULTS is what `serq sweep --out` wrote: rows with the axes, `seed` and the
figures.  The paired differences are `serq sweep --baseline`'s own
(serq.experiments.summary.paired: b_s - a_s at the same seed and the same
point of every other axis, ± t(0.975, n-1) · sd(d) / √n); this script adds,
for each point of the other axes, the interval two independent samples would
give, mean(b) - mean(a) ± t(0.975, 2n-2) · √(var(a)/n + var(b)/n), which
ignores that seed s gave both designs the same sessions.
"""

import argparse
import csv
import math
from pathlib import Path

from serq.experiments.stats import t_quantile
from serq.experiments.summary import paired

ap = argparse.ArgumentParser()
ap.add_argument("results", type=Path)
ap.add_argument("--axis", default="policy")
ap.add_argument("--a", required=True)
ap.add_argument("--b", required=True)
ap.add_argument("--figure", action="append", required=True)
args = ap.parse_args()

rows = [r for r in csv.DictReader(args.results.open(newline="")) if r[args.axis] in (args.a, args.b)]
columns = list(rows[0])
others = [c for c in columns[:columns.index("seed")] if c != args.axis]  # the sweep's other axes
diffs = paired(rows, [*others, args.axis], args.figure, args.axis, args.a)


def var(xs):
    m = math.fsum(xs) / len(xs)
    return math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)


for values, stats in diffs.points:
    point = {c: values[c] for c in others}
    mine = [r for r in rows if all(r[c] == v for c, v in point.items())]
    by = {(r[args.axis], int(r["seed"])): r for r in mine}
    seeds = sorted(s for (v, s) in by if v == args.a and (args.b, s) in by)
    n = len(seeds)
    where = "".join(f"{c}={v}, " for c, v in point.items())
    print(f"{where}{args.b} - {args.a}, {n} seeds ({seeds[0]}-{seeds[-1]}), 95 % intervals")
    print(f"{'figure':<20} {'difference':>11} {'paired ±':>10} {'unpaired ±':>11} {'ratio':>6} {'corr':>6}")
    for fig in args.figure:
        a = [float(by[args.a, s][fig]) for s in seeds]
        b = [float(by[args.b, s][fig]) for s in seeds]
        iv = stats[fig]
        unpaired = t_quantile(0.975, 2 * n - 2) * math.sqrt(var(a) / n + var(b) / n)
        ma, mb = math.fsum(a) / n, math.fsum(b) / n
        spread = (n - 1) * math.sqrt(var(a) * var(b))
        corr = math.fsum((x - ma) * (y - mb) for x, y in zip(a, b)) / spread if spread > 0 else math.nan
        ratio = unpaired / iv.half if iv.half > 0 else math.inf  # the designs ran alike on every seed
        print(f"{fig:<20} {iv.mean:>+11.4f} {iv.half:>10.4f} {unpaired:>11.4f} "
              f"{ratio:>5.1f}x {corr:>6.3f}")

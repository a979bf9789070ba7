"""docs/guide.md: paired differences between two designs of a sweep, against
the interval the same runs would give if they were unpaired.

    python docs/examples/paired.py RESULTS.csv --axis policy --a fcfs --b sjf \
        --figure client.ttft.mean --figure client.ttft.p99

RESULTS is what `serq sweep --out` wrote: rows with the axis, `seed` and the
figures.  For each figure, with n seeds run under both designs:

* paired:   the mean of d_s = b_s - a_s over the seeds s, ± t(0.975, n-1) · sd(d) / √n
* unpaired: mean(b) - mean(a), ± t(0.975, 2n-2) · √(var(a)/n + var(b)/n),
            the interval of two independent samples (which ignores that seed s
            gave both designs the same sessions)
"""

import argparse
import csv
import math
from pathlib import Path

from serq.experiments.stats import across, t_quantile

ap = argparse.ArgumentParser()
ap.add_argument("results", type=Path)
ap.add_argument("--axis", default="policy")
ap.add_argument("--a", required=True)
ap.add_argument("--b", required=True)
ap.add_argument("--figure", action="append", required=True)
args = ap.parse_args()

rows = list(csv.DictReader(args.results.open(newline="")))
by = {(r[args.axis], int(r["seed"])): r for r in rows}
seeds = sorted(s for (v, s) in by if v == args.a and (args.b, s) in by)
n = len(seeds)


def var(xs):
    m = math.fsum(xs) / len(xs)
    return math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)


print(f"{args.b} - {args.a}, {n} seeds ({seeds[0]}-{seeds[-1]}), 95 % intervals")
print(f"{'figure':<20} {'difference':>11} {'paired ±':>10} {'unpaired ±':>11} {'ratio':>6} {'corr':>6}")
for fig in args.figure:
    a = [float(by[args.a, s][fig]) for s in seeds]
    b = [float(by[args.b, s][fig]) for s in seeds]
    paired = across(y - x for x, y in zip(a, b))
    unpaired = t_quantile(0.975, 2 * n - 2) * math.sqrt(var(a) / n + var(b) / n)
    ma, mb = math.fsum(a) / n, math.fsum(b) / n
    corr = math.fsum((x - ma) * (y - mb) for x, y in zip(a, b)) / ((n - 1) * math.sqrt(var(a) * var(b)))
    print(f"{fig:<20} {paired.mean:>+11.4f} {paired.half:>10.4f} {unpaired:>11.4f} "
          f"{unpaired / paired.half:>5.1f}x {corr:>6.3f}")

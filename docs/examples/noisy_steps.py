"""docs/guide.md: make a step log look measured.

Multiplies every iteration's `duration` by lognormal noise of the given
coefficient of variation (seeded, so the file is the same every time) and
writes the log again: a stand-in for the step times of a real engine, which
are never exactly the model's.

    python docs/examples/noisy_steps.py measured/engine.steps.csv --cv 0.05 -o noisy.csv
"""

import argparse
import csv
import math
import random

ap = argparse.ArgumentParser()
ap.add_argument("steps")
ap.add_argument("--cv", type=float, default=0.05, help="coefficient of variation of the noise")
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("-o", "--out", required=True)
args = ap.parse_args()

sigma = math.sqrt(math.log1p(args.cv ** 2))
rng = random.Random(args.seed)
with open(args.steps, newline="") as src, open(args.out, "w", newline="") as dst:
    reader = csv.DictReader(src)
    writer = csv.DictWriter(dst, fieldnames=reader.fieldnames, lineterminator="\n")
    writer.writeheader()
    for n, row in enumerate(reader, 1):
        row["duration"] = repr(float(row["duration"]) * rng.lognormvariate(-sigma * sigma / 2, sigma))
        writer.writerow(row)
print(f"wrote {n} iterations to {args.out}, durations times lognormal noise of cv {args.cv}")

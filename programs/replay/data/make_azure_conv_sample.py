"""Make `azure_conv_sample.csv`, the bundled stand-in for the Azure LLM inference
conversation trace (2023) that `programs/replay/azure_conv.sq` replays until the
user supplies the real one with ``--trace`` (docs/replay.md says how to get and convert it).

It is SYNTHETIC: no row of the real trace is in it. 300 single-turn requests whose
shapes follow the published summary of the conversation trace (Azure/AzurePublicDataset,
"Azure LLM inference trace 2023"; Patel et al., Splitwise, ISCA 2024):

* arrivals: a Poisson process of 5.53 requests/s (the trace's mean rate), starting at 0;
* prompt tokens: lognormal, median 1 020, sigma 0.55, clipped to 2 … 14 050
  (the trace: mean 1 155, p50 1 020, p99 4 142);
* output tokens: lognormal, median 129, sigma 0.8, clipped to 7 … 1 000
  (the trace: mean 211, p50 129, p99 601).

The columns are serQ's named trace columns, one session per request, as
``serq trace import splitwise`` writes them: ``session,turn,new,out,think,arrival``.

Run from anywhere: ``python programs/replay/data/make_azure_conv_sample.py`` (seed 2023, deterministic).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

REQUESTS = 300
RATE = 5.53
SEED = 2023


def main() -> None:
    rnd = random.Random(SEED)
    lines = ["# SYNTHETIC sample shaped like the Azure LLM conversation trace 2023, made by "
             "make_azure_conv_sample.py (seed 2023); no row of the real trace",
             "session,turn,new,out,think,arrival"]
    t = 0.0
    for i in range(REQUESTS):
        prompt = int(round(min(max(rnd.lognormvariate(math.log(1020), 0.55), 2), 14050)))
        out = int(round(min(max(rnd.lognormvariate(math.log(129), 0.8), 7), 1000)))
        lines.append(f"{i},1,{prompt},{out},0,{t:.6f}")
        t += rnd.expovariate(RATE)
    Path(__file__).with_name("azure_conv_sample.csv").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""Wall time of the bundled offload program (programs/offload/, docs/offload.md).

    python benchmarks/bench_offload.py [--horizon 2000] [--repeat 3]

The columns of benchmarks/bench_pd.py: the program with its host tier, the same
program without it (``offload=0``), and the chat on the full-size GPU cache it
comes from, at seed 1.  A pool that spills evicts piece by piece and ends a
coalesced run before a growth that evicts, so most decode iterations of a full
GPU cache run one at a time; the spills' link jobs are events of their own.
"""

from __future__ import annotations

import argparse

from bench_pd import table

ROWS = [
    ("programs/offload/vllm_offload.sq", ()),
    ("programs/offload/vllm_offload.sq", ("offload=0",)),
    ("programs/multi-turn/vllm_chat.sq", ()),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=float, default=2000.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    table(ROWS, args.horizon, args.repeat)


if __name__ == "__main__":
    main()

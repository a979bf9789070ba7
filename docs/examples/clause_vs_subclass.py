"""docs/guide.md: `queue by (prompt)` and the ShortestPromptFirst subclass give
the same report; time both (in process, best of --repeat, CPU seconds).

    python docs/examples/clause_vs_subclass.py --set Lambda=0.9 --horizon 600
"""

import argparse
import sys
import time
from pathlib import Path

import serq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from shortest_prompt import ShortestPromptFirst

ap = argparse.ArgumentParser()
ap.add_argument("--set", action="append", default=[], metavar="NAME=EXPR")
ap.add_argument("--horizon", type=float, default=600)
ap.add_argument("--warmup", type=float, default=60)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--repeat", type=int, default=3)
args = ap.parse_args()
sets = dict(s.split("=", 1) for s in args.set)

clause = serq.load(HERE / "vllm_sjf.sq", sets=sets)
plain = serq.load(HERE.parent.parent / "programs/multi-turn/vllm.sq", sets=sets)
run = {"seed": args.seed, "horizon": args.horizon, "warmup": args.warmup}


def best(program, **kw):
    times, text = [], None
    for _ in range(args.repeat):
        t0 = time.process_time()
        text = serq.run(program, **run, **kw).text()
        times.append(time.process_time() - t0)
    return min(times), text


t_clause, a = best(clause)
t_hook, b = best(plain, engines={"engine": ShortestPromptFirst})
print("reports identical:", a == b)
print(a.splitlines()[0])
print(f"time: queue by (prompt) {t_clause:.2f} s, subclass {t_hook:.2f} s, "
      f"subclass/clause {t_hook / t_clause:.2f}x (CPU s, best of {args.repeat})")

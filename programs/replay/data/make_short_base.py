"""Make `short_base.csv`, the small synthetic trace of `programs/replay/vllm_replay.sq`.

The trace the A100 replay model was fitted against (language spec §10.3, 333
short-context multi-turn sessions) is not public, so this is a stand-in made
by the project from the distributions below, not a recording:

* 333 sessions; a session has 1 + Geometric turns (another turn with probability 0.7, at most 8);
* the first prompt is lognormal (median 600 tokens, sigma 0.6, 50 to 3 000);
* each follow-up's prompt is the whole conversation so far: the previous prompt, its output and a
  new message (lognormal, median 60, sigma 0.8, 1 to 600) — `new` is the whole prompt, as the
  program reads it (`set prompt = new`);
* outputs are lognormal (median 150 tokens, sigma 0.7, 1 to 1 024);
* the user thinks ~exp(15 s) between turns (0 after the last);
* 5 % of follow-ups are `forced` (a nonce at the head of the prompt: nothing is reused);
* a session stops early once its prompt would pass 12 000 tokens.

Run from anywhere: ``python programs/replay/data/make_short_base.py`` (seed 12, deterministic).
"""

from __future__ import annotations

import random
from pathlib import Path

SESSIONS = 333
SEED = 12


def clip(x: float, lo: float, hi: float) -> int:
    return int(round(min(max(x, lo), hi)))


def main() -> None:
    rnd = random.Random(SEED)
    lines = ["# synthetic short-context multi-turn trace made by make_short_base.py (seed 12); not a recording",
             "session,turn,new,out,think,forced"]
    for s in range(SESSIONS):
        turns = 1
        while turns < 8 and rnd.random() < 0.7:
            turns += 1
        prompt = clip(rnd.lognormvariate(6.3969, 0.6), 50, 3000)  # ln 600
        rows = []
        for k in range(1, turns + 1):
            out = clip(rnd.lognormvariate(5.0106, 0.7), 1, 1024)  # ln 150
            forced = 1 if k > 1 and rnd.random() < 0.05 else 0
            rows.append([s, k, prompt, out, 0.0, forced])
            msg = clip(rnd.lognormvariate(4.0943, 0.8), 1, 600)  # ln 60
            nxt = prompt + out + msg
            if k == turns or nxt > 12000:
                break
            rows[-1][4] = round(rnd.expovariate(1 / 15), 2)
            prompt = nxt
        lines += [f"{s},{k},{p},{o},{t:g},{f}" for s, k, p, o, t, f in rows]
    Path(__file__).with_name("short_base.csv").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

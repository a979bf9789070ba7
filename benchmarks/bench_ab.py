"""CPU seconds of the same runs under two checkouts of serQ, alternated.

    python benchmarks/bench_ab.py OLD NEW ROUNDS CASE...

``OLD`` and ``NEW`` are folders holding a checkout each (``git worktree add
/tmp/old COMMIT``); a ``CASE`` is ``PROGRAM[:NAME=VALUE,...][@HORIZON]``
(horizon 2000 by default, warm-up a tenth of it), the program's path relative
to the checkouts.  Each case runs ``serq.run`` in a fresh process per
checkout, the two alternated ``ROUNDS`` times; each side keeps its best CPU
time (the process's, which other work on a shared machine disturbs less
than wall time).  Prints both and their ratio (docs/speed.md quotes it).
"""

from __future__ import annotations

import subprocess
import sys

CODE = r'''
import sys, time, serq
prog, sets, horizon = sys.argv[1], sys.argv[2], float(sys.argv[3])
pairs = [tuple(x.split("=")) for x in sets.split(",") if x]
loaded = serq.load(prog, sets=pairs)
t = time.process_time()
serq.run(loaded, seed=1, horizon=horizon, warmup=horizon / 10)
print(time.process_time() - t)
'''


def main(argv: list[str]) -> None:
    if len(argv) < 4:
        sys.exit(__doc__)
    old, new, rounds = argv[0], argv[1], int(argv[2])
    for case in argv[3:]:
        prog, _, horizon = case.partition("@")
        prog, _, sets = prog.partition(":")
        best: dict[str, float] = {}
        for _ in range(rounds):
            for side, where in (("old", old), ("new", new)):
                out = subprocess.run([sys.executable, "-c", CODE, prog, sets, horizon or "2000"], cwd=where,
                                     env={"PYTHONPATH": where, "PATH": "/usr/bin:/bin"}, capture_output=True,
                                     text=True)
                if out.returncode:
                    sys.exit(out.stderr)
                best[side] = min(best.get(side, float("inf")), float(out.stdout))
        print(f"{case:50s} old {best['old']:.3f}  new {best['new']:.3f}  new/old {best['new'] / best['old']:.3f}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

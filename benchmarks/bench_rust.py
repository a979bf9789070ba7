"""serQ beside the Rust serQ, program by program.

    python benchmarks/bench_rust.py [--rounds 2] [--horizon 2000] [--only NAME ...]

For each bundled vLLM program (and the loads the speed issues quote, and the single-turn
client with long outputs: ``--only "long outputs" "very long outputs"``), runs

* ours: the whole ``serq run PROGRAM --horizon H --warmup H/10 --seed 1
  [--set ...]`` process, start-up included (wall time);
* theirs: the same model written in the later syntax of ``pyserq`` 0.1.6,
  the Rust serQ's Python binding (``benchmarks/rust/``: one deployment, one
  workload per program), compiled and run in a fresh process; only the
  compile and the run are timed, not the interpreter's start.

The two alternate ``--rounds`` times and each keeps its best.  Prints both
times, how far each side's slowest round was from its best (``spread``: on a
shared machine the same run moves by a quarter or more, and a ratio is no
better known than that), their ratio and the geometric mean of the ratios, and the turns each
served as a check that the two simulate the same traffic (they draw from
different streams, and pyserq takes whole token counts where ours floors
nothing, so the counts agree only to their noise), and the ratio per turn
served, the two times each divided by its own count of turns: where the
streams give one side a heavier run (``subagents q=0``: a few hundred
sessions of ten turns on average, whose count of turns moves by about
10 %), this is the ratio of the simulators' speeds, which the issues'
targets, on the whole run, are not.  Skips with a message
where pyserq 0.1.6 is not installed (``pip install pyserq==0.1.6``: Linux
x86_64 and macOS arm64 wheels).  docs/speed.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import _interpreter  # (benchmarks/_interpreter.py: the script's folder is on the path)

ROOT = Path(__file__).resolve().parent.parent
RUST = ROOT / "benchmarks" / "rust"

# name: (our program, pyserq workload, sets)
CASES: dict[str, tuple[str, str, dict[str, float]]] = {
    "vllm": ("programs/multi-turn/vllm.sq", "agent.sq", {}),
    "vllm Lambda=0.6": ("programs/multi-turn/vllm.sq", "agent.sq", {"Lambda": 0.6}),
    "vllm Lambda=0.9": ("programs/multi-turn/vllm.sq", "agent.sq", {"Lambda": 0.9}),
    "chat": ("programs/multi-turn/vllm_chat.sq", "chat.sq", {}),
    "single turn": ("programs/single-turn/vllm_single_turn.sq", "single_turn.sq", {}),
    "subagents": ("programs/subagent/vllm_subagents.sq", "subagents.sq", {}),
    "subagents q=0": ("programs/subagent/vllm_subagents.sq", "subagents.sq", {"q": 0}),
}

#: Cases that change the programs' text (both sides alike): a reasoning model's long answers
#: (issue 42: outputs ~exp(4000) at Lambda 1 and ~exp(20000) at Lambda 0.2, the single-turn client)
EDITS: dict[str, list[tuple[str, str]]] = {
    "long outputs": [("~exp(200)", "~exp(4000)"), ("let Lambda = 3.0;", "let Lambda = 1.0;")],
    "very long outputs": [("~exp(200)", "~exp(20000)"), ("let Lambda = 3.0;", "let Lambda = 0.2;")],
}
for _name in EDITS:
    CASES[_name] = ("programs/single-turn/vllm_single_turn.sq", "single_turn.sq", {})

THEIRS = r"""
import json, sys, time
import pyserq
deployment, workload, horizon = sys.argv[1], sys.argv[2], float(sys.argv[3])
t = time.perf_counter()
program = pyserq.compile(deployment, workload_source=workload, horizon=horizon, warmup=horizon / 10, seed=1)
report = pyserq.run(program)
print(json.dumps({"seconds": time.perf_counter() - t, "turns": report.turns}))
"""


def serq_command() -> list[str]:
    script = Path(sys.executable).parent / "serq"
    return [str(script)] if script.exists() else [sys.executable, "-m", "serq"]


def edited(text: str, edits: list[tuple[str, str]]) -> str:
    """``text`` with each ``(old, new)`` of ``edits`` replaced, each found once."""
    for old, new in edits:
        if text.count(old) != 1:
            sys.exit(f"bench_rust: {old!r} is not in the program once")
        text = text.replace(old, new)
    return text


def run_ours(program: str, sets: dict[str, float], horizon: float,
             edits: list[tuple[str, str]] | None = None) -> tuple[float, int]:
    if edits:  # the edited program beside the others (its `use "std/…"` reads the library)
        tmp = ROOT / "benchmarks" / f".edited_{os.getpid()}.sq"
        tmp.write_text(edited((ROOT / program).read_text(), edits))
        try:
            return run_ours(str(tmp), sets, horizon)
        finally:
            tmp.unlink()
    cmd = [*serq_command(), "run", program, "--horizon", f"{horizon:g}", "--warmup", f"{horizon / 10:g}",
           "--seed", "1", "--json"]
    for name, value in sets.items():
        cmd += ["--set", f"{name}={value:g}"]
    t = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if out.returncode:
        sys.exit(f"{' '.join(cmd)}:\n{out.stderr}")
    return seconds, int(json.loads(out.stdout)["turns"])


def workload_text(workload: str, sets: dict[str, float], edits: list[tuple[str, str]] | None = None) -> str:
    """The workload file with each set constant's `let` rewritten (a pyserq
    workload file takes no program arguments) and ``edits`` made."""
    text = edited((RUST / workload).read_text(), edits or [])
    for name, value in sets.items():
        text, n = re.subn(rf"^let {name} = [^;]*;", f"let {name} = {value!r};", text, flags=re.M)
        if n != 1:
            sys.exit(f"{workload}: no `let {name}` to set")
    return text


def run_theirs(workload: str, sets: dict[str, float], horizon: float,
               edits: list[tuple[str, str]] | None = None) -> tuple[float, int]:
    args = [sys.executable, "-c", THEIRS, str(RUST / "deployment.sq"), workload_text(workload, sets, edits),
            f"{horizon:g}"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"pyserq on {workload}:\n{out.stderr}")
    got = json.loads(out.stdout)
    return float(got["seconds"]), int(got["turns"])


def spread(times: list[float]) -> str:
    """The slowest of ``times`` over the fastest, less one, as a percentage
    ("+12%"); "-" for a single round."""
    if len(times) < 2:
        return "-"
    return f"+{100.0 * (max(times) / min(times) - 1.0):.0f}%"


def have_pyserq() -> bool:
    probe = "import pyserq, sys; sys.exit(pyserq.__version__ != '0.1.6')"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="alternations; each side keeps its best")
    parser.add_argument("--horizon", type=float, default=2000.0)
    parser.add_argument("--only", nargs="*", default=None, help="case names (default: all)")
    opts = parser.parse_args()
    if not have_pyserq():
        print("skipped: pyserq 0.1.6 is not installed (pip install pyserq==0.1.6)")
        return
    names = opts.only or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit(f"unknown case {unknown[0]!r}; the cases: {', '.join(CASES)}")
    print(f"horizon {opts.horizon:g} s, warm-up {opts.horizon / 10:g} s, seed 1, best of {opts.rounds}, "
          f"{os.cpu_count()} cores")
    print(_interpreter.describe())
    print(f"{'program':18s} {'serQ (s)':>9s} {'spread':>6s} {'Rust (s)':>9s} {'spread':>6s} {'ratio':>6s} "
          f"{'turns':>7s} {'turns (Rust)':>12s} {'per turn':>8s}")
    ratios = []
    per_turn = []
    for name in names:
        program, workload, sets = CASES[name]
        ours_all, theirs_all = [], []
        for _ in range(opts.rounds):
            ours_s, ours_turns = run_ours(program, sets, opts.horizon, EDITS.get(name))
            theirs_s, theirs_turns = run_theirs(workload, sets, opts.horizon, EDITS.get(name))
            ours_all.append(ours_s)
            theirs_all.append(theirs_s)
        ours, theirs = min(ours_all), min(theirs_all)
        # the ratio of the times a turn served: the two draw from different streams, so one side may
        # serve more turns in the same simulated time (a heavier run, not a slower simulator)
        turn = (ours / ours_turns) / (theirs / theirs_turns) if ours_turns and theirs_turns else math.nan
        if name not in EDITS:  # (the geometric mean is of the seed's programs)
            ratios.append(ours / theirs)
            per_turn.append(turn)
        print(f"{name:18s} {ours:9.3f} {spread(ours_all):>6s} {theirs:9.3f} {spread(theirs_all):>6s} "
              f"{ours / theirs:6.2f} {ours_turns:7d} {theirs_turns:12d} {turn:8.2f}", flush=True)
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        geo_turn = math.exp(sum(math.log(r) for r in per_turn) / len(per_turn))
        print(f"{'geometric mean':18s} {'':9s} {'':6s} {'':9s} {'':6s} {geo:6.2f} {'':7s} {'':12s} {geo_turn:8.2f}"
              "  (the seed's programs)")


if __name__ == "__main__":
    main()

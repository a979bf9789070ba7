"""Wall time of the step engine on the bundled vLLM programs.

    python benchmarks/bench_engine.py [--horizon 2000] [--repeat 3] [--plain] [--only LABEL…]

For each case (the four vLLM programs, subagents with ``q=0``, ``vllm.sq`` at
Lambda 0.6 and 0.9; seed 1, horizon 2000, warm-up a tenth of it):

* ``process``: the whole ``serq run … --horizon H --warmup W --seed 1`` as a
  subprocess (start-up included), wall seconds, best of ``--repeat``; ``p-cpu``:
  its CPU seconds (user + system, best of the same runs);
* ``in-proc``: ``serq.run`` of the loaded program in this process, wall seconds,
  best of ``--repeat``; ``i-cpu``: its CPU seconds;
* ``iters``: engine iterations; ``events``: the report's events (arrivals, job
  ends, every iteration); ``simpy``: the events SimPy actually scheduled (a
  coalesced run is one);
* ``coalesced``: the share of iterations that ran inside coalesced decode runs
  (runs of two or more iterations advanced by one event).

The shared prefix cache (issue 14): ``sys prompt`` is
``programs/single-turn/vllm_system_prompt.sq`` (a trie, every request hits its
system prompt); ``sys no prefix`` is the same program text with
``vllm_request_prefix(…, seg1, len1, seg2, len2)`` replaced by
``vllm_request(…)`` (the per-session cache: the issue's "same program without
`prefix`", which prefills whole prompts, so it simulates more prefill work);
``sys 0-chain`` passes the chain ``0, 0, 0, 0`` instead (a trie that shares
nothing: the same report as ``sys no prefix``, so it times the trie's own
cost on the same simulated work).  After the table, the ratios of these
cases' in-process seconds (wall and CPU) (the issue's target: ``sys prompt`` within 1.3× of
``sys no prefix``).

Then the start-up time: ``serq check`` on a small program as a whole process.
``--plain`` also runs each case iteration by iteration (no coalescing), which
must give the same report, and says whether it did.  Timings on a shared
machine are noisy: compare before/after runs made in alternation.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import serq
from serq.sim.stages import StepEngine

ROOT = Path(__file__).resolve().parent.parent

CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("vllm", "programs/multi-turn/vllm.sq", ()),
    ("vllm L=0.6", "programs/multi-turn/vllm.sq", ("Lambda=0.6",)),
    ("vllm L=0.9", "programs/multi-turn/vllm.sq", ("Lambda=0.9",)),
    ("chat", "programs/multi-turn/vllm_chat.sq", ()),
    ("single turn", "programs/single-turn/vllm_single_turn.sq", ()),
    ("subagents", "programs/subagent/vllm_subagents.sq", ()),
    ("subagents q=0", "programs/subagent/vllm_subagents.sq", ("q=0",)),
    ("sys prompt", "programs/single-turn/vllm_system_prompt.sq", ()),
    ("sys no prefix", "programs/single-turn/vllm_system_prompt.sq", ()),
    ("sys 0-chain", "programs/single-turn/vllm_system_prompt.sq", ()),
    ("L=0.6 serve by", "programs/multi-turn/vllm.sq", ("Lambda=0.6",)),
    ("L=0.6 evict by", "programs/multi-turn/vllm.sq", ("Lambda=0.6",)),
]

_CHAIN = "vllm_request_prefix(reqs, kv, engine, prompt, o, seg1, len1, seg2, len2);"
#: Cases that run an edited copy of their program: (old, new) in its text.
EDITS: dict[str, tuple[str, str]] = {
    "sys no prefix": (_CHAIN, "vllm_request(reqs, kv, engine, prompt, o);"),
    "sys 0-chain": (_CHAIN, "vllm_request_prefix(reqs, kv, engine, prompt, o, 0, 0, 0, 0);"),
    # the clauses a scheduler comparison writes (docs/guide.md): shortest remaining first, and
    # eviction of the largest prefixes of sessions not waiting first
    "L=0.6 serve by": ("  memory kv;\n}", "  memory kv;\n  serve by (decoding ? 0 : 1, remaining);\n}"),
    "L=0.6 evict by": ("evict lru;", "evict by (waiting, -size);"),
}
#: (case, baseline) pairs whose in-process ratio is printed after the table.
RATIOS = [("sys prompt", "sys no prefix"), ("sys 0-chain", "sys no prefix"),
          ("L=0.6 serve by", "vllm L=0.6"), ("L=0.6 evict by", "vllm L=0.6")]


def program_path(label: str, path: str, tmp: Path) -> str:
    """The program a case runs: ``path``, or an edited copy of it in ``tmp``
    (its ``use`` made absolute) for the cases of :data:`EDITS`."""
    if label not in EDITS:
        return path
    old, new = EDITS[label]
    text = (ROOT / path).read_text()
    assert text.count(old) == 1, f"{path}: the text {old!r} to replace is not there once"
    text = text.replace(old, new)
    out = tmp / (label.replace(" ", "_") + ".sq")
    out.write_text(text)
    return str(out)

STARTUP_PROGRAM = "programs/single-turn/mg1.sq"


class Counting(StepEngine):
    """The default engine (no hook overridden, so it coalesces), counting the
    iterations that ran inside coalesced runs."""

    coalesced_iters = 0
    env: object = None  # the last run's SimPy environment

    def __init__(self, *args, **kw):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kw)
        Counting.env = self.sim.env

    def _iter_end(self, timer):  # type: ignore[no-untyped-def]
        if timer.epoch == self.epoch and self.run_length > 1:
            Counting.coalesced_iters += self.run_length
        super()._iter_end(timer)


class Plain(StepEngine):
    """The default scheduler, one event per iteration."""

    coalesce = False


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def whole_process(args: list[str], repeat: int) -> tuple[float, float]:
    """Best wall and best CPU seconds of ``python -m serq ARGS``."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        c = _children_cpu()
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "serq", *args], check=True, stdout=subprocess.DEVNULL,
                       cwd=ROOT)
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, _children_cpu() - c)
    return best, best_cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=float, default=2000.0)
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs (default 3)")
    ap.add_argument("--plain", action="store_true", help="also run without coalescing and compare")
    ap.add_argument("--only", nargs="+", default=None, help="run only the cases with these labels")
    ap.add_argument("--no-process", action="store_true", help="skip the whole-process timings")
    args = ap.parse_args()
    horizon = args.horizon
    warmup = horizon / 10
    print(f"horizon {horizon:g}, warm-up {warmup:g}, seed 1; best of {args.repeat}; python {sys.version.split()[0]}")
    print(f"{'case':<14} {'process':>8} {'p-cpu':>6} {'in-proc':>8} {'i-cpu':>6} {'iters':>8} {'events':>8} "
          f"{'simpy':>8} {'coalesced':>9}")
    tmp = Path(tempfile.mkdtemp(prefix="bench_engine_"))
    timed: dict[str, tuple[float, float]] = {}  # label → in-process (wall, CPU) seconds
    for label, path, sets in CASES:
        if args.only and label not in args.only:
            continue
        path = program_path(label, path, tmp)
        program = serq.load(ROOT / path, sets=[tuple(s.split("=", 1)) for s in sets])  # type: ignore[misc]
        best = best_cpu = float("inf")
        report = None
        for _ in range(args.repeat):
            Counting.coalesced_iters = 0
            t, c = time.perf_counter(), time.process_time()
            report = serq.run(program, seed=1, horizon=horizon, warmup=warmup, engines={"engine": Counting})
            best = min(best, time.perf_counter() - t)
            best_cpu = min(best_cpu, time.process_time() - c)
        assert report is not None
        timed[label] = (best, best_cpu)
        iters = report.stage("engine").iterations
        simpy_events = next(Counting.env._eid)  # type: ignore[attr-defined]  # every event SimPy scheduled
        share = Counting.coalesced_iters / iters if iters else 0.0
        proc = pcpu = "-"
        if not args.no_process:
            cli = ["run", path, "--horizon", f"{horizon:g}", "--warmup", f"{warmup:g}", "--seed", "1"]
            for s in sets:
                cli += ["--set", s]
            w, c = whole_process(cli, args.repeat)
            proc, pcpu = f"{w:.2f}", f"{c:.2f}"
        print(f"{label:<14} {proc:>8} {pcpu:>6} {best:>8.2f} {best_cpu:>6.2f} {iters:>8} {report.events:>8} "
              f"{simpy_events:>8} {share:>9.1%}", flush=True)
        if args.plain:
            t = time.perf_counter()
            plain = serq.run(program, seed=1, horizon=horizon, warmup=warmup, engines={"engine": Plain})
            wall = time.perf_counter() - t
            same = plain.to_json() == report.to_json()
            print(f"  iteration by iteration: {wall:.2f} s; report {'identical' if same else 'DIFFERENT'}",
                  flush=True)
    for case, base in RATIOS:
        if case in timed and base in timed:
            (w, c), (bw, bc) = timed[case], timed[base]
            print(f"{case} / {base}: {w / bw:.2f}x in-process wall, {c / bc:.2f}x its CPU", flush=True)
    if not args.no_process:
        start, cpu = whole_process(["check", STARTUP_PROGRAM], max(args.repeat, 5))
        print(f"start-up: serq check {STARTUP_PROGRAM}: {start:.3f} s wall, {cpu:.3f} s CPU (whole process, "
              f"best of {max(args.repeat, 5)})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

"""The trace-replay study of issue 12 (docs/replay.md, "The Azure traces on the shared engine").

    python benchmarks/study_replay.py                    # conv and code, the doc's rates
    python benchmarks/study_replay.py --traces conv --rates 1,2,4
    python benchmarks/study_replay.py --data DIR         # where conv.csv and code.csv are

It converts the Azure LLM inference traces of 2023 (Vidur's processed copies,
``arrived_at,num_prefill_tokens,num_decode_tokens``; CC BY 4.0, Splitwise, ISCA
2024) with ``serq trace import splitwise`` into a temporary folder, measures each
trace's offered load, then replays it on ``programs/replay/azure_conv.sq`` (the
shared vLLM engine) with ``--set rate=R`` for each rate and prints, as the
Markdown tables of the doc: the offered load against the engine's capacity, the
client rows (TTFT, TPOT, response: mean, p50, p99) at each rate, and the knee.

The runs are in-process (``serq.run``), each exactly the command printed beside
it (``serq run programs/replay/azure_conv.sq --trace OUT --set rate=R --json``);
the data is read from ``--data`` and nothing of it is written outside the
temporary folder. The data are not part of serQ: fetch them as docs/replay.md says.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "programs" / "replay" / "azure_conv.sq"
DATA = ROOT.parent / "shared" / "data" / "azure-llm-2023"
RATES = {"conv": [1, 2, 3, 4, 5, 6, 7, 8, 16], "code": [1, 2, 3, 4, 6, 8, 12, 16]}


def convert(src: Path, out: Path) -> str:
    """``serq trace import splitwise SRC -o OUT``; returns the command as the doc shows it."""
    subprocess.run([sys.executable, "-m", "serq", "trace", "import", "splitwise", str(src), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    try:
        shown = Path(src).resolve().relative_to(ROOT.parent)
        shown_text = f"../{shown}"
    except ValueError:
        shown_text = str(src)
    return f"serq trace import splitwise {shown_text} -o {out.name}"


def offered(trace: Path) -> dict[str, float]:
    """Requests, span and token rates of a converted trace (one session per row)."""
    n = prompt = out = 0
    last = 0.0
    with open(trace, newline="") as fh:
        for row in csv.DictReader(r for r in fh if not r.startswith("#")):
            n += 1
            prompt += float(row["new"])
            out += float(row["out"])
            last = max(last, float(row["arrival"]))
    return {"requests": n, "span": last, "rps": n / last, "prompt_tps": prompt / last, "out_tps": out / last,
            "prompt_mean": prompt / n, "out_mean": out / n, "tokens": prompt + out}


def capacity(program) -> dict[str, float]:  # noqa: ANN001 - a serq.ir.Program
    """The shared engine's roofs, from its constants: cost = c0 + max(omega + beta·kv, a·tokens)."""
    c = program.constants
    return {"a": c["a"], "omega": c["omega"], "beta": c["beta"], "B": c["B"], "max_seqs": c["max_seqs"],
            "tokens_per_s": 1.0 / c["a"], "floor_tokens": c["omega"] / c["a"]}


def run(trace: Path, rate: float):  # noqa: ANN201 - a serq.Report
    import serq

    return serq.run(serq.load(PROGRAM, sets={"rate": repr(rate)}, trace=str(trace)))


def fmt(x: float, digits: int = 3) -> str:
    if x != x:
        return "–"
    return f"{x:,.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="the folder of conv.csv and code.csv")
    parser.add_argument("--traces", default="conv,code")
    parser.add_argument("--rates", default=None, help="comma-separated replay rates (default: the doc's)")
    args = parser.parse_args()
    import serq

    program = serq.load(PROGRAM)
    cap = capacity(program)
    print(f"engine: a = {cap['a']:g} s/token, omega = {cap['omega']:g} s/step, beta = {cap['beta']:g} s per KV token,"
          f" B = {cap['B']:g}, max_seqs = {cap['max_seqs']:g}: at most {cap['tokens_per_s']:,.0f} tokens/s "
          f"(prefill and decode together), and a step of fewer than {cap['floor_tokens']:g} tokens costs omega\n")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.traces.split(","):
            src = args.data / f"{name}.csv"
            if not src.exists():
                print(f"{src}: absent, skipped (docs/replay.md says where to get it)\n")
                continue
            out = Path(tmp) / f"{name}.csv"
            cmd = convert(src, out)
            load = offered(out)
            print(f"## {name}\n\n    {cmd}\n")
            print("| requests | span (s) | requests/s | prompt tokens/s | output tokens/s | tokens/s | "
                  "share of the engine's tokens/s |")
            print("|---|---|---|---|---|---|---|")
            tps = load["prompt_tps"] + load["out_tps"]
            print(f"| {load['requests']:,} | {load['span']:,.1f} | {load['rps']:.2f} | {load['prompt_tps']:,.0f} | "
                  f"{load['out_tps']:,.0f} | {tps:,.0f} | {tps / cap['tokens_per_s']:.3f} |\n")
            rates = [float(r) for r in args.rates.split(",")] if args.rates else RATES[name]
            rows = []
            for rate in rates:
                t0 = time.perf_counter()
                r = run(out, rate)
                wall = time.perf_counter() - t0
                ttft, tpot, resp = (r.client[k] for k in ("ttft", "tpot", "response"))
                served = load["tokens"] / r.end
                rows.append((rate, r, ttft, tpot, resp, served, wall))
                print(f"    serq run programs/replay/azure_conv.sq --trace ./{name}.csv --set rate={rate:g} --json"
                      f"   # {wall:.1f} s", file=sys.stderr)
            print("| rate | offered req/s | offered tokens/s | engine util | served tokens/s | end (s) | mean live | "
                  "TTFT mean | TTFT p50 | TTFT p99 | TPOT mean (ms) | TPOT p50 (ms) | TPOT p99 (ms) | response mean | "
                  "response p50 | response p99 |")
            print("|" + "---|" * 16)
            for rate, r, ttft, tpot, resp, served, _ in rows:
                print(f"| {rate:g} | {load['rps'] * rate:.1f} | {tps * rate:,.0f} | {r.stage('engine').utilization:.3f} | "
                      f"{served:,.0f} | {r.end:,.1f} | {r.mean_live:,.1f} | {fmt(ttft.mean)} | {fmt(ttft.p50)} | "
                      f"{fmt(ttft.p99)} | {fmt(tpot.mean * 1e3)} | {fmt(tpot.p50 * 1e3)} | {fmt(tpot.p99 * 1e3)} | "
                      f"{fmt(resp.mean)} | "
                      f"{fmt(resp.p50)} | {fmt(resp.p99)} |")
            base = rows[0][2].mean
            knee = next((rate for rate, _, ttft, *_ in rows if ttft.mean > 10 * base), None)
            print(f"\nknee: the mean TTFT first passes ten times its rate-{rows[0][0]:g} value ({base:.3f} s) at "
                  f"rate {knee:g}" if knee is not None else "\nno knee among these rates (mean TTFT)")
            full = next((rate for rate, *_, served, _ in rows if served < 0.97 * tps * rate), None)
            print(f"saturation: the engine serves less than 97 % of the offered tokens/s from rate {full:g} "
                  if full is not None else "saturation: not reached among these rates ", end="")
            print(f"(its roof 1/a = {cap['tokens_per_s']:,.0f} tokens/s is rate "
                  f"{cap['tokens_per_s'] / tps:.2f} of this trace)\n")
            for rate, r, *_ in rows:
                if r.replay is not None and not r.replay["exhausted"]:
                    print(f"rate {rate:g}: {r.replay_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Time and memory of `serq trace import` on large synthetic traces (issue 12, item 2).

Writes a synthetic trace of N rows (default 1 000 000) in each of two formats —
the Azure CSV (timestamps as dates, CRLF) and Mooncake JSON lines (with
``hash_ids``) — into a temporary folder, imports each in a child process
(``python -m serq trace import …``) and prints its wall time, its CPU time
(user + system, less sensitive to a busy machine), the rows per CPU second and
its peak resident set (``ru_maxrss`` from ``wait4``).  It
also imports a tenth of each file, and runs a child that only imports the
package, so the table shows that the peak does not grow with the file::

    python benchmarks/bench_trace_import.py            # 1 000 000 rows
    python benchmarks/bench_trace_import.py --rows 200000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from random import Random

ROOT = Path(__file__).resolve().parent.parent


def write_azure(path: Path, rows: int, seed: int = 1) -> None:
    rng = Random(seed)
    t = datetime(2023, 11, 16, 18, 15, 46, 680590)
    with path.open("w", newline="") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens")
        for _ in range(rows):
            t += timedelta(microseconds=int(rng.expovariate(1 / 180_000)))
            f.write(f"\r\n{t:%Y-%m-%d %H:%M:%S.%f}0,{rng.randint(2, 8000)},{rng.randint(1, 1000)}")


def write_mooncake(path: Path, rows: int, seed: int = 1) -> None:
    rng = Random(seed)
    ms = 0
    next_id = 0
    with path.open("w") as f:
        for _ in range(rows):
            ms += int(rng.expovariate(1 / 180))
            new = rng.randint(100, 20_000)
            blocks = (new + 511) // 512
            ids = [0, *range(next_id + 1, next_id + blocks)]
            next_id += blocks
            f.write(f'{{"timestamp": {ms}, "input_length": {new}, "output_length": {rng.randint(1, 1000)}, '
                    f'"hash_ids": {ids}}}\n')


def child(args: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in KiB) of ``python args…``."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss  # ru_maxrss is in KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _, _, base_rss = child(["-c", "import serq.cli, serq.traces.convert"])
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; python {sys.version.split()[0]}; a child that only imports serq.cli and serq.traces: "
              f"peak RSS {base_rss / 1024:.1f} MiB")
        print(f"{'format':<10} {'rows':>9} {'input':>9} {'output':>9} {'wall':>8} {'cpu':>8} {'rows/s':>9} {'peak RSS':>9}")
        for fmt, writer, suffix in (("azure", write_azure, "csv"), ("mooncake", write_mooncake, "jsonl")):
            for rows in (ns.rows // 10, ns.rows):
                src = folder / f"{fmt}_{rows}.{suffix}"
                writer(src, rows)
                dst = folder / f"{fmt}_{rows}.out.csv"
                wall, cpu, rss = child(["-m", "serq", "trace", "import", fmt, str(src), "-o", str(dst)])
                with dst.open() as f:
                    written = sum(1 for _ in f) - 1
                assert written == rows, (written, rows)
                print(f"{fmt:<10} {rows:>9} {src.stat().st_size / 2**20:>7.1f}MB {dst.stat().st_size / 2**20:>7.1f}MB "
                      f"{wall:>7.2f}s {cpu:>7.2f}s {rows / cpu:>9.0f} {rss / 1024:>7.1f}MB")
                src.unlink()
                dst.unlink()


if __name__ == "__main__":
    main()

"""`-` is standard input where a command reads a file and standard output where
it writes one (issue 25), and a reader that goes away is no error: the command
ends quietly, exit 1, as `serq run | head` does.  Where `-` cannot work (a
folder, a file every worker reads, a second stream on standard output) the
command says so before any work, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bounds import HANG, env

ROOT = Path(__file__).resolve().parents[1]
MG1 = ROOT / "programs" / "single-turn" / "mg1.sq"
REPLAY = ROOT / "programs" / "replay" / "vllm_replay.sq"
TRACE = ROOT / "programs" / "replay" / "data" / "short_base.csv"


def serq(*args: str, stdin: bytes | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[bytes]:
    """`serq ARGS` on ``stdin``, its run bounded by events (tests/bounds.py): no timeout."""
    return subprocess.run([sys.executable, "-m", "serq", *args], input=stdin, capture_output=True, cwd=cwd,
                          env=env())


def splitwise(path: Path, n: int) -> Path:
    """A splitwise trace of ``n`` requests, 0.01 s apart."""
    rows = "".join(f"{k / 100:.2f},{100 + k % 7},{10 + k % 5}\n" for k in range(n))
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + rows)
    return path


def test_a_program_on_standard_input_checks_runs_and_sweeps_as_its_file() -> None:
    text = MG1.read_bytes()
    assert serq("check", "-", stdin=text).stdout == serq("check", str(MG1)).stdout
    args = ("--horizon", "300", "--warmup", "10")
    by_file = serq("run", str(MG1), *args)
    by_stdin = serq("run", "-", *args, stdin=text)
    assert by_stdin.returncode == 0 and by_stdin.stdout == by_file.stdout
    sweep = ("--set", "lam=0.5,0.7", "--seeds", "1-2", "--jobs", "1", *args)
    assert serq("sweep", "-", *sweep, stdin=text).stdout == serq("sweep", str(MG1), *sweep).stdout
    drawn = serq("draw", "-", "--format", "svg", stdin=text)
    # (a program without a file is titled "program")
    assert drawn.returncode == 0
    assert drawn.stdout == serq("draw", str(MG1), "--format", "svg").stdout.replace(b"mg1.sq", b"program")


def test_a_mistake_on_standard_input_is_placed_at_stdin() -> None:
    done = serq("check", "-", stdin=b"let x = 1;\nrun { horizon 1; }\nfoo\n")
    assert done.returncode == 1
    assert done.stderr.decode().startswith("<stdin>:3:1: unexpected `foo` at top level")
    done = serq("run", "-", "--horizon", "5", stdin=MG1.read_bytes())  # its warm-up (1000) is past 5
    assert done.returncode == 1 and done.stderr.decode().startswith("<stdin>: warm-up 1000")


def test_a_trace_on_standard_input_replays_as_its_file() -> None:
    args = ("--horizon", "60", "--warmup", "0")
    by_stdin = serq("run", str(REPLAY), "--trace", "-", *args, stdin=TRACE.read_bytes())
    assert by_stdin.returncode == 0
    assert by_stdin.stdout == serq("run", str(REPLAY), "--trace", str(TRACE), *args).stdout


def test_trace_import_writes_standard_output_and_reads_standard_input(tmp_path: Path) -> None:
    src = splitwise(tmp_path / "sw.csv", 50)
    to_file = serq("trace", "import", "splitwise", str(src), "-o", str(tmp_path / "t.csv"))
    assert to_file.returncode == 0
    out = serq("trace", "import", "splitwise", str(src), "-o", "-")
    assert out.returncode == 0 and out.stdout == (tmp_path / "t.csv").read_bytes()
    assert out.stderr.decode().startswith("wrote 50 requests") and "to standard output" in out.stderr.decode()
    assert not (ROOT / "-").exists() and not (tmp_path / "-").exists()
    both = serq("trace", "import", "splitwise", "-", "-o", "-", stdin=src.read_bytes())
    assert both.stdout == out.stdout


def test_a_source_refused_at_its_header_writes_nothing_to_standard_output(tmp_path: Path) -> None:
    src = splitwise(tmp_path / "sw.csv", 5)
    done = serq("trace", "import", "azure", str(src), "-o", "-")
    assert done.returncode == 1 and done.stdout == b""
    assert "the header has no column `TIMESTAMP`" in done.stderr.decode()


@pytest.mark.parametrize("out", ["-", "/dev/stdout"])
def test_a_closed_pipe_ends_trace_import_quietly(tmp_path: Path, out: str) -> None:
    if out == "/dev/stdout" and not Path("/dev/stdout").exists():
        pytest.skip("no /dev/stdout here")
    src = splitwise(tmp_path / "sw.csv", 20000)  # ~0.4 MB: well past a pipe's buffer
    proc = subprocess.Popen([sys.executable, "-m", "serq", "trace", "import", "splitwise", str(src), "-o", out],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read()
    code = proc.wait(timeout=HANG)  # it has closed its standard error: ending (HANG: a true hang only)
    assert first == b"session,turn,new,out,think,arrival\n"
    assert (code, err) == (1, b"")


def test_draw_writes_standard_output_for_out_dash() -> None:
    done = serq("draw", str(MG1), "--format", "svg", "--out", "-")
    assert done.returncode == 0 and done.stdout == serq("draw", str(MG1), "--format", "svg").stdout


def test_fit_reads_standard_input(tmp_path: Path) -> None:
    rows = "".join(f"{0.001 + 2e-5 * t:.8f},{t}\n" for t in range(1, 200, 7))
    steps = tmp_path / "steps.csv"
    steps.write_text("duration,tokens\n" + rows)
    by_file = serq("fit", str(steps), "--json")
    by_stdin = serq("fit", "-", "--json", stdin=steps.read_bytes())
    assert by_stdin.returncode == 0
    assert by_stdin.stdout == by_file.stdout.replace(b'"steps.csv"', b'"<stdin>"')


@pytest.mark.parametrize("args, message", [
    (("run", str(MG1), "--dump", "-"), "error: --dump -: the dump is a folder of CSV files"),
    (("run", "-", "--trace", "-"), "error: the program and --trace both read standard input"),
    (("sweep", str(MG1), "--out", "-"), "error: --out -: a sweep's rows go to a file"),
    (("sweep", str(REPLAY), "--trace", "-"), "error: --trace -: each run of a sweep reads the trace"),
    (("fit", "missing.csv", "--plot", "-"), "error: --plot -: standard output has the fit"),
    (("fit", "missing.csv", "--plot", "fit.txt"), "error: invalid --plot `fit.txt`: the name must end in .svg, "
                                                  ".png or .pdf"),
])
def test_where_dash_cannot_work_it_is_a_usage_error_before_any_work(args: tuple[str, ...], message: str) -> None:
    done = serq(*args, stdin=b"")
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode().startswith(message)
    assert done.stdout == b""

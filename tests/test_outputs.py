"""Where serq's output goes (issue 8, B9, B10, B12): `--out` and `--dump` follow
symbolic links, write through FIFOs and character devices instead of replacing
them, give new files the umask's mode, and stay atomic for regular files; a
standard output that is closed or full is exit 1 with "cannot write the
report", a closed pipe a quiet exit 1; `--trace` on a program without a trace
is an error."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from bounds import HANG, env

from serq.files import write_dir_atomic, write_text_atomic

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
stage s : delay;
workload { arrive poisson(1); init { set t0 = now; } }
session { run s (1); observe response = now - t0; }
run { horizon 30; }
"""

needs_posix = pytest.mark.skipif(os.name != "posix", reason="FIFOs, symbolic links and umasks are POSIX")


def serq(*args: str, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    """`serq ARGS`, its run bounded by events (tests/bounds.py).  It writes through FIFOs,
    closed pipes and devices: HANG guards against a write that never ends, only."""
    kw.setdefault("capture_output", True)
    return subprocess.run([sys.executable, "-m", "serq", *args], text=True, cwd=cwd or ROOT, env=env(),
                          timeout=HANG, **kw)


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "p.sq"
    path.write_text(PROGRAM)
    return path


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- B9: --out and --dump ------------------------------------------------------------------


@needs_posix
def test_out_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path: Path, program: Path) -> None:
    (tmp_path / "real.tikz").write_text("old")
    (tmp_path / "link.tikz").symlink_to("real.tikz")
    out = serq("draw", str(program), "--out", str(tmp_path / "link.tikz"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "link.tikz").is_symlink()
    assert (tmp_path / "real.tikz").read_text() == serq("draw", str(program)).stdout
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@needs_posix
def test_a_dangling_symlink_gets_its_target_created(tmp_path: Path, umask022) -> None:
    (tmp_path / "link").symlink_to("target.txt")
    write_text_atomic(tmp_path / "link", "hello\n")
    assert (tmp_path / "link").is_symlink()
    assert (tmp_path / "target.txt").read_text() == "hello\n"
    assert mode(tmp_path / "target.txt") == 0o644


@needs_posix
def test_out_to_a_fifo_writes_through_it(tmp_path: Path, program: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    out = serq("draw", str(program), "--out", str(fifo))
    if reader.is_alive() and stat.S_ISFIFO(os.lstat(fifo).st_mode):  # a reader still waiting for a writer
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    reader.join(timeout=HANG)  # the writer has ended: the reader has its end of file (HANG: a true hang only)
    assert out.returncode == 0, out.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO, not a plain file
    assert got and got[0] == serq("draw", str(program)).stdout.encode()


@needs_posix
def test_a_symlink_to_the_null_device_is_written_through(tmp_path: Path, program: Path) -> None:
    (tmp_path / "nul").symlink_to(os.devnull)
    out = serq("draw", str(program), "--out", str(tmp_path / "nul"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "nul").is_symlink() and stat.S_ISCHR(os.stat(tmp_path / "nul").st_mode)
    write_text_atomic(tmp_path / "nul", "x")  # the library function too
    assert stat.S_ISCHR(os.stat(tmp_path / "nul").st_mode)


def test_out_to_a_folder_is_refused(tmp_path: Path, program: Path) -> None:
    (tmp_path / "d").mkdir()
    out = serq("draw", str(program), "--out", str(tmp_path / "d"))
    assert out.returncode == 1 and "cannot write" in out.stderr and "folder" in out.stderr
    assert (tmp_path / "d").is_dir() and "Traceback" not in out.stderr


@needs_posix
def test_outputs_get_the_umask_mode_and_a_replaced_file_keeps_its_mode(tmp_path: Path, umask022) -> None:
    write_text_atomic(tmp_path / "new.txt", "a")
    assert mode(tmp_path / "new.txt") == 0o644
    (tmp_path / "old.txt").write_text("old")
    (tmp_path / "old.txt").chmod(0o640)
    write_text_atomic(tmp_path / "old.txt", "new")
    assert (tmp_path / "old.txt").read_text() == "new" and mode(tmp_path / "old.txt") == 0o640
    os.umask(0o077)
    write_text_atomic(tmp_path / "private.txt", "a")
    assert mode(tmp_path / "private.txt") == 0o600


@needs_posix
def test_cli_outputs_have_the_usual_modes(tmp_path: Path, program: Path) -> None:
    env_umask = "umask 022 && "
    cmd = f"{env_umask}{sys.executable} -m serq draw {program} --out {tmp_path / 'd.tikz'}" \
          f" && {sys.executable} -m serq run {program} --dump {tmp_path / 'dump'} >/dev/null"
    # a shell command line: its run is bounded by events, HANG guards against a true hang only
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, cwd=ROOT, env=env(), timeout=HANG)
    assert out.returncode == 0, out.stderr
    assert mode(tmp_path / "d.tikz") == 0o644
    assert mode(tmp_path / "dump") == 0o755
    assert mode(tmp_path / "dump/response.csv") == 0o644


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")

    def boom(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", boom)
    with pytest.raises(OSError):
        write_text_atomic(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_dump_into_a_file_is_refused(tmp_path: Path, program: Path) -> None:
    (tmp_path / "afile").write_text("keep")
    out = serq("run", str(program), "--dump", str(tmp_path / "afile"))
    assert out.returncode == 1 and "cannot write" in out.stderr and "not a folder" in out.stderr
    assert (tmp_path / "afile").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "p.sq"]


@needs_posix
def test_dump_through_a_symlink_to_a_folder_fills_the_folder(tmp_path: Path, program: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real/keep.txt").write_text("mine")
    (tmp_path / "dl").symlink_to("real")
    out = serq("run", str(program), "--dump", str(tmp_path / "dl"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "dl").is_symlink()
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["keep.txt", "response.csv"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dl", "p.sq", "real"]


@needs_posix
def test_dump_through_a_dangling_symlink_creates_its_target(tmp_path: Path, program: Path) -> None:
    (tmp_path / "dl").symlink_to("made/here")
    out = serq("run", str(program), "--dump", str(tmp_path / "dl"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "dl").is_symlink()
    assert [p.name for p in (tmp_path / "made/here").iterdir()] == ["response.csv"]


@needs_posix
def test_dump_writes_through_a_symlinked_csv_inside_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "elsewhere.csv").write_text("old")
    (out / "a.csv").symlink_to(tmp_path / "elsewhere.csv")
    write_dir_atomic(out, lambda d: write_text_atomic(d / "a.csv", "new\n"))
    assert (out / "a.csv").is_symlink() and (tmp_path / "elsewhere.csv").read_text() == "new\n"


# -- B10: standard output ------------------------------------------------------------------


@needs_posix
@pytest.mark.parametrize("command, what", [("run", "the report"), ("check", "the summary"),
                                           ("draw", "the drawing")])
def test_a_closed_stdout_is_an_error(program: Path, command: str, what: str) -> None:
    # a child with its standard output closed: HANG guards against a write that never ends, only
    out = subprocess.run(["sh", "-c", f'"$0" -m serq {command} "$1" >&-', sys.executable, str(program)],
                         capture_output=True, text=True, cwd=ROOT, env=env(), timeout=HANG)
    assert out.returncode == 1
    assert f"cannot write {what}" in out.stderr and "closed" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command, what", [("run", "the report"), ("check", "the summary"),
                                           ("draw", "the drawing")])
def test_stdout_on_a_full_device_is_an_error(program: Path, command: str, what: str) -> None:
    with open("/dev/full", "w") as full:  # written to, never replaced
        out = serq(command, str(program), stdout=full, stderr=subprocess.PIPE, capture_output=False)
    assert out.returncode == 1, out.stderr
    assert f"cannot write {what}" in out.stderr and "No space left on device" in out.stderr
    assert "internal error" not in out.stderr and "Exception ignored" not in out.stderr


@needs_posix
@pytest.mark.parametrize("args", [("run", "--json"), ("check",), ("draw",), ("draw", "--out", "/dev/stdout"),
                                  ("draw", "--out", "-")])
def test_a_closed_pipe_is_a_quiet_exit_1(program: Path, args: tuple) -> None:
    r, w = os.pipe()
    os.close(r)  # no reader: the first write gets EPIPE
    try:
        out = serq(args[0], str(program), *args[1:], stdout=w, stderr=subprocess.PIPE, capture_output=False)
        helped = serq("--help", stdout=w, stderr=subprocess.PIPE, capture_output=False)
    finally:
        os.close(w)
    # a named output that is a pipe without a reader is as quiet as standard output (issue 25: it said
    # "cannot write /dev/stdout: Broken pipe" and `serq run | head` did not)
    assert (out.returncode, out.stderr) == (1, "")
    assert (helped.returncode, helped.stderr) == (1, "")  # click's own convention, which we follow


@pytest.mark.skipif(not os.path.exists("/dev/fd/1") or not os.path.exists("/dev/stdout"),
                    reason="needs /dev/stdout")
def test_out_dev_stdout_writes_to_standard_output_where_it_points(tmp_path: Path, program: Path) -> None:
    drawing = serq("draw", str(program)).stdout
    piped = serq("draw", str(program), "--out", "/dev/stdout")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == drawing
    log = tmp_path / "log.txt"
    log.write_text("header\n")
    with open(log, "a") as fh:  # `>> log.txt`: appended, not written over the header
        out = serq("draw", str(program), "--out", "/dev/fd/1", stdout=fh, stderr=subprocess.PIPE,
                   capture_output=False)
    assert out.returncode == 0, out.stderr
    assert log.read_text() == "header\n" + drawing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.txt", "p.sq"]


# -- B12: --trace -----------------------------------------------------------------------------


def test_trace_on_a_program_without_a_trace_is_an_error(program: Path, tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("session,turn,new,out,think,forced\n0,1,10,3,0,0\n")
    out = serq("run", str(program), "--trace", str(tmp_path / "t.csv"))
    assert out.returncode == 1
    assert "--trace" in out.stderr and "names no trace file" in out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr


TRACE_PROGRAM = """
stage gate : delay;
stage work : delay;
workload {
  arrive batch(2);
  trace "a.csv" ordered;
}
session { run gate (serial); turn; loop { run work (new); observe n = new; branch (more) { turn; } else { end; } } }
run { horizon 100; }
"""


def test_trace_still_replaces_a_programs_trace(tmp_path: Path) -> None:
    (tmp_path / "p.sq").write_text(TRACE_PROGRAM)
    (tmp_path / "a.csv").write_text("session,turn,new,out,think,forced\n0,1,1,1,0,0\n1,1,2,1,0,0\n")
    (tmp_path / "b.csv").write_text("session,turn,new,out,think,forced\n0,1,5,1,0,0\n1,1,7,1,0,0\n")
    a = serq("run", "p.sq", "--json", cwd=tmp_path)
    b = serq("run", "p.sq", "--json", "--trace", "b.csv", cwd=tmp_path)
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    assert a.stdout != b.stdout

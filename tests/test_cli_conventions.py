"""The command line's conventions (issue 13, item 4): --version, -h, completion,
flags without a type, exit codes in the help, where a run setting came from,
and Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from bounds import HANG, env, wait_for

import serq
from serq.errors import RunInterrupted

ROOT = Path(__file__).resolve().parents[1]
VLLM = ROOT / "programs" / "multi-turn" / "vllm.sq"


def cli(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    """`serq ARGS`, its run bounded by events (tests/bounds.py): no timeout."""
    return subprocess.run([sys.executable, "-m", "serq", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env(), **kw)  # type: ignore[call-overload]


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    r = cli("--version")
    assert r.returncode == 0 and r.stdout == f"serq {version('serq')}\n" and r.stderr == ""


@pytest.mark.parametrize("args", [("-h",), ("run", "-h"), ("sweep", "-h"), ("trace", "-h"), ("trace", "import", "-h")])
def test_h_is_help_everywhere(args: tuple[str, ...]) -> None:
    short, long = cli(*args), cli(*args[:-1], "--help")
    assert short.returncode == 0 and short.stdout == long.stdout and short.stdout.startswith("Usage: ") and "serq" in short.stdout.split("\n")[0]


@pytest.mark.parametrize("args", [(), ("trace",)])
def test_no_command_prints_the_help_once_and_no_error(args: tuple[str, ...]) -> None:
    r, help_ = cli(*args), cli(*args, "--help")
    assert r.returncode == 2 and r.stdout == "" and r.stderr == help_.stdout  # issue 19, item 5
    assert "error" not in r.stderr.split("\n")[0] and r.stderr.count("Usage:") == 1 and "Commands:" in r.stderr


@pytest.mark.parametrize("args, message", [(("nosuchcommand",), "error: No such command 'nosuchcommand'."),
                                           (("run",), "error: Missing argument 'FILE'."),
                                           (("run", "--bogus"), "error: No such option: --bogus")])
def test_a_usage_error_says_error_and_the_usage(args: tuple[str, ...], message: str) -> None:
    r = cli(*args)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == message and lines[1].startswith("Usage: ") and "serq" in lines[1] and len(lines) == 2, r.stderr


def test_help_lists_every_exit_code_and_completion() -> None:
    out = cli("--help").stdout
    for code, what in (("0", "success"), ("1", "the program is wrong"), ("2", "a usage error"),
                       ("3", "an internal error"), ("130", "interrupted")):
        assert any(line.split()[:1] == [code] and what in line for line in out.splitlines()), (code, out)
    assert "--install-completion" in out and "--show-completion" in out


def test_flags_are_shown_without_a_type() -> None:
    out = cli("run", "--help").stdout
    assert "<bool>" not in out
    assert any(line.split()[:1] == ["--json"] and "Print the report as JSON." in line for line in out.splitlines())
    assert "--horizon T " in out and "--max-live N " in out


def test_a_warmup_from_the_run_block_says_where_it_came_from() -> None:
    r = cli("run", str(VLLM), "--horizon", "10")
    assert r.returncode == 1
    assert ("vllm.sq: warm-up 200 from the program's run block (line 66) is not below --horizon 10\n"
            in r.stderr), r.stderr
    r = cli("run", str(VLLM), "--warmup", "5000")
    assert "--warmup 5000 is not below horizon 2000 from the program's run block (line 66)" in r.stderr
    program = serq.load("stage d : delay;\nworkload { arrive poisson(1); }\nsession { run d (1); }\n")
    with pytest.raises(serq.SerqError, match=r"^--warmup 5 is not below --horizon 4$"):
        serq.run(program, horizon=4, warmup=5)
    with pytest.raises(serq.SerqError, match=r"^the default warm-up 0 is not below|no horizon"):
        serq.run(program)
    with pytest.raises(serq.SerqError, match=r"^--warmup -1 is negative$"):
        serq.run(program, horizon=4, warmup=-1)


def test_a_sweep_says_where_the_warmup_came_from() -> None:
    r = cli("sweep", str(VLLM), "--horizon", "10", "--quiet")
    assert r.returncode == 1
    assert "warm-up 200 from the program's run block (line 66) is not below --horizon 10" in r.stderr


#: `python -m serq ARGS` whose progress line (serq/progress.py, the thread that reads the run's
#: clock) is replaced by a file, made once the run's clock has passed 0: a child that says when
#: it is inside the simulation, which the test waits for instead of sleeping (issue 38)
INSIDE = """
import sys
from pathlib import Path
import serq.progress as progress
mark = Path(sys.argv.pop(1))
class Mark(progress.RunProgress):
    def _show(self):
        if self.now() > 0 and not mark.exists():
            mark.touch()
progress.RunProgress = Mark
progress.stderr_is_terminal = lambda: True  # the line is shown (as the file) though stderr is a pipe
sys.argv[0] = "serq"
from serq.cli import console
console()
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGINT to a child process")
def test_ctrl_c_says_how_far_the_run_got_and_writes_nothing(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    inside = tmp_path.parent / f"{tmp_path.name}.inside"  # not in tmp_path, which must stay empty
    p = subprocess.Popen([sys.executable, "-c", INSIDE, str(inside), "run", str(VLLM), "--set", "Lambda=0.9",
                          "--horizon", "1e5", "--dump", str(dump)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT, env=env(SERQ_PROGRESS_AFTER="0"),
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_for(inside.exists, "the run's clock to pass 0", p)  # inside the simulation, however busy the machine
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=HANG)  # it ends on the signal (HANG: a true hang only)
    assert p.returncode == 130
    assert out == ""
    assert err.startswith("interrupted at t=") and err.endswith(" of 100000 simulated seconds: no report was written\n")
    assert float(err.split("t=")[1].split()[0]) > 0
    assert not dump.exists() and list(tmp_path.iterdir()) == []


def test_the_api_raises_a_keyboard_interrupt_that_says_how_far() -> None:
    err = RunInterrupted(12.5, 300.0)
    assert isinstance(err, KeyboardInterrupt) and str(err) == "interrupted at t=12.5 of 300"


def _full_command_streams(*argv: str) -> tuple[int, str, str]:
    """`cli_streams` with the group built whole (every subcommand), as before
    `serq.cli._command` built only the one named."""
    from unittest import mock

    from frontend_util import cli_streams

    from serq import cli as serq_cli

    whole = serq_cli._command
    with mock.patch.object(serq_cli, "_command", lambda argv: whole(["serq"])):
        return cli_streams(*argv)


def _every_subcommand() -> list[tuple[str, ...]]:
    from serq import cli as serq_cli

    names = [(serq_cli.command_name(c),) for c in serq_cli.app.registered_commands]
    return names + [(g.name,) for g in serq_cli.app.registered_groups]  # type: ignore[misc]


@pytest.mark.parametrize("name", _every_subcommand())
def test_a_command_built_alone_helps_and_refuses_as_the_whole_group(name: tuple[str, ...]) -> None:
    """`serq NAME …` builds the group with NAME alone (start-up, issue 42): its
    help, its usage errors and what the bare command prints are the same bytes."""
    from frontend_util import cli_streams

    from serq import cli as serq_cli

    built = serq_cli._command(["serq", *name])
    assert list(built.commands) == [name[0]]  # (one command: what this saves)
    for args in [(*name, "--help"), (*name, "--bogus"), name, (*name, "-h", "x")]:
        assert cli_streams(*args) == _full_command_streams(*args), args

"""The ``serq`` console script leaves without the interpreter's teardown
(serq/cli.py ``console``): the same output and exit codes as :func:`main`,
exit handlers run, and another thread still alive gets the ordinary exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bounds import HANG, env
from frontend_util import cli_main

ROOT = Path(__file__).resolve().parent.parent
MG1 = "programs/single-turn/mg1.sq"


def console(*argv: str, before: str = "") -> subprocess.CompletedProcess[str]:
    code = f"import sys\n{before}\nsys.argv = ['serq', *{list(argv)!r}]\nfrom serq.cli import console\nconsole()\n"
    # the child's runs are bounded by events; what these tests watch is how it leaves (its exit handlers,
    # a thread it must wait for), and HANG guards against a leaving that never ends, only
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env(),
                          timeout=HANG)


def _no_usage(text: str) -> str:
    """Without the usage line, whose program name in process is pytest's."""
    return "".join(line for line in text.splitlines(True) if not line.startswith("Usage:"))


def test_the_output_and_the_exit_code_are_mains() -> None:
    for argv in (["run", MG1, "--horizon", "50", "--warmup", "0"], ["run", MG1, "--set", "Lamda=1"],
                 ["check", "nope.sq"], ["run", MG1, "--horizon", "x"]):
        done = console(*argv)
        code, text = cli_main(*argv)
        assert done.returncode == code, argv
        assert _no_usage(done.stdout + done.stderr) == _no_usage(text), argv
    assert console("run", MG1, "--set", "Lamda=1").returncode == 2  # a command line's mistake (issue 25)
    assert console("check", "nope.sq").returncode == 1
    assert console("run", MG1, "--horizon", "x").returncode == 2


def test_exit_handlers_run_and_the_output_is_flushed(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    before = ("import atexit\n"
              f"atexit.register(lambda: open({str(tmp_path / 'bye')!r}, 'w').write('bye'))\n"
              f"sys.stdout = open({str(out)!r}, 'w')\n")  # a buffered file nobody flushes but the exit
    done = console("run", MG1, "--horizon", "50", "--warmup", "0", before=before)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "bye").read_text() == "bye"
    assert out.read_text().startswith("run: horizon 50 end 50 warmup 0 seed 1")


def test_a_live_thread_gets_the_ordinary_exit(tmp_path: Path) -> None:
    """A non-daemon thread still running when the command returns is joined
    (``os._exit`` would kill it): it finishes its work first."""
    mark = tmp_path / "joined"
    before = ("import threading, time\n"
              f"threading.Thread(target=lambda: (time.sleep(1.0), open({str(mark)!r}, 'w').write('y'))).start()\n")
    done = console("check", MG1, before=before)
    assert done.returncode == 0, done.stderr
    assert mark.read_text() == "y"

"""Goodput (issue 39): the share of turns meeting every latency target,
a client row of 1s and 0s (docs/report.md, "Goodput")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import serq
from serq.errors import UsageError
from serq.sim.goodput import Target, parse_goodput

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "lib" / "vllm.sq"

# Two requests through one step engine whose iterations cost 1 (the clock counts
# iterations; tests/sim/stages/test_fractional_tokens.py works the run out by
# hand): both have their first token at t1 (ttft 1); A's 20 tokens end at t20
# (tpot 19/19 = 1), B, preempted, ends at t21 with tpot (21 - 1)/2 = 10.
KERNEL = """
use "{lib}";
let bs = 16;
pool reqs {{ cap 16; admit via engine; }}
pool kv {{ cap 8 * bs; block bs; evict lru; preempt lifo; }}
stage engine : step {{ budget 1000; chunk 0; cost 1; memory kv; }}
server {{ vllm_request(reqs, kv, engine, prompt, o); }}
workload {{
  arrive batch(2);
  init {{ set prompt = serial == 0 ? 63 : 62; set o = serial == 0 ? 20 : 2.5; }}
  session {{ request; end; }}
}}
run {{ horizon 100; }}
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> serq.Program:
    path = tmp_path_factory.mktemp("goodput") / "kernel.sq"
    path.write_text(KERNEL.format(lib=LIB.as_posix()))
    return serq.load(path)


@pytest.mark.parametrize("targets, share", [
    ("ttft<=1,tpot<=5", 0.5),     # A (tpot 1) meets both; B (tpot 10) misses tpot
    ("ttft<=1,tpot<=10", 1.0),    # both
    ("ttft<1", 0.0),              # both first tokens come at exactly 1
    ("response<=20", 0.5),        # A's response is 20, B's 21
    ("response<21", 0.5),
    ("tpot<=1000ms", 0.5),        # 1000 ms = 1 s: A's tpot only
])
def test_goodput_is_the_share_of_turns_meeting_every_target(kernel: serq.Program, targets: str, share: float) -> None:
    report = serq.run(kernel, goodput=targets)
    assert report.client["ttft"].mean == 1 and report.client["response"].mean == 20.5
    g = report.client["goodput"]
    assert g.count == 2 and g.mean == share


def test_without_goodput_there_is_no_goodput_row(kernel: serq.Program) -> None:
    report = serq.run(kernel)
    assert "goodput" not in report.client and "goodput" not in report.to_dict()["client"]


def test_a_turn_with_one_output_token_meets_a_tpot_target() -> None:
    assert Target("tpot", "<=", 0.01).met(None) is True
    assert Target("ttft", "<=", 0.01).met(None) is False  # no first token: no ttft to meet


def test_the_goodput_targets_parse_in_seconds_or_milliseconds() -> None:
    assert parse_goodput("ttft<=0.5, client.tpot<50ms") == (Target("ttft", "<=", 0.5), Target("tpot", "<", 0.05))


@pytest.mark.parametrize("text, words", [
    ("tft<=0.5", "did you mean `ttft`?"),
    ("ttft=0.5", "is not FIGURE<=SECONDS"),
    ("ttft<=fast", "is not FIGURE<=SECONDS"),
    ("ttft<=inf", "is not FIGURE<=SECONDS"),
])
def test_a_bad_goodput_is_a_usage_error(text: str, words: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_goodput(text)
    assert words in err.value.render()


def test_serq_run_refuses_a_bad_goodput_with_exit_2() -> None:
    done = subprocess.run([sys.executable, "-m", "serq", "run", str(ROOT / "programs/single-turn/mg1.sq"),
                           "--goodput", "ttft<=x"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("error: invalid --goodput")
    assert "Traceback" not in done.stderr

"""The simulator never fails with anything but a :class:`serq.SerqError`: the
bundled programs and small scenario programs, with their numbers and words
mutated, either do not check, or run (briefly) to a report or a clean error."""

from __future__ import annotations

import re
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import serq

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?")

SCENARIOS = {
    "arrays": """
pool kv[2] { cap 640; block 16; evict by (size, age); preempt lifo; }
pool slots { cap 3; queue by (waited, serial); }
stage eng[2] : step { budget 64; chunk 32; cost 0.01 + 0.001 * tokens; memory kv; serve decode first; }
stage think : ps(2);
stage desk : fifo(2);
workload { arrive poisson(2); init { set j = 0; set n = ~uniform(10, 200); set o = ~erlang(2, 20) + 1; } }
session {
  choose j in 2 by (queue(eng[j]), used(kv[j]));
  hold slots (1), kv[j] (min(n, budget_left(eng[j]))) { 
    run eng[j] prefill (n) growing kv[j];
    run eng[j] decode (o) growing kv[j];
    grow kv[j] (16);
    release kv[j];
  } cache (n);
  run think (~h2(1, 4));
  run desk (~det(0.5));
  branch with (0.3) { drop kv[j]; }
  end;
}
run { horizon 30; }
""",
    "nolifo": """
pool mem { cap 100; block 10; preempt lifo; }
pool q { cap 2; }
stage d : delay;
workload { arrive closed(4); init { set u = ~uniform(10, 60); } }
session {
  hold q (1) { hold mem (u) { run d (1); grow mem (u); run d (1); } cache (u); }
}
run { horizon 30; }
""",
}


def sources() -> dict[str, str]:
    out = dict(SCENARIOS)
    for p in sorted((ROOT / "programs").glob("*/*.sq")):
        out[str(p.relative_to(ROOT))] = p.read_text()
    return out


SOURCES = sources()
TREE = Path(tempfile.mkdtemp(prefix="serq-run-fuzz-"))  # copies of programs: `use "std/vllm"` finds the library


class TooSlow(Exception):
    pass


ARMED = [False]


def _alarm(signum, frame):  # noqa: ANN001
    if ARMED[0]:
        raise TooSlow


@st.composite
def mutated(draw):
    name = draw(st.sampled_from(sorted(SOURCES)))
    text = SOURCES[name]
    numbers = list(NUMBER.finditer(text))
    for _ in range(draw(st.integers(1, 4))):
        if not numbers:
            break
        m = draw(st.sampled_from(numbers))
        # small numbers: a mutated `closed(1e6)` would only measure how long a million sessions take
        new = draw(st.sampled_from(["0", "1", "2", "0.5", "3", "16", "1e-9", "1000", "100"]))
        text = text[:m.start()] + new + text[m.end():]
        numbers = list(NUMBER.finditer(text))
    # swap words for others that fit the same place
    for _ in range(draw(st.integers(0, 2))):
        a, b = draw(st.sampled_from(SWAPS))
        if a in text:
            text = text.replace(a, b, 1)
    return name, text


SWAPS = [
    ("preempt lifo", "preempt none"), ("evict lru", "evict by (-size)"), ("queue fifo", "queue by (serial)"),
    (": delay", ": fifo"), (": delay", ": ps(1)"), (": fifo", ": ps(2)"), ("serve decode first", "serve by (remaining)"),
    ("prefill on", "decode on"), ("arrive poisson", "arrive renewal(~exp(1)); // "), ("arrive batch", "arrive closed"),
    ("admit via engine;", ""), ("cache (", "cache (0 * "), ("branch with (0.3)", "branch with (1)"),
]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # an alarm in a gc callback
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_programs_run_or_fail_cleanly(case) -> None:
    name, text = case
    path = ROOT / name if name.endswith(".sq") else None
    try:
        if path is not None:  # a copy elsewhere (`use "std/vllm"` finds the bundled library)
            copy = TREE / "programs" / path.parent.name / path.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(text)
            program = serq.load(copy)
        else:
            program = serq.load(text)
    except serq.SerqError:
        return
    old = signal.signal(signal.SIGALRM, _alarm)
    # thirty seconds, then every tenth (an alarm that lands in a gc callback is lost).  A run
    # that ends on its own ends well before: most take under 0.6 s; the slowest seen (the
    # examples change with this function's text, from which hypothesis derandomizes) took
    # 7.3 s on the 2-core machine, a closed population of 1000 whose every session is
    # rejected at once, stopped by the replacement guard after 101 000 replacements at time 0.
    # A run still going after 30 s hangs, and fails.
    ARMED[0] = True
    signal.setitimer(signal.ITIMER_REAL, 30.0, 0.1)
    horizon = min(program.run.horizon or 10, 10)
    try:
        report = serq.run(program, horizon=horizon, warmup=0)
        report.text()
        report.to_json()
    except serq.SerqError:
        pass
    except TooSlow:  # a hang, or a run far slower than any of these small ones should be: a failure
        pytest.fail(f"{name}, mutated: still running after 30 s (horizon {horizon})\n" + text)
    finally:
        ARMED[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)



@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_scenario_programs_run(name: str) -> None:
    report = serq.run(serq.load(SCENARIOS[name]))
    assert report.arrivals > 0


# -- huge counts (issue 8, B7): a storm ends with a message, never a hang ---------------------

ARRIVE = re.compile(r"arrive\s+(poisson|closed|batch)\s*\(([^()]*)\)")
HUGE = ["1e300", "1e30", "1e9", "1e7", "2e6", "1e6", "1e5", "50001", "1e4"]
STORMS = {
    "ends_at_once": "workload { arrive poisson(1); }\nsession { end; }\nrun { horizon 10; }",
    "zero_work": "stage d : delay;\nworkload { arrive closed(4); }\nsession { run d (0); run d (0); }\nrun { horizon 10; }",
}


def _arrival_constants(name: str, text: str) -> list[str]:
    """The `let`s an `arrive` reads, to override with `--set`."""
    m = ARRIVE.search(text)
    return re.findall(r"[A-Za-z_]\w*", m.group(2)) if m else []


@st.composite
def huge_counts(draw):
    sources = {**SOURCES, **STORMS}
    name = draw(st.sampled_from(sorted(sources)))
    text = sources[name]
    value = draw(st.sampled_from(HUGE))
    sets: dict[str, str] = {}
    how = draw(st.sampled_from(["set", "text", "closed", "batch", "renewal"]))
    names = _arrival_constants(name, text)
    m = ARRIVE.search(text)
    if how == "set" and names:
        sets[draw(st.sampled_from(names))] = value
    elif m is not None and how == "text":
        text = text[:m.start(2)] + value + text[m.end(2):]
    elif m is not None and how in ("closed", "batch"):
        text = text[:m.start()] + f"arrive {how}({value})" + text[m.end():]
    elif m is not None:
        gap = draw(st.sampled_from(["1e-320", "5e-324", "~exp(1e-300)", "~bernoulli(0.001) + 1e-300"]))
        text = text[:m.start()] + f"arrive renewal({gap})" + text[m.end():]
    arrivals = draw(st.sampled_from([None, None, 10**30, 10**9, 50]))
    horizon = draw(st.sampled_from([None, 10.0, 1.0]))
    return name, text, sets, arrivals, horizon


def _reset_peak() -> None:
    """Start this case's peak resident memory afresh: the worker process ran
    other tests before, and their peak is not this case's (Linux resets the
    high-water mark when 5 is written to clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _peak_kb() -> int:
    """Peak resident memory since :func:`_reset_peak`, in KiB (the process's
    lifetime peak where the high-water mark cannot be reset)."""
    try:
        status = Path("/proc/self/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+)", status).group(1))
    except (OSError, AttributeError):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # an alarm in a gc callback
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(huge_counts())
def test_huge_counts_end_in_a_report_or_a_message(case) -> None:
    """Huge rates, populations, batches and `--arrivals`, and interarrival
    times that do not move the clock: each run ends, soon, with a report or
    a SerqError.  Small limits keep the examples fast (the time a run may take
    grows with them); tests/sim/test_storms.py checks the default limits."""
    import os

    name, text, sets, arrivals, horizon = case
    path = ROOT / name if name.endswith(".sq") else None
    try:
        if path is not None:
            copy = TREE / "programs" / path.parent.name / path.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(text)
            program = serq.load(copy, sets=sets)
        else:
            program = serq.load(text, sets=sets)
    except serq.SerqError:
        return
    horizon = horizon or program.run.horizon or 10
    if arrivals is not None and program.arrival.kind not in ("poisson", "renewal"):
        arrivals = None
    _reset_peak()
    old = signal.signal(signal.SIGALRM, _alarm)
    os.environ["SERQ_MAX_LIVE"] = "1000"
    os.environ["SERQ_MAX_ARRIVALS"] = "10000"
    ARMED[0] = True
    signal.setitimer(signal.ITIMER_REAL, 5.0, 0.1)
    try:
        serq.run(program, horizon=horizon, warmup=0, arrivals=arrivals)
    except serq.SerqError:
        pass
    except TooSlow:
        pytest.fail(f"{name} with {sets or 'its text mutated'}, arrivals {arrivals}, horizon {horizon}: "
                    "still running after 5 s\n" + text)
    finally:
        ARMED[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        del os.environ["SERQ_MAX_LIVE"], os.environ["SERQ_MAX_ARRIVALS"]
    assert _peak_kb() < 1 << 20, "over 1 GB"

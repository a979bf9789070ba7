"""The shortcuts of the M/G/1 path (issue 9, item 5) give exactly the numbers
of the straightforward code: sessions' stream keys mixed in NumPy blocks equal
the one-by-one SplitMix64 mixing, keyed streams draw the same sequences, and a
session's own stream, built on first use, is the (serial, 0, SESSION) stream."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

import serq
from serq.sim import rng
from serq.sim.simulator import Simulator

ROOT = Path(__file__).resolve().parents[2]


def _mix_fold(root: int, *parts: int) -> int:
    x = root
    for v in parts:
        x = rng._mix((x + rng._GAMMA + v) & rng._M)
    return x


def test_key_is_the_splitmix_fold() -> None:
    r = random.Random(9)
    for _ in range(5000):
        root = r.getrandbits(64)
        parts = [r.getrandbits(r.choice([1, 8, 32, 64])) for _ in range(r.randint(0, 4))]
        assert rng.key(root, *parts) == _mix_fold(root, *parts)


def test_session_keys_in_blocks_equal_key() -> None:
    for seed in (0, 1, 3, 2**40 + 1):
        root = rng.root_key(seed)
        keys = rng.SessionKeys(root)
        serials = list(range(2 * rng.KEY_BLOCK + 3)) + [10**8 - 1, 10**8, 2**40 + 5, 7, 2**63 + 11]
        for serial in serials:
            prefix, own, work = keys.get(serial)
            assert prefix == rng.key(root, serial)
            assert own == rng.key(root, serial, 0, rng.SESSION)
            assert work == rng.key(root, serial, 0, rng.WORKLOAD)
            # a later turn's workload key continues from the prefix
            assert rng.key(prefix, 5, rng.WORKLOAD) == rng.key(root, serial, 5, rng.WORKLOAD)


def test_a_block_of_session_keys_is_the_same_in_python_and_numpy() -> None:
    pytest.importorskip("numpy")
    root = rng.root_key(7)
    for base in (0, rng.KEY_BLOCK, rng.PURE_SERIALS, 10**8 - 10**8 % rng.KEY_BLOCK):
        python, numpy = rng.SessionKeys(root), rng.SessionKeys(root)
        python._fill_python(base)
        numpy._fill_numpy(base)
        assert (python.prefix, python.own, python.work) == (numpy.prefix, numpy.own, numpy.work)
        assert python.prefix[3] == rng.key(root, base + 3)
        assert python.work[-1] == rng.key(root, base + rng.KEY_BLOCK - 1, 0, rng.WORKLOAD)


def test_session_keys_wait_for_numpy_until_many_sessions() -> None:
    """A run of a few thousand sessions mixes their keys in Python and never
    imports NumPy for them (its import costs more than the Python does)."""
    probe = ("import sys\nfrom serq.sim import rng\nk = rng.SessionKeys(rng.root_key(1))\n"
             "k.get(6000)\nprint('numpy' in sys.modules)\n"
             "k.get(rng.PURE_SERIALS + 1)\nprint('numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_keyed_streams_draw_the_same_sequence() -> None:
    root = rng.root_key(4)
    for serial in (0, 1, 513, 99_999):
        a = rng.keyed(rng.key(root, serial, 0, rng.WORKLOAD))
        b = rng.workload_stream(root, serial, 0)
        assert [a.random() for _ in range(20)] == [b.random() for _ in range(20)]
        assert a.integers(1000) == b.integers(1000)


def test_a_sessions_own_stream_is_built_on_first_use() -> None:
    program = serq.load(ROOT / "programs/single-turn/mg1.sq")
    sim = Simulator(program, seed=2, horizon=10.0, warmup=0.0)
    s = sim.spawn()
    first = s.srng
    assert first is s.srng
    ref = rng.session_stream(sim.root, s.serial)
    assert [first.random() for _ in range(5)] == [ref.random() for _ in range(5)]
    # a body that never draws from its own stream does not bind it
    assert "_sr = s.srng" not in sim.code.text
    closed = Simulator(serq.load(ROOT / "programs/multi-turn/closed.sq"), seed=2, horizon=10.0, warmup=0.0)
    assert "_sr = s.srng" in closed.code.text


def test_runs_repeat_exactly() -> None:
    program = serq.load(ROOT / "programs/single-turn/ps.sq")
    one = serq.run(program, seed=5, horizon=3000, warmup=300).to_json()
    two = serq.run(program, seed=5, horizon=3000, warmup=300).to_json()
    assert one == two

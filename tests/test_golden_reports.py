"""Every bundled program's JSON report, byte for byte, against the reports
stored in ``tests/golden/reports.json``: horizons 300 and 2000 (warm-up a
tenth), seeds 1–3, and the agent program at Lambda 0.6 and 0.9 (near and past
the knee, where the step engine works hardest); and the agent program with the
scheduling clauses users write to compare designs (``CLAUSES``: ``serve by``
keys that read ``remaining``, ``evict by`` keys), whose goldens were taken on
the plain path, iteration by iteration, before those clauses kept coalesced
decode runs (issue 21).

The goldens were taken after the correctness fixes of issue 8 and before any
speed work: an optimisation must leave every figure exactly as it was.  A
change that moves numbers on purpose rewrites them, and says why in its
commit::

    python tests/test_golden_reports.py --write

``--add`` computes only the cases the file lacks (a new case, taken with the
serq on ``PYTHONPATH``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "reports.json"

PROGRAMS = [
    "programs/multi-turn/closed.sq",
    "programs/multi-turn/vllm.sq",
    "programs/multi-turn/vllm_chat.sq",
    "programs/single-turn/mg1.sq",
    "programs/single-turn/ps.sq",
    "programs/single-turn/vllm_single_turn.sq",
    "programs/subagent/vllm_subagents.sq",
]
SEEDS = (1, 2, 3)
HORIZONS = (300, 2000)
LOADS = ("0.6", "0.9")  # Lambda of programs/multi-turn/vllm.sq (the program's own is 0.3)
#: Edited copies of programs/multi-turn/vllm.sq: (text replaced, replacement).
CLAUSES: dict[str, tuple[str, str]] = {
    "serve by remaining": ("  memory kv;\n}", "  memory kv;\n  serve by (decoding ? 0 : 1, remaining);\n}"),
    "serve by -remaining": ("  memory kv;\n}", "  memory kv;\n  serve by (K, -remaining);\n}"),
    "evict by waiting,-size": ("evict lru;", "evict by (waiting, -size);"),
    "evict by age": ("evict lru;", "evict by (-age);"),
}
CLAUSE_RUNS = (("0.3", 1, 300), ("0.6", 1, 300), ("0.6", 2, 600), ("0.9", 3, 300))


def cases() -> list[tuple[str, str, tuple[tuple[str, str], ...], int, int]]:
    """(case id, program, sets, seed, horizon), in a fixed order."""
    out = []
    for horizon in HORIZONS:
        for seed in SEEDS:
            for program in PROGRAMS:
                out.append((f"{program} h{horizon} s{seed}", program, (), seed, horizon))
            for lam in LOADS:
                out.append((f"programs/multi-turn/vllm.sq Lambda={lam} h{horizon} s{seed}",
                            "programs/multi-turn/vllm.sq", (("Lambda", lam),), seed, horizon))
    for clause in CLAUSES:
        for lam, seed, horizon in CLAUSE_RUNS:
            out.append((f"programs/multi-turn/vllm.sq [{clause}] Lambda={lam} h{horizon} s{seed}",
                        f"programs/multi-turn/vllm.sq [{clause}]", (("Lambda", lam),), seed, horizon))
    return out


def program_text(program: str) -> str:
    """The text of a case's program: a bundled file, or an edited copy ``FILE [CLAUSE]``."""
    path, _, clause = program.partition(" [")
    text = (ROOT / path).read_text(encoding="utf-8")
    if clause:
        old, new = CLAUSES[clause.rstrip("]")]
        assert text.count(old) == 1, (program, old)
        text = text.replace(old, new)
    return text


def report_json(program: str, sets: tuple[tuple[str, str], ...], seed: int, horizon: int) -> str:
    import serq

    if " [" in program:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "program.sq"
            path.write_text(program_text(program), encoding="utf-8")
            loaded = serq.load(path, sets=list(sets))
    else:
        loaded = serq.load(ROOT / program, sets=list(sets))
    report = serq.run(loaded, seed=seed, horizon=horizon, warmup=horizon / 10)
    # the figures, as the goldens were taken: the settling verdict (issue 39) came later and is
    # pinned by tests/sim/test_settling.py; it only reads the run, so every figure is unchanged
    from serq.report import _encode

    return _encode({k: v for k, v in report.to_dict().items() if k not in ("settled", "settling")})


@pytest.fixture(scope="module")
def golden() -> dict[str, str]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_the_goldens_cover_every_case(golden: dict[str, str]) -> None:
    assert sorted(golden) == sorted(case[0] for case in cases())


@pytest.mark.parametrize("case", cases(), ids=lambda case: case[0])
def test_a_report_is_byte_identical_to_its_golden(case: tuple, golden: dict[str, str]) -> None:
    name, program, sets, seed, horizon = case
    assert report_json(program, sets, seed, horizon) == golden[name]


def write(only_new: bool = False) -> None:
    """Run every case (or those the file lacks) and store its report (in case order)."""
    have = json.loads(GOLDEN.read_text(encoding="utf-8")) if only_new else {}
    out = {}
    for name, program, sets, seed, horizon in cases():
        if name in have:
            out[name] = have[name]
            continue
        out[name] = report_json(program, sets, seed, horizon)
        print(name, file=sys.stderr)
    tmp = GOLDEN.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(GOLDEN)


if __name__ == "__main__":
    if sys.argv[1:] not in (["--write"], ["--add"]):
        sys.exit("usage: python tests/test_golden_reports.py --write|--add")
    write(only_new=sys.argv[1:] == ["--add"])

"""The bundled offload program (programs/offload/vllm_offload.sq, docs/offload.md):
coalesced runs give the report of one iteration at a time where growths evict
and spill; without the tier it is the same run as a program with no `spill`;
the tier raises the hit rate and lowers TTFT at the same seeds; in a drained
run every spill and every fetch is a job done on its link."""

from __future__ import annotations

from pathlib import Path

import pytest

import serq
from serq.sim.stages import StepEngine

ROOT = Path(__file__).resolve().parents[2]
OFFLOAD = ROOT / "programs/offload/vllm_offload.sq"
SPILL_LINE = "  spill host via d2h (size * kv_bytes / pcie) when (offload);\n"


class Plain(StepEngine):
    coalesce = False


def report(sets: dict[str, str] | None = None, *, text: str | None = None, plain: bool = False,
           horizon: float = 300, seed: int = 1, warmup: float | None = None) -> serq.Report:
    program = serq.load(OFFLOAD if text is None else text, sets=sets or {})
    return serq.run(program, seed=seed, horizon=horizon, warmup=horizon / 10 if warmup is None else warmup,
                    engines={"engine": Plain} if plain else None)


@pytest.mark.parametrize("sets", [{}, {"pcie": "1e9"}, {"host_tokens": "16384"}, {"Lambda": "0.6"}])
def test_the_offload_program_gives_the_report_of_one_iteration_at_a_time(sets: dict[str, str]) -> None:
    # 135 s: some 4 400 spills (16 800 at Lambda 0.6), a small tier evicting; runs across t = 128 s,
    # where the iteration ends leave a binade
    fast = report(sets, horizon=135)
    assert fast.pool("kv").spills > 1000
    assert fast.to_json() == report(sets, horizon=135, plain=True).to_json()


def test_without_the_tier_it_is_the_run_of_a_pool_that_does_not_spill(tmp_path: Path) -> None:
    # `offload=0` folds the predicate to 0: no spill at all. A predicate that is never true but
    # is read at every eviction keeps the spilling path (piece by piece, coalesced runs ended
    # before evicting growths), which must give the report of the plain pool's bulk paths
    source = OFFLOAD.read_text()
    assert SPILL_LINE in source
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib/vllm.sq").write_text((ROOT / "lib/vllm.sq").read_text())
    folder = tmp_path / "programs/offload"
    folder.mkdir(parents=True)
    (folder / "none.sq").write_text(source.replace(SPILL_LINE, ""))
    (folder / "never.sq").write_text(source.replace("when (offload)", "when (size < 0)"))
    none = report(text=str(folder / "none.sq"), horizon=300)  # (300 s: some 220 evicted)
    assert none.pool("kv").evicted_entries > 100
    for other in (report({"offload": "0"}, horizon=300), report(text=str(folder / "never.sq"), horizon=300)):
        assert other.text() == none.text()
        assert other.pool("kv").spills == 0


@pytest.mark.parametrize("seed", [1, 2])
def test_the_tier_raises_the_hit_rate_and_lowers_ttft_at_the_same_seed(seed: int) -> None:
    # 400 s: at seeds 1 to 6 the hit rate 0.35 to 0.44 higher, TTFT 0.35 to 0.43 and the prefill
    # tokens 0.15 to 0.24 of the run without the tier
    on, off = report(horizon=400, seed=seed), report({"offload": "0"}, horizon=400, seed=seed)
    assert on.observe("hit").mean > off.observe("hit").mean + 0.2
    assert on.client["ttft"].mean < 0.7 * off.client["ttft"].mean
    assert on.observe("prefill_tokens").mean < 0.5 * off.observe("prefill_tokens").mean


def test_a_drained_run_counts_every_spill_and_fetch_on_the_links() -> None:
    # the first 40 sessions run to their end: nothing is left on a link (some 8 300 spills, 38 fetches)
    r = serq.run(serq.load(OFFLOAD), warmup=0, arrivals=40)
    fetches = sum(1 for s in r.samples["fetched_tokens"] if s.value > 0)
    assert r.pool("kv").spills > 1000 and fetches > 20
    assert r.stage("d2h").completed == r.pool("kv").spills
    assert r.stage("h2d").completed == fetches

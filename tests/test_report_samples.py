"""The report's per-turn data (issue 10, item 4): p50/p90/p95 beside p99 in
the JSON report, and the client rows' samples in ``Report.samples`` and the
dump."""

from __future__ import annotations

import json
import math
from pathlib import Path

import serq
from serq.sim.stats import summarize

ROOT = Path(__file__).resolve().parent.parent


def test_p50_p90_p95_are_nearest_ranks_like_p99():
    xs = [float(v) for v in range(100, 0, -1)]  # 1..100, recorded in reverse
    s = summarize(xs)
    # nearest rank ceil(q n) of 1..100 is q n itself
    assert (s.p50, s.p90, s.p95, s.p99) == (50.0, 90.0, 95.0, 99.0)
    s = summarize([float(v) for v in range(1, 12)])  # n = 11
    # ranks ceil(5.5) = 6, ceil(9.9) = 10, ceil(10.45) = 11, ceil(10.89) = 11
    assert (s.p50, s.p90, s.p95, s.p99) == (6.0, 10.0, 11.0, 11.0)
    s = summarize([7.0])
    assert (s.p50, s.p90, s.p95, s.p99) == (7.0, 7.0, 7.0, 7.0)


def test_no_samples_give_nan_percentiles():
    s = summarize([])
    assert all(math.isnan(v) for v in (s.p50, s.p90, s.p95, s.p99))


def test_every_json_row_has_ordered_percentiles_and_the_text_keeps_its_columns():
    report = serq.run(serq.load(ROOT / "programs/multi-turn/vllm.sq"), seed=1, horizon=120, warmup=12)
    d = json.loads(report.to_json())
    rows = [*d["observes"].values(), *d["client"].values()]
    assert rows and d["client"]
    for row in rows:
        assert list(row) == ["count", "mean", "ci", "cv2", "p50", "p90", "p95", "p99"]
        assert row["p50"] <= row["p90"] <= row["p95"] <= row["p99"]
    text = report.text()
    headers = [line.split() for line in text.split("\n") if line.startswith(("observe ", "client "))]
    assert headers == [["observe", "count", "mean", "95%", "CI", "cv2", "p99"],
                       ["client", "count", "mean", "95%", "CI", "cv2", "p99"]]


def test_the_client_rows_samples_are_in_the_report_and_the_dump(tmp_path):
    report = serq.run(serq.load(ROOT / "programs/multi-turn/vllm.sq"), seed=2, horizon=150, warmup=15)
    for row in ("ttft", "tpot", "response"):
        samples = report.samples[f"client_{row}"]
        assert len(samples) == report.client[row].count > 0
        assert [s.time for s in samples] == sorted(s.time for s in samples)  # recording order
        assert all(s.turn >= 1 and s.time >= 15 for s in samples)
    report.dump(tmp_path)
    assert {"client_ttft.csv", "client_tpot.csv", "client_response.csv"} <= {p.name for p in tmp_path.iterdir()}
    for row in ("ttft", "tpot", "response"):
        lines = (tmp_path / f"client_{row}.csv").read_text().splitlines()
        assert lines[0] == "time,session,turn,value"
        values = [float(line.split(",")[3]) for line in lines[1:]]
        # the CSV gives back the report's mean: the same samples, the same sum
        assert len(values) == report.client[row].count
        assert math.fsum(values) / len(values) == report.client[row].mean


def test_a_response_sample_is_its_turns_end_minus_its_send():
    report = serq.run(serq.load(ROOT / "programs/multi-turn/vllm.sq"), seed=1, horizon=100, warmup=10)
    ttft = {(s.session, s.turn): s for s in report.samples["client_ttft"]}
    for s in report.samples["client_response"]:
        first = ttft[(s.session, s.turn)]  # one of each per turn, stamped alike
        assert first.time == s.time and 0 < first.value <= s.value


def test_a_program_without_a_client_has_no_client_samples(tmp_path):
    report = serq.run(serq.load(ROOT / "programs/single-turn/mg1.sq"), seed=1, horizon=200, warmup=20)
    assert not any(name.startswith("client_") for name in report.samples)
    report.dump(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["response.csv", "service.csv", "wait.csv"]

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

"""serq/units.py is the one table of the report's units: docs/report.md's
tables say the same units, every figure a run can put in a sweep's row has a
label, and the labels and units are the ones the summary and plots show."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import serq
from serq import units
from serq.experiments.summary import report_columns

ROOT = Path(__file__).resolve().parents[1]

#: docs/report.md's sections with a unit column, and the table each one is.
SECTIONS = {
    "## 4. The run line": units.RUN,
    "## 7. The `client` table": units.CLIENT,
    "## 8. The `task` table": units.TASK,
    "## 9. The `stage` table": units.STAGE,
    "## 10. The `step` table": units.STAGE,
    "## 11. The `pool` table": units.POOL,
}
#: Figures in the JSON only (the text report has no column for them), and the text report's
#: one derived column (``idle``: 1 − the step table's three shares, not in the JSON).
JSON_ONLY = {"req_per_s", "mean_itl", "settled", "settling.warmup", "settling.horizon", "settling.overloaded",
             "settling.reasons"}  # (the settling verdict has a line of its own, not run-line fields)
TEXT_ONLY = {"idle": "fraction of time"}


def doc_units() -> dict[str, dict[str, str]]:
    """{section heading: {column as the doc writes it: unit}} from docs/report.md."""
    text = (ROOT / "docs" / "report.md").read_text()
    out: dict[str, dict[str, str]] = {}
    for heading in SECTIONS:
        body = text.split(heading, 1)[1].split("\n## ", 1)[0]
        rows: dict[str, str] = {}
        header = None
        for line in body.splitlines():
            if not line.startswith("|"):
                header = None if not line.strip() else header
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
                continue
            if set(cells[0]) <= set("-") or "unit" not in header:
                continue
            for name in re.findall(r"`([^`]+)`", cells[0]):
                rows[name] = cells[header.index("unit")]
        out[heading] = rows
    return out


def test_the_report_docs_give_the_units_of_the_table() -> None:
    docs = doc_units()
    for heading, columns in SECTIONS.items():
        written = docs[heading]
        assert written, heading
        for name, unit in written.items():
            if name in TEXT_ONLY:
                assert TEXT_ONLY[name] == unit
                continue
            column = next((c for c in columns if c.column == name), None)
            assert column is not None, f"{heading}: `{name}` is not in serq/units.py"
            assert column.unit == unit, f"{heading}: `{name}` is in {unit!r} in the docs, {column.unit!r} in the table"
    # every column of the stage, step and pool tables is in the docs (the JSON-only ones aside)
    documented = set(docs["## 9. The `stage` table"]) | set(docs["## 10. The `step` table"])
    assert {c.column for c in units.STAGE if c.key not in JSON_ONLY} == documented - set(TEXT_ONLY)
    assert {c.column for c in units.POOL} == set(docs["## 11. The `pool` table"])
    assert {c.column for c in units.RUN if c.key not in JSON_ONLY} == set(docs["## 4. The run line"])


def test_the_tables_name_every_field_of_the_report_rows() -> None:
    from dataclasses import fields

    from serq.report import PoolSummary, StageSummary

    assert [f.name for f in fields(StageSummary) if f.name not in ("name", "index")] == [c.key for c in units.STAGE]
    assert [f.name for f in fields(PoolSummary) if f.name not in ("name", "index")] == [c.key for c in units.POOL]


@pytest.mark.parametrize("key, label, unit, signed", [
    ("client.ttft.mean", "client ttft mean", "s", False),
    ("client.tpot.p99", "client tpot p99", "s per token", False),
    ("client.response.count", "client response count", "samples", False),
    ("client.ttft.cv2", "client ttft cv2", "", False),
    ("req_per_s", "requests per second", "req/s", False),
    ("mean_live", "mean live", "sessions", False),
    ("pools.kv.preemptions", "pool kv preempt", "preemptions", False),
    ("pools.kvD[1].mean_used", "pool kvD[1] used", "units", False),
    ("stages.engine.utilization", "stage engine util", "fraction", False),
    ("stages.engine.mean_decode_step", "stage engine decode step", "s", False),
    ("tasks.time.p99", "task time p99", "s", False),
    ("tasks.open", "tasks open", "tasks", False),
    ("observes.hit.mean", "observe hit mean", "", True),
    ("observes.hit.ci", "observe hit ci", "", False),
    ("gauges.spread.max", "gauge spread max", "", True),
    ("replay.late", "replay.late", "", True),
])
def test_describe(key: str, label: str, unit: str, signed: bool) -> None:
    f = units.describe(key)
    assert (f.label, f.unit, f.signed) == (label, unit, signed)


def test_every_figure_of_a_bundled_program_has_a_unit_or_is_its_own() -> None:
    # all the figures a vLLM program can report are known: a unit (or a pure number) each
    program = serq.load(ROOT / "programs" / "subagent" / "vllm_spawn.sq")
    for key in report_columns(program):
        f = units.describe(key)
        if key.startswith(("observes.", "gauges.")) or key in ("seed",) or key.endswith(".cv2"):
            continue
        assert f.unit, key
        assert f.label != key or "." not in key, key  # (a run field is its own label)

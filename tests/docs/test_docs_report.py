"""docs/report.md stays true: its pasted reports are what the commands print
today, and it explains every JSON key and every text column the report has.

A ```` ```report ```` block is a command (``$ serq run …``) and its whole output;
a ```` ```report-excerpt ```` block is a command and consecutive lines of its
output. The command is run in-process (``serq.load`` and ``serq.run``, the
same code ``serq run`` calls), with the options the blocks use.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import serq
from serq import report as R

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "report.md"
DOC_TEXT = DOC.read_text(encoding="utf-8")


def blocks(tags: tuple[str, ...]) -> list[tuple[str, int, str]]:
    out = []
    for m in re.finditer(r"^```(\S+)\n(.*?)^```$", DOC_TEXT, flags=re.S | re.M):
        if m.group(1) in tags:
            out.append((m.group(1), DOC_TEXT.count("\n", 0, m.start()) + 1, m.group(2)))
    return out


def run_command(command: str) -> str:
    """The report text ``serq run`` prints for ``command`` (``$ serq run FILE [options]``)."""
    words = shlex.split(command)
    assert words[:3] == ["$", "serq", "run"], command
    path, options = words[3], words[4:]
    sets, kw = {}, {}
    i = 0
    while i < len(options):
        opt, value = options[i], options[i + 1]
        if opt == "--set":
            name, text = value.split("=", 1)
            sets[name] = text
        elif opt in ("--horizon", "--warmup"):
            kw[opt[2:]] = float(value)
        elif opt == "--seed":
            kw["seed"] = int(value)
        else:
            raise AssertionError(f"docs/report.md: option {opt} is not handled by this test")
        i += 2
    program = serq.load(ROOT / path, sets=sets)
    return serq.run(program, **kw).text()


REPORTS = blocks(("report", "report-excerpt"))


def test_the_page_pastes_reports():
    assert any(tag == "report" for tag, _, _ in REPORTS)


@pytest.mark.parametrize("block", REPORTS, ids=lambda b: f"line{b[1]}")
def test_a_pasted_report_is_what_the_command_prints(block):
    tag, line, text = block
    command, *pasted = text.rstrip("\n").split("\n")
    actual = run_command(command).split("\n")
    if tag == "report":
        assert pasted == actual, (f"docs/report.md:{line}: `{command[2:]}` now prints:\n" + "\n".join(actual))
    else:
        n = len(pasted)
        assert any(actual[k:k + n] == pasted for k in range(len(actual) - n + 1)), (
            f"docs/report.md:{line}: these lines are no longer in the output of `{command[2:]}`:\n"
            + "\n".join(pasted) + "\n--- it prints:\n" + "\n".join(actual))


def _code_words() -> set[str]:
    out: set[str] = set()
    for span in re.findall(r"(`+)(.+?)\1", DOC_TEXT):
        out.update(re.findall(r"[A-Za-z_][\w()%.]*|\d+% CI", span[1]))
        out.add(span[1])
    return out


def test_every_json_key_is_explained():
    report = serq.run(serq.load(ROOT / "programs/subagent/vllm_spawn.sq"), horizon=120, warmup=10)
    d = report.to_dict()
    keys = set(d) | set(d["stages"][0]) | set(d["pools"][0]) | set(d["client"]["ttft"]) | set(d["tasks"])
    keys |= {"replay", "sessions", "arrived", "live", "exhausted", "end"}  # an `arrive trace` run's (Report.replay)
    words = _code_words()
    missing = sorted(k for k in keys if k not in words)
    assert not missing, f"docs/report.md does not explain these JSON keys: {', '.join(missing)}"


def test_every_text_column_is_explained():
    report = serq.run(serq.load(ROOT / "programs/subagent/vllm_spawn.sq"), horizon=120, warmup=10)
    text = report.text()
    heads = set()
    for line in text.split("\n"):
        if re.match(r"^(observe|client|task|stage|step|pool) ", line):
            heads.update(re.split(r" {2,}", line.strip())[1:])
    heads |= set(R.CLIENT_ROWS) | set(R.TASK_ROWS)
    heads |= {"horizon", "end", "warmup", "seed", "events", "arrivals", "ended", "turns", "mean live"}
    missing = sorted(h for h in heads if f"`{h}`" not in DOC_TEXT)
    assert not missing, f"docs/report.md does not explain these columns: {', '.join(missing)}"


def test_every_dump_file_is_explained():
    for name in ("client_ttft.csv", "task_time.csv", "tasks.csv", "STAGE.steps.csv", "time,session,turn,value",
                 ",".join(R.STEP_COLUMNS), "root,start,end,sessions,depth"):
        assert f"`{name}`" in DOC_TEXT, name


def test_the_links_of_the_report_page_lead_somewhere():
    from test_docs_language import anchors

    prose = re.sub(r"^```.*?^```$", "", DOC_TEXT, flags=re.S | re.M)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        file, _, anchor = target.partition("#")
        path = DOC if not file else DOC.parent / file
        if not path.exists() or (anchor and anchor not in anchors(path)):
            broken.append(target)
    assert not broken, f"docs/report.md links to missing files or headings: {broken}"


def test_the_rej_and_stuck_lines_are_quoted_as_the_report_prints_them():
    pool = R.PoolSummary("kv", None, 0.0, 0.0, 0.0, 0.0, R.NAN, 0, 0, 0.0, 0, 0, 47, 3)
    report = R.Report(horizon=1, end=1, warmup=0, seed=1, events=0, arrivals=0, ended=0, turns=0, mean_live=0.0,
                      pools=[pool])
    for line in report.text().split("\n"):
        if line.startswith(("rej:", "stuck:")):
            assert "\n" + line + "\n" in DOC_TEXT, line


def test_every_untagged_block_quotes_a_checked_report():
    """An untagged block quotes lines of a checked report block (the run line) or the
    rej:/stuck: lines checked above."""
    from test_docs_language import blocks as fenced

    checked = {line for _tag, _line, text in REPORTS for line in text.split("\n")}
    untagged = [b for b in fenced(DOC_TEXT) if b.tag == ""]
    assert untagged
    for block in untagged:
        for line in block.text.rstrip("\n").split("\n"):
            assert line in checked or line.startswith(("rej: ", "stuck: ")), (
                f"docs/report.md:{block.line}: {line!r} is in no checked report")

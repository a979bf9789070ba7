"""docs/guide.md runs as written: every command of its ```sh blocks, in order,
and every output it pastes.

The conventions (stated at the top of the guide too):

* Every line of a ```` ```sh ```` block is a shell command (``bash -c``), unless
  it is empty or starts with ``#``; a line ending in ``\\`` continues on the
  next.  The commands of a section (a ``## `` heading) run in the order of the
  page, in **one work folder** of the section's own (a temporary directory
  holding symbolic links ``programs``, ``lib`` and ``docs`` to the checkout),
  so they are the commands a reader types at the top of the checkout, and the
  files they write (``--out``, ``--dump``) land in the work folder.  A
  section reads only the files its own steps wrote, so the sections are
  separate tests, which pytest-xdist spreads over the cores.  ``serq`` and
  ``python`` are this interpreter's.  A command that exits non-zero fails the
  test.
* A ```` ```csv NAME ```` block (a language and a file name) is a file the
  reader writes by hand: the test writes it to NAME in the work folder when
  the page reaches it.
* A ```` ```python ```` block shows code the reader finds in ``docs/examples/``:
  it must appear there verbatim in some file.
* A ```` ```text ```` block right after a ```sh block is the standard output
  of that block's **last** command (commands show their standard error with
  ``2>&1``).  It is compared line by line, trailing spaces ignored, with
  three normalisations: a line ``…`` stands for any number of lines (zero
  included); a line ending in ``…`` matches a line that begins with what
  precedes the ``…``; in a line beginning with ``time:`` the numbers are not
  compared (they are CPU seconds).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from bounds import HANG
from bounds import env as bounded

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide.md"
TEXT = GUIDE.read_text(encoding="utf-8")
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", flags=re.S | re.M)


def parse() -> list[dict]:
    """The guide's steps in page order: {"kind": "sh", "commands", "expect"} or {"kind": "file", …}."""
    steps: list[dict] = []
    fences = list(FENCE.finditer(TEXT))
    for i, m in enumerate(fences):
        info, body = m.group(1).split(), m.group(2)
        line = TEXT.count("\n", 0, m.start()) + 1
        if info[:1] == ["sh"]:
            commands, pending = [], ""
            for raw in body.splitlines():
                text = pending + raw.strip()
                if text.endswith("\\"):
                    pending = text[:-1].rstrip() + " "
                    continue
                pending = ""
                if text and not text.startswith("#"):
                    commands.append(text)
            expect = None
            if i + 1 < len(fences):
                nxt = fences[i + 1]
                if nxt.group(1).strip() == "text" and not TEXT[m.end():nxt.start()].strip():
                    expect = nxt.group(2)
            steps.append({"kind": "sh", "line": line, "commands": commands, "expect": expect})
        elif len(info) == 2 and info[0] == "csv":
            steps.append({"kind": "file", "line": line, "name": info[1], "body": body})
    return steps


STEPS = parse()
NUMBER = re.compile(r"\d+(\.\d+)?(e[-+]?\d+)?")


def _norm(line: str) -> str:
    line = line.rstrip()
    return NUMBER.sub("N", line) if line.startswith("time:") else line


def matches(expected: list[str], actual: list[str]) -> bool:
    """Does ``actual`` match the pasted lines, with ``…`` wildcards?"""
    exp = [_norm(x) for x in expected]
    act = [_norm(x) for x in actual]

    def at(i: int, j: int) -> bool:
        if i == len(exp):
            return j == len(act)
        if exp[i] == "…":
            return any(at(i + 1, k) for k in range(j, len(act) + 1))
        if j == len(act):
            return False
        if exp[i].endswith("…"):
            ok = act[j].startswith(exp[i][:-1])
        else:
            ok = act[j] == exp[i]
        return ok and at(i + 1, j + 1)

    return at(0, 0)


def run_step(step: dict, work: Path) -> str | None:
    """Run one step of the page in ``work``: None, "skip: …", or what went wrong."""
    if step["kind"] == "file":
        (work / step["name"]).write_text(step["body"], encoding="utf-8")
        return None
    if any(c.startswith("serq plot") for c in step["commands"]):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return "skip: serq plot needs matplotlib (the plot or test extra)"
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    env["COLUMNS"] = "100"
    out = ""
    for command in step["commands"]:
        # a shell command line (pipes, several commands): its runs are bounded by events, and
        # HANG guards against a pipe that never closes, only
        done = subprocess.run(["bash", "-c", command], check=False, cwd=work, env=bounded(env),
                              capture_output=True, text=True, timeout=HANG)
        if done.returncode != 0:
            return (f"docs/guide.md:{step['line']}: `{command}` exited {done.returncode}\n"
                    f"{done.stdout}\n{done.stderr}")
        out = done.stdout
    if step["expect"] is not None:
        expected = step["expect"].rstrip("\n").split("\n")
        actual = out.rstrip("\n").split("\n")
        if not matches(expected, actual):
            return f"docs/guide.md:{step['line']}: `{step['commands'][-1]}` now prints:\n{out}"
    return None


def sections() -> list[tuple[str, list[dict]]]:
    """The guide's steps by section: (the ``## `` heading, its steps in page order)."""
    heads = [(TEXT.count("\n", 0, m.start()) + 1, m.group(1).strip())
             for m in re.finditer(r"^## (.*)$", TEXT, flags=re.M)]
    out: list[tuple[str, list[dict]]] = []
    for step in STEPS:
        title = next((t for line, t in reversed(heads) if line < step["line"]), "(before any section)")
        if not out or out[-1][0] != title:
            out.append((title, []))
        out[-1][1].append(step)
    return out


SECTIONS = sections()


def test_the_guide_has_commands_and_outputs():
    kinds = [s["kind"] for s in STEPS]
    assert kinds.count("sh") >= 5 and "file" in kinds
    assert sum(1 for s in STEPS if s.get("expect")) >= 5
    assert len(SECTIONS) >= 5


def test_no_section_reads_a_file_another_section_wrote():
    """The sections run apart, each in its own folder: no step names a file (``--out``, ``-o``,
    ``--dump``, ``>``, or a ```` ```csv NAME ```` block) that only an earlier section wrote."""
    written: dict[str, str] = {}
    for title, steps in SECTIONS:
        mine: set[str] = set()
        for step in steps:
            if step["kind"] == "file":
                mine.add(step["name"])
                continue
            for command in step["commands"]:
                words = command.split()
                for name, where in written.items():  # the file, or a file in that folder
                    named = any(w == name or w.startswith(name + "/") for w in words)
                    assert not named or name in mine, (
                        f"docs/guide.md:{step['line']} reads {name}, which section {where!r} wrote")
                for k, w in enumerate(words[:-1]):
                    if w in ("--out", "-o", "--dump", ">"):
                        mine.add(words[k + 1])
        written.update(dict.fromkeys(mine, title))
    assert "knee.csv" in written and "tiny.csv" in written  # the check sees the page's files


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s[0].split(".")[0])
def test_a_section_of_the_guide(section, tmp_path):
    """Every step of a section in order, in one work folder; the steps after a failed one are not run."""
    title, steps = section
    for name in ("programs", "lib", "docs"):
        (tmp_path / name).symlink_to(ROOT / name)
    skipped = []
    for step in steps:
        result = run_step(step, tmp_path)
        if result is not None and result.startswith("skip:"):
            skipped.append(f"docs/guide.md:{step['line']}: {result[5:].strip()}")
            continue
        assert result is None, f"section {title!r}: {result}"
    if len(skipped) == len(steps):
        pytest.skip("; ".join(skipped))
    for why in skipped:
        warnings.warn(why, stacklevel=1)


def test_a_python_block_is_an_example_file_verbatim():
    shown = [m.group(2) for m in FENCE.finditer(TEXT) if m.group(1).strip() == "python"]
    assert shown
    files = [p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "examples").glob("*.py")]
    for code in shown:
        assert any(code in text for text in files), f"not in docs/examples/*.py:\n{code}"


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_guide_links_resolve():
    """Every relative link of the page names a file that exists, and an anchor a heading of it."""
    for target in re.findall(r"\]\(([^)#:]*)(?:#([^)]+))?\)", TEXT):
        path, anchor = target
        file = (GUIDE.parent / path) if path else GUIDE
        assert file.exists(), f"docs/guide.md links to {path}, which does not exist"
        if anchor:
            heads = [_slug(h) for h in re.findall(r"^#+ (.*)$", file.read_text(encoding="utf-8"), flags=re.M)]
            assert anchor in heads, f"docs/guide.md links to {path}#{anchor}: no such heading"


@pytest.mark.parametrize("expected, actual, ok", [
    (["a", "…", "d"], ["a", "b", "c", "d"], True),
    (["a", "…", "d"], ["a", "d"], True),
    (["a", "b…"], ["a", "bcd"], True),
    (["a", "b…"], ["a", "xb"], False),
    (["time: 1.2 s, 3e-05"], ["time: 9.87 s, 4e-06"], True),
    (["a"], ["a", "b"], False),
])
def test_the_comparison(expected, actual, ok):
    assert matches(expected, actual) is ok

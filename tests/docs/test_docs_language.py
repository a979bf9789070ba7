"""docs/language.md stays true: every example checks, every refused example is
refused with the message the page quotes, and every word and built-in the front
end knows is documented there.

Block tags (docs/language.md, "Conventions"):

* ```` ```sq ````: a whole program; ``serq.check`` must accept it;
* ```` ```sq-fragment ````: statements; they become the ``session`` of
  :data:`FRAGMENT_PROGRAM` (the program the page shows in "Conventions");
* ```` ```sq-error ````: a program ``serq.check`` must refuse; the ```` ```error ````
  block right after it holds the message (its first line) and, optionally,
  ``help:`` lines, each of which must be one of the error's helps.

Each example is written to ``example.sq`` in a temporary folder that also holds
``lib`` and ``programs`` (links to the repository's), so ``use "lib/vllm.sq";``
and trace paths read as they would from the repository's root. A failure names
the line of the page where the block starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import serq
from serq import ir
from serq.expr import DISTRIBUTIONS, POOL_PROBES, PURE_FUNCTIONS, STAGE_PROBES
from serq.frontend import grammar, words
from serq.traces import reader as trace_reader

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "language.md"

#: The program a fragment is checked in; docs/language.md shows the same text.
FRAGMENT_PROGRAM = """\
let Z = 3;
pool kv { cap 160000; block 16; evict lru; preempt lifo; }
pool reqs { cap 16; admit via engine; }
stage engine : step { budget 8192; cost 0.01 + 2e-5 * tokens; memory kv; }
stage tool : delay;
stage svc : fifo;
workload {
  arrive poisson(1);
  init { set prompt = 1000; set o = 100; set K = 0; }
}
session {
%s
}
"""


@dataclass(frozen=True)
class Block:
    tag: str
    line: int  # of the opening fence, 1-based
    text: str


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, with their tag and first line."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if m is None:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        out.append(Block(m.group(1), start + 1, "\n".join(body) + "\n"))
        i += 1
    return out


DOC_TEXT = DOC.read_text(encoding="utf-8")
BLOCKS = blocks(DOC_TEXT)
EXAMPLES = [b for b in BLOCKS if b.tag in ("sq", "sq-fragment")]
REFUSED = [(b, BLOCKS[k + 1] if k + 1 < len(BLOCKS) else None) for k, b in enumerate(BLOCKS) if b.tag == "sq-error"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in ("lib", "programs"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    return tmp_path


def write(folder: Path, block: Block) -> Path:
    text = FRAGMENT_PROGRAM % block.text if block.tag == "sq-fragment" else block.text
    path = folder / "example.sq"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_page_has_examples_of_every_kind():
    tags = {b.tag for b in BLOCKS}
    assert {"sq", "sq-fragment", "sq-error", "error"} <= tags
    assert len(EXAMPLES) >= 30 and len(REFUSED) >= 10


def test_the_fragment_program_is_the_one_the_page_shows():
    shown = FRAGMENT_PROGRAM % "  // the fragment goes here"
    assert any(b.tag == "sq" and b.text == shown for b in BLOCKS), \
        "docs/language.md, Conventions: show FRAGMENT_PROGRAM with `  // the fragment goes here` as its session"


def test_every_block_has_a_known_tag():
    unknown = [f"docs/language.md:{b.line}: ```{b.tag}" for b in BLOCKS if b.tag not in ("sq", "sq-fragment", "sq-error", "error", "")]
    assert not unknown, "tag these sq, sq-fragment, sq-error or error, or leave them untagged:\n" + "\n".join(unknown)


@pytest.mark.parametrize("block", EXAMPLES, ids=lambda b: f"line{b.line}")
def test_example_checks(block: Block, folder: Path):
    path = write(folder, block)
    try:
        summary = serq.check(path)
    except serq.SerqError as err:
        pytest.fail(f"docs/language.md:{block.line}: the ```{block.tag} example no longer checks:\n{err.render()}")
    assert summary.startswith("OK: ")


@pytest.mark.parametrize("block", EXAMPLES, ids=lambda b: f"line{b.line}")
def test_example_runs(block: Block, folder: Path):
    """Each example also runs: 50 simulated seconds at most (its own horizon when it
    asks for a number of arrivals, which a shorter run could not reach)."""
    program = serq.load(write(folder, block))
    horizon = program.run.horizon or 50.0
    if program.run.arrivals is None:
        horizon = min(horizon, 50.0)
    try:
        serq.run(program, horizon=horizon, warmup=0)
    except serq.SerqError as err:
        pytest.fail(f"docs/language.md:{block.line}: the ```{block.tag} example checks but does not run:\n{err.render()}")


@pytest.mark.parametrize("pair", REFUSED, ids=lambda p: f"line{p[0].line}")
def test_refused_example_is_refused_with_the_quoted_message(pair, folder: Path):
    block, quoted = pair
    assert quoted is not None and quoted.tag == "error", \
        f"docs/language.md:{block.line}: an ```sq-error block is followed by an ```error block quoting the message"
    lines = [x for x in quoted.text.split("\n") if x.strip()]
    message, helps = lines[0], [x[len("help: "):] for x in lines[1:] if x.startswith("help: ")]
    path = write(folder, block)
    with pytest.raises(serq.SerqError) as caught:
        serq.check(path)
    err = caught.value
    assert err.message == message, (f"docs/language.md:{quoted.line}: the quoted message differs from "
                                    f"serq check's:\n  quoted: {message}\n  actual: {err.message}")
    for h in helps:
        assert h in err.helps, f"docs/language.md:{quoted.line}: help line not given: {h!r}; given: {err.helps}"


# ---------------------------------------------------------------------------
# the inventory: every word the front end knows is documented


def documented_words() -> set[str]:
    """Identifiers that appear in inline code spans of the page's prose (fenced
    blocks excluded: a word used only in an example is not documented)."""
    prose = re.sub(r"^```.*?^```$", "", DOC_TEXT, flags=re.S | re.M)
    out: set[str] = set()
    for span in re.findall(r"(`+)(.+?)\1", prose):
        out.update(re.findall(r"[^\W\d]\w*", span[1]))
    return out


def inventory() -> dict[str, set[str]]:
    """What the front end knows, taken from the code itself."""
    return {
        "grammar keyword": set(grammar.KEYWORDS),
        "language word": set(words.KEYWORDS),
        "retired word": set(words.RETIRED),
        "refused item": set(words.ADVANCED_ITEMS),
        "refused statement": set(words.ADVANCED_STMTS),
        "later-era word": set(words.LATER),
        "function": set(PURE_FUNCTIONS) | set(POOL_PROBES) | set(STAGE_PROBES) | set(words.FUNCTIONS),
        "distribution": set(DISTRIBUTIONS) | set(words.DIST_NAMES),
        "built-in attribute": set(ir.BUILTIN_ATTRIBUTES) | set(ir.TREE_ATTRIBUTES),
        "context variable": set(words.CONTEXT),
        "old context variable": set(words.OLD_CONTEXT),
        "trace column": set(trace_reader.NAMES),
    }


@pytest.mark.parametrize("kind", sorted(inventory()))
def test_every_word_the_front_end_knows_is_in_the_language_page(kind: str):
    missing = sorted(inventory()[kind] - documented_words())
    assert not missing, (f"docs/language.md does not mention these {kind}s in its prose "
                         f"(as `code`): {', '.join(missing)}")


def test_the_moments_are_all_described():
    """Every moment the linker knows has a row in the moments table, under its name."""
    for moment in words.ALL_MOMENTS:
        name = {"Admit": "Admit", "Ps": "Ps"}.get(moment, moment)
        assert f"| *{name}* |" in DOC_TEXT, f"docs/language.md: no row for the moment *{name}*"


def test_inf_and_the_quoted_forms_are_documented():
    doc = documented_words()
    assert "inf" in doc and "args" in doc and "number" in doc


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to ``-``."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {github_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_the_links_of_the_language_page_lead_somewhere():
    prose = re.sub(r"^```.*?^```$", "", DOC_TEXT, flags=re.S | re.M)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        file, _, anchor = target.partition("#")
        path = DOC if not file else DOC.parent / file
        if file and not path.exists():
            broken.append(target)
        elif anchor and anchor not in anchors(path):
            broken.append(target)
    assert not broken, f"docs/language.md links to missing files or headings: {broken}"


def test_a_quoted_check_summary_is_what_serq_check_prints():
    quoted = re.findall(r"`(OK: [^`]+)` for `([^`]+)`", DOC_TEXT)
    assert quoted
    for summary, program in quoted:
        assert serq.check(ROOT / program) == summary, f"docs/language.md: `serq check {program}` prints otherwise"

"""Every fenced example of the pages that have no doc test of their own stays true.

Pages: README.md and docs/{draw,experiments,frontend,plots,policies,simulator,
subagents,workloads,traces,replay,calibration,cluster,
offload,claims}.md (language, report and guide
have their own tests). Each fenced block is classified:

* **program** (an ``sq`` block, or text with ``stage``/``workload``/``session``
  and ``;``): a whole program (it has a ``session`` block and no ``...``/``…``)
  is written to a file and must pass ``serq.check``; a *fragment* (it elides
  with ``...``/``…``, or is a syntax sketch like ``spawn (COUNT) into NAME``) is
  not a program: its case is skipped, with the reason, so that the count of
  blocks really checked shows (``pytest -rs``).  Convention: a page that shows a whole
  program writes it whole; a sketch says so with ``…``.
* **shell** (an ``sh`` block, or lines starting ``serq ``/``$ serq ``): every
  ``serq`` command must parse (the click command is built with ``make_context``
  on its arguments, which parses without running: options known, values of the
  right type) and the program it names must exist and check with its ``--set``
  values.  Synopses (a word in capitals such as ``FORMAT``/``STEPS.csv``, or
  ``[optional]`` brackets) are only parsed as far as they can be: they are
  counted as validated-only.  Commands reading ``../shared/data`` are skipped
  when that directory is absent.  Cheap commands are also *executed* in the
  scenario tests below (CliRunner, in a scratch directory holding links to
  ``programs/`` and ``lib/``), and their pasted output compared; lines of
  ``…``/``...`` in a pasted output match any lines (a block that starts with
  one is an excerpt).  The pasted outputs in these pages have no timing
  figures (runs are deterministic for a seed), so no normalisation is needed
  beyond trailing blanks.  Every ``serq`` command of README, draw, experiments,
  plots, policies and subagents runs, in page order, in one scratch directory
  per page, except those listed in ``NOT_RUN`` with why (sweeps of 24-50 runs,
  Ray, the reader's own modules, ../shared data), and those in ``SHORTENED``
  run with fewer seeds and a shorter horizon.  traces, replay and
  calibration run in their own tests (their commands read files the page
  shows).  A few runs are shortened to 200-300 s where the page's command has
  no horizon of its own; the test says so.
* ``python benchmarks/…`` lines (full studies of minutes) are validated only:
  the script exists and defines each option used.
* **python**: compiled, and every ``serq.X`` / ``from serq.a import b`` name
  must exist; the short self-contained ones run in the scenario tests.
* anything else is output or data, compared where a scenario runs the command.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import serq
import serq.cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md"] + [f"docs/{p}.md" for p in (
    "draw", "experiments", "frontend", "plots", "policies", "simulator",
    "subagents", "workloads", "traces", "replay", "calibration", "cluster", "offload", "claims")]
SHARED = (ROOT / ".." / "shared" / "data").resolve()

def blocks(page: str) -> list[tuple[int, str, str]]:
    text = (ROOT / page).read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"^( *)```(\S*)\n(.*?)^\1```$", text, flags=re.DOTALL | re.MULTILINE):
        indent = len(m.group(1))
        body = "\n".join(line[indent:] for line in m.group(3).split("\n"))
        out.append((text.count("\n", 0, m.start()) + 1, m.group(2), body))
    return out


def kind(tag: str, body: str) -> str:
    if tag == "python":
        return "python"
    if tag == "sq":
        return "program"
    lines = [x.strip() for x in body.strip().split("\n")]
    if tag == "sh" or any(x.startswith(("serq ", "$ serq ", "python ", "pip ")) for x in lines[:1]):
        return "shell"
    if re.search(r"^\s*(stage \w+ *:|workload *\{|session *\{|spawn \()", body, flags=re.MULTILINE):
        return "program"
    return "text"


ALL = [(page, line, tag, body) for page in PAGES for line, tag, body in blocks(page)]


def _id(b) -> str:
    return f"{b[0]}:{b[1]}"


def of(k: str) -> list:
    return [b for b in ALL if kind(b[2], b[3]) == k]


def commands(body: str) -> list[list[str]]:
    """The ``serq`` command lines of a shell block, continuations joined, comments cut."""
    body = body.replace("\\\n", " ")
    out = []
    for line in body.split("\n"):
        line = line.strip()
        line = line.removeprefix("$ ")
        if not line.startswith("serq "):
            continue
        words = shlex.split(line, comments=True)
        for cut in ("|", ">"):
            if cut in words:
                words = words[:words.index(cut)]
        out.append(words[1:])
    return out


def is_synopsis(words: list[str]) -> bool:
    return any(w.startswith("[") or "$" in w or re.fullmatch(r"[A-Z][A-Z_.]*(\.\w+)?", w) or "FILE" in w
               or w in ("STEPS.csv", "OUT.csv") for w in words)


COMMAND = typer.main.get_command(serq.cli.app)


def parse(words: list[str]):
    """The click context of ``serq WORDS`` — parsed, not run."""
    from typer._click import core as cc
    c, name, parent, args = COMMAND, "serq", None, list(words)
    while hasattr(c, "commands"):
        parent = cc.Context(c, info_name=name, parent=parent)
        name = args.pop(0)
        assert name in c.commands, f"no command `{name}`"
        c = c.commands[name]
    return c.make_context(name, args, parent=parent)


SHELL_COMMANDS = [(page, line, words) for page, line, tag, body in of("shell")
                  for words in commands(body)]


def test_the_pages_have_examples():
    assert len(of("shell")) >= 20 and len(of("python")) >= 6 and of("program")


@pytest.mark.parametrize("cmd", SHELL_COMMANDS, ids=lambda c: f"{c[0]}:{c[1]}:{c[2][0]}")
def test_a_command_parses_and_its_program_checks(cmd):
    page, line, words = cmd
    if any("../shared" in w for w in words) and not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent")
    if is_synopsis(words):
        # a synopsis: the command exists, its options are known
        c = COMMAND
        rest = list(words)
        while hasattr(c, "commands"):
            c = c.commands[rest.pop(0)]
        known = {o for p in c.params for o in p.opts + p.secondary_opts}
        for w in rest:
            for opt in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", w):
                assert opt in known, f"{page}:{line}: `serq {' '.join(words)}`: no option {opt}"
        return
    ctx = parse(words)
    f = ctx.params.get("file")
    if f and f.startswith("programs/"):  # other files (p.sq, steps CSVs) are made by the page
        path = ROOT / f
        assert path.is_file(), f"{page}:{line}: no program {f}"
        sets = dict(s.split("=", 1) for s in ctx.params.get("set_") or ())
        if words[0] == "sweep":
            sets = {k: re.split(r"[,:]", v)[0] for k, v in sets.items()}
        serq.load(path, sets=sets)


@pytest.mark.parametrize("block", of("program"), ids=_id)
def test_a_program_block_checks(block, tmp_path):
    page, line, _tag, body = block
    if "..." in body or "…" in body:
        pytest.skip(f"{page}:{line}: a fragment (it elides with `...`/`…`): not a whole program, not checked")
    if not re.search(r"^session *\{", body, flags=re.MULTILINE):
        pytest.skip(f"{page}:{line}: a fragment (no `session` block): not a whole program, not checked")
    # a program reading a trace reads the page's data block that follows it
    m = re.search(r'trace "([^"]+)"', body)
    if m:
        data = next(b for l, _, b in blocks(page) if l > line and kind(_, b) == "text")
        (tmp_path / m.group(1)).write_text(data)
    p = tmp_path / "p.sq"
    p.write_text(body)
    serq.check(p)


def _serq_names(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "serq":
            names.append(f"serq.{node.attr}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("serq"):
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


@pytest.mark.parametrize("block", of("python"), ids=_id)
def test_a_python_block_compiles_and_names_what_exists(block):
    page, line, _tag, body = block
    tree = ast.parse(body, filename=f"{page}:{line}")
    compile(tree, f"{page}:{line}", "exec")
    for name in _serq_names(tree):
        mod, _, attr = name.rpartition(".")
        try:
            obj = importlib.import_module(name)
        except ImportError:
            obj = getattr(importlib.import_module(mod), attr, None)
        assert obj is not None, f"{page}:{line}: {name} does not exist"


# ---- executed scenarios ---------------------------------------------------------------

def _norm(line: str) -> str:
    return line.rstrip()


def matches(expected: list[str], actual: list[str]) -> bool:
    """Does ``actual`` match the pasted lines, with ``…``/``...`` lines as wildcards?"""
    exp = [_norm(x) for x in expected]
    act = [_norm(x) for x in actual]

    def at(i: int, j: int) -> bool:
        if i == len(exp):
            return j == len(act)
        if exp[i].strip() in ("…", "..."):
            return any(at(i + 1, k) for k in range(j, len(act) + 1))
        if j == len(act):
            return False
        return act[j] == exp[i] and at(i + 1, j + 1)

    return at(0, 0)


@pytest.fixture
def work(tmp_path, monkeypatch):
    for d in ("programs", "lib"):
        os.symlink(ROOT / d, tmp_path / d)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def serq_cli(words: list[str]) -> tuple[int, str]:
    r = CliRunner().invoke(serq.cli.app, words)
    return r.exit_code, r.output


def block_at(page: str, pred) -> list[tuple[int, str, str]]:
    return [b for b in blocks(page) if pred(b[1], b[2])]


def run_ok(words: list[str]) -> str:
    code, out = serq_cli(words)
    assert code == 0, f"`serq {' '.join(words)}` exited {code}:\n{out}"
    return out


def test_draw_commands_run(work):
    """docs/draw.md, docs/subagents.md and README: every `serq draw` runs and writes its file."""
    n = 0
    for page, line, words in SHELL_COMMANDS:
        if words[0] != "draw":
            continue
        if ">" in words:
            words = words[:words.index(">")]
        out = run_ok(words)
        if "--out" in words:
            assert (work / words[words.index("--out") + 1]).stat().st_size > 0
        else:
            assert "tikz" in out.lower() or "\\begin" in out
        n += 1
    assert n >= 5


def test_check_commands_run(work):
    for page, line, words in SHELL_COMMANDS:
        if words[0] == "check":
            run_ok(words)


def test_readme_quick_start_run(work):
    """README: the install line's run (horizon 300) and the Python example run."""
    run_ok(["run", "programs/multi-turn/vllm.sq", "--horizon", "300", "--warmup", "30"])
    (py,) = [b for l, t, b in blocks("README.md") if t == "python" and "serq.load" in b]
    exec(compile(py, "README.md", "exec"), {"__name__": "__doc__"})  # noqa: S102 (running the page's example is the point)


def test_policies_python_example_runs():
    """docs/policies.md: the `resolve("lpm")` example runs (at 100 s, not the program's 2000)."""
    (body,) = [b for l, t, b in blocks("docs/policies.md") if t == "python" and "resolve(" in b]
    body = body.replace('"programs/', f'"{ROOT}/programs/').replace("seed=1,", "seed=1, horizon=100, warmup=10,")
    assert "horizon=100" in body
    exec(compile(body, "policies.md", "exec"), {"__name__": "__doc__"})  # noqa: S102 (the page's example)


def test_replay_small_trace(work):
    """docs/replay.md: the six-line program and its four-row trace print what the page shows."""
    bl = blocks("docs/replay.md")
    prog = next(b for l, t, b in bl if "run { horizon 100; }" in b)
    data = next(b for l, t, b in bl if b.startswith("arrival,session"))
    shown = next(b for l, t, b in bl if b.startswith("$ serq run p.sq"))
    (work / "p.sq").write_text(prog)
    (work / "t.csv").write_text(data)
    out = run_ok(["run", "p.sq"])
    assert matches(shown.rstrip("\n").split("\n")[1:], out.rstrip("\n").split("\n")), out


def test_replay_azure_conv(work):
    bl = blocks("docs/replay.md")
    shown = next(b for l, t, b in bl if b.startswith("$ serq run programs/replay/azure_conv.sq\n"))
    out = run_ok(["run", "programs/replay/azure_conv.sq"])
    assert matches(shown.rstrip("\n").split("\n")[1:], out.rstrip("\n").split("\n")), out


def test_traces_imports(work):
    """docs/traces.md: each shown input file, imported as the page says, gives the shown CSV."""
    bl = blocks("docs/traces.md")
    n, last_out = 0, ""
    for i, (line, tag, body) in enumerate(bl):
        if tag != "sh" or "trace import" not in body or i == 0 or i + 1 >= len(bl):
            continue
        if "FORMAT" in body:
            continue
        src_block, out_block = bl[i - 1][2], bl[i + 1][2]
        if not out_block.startswith("session,"):
            out_block = last_out  # "writes the same three rows as above"
        cmds = commands(body)
        src = cmds[0][3]
        (work / src).write_text(src_block)
        said = re.findall(r"^# (wrote .*)$", body, flags=re.MULTILINE)  # a comment showing what the first one says
        for k, words in enumerate(cmds):
            out = run_ok(words)
            if k == 0 and said:
                assert said[0] in out, f"docs/traces.md:{line}: `serq {' '.join(words)}` now says\n{out}"
        dest = cmds[0][cmds[0].index("-o") + 1]
        assert (work / dest).read_text().strip() == out_block.strip(), f"docs/traces.md:{line}"
        n += 1
        last_out = out_block
        if dest == "conv.csv":
            for words in commands(bl[-1][2]):  # the page's closing run on conv.csv
                run_ok(words)
    assert n >= 4


def test_calibration(work):
    """docs/calibration.md: a 300 s run with --steps, the roofline fit and the generic fit print
    the page's tables; `serq roofline` prints its constants."""
    bl = blocks("docs/calibration.md")
    run_ok(commands("\n".join(b for l, t, b in bl if "--steps" in b))[0])
    (head,) = [b for l, t, b in bl if b.startswith("time,duration,")]
    steps = (work / "out" / "engine.steps.csv").read_text().split("\n")
    assert steps[:3] == head.rstrip("\n").split("\n"), f"calibration.md: the steps file now starts\n{steps[:3]}"
    for words in [w for p, l, w in SHELL_COMMANDS if p == "docs/calibration.md" and w[0] == "roofline"]:
        run_ok(words)
    for l, t, b in bl:
        if b.startswith("$ serq "):
            cmd, *shown = b.rstrip("\n").split("\n")
            out = run_ok(shlex.split(cmd)[2:])
            if "roofline --model" in cmd or shown[0].strip() in ("…", "..."):
                shown.append("…")  # an excerpt; the roofline's sources, printed last, are left out
            assert matches(shown, out.rstrip("\n").split("\n")), f"calibration.md:{l}: now prints\n{out}"


# ---- every cheap command of a page, run in order ---------------------------------------

# Commands validated only (parsed, program checked) and not run here, by a substring, and why.
NOT_RUN = {
    "--policy engine=fcfs,sjf,lpm,fair": "24 runs of 600 s: ~9 s on 2 cores",
    "--set max_seqs=8,16": "50 runs of 600 s: ~16 s; test_plot_refuses_a_hidden_axis runs a small one",
    "--hue max_seqs": "plots the 50-run sweep above",
    "plot lambda.jsonl --x Lambda --y client.ttft.p99 --out ttft.png": "the error example: test_plot_refuses_a_hidden_axis",
    "--backend ray": "starts a Ray cluster; tests/experiments/test_sweep_ray.py covers the backend",
    "engine=mypkg.sched:MyPolicy": "a placeholder module the reader writes",
    "engine=mysched:LongestPromptFirst": "runs in test_policies_subclass_runs, shortened",
    "../shared/data": "the real Azure traces: converted and replayed in benchmarks/study_replay.py",
    "programs/cluster/vidur.sq --trace": "the real Azure trace, converted from ../shared/data: "
                                          "tests/cluster/test_vidur_cluster.py runs both loads",
    "--find-min N": "a search over 4-12 replicas x 3 seeds of 300 s: minutes; tests/experiments/test_sweep_find_min.py",
}
# Commands run with smaller flags than the page's, by a substring: {flag: value} and why. The
# page's figures are drawn from the full run; the test checks that the command and the plot
# that reads its file run.
SHORTENED = {
    "--policy engine=fcfs,sjf,lpm --seeds 1-5 --horizon 600": (
        {"--seeds": "1-2", "--horizon": "120", "--warmup": "12"},
        "45 runs of 600 s: ~35 s; 18 runs of 120 s make the same rows for the --baseline plot"),
    "--set Lambda=0.6 --horizon 2000 --warmup 200 --dump out": (
        {"--horizon": "400", "--warmup": "40"}, "the --cdf plot reads the same files, shorter"),
    "--set Lambda=0.8 --horizon 600 --warmup 60 --timeline tl": (
        {"--horizon": "200", "--warmup": "20"}, "the --timeline plot reads the same file, shorter"),
}
EXEC_PAGES = ["README.md", "docs/draw.md", "docs/experiments.md", "docs/plots.md",
              "docs/policies.md", "docs/subagents.md", "docs/cluster.md"]
MADE_BY_SCENARIO = ("docs/traces.md", "docs/replay.md", "docs/calibration.md")  # tests above


def _reads_missing_file(words: list[str], work: Path) -> bool:
    outs = {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", "--out", "--dump")}
    return any(re.search(r"\.(csv|jsonl|sq)$", w) and not w.startswith("-") and w not in outs
               and not (work / w).exists() for w in words)


def shortened(words: list[str]) -> list[str]:
    """``words`` with the SHORTENED flags of its command, if it has some."""
    text = " ".join(words)
    for key, (flags, _why) in SHORTENED.items():
        if key in text:
            words = list(words)
            for flag, value in flags.items():
                words[words.index(flag) + 1] = value
    return words


def run_page(page: str, work: Path) -> dict[str, str]:
    """Run the page's cheap commands in order; the output of each, by its command line."""
    outs = {}
    for p, line, words in SHELL_COMMANDS:
        text = " ".join(words)
        if p != page or is_synopsis(words) or any(k in text for k in NOT_RUN):
            continue
        assert not _reads_missing_file(words, work), f"{page}:{line}: `serq {text}` reads a file no step made"
        outs[text] = run_ok(shortened(words))
    return outs


@pytest.mark.parametrize("page", EXEC_PAGES)
def test_the_page_commands_run(page, work):
    outs = run_page(page, work)
    bl = blocks(page)
    if page == "docs/experiments.md":
        (summary,) = [b for l, t, b in bl if b.lstrip().startswith("Lambda    runs")]
        out = next(o for c, o in outs.items() if "--out lambda.csv" in c and "--resume" not in c)
        head = [x.rstrip(" …") for x in summary.rstrip("\n").split("\n")]
        got = out.split("\n")
        for k, x in enumerate(head):  # a left part of each of the first lines
            assert got[k].startswith(x), f"experiments.md: the sweep's summary now starts\n{out[:600]}"
        (found,) = [b for l, t, b in bl if b.startswith("Lambda = 0.9")]
        out = next(o for c, o in outs.items() if "--find-max" in c)
        assert out.strip() == found.strip(), f"experiments.md: --find-max now prints\n{out}"
        (compared,) = [b for l, t, b in bl if b.startswith("A = programs/pd/colocated.sq")]
        out = next(o for c, o in outs.items() if c.startswith("compare "))
        # the page shows standard output; the runner mixes in stderr's `warning:` lines (not settled)
        out = "\n".join(x for x in out.split("\n") if not x.startswith("warning:"))
        assert out.strip() == compared.strip(), f"experiments.md: serq compare now prints\n{out}"
    if page == "docs/subagents.md":
        (table,) = [b for l, t, b in bl if b.startswith("task      count")]
        out = run_ok(["run", "programs/subagent/vllm_spawn.sq"])
        n = len(table.rstrip("\n").split("\n"))
        lines = out.split("\n")
        assert any(lines[k:k + n] == table.rstrip("\n").split("\n") for k in range(len(lines))), out
    if page == "README.md":
        out = next(o for c, o in outs.items() if "--json" in c)
        import json
        assert isinstance(json.loads(out)["client"]["ttft"]["mean"], float)  # | jq .client.ttft.mean
    assert outs


def test_each_shortened_command_is_on_a_page_with_the_flags_it_changes():
    for key, (flags, _why) in SHORTENED.items():
        (words,) = [w for p, l, w in SHELL_COMMANDS if p in EXEC_PAGES and key in " ".join(w)]
        assert set(flags) <= set(words), (key, flags)


def test_plot_refuses_a_hidden_axis(work):
    """docs/plots.md: the error for an axis neither --x nor --hue (on a small sweep)."""
    (shown,) = [b for l, t, b in blocks("docs/plots.md") if b.startswith("$ serq plot")]
    cmd, err = shown.rstrip("\n").split("\n")
    run_ok(["sweep", "programs/multi-turn/vllm.sq", "--set", "Lambda=0.3", "--set", "max_seqs=8,16",
            "--seeds", "1", "--horizon", "50", "--warmup", "5", "--out", "lambda.jsonl"])
    code, out = serq_cli(shlex.split(cmd)[2:])
    assert code != 0 and err in out, out


def test_policies_subclass_runs(work, monkeypatch):
    """docs/policies.md: the subclass, saved as mysched.py, runs with --policy (at 200 s)."""
    bl = blocks("docs/policies.md")
    (cls,) = [b for l, t, b in bl if "class LongestPromptFirst" in b]
    (work / "mysched.py").write_text(cls)
    monkeypatch.syspath_prepend(str(work))
    (cmd,) = [w for l, t, b in bl for w in commands(b) if "engine=mysched:LongestPromptFirst" in w]
    run_ok(cmd + ["--horizon", "200", "--warmup", "20"])


def test_readme_subclasses_run():
    """README: ShortestFirst and LongestPrefixFirst override methods the engine calls (200 s runs)."""
    (body,) = [b for l, t, b in blocks("README.md") if "class ShortestFirst" in b]
    from serq.sim.stages import StepEngine
    program = serq.load(ROOT / "programs/multi-turn/vllm.sq", sets={"Lambda": "0.6"})
    ns = {"serq": serq, "program": program}
    exec(compile(body.replace("engines={", "horizon=200, warmup=20, engines={"), "README.md", "exec"), ns)  # noqa: S102 (running the page's example is the point)
    for name in ("ShortestFirst", "LongestPrefixFirst"):
        for meth in vars(ns[name]):
            if not meth.startswith("__"):
                assert hasattr(StepEngine, meth), f"README: StepEngine has no method {meth}"
        serq.run(program, seed=1, horizon=200, warmup=20, engines={"engine": ns[name]})


def test_experiments_python_runs(work):
    """docs/experiments.md: the API example runs, its last line `df = result.to_frame()` too
    when pandas is installed (the `pandas` extra), giving one frame row per run.  Without
    pandas the rest of the example runs and the test is skipped, saying which line was not."""
    (body,) = [b for l, t, b in blocks("docs/experiments.md") if t == "python" and "serq.sweep(" in b]
    line = "df = result.to_frame()"
    assert body.count(line) == 1, "docs/experiments.md: the example's to_frame line moved: update this test"
    ns = {"__name__": "__doc__"}
    if importlib.util.find_spec("pandas") is None:
        exec(compile(body.replace(line, "pass"), "experiments.md", "exec"), ns)  # noqa: S102 (running the page's example is the point)
        pytest.skip(f"pandas is not installed (pip install 'serq[pandas]'): docs/experiments.md's `{line}` was not run")
    exec(compile(body, "experiments.md", "exec"), ns)  # noqa: S102 (running the page's example is the point)
    result, df = ns["result"], ns["df"]
    assert len(result.rows) == 8  # 2 Lambda values x 4 seeds
    assert len(df) == len(result.rows) and list(df.columns) == result.columns()


def test_experiments_compare_python_runs(work):
    """docs/experiments.md: `serq.compare` from Python gives the table `serq compare` prints there."""
    (body,) = [b for l, t, b in blocks("docs/experiments.md") if t == "python" and "serq.compare(" in b]
    (table,) = [b for l, t, b in blocks("docs/experiments.md") if b.startswith("A = programs/pd/colocated.sq")]
    ns = {"__name__": "__doc__", "print": lambda *a: None}
    exec(compile(body, "experiments.md", "exec"), ns)  # noqa: S102 (running the page's example is the point)
    assert ns["c"].text() == table.rstrip("\n")
    d = ns["c"].diffs["client.ttft.mean"]
    assert (round(d.mean, 5), round(d.half, 6), d.n) == (-0.01579, 0.002243, 4)  # as the page's comment says


def test_workloads_python_runs():
    """docs/workloads.md: the samples it reads exist with the fields it uses (200 s runs)."""
    (body,) = [b for l, t, b in blocks("docs/workloads.md") if t == "python"]
    body = body.replace("serq.run(prog, seed=seed)", "serq.run(prog, seed=seed, horizon=200, warmup=20)")
    body = body.replace('f"programs/', f'f"{ROOT}/programs/').replace("...  #", "kind, s.value, s.turn  #")
    exec(compile(body, "workloads.md", "exec"), {"__name__": "__doc__"})  # noqa: S102 (running the page's example is the point)


def test_replay_errors(work):
    """docs/replay.md: the two errors it pastes (the source excerpt under the first is left out)."""
    bl = blocks("docs/replay.md")
    prog = next(b for l, t, b in bl if "run { horizon 100; }" in b)
    no_trace, no_arrival = [b for l, t, b in bl if "replays a trace's arrival times" in b or "has no `arrival`" in b]
    (work / "p.sq").write_text(prog.replace('let rate = 1;\n', '').replace(
        'workload { arrive trace(rate); trace "t.csv"; }', "workload { arrive trace; }"))
    code, out = serq_cli(["check", "p.sq"])
    got = [x for x in out.split("\n") if x and not re.match(r"\s*(\d+\s*)?\|", x)]
    assert code == 1 and got == no_trace.rstrip("\n").split("\n"), out
    (work / "p.sq").write_text(prog)
    (work / "t.csv").write_text("7,1,1,1,1.25\n")
    code, out = serq_cli(["run", "p.sq"])
    assert code == 1 and out.rstrip("\n") == no_arrival.rstrip("\n"), out


def test_benchmark_commands_name_known_options():
    """`python benchmarks/X.py --opt …` lines (full studies, validated only): the script exists
    and defines each option."""
    n = 0
    for page, line, tag, body in of("shell"):
        for cmd in re.findall(r"^\s*python (benchmarks/\S+\.py)([^#\n]*)", body, flags=re.MULTILINE):
            script = ROOT / cmd[0]
            assert script.is_file(), f"{page}:{line}: no {cmd[0]}"
            src = script.read_text()
            for opt in re.findall(r"(--[a-z][\w-]*)", cmd[1]):
                assert f'"{opt}"' in src, f"{page}:{line}: {cmd[0]} has no option {opt}"
            n += 1
    assert n >= 3


def test_calibration_log_script():
    """docs/calibration.md: the vLLM log converter writes the columns `serq fit` is told to use."""
    import contextlib
    import io
    import sys
    (body,) = [b for l, t, b in blocks("docs/calibration.md") if t == "python"]
    log = ("x Iteration(1): 1 context requests, 100 context tokens, 2 generation requests, "
           "2 generation tokens, iteration elapsed time: 12.5 ms\n")
    old, sys.stdin = sys.stdin, io.StringIO(log)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(body, "calibration.md", "exec"), {"__name__": "__doc__"})  # noqa: S102 (running the page's example is the point)
    finally:
        sys.stdin = old
    assert out.getvalue() == "time,duration,tokens,decoders,prefilled\n0.000000,0.0125,102,2,100\n"


# The page's error examples do not show their files: these are files that give them.
BAD_TRACES = {
    "d.csv": "0,1,1,1,1\n0,2,1,1,x\n",
    "e.csv": "0,1,1,1\n",
    "f.csv": "session,new,out,arrival\n0,1,1,0\n0,1,1\n",
    "a.csv": "session,turn,new,out,think,arival\n0,1,1,1,1,0\n",
    "b.csv": "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,374,44\n",
    "c.csv": "session,new,out,arrival\n0,1,1,-1\n",
}


def test_traces_errors(work):
    """docs/traces.md: each pasted trace error is what `serq run … --trace FILE` prints, exit 1."""
    (shown,) = [b for l, t, b in blocks("docs/traces.md") if b.startswith("d.csv:2:")]
    for para in shown.strip().split("\n\n"):
        name = para.split(":", 1)[0]
        (work / name).write_text(BAD_TRACES[name])
        code, out = serq_cli(["run", "programs/replay/azure_conv.sq", "--trace", name])
        assert code == 1 and out.strip() == para.strip(), f"docs/traces.md: {name} now gives\n{out}"


def test_subagents_hold_and_wait_error(work):
    """docs/subagents.md: the hold-and-wait error (FILE is the program, `…` elides the help's end)."""
    (shown,) = [b for l, t, b in blocks("docs/subagents.md") if "hold-and-wait" in b and b.startswith("FILE")]
    first, help_ = shown.rstrip("\n").split("\n")
    (work / "h.sq").write_text("pool slots { cap 2; }\nstage d : delay;\nsession {\n  spawn (1) into kids {}\n"
                               "  hold slots (1) {\n    join kids;\n  }\n}\n")
    code, out = serq_cli(["check", "h.sq"])
    lines = out.split("\n")
    assert code == 1 and lines[0] == first.replace("FILE", "h.sq"), out
    assert any(x.startswith(help_.rstrip("…")) for x in lines), out


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} (the real Azure traces) is absent")
def test_replay_real_traces(work):
    """docs/replay.md: the two imports of the real Azure traces run and write the request counts
    the page gives; a replay cut at 120 s writes the page's note (the full replays are ~5 s each
    and only validated)."""
    (work / "shared").symlink_to(SHARED)
    text = (ROOT / "docs/replay.md").read_text(encoding="utf-8")
    for words in [w for p, l, w in SHELL_COMMANDS if p == "docs/replay.md" and w[:2] == ["trace", "import"]]:
        words = [x.replace("../shared/data", "shared") for x in words]
        out = run_ok(words)
        m = re.search(r"wrote (\d+) requests", out)
        assert m, out
        n = int(m.group(1))
        assert f"{n // 1000} {n % 1000:03d} requests" in text, f"docs/replay.md: {words[2]} has {n} requests"
    code, out = serq_cli(["run", "programs/replay/azure_conv.sq", "--trace", "conv.csv", "--horizon", "120"])
    note = next(x for x in out.split("\n") if x.startswith("note: the horizon 120"))
    assert code == 0 and note in " ".join(text.split()), note


def test_experiments_interrupted_line():
    """docs/experiments.md: the Ctrl-C line is the one `serq sweep` prints, for the page's sweep
    (16 runs: 4 Lambdas x 4 seeds); the interruption itself is tested in tests/test_sweep*.py."""
    from serq.experiments.command import _interrupted
    from serq.experiments.sweep import SweepInterrupted
    (shown,) = [b for l, t, b in blocks("docs/experiments.md") if b.startswith("interrupted:")]
    m = re.fullmatch(r"interrupted: (\d+) of (\d+) runs kept in (\S+);.*\n", shown)
    assert m and int(m.group(2)) == 16, shown
    assert _interrupted(SweepInterrupted(int(m.group(1)), 16, m.group(3))) == shown.strip()

"""`serq draw`: the deployment figure as SVG and TikZ (issue 5).

The figure is checked as data: the SVG parses, names every pool and stage,
has one enclosure per hold, labels branches with their probabilities; the
TikZ is a whole standalone document with its labels escaped.  A golden SVG
pins the layout of `programs/multi-turn/vllm.sq`; regenerate it with
``SERQ_REGEN_GOLDEN=1 pytest tests/draw/test_draw.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from serq import ir
from serq.draw import figure, render
from serq.draw.tikz import latex_escape
from serq.ir import Attr, Binary, Call, Ctx, Draw, Num, PoolRef, Probe, StageRef

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "vllm.svg"
SVG = "{http://www.w3.org/2000/svg}"
BUNDLED = [
    "programs/multi-turn/vllm.sq",
    "programs/multi-turn/vllm_chat.sq",
    "programs/single-turn/vllm_single_turn.sq",
    "programs/subagent/vllm_subagents.sq",
    "programs/subagent/vllm_spawn.sq",
    "programs/single-turn/mg1.sq",
    "programs/single-turn/ps.sq",
    "programs/multi-turn/closed.sq",
]


# ---------------------------------------------------------------------------
# a program built by hand: the shape of vllm.sq, with names that need escaping


def agent_program(p: float = 0.9, tool: str = "tool") -> ir.Program:
    """vllm.sq's structure: pools `kv` (block 16, lru, preempt lifo) and `reqs`
    (admit via engine); a step `engine` and a delay stage; a session that takes
    a turn, then loops over one request (a hold on reqs and kv around prefill
    and decode, cached) and a branch on `more = ~bernoulli(p)`."""
    names = ir.BUILTIN_ATTRIBUTES + ("K", "n", "o", "more", "t0", "prompt", "known", "c")
    a = {n: Attr(i, n) for i, n in enumerate(names)}
    kv, reqs, engine = PoolRef(0), PoolRef(1), StageRef(0)
    cost = Call("max", (Binary("*", Ctx("tokens"), Num(2e-5)), Num(2e-4)))
    hold = ir.Hold(
        id=0,
        pools=(ir.HoldPool(reqs, Num(1.0)),
               ir.HoldPool(kv, Call("min", (a["known"], Probe("budget_left", engine))))),
        body=(
            ir.Set(a["known"].slot, a["prompt"]),
            ir.Set(a["c"].slot, Call("min", (a["cached"], a["known"]))),
            ir.Observe(0, Binary(">", a["c"], Num(0))),
            ir.Run(engine, Binary("-", a["known"], a["c"]), "prefill", kv),
            ir.Branch(Binary("==", a["known"], a["prompt"]), (ir.Observe(1, Ctx("now")),)),
            ir.Run(engine, Binary("-", a["o"], Num(1)), "decode", kv),
        ),
        cache=Binary("+", a["prompt"], a["o"]),
    )
    server = (ir.ServerBegin(), ir.Set(a["t0"].slot, Ctx("now")),
              ir.Set(a["prompt"].slot, Binary("+", a["K"], a["n"])), hold, ir.ServerEnd())
    session = (
        ir.Turn(),
        ir.Loop(server + (
            ir.Set(a["K"].slot, Binary("+", a["prompt"], a["o"])),
            ir.Branch(a["more"], (ir.Run(StageRef(1), Draw("exp", (Num(3.0),))), ir.Turn()), (ir.End(),)),
        )),
    )
    turn = (ir.Set(a["o"].slot, Binary("+", Draw("exp", (Num(200.0),)), Num(1.0))),
            ir.Set(a["more"].slot, Draw("bernoulli", (Num(p),))))
    return ir.Program(
        pools=(ir.PoolDecl("kv", cap=160000.0, block=16.0, preempt="lifo"),
               ir.PoolDecl("reqs", cap=16.0, admit_via=0)),
        stages=(ir.StageDecl("engine", "step", step=ir.StepDecl(cost=cost, budget=Num(8192.0), memory=0)),
                ir.StageDecl(tool, "delay")),
        attributes=names,
        observes=(ir.ObserveDecl("hit", True), ir.ObserveDecl("ttft")),
        session=session,
        turn=turn,
        arrival=ir.Arrival("poisson", rate=0.3),
        two_sided=True,
        path="/somewhere/agent.sq",
    )


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg.encode("utf-8"))


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def of_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(f"{SVG}{tag}") if e.get("class") == cls]


def holds_in(program: ir.Program) -> int:
    return sum(isinstance(s, ir.Hold) for s in ir.walk_blocks(program.session))


# ---------------------------------------------------------------------------
# the figure, from a hand-built program


def test_the_svg_parses_and_names_every_pool_and_stage() -> None:
    root = parse(render(agent_program(), "svg"))
    assert root.tag == f"{SVG}svg"
    words = " ".join(texts(root))
    for name in ("kv", "reqs", "engine", "tool"):
        assert re.search(rf"\b{name}\b", words), name


def test_each_hold_gets_one_enclosure_labelled_with_its_pools() -> None:
    root = parse(render(agent_program(), "svg"))
    assert len(of_class(root, "rect", "hold")) == 1
    assert [t.text for t in of_class(root, "text", "hold-label")] == ["hold reqs, kv · cache kv"]


def test_the_spliced_server_is_drawn_around_the_hold() -> None:
    scene = figure(agent_program())
    server = next(s for s in scene.shapes if getattr(s, "role", "") == "server")
    hold = next(s for s in scene.shapes if getattr(s, "role", "") == "hold")
    assert server.x < hold.x and hold.x + hold.w < server.x + server.w
    assert server.y < hold.y and hold.y + hold.h < server.y + server.h


def test_the_runs_inside_a_hold_are_inside_its_enclosure_and_the_tool_is_not() -> None:
    scene = figure(agent_program())
    hold = next(s for s in scene.shapes if getattr(s, "role", "") == "hold")
    runs = [s for s in scene.shapes if getattr(s, "role", "") == "run"]
    inside = [r for r in runs if hold.x < r.x and r.x + r.w < hold.x + hold.w]
    assert len(runs) == 3 and len(inside) == 2  # prefill and decode held; the tool call released


def test_a_branch_on_a_constant_bernoulli_attribute_shows_both_probabilities() -> None:
    root = parse(render(agent_program(p=0.9), "svg"))
    assert [t.text for t in of_class(root, "text", "arm-label")] == ["0.9", "0.1"]
    assert [t.text for t in of_class(root, "text", "branch-label")] == ["more"]


def test_a_branch_with_nothing_to_draw_in_either_arm_is_left_out() -> None:
    # `branch (known == prompt) { observe ttft … }` inside the hold only records
    root = parse(render(agent_program(), "svg"))
    assert len(list(of_class(root, "polygon", "branch"))) == 1


def test_only_the_pool_a_growing_run_advances_is_marked_as_caching() -> None:
    root = parse(render(agent_program(), "svg"))
    assert len(of_class(root, "rect", "cache-badge")) == 1
    pools = [t.text for t in of_class(root, "text", "pool-label")]
    assert pools == ["pool kv", "pool reqs"]


def test_the_loop_has_a_back_edge_and_the_session_an_end() -> None:
    root = parse(render(agent_program(), "svg"))
    assert len(of_class(root, "polyline", "back-edge")) == 1
    assert [t.text for t in of_class(root, "text", "end-label")] == ["end"]
    assert "arrive poisson(0.3)" in texts(root)


def test_a_session_that_falls_off_its_block_ends() -> None:
    program = ir.Program(pools=(), stages=(ir.StageDecl("svc", "fifo"),), attributes=ir.BUILTIN_ATTRIBUTES,
                         observes=(), session=(ir.Run(StageRef(0), Num(1.0)),), arrival=ir.Arrival("closed", n=8))
    words = texts(parse(render(program, "svg")))
    assert "arrive closed(8)" in words and "end" in words and "svc" in words


def test_render_is_deterministic() -> None:
    for fmt in ("svg", "tikz"):
        assert render(agent_program(), fmt) == render(agent_program(), fmt)


def text_box(s) -> tuple[float, float, float, float]:
    w = len(s.text) * s.size * 0.61
    x0 = {"start": s.x, "middle": s.x - w / 2, "end": s.x - w}[s.anchor]
    return (x0, s.y - s.size * 0.8, x0 + w, s.y + s.size * 0.25)


def shape_box(s) -> tuple[float, float, float, float]:
    if hasattr(s, "text"):
        return text_box(s)
    if hasattr(s, "w"):
        return (s.x, s.y, s.x + s.w, s.y + s.h)
    if hasattr(s, "r"):
        return (s.cx - s.r, s.cy - s.r, s.cx + s.r, s.cy + s.r)
    xs, ys = [p[0] for p in s.points], [p[1] for p in s.points]
    return (min(xs), min(ys), max(xs), max(ys))


def apart(a, b) -> bool:
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


NODES = ("run", "turn", "end", "arrive", "cmd", "branch", "pool", "stage")


def assert_readable(scene) -> None:
    """No two labels overlap, no two nodes overlap, everything is on the canvas."""
    labels = [s for s in scene.shapes if hasattr(s, "text")]
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            assert apart(text_box(a), text_box(b)), (a.text, b.text)
    nodes = [s for s in scene.shapes if getattr(s, "role", "") in NODES]
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            assert apart(shape_box(a), shape_box(b)), (a, b)
    for s in scene.shapes:
        x0, y0, x1, y1 = shape_box(s)
        assert 0 <= x0 and x1 <= scene.width and 0 <= y0 and y1 <= scene.height, s


def test_the_figure_is_readable() -> None:
    assert_readable(figure(agent_program()))


# ---------------------------------------------------------------------------
# tiny programs


def draw_text(text: str) -> tuple[ET.Element, str]:
    import serq

    program = serq.load(text)
    assert_readable(figure(program))
    return parse(render(program, "svg")), render(program, "tikz")


def test_an_arm_that_ends_turns_off_the_spine_and_the_other_goes_on() -> None:
    root, _ = draw_text("stage svc : fifo;\nsession { loop { branch with (0.2) { end; } run svc (1); } }\n")
    assert [t.text for t in of_class(root, "text", "arm-label")] == ["0.8", "0.2"]
    end = of_class(root, "rect", "end")[0]
    svc = of_class(root, "rect", "run")[0]
    assert float(end.get("y")) > float(svc.get("y")) + float(svc.get("height")) / 2  # below the spine


def test_a_guard_with_comparisons_is_escaped_in_both_formats() -> None:
    root, tikz = draw_text(
        "stage svc : fifo;\n"
        "session { set x_y = ~uniform(0, 2); branch (x_y < 1 && turn_no >= 0) { run svc (x_y); } }\n"
    )
    assert [t.text for t in of_class(root, "text", "branch-label")] == ["x_y < 1 && turn_no >= 0"]
    assert [t.text for t in of_class(root, "text", "arm-label")] == ["yes", "no"]
    assert r"{x\_y \textless{} 1 \&\& turn\_no \textgreater{}= 0}" in tikz
    assert r"{x\_y = \textasciitilde{}uniform(0, 2)}" in tikz


def test_arrays_show_the_member_a_statement_picks() -> None:
    root, _ = draw_text(
        "pool kv[2] { cap 100; }\nstage engine[2] : step { cost 1; memory kv; }\n"
        "session { choose r in 2 by (used(kv[r])); "
        "hold kv[r] (10) { run engine[r] prefill (10) growing kv[r]; } }\n"
    )
    words = texts(root)
    assert {"pool kv[2]", "stage engine[2] : step", "choose r in 2", "engine[r]"} <= set(words)
    assert [t.text for t in of_class(root, "text", "hold-label")] == ["hold kv[r]"]


def test_nested_holds_nest_their_enclosures_and_a_hold_without_cache_marks_no_pool() -> None:
    root, _ = draw_text(
        "pool p { cap 1; }\npool q { cap 5; }\nstage s : fifo;\n"
        "session { hold p (1) { hold q (2) { run s (1); } run s (2); } }\n"
    )
    outer, inner = (tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
                    for r in of_class(root, "rect", "hold"))
    assert outer[0] < inner[0] and inner[0] + inner[2] < outer[0] + outer[2]
    assert outer[1] < inner[1] and inner[1] + inner[3] < outer[1] + outer[3]
    assert [t.text for t in of_class(root, "text", "hold-label")] == ["hold p", "hold q"]
    assert of_class(root, "rect", "cache-badge") == []


# ---------------------------------------------------------------------------
# TikZ


def test_tikz_is_a_standalone_document() -> None:
    text = render(agent_program(), "tikz")
    lines = text.splitlines()
    assert lines[0] == r"\documentclass[tikz,border=4pt]{standalone}"
    assert lines[-1] == r"\end{document}"
    assert text.count(r"\begin{document}") == 1
    assert text.count(r"\begin{tikzpicture}") == text.count(r"\end{tikzpicture}") == 1
    body = re.sub(r"\\[{}]", "", text)
    assert body.count("{") == body.count("}")
    for line in lines[lines.index(r"\begin{document}") + 2:-2]:
        assert line.startswith((r"\path[", r"\node[")) and line.endswith(";"), line


def test_tikz_defines_every_colour_it_uses() -> None:
    text = render(agent_program(), "tikz")
    defined = set(re.findall(r"\\definecolor\{(\w+)\}", text))
    used = set(re.findall(r"(?:draw|fill|text)=(\w+)", text))
    assert used <= defined


def test_latex_special_characters_in_labels_are_escaped() -> None:
    assert latex_escape("a_b #1 50% x&y {z} $ ~exp ^ \\") == (
        r"a\_b \#1 50\% x\&y \{z\} \$ \textasciitilde{}exp \textasciicircum{} \textbackslash{}"
    )
    assert latex_escape("hold reqs · cache …") == r"hold reqs \textperiodcentered{} cache \dots{}"
    assert latex_escape("λ") == "?"


def test_names_with_underscores_reach_tikz_escaped() -> None:
    text = render(agent_program(tool="tool_call#2"), "tikz")
    assert r"{stage tool\_call\#2 : delay}" in text
    assert "tool_call" not in text


def test_an_unknown_format_is_a_usage_error() -> None:
    from serq.errors import UsageError

    with pytest.raises(UsageError):
        render(agent_program(), "png")


# ---------------------------------------------------------------------------
# the bundled programs


def load(rel: str) -> ir.Program:
    import serq

    return serq.load(ROOT / rel)


@pytest.mark.parametrize("rel", BUNDLED)
def test_every_bundled_program_draws_in_both_formats(rel: str) -> None:
    program = load(rel)
    root = parse(render(program, "svg"))
    words = " ".join(texts(root))
    for decl in (*program.pools, *program.stages):
        assert re.search(rf"\b{re.escape(decl.name)}\b", words), decl.name
    assert len(of_class(root, "rect", "hold")) == holds_in(program)
    tikz = render(program, "tikz")
    assert tikz.startswith(r"\documentclass[tikz") and tikz.endswith("\\end{document}\n")
    assert_readable(figure(program))


def test_vllm_holds_reqs_and_kv_across_the_engine_and_releases_them_before_the_tool() -> None:
    scene = figure(load("programs/multi-turn/vllm.sq"))
    hold = next(s for s in scene.shapes if getattr(s, "role", "") == "hold")
    label = next(s for s in scene.shapes if getattr(s, "role", "") == "hold-label")
    assert label.text == "hold reqs, kv · cache kv"
    runs = {}
    for s in scene.shapes:
        if getattr(s, "role", "") == "run-label" and s.bold:
            runs.setdefault(s.text, []).append(hold.x < s.x < hold.x + hold.w)
    assert runs == {"engine": [True, True], "tool": [False]}


def test_vllm_branches_with_the_probability_of_more() -> None:
    root = parse(render(load("programs/multi-turn/vllm.sq"), "svg"))
    assert [t.text for t in of_class(root, "text", "arm-label")] == ["0.9", "0.1"]


def test_the_subagent_program_draws_its_nested_branches() -> None:
    root = parse(render(load("programs/subagent/vllm_subagents.sq"), "svg"))
    assert [t.text for t in of_class(root, "text", "branch-label")] == ["more", "fan"]
    arms = [t.text for t in of_class(root, "text", "arm-label")]
    # drawn outer arm first, then what it holds: the inner branch's arms come before the outer `1 - p`
    assert arms == ["p = sub ? 0.7 : 0.9", "p = sub ? 0 : 0.3", "1 - p", "1 - p"]


def test_a_probability_that_a_set_makes_constant_is_shown_as_a_number() -> None:
    import serq

    program = serq.load(ROOT / "programs/subagent/vllm_subagents.sq", sets={"q": "0"})
    root = parse(render(program, "svg"))
    # fan = sub ? 0 : ~bernoulli(q) is 0 either way once q = 0
    assert [t.text for t in of_class(root, "text", "arm-label")][1:3] == ["0", "1"]


def test_the_golden_svg_of_vllm() -> None:
    svg = render(load("programs/multi-turn/vllm.sq"), "svg")
    if os.environ.get("SERQ_REGEN_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(svg, encoding="utf-8", newline="\n")
    assert svg == GOLDEN.read_text(encoding="utf-8"), (
        "the figure changed; look at it, then regenerate with SERQ_REGEN_GOLDEN=1 pytest tests/draw/test_draw.py"
    )


# ---------------------------------------------------------------------------
# the command


VLLM = str(ROOT / "programs" / "multi-turn" / "vllm.sq")


def serq_draw(*args: str):
    from typer.testing import CliRunner

    from serq.cli import app

    return CliRunner().invoke(app, ["draw", *args], catch_exceptions=False)


def test_draw_writes_svg_to_out_atomically(tmp_path: Path) -> None:
    out = tmp_path / "my.svg"
    result = serq_draw(VLLM, "--format", "svg", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert out.read_text(encoding="utf-8") == render(load("programs/multi-turn/vllm.sq"), "svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my.svg"]  # no temporary file left


def test_draw_prints_to_stdout_without_out() -> None:
    result = serq_draw(VLLM, "--format", "svg")
    assert result.exit_code == 0
    parse(result.stdout)


def test_draw_defaults_to_tikz() -> None:
    result = serq_draw(VLLM)
    assert result.exit_code == 0
    assert result.stdout.startswith(r"\documentclass[tikz")


def test_draw_takes_set_overrides() -> None:
    result = serq_draw(VLLM, "--format", "svg", "--set", "p=0.75")
    assert result.exit_code == 0
    assert [t.text for t in of_class(parse(result.stdout), "text", "arm-label")] == ["0.75", "0.25"]


def test_a_bad_format_is_a_usage_error_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "x.svg"
    result = serq_draw(VLLM, "--format", "png", "--out", str(out))
    assert result.exit_code == 2
    assert "--format" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_program_error_exits_1_with_its_position_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sq"
    bad.write_text("stage svc : fifo;\nsession {\n  run nosuch (1);\n}\n", encoding="utf-8")
    out = tmp_path / "x.svg"
    result = serq_draw(str(bad), "--format", "svg", "--out", str(out))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{bad}:3:7: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.sq"]


def test_an_unwritable_out_exits_1(tmp_path: Path) -> None:
    result = serq_draw(VLLM, "--format", "svg", "--out", str(tmp_path / "missing" / "x.svg"))
    assert result.exit_code == 1
    assert "cannot write" in result.stderr


def test_python_m_serq_draw_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "fig.tex"
    done = subprocess.run([sys.executable, "-m", "serq", "draw", VLLM, "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8").rstrip().endswith(r"\end{document}")


def test_the_output_does_not_depend_on_hash_seeds(tmp_path: Path) -> None:
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-m", "serq", "draw", VLLM, "--format", "svg"],
                              capture_output=True, text=True, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        outs.append(done.stdout)
    assert outs[0] == outs[1] == GOLDEN.read_text(encoding="utf-8")


def test_a_trace_replay_draws_its_arrivals() -> None:
    import serq
    from serq.draw.flow import arrival_text

    program = serq.load(ROOT / "programs" / "replay" / "azure_conv.sq")
    assert arrival_text(program) == "arrive trace"
    faster = serq.load(ROOT / "programs" / "replay" / "azure_conv.sq", sets={"rate": "2"})
    assert arrival_text(faster) == "arrive trace(2)"

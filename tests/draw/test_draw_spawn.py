"""`serq draw` of `spawn` and `join` (issue 11): a spawn forks to a child lane,
a join is where the lane merges back (docs/draw.md, "Spawn and join").

The scene is checked as geometry: a dashed `fork` edge runs from the bottom
of each spawn box down to the top of its lane, a dashed `merge` edge from the
lane's top up into the bar under the join.  A golden SVG pins the figure of
`programs/subagent/vllm_spawn.sq`; regenerate it with
``SERQ_REGEN_GOLDEN=1 pytest tests/draw/test_draw_spawn.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from bounds import HANG
from test_draw import apart, assert_readable, of_class, parse, shape_box

import serq
from serq.draw import figure, render
from serq.draw.flow import Span, build

ROOT = Path(__file__).resolve().parents[2]
SPAWN = ROOT / "programs" / "subagent" / "vllm_spawn.sq"
GOLDEN = ROOT / "tests" / "golden" / "vllm_spawn.svg"
DOC_IMAGE = ROOT / "docs" / "img" / "vllm_spawn_flow.svg"

HEAD = "stage svc : fifo;\nstage tool : delay;\n"


def scene_of(text_or_path):
    program = serq.load(text_or_path)
    scene = figure(program)
    assert_readable(scene)
    return scene


def role(scene, name: str) -> list:
    return [s for s in scene.shapes if getattr(s, "role", "") == name]


def texts(scene, name: str) -> list[str]:
    return [s.text for s in role(scene, name)]


def node(scene, kind: str, label: str):
    """The box of the node whose label is ``label``."""
    text = next(t for t in role(scene, f"{kind}-label") if t.text == label)
    return next(r for r in role(scene, kind) if r.x < text.x < r.x + r.w and r.y < text.y < r.y + r.h)


def lane_with(scene, title: str):
    text = next(t for t in role(scene, "lane-label") if t.text == title)
    return next(r for r in role(scene, "lane") if r.x < text.x < r.x + r.w and r.y < text.y < r.y + r.h)


def forks_into(scene, lane) -> list:
    return [e for e in role(scene, "fork-edge") if e.points[-1][1] == pytest.approx(lane.y)
            and lane.x <= e.points[-1][0] <= lane.x + lane.w]


def merges_from(scene, lane) -> list:
    return [e for e in role(scene, "merge-edge") if e.points[0][1] == pytest.approx(lane.y)
            and lane.x <= e.points[0][0] <= lane.x + lane.w]


def starts_under(edge, box) -> bool:
    x, y = edge.points[0]
    return box.x < x < box.x + box.w and y == pytest.approx(box.y + box.h)


def ends_under(edge, box) -> bool:
    x, y = edge.points[-1]
    return box.x < x < box.x + box.w and box.y + box.h < y <= box.y + box.h + 3.0 + 1e-9


# ---------------------------------------------------------------------------
# the bundled program


def test_the_spawn_program_forks_to_a_child_lane_and_merges_into_the_join() -> None:
    scene = scene_of(SPAWN)
    spawn = node(scene, "spawn", "spawn (3) into kids")
    join = node(scene, "join", "join kids")
    lane = lane_with(scene, "kids × 3")
    assert len(role(scene, "lane")) == 1
    assert texts(scene, "lane-label") == ["kids × 3", "each child: init · set K = K, sub = 1 · session"]
    # on the spine: spawn, then join; the lane below both, from the spawn's left edge past the join
    assert spawn.y == join.y and spawn.x + spawn.w < join.x
    assert lane.y > spawn.y + spawn.h and lane.x == spawn.x and lane.x + lane.w >= join.x + join.w
    (fork,) = forks_into(scene, lane)
    (merge,) = merges_from(scene, lane)
    assert fork.dash and fork.arrow and starts_under(fork, spawn)
    assert merge.dash and merge.arrow and ends_under(merge, join)
    (bar,) = role(scene, "merge-bar")
    assert bar.x < merge.points[-1][0] < bar.x + bar.w
    assert texts(scene, "fork-label") == ["fork"] and texts(scene, "merge-label") == ["merge"]


def test_the_lane_sits_inside_the_arm_that_spawns_and_pushes_the_other_arm_down() -> None:
    scene = scene_of(SPAWN)
    lane = lane_with(scene, "kids × 3")
    tool = next(r for r in role(scene, "run") if r.x < next(
        t.x for t in role(scene, "run-label") if t.text == "tool") < r.x + r.w)
    assert tool.y > lane.y + lane.h  # the `else` arm (the tool call) drops below the lane
    assert apart(shape_box(lane), shape_box(tool))


def test_the_legend_explains_the_lane() -> None:
    scene = scene_of(SPAWN)
    assert any(t.startswith("child lane:") for t in texts(scene, "legend-label"))


def test_the_golden_svg_of_vllm_spawn() -> None:
    svg = render(serq.load(SPAWN), "svg")
    if os.environ.get("SERQ_REGEN_GOLDEN") == "1":
        GOLDEN.write_text(svg, encoding="utf-8", newline="\n")
        DOC_IMAGE.write_text(svg, encoding="utf-8", newline="\n")
    assert svg == GOLDEN.read_text(encoding="utf-8"), (
        "the figure changed; look at it, then regenerate with SERQ_REGEN_GOLDEN=1 pytest tests/draw/test_draw_spawn.py"
    )
    assert svg == DOC_IMAGE.read_text(encoding="utf-8"), "docs/img/vllm_spawn_flow.svg is the golden figure"


def test_the_spawn_program_in_tikz_is_well_formed_with_dashed_lane_edges() -> None:
    text = render(serq.load(SPAWN), "tikz")
    lines = text.splitlines()
    assert lines[0] == r"\documentclass[tikz,border=4pt]{standalone}" and lines[-1] == r"\end{document}"
    body = re.sub(r"\\[{}]", "", text)
    assert body.count("{") == body.count("}")
    for line in lines[lines.index(r"\begin{document}") + 2:-2]:
        assert line.startswith((r"\path[", r"\node[")) and line.endswith(";"), line
    assert r"{kids \texttimes{} 3}" in text
    dashed_arrows = [ln for ln in lines if "dash pattern" in ln and "Stealth" in ln]
    assert len(dashed_arrows) == 2  # the fork and the merge
    defined = set(re.findall(r"\\definecolor\{(\w+)\}", text))
    assert set(re.findall(r"(?:draw|fill|text)=(\w+)", text)) <= defined


# ---------------------------------------------------------------------------
# small programs


def test_a_spawn_without_a_join_forks_and_never_merges() -> None:
    scene = scene_of(HEAD + "session { spawn (2) into fire { } run svc (1); }\n")
    lane = lane_with(scene, "fire × 2")
    assert len(forks_into(scene, lane)) == 1
    assert role(scene, "merge-edge") == [] and role(scene, "merge-bar") == []
    assert texts(scene, "lane-label")[-1] == "never joined: the parent goes on"
    assert texts(scene, "lane-label")[1] == "each child: init · session"


def test_two_handles_give_two_lanes_nested_inside_out() -> None:
    scene = scene_of(HEAD + "session { spawn (2) into a { set x = 1; } spawn (3) into b { } "
                            "run svc (1); join b; join a; }\n")
    a, b = lane_with(scene, "a × 2"), lane_with(scene, "b × 3")
    assert len(role(scene, "lane")) == 2
    assert b.y + b.h < a.y  # the inner stretch's lane is nearer the spine
    assert a.x < b.x and b.x + b.w <= a.x + a.w
    for lane, handle in ((a, "a"), (b, "b")):
        (fork,) = forks_into(scene, lane)
        (merge,) = merges_from(scene, lane)
        assert starts_under(fork, node(scene, "spawn", f"spawn ({2 if handle == 'a' else 3}) into {handle}"))
        assert ends_under(merge, node(scene, "join", f"join {handle}"))
    # the outer lane's edges pass beside the inner lane, never through it
    for edge in forks_into(scene, a) + merges_from(scene, a):
        assert not b.x <= edge.points[0][0] <= b.x + b.w


def test_interleaved_handles_give_two_lanes_and_the_later_join_a_stub() -> None:
    scene = scene_of(HEAD + "session { spawn (2) into a { } spawn (3) into b { } join a; join b; }\n")
    a, b = lane_with(scene, "a × 2"), lane_with(scene, "b × 3")
    assert len(merges_from(scene, a)) == 1 and merges_from(scene, b) == []
    assert "waited for by a later join b" in texts(scene, "lane-label")
    assert texts(scene, "lane-stub") == ["from b"]
    join_b = node(scene, "join", "join b")
    stub = [e for e in role(scene, "merge-edge") if ends_under(e, join_b)]
    assert len(stub) == 1 and stub[0].points[0][1] > join_b.y + join_b.h


def test_several_spawns_into_one_handle_feed_one_lane_and_one_merge() -> None:
    scene = scene_of(HEAD + "session { set m = ~uniform(0, 1) < 0.5 ? 1 : 2; spawn (2) into a { set x = 1; } "
                            "run svc (1); spawn (m) into a { set x = 1; } join a; }\n")
    (lane,) = role(scene, "lane")
    assert texts(scene, "lane-label")[0] == "a × 2 + m"
    forks = forks_into(scene, lane)
    assert len(forks) == 2
    assert starts_under(forks[0], node(scene, "spawn", "spawn (2) into a"))
    assert starts_under(forks[1], node(scene, "spawn", "spawn (m) into a"))
    assert len(merges_from(scene, lane)) == 1 and len(role(scene, "merge-bar")) == 1


def test_spawns_with_different_sets_say_so() -> None:
    scene = scene_of(HEAD + "session { spawn (1) into a { set x = 1; } spawn (1) into a { set x = 2; } join a; }\n")
    assert texts(scene, "lane-label") == ["a × 1 + 1", "each child: init · its spawn's sets · session"]


def test_a_join_with_nothing_spawned_before_it_gets_a_stub_and_a_loop_spawn_a_later_note() -> None:
    scene = scene_of(HEAD + "session { loop { join c; spawn (1) into c { } run svc (1); "
                            "branch with (0.5) { end; } } }\n")
    assert texts(scene, "lane-stub") == ["from c"]
    assert texts(scene, "lane-label")[-1] == "waited for by a later join c"
    assert len(role(scene, "fork-edge")) == 1 and len(role(scene, "merge-edge")) == 1  # the stub's


def test_a_lane_inside_a_hold_stays_inside_its_enclosure() -> None:
    scene = scene_of("pool p { cap 2; }\n" + HEAD + "session { hold p (1) { spawn (2) into a { } run svc (1); } "
                     "join a; }\n")
    (hold,) = role(scene, "hold")
    (lane,) = role(scene, "lane")
    assert hold.x < lane.x and lane.x + lane.w < hold.x + hold.w
    assert hold.y < lane.y and lane.y + lane.h < hold.y + hold.h
    assert texts(scene, "lane-stub") == ["from a"]


def test_the_kernel_form_session_draws_its_spawn_too() -> None:
    scene = scene_of("stage svc : fifo;\nsession { branch (depth < 2) { spawn (2) into t { } join t; } "
                     "run svc (1); }\n")
    assert len(role(scene, "lane")) == 1 and len(role(scene, "fork-edge")) == 1 and len(role(scene, "merge-edge")) == 1


def test_a_program_that_never_spawns_has_no_span_and_no_lane() -> None:
    for rel in ("programs/multi-turn/vllm.sq", "programs/subagent/vllm_subagents.sq"):
        program = serq.load(ROOT / rel)
        assert not program.handles
        root = parse(render(program, "svg"))
        assert of_class(root, "rect", "lane") == [] and of_class(root, "polyline", "fork-edge") == []
        assert not any(isinstance(item, Span) for item in build(program).items)


def test_the_tikz_of_the_spawn_program_compiles(tmp_path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("pdflatex") is None or shutil.which("kpsewhich") is None:
        pytest.skip("pdflatex is not installed")
    if subprocess.run(["kpsewhich", "standalone.cls"], capture_output=True, text=True, check=False).stdout.strip() == "":
        pytest.skip("the LaTeX class standalone is not installed")
    (tmp_path / "spawn.tex").write_text(render(serq.load(SPAWN), "tikz"), encoding="utf-8")
    # LaTeX is another program: HANG guards against it waiting for ever (for a file, say), only
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "spawn.tex"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=HANG, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    assert (tmp_path / "spawn.pdf").stat().st_size > 0

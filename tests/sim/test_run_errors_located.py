"""An error found while a program runs says where the program writes what
failed and which constants that expression read (issue 38, item 4): the
headline is `file:line:col:` as the front end's, with the source line, and a
note names each `let` the expression reads with its value (`from --set` when a
`--set` gave it).  A `let` that only `--set` made wrong is then found at once."""

from __future__ import annotations

from pathlib import Path

import pytest

import serq

ROOT = Path(__file__).resolve().parents[2]
OFFLOAD = ROOT / "programs" / "offload" / "vllm_offload.sq"


def failure(src: str, **sets: str) -> serq.SerqError:
    with pytest.raises(serq.SerqError) as err:
        serq.run(serq.load(src, sets=list(sets.items())))
    return err.value


def test_a_negative_link_speed_is_found_at_the_spill_and_its_constants() -> None:
    # pcie = -25e9: each evicted block's transfer takes 16 * 131072 / -25e9 = -8.38861e-05 s
    with pytest.raises(serq.SerqError) as err:
        serq.run(serq.load(OFFLOAD, sets=[("pcie", "-25e9")]), horizon=300, warmup=0)
    lines = err.value.render().splitlines()
    assert lines[0] == (f"{OFFLOAD}:30:23: pool `kv`: `spill host via d2h (…)` (its work): the amount is "
                        "-8.38861e-05, not a number of units, tokens or seconds")
    assert lines[2] == "30 |   spill host via d2h (size * kv_bytes / pcie) when (offload);"
    assert lines[-1] == "note: the expression reads `kv_bytes` = 131072 and `pcie` = -2.5e+10 (from --set)"


CASES = [
    # (program, the headline, the note)
    ("let w = -2;\nstage d : delay;\nworkload { arrive batch(1); }\nsession { run d (w + serial); }\nrun { horizon 5; }\n",
     "<text>:4:18: `run d (w + serial)`: the amount is -2, not a number of units, tokens or seconds",
     "note: the expression reads `w` = -2"),
    ("let a = 0;\nlet b = 0;\npool P { cap 10; }\nstage d : delay;\nworkload { arrive batch(1); init { set x = a / b; } }\n"
     "session { hold P (x + a) { run d (1); } }\nrun { horizon 5; }\n",
     "<text>:6:19: `hold P (x + a)`: the amount is NaN, not a number of units, tokens or seconds",
     "note: the expression reads `a` = 0"),
    ("let p = 2;\nstage d : delay;\nworkload { arrive batch(1); init { set u = 1; } }\n"
     "session { branch (u * p) { run d (1); } }\nrun { horizon 5; }\n",
     "<text>:4:19: `branch (u * p)`: the guard is 2, not 0 or 1; a draw is written `branch with (p)`",
     "note: the expression reads `p` = 2"),
    ("let r = -1;\nstage s : ps(r * present);\nworkload { arrive batch(1); }\nsession { run s (1); }\nrun { horizon 5; }\n",
     "<text>:2:14: stage `s`: the rate is -1, not a finite number ≥ 0",
     "note: the expression reads `r` = -1"),
    ("let c = -1;\npool kv { cap 100; }\nstage e : step { cost c + 0 * tokens; memory kv; }\nworkload { arrive batch(1); }\n"
     "session { hold kv (4) { run e prefill (4) growing kv; } }\nrun { horizon 5; }\n",
     "<text>:3:23: stage `e`: an iteration of 4 tokens costs -1; an iteration that schedules tokens lasts a positive time",
     "note: the expression reads `c` = -1"),
    ("let k = -1;\nstage d : delay;\nworkload { arrive batch(1); }\nsession { spawn (k) into kids { } join kids; }\n"
     "run { horizon 5; }\n",
     "<text>:4:18: `spawn (k) into kids`: the count is -1, not a non-negative whole number",
     "note: the expression reads `k` = -1"),
]


@pytest.mark.parametrize("src, headline, note", CASES)
def test_a_run_time_error_is_located_and_names_the_constants_it_read(src: str, headline: str, note: str) -> None:
    lines = failure(src).render().splitlines()
    assert lines[0] == headline
    assert lines[-1] == note


def test_a_constant_given_by_set_is_said_to_be() -> None:
    err = failure(CASES[0][0], w="-3")
    assert err.render().splitlines()[-1] == "note: the expression reads `w` = -3 (from --set)"


def test_an_expression_that_reads_no_constant_has_no_note() -> None:
    src = "stage d : delay;\nworkload { arrive batch(1); }\nsession { run d (serial - 1); }\nrun { horizon 5; }\n"
    lines = failure(src).render().splitlines()
    assert lines[0] == "<text>:3:18: `run d (serial - 1)`: the amount is -1, not a number of units, tokens or seconds"
    assert not any(line.startswith("note:") for line in lines)


def test_the_cli_prints_the_located_error_and_exits_1(tmp_path: Path) -> None:
    from frontend_util import cli_main

    program = tmp_path / "p.sq"
    program.write_text(CASES[0][0])
    code, printed = cli_main("run", str(program))
    assert code == 1
    assert printed.splitlines()[0] == f"{program}:4:18: `run d (w + serial)`: the amount is -2, not a number of " \
                                      "units, tokens or seconds"

"""`serq trace import` and serq.traces.import_trace (issue 12, item 2): each format on a
small file written here, with the exact output text; the window, limit and scale
options; malformed files as `file:line:` errors (a SerqError from the API, exit 1 and
no traceback from the command, the output left as it was); streaming in bounded
memory; the round trip through the trace reader; the real Azure trace where
../shared/data holds it (never committed)."""

from __future__ import annotations

import gzip
import re
import json
import subprocess
import sys
import tracemalloc
from decimal import Decimal
from pathlib import Path

import pytest
from bounds import env

from serq.errors import SerqError, UsageError
from serq.traces.reader import parse_trace, read_trace
from serq.traces import FORMATS, HEADER, import_trace

ROOT = Path(__file__).resolve().parents[2]
AZURE_DATA = ROOT.parent / "shared" / "data" / "azure-llm-2023"


def serq(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`serq ARGS`, its runs bounded by events (tests/bounds.py): no timeout."""
    return subprocess.run([sys.executable, "-m", "serq", *args], capture_output=True, text=True, cwd=ROOT,
                          input=stdin, env=env())


def run_import(tmp_path: Path, fmt: str, text: str | bytes, name: str = "in.csv", **kw) -> str:
    src = tmp_path / name
    if isinstance(text, bytes):
        src.write_bytes(text)
    else:
        src.write_text(text, newline="")
    dst = tmp_path / "out.csv"
    import_trace(fmt, src, dst, **kw)
    return dst.read_text()


def error_of(tmp_path: Path, fmt: str, text: str, name: str = "in.csv", **kw) -> SerqError:
    src = tmp_path / name
    src.write_text(text, newline="")
    dst = tmp_path / "out.csv"
    with pytest.raises(SerqError) as info:
        import_trace(fmt, src, dst, **kw)
    assert not dst.exists(), "a failed import leaves no output"
    assert not list(tmp_path.glob(".out.csv.*")), "nor a temporary file"
    return info.value


SPLITWISE = """arrived_at,num_prefill_tokens,num_decode_tokens
0.0,812,57
2.718281,233,96
3.141592,1405,38
6.2831849999999995,64,12
"""

SPLITWISE_OUT = """session,turn,new,out,think,arrival
0,1,812,57,0,0
1,1,233,96,0,2.718281
2,1,1405,38,0,3.141592
3,1,64,12,0,6.2831849999999995
"""


def test_splitwise_keeps_times_and_counts_exactly(tmp_path: Path) -> None:
    assert run_import(tmp_path, "splitwise", SPLITWISE) == SPLITWISE_OUT
    assert run_import(tmp_path, "vidur", SPLITWISE) == SPLITWISE_OUT


def test_splitwise_times_are_counted_from_the_first_row_and_columns_found_by_name(tmp_path: Path) -> None:
    text = "num_decode_tokens,extra,arrived_at,num_prefill_tokens\n5,x,100.5,20\n6,y,101.25,30\n7,z,101.25,40\n"
    assert run_import(tmp_path, "splitwise", text) == (
        f"{HEADER}\n0,1,20,5,0,0\n1,1,30,6,0,0.75\n2,1,40,7,0,0.75\n")


# The original Azure file: CRLF line ends, seven decimals, no final newline.
AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
         "2024-05-02 10:20:30.5000000,812,57\r\n"
         "2024-05-02 10:20:33.2182810,233,96\r\n"
         "2024-05-02 10:20:33.6415920,1405,38\r\n"
         "2024-05-02 23:59:59.9999999,10,1\r\n"
         "2024-05-03 00:00:00.0000001,11,2")

AZURE_OUT = """session,turn,new,out,think,arrival
0,1,812,57,0,0
1,1,233,96,0,2.718281
2,1,1405,38,0,3.141592
3,1,10,1,0,49169.4999999
4,1,11,2,0,49169.5000001
"""


def test_azure_reads_crlf_without_a_final_newline_and_subtracts_timestamps_exactly(tmp_path: Path) -> None:
    assert run_import(tmp_path, "azure", AZURE) == AZURE_OUT
    assert run_import(tmp_path, "AZURE", AZURE.encode("utf-8-sig")) == AZURE_OUT  # a byte-order mark, the case


def test_azure_timestamps_may_carry_a_zone(tmp_path: Path) -> None:
    text = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00+00:00,5,6\n"
            "2024-05-10T01:00:01.5+01:00,7,8\n2024-05-10 00:00:03Z,9,10\n")
    assert run_import(tmp_path, "azure", text) == f"{HEADER}\n0,1,5,6,0,0\n1,1,7,8,0,1.5\n2,1,9,10,0,3\n"


MOONCAKE = """{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}
{"timestamp": 0, "input_length": 7322, "output_length": 490, "hash_ids": [0, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27]}

{"timestamp": 3052, "input_length": 2290, "output_length": 316, "hash_ids": [0, 42, 43, 44, 45]}
{"timestamp": 3052.5, "input_length": 655, "output_length": 1, "hash_ids": [46, 47], "other": "x"}
"""

MOONCAKE_OUT = """session,turn,new,out,think,arrival
0,1,6758,500,0,0
1,1,7322,490,0,0
2,1,2290,316,0,3.052
3,1,655,1,0,3.0525
"""


def test_mooncake_converts_milliseconds_and_drops_hash_ids(tmp_path: Path) -> None:
    assert run_import(tmp_path, "mooncake", MOONCAKE, name="in.jsonl") == MOONCAKE_OUT


BURSTGPT = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,0,1087,Conversation log
118,GPT-4,417,217,634,Conversation log
140,ChatGPT,1360,316,1676,API log
150.5,GPT-4,0,12,12,API log
"""

BURSTGPT_OUT = """session,turn,new,out,think,arrival
0,1,472,18,0,0
1,1,417,217,0,113
2,1,1360,316,0,135
"""


def test_burstgpt_leaves_out_failed_requests_and_counts_them(tmp_path: Path) -> None:
    src = tmp_path / "b.csv"
    src.write_text(BURSTGPT)
    summary = import_trace("burstgpt", src, tmp_path / "out.csv")
    assert (tmp_path / "out.csv").read_text() == BURSTGPT_OUT
    assert summary.rows == 3 and summary.read == 3
    assert summary.dropped == {"failed (0 response tokens)": 1, "with 0 request tokens": 1}
    assert summary.first == 0 and summary.last == 135


def test_burstgpt_model_filter(tmp_path: Path) -> None:
    out = run_import(tmp_path, "burstgpt", BURSTGPT, models=["GPT-4"])
    # arrivals count from the first request kept (118 s): the output starts at 0
    assert out == f"{HEADER}\n0,1,417,217,0,0\n"
    with pytest.raises(UsageError, match="burstgpt format only"):
        run_import(tmp_path, "azure", AZURE, models=["GPT-4"])


def test_every_format_says_what_it_keeps_and_drops() -> None:
    assert set(FORMATS) == {"splitwise", "azure", "mooncake", "burstgpt"}
    assert FORMATS["splitwise"].aliases == ("vidur",)
    assert "hash_ids" in FORMATS["mooncake"].keeps and "drops" in FORMATS["mooncake"].keeps
    assert "failed" in FORMATS["burstgpt"].keeps


# ---------------------------------------------------------------------------
# options


def test_limit_start_duration_and_scale(tmp_path: Path) -> None:
    text = "arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(f"{t},{10 + t},{1 + t}\n" for t in range(10))
    assert run_import(tmp_path, "splitwise", text, limit=2) == f"{HEADER}\n0,1,10,1,0,0\n1,1,11,2,0,1\n"
    # the window [3, 6): arrivals re-based to its start, so a quiet lead-in is kept
    assert run_import(tmp_path, "splitwise", text, start=2.5, duration=3.5) == (
        f"{HEADER}\n0,1,13,4,0,0.5\n1,1,14,5,0,1.5\n2,1,15,6,0,2.5\n")
    assert run_import(tmp_path, "splitwise", text, start=8, scale=0.5) == (
        f"{HEADER}\n0,1,18,9,0,0\n1,1,19,10,0,0.5\n")
    assert run_import(tmp_path, "splitwise", text, duration=1, scale=3) == f"{HEADER}\n0,1,10,1,0,0\n"
    for kw, msg in (({"limit": 0}, "--limit"), ({"start": -1}, "--start"), ({"duration": 0}, "--duration"),
                    ({"scale": 0}, "--scale"), ({"scale": float("inf")}, "--scale"),
                    ({"start": float("nan")}, "--start")):
        with pytest.raises(UsageError, match=msg):
            run_import(tmp_path, "splitwise", text, **kw)


def test_window_stops_reading_at_its_end(tmp_path: Path) -> None:
    # the bad row lies after the window's end and the limit: reading stops before it
    text = "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n1,2,2\n5,3,3\nbad,4,4\n"
    assert run_import(tmp_path, "splitwise", text, duration=2) == f"{HEADER}\n0,1,1,1,0,0\n1,1,2,2,0,1\n"
    assert run_import(tmp_path, "splitwise", text, limit=3).count("\n") == 4


def test_gzip_and_stdin_sources(tmp_path: Path) -> None:
    gz = tmp_path / "in.csv.gz"
    gz.write_bytes(gzip.compress(SPLITWISE.encode()))
    import_trace("splitwise", gz, tmp_path / "a.csv")
    assert (tmp_path / "a.csv").read_text() == SPLITWISE_OUT
    out = serq("trace", "import", "splitwise", "-", "-o", str(tmp_path / "b.csv"), stdin=SPLITWISE)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "b.csv").read_text() == SPLITWISE_OUT


# ---------------------------------------------------------------------------
# malformed files


H = "arrived_at,num_prefill_tokens,num_decode_tokens\n"


MALFORMED = [
    ("splitwise", "arrived_at,num_prefill_tokens\n0,1\n",
     "in.csv:1: the header has no column `num_decode_tokens`"),
    ("splitwise", H + "0,1,2\n1,x,2\n", "in.csv:3: column `num_prefill_tokens`: invalid number `x`"),
    ("splitwise", H + "0,1,2\n\n1,-4,2\n", "in.csv:4: column `num_prefill_tokens`: negative token count `-4`"),
    ("splitwise", H + "0,1,2.5\n", "in.csv:2: column `num_decode_tokens`: `2.5` is not a whole number of tokens"),
    ("splitwise", H + "0,1,0\n", "in.csv:2: column `num_decode_tokens`: 0 tokens"),
    ("splitwise", H + "0,1,2\n2,1,2\n1.5,1,2\n", "in.csv:4: time goes backwards: 1.5 s after 2 s on line 3"),
    ("splitwise", H + "0,1,2\nnan,1,2\n", "in.csv:3: column `arrived_at`: invalid time `nan`"),
    ("splitwise", H + "0,1,2,3\n", "in.csv:2: expected 3 fields, as the header has, got 4"),
    ("splitwise", "", "in.csv: no header line"),
    ("splitwise", H + "0,1,2\n1," + "9" * 140_000 + ",2\n",
     "in.csv:3: malformed CSV: field larger than field limit (131072)"),
    ("splitwise", H, "in.csv: no requests to write"),
    ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.68,1,2\r\n2023-13-16 18:15:46,1,2",
     "in.csv:3: column `TIMESTAMP`: invalid timestamp `2023-13-16 18:15:46`"),
    ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n18:15:46,1,2\n",
     "in.csv:2: column `TIMESTAMP`: invalid timestamp `18:15:46`"),
    ("mooncake", '{"timestamp": 0, "input_length": 1, "output_length": 2}\n{"timestamp": 1, "input_length": 1}\n',
     "in.csv:2: no `output_length`"),
    ("mooncake", '{"timestamp": 0, "input_length": 1, "output_length": 2}\n{"timestamp": 1,\n',
     "in.csv:2: invalid JSON: Expecting property name enclosed in double quotes"),
    ("mooncake", '[1, 2]\n', "in.csv:1: expected a JSON object"),
    ("mooncake", '{"timestamp": "0", "input_length": 1, "output_length": 2}\n',
     'in.csv:1: `timestamp`: expected a number, got `"0"`'),
    ("mooncake", '{"timestamp": 5, "input_length": 1, "output_length": 2}\n'
                 '{"timestamp": 4, "input_length": 1, "output_length": 2}\n',
     "in.csv:2: time goes backwards: -0.001 s after 0 s on line 1"),
    ("burstgpt", "Timestamp,Model,Request tokens,Response tokens\n1,ChatGPT,5,-1\n",
     "in.csv:2: column `Response tokens`: negative token count `-1`"),
]


@pytest.mark.parametrize("fmt, text, headline", MALFORMED,
                         ids=[f"{fmt}: {headline.split(': ', 1)[-1][:40]}" for fmt, _, headline in MALFORMED])
def test_a_malformed_file_is_a_file_line_error(tmp_path: Path, fmt: str, text: str, headline: str) -> None:
    err = error_of(tmp_path, fmt, text)
    assert err.headline() == str(tmp_path / headline)
    assert err.helps, "every error says what to do"


def test_a_wrong_format_is_named_in_the_help(tmp_path: Path) -> None:
    err = error_of(tmp_path, "azure", SPLITWISE)
    assert any("`splitwise` format" in h for h in err.helps)
    err = error_of(tmp_path, "splitwise", MOONCAKE)
    assert any("`mooncake` format" in h for h in err.helps)
    err = error_of(tmp_path, "mooncake", SPLITWISE)
    assert err.headline().endswith("in.csv:1: invalid JSON: Expecting value")
    assert any("looks like a CSV file" in h for h in err.helps)
    err = error_of(tmp_path, "azure", SPLITWISE_OUT)
    assert any("already a serQ trace" in h for h in err.helps)


def test_a_window_with_no_request_is_an_error(tmp_path: Path) -> None:
    err = error_of(tmp_path, "splitwise", SPLITWISE, start=100)
    assert err.headline() == f"{tmp_path / 'in.csv'}: no requests in the window to write"
    assert "widen --start/--duration" in err.helps[0]


def test_the_output_is_left_as_it_was_on_an_error(tmp_path: Path) -> None:
    (tmp_path / "out.csv").write_text("old\n")
    (tmp_path / "in.csv").write_text(H + "0,1,2\n0,1,x\n")
    with pytest.raises(SerqError):
        import_trace("splitwise", tmp_path / "in.csv", tmp_path / "out.csv")
    assert (tmp_path / "out.csv").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.csv"]


def test_not_utf8_and_a_bad_gzip_are_errors(tmp_path: Path) -> None:
    rows = "".join(f"{i},1,2\n" for i in range(5000)).encode()  # the bad byte is decoded ahead of the rows
    (tmp_path / "in.csv").write_bytes(H.encode() + rows + b"5000,\xff\xfe,2\n")
    with pytest.raises(SerqError) as info:
        import_trace("splitwise", tmp_path / "in.csv", tmp_path / "out.csv")
    assert info.value.headline() == f"{tmp_path / 'in.csv'}:5002: not UTF-8 text"
    (tmp_path / "in.csv.gz").write_bytes(b"not gzip at all")
    with pytest.raises(SerqError, match="cannot read"):
        import_trace("splitwise", tmp_path / "in.csv.gz", tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists()


# ---------------------------------------------------------------------------
# the command


def test_cli_exit_codes_and_messages(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text(SPLITWISE)
    dst = tmp_path / "out.csv"
    ok = serq("trace", "import", "vidur", str(src), "-o", str(dst))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == ""
    assert ok.stderr == f"wrote 4 requests, arrivals 0 to 6.2831849999999995 s to {dst}\n"
    assert dst.read_text() == SPLITWISE_OUT

    to_stdout = serq("trace", "import", "vidur", str(src), "-o", "/dev/stdout", "--limit", "1")
    assert to_stdout.returncode == 0 and to_stdout.stdout == f"{HEADER}\n0,1,812,57,0,0\n"

    src.write_text(H + "0,1,2\n1,x,2\n")
    bad = serq("trace", "import", "splitwise", str(src), "-o", str(tmp_path / "new.csv"))
    assert bad.returncode == 1
    assert bad.stderr.splitlines()[0] == f"{src}:3: column `num_prefill_tokens`: invalid number `x`"
    assert "Traceback" not in bad.stderr and not (tmp_path / "new.csv").exists()

    missing = serq("trace", "import", "splitwise", str(tmp_path / "nope.csv"), "-o", str(dst))
    assert missing.returncode == 1 and missing.stderr.startswith(f"cannot read `{tmp_path / 'nope.csv'}`")

    unknown = serq("trace", "import", "sharegpt", str(src), "-o", str(dst))
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("error: unknown trace format `sharegpt`")
    assert "azure, burstgpt, mooncake, splitwise, vidur" in unknown.stderr

    for opts in (["--scale", "0"], ["--limit", "0"], ["--start", "-1"], ["--duration", "0"], ["--model", "x"]):
        usage = serq("trace", "import", "splitwise", str(src), "-o", str(dst), *opts)
        assert usage.returncode == 2, (opts, usage.stderr)
        assert "Traceback" not in usage.stderr

    src.write_text(SPLITWISE)
    folder = serq("trace", "import", "splitwise", str(src), "-o", str(tmp_path))
    assert folder.returncode == 1 and folder.stderr == f"cannot write {tmp_path}: is a folder\n"

    no_out = serq("trace", "import", "splitwise", str(src))
    assert no_out.returncode == 2


# ---------------------------------------------------------------------------
# streaming


def test_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    def peak(rows: int) -> int:
        src = tmp_path / f"in{rows}.csv"
        with src.open("w") as f:
            f.write(H)
            for i in range(rows):
                f.write(f"{i * 0.25},{100 + i % 977},{1 + i % 313}\n")
        tracemalloc.start()
        try:
            import_trace("splitwise", src, tmp_path / "out.csv")
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = peak(2_000), peak(100_000)
    assert large < small + 512 * 1024, (small, large)
    assert (tmp_path / "out.csv").read_text().count("\n") == 100_001


# ---------------------------------------------------------------------------
# the round trip through the trace reader


def test_the_reader_takes_the_importers_header() -> None:
    corpus = parse_trace(f"{HEADER}\n0,1,5,3,0,7.5\n", "probe.csv")
    assert corpus.arrivals == (7.5,)
    assert corpus.sessions[0][0].forced == 0.0  # `arrival` is not read as the positional `forced`


@pytest.mark.parametrize("fmt, text, out", [
    ("splitwise", SPLITWISE, SPLITWISE_OUT), ("azure", AZURE, AZURE_OUT),
    ("mooncake", MOONCAKE, MOONCAKE_OUT), ("burstgpt", BURSTGPT, BURSTGPT_OUT)])
def test_each_import_reads_back_as_a_trace(tmp_path: Path, fmt: str, text: str, out: str) -> None:
    assert run_import(tmp_path, fmt, text) == out
    corpus = read_trace(str(tmp_path / "out.csv"))
    rows = [line.split(",") for line in out.splitlines()[1:]]
    assert len(corpus.sessions) == len(rows)
    for session, row in zip(corpus.sessions, rows):
        assert len(session) == 1
        turn = session[0]
        assert (turn.new, turn.out, turn.think, turn.forced) == (float(row[2]), float(row[3]), 0.0, 0.0)
    assert corpus.arrivals == tuple(float(r[5]) for r in rows)


# ---------------------------------------------------------------------------
# the real Azure trace (../shared/data; never committed)


@pytest.mark.skipif(not (AZURE_DATA / "conv.csv").is_file(), reason="../shared/data/azure-llm-2023 is absent")
def test_the_azure_conversation_trace_imports_19366_requests(tmp_path: Path) -> None:
    dst = tmp_path / "conv.csv"
    summary = import_trace("vidur", AZURE_DATA / "conv.csv", dst)
    # the expected values come from the source file itself (none of its rows is copied here)
    src = [row.split(",") for row in (AZURE_DATA / "conv.csv").read_text().splitlines()[1:]]
    assert summary.rows == len(src) == 19_366 and summary.read == 19_366 and not summary.dropped
    assert summary.first == 0 and summary.last == Decimal(src[-1][0]) - Decimal(src[0][0])
    lines = dst.read_text().splitlines()
    assert len(lines) == 19_367 and lines[0] == HEADER
    assert float(src[0][0]) == 0.0  # Vidur's file counts from the first request
    assert lines[1] == f"0,1,{src[0][1]},{src[0][2]},0,0"
    assert lines[2] == f"1,1,{src[1][1]},{src[1][2]},0,{Decimal(src[1][0])}"
    corpus = read_trace(str(dst))
    assert len(corpus.sessions) == 19_366 and corpus.arrivals is not None
    assert corpus.arrivals[:2] == (0.0, float(src[1][0])) and corpus.arrivals[-1] == float(src[-1][0])
    code = import_trace("splitwise", AZURE_DATA / "code.csv", tmp_path / "code.csv")
    assert code.rows == 8_819


def test_the_command_coerces_its_options_without_pydantic(tmp_path: Path) -> None:
    """`serq trace import` is a subcommand of a subcommand: its options get the quick
    coercion of serq/_typer_patch.py too (tests/test_startup.py checks check and run)."""
    src = tmp_path / "in.csv"
    src.write_text(SPLITWISE)
    argv = ["serq", "trace", "import", "vidur", str(src), "-o", str(tmp_path / "out.csv"), "--limit", "2",
            "--start", "0", "--duration", "100", "--scale", "0.5"]
    probe = ("import sys, json\nfrom serq import cli\n"
             f"sys.argv = {argv!r}\n"
             "try:\n    cli.main()\nexcept SystemExit as done:\n    assert done.code in (0, None), done.code\n"
             "sys.__stdout__.write('@@' + json.dumps(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)  # it only computes
    assert "@@" in done.stdout, done.stderr
    mods = json.loads(done.stdout.rsplit("@@", 1)[1])
    assert not [m for m in mods if m.split(".")[0] in ("pydantic", "pydantic_core", "numpy", "simpy", "rich")]
    assert (tmp_path / "out.csv").read_text() == f"{HEADER}\n0,1,812,57,0,0\n1,1,233,96,0,1.3591405\n"


@pytest.mark.skipif(not (AZURE_DATA / "conv.csv").is_file(), reason="../shared/data/azure-llm-2023 is absent")
def test_an_imported_azure_trace_replays_with_its_own_arrival_times(tmp_path: Path) -> None:
    """`serq trace import` then `serq run programs/replay/azure_conv.sq --trace …`: the run's
    arrivals are the trace's requests before the horizon."""
    dst = tmp_path / "conv.csv"
    done = serq("trace", "import", "vidur", str(AZURE_DATA / "conv.csv"), "-o", str(dst))
    assert done.returncode == 0, done.stderr
    h = 60
    before = sum(1 for line in dst.read_text().splitlines()[1:] if float(line.rsplit(",", 1)[1]) < h)
    assert before > 100
    run = serq("run", "programs/replay/azure_conv.sq", "--trace", str(dst), "--horizon", str(h))
    assert run.returncode == 0, run.stderr
    assert f" arrivals {before} " in run.stdout.splitlines()[0]


def test_the_examples_of_docs_traces_md_are_what_the_importers_write(tmp_path: Path) -> None:
    """Each format's example in docs/traces.md: its input block, imported as its first
    `serq trace import` line says, gives its output block (azure: the splitwise one)."""
    doc = (ROOT / "docs" / "traces.md").read_text()
    part = doc[doc.index("## The formats, with an example each"):doc.index("## Where to get the public traces")]
    outputs: dict[str, str] = {}
    for fmt in ("splitwise", "azure", "mooncake", "burstgpt"):
        start = part.index(f"**`{fmt}`")
        rest = part[start + 1:]
        nxt = re.search(r"\n\*\*`(splitwise|azure|mooncake|burstgpt)`", rest)
        section = rest[:nxt.start()] if nxt else rest
        blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
        assert blocks[1][0] == "sh", fmt
        words = blocks[1][1].splitlines()[0].split()
        assert words[:3] == ["serq", "trace", "import"] and words[3] in (fmt, "vidur"), words
        text = blocks[0][1]
        if fmt == "azure":
            text = text.replace("\n", "\r\n").rstrip("\r\n")  # as the file is: CRLF, no final newline
        src = tmp_path / f"{fmt}.in"
        src.write_text(text, newline="")
        dst = tmp_path / f"{fmt}.csv"
        import_trace(words[3], src, dst)
        outputs[fmt] = dst.read_text()
        expected = blocks[2][1] if len(blocks) > 2 else outputs["splitwise"]
        assert outputs[fmt] == expected, fmt

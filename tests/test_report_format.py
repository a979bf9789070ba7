"""The report's three views (semantics §9): text, JSON, CSV dump.

The text must reproduce the seed document's report excerpt byte for byte from
the same numbers (the numbers below carry more digits than printed, so the
rounding is exercised too)."""

from __future__ import annotations

import json
import math

import pytest

from serq.errors import SerqError
from serq.files import write_dir_atomic
from serq.report import (
    ObserveSummary,
    PoolSummary,
    Report,
    Sample,
    StageSummary,
    client_decimals,
    fixed,
    shortest,
)

NAN = math.nan
INF = math.inf

# The seed excerpt (seeds/002, `serq run examples/multi-turn/vllm.sq --horizon 300
# --warmup 30`), without its "…" line, which stands for the tables it elides.
SEED_TEXT = """\
run: horizon 300 end 300 warmup 30 seed 1 events 150579 arrivals 95 ended 86 turns 779 mean live 7.387

observe         count      mean    95% CI    cv2        p99
--------------  -----  --------  --------  -----  ---------
hit               779    0.8858   ±0.0215  0.129     1.0000
prefill_tokens    779  685.2439  ±56.1267  1.068  2883.0000

client    count       mean      95% CI    cv2        p99
--------  -----  ---------  ----------  -----  ---------
ttft        779    0.01428    ±0.00122  1.070    0.05924
tpot        776  0.0002530  ±0.0000354  3.742  0.0007055
response    779    0.05994    ±0.00397  0.567    0.19769

pool    used    cached  queue  holders    wait  admits  evict(n)  evict(u)  preempt  spill  rej  stuck
----  ------  --------  -----  -------  ------  ------  --------  --------  -------  -----  ---  -----
kv    1251.5  144310.0  0.000    0.171     NaN     798        76    545120        0      0    0      0
reqs     0.2       0.0  0.001    0.171  0.0005     798         0         0        0      0    0      0"""


def kv(**kw) -> PoolSummary:
    base = dict(
        name="kv", index=None, mean_used=1251.4982, mean_cached=144310.0417, mean_queue=0.0, mean_holders=0.17094,
        mean_wait=NAN, admissions=798, evicted_entries=76, evicted_units=545120.0, preemptions=0, spills=0,
        rejected=0, stuck=0,
    )
    base.update(kw)
    return PoolSummary(**base)


def reqs(**kw) -> PoolSummary:
    base = dict(
        name="reqs", index=None, mean_used=0.21003, mean_cached=0.0, mean_queue=0.0013, mean_holders=0.17094,
        mean_wait=0.00049871, admissions=798, evicted_entries=0, evicted_units=0.0, preemptions=0, spills=0,
        rejected=0, stuck=0,
    )
    base.update(kw)
    return PoolSummary(**base)


def seed_report(**kw) -> Report:
    base = dict(
        horizon=300.0, end=300.0, warmup=30.0, seed=1, events=150579, arrivals=95, ended=86, turns=779,
        mean_live=7.38714,
        observes={
            "hit": ObserveSummary(779, 0.885751, 0.021549, 0.12913, 1.0),
            "prefill_tokens": ObserveSummary(779, 685.243902, 56.126712, 1.06792, 2883.0),
        },
        client={
            "ttft": ObserveSummary(779, 0.0142801, 0.00122384, 1.06951, 0.0592433),
            "tpot": ObserveSummary(776, 0.000253012, 0.0000354231, 3.74187, 0.000705512),
            "response": ObserveSummary(779, 0.0599412, 0.00396822, 0.567241, 0.197692),
        },
        pools=[kv(), reqs()],
    )
    base.update(kw)
    return Report(**base)


def test_the_seed_excerpt_is_reproduced_byte_for_byte():
    assert seed_report().text() == SEED_TEXT


def test_client_rows_print_in_their_order_and_without_empty_rows():
    r = seed_report()
    r.client = {
        "response": r.client["response"],
        "tpot": ObserveSummary(0, NAN, INF, NAN, NAN),
        "ttft": r.client["ttft"],
    }
    lines = r.text().split("\n")
    start = lines.index(next(line for line in lines if line.startswith("client")))
    assert [line.split()[0] for line in lines[start + 2 : start + 4]] == ["ttft", "response"]
    assert not any(line.startswith("tpot") for line in lines)
    assert list(r.to_dict()["client"]) == ["ttft", "response"]


# §11.1(b): the earlier guide's report, with the stage and step tables.
GUIDE_TEXT = """\
run: horizon 300 end 300 warmup 30 seed 1 events 133894 arrivals 95 ended 87 turns 697 mean live 6.617

observe         count      mean    95% CI    cv2        p99
--------------  -----  --------  --------  -----  ---------
hit               697    0.8723   ±0.0223  0.147     1.0000
prefill_tokens    697  723.1133  ±53.2095  0.985  2890.0000
ttft              697    0.0151   ±0.0010  0.952     0.0578
response          697    0.0598   ±0.0032  0.602     0.2257

stage   number   util  done    thru    wait  service   iters
------  ------  -----  ----  ------  ------  -------  ------
engine   0.153  0.139  1392  5.1556  0.0000   0.0296  133174
tool     6.463  1.000   608  2.2519  0.0000   2.8874       0

step    prefill only  decode only  mixed   idle  decodes  decode batch  decode step   itl p50   itl p99
------  ------------  -----------  -----  -----  -------  ------------  -----------  --------  --------
engine         0.033        0.102  0.005  0.861    0.115         1.076     0.000225  0.000211  0.000253

pool    used    cached  queue  holders    wait  admits  evict(n)  evict(u)  preempt  spill  rej  stuck
----  ------  --------  -----  -------  ------  ------  --------  --------  -------  -----  ---  -----
kv    1032.6  144255.8  0.000    0.153     NaN     719        70    500048        0      0    0      0
reqs     0.2       0.0  0.002    0.153  0.0006     719         0         0        0      0    0      0"""


def guide_report() -> Report:
    span = 270.0
    engine = StageSummary(
        "engine", None, 0.15311, 0.13902, 1392, 1392 / span, 0.0, 0.029612, 133174,
        prefill_only=0.0328, decode_only=0.1016, mixed=0.0046,  # idle 1 − 0.139 = 0.861
        mean_decodes=0.11498, mean_decode_batch=1.07612, mean_decode_step=0.00022513,
        mean_itl=0.000213, itl_p50=0.00021104, itl_p99=0.00025349,
    )
    tool = StageSummary("tool", None, 6.46321, 0.999992, 608, 608 / span, 0.0, 2.887391, 0)
    return Report(
        horizon=300.0, end=300.0, warmup=30.0, seed=1, events=133894, arrivals=95, ended=87, turns=697,
        mean_live=6.61659,
        observes={
            "hit": ObserveSummary(697, 0.87231, 0.022291, 0.14702, 1.0),
            "prefill_tokens": ObserveSummary(697, 723.11333, 53.20951, 0.98513, 2890.0),
            "ttft": ObserveSummary(697, 0.015121, 0.0010312, 0.95191, 0.057812),
            "response": ObserveSummary(697, 0.059803, 0.0032111, 0.60213, 0.22571),
        },
        stages=[engine, tool],
        pools=[
            kv(mean_used=1032.61, mean_cached=144255.79, mean_holders=0.15311, admissions=719, evicted_entries=70,
               evicted_units=500048.0),
            reqs(mean_used=0.1531, mean_queue=0.0021, mean_holders=0.15311, mean_wait=0.00061, admissions=719),
        ],
    )


def test_the_guide_report_with_stage_and_step_tables():
    text = guide_report().text()
    assert text == GUIDE_TEXT
    # the spec (§11.1b) quotes the same report without its rules of dashes
    assert "\n".join(line for line in text.split("\n") if not line.startswith("--")) == "\n".join(
        line for line in GUIDE_TEXT.split("\n") if not line.startswith("--")
    )


def test_the_step_table_lists_only_stages_that_iterated_and_is_omitted_without_any():
    r = guide_report()
    assert "\nstep " in r.text()
    assert "\ntool " not in r.text().split("\nstep ")[1].split("\npool")[0]
    r.stages[0].iterations = 0
    assert "\nstep " not in r.text()


def test_sections_without_rows_are_omitted():
    r = Report(horizon=10.0, end=10.0, warmup=0.0, seed=3, events=0, arrivals=0, ended=0, turns=0, mean_live=0.0)
    assert r.text() == "run: horizon 10 end 10 warmup 0 seed 3 events 0 arrivals 0 ended 0 turns 0 mean live 0.000"


def test_the_run_line_prints_times_in_shortest_form():
    r = seed_report(horizon=2.5, end=0.1, warmup=0.0, mean_live=NAN)
    assert r.text().split("\n")[0].startswith("run: horizon 2.5 end 0.1 warmup 0 seed 1 ")
    assert r.text().split("\n")[0].endswith(" mean live NaN")


def test_fewer_than_40_samples_print_plus_minus_inf_and_no_samples_print_nan():
    r = seed_report(
        observes={
            "few": ObserveSummary(3, 2.0, INF, 0.25, 3.0),
            "none": ObserveSummary(0, NAN, INF, NAN, NAN),
        },
        client={},
        pools=[],
    )
    assert r.text().split("\n")[1:] == [
        "",
        "observe  count    mean  95% CI    cv2     p99",
        "-------  -----  ------  ------  -----  ------",
        "few          3  2.0000    ±inf  0.250  3.0000",
        "none         0     NaN    ±inf    NaN     NaN",
    ]
    d = json.loads(r.to_json())
    assert d["observes"]["few"] == {"count": 3, "mean": 2, "ci": None, "cv2": 0.25,
                                    "p50": None, "p90": None, "p95": None, "p99": 3}
    assert d["observes"]["none"] == {"count": 0, "mean": None, "ci": None, "cv2": None,
                                     "p50": None, "p90": None, "p95": None, "p99": None}


def test_notes_follow_the_observe_table():
    r = seed_report(client={}, pools=[], notes=["observe hit is constant 0 over 779 samples"])
    r.observes = {"hit": ObserveSummary(779, 0.0, 0.0, NAN, 0.0)}
    assert r.text().split("\n")[-2:] == [
        "hit        779  0.0000  ±0.0000  NaN  0.0000",
        "note: observe hit is constant 0 over 779 samples",
    ]


def test_rejections_and_stuck_sessions_are_named_under_the_pool_table():
    r = seed_report(pools=[kv(rejected=2, stuck=1), reqs(stuck=3)])
    assert r.text().split("\n")[-3:] == [
        "rej: 2 session(s) ended at pool `kv` asking for more than its cap",
        "stuck: 1 session(s) preempted again at pool `kv` without passing the position of their previous preemption",
        "stuck: 3 session(s) preempted again at pool `reqs` without passing the position of their previous preemption",
    ]
    assert r.warnings() == [
        "1 session(s) stuck at pool `kv`: the means are over the sessions that got through",
        "3 session(s) stuck at pool `reqs`: the means are over the sessions that got through",
    ]
    assert seed_report().warnings() == []


def test_array_members_are_labelled_with_their_index():
    r = seed_report(
        observes={}, client={},
        pools=[kv(name="kvD", index=0), kv(name="kvD", index=1, mean_used=2.0)],
        stages=[StageSummary("rep", i, 0.5, 0.25, 10 + i, 0.1, 0.0, 1.0, 0) for i in range(2)],
    )
    text = r.text()
    assert "\nrep[0]   0.500  0.250    10" in text
    assert "\nrep[1]   0.500  0.250    11" in text
    assert "\nkvD[1]     2.0  144310.0" in text
    assert r.pool("kvD[1]").mean_used == 2.0
    assert r.pool("kvD").index == 0
    assert r.stage("rep[1]").completed == 11
    assert [p.index for p in r.pools_named("kvD")] == [0, 1]
    assert [s["index"] for s in r.to_dict()["stages"]] == [0, 1]


def test_a_wide_cell_widens_its_column():
    r = seed_report(client={}, pools=[], observes={"x": ObserveSummary(1234567, 12345.678, 0.5, 1.0, 99999.0)})
    assert r.text().split("\n")[2:5] == [
        "observe    count        mean   95% CI    cv2         p99",
        "-------  -------  ----------  -------  -----  ----------",
        "x        1234567  12345.6780  ±0.5000  1.000  99999.0000",
    ]


# -- JSON (§9.2) --------------------------------------------------------------------------


def test_json_has_the_fields_of_the_spec_in_order():
    d = json.loads(guide_report().to_json())
    assert list(d) == [
        "horizon", "end", "warmup", "seed", "events", "arrivals", "ended", "turns", "mean_live",
        "observes", "client", "stages", "pools",
    ]
    assert list(d["observes"]["hit"]) == ["count", "mean", "ci", "cv2", "p50", "p90", "p95", "p99"]
    assert list(d["stages"][0]) == [
        "name", "index", "mean_number", "utilization", "completed", "throughput", "mean_wait", "mean_service",
        "iterations", "prefill_only", "decode_only", "mixed", "mean_decodes", "mean_decode_batch",
        "mean_decode_step", "mean_itl", "itl_p50", "itl_p99",
    ]
    assert list(d["pools"][0]) == [
        "name", "index", "mean_used", "mean_cached", "mean_queue", "mean_holders", "mean_wait", "admissions",
        "evicted_entries", "evicted_units", "preemptions", "spills", "rejected", "stuck",
    ]


def test_json_round_trips_to_the_report_dict():
    for r in (seed_report(), guide_report()):
        assert json.loads(r.to_json()) == r.to_dict()


def test_the_seed_sweep_reads_ttft_and_kv_preemptions():
    # jq '.client.ttft.mean, (.pools[] | select(.name=="kv") | .preemptions)'
    d = json.loads(seed_report(pools=[kv(preemptions=4), reqs()]).to_json())
    assert d["client"]["ttft"]["mean"] == 0.0142801
    assert [p["preemptions"] for p in d["pools"] if p["name"] == "kv"] == [4]


def test_json_numbers_are_shortest_and_non_finite_ones_null():
    text = seed_report().to_json()
    assert text.startswith('{"horizon":300,"end":300,"warmup":30,"seed":1,"events":150579,')
    assert '"mean_wait":null' in text  # kv wait is NaN
    assert '"index":null' in text
    assert '"mean":0.000253012,' in text
    assert "NaN" not in text and "Infinity" not in text and "\n" not in text


def test_a_non_step_stage_has_null_step_fields_in_json():
    tool = guide_report().to_dict()["stages"][1]
    assert tool["iterations"] == 0
    assert tool["prefill_only"] is None and tool["itl_p99"] is None
    assert tool["throughput"] == 608 / 270


# -- dump (§9.3) --------------------------------------------------------------------------


def test_dump_writes_one_csv_per_observe_in_recording_order(tmp_path):
    r = seed_report(
        samples={
            "hit": [Sample(30.5, 3, 1.0, 1.0), Sample(31.0, 0, 2.0, 0.0), Sample(1e-7, 12, 0.0, 0.1)],
            "prefill_tokens": [],
        }
    )
    out = tmp_path / "out"
    write_dir_atomic(out, r.dump)
    assert sorted(p.name for p in out.iterdir()) == ["hit.csv", "prefill_tokens.csv"]
    assert (out / "hit.csv").read_text() == (
        "time,session,turn,value\n30.5,3,1,1\n31,0,2,0\n0.0000001,12,0,0.1\n"
    )
    assert (out / "prefill_tokens.csv").read_text() == "time,session,turn,value\n"


def test_dump_into_an_existing_folder_replaces_only_its_own_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "hit.csv").write_text("old")
    (out / "keep.txt").write_text("mine")
    r = seed_report(samples={"hit": [Sample(40.0, 1, 1, 2883.0)]})
    write_dir_atomic(out, r.dump)
    assert (out / "hit.csv").read_text() == "time,session,turn,value\n40,1,1,2883\n"
    assert (out / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["hit.csv", "keep.txt", "prefill_tokens.csv"]


# -- lookups ------------------------------------------------------------------------------


def test_lookups_find_observes_client_rows_pools_and_stages():
    r = guide_report()
    assert r.observe("hit").count == 697
    assert seed_report().observe("tpot").count == 776  # a client row
    assert r.pool("kv").admissions == 719
    assert r.stage("engine").iterations == 133174


def test_an_unknown_name_is_an_error_with_a_did_you_mean():
    r = guide_report()
    with pytest.raises(SerqError) as err:
        r.observe("htt")
    assert err.value.message == "unknown observe `htt` in the report"
    assert err.value.helps == ["did you mean observe `hit`?"]
    with pytest.raises(SerqError) as err:
        r.pool("kvv")
    assert err.value.helps == ["did you mean pool `kv`?"]
    with pytest.raises(SerqError) as err:
        r.stage("nothing_like_it")
    assert err.value.helps == ["the report has stages `engine`, `tool`"]
    with pytest.raises(SerqError):
        r.stage("engine[0]")  # not an array


# -- number forms -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "x, text",
    [
        (300.0, "300"), (0.5, "0.5"), (30, "30"), (1e16, "10000000000000000"), (1.5e-7, "0.00000015"),
        (0.1 + 0.2, "0.30000000000000004"), (-0.0, "-0"), (-2.25, "-2.25"), (NAN, "NaN"), (INF, "inf"),
        (-INF, "-inf"), (123456789.125, "123456789.125"),
    ],
)
def test_shortest_is_rusts_display_form(x, text):
    assert shortest(x) == text
    if math.isfinite(x):
        assert float(text) == x


def test_fixed_prints_words_for_non_finite_values():
    assert [fixed(NAN, 4), fixed(INF, 3), fixed(-INF, 1), fixed(None, 3), fixed(2.5, 0), fixed(0.0005, 4)] == [
        "NaN", "inf", "-inf", "NaN", "2", "0.0005",
    ]


@pytest.mark.parametrize(
    "mean, d", [(0.01428, 5), (0.0002530, 7), (0.05994, 5), (685.2, 1), (12345.0, 0), (1.0, 3), (0.0, 4), (NAN, 4)]
)
def test_client_rows_give_the_mean_four_significant_digits(mean, d):
    assert client_decimals(mean) == d

"""A family reported as a whole (issue 39, item 4; docs/report.md §18): a pool
or stage family (``pool kv[N]``, ``stage engine[N]``) gets a total row, counts
and levels summed, shares of time averaged, per-job means pooled over all the
members' jobs; the text shows it as ``kv[*]`` for two members or more, the
JSON under ``totals``, a sweep as ``pools.kv.…``.

The two tiny programs below are deterministic: sessions arrive at 1, 2, 3, …
(``renewal(1)``, serial s at time s + 1); serials 0, 3, 6, 9 go to member 0
and take 1 s, the others go to member 1 and take 1.5 s, which the arrivals
every 1 or 2 s outrun: member 1 has a job waiting 0.5 s every other job.
The run ends at 12.25, warm-up 0.

Member 1's jobs (arrival → start → end): 2→2→3.5, 3→3.5→5, 5→5→6.5,
6→6.5→8, 8→8→9.5, 9→9.5→11, 11→11→12.5 (cut), 12→12.5 (cut, never started).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from bounds import env as bounded

import serq
from serq import units
from serq.experiments.summary import report_columns
from serq.experiments.sweep import flatten

ROOT = Path(__file__).resolve().parents[1]
EVENTS = 2_000_000  # far above what any run here handles (the cluster runs: about 200 000)

PICK = "set j = floor(serial / 3) * 3 == serial ? 0 : 1;"

STAGES = f"""\
let N = 2;
stage svc[N] : fifo;
workload {{ arrive renewal(1); }}
session {{
  {PICK}
  run svc[j] (j == 0 ? 1 : 1.5);
}}
run {{ horizon 12.25; warmup 0; }}
"""

#: The same placement on pools of one slot each (the queue is the pool's now);
#: `m` is each hold's second pool, where no wait is recorded (docs/report.md §11).
POOLS = f"""\
let N = 2;
pool q[N] {{ cap 1; }}
pool m[N] {{ cap inf; }}
pool plain {{ cap inf; }}
stage d : delay;
workload {{ arrive renewal(1); }}
session {{
  {PICK}
  hold q[j] (1), m[j] (2), plain (1) {{ run d (j == 0 ? 1 : 1.5); }}
}}
run {{ horizon 12.25; warmup 0; }}
"""

SPAN = 12.25


def run_text(tmp_path: Path, text: str, **sets: object) -> serq.Report:
    path = tmp_path / "family.sq"
    path.write_text(text)
    return serq.run(serq.load(path, sets=[(k, str(v)) for k, v in sets.items()]), max_events=EVENTS)


def cluster(**sets: object) -> serq.Report:
    """programs/cluster/agents.sq, short, with a small KV cache: preemptions and rejections in every replica."""
    program = serq.load(ROOT / "programs" / "cluster" / "agents.sq",
                        sets=[("blocks", "400"), *((k, str(v)) for k, v in sets.items())])
    return serq.run(program, horizon=200, warmup=20, max_events=EVENTS)


def test_a_family_total_is_the_sum_of_its_members_on_a_cluster_run() -> None:
    r = cluster(N=2)
    kv = r.pools_named("kv")
    total = r.pool_total("kv")
    assert len(kv) == 2 and total.index is None and total.name == "kv"
    assert total.preemptions > 0 and total.rejected > 0  # (the counts below are not all zeros)
    for key in ("admissions", "evicted_entries", "preemptions", "spills", "rejected", "stuck"):
        assert getattr(total, key) == getattr(kv[0], key) + getattr(kv[1], key), key
        assert isinstance(getattr(total, key), int), key
    for key in ("evicted_units", "mean_used", "mean_cached", "mean_queue", "mean_holders"):
        assert getattr(total, key) == getattr(kv[0], key) + getattr(kv[1], key), key  # (two terms: exact)
    engine = r.stages_named("engine")
    st = r.stage_total("engine")
    for key in ("completed", "iterations", "mean_number", "throughput", "mean_decodes"):
        assert getattr(st, key) == getattr(engine[0], key) + getattr(engine[1], key), key
    for key in ("utilization", "prefill_only", "decode_only", "mixed", "idle"):
        assert st_key(st, key) == pytest.approx((st_key(engine[0], key) + st_key(engine[1], key)) / 2, rel=1e-15)
    # pooled: between the members' own, the p99 of all the gaps no lower than the least member's
    for key in ("mean_service", "mean_decode_batch", "mean_decode_step", "mean_itl"):
        lo, hi = sorted(getattr(m, key) for m in engine)
        assert lo <= getattr(st, key) <= hi, key
    assert min(m.itl_p99 for m in engine) <= st.itl_p99 <= max(m.itl_p99 for m in engine)
    # and the JSON and the sweep's row say the same
    d = r.to_dict()
    assert d["totals"]["pools"]["kv"]["preemptions"] == total.preemptions
    assert flatten(d)["pools.kv.preemptions"] == total.preemptions
    assert flatten(d)["stages.engine.completed"] == st.completed


def st_key(row: object, key: str) -> float:
    return float(getattr(row, key))


def test_a_pooled_stage_wait_weighs_each_member_by_its_jobs(tmp_path: Path) -> None:
    r = run_text(tmp_path, STAGES)
    s0, s1 = r.stages_named("svc")
    assert (s0.completed, s0.mean_wait, s0.mean_service) == (4, 0.0, 1.0)
    assert (s1.completed, s1.mean_wait, s1.mean_service) == (6, 0.25, 1.5)  # waits 0, .5, 0, .5, 0, .5
    t = r.stage_total("svc")
    assert t.completed == 10
    assert t.mean_wait == pytest.approx(1.5 / 10)  # 0.15, not the members' plain mean 0.125
    assert t.mean_service == pytest.approx((4 * 1.0 + 6 * 1.5) / 10)  # 1.3, not 1.25
    assert t.throughput == pytest.approx(10 / SPAN)
    # jobs present: member 0 one for 4 s; member 1 its jobs' time in the span, 1.5+2+1.5+2+1.5+2+1.25+0.25 = 12
    assert t.mean_number == pytest.approx((4 + 12) / SPAN)
    # busy: member 0 4 s, member 1 from 2 to the end, 10.25 s: the mean of the two shares
    assert t.utilization == pytest.approx((4 / SPAN + 10.25 / SPAN) / 2)
    assert t.mean_decode_batch is None and t.itl_p99 is None  # not a step stage


def test_a_pooled_pool_wait_counts_the_waits_recorded_not_the_admissions(tmp_path: Path) -> None:
    r = run_text(tmp_path, POOLS)
    q0, q1 = r.pools_named("q")
    # member 1 admits at 2, 3.5, 5, 6.5, 8, 9.5, 11 after waits 0, .5, 0, .5, 0, .5, 0
    assert (q0.admissions, q0.mean_wait) == (4, 0.0)
    assert (q1.admissions, q1.mean_wait) == (7, pytest.approx(1.5 / 7))
    q = r.pool_total("q")
    assert q.admissions == 11
    assert q.mean_wait == pytest.approx(1.5 / 11)  # 0.1364, not (0 + 0.2143) / 2
    assert q.mean_queue == pytest.approx(1.75 / SPAN)  # waiting 3–3.5, 6–6.5, 9–9.5, 12–12.25
    assert q.mean_used == pytest.approx((4 + 10.25) / SPAN)
    # `m` is every hold's second pool: it records no wait, so neither does its total
    m = r.pool_total("m")
    assert m.admissions == 11 and math.isnan(m.mean_wait)
    assert m.mean_used == pytest.approx(2 * (4 + 10.25) / SPAN)
    # a plain pool is its own total, and a name that is neither is an error with a did-you-mean
    assert r.pool_total("plain") is r.pool("plain")
    with pytest.raises(serq.SerqError, match="unknown pool `qq`") as err:
        r.pool_total("qq")
    assert err.value.helps == ["did you mean pool `q`?"]
    with pytest.raises(serq.SerqError, match="unknown stage `q`"):
        r.stage_total("q")


def test_the_text_has_a_total_row_after_a_family_of_two_only(tmp_path: Path) -> None:
    two = run_text(tmp_path, POOLS).text().split("\n")
    start = two.index(next(x for x in two if x.startswith("pool "))) + 2
    labels = [line.split(" ")[0] for line in two[start:two.index("", start)]]  # (the units and settled lines follow)
    assert labels == ["q[0]", "q[1]", "q[*]", "m[0]", "m[1]", "m[*]", "plain"]
    row = next(x for x in two if x.startswith("q[*]"))
    assert row == "q[*]    1.2     0.0  0.143    1.163  0.1364      11         0         0        0      0    0      0"
    assert len(row) == len(next(x for x in two if x.startswith("q[0]")))  # the columns stay aligned
    one = run_text(tmp_path, POOLS.replace("q[j]", "q[0]").replace("m[j]", "m[0]"), N=1).text()
    assert "[*]" not in one and "\nq[0] " in one  # a family of one: its member alone
    stages = run_text(tmp_path, STAGES).text()
    assert "\nsvc[*]   1.306  0.582    10  0.8163  0.1500   1.3000      0" in stages


def test_a_program_without_families_reports_as_before(tmp_path: Path) -> None:
    r = serq.run(serq.load(ROOT / "programs" / "multi-turn" / "vllm.sq"), horizon=60, warmup=6, max_events=EVENTS)
    assert "[*]" not in r.text()
    assert "totals" not in r.to_dict()
    assert r.pool_totals == {} and r.stage_totals == {}
    assert r.pool_total("kv") is r.pool("kv")


def test_the_json_keeps_the_member_lists_and_adds_the_totals(tmp_path: Path) -> None:
    d = json.loads(run_text(tmp_path, POOLS).to_json())
    assert [(p["name"], p["index"]) for p in d["pools"]] == [("q", 0), ("q", 1), ("m", 0), ("m", 1), ("plain", None)]
    assert list(d["totals"]) == ["stages", "pools"]
    assert d["totals"]["stages"] == {}
    assert list(d["totals"]["pools"]) == ["q", "m"]
    q = d["totals"]["pools"]["q"]
    assert list(q) == ["members", *(c.key for c in units.POOL)]
    assert q["members"] == 2 and q["admissions"] == 11 and q["mean_wait"] == pytest.approx(1.5 / 11)
    assert d["totals"]["pools"]["m"]["mean_wait"] is None  # NaN is null
    # a family of one has its total in the JSON (the sweep keys exist at every N)
    one = run_text(tmp_path, POOLS.replace("q[j]", "q[0]").replace("m[j]", "m[0]"), N=1).to_dict()
    assert one["totals"]["pools"]["q"]["members"] == 1
    assert one["totals"]["pools"]["q"] == {"members": 1, **{k: v for k, v in one["pools"][0].items()
                                                           if k not in ("name", "index")}}


def test_every_column_has_a_total_rule_and_the_docs_say_it() -> None:
    text = (ROOT / "docs" / "report.md").read_text()
    for heading, columns in (("## 9. The `stage` table", units.STAGE), ("## 10. The `step` table", units.STAGE),
                             ("## 11. The `pool` table", units.POOL)):
        body = text.split(heading, 1)[1].split("\n## ", 1)[0]
        rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in body.splitlines()
                if line.startswith("| `")]
        assert rows, heading
        for cells in rows:
            for name in cells[0].replace("`", "").split(", "):
                rule = cells[-1].split(":")[0]
                if name == "idle":  # the text's derived share (1 − the three)
                    assert rule == units.MEAN
                    continue
                column = next(c for c in columns if c.column == name)
                assert column.total == rule, (heading, name)
    assert all(c.total in (units.SUM, units.MEAN, units.POOLED) for c in (*units.STAGE, *units.POOL))


def test_the_sweep_keys_of_a_family_are_its_total(tmp_path: Path) -> None:
    path = tmp_path / "family.sq"
    path.write_text(POOLS)
    columns = report_columns(serq.load(path))
    assert "pools.q.admissions" in columns and "pools.q[1].admissions" in columns and "pools.q.members" in columns
    assert "pools.plain.admissions" in columns and "pools.plain[0].admissions" not in columns
    assert units.describe("pools.q.members").unit == "members"
    result = serq.sweep(path, seeds=[1])
    (row,) = result.rows
    assert row["pools.q.admissions"] == 11 == row["pools.q[0].admissions"] + row["pools.q[1].admissions"]
    assert row["pools.q.mean_wait"] == pytest.approx(1.5 / 11)
    assert row["pools.q.members"] == 2
    assert result.summary(["pools.q.admissions"]).points[0][1]["pools.q.admissions"].mean == 11


def test_serq_sweep_shows_a_family_total_on_the_cluster_program() -> None:
    argv = [sys.executable, "-m", "serq", "sweep", "programs/cluster/agents.sq", "--set", "N=1,2",
            "--set", "blocks=400", "--horizon", "100", "--warmup", "10", "--show", "pools.kv.preemptions",
            "--json"]
    done = subprocess.run(argv, cwd=ROOT, env=bounded(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    points = json.loads(done.stdout)["points"]
    assert [p["N"] for p in points] == [1, 2]
    for p in points:
        program = serq.load(ROOT / "programs" / "cluster" / "agents.sq",
                            sets=[("N", str(p["N"])), ("blocks", "400")])
        r = serq.run(program, horizon=100, warmup=10, seed=1, max_events=EVENTS)
        assert p["pools.kv.preemptions"]["mean"] == sum(m.preemptions for m in r.pools_named("kv"))


def test_a_total_past_the_largest_float_is_inf_not_an_error(tmp_path: Path) -> None:
    # each member holds 1.7e308 units for the whole run: its mean is finite, the family's is not
    r = run_text(tmp_path, """\
pool big[2] { cap inf; }
stage d : delay;
workload { arrive batch(2); }
session { hold big[serial] (1.7e308) { run d (100); } }
run { horizon 0.5; warmup 0; }
""")
    assert [p.mean_used for p in r.pools_named("big")] == [1.7e308, 1.7e308]
    assert r.pool_total("big").mean_used == math.inf
    assert r.to_dict()["totals"]["pools"]["big"]["mean_used"] is None
    assert next(x for x in r.text().split("\n") if x.startswith("big[*]")).split()[1] == "inf"

"""Flows in the language: `run A, B (w)` with `share maxmin|bottleneck`, end
times and utilisations worked out by hand (docs/pd.md, "Flows")."""

from __future__ import annotations

import pytest

import serq
from frontend_util import fails, load


def run(text: str, **kw: float) -> serq.Report:
    return serq.run(serq.load(text), **kw)


def samples(report: serq.Report, name: str) -> list[float]:
    return [s.value for s in report.samples[name]]


def stage(report: serq.Report, label: str):  # type: ignore[no-untyped-def]
    return next(s for s in report.stages if s.label == label)


TWO_READS = """
stage egress : ps(1);
stage ingress[2] : ps(1);
stage gate : delay;
share {policy};
workload {{ arrive batch(2); }}
session {{
  run gate (1);
  run egress, ingress[serial] (1);
  observe done_at = now;
  end;
}}
run {{ horizon 10; }}
"""


@pytest.mark.parametrize("policy", ["maxmin", "bottleneck"])
def test_two_reads_from_one_sender_share_its_egress(policy: str) -> None:
    # both from t = 1, work 1 each: the egress (1) gives each 1/2; both end at 3
    report = run(TWO_READS.format(policy=policy))
    assert samples(report, "done_at") == [3.0, 3.0]
    egress = stage(report, "egress")
    assert egress.completed == 2
    assert egress.utilization == pytest.approx(0.2, abs=1e-12)  # full over [1, 3] of 10
    assert egress.mean_number == pytest.approx(0.4, abs=1e-12)
    assert egress.mean_service == 2.0 and egress.mean_wait == 0.0
    for k in (0, 1):
        ing = stage(report, f"ingress[{k}]")
        assert ing.completed == 1
        assert ing.utilization == pytest.approx(0.1, abs=1e-12)  # half its capacity over 2 s


THREE_FLOWS = """
stage A : ps(1);
stage B : ps(2);
share {policy};
workload {{ arrive batch(3); }}
session {{
  branch (serial == 0) {{ run A, B (1); }}
  branch (serial == 1) {{ run A (1); }}
  branch (serial == 2) {{ run B (1); }}
  observe done_at = now;
  end;
}}
run {{ horizon 4; }}
"""


def test_three_flows_on_two_stages_maxmin() -> None:
    # A (1) fills first: f1, f2 at 1/2; f3 takes the rest of B, 3/2, and ends at 2/3;
    # f1 and f2 keep 1/2 (A is still full) and end at 2
    report = run(THREE_FLOWS.format(policy="maxmin"))
    done = dict(zip([s.session for s in report.samples["done_at"]], samples(report, "done_at")))
    assert done[2] == pytest.approx(2 / 3, abs=1e-15)
    assert done[0] == pytest.approx(2.0, abs=1e-12) and done[1] == pytest.approx(2.0, abs=1e-12)
    # B: full (2/2) until 2/3, then f1's 1/2 of 2 until 2: (2/3 + 1/4 · 4/3) / 4
    assert stage(report, "B").utilization == pytest.approx((2 / 3 + 0.25 * 4 / 3) / 4, abs=1e-12)
    assert stage(report, "A").utilization == pytest.approx(0.5, abs=1e-12)
    assert stage(report, "A").completed == 2 and stage(report, "B").completed == 2


def test_three_flows_on_two_stages_bottleneck() -> None:
    # f1 = min(1/2, 2/2) = 1/2, f2 = 1/2, f3 = 2/2 = 1: f3 ends at 1, f1, f2 at 2;
    # B carries 3/4 of its capacity until 1, then f1's 1/4 until 2
    report = run(THREE_FLOWS.format(policy="bottleneck"))
    assert sorted(samples(report, "done_at")) == [1.0, 2.0, 2.0]
    assert stage(report, "B").utilization == pytest.approx((0.75 + 0.25) / 4, abs=1e-12)


def test_a_plain_run_on_a_shared_stage_is_a_flow() -> None:
    # one stage of 2: f1 alone from 0; f2 joins at 0.25 (f1 has 0.5 done); both at 1:
    # f1 ends at 0.75, f2 (0.5 left) alone at 2 ends at 1
    report = run("""
        stage L : ps(2);
        stage M : ps(1);
        stage gate : delay;
        share maxmin;
        workload { arrive batch(3); }
        session {
          branch (serial == 0) { run L (1); }
          branch (serial == 1) { run gate (0.25); run L (1); }
          branch (serial == 2) { run gate (10); run L, M (1); }
          observe done_at = now;
          end;
        }
        run { horizon 20; }""")
    assert samples(report, "done_at") == [0.75, 1.0, 11.0]


def test_a_flow_of_zero_work_ends_at_once() -> None:
    report = run("""
        stage A : ps(1); stage B : ps(1); share maxmin;
        workload { arrive batch(1); }
        session { run A, B (0); observe t = now; end; }
        run { horizon 1; }""")
    assert samples(report, "t") == [0.0]
    assert stage(report, "A").completed == 0


def test_work_probes_on_a_shared_stage() -> None:
    # at 0.5 the flow has 1 of 2 left at rate 1 (A's 1 binds), one flow on each stage
    report = run("""
        stage A : ps(1); stage B : ps(4); stage gate : delay; share bottleneck;
        workload { arrive batch(2); }
        session {
          branch (serial == 0) { run A, B (2); }
          else { run gate (1); observe w = work(A); observe q = queue(B); observe b = busy(A); }
          end;
        }
        run { horizon 5; }""")
    assert samples(report, "w") == [1.0]
    assert samples(report, "q") == [1.0]
    assert samples(report, "b") == [1.0]


HEAD = "stage A : ps(1); stage B : ps(1); stage D : delay; stage F : fifo; stage P : ps(min(present, 2));"


@pytest.mark.parametrize("decls, body, message", [
    ("", "run A, B (1);", "a run on several stages needs the program's `share maxmin;` or `share bottleneck;`"),
    ("share maxmin;", "run A (1);", "`share maxmin`: no run in this program holds several stages"),
    ("share maxmin; share bottleneck;", "run A, B (1);", "`share` is given twice"),
    ("share fair;", "run A, B (1);", "unknown sharing policy `fair`"),
    ("share maxmin;", "run A, D (1);", "`D` is a delay stage"),
    ("share maxmin;", "run F, A (1);", "`F` is a fifo stage"),
    ("share maxmin;", "run A, P (1);", "`P` is a ps stage whose capacity is not a constant above 0"),
    ("share maxmin;", "run A, A (1);", "this run names stage `A` twice"),
    ("share maxmin;", "prefill on A, B (1);", "`prefill on` names one stage"),
])
def test_the_static_rules_of_flows(decls: str, body: str, message: str) -> None:
    err = fails(f"""{HEAD}
        {decls}
        workload {{ arrive batch(1); }}
        session {{ {body} end; }}
        run {{ horizon 1; }}""")
    assert message in err.message or message in err.render()
    assert err.line is not None


def test_a_stage_array_is_named_once_and_its_members_are_shared() -> None:
    err = fails("""stage nic[2] : ps(1); share maxmin;
        workload { arrive batch(1); }
        session { run nic[0], nic[1] (1); end; } run { horizon 1; }""")
    assert "names stage `nic` twice" in err.message
    p = load("""stage tx[2] : ps(1); stage rx[2] : ps(3); stage other : ps(1); share maxmin;
        workload { arrive batch(1); }
        session { run tx[0], rx[1] (1); run other (1); end; } run { horizon 1; }""")
    assert p.share == "maxmin" and [p.stages[i].name for i in p.shared] == ["tx", "rx"]


def test_a_step_engine_takes_no_flow() -> None:
    err = fails("""stage A : ps(1); stage E : step { budget 8; cost 1; } share maxmin;
        workload { arrive batch(1); }
        session { run A, E (1); end; } run { horizon 1; }""")
    assert "`E` is a step stage" in err.message
    err = fails("""stage A : ps(1); stage E : step { budget 8; cost 1; } share maxmin;
        workload { arrive batch(1); }
        session { run E, A prefill (1); end; } run { horizon 1; }""")
    assert "takes no `prefill`" in err.message


def test_flows_are_deterministic_and_conserve_work() -> None:
    # many random flows over two NICs and a backplane: every flow's work is served,
    # a stage never carries more than its capacity, same seed → same report
    text = """
        let lam = 3;
        stage tx[2] : ps(2); stage rx[2] : ps(1.5); stage gate : delay;
        share {policy};
        workload {{ arrive poisson(lam); }}
        session {{
          set i = floor(~uniform(0, 2)); set j = floor(~uniform(0, 2));
          branch with (0.7) {{ run tx[i], rx[j] (~exp(0.3)); }} else {{ run tx[i] (~exp(0.2)); }}
          end;
        }}
        run {{ horizon 400; warmup 20; seed 3; }}"""
    for policy in ("maxmin", "bottleneck"):
        a = run(text.format(policy=policy))
        b = run(text.format(policy=policy))
        assert a.to_json() == b.to_json()
        for st in a.stages:
            if st.name in ("tx", "rx"):
                assert 0.0 < st.utilization <= 1.0 + 1e-12
    # max-min is work-conserving, the bottleneck rule is not: flows take longer under it
    mm = run(text.format(policy="maxmin"))
    bn = run(text.format(policy="bottleneck"))
    assert stage(mm, "rx[0]").mean_service < stage(bn, "rx[0]").mean_service


def test_a_saturated_prefill_link_decode_tandem_runs_at_its_slowest_stage() -> None:
    # closed, 30 requests always in the system: prefill 10/s (fifo, 0.1 s each), a read of 5
    # over NICs of 50 and 40 (max-min: every read together at most 40, so 8 reads a second),
    # decode 12.5/s (fifo, 0.08 s): the tandem's throughput is min(10, 8, 12.5) = 8/s
    report = run("""
        stage prefill : fifo; stage egress : ps(50); stage ingress : ps(40); stage decode : fifo;
        share maxmin;
        workload { arrive closed(30); }
        session { run prefill (0.1); run egress, ingress (5); run decode (0.08); end; }
        run { horizon 600; warmup 60; }""")
    for name in ("prefill", "egress", "ingress", "decode"):
        assert stage(report, name).throughput == pytest.approx(8.0, rel=2e-3)
    assert stage(report, "ingress").utilization == pytest.approx(1.0, abs=2e-3)  # the bottleneck is full
    assert stage(report, "egress").utilization == pytest.approx(0.8, abs=2e-3)
    assert stage(report, "prefill").utilization == pytest.approx(0.8, abs=2e-3)

"""Queue stations and pull relations (docs/pd.md, "Queue stations"): parse-time
forms that give the program their flat kernel text gives, and every misuse a
clear error at its place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import serq
from frontend_util import fails, load

ROOT = Path(__file__).resolve().parents[2]


def same_ir(queue: serq.ir.Program, flat: serq.ir.Program, renames: list[tuple[str, str]]) -> None:
    """The two programs are one, once the queue's names are read as the flat program's."""
    a, b = repr(queue), repr(flat)
    for x, y in renames:
        a = a.replace(x, y)
    strip = lambda s: re.sub(r"lines=\([^)]*\)|path='[^']*'", "", s)  # noqa: E731
    assert strip(a) == strip(b)


def test_the_bundled_queue_program_is_its_flat_program() -> None:
    same_ir(serq.load(ROOT / "programs/pd/llmd.sq"), serq.load(ROOT / "programs/pd/llmd_flat.sq"), [
        ("D.nic.latency", "waitD"), ("P.reqs", "reqsP"), ("P.kv", "kvP"), ("P.nic", "nicP"),
        ("D.reqs", "reqsD"), ("D.kv", "kvD"), ("D.nic", "nicD"), ("P.c", "cP"), ("D.c", "cD"),
        ("D.transferred", "transferred"), ("D.read_done", "read_done"), ("D.first_token", "first_token")])


def test_the_bundled_queue_program_runs_as_its_flat_program() -> None:
    a = serq.run(serq.load(ROOT / "programs/pd/llmd.sq"), horizon=100, warmup=10)
    b = serq.run(serq.load(ROOT / "programs/pd/llmd_flat.sq"), horizon=100, warmup=10)
    assert a.observe("ttft").mean == b.observe("ttft").mean
    assert a.observe("lease").count == b.observe("lease").count > 0
    assert a.pool("D.kv[0]").admissions == b.pool("kvD[0]").admissions


PULL = """
let x0 = 0.5;
queue gw : gateway { route { P[i].prefill (prompt); D[j].decode (prompt) from P[i]; } }
queue P[2] : prefill { pool kv { cap 1000; } serve fifo; nic ps(100);
  prefill (prompt) { hold kv (prompt) { run P (prompt); } cache (prompt) lease kv (inf); } }
queue D[2] : decode { pool kv { cap 1000; block 16; } serve step { cost 1; memory kv; } nic ps(200);
  decode (prompt) { hold kv (prompt) { prefill (prompt) growing kv; } }
  decode (prompt) from src { hold kv (prompt) { transfer (prompt) from src to kv (prompt - 1); decode (o - 1) growing kv; } } }
D pull P latency x0 share maxmin;
workload { arrive batch(1); hidden o; init { set prompt = 32; set o = 4; set i = 1; set j = 0; } session { request gw; end; } }
run { horizon 100; }
"""

PULL_FLAT = """
let x0 = 0.5;
pool kvP[2] { cap 1000; } stage P[2] : fifo; stage nicP[2] : ps(100);
pool kvD[2] { cap 1000; block 16; } stage D[2] : step { cost 1; memory kvD; } stage nicD[2] : ps(200);
share maxmin;
stage wait[2] : delay;
server {
  hold kvP[i] (prompt) { run P[i] (prompt); } cache (prompt) lease kvP[i] (inf);
  hold kvD[j] (prompt) {
    run wait[j] (x0);
    transfer on nicP[i], nicD[j] (prompt) from kvP[i] to kvD[j] (prompt - 1);
    decode on D[j] (o - 1) growing kvD[j];
  }
}
workload { arrive batch(1); hidden o; init { set prompt = 32; set o = 4; set i = 1; set j = 0; } session { request; end; } }
run { horizon 100; }
"""


def test_a_pull_relation_is_the_flat_read() -> None:
    same_ir(load(PULL), load(PULL_FLAT), [("P.kv", "kvP"), ("D.kv", "kvD"), ("P.nic", "nicP"),
                                          ("D.nic.latency", "wait"), ("D.nic", "nicD")])


def test_a_lone_pull_takes_latency_plus_the_read_at_the_slower_nic() -> None:
    # prefill 32 s on P[1] (fifo, work = prompt), wait 0.5, then 32 tokens over NICs of
    # 100 and 200: min is 100, 0.32 s; the decode then starts at 32.82
    report = serq.run(serq.load(PULL.replace("decode (o - 1) growing kv; } } }",
                                             "mark read; decode (o - 1) growing kv; } } }")
                                .replace("D[j].decode (prompt) from P[i]; }",
                                         "D[j].decode (prompt) from P[i]; observe read = D.read; }")))
    assert [s.value for s in report.samples["read"]] == [pytest.approx(32.82, abs=1e-12)]


LINKS = """
let x = 0.5;
queue gw : gateway {{ route {{ P.prefill (prompt); D.decode (32) from P; }} }}
queue egress : link {{ serve ps(100); }}
queue ingress : link {{ serve ps(200) latency {latency}; }}
queue P : prefill {{ pool kv {{ cap 1000; }} serve fifo;
  prefill (prompt) {{ hold kv (prompt) {{ run P (prompt); }} cache (prompt) lease kv (inf); }} }}
queue D : decode {{ pool kv {{ cap 1000; }} serve step {{ cost 1; memory kv; }}
  decode (p) {{ hold kv (p) {{ prefill (p) growing kv; }} }}
  decode ({param}) from src {{ hold kv ({param}) {{ transfer on egress, ingress ({param}) from src to kv ({param} - 1); }} }} }}
share maxmin;
workload {{ arrive batch(1); init {{ set prompt = 32; }} session {{ request gw; end; }} }}
run {{ horizon 100; }}
"""


def test_a_link_latency_is_its_constant_and_no_parameter_captures_it() -> None:
    a = load(LINKS.format(latency="x", param="x"))
    b = load(LINKS.format(latency="x", param="y"))
    assert any(s.name == "ingress.latency" and s.kind == "delay" for s in a.stages)
    same_ir(a, b, [])
    assert "0.5" in repr(a)
    assert "0.125" in repr(load(LINKS.format(latency="x", param="y"), sets=[("x", "0.125")]))


WORKLOAD = ("workload { arrive batch(1); hidden o; init { set prompt = 32; set o = 4; set j = 0; } "
            "session { request gw; end; } } run { horizon 100; }")
CALLS = """
queue gw : gateway {{ route {{ P.prefill (prompt); D.decode (prompt) from P; }} }}
queue nic{fam} : link {{ serve ps(1); }}
queue P : prefill {{ pool kv {{ cap 100; }} serve fifo; prefill (p) {{ hold kv (p) {{ run P (p); }} cache (p) lease kv (inf); }} }}
queue D : decode {{ pool kv {{ cap 100; }} serve step {{ cost 1; memory kv; }}
  decode (p) {{ hold kv (p) {{ prefill (p) growing kv; }} }}
  decode (p) from src {{ hold kv (p) {{ {body} }} }} }}
share maxmin;
"""
ENTRY_TEXT = ("queue gw : gateway {{ route {{ set t0 = now; {gw} E.decode (prompt); }} }}\n"
              "queue E : decode {{ pool kv {{ cap 100; }} serve step {{ cost 1; memory kv; }} decode (prompt) {{ {entry} }} }}\n")


class ENTRY:  # noqa: N801
    @staticmethod
    def format(entry: str, gw: str) -> str:
        return ENTRY_TEXT.format(entry=entry, gw=gw) + WORKLOAD
CALL_TEXT = ("queue gw : gateway { route { ROUTE } }\n"
             "queue P : prefill { pool kv { cap 10; } serve fifo; prefill (p) { hold kv (p) { run P (p); } cache (p); } }\n"
             "queue D[2] : decode { pool kv { cap 10; } serve step { cost 1; memory kv; }\n"
             "  decode (p) { hold kv (p) { prefill (p) growing kv; } }\n"
             "  decode (p) from src { hold kv (p) { prefill (p) growing kv; } } }\n"
             "workload { arrive batch(1); init { set prompt = 1; set j = 0; } session { request gw; end; } } "
             "run { horizon 1; }")


class _Call:
    @staticmethod
    def format(route: str) -> str:
        return CALL_TEXT.replace("ROUTE", route)


CALL = _Call()
PULLS = """
queue gw : gateway {{ route {{ P.prefill (prompt); Q.prefill (prompt); D.decode (prompt) from {src}; }} }}
queue P : prefill {{ pool kv {{ cap 100; }} serve fifo; {nic}
  prefill (p) {{ hold kv (p) {{ run P (p); }} cache (p) lease kv (inf); }} }}
queue Q : prefill {{ pool kv {{ cap 100; }} serve fifo; nic ps(1);
  prefill (p) {{ hold kv (p) {{ run Q (p); }} cache (p) lease kv (inf); }} }}
queue D : decode {{ pool kv {{ cap 100; }} serve step {{ cost 1; memory kv; }} nic ps(1);
  decode (p) {{ hold kv (p) {{ prefill (p) growing kv; }} }}
  decode (p) from src {{ hold kv (p) {{ transfer (p) from {frm} to kv (p); }} }} }}
{rel}
workload {{ arrive batch(1); init {{ set prompt = 3; }} session {{ request gw; end; }} }} run {{ horizon 10; }}
"""


def pulls(nic: str = "nic ps(1);", rel: str = "D pull P share maxmin;", src: str = "P", frm: str = "src") -> str:
    return PULLS.format(nic=nic, rel=rel, src=src, frm=frm)


@pytest.mark.parametrize("text, needle", [
    # stations and roles
    ("queue gw : gateway { route { } } queue P : prefill { serve fifo; } " + WORKLOAD,
     "plays `prefill` and has no `prefill` entry"),
    ("queue gw : gateway { route { } } queue P { serve fifo; prefill (p) { run P (p); } } " + WORKLOAD,
     "declare `queue P : prefill`"),
    ("queue gw : gateway { route { } } queue P : prefill { serve fifo; prefill (p) { run P (p); } warm (p) { run P (p); } } "
     + WORKLOAD, "not an entry of any role"),
    ("queue gw[2] : gateway { route { } } " + WORKLOAD, "a gateway is one queue"),
    ("queue gw[1] : gateway { route { } } " + WORKLOAD, "a gateway is one queue"),
    ("queue prefill : link { serve fifo; transfer (n) { run prefill (n); } } " + WORKLOAD, "serving word"),
    ("queue gw : gateway { route { } } queue nic : link { } " + WORKLOAD, "has neither a `serve` nor a `transfer` entry"),
    ("queue gw : gateway { route { } } queue P : prefill { serve fifo latency 1; prefill (p) { run P (p); } } " + WORKLOAD,
     "`latency` belongs to the `serve` of a queue that plays `link`"),
    ("queue gw : gateway { route { } } queue nic : link { serve ps(1) latency 1; transfer (n) { run nic (n); } } "
     + WORKLOAD, "write the latency in the entry body"),
    ("queue gw : gateway { route { } } queue nic : link { serve ps(1) latency prompt; } " + WORKLOAD,
     "`latency` is a number or a constant over `let`s"),
    ("queue gw : gateway { route { E.prefill (prompt); } } queue E : prefill { serve step { cost 1; memory kv; } "
     "pool kv { cap 10; } prefill (p) { hold kv (1) { prefill (p) growing kv; } } } " + WORKLOAD, "declares its pools first"),
    ("queue gw : gateway { route { } } queue E[3] : decode { pool kv[2] { cap 100; } serve step { cost 1; memory kv; } "
     "decode (p) { hold kv (p) { prefill (p) growing kv; } } } " + WORKLOAD, "a queue's pool is the member's"),
    ("queue gw : gateway { route { P.prefill (1, 2); } } queue P : prefill { serve fifo; prefill (a, b) { run P (a + b); } } "
     + WORKLOAD, "takes 1 parameter(s), as the role says"),
    # calls
    (CALL.format(route="D.decode (prompt);"), "is a family of 2; index it"),
    (CALL.format(route="P[j].prefill (prompt);"), "is one queue, not a family"),
    (CALL.format(route="D[j].decode (prompt, 1);"), "takes 1 argument(s), got 2"),
    (CALL.format(route="D[j].decode (~exp(1));"), "draws a sample"),
    (CALL.format(route="D[j].warm (prompt);"), "has no such entry"),
    (CALL.format(route="P.prefill (prompt); D[j].decode (prompt) from P;"), "no entry of `P` leases a pool"),
    (CALL.format(route="X.decode (prompt);"), "no queue `X` is declared"),
    ("stage s : fifo; session { observe s = self; end; } run { horizon 1; }", "`self` is a queue entry's word"),
    ("queue gw : gateway { route { observe s = self; } } stage s : fifo; "
     "workload { arrive batch(1); session { request gw; end; } } run { horizon 1; }", "not a family"),
    ("stage s : fifo; session { mark x; end; } run { horizon 1; }", "`mark` is a queue entry's statement"),
    # what an entry sees
    (ENTRY.format(entry="hold kv (prompt + t0) { prefill (1) growing kv; }", gw=""), "the header reads `t0`"),
    (ENTRY.format(entry="hold kv (prompt) { prefill (1) growing kv; observe w = now - t0; }", gw=""),
     "reads `t0`, a session attribute set outside the queue"),
    (ENTRY.format(entry="hold kv (prompt) { prefill (1) growing kv; observe q = holders(gw.kv); }", gw=""),
     "not a pool or stage of `E`"),
    (ENTRY.format(entry="hold kv (prompt) { prefill (1) growing kv; }", gw="observe x = E.late;"),
     "no entry of `E` marks or sets `late`"),
    ("pool shared { cap 100; } queue gw : gateway { route { P.prefill (prompt); } } queue P : prefill { pool kv { cap 100; } "
     "serve fifo; prefill (p) { hold shared (p) { run P (p); } } } " + WORKLOAD, "holds `shared`, which is not a pool of `P`"),
    ("queue gw : gateway { route { A.prefill (prompt); B.decode (prompt); } } queue A : prefill { serve fifo; "
     "prefill (p) { run A (p); mark secret; } } queue B : decode { pool kv { cap 100; } serve step { cost 1; memory kv; } "
     "decode (p) { observe leaked = A.secret; hold kv (p) { prefill (p) growing kv; } } } " + WORKLOAD,
     "reads `A.secret`, another queue's"),
    (CALLS.format(fam="", body="transfer on nic (p + src) from src to kv (p);") + WORKLOAD, "reads `src` as a number"),
    # pull relations
    (pulls(nic=""), "queue `P` has no `nic`"),
    (pulls(rel="D pull P;"), "names how concurrent reads divide the NICs"),
    (pulls(rel="D pull P share maxmin; share bottleneck;"), "`share` is given twice: the pull relation"),
    (pulls(rel=""), "pulls from no queue"),
    (pulls(frm="kv"), "a read takes from the entry's source, `from src`"),
    (pulls(src="Q"), "`D` pulls from `P`, and this entry was called `from Q.kv`"),
    (pulls(rel="D pull P latency ~exp(1) share maxmin;"), "`latency` is a number or a constant over `let`s"),
    ("D pull P share maxmin; " + pulls(rel=""), "no queue `D` is declared above"),
    # requests
    ("queue gw : gateway { route { } } workload { arrive batch(1); session { request; } } run { horizon 1; }",
     "name a gateway with `request NAME;`"),
    ("queue gw : gateway { route { } } workload { arrive batch(1); session { request missing; } } run { horizon 1; }",
     "no queue `missing` is declared"),
    ("queue P : prefill { serve fifo; prefill (p) { run P (p); } } workload { arrive batch(1); session { request P; } } "
     "run { horizon 1; }", "does not play `gateway`"),
    ("queue gw : gateway { route { request gw; } } workload { arrive batch(1); session { request gw; } } run { horizon 1; }",
     "does not request itself"),
])
def test_every_misuse_is_a_clear_error(text: str, needle: str) -> None:
    err = fails(text)
    assert needle in err.render(), err.render()
    assert err.line is not None


def test_entries_that_call_each_other_in_a_cycle_are_an_error() -> None:
    queues = "".join(f"queue Q{k} : prefill {{ serve fifo; prefill (p) {{ Q{(k + 1) % 3}.prefill (p); }} }}\n"
                     for k in range(3))
    err = fails("queue gw : gateway { route { Q0.prefill (1); } }\n" + queues +
                "workload { arrive batch(1); session { request gw; end; } } run { horizon 1; }")
    assert "entries call each other in a cycle" in err.message


def test_an_error_in_an_expansion_points_at_the_call() -> None:
    err = fails("queue gw : gateway { route {\n  D.decode ();\n} }\nqueue D : decode { serve fifo; decode (p) { } }\n"
                "workload { arrive batch(1); session { request gw; end; } }\nrun { horizon 1; }")
    assert "takes 1 argument(s), got 0" in err.message
    assert (err.line, err.col) == (2, 3)


def test_run_without_a_stage_is_the_queues_own() -> None:
    own = load(PULL.replace("hold kv (prompt) { run P (prompt); }", "hold kv (prompt) { run (prompt); }"))
    assert own == load(PULL)
    err = fails("stage s : fifo; session { run (1); end; } run { horizon 1; }")
    assert "a `run` names its stage" in err.message
    err = fails("queue gw : gateway { route { P.prefill (1); } } queue P : prefill { prefill (p) { run (p); } } "
                "workload { arrive batch(1); session { request gw; end; } } run { horizon 1; }")
    assert "`run (…)` in queue `P`, which has no `serve`" in err.message


def test_a_queue_may_serve_and_send_with_delay_stages() -> None:
    # `serve delay;` and `nic delay;` were an internal error (issue 38): a queue station's
    # stage and NIC take every stage kind. One request of 2 s of work on a delay stage,
    # arriving at 0: it ends at 2, whatever else is present.
    src = ("queue P : prefill { serve delay; nic delay; prefill (p) { run (p); } }\n"
           "workload { arrive batch(1); init { set n = 2; } }\n"
           "session { P.prefill (n); observe done = now; }\nrun { horizon 10; }\n")
    report = serq.run(load(src))
    assert report.observe("done").mean == 2.0
    kinds = {s.name: s.kind for s in load(src).stages}
    assert kinds == {"P": "delay", "P.nic": "delay"}


def test_every_rule_the_builder_visits_is_a_rule_of_its_own() -> None:
    # Parsimonious merges a rule that only renames another (`q_delay = kw_delay`) into it, so
    # the node is named after the other rule and a `visit_q_delay` never runs: the builder's
    # visitors must all name rules that keep their own name.
    from serq.frontend.build import Builder
    from serq.frontend.grammar import GRAMMAR

    visited = [n[len("visit_"):] for n in dir(Builder) if n.startswith("visit_")]
    assert [n for n in visited if n not in GRAMMAR] == []
    assert [n for n in visited if GRAMMAR[n].name != n] == []


def test_a_family_sized_by_a_let_is_named_by_its_size_in_an_error() -> None:
    # the size was printed as its syntax tree, with the whole source inside (issue 38)
    src = ("let NP = 2;\n"
           "queue P[NP] : prefill { pool kv { cap 100; } serve fifo; "
           "prefill (p) { hold kv (1) { run (p); } cache (p) lease kv (inf); } }\n"
           "queue D : decode { pool kv { cap 100; } serve fifo; decode (p) { run (p); } decode (p) from src { run (p); } }\n"
           "workload { arrive poisson(0.5); init { set n = 1; } }\n"
           "session { P[0].prefill (n); D.decode (n) from P; observe r = now; }\n")
    assert fails(src).render().splitlines()[0] == "<text>:5:47: `from P`: `P` is a family of NP; index it"
    src = src.replace("P[0].prefill", "P.prefill")
    assert fails(src).render().splitlines()[0] == "<text>:5:11: `P.prefill`: `P` is a family of NP; index it"

"""`release`, `load`, `lease` and `transfer … from … to …` on small scenarios
with hand-computed answers (docs/pd.md, "Leases and transfers")."""

from __future__ import annotations

import pytest

import serq
from serq.errors import SerqError
from frontend_util import fails, load


def run(text: str, **kw: float) -> serq.Report:
    return serq.run(serq.load(text), **kw)


def samples(report: serq.Report, name: str) -> list[float]:
    return [s.value for s in report.samples[name]]


def test_release_gives_the_pool_back_before_the_scope_ends() -> None:
    # two sessions want the whole pool; the first gives it back at 1 and works
    # on for 5: the second (arrived at 1) is admitted at 1, not at 6
    report = run("""
        pool kv { cap 10; }
        stage svc : delay;
        workload { arrive batch(2); }
        session {
          run svc (serial);
          set t0 = now;
          hold kv (10) {
            observe admitted = now - t0;
            run svc (1);
            release kv;
            observe free_after = free(kv);
            run svc (5);
          }
          observe free_at_end = free(kv);
          end;
        }
        run { horizon 100; }""")
    assert samples(report, "admitted") == [0.0, 0.0]
    assert samples(report, "free_after") == [0.0, 10.0]  # session 1 took it at once
    assert samples(report, "free_at_end") == [10.0, 10.0]  # nothing given back twice
    assert report.pool("kv").admissions == 2


def test_release_caches_as_the_scope_end_would() -> None:
    report = run("""
        pool kv { cap 100; }
        stage svc : delay;
        workload { arrive batch(1); }
        session {
          hold kv (8) { run svc (1); release kv; run svc (1); } cache (8);
          hold kv (8) { observe hit = cached; } cache (0);
          end;
        }
        run { horizon 100; }""")
    assert samples(report, "hit") == [8.0]


def test_a_hold_on_two_pools_gives_one_back_early() -> None:
    # the prefiller's pattern: the slot goes at 1, the blocks stay to the end
    report = run("""
        pool slots { cap 1; }
        pool kv { cap 100; }
        stage svc : delay;
        workload { arrive batch(2); }
        session {
          run svc (serial * 0.5);
          hold slots (1), kv (10) {
            observe got_slot = now;
            run svc (1);
            release slots;
            run svc (4);
            observe kv_used = used(kv);
          }
          end;
        }
        run { horizon 100; }""")
    assert samples(report, "got_slot") == [0.0, 1.0]
    assert samples(report, "kv_used") == [20.0, 10.0]  # at 5 both hold 10; at 6 one


def test_load_counts_the_tokens_as_computed() -> None:
    report = run("""
        pool kv { cap 100; }
        stage svc : delay;
        workload { arrive batch(1); }
        session {
          hold kv (40) { run svc (1); load kv (30); } cache (40);
          hold kv (40) { observe hit = cached; } cache (0);
          end;
        }
        run { horizon 100; }""")
    assert samples(report, "hit") == [30.0]  # min(cache 40, computed 30)


def test_loads_add_up_from_the_consumed_prefix() -> None:
    report = run("""
        pool kv { cap 100; block 4; }
        stage svc : delay;
        workload { arrive batch(1); }
        session {
          hold kv (12) { run svc (1); } cache (12);
          hold kv (40) { observe first = cached; load kv (10); load kv (9); } cache (40);
          hold kv (40) { observe second = cached; } cache (0);
          end;
        }
        run { horizon 100; }""")
    assert samples(report, "first") == [12.0]
    assert samples(report, "second") == [28.0]  # 12 + 19 = 31, rounded down to blocks of 4


def test_a_load_past_the_allocation_is_an_error() -> None:
    with pytest.raises(SerqError, match=r"`load kv \(11\)`: the hold has 10 allocated and 0 computed; "
                                        r"a load must fit the allocation"):
        run("""
            pool kv { cap 100; }
            stage svc : delay;
            workload { arrive batch(1); }
            session { hold kv (10) { load kv (11); } end; }
            run { horizon 10; }""")


@pytest.mark.parametrize("stmt", ["release kv;", "load kv (1);", "hold q (1) { release kv; }",
                                  "hold q (1) { load kv (1); }"])
def test_release_and_load_need_an_enclosing_hold(stmt: str) -> None:
    err = fails(f"""
        pool kv {{ cap 10; }} pool q {{ cap 10; }} stage svc : delay;
        workload {{ arrive batch(1); }}
        session {{ {stmt} end; }} run {{ horizon 10; }}""")
    assert "outside a hold of `kv`" in err.message
    assert err.line == 4


@pytest.mark.parametrize("body", ["hold q[0] (1) { load q[1] (1); }", "hold q[j] (1) { release q[0]; }"])
def test_release_and_load_name_the_pool_as_the_hold_does(body: str) -> None:
    err = fails(f"""
        pool q[2] {{ cap 10; }} stage svc : delay;
        workload {{ arrive batch(1); init {{ set j = 0; }} }}
        session {{ {body} end; }} run {{ horizon 10; }}""")
    assert "index included" in err.render()
    load("""
        pool q[2] { cap 10; } stage svc : delay;
        workload { arrive batch(1); init { set j = 0; } }
        session { hold q[j] (1) { run svc (1); release q[j]; } end; } run { horizon 10; }""")


def test_a_lease_names_a_pool_of_its_hold() -> None:
    err = fails("""
        pool a { cap 1; } pool b { cap 1; } stage svc : delay;
        workload { arrive batch(1); }
        session { hold a (1) { run svc (1); } lease b (1); end; } run { horizon 10; }""")
    assert "`lease b`: the hold does not take that pool" in err.message
    assert (err.line, err.col) == (4, 53)
    # a `release` of a leased pool links outside any hold of it; `grow` there does not
    load("""
        pool a { cap 1; } stage svc : delay;
        workload { arrive batch(1); }
        session { hold a (1) { run svc (1); } lease a (1); run svc (1); release a; end; } run { horizon 10; }""")
    err = fails("""
        pool kv { cap 64; } stage d : delay;
        workload { arrive batch(1); }
        session { hold kv (16) { run d (1); } lease kv (5); grow kv (16); end; } run { horizon 10; }""")
    assert "it acts on an enclosing hold's allocation" in err.render()


def test_an_untaken_lease_ends_at_its_bound_and_keeps_its_cache() -> None:
    # session 0 leases the whole pool for 2 s from 1; session 1 (queued at 0.5)
    # gets it at 3, and taking all 10 units evicts session 0's cached 10
    report = run("""
        pool kv { cap 10; }
        stage svc : delay;
        stage gate : delay;
        workload { arrive batch(2); }
        session {
          branch (serial == 0) {
            hold kv (10) { run svc (1); } cache (10) lease kv (2);
            observe leased = used(kv);
            observe holding = holders(kv);
            run svc (5);
            hold kv (10) { observe hit = cached; } cache (0);
          } else {
            run gate (0.5);
            hold kv (10) { observe admitted = now; }
          }
          end;
        }
        run { horizon 100; }""")
    assert samples(report, "leased") == [10.0]
    assert samples(report, "holding") == [1.0]  # a lease is a holder
    assert samples(report, "admitted") == [3.0]
    assert samples(report, "hit") == [0.0]
    assert report.pool("kv").evicted_units == 10


def test_a_lease_ends_with_its_session_and_caches_then() -> None:
    report = run("""
        pool kv { cap 10; }
        stage svc : delay;
        workload { arrive batch(2); }
        session {
          branch (serial == 0) {
            hold kv (10) { run svc (1); } cache (10) lease kv (inf);
            run svc (1);
          } else {
            run svc (0.5);
            hold kv (10) { observe admitted = now; }
          }
          end;
        }
        run { horizon 100; }""")
    assert samples(report, "admitted") == [2.0]  # session 0 ended at 2
    assert report.pool("kv").evicted_units == 10  # what it cached then made room for session 1


def test_a_lease_is_not_a_preemption_victim() -> None:
    # session 0 needs 15 of 20 at t = 1 and 2 while session 1's lease holds 10:
    # the only holder in a scope is the grower, which preempts itself twice
    # (re-admitted at once, 5 fit) and grows at 3, after the lease ended at 2.6
    report = run("""
        pool kv { cap 20; preempt lifo; }
        stage svc : delay;
        workload { arrive batch(2); }
        session {
          branch (serial == 0) {
            hold kv (5) { run svc (1); grow kv (10); observe grew = now; run svc (1); }
          } else {
            run svc (0.5);
            hold kv (10) { run svc (0.1); } lease kv (inf);
            run svc (2);
            release kv;
            observe released = now;
          }
          end;
        }
        run { horizon 100; }""")
    assert report.pool("kv").preemptions == 2
    assert samples(report, "released") == pytest.approx([2.6], abs=1e-12)
    assert samples(report, "grew") == [3.0]


def test_a_release_in_the_body_leaves_nothing_to_lease() -> None:
    report = run("""
        pool kv { cap 10; }
        stage svc : delay;
        workload { arrive batch(2); }
        session {
          run svc (serial * 0.5);
          hold kv (10) { run svc (1); release kv; } lease kv (inf);
          observe at = now;
          run svc (10);
          end;
        }
        run { horizon 100; }""")
    assert samples(report, "at") == [1.0, 2.0]


def test_a_bad_lease_time_is_an_error() -> None:
    with pytest.raises(SerqError, match=r"^<text>:5:77: `lease kv \(x\)`: the time is NaN"):
        run("""
            pool kv { cap 10; }
            stage svc : delay;
            workload { arrive batch(1); }
            session { set x = 0 / 0; hold kv (1) { run svc (1); } lease kv (x); end; }
            run { horizon 10; }""")


TRANSFER = """
pool memP { cap 10; }
pool memD { cap 10; }
stage prefill : delay;
stage link : delay;
stage decode : delay;
stage gate : delay;
workload { arrive batch(3); init { set kind = serial; } }
session {
  branch (kind == 0) {
    hold memP (10) { prefill (1); } lease memP (inf);
    hold memD (10) {
      transfer (1) from memP to memD (10);
      observe p_holders = holders(memP);
      observe d_used = used(memD);
      decode (1);
    }
  }
  branch (kind == 1) { run gate (0.5); hold memP (10) { observe p_admitted = now; } }
  branch (kind == 2) { run gate (1.5); hold memD (10) { observe d_admitted = now; } }
  end;
}
run { horizon 100; }
"""


def test_a_transfer_holds_both_pools_for_the_link_run() -> None:
    # prefill 0–1 on memP, leased; memD admitted at 1, the link 1–2, then memP
    # goes (session 1, queued at 0.5, takes it at 2) and the decode 2–3 on memD
    # (session 2, queued at 1.5, gets memD at 3)
    report = run(TRANSFER)
    assert samples(report, "p_holders") == [1.0]
    assert samples(report, "d_used") == [10.0]
    assert samples(report, "p_admitted") == [2.0]
    assert samples(report, "d_admitted") == [3.0]


def test_transfer_is_three_kernel_statements() -> None:
    head = "pool memP { cap 10; } pool memD { cap 10; } stage link : delay; workload { arrive batch(1); }"
    a = load(head + " session { hold memP (10) { hold memD (10) { transfer (1) from memP to memD (9); } } end; }"
                    " run { horizon 10; }")
    b = load(head + " session { hold memP (10) { hold memD (10) { run link (1); load memD (9); release memP; } } "
                    "end; } run { horizon 10; }")
    strip = lambda p: [type(x).__name__ for x in p.session[0].body[0].body]  # noqa: E731
    assert strip(a) == strip(b) == ["Run", "Load", "Release"]
    assert a.session[0].body[0].body[1:] == b.session[0].body[0].body[1:]
    assert a.session[0].body[0].body[0].work == b.session[0].body[0].body[0].work


@pytest.mark.parametrize("text, message", [
    ("transfer (1);", "a `transfer` names where the KV goes"),
    ("transfer (1) from a to b (1) growing b;", "expected `;`"),
])
def test_transfer_forms_that_do_not_parse(text: str, message: str) -> None:
    err = fails(f"""pool a {{ cap 1; }} pool b {{ cap 1; }} stage link : delay;
        workload {{ arrive batch(1); }}
        session {{ hold a (1) {{ hold b (1) {{ {text} }} }} end; }} run {{ horizon 1; }}""")
    assert message in err.render()


def test_transfer_finds_its_link_stage() -> None:
    err = fails("""pool a { cap 1; } pool b { cap 1; } stage svc : delay;
        workload { arrive batch(1); }
        session { hold a (1) { hold b (1) { transfer (1) from a to b (1); } } end; } run { horizon 1; }""")
    assert "no stage declared above plays `transfer`" in err.message
    assert "`link` (or `transfer`)" in err.render()


def test_decoder_pressure_backs_up_into_the_prefiller() -> None:
    # a decoder of one request at a time, prefills of 0.1 s: with the lease the
    # prefiller's 20 units are two requests waiting for the decoder, so by t = 15
    # only what the decoder drained was prefilled; store-and-forward prefills all six
    lease = """
        pool memP { cap 20; } pool memD { cap 10; }
        stage prefill : delay; stage link : delay; stage decode : delay; stage gate : delay;
        workload { arrive batch(6); }
        session {
          run gate (serial * 0.01);
          hold memP (10) { prefill (0.1); observe prefilled = serial; } lease memP (inf);
          hold memD (10) { transfer (0.1) from memP to memD (10); decode (10); }
          end;
        }
        run { horizon 15; }"""
    buffered = """
        pool memP { cap 20; } pool memD { cap 10; }
        stage prefill : delay; stage link : delay; stage decode : delay; stage gate : delay;
        workload { arrive batch(6); }
        session {
          run gate (serial * 0.01);
          hold memP (10) { prefill (0.1); observe prefilled = serial; run link (0.1); }
          hold memD (10) { decode (10); }
          end;
        }
        run { horizon 15; }"""
    # leased: 0 and 1 prefilled at once; 0 reads at 0.1–0.2 and frees its lease,
    # so 2 prefills; 1 waits for memD until 0's decode ends at 10.2, then 3 prefills
    assert samples(run(lease), "prefilled") == [0.0, 1.0, 2.0, 3.0]
    assert len(samples(run(buffered), "prefilled")) == 6


def test_a_re_executed_hold_releases_nothing_twice() -> None:
    report = run("""
        pool memP { cap 100; }
        pool memD { cap 20; block 10; preempt lifo; }
        stage link : delay;
        stage engine : step { budget 100; cost 1; memory memD; }
        workload { arrive batch(1); }
        session {
          hold memP (10) {
            hold memD (10) {
              transfer (1) from memP to memD (10);
              observe p_free = free(memP);
              run engine decode (25) growing memD;
            }
          }
          end;
        }
        run { horizon 30; }""")
    free = samples(report, "p_free")
    assert len(free) > 1 and all(f == 100.0 for f in free)
    assert report.pool("memD").preemptions > 0


def test_release_ends_the_oldest_lease() -> None:
    # two leases on one pool (10 and 20 units); a `release` outside any hold ends the
    # older: 20 units stay used, and the second `release` frees the rest
    report = run("""
        pool kv { cap 100; }
        stage svc : delay;
        workload { arrive batch(1); }
        session {
          hold kv (10) { run svc (1); } lease kv (inf);
          hold kv (20) { run svc (1); } lease kv (inf);
          observe both = used(kv);
          release kv;
          observe after_one = used(kv);
          release kv;
          observe after_two = used(kv);
          end;
        }
        run { horizon 10; }""")
    assert samples(report, "both") == [30.0]
    assert samples(report, "after_one") == [20.0]
    assert samples(report, "after_two") == [0.0]

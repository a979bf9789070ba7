"""`spill TIER via LINK (work) when (pred)` and the online estimates on small
scenarios with hand-computed answers (docs/offload.md)."""

from __future__ import annotations

import math

import pytest

import serq
from serq.errors import SerqError
from serq.sim.pool import Pool


def run(text: str, **kw: float) -> serq.Report:
    return serq.run(serq.load(text), **kw)


def samples(report: serq.Report, name: str) -> list[float]:
    return [s.value for s in report.samples[name]]


# the Rust serQ's scenario (tests/pool_semantics.rs): s0's 20 spill when s1 is admitted, s1's 25
# when s0 comes back; s0 fetches its 20 back over the link and drops them
FETCH_BACK = """
    pool kv { cap 30; evict lru; spill tier via link (size / 100) when (size >= 20); }
    pool tier { cap inf; }
    stage svc : fifo;
    stage link : fifo;
    stage gate : delay;
    workload { arrive batch(2); init { set c = serial == 0 ? 20 : 25; } }
    session {
      run gate (serial);
      hold kv (c) { run svc (1); } cache (c);
      run gate (5);
      branch (serial == 0) {
        observe in_tier = cachedin(tier);
        branch (cachedin(tier) > 0) { run link (cachedin(tier) / 100); observe fetched = 1; drop tier; }
        observe after_drop = cachedin(tier);
        hold kv (c) { run svc (0.1); }
      }
      end;
    }
    run { horizon 100; }
"""


def test_a_spill_and_a_fetch_back_count_pieces_spills_and_link_jobs() -> None:
    r = run(FETCH_BACK)
    assert samples(r, "in_tier") == [20.0]
    assert samples(r, "fetched") == [1.0]
    assert samples(r, "after_drop") == [0.0]
    kv, tier = r.pool("kv"), r.pool("tier")
    assert kv.spills == 2 and kv.evicted_entries == 2 and kv.evicted_units == 45.0
    assert tier.spills == 0 and tier.evicted_units == 0.0
    link = r.stage("link")
    assert link.completed == 3  # two spills and one fetch
    # the spills' work is size / 100: 0.20 (s0's 20 at t = 1) and 0.25 (s1's 25 at 6.2, when s0
    # comes back after its fetch of 0.20)
    assert link.mean_service == pytest.approx((0.20 + 0.25 + 0.20) / 3, rel=1e-12)
    # in the tier: s0's 20 from 1 until its drop at 6.2, then s1's 25 to the horizon
    assert tier.mean_cached == pytest.approx((20 * 5.2 + 25 * 93.8) / 100, rel=1e-12)


def _waiting(when: str) -> serq.Report:
    # s0 caches 6 and queues at 1.1 for 20 behind s1's 24; s2, first by priority, takes 6 at 1.2
    # and evicts s0's entry while s0 waits
    return run(f"""
        pool kv {{ cap 30; evict lru; queue by (pri); spill tier via link (1) when ({when}); }}
        pool tier {{ cap inf; }}
        stage svc : fifo(3);
        stage link : fifo;
        stage gate : delay;
        workload {{ arrive batch(3); init {{ set pri = serial == 2 ? 0 : 1; }} }}
        session {{
          branch (serial == 0) {{
            hold kv (6) {{ run svc (0.5); }} cache (6);
            run gate (0.6);
            hold kv (20) {{ run svc (0.1); }}
          }}
          branch (serial == 1) {{ run gate (0.5); hold kv (24) {{ run svc (10); }} }}
          branch (serial == 2) {{ run gate (1.2); hold kv (6) {{ run svc (1); }} }}
          end;
        }}
        run {{ horizon 100; }}""")


@pytest.mark.parametrize("when, spills", [("waiting", 1), ("!waiting", 0)])
def test_a_spill_predicate_reads_whether_the_owner_waits(when: str, spills: int) -> None:
    r = _waiting(when)
    assert r.pool("kv").spills == spills
    assert r.pool("kv").evicted_entries == 1
    assert r.stage("link").completed == spills


BLOCKS = """
    pool kv { cap 100; block 10; evict lru; spill tier via link (size / 1000) when (1); }
    pool tier { cap inf; }
    stage svc : fifo;
    stage link : fifo;
    stage gate : delay;
    workload { arrive batch(2); }
    session {
      run gate (serial);
      // s0 caches 50 (five blocks); s1 takes 70 at t = 1: two blocks go from s0's tail, one at a time
      hold kv (serial == 0 ? 55 : 70) { run svc (1); } cache (serial == 0 ? 55 : 0);
      run gate (10);
      branch (serial == 0) { observe gpu = cachedin(kv); observe host = cachedin(tier); }
      end;
    }
    run { horizon 100; }
"""


def test_a_pool_with_blocks_spills_block_by_block_from_the_tail() -> None:
    r = run(BLOCKS)
    assert samples(r, "gpu") == [30.0]
    assert samples(r, "host") == [20.0]
    kv = r.pool("kv")
    assert (kv.spills, kv.evicted_units, kv.evicted_entries) == (2, 20.0, 0)
    link = r.stage("link")
    assert link.completed == 2
    assert link.mean_service == pytest.approx(0.01, rel=1e-12)  # each job one block: 10 / 1000
    assert link.mean_wait == pytest.approx(0.005, rel=1e-12)  # the second waits for the first


def test_every_pool_keeps_used_plus_cached_within_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    # a chat on a small GPU pool over a small host tier that itself spills to a disk: every
    # record of every pool (after each change) has used + cached <= cap
    seen: list[tuple[str, float, float, float]] = []
    record = Pool.record

    def checked(self: Pool, now: float | None = None) -> None:
        seen.append((self.label, self.used, self.cache.total, self.cap))
        record(self, now)

    monkeypatch.setattr(Pool, "record", checked)
    r = run("""
        pool kv { cap 400; block 16; evict lru; spill host via d2h (size * 0.001) when (1); }
        pool host { cap 600; block 16; spill disk via io (size * 0.01) when (age < 50); }
        pool disk { cap 2000; }
        stage svc : ps(2);
        stage d2h : fifo;
        stage io : fifo;
        stage think : delay;
        workload { arrive poisson(0.5); init { set ctx = 0; } }
        session {
          set p = floor(~uniform(16, 200));
          hold kv (ctx + p - hit + 16) at admission (hit = min(cachedin(kv), ctx)) {
            set far = min(cachedin(host), ctx - min(cached, ctx));
            branch (far > 0) { run d2h (far * 0.001); }
            drop host;
            run svc (0.05);
          } cache (ctx + p);
          set ctx = ctx + p;
          branch with (0.8) { run think (~exp(3)); turn; } else { end; }
        }
        run { horizon 300; }
    """, seed=3)
    assert r.pool("kv").spills > 50 and r.pool("host").spills > 5
    assert r.pool("host").evicted_units > 0 and r.pool("disk").mean_cached > 0
    bad = [x for x in seen if x[1] + x[2] > x[3] + 1e-9]
    assert not bad, bad[:3]


def test_a_piece_the_tier_cannot_hold_is_lost_without_a_spill() -> None:
    # the tier holds 5, a piece is 10: evicted as if there were no tier
    r = run(BLOCKS.replace("pool tier { cap inf; }", "pool tier { cap 5; }"))
    assert samples(r, "host") == [0.0]
    assert r.pool("kv").spills == 0 and r.pool("kv").evicted_units == 20.0
    assert r.stage("link").completed == 0


def test_the_tier_makes_room_by_its_own_eviction_and_spills_down_again() -> None:
    # three sessions cache 20 each on a pool of 30 over a tier of 25 over a disk:
    # each admission spills the previous entry; the tier evicts the older one to the disk
    r = run("""
        pool kv { cap 30; spill host via link (1) when (1); }
        pool host { cap 25; spill disk via io (2) when (1); }
        pool disk { cap inf; }
        stage svc : fifo;
        stage link : fifo;
        stage io : fifo;
        stage gate : delay;
        workload { arrive batch(3); }
        session {
          run gate (serial);
          hold kv (20) { run svc (0.5); } cache (20);
          run gate (10);
          observe where = cachedin(kv) + 10 * cachedin(host) + 100 * cachedin(disk);
          end;
        }
        run { horizon 100; }
    """)
    # s0's 20 go to host at 1; s1's 20 at 2 push s0's 20 down to the disk; s2's 20 stay in kv
    assert sorted(samples(r, "where")) == [20.0, 200.0, 2000.0]
    assert (r.pool("kv").spills, r.pool("host").spills) == (2, 1)
    assert (r.stage("link").completed, r.stage("io").completed) == (2, 1)


def test_an_ended_sessions_entry_spills_too() -> None:
    # s0 ends at 1 with 20 cached; s1's admission at 2 evicts the entry, which spills
    r = run("""
        pool kv { cap 30; spill host via link (1) when (1); }
        pool host { cap inf; }
        stage svc : fifo;
        stage link : fifo;
        stage gate : delay;
        workload { arrive batch(2); }
        session { run gate (2 * serial); hold kv (20) { run svc (1); } cache (20); end; }
        run { horizon 100; }
    """)
    assert r.pool("kv").spills == 1 and r.stage("link").completed == 1
    assert r.pool("host").mean_cached == pytest.approx(20 * 98 / 100, rel=1e-12)


@pytest.mark.parametrize("clause, message", [
    ("spill host via link (1) when (0 / 0)", "`when (…)` is NaN, neither true nor false"),
    ("spill host via link (-1) when (1)", "the amount is -1, not a number of units, tokens or seconds"),
])
def test_a_bad_predicate_or_work_is_a_clear_run_time_error(clause: str, message: str) -> None:
    with pytest.raises(SerqError) as info:
        run(f"""
            pool kv {{ cap 30; {clause}; }}
            pool host {{ cap inf; }}
            stage svc : fifo;
            stage link : fifo;
            workload {{ arrive batch(2); }}
            session {{ hold kv (20) {{ run svc (1); }} cache (20); end; }}
            run {{ horizon 100; }}
        """)
    assert "pool `kv`: `spill host via link (…)`" in str(info.value) and message in str(info.value)


def test_draws_in_a_spill_come_from_the_eviction_stream() -> None:
    # the same seed gives the same spills, another seed others; the sessions' own draws do not move
    text = BLOCKS.replace("when (1)", "when (~bernoulli(0.5))")
    a, b = run(text, seed=1), run(text, seed=1)
    assert a.text() == b.text()
    spills = {run(text, seed=s).pool("kv").spills for s in range(1, 12)}
    assert spills == {0, 1, 2}


# ---------------------------------------------------------------- the online estimates

def test_estimates_follow_the_completions_hand_computed() -> None:
    # three jobs of 1 at t = 0 on a fifo: they start at 0, 1, 2 and wait 0, 1, 2; each session
    # reads the estimates after its own job, so after 1, 2 and 3 completions
    r = run("""
        stage svc : fifo;
        workload { arrive batch(3); }
        session {
          run svc (1);
          observe lam = est_lambda(svc);
          observe rho = est_rho(svc);
          observe w = est_wait(svc);
          observe p = price(svc, 1, 0.5);
          end;
        }
        run { horizon 10; }
    """)
    assert samples(r, "lam") == [0.0, 1.0, 1.0]  # no gap yet; then 1; then 0.99 * 1 + 0.01 * 1
    assert samples(r, "rho") == [0.0, 0.99, 0.99]  # min(λ ŝ = 1, 0.99)
    w = [0.0, 0.01, 0.99 * 0.01 + 0.01 * 2]
    assert samples(r, "w") == pytest.approx(w, rel=1e-12)
    # ds + λ (s_m² − s_h²) / (2 (1 − ρ)) + λ W ds / (1 − ρ)
    price = [0.5] + [0.5 + (1.5 ** 2 - 1) / (2 * 0.01) + x * 0.5 / 0.01 for x in w[1:]]
    assert samples(r, "p") == pytest.approx(price, rel=1e-9)


def test_est_lambda_is_one_over_the_gaps_between_service_starts_not_completions() -> None:
    # docs/offload.md and docs/language.md: λ̂ is 1 over the weighted mean (weight a = 0.01) of
    # "the gap between the service starts of successive completions". Three jobs at t = 0 on
    # one fifo server, works 1, 3, 2 (by serial):
    #   job   start  completion  wait
    #   s0      0        1         0
    #   s1      1        4         1
    #   s2      4        6         4
    # Each session reads the estimates just after its own completion (t = 1, 4, 6):
    #   after s0: no gap yet                         -> λ̂ = 0,             ρ̂ = 0
    #   after s1: gap = 1 - 0 = 1                     -> λ̂ = 1
    #   after s2: gap = 0.99·1 + 0.01·(4 - 1) = 1.02  -> λ̂ = 1 / 1.02
    # Between completions instead the gaps are 4 - 1 = 3 and 6 - 4 = 2: λ̂ = 1/3, then
    # 1 / (0.99·3 + 0.01·2) = 1/2.99.
    # ŝ = 1, then 0.99·1 + 0.01·3 = 1.02, then 0.99·1.02 + 0.01·2 = 1.0298; ρ̂ = min(λ̂ ŝ, 0.99):
    #   0, min(1.02, 0.99) = 0.99, min(1.0298 / 1.02, 0.99) = 0.99
    # (from completions: 1.02 / 3 = 0.34, then 1.0298 / 2.99 = 0.3444…).
    # Ŵ = 0, then 0.99·0 + 0.01·1 = 0.01, then 0.99·0.01 + 0.01·4 = 0.0499.
    r = run("""
        stage svc : fifo;
        workload { arrive batch(3); init { set w = serial == 0 ? 1 : serial == 1 ? 3 : 2; } }
        session {
          run svc (w);
          observe t = now;
          observe lam = est_lambda(svc);
          observe rho = est_rho(svc);
          observe w = est_wait(svc);
          end;
        }
        run { horizon 10; }
    """)
    a = 0.01
    assert samples(r, "t") == [1.0, 4.0, 6.0]
    lam = samples(r, "lam")
    assert lam[:2] == [0.0, 1.0]  # 1 over a gap of 1 between starts, not 1/3 over the completions' 3
    assert lam[2] == pytest.approx(1.0 / ((1 - a) * 1.0 + a * 3.0), rel=1e-12)  # 1 / 1.02
    assert samples(r, "rho") == [0.0, 0.99, 0.99]
    assert samples(r, "w") == pytest.approx([0.0, a * 1.0, (1 - a) * a + a * 4.0], rel=1e-12)


def test_ps_and_delay_stages_feed_the_sojourn_as_service_and_no_wait() -> None:
    # two jobs of 1 share a ps(1) from t = 0: both end at 2, sojourn 2, wait 0
    r = run("""
        stage svc : ps(1);
        workload { arrive batch(2); }
        session { run svc (1); observe w = est_wait(svc); observe rho = est_rho(svc); end; }
        run { horizon 10; }
    """)
    assert samples(r, "w") == [0.0, 0.0]
    assert samples(r, "rho") == [0.0, 0.0]  # both started at 0: the gap is 0, no rate


def test_estimates_on_mm1_converge_to_lambda_rho_and_w() -> None:
    # M/M/1 at λ = 0.5, μ = 1: ρ = 0.5, W = ρ / (μ − λ) = 1; the estimates averaged over the run
    r = run("""
        stage svc : fifo;
        workload { arrive poisson(0.5); }
        session {
          run svc (~exp(1));
          observe lam = est_lambda(svc);
          observe rho = est_rho(svc);
          observe w = est_wait(svc);
          end;
        }
        run { horizon 40000; warmup 2000; }
    """, seed=7)
    lam, rho, w = (r.observe(n) for n in ("lam", "rho", "w"))
    # the EWMA of weight 0.01 averages ~100 jobs: its run mean is within noise of the truth
    assert abs(lam.mean - 0.5) < 3 * lam.ci + 0.01
    assert abs(rho.mean - 0.5) < 3 * rho.ci + 0.01
    assert abs(w.mean - 1.0) < 3 * w.ci + 0.03
    assert lam.ci < 0.02 and w.ci < 0.1


def test_an_estimate_without_completions_is_zero_and_price_is_ds() -> None:
    r = run("""
        stage svc : fifo;
        workload { arrive batch(1); }
        session { observe x = est_lambda(svc) + est_rho(svc) + est_wait(svc); observe p = price(svc, 2, 3); end; }
        run { horizon 1; }
    """)
    assert samples(r, "x") == [0.0] and samples(r, "p") == [3.0]


def test_a_router_reads_the_estimates() -> None:
    # two replicas; the router sends each request to the replica with the smaller estimated wait
    r = run("""
        stage gpu[2] : fifo;
        workload { arrive poisson(1.5); }
        session {
          choose j in 2 by (est_wait(gpu[j]), queue(gpu[j]));
          run gpu[j] (~exp(1));
          end;
        }
        run { horizon 2000; warmup 200; }
    """)
    a, b = r.stage("gpu[0]"), r.stage("gpu[1]")
    assert a.completed > 500 and b.completed > 500
    assert math.isfinite(a.mean_wait) and math.isfinite(b.mean_wait)

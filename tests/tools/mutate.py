"""Mutation audit: small deliberate bugs in ``serq/``, one at a time, each run
against the tests that must catch it (issue 26).

    python tests/tools/mutate.py                 # every mutation; exit 1 on a survivor
    python tests/tools/mutate.py --list          # the mutations, the tests each runs, any stale one
    python tests/tools/mutate.py --only reuse-ignored --only lifo-victim
    python tests/tools/mutate.py --no-baseline   # skip the unmutated run of the tests
    python tests/tools/mutate.py --keep          # keep the scratch copy (its path is printed)

What it does.  It copies ``serq/``, ``tests/``, ``programs/``, ``lib/``, ``docs/``,
``benchmarks/``, ``README.md`` and ``pyproject.toml`` to a temporary directory
(no ``__pycache__``), checks that Python started there with ``PYTHONPATH`` set to it
imports *that* ``serq`` (the editable install points at the working tree, which must
stay untouched), runs every mutation's tests once unmutated (a test that already
fails would make every mutation look caught), and then, for each mutation: writes
its text replacements into the copy, runs its tests there with this interpreter
(``python -m pytest -x``, ``PYTHONDONTWRITEBYTECODE=1`` so that no stale bytecode
outlives a mutation), restores the file, and prints ``caught`` (some test failed)
or ``SURVIVED`` (all passed) with the seconds it took.

A mutation is a list of exact replacements ``(file, old, new)``; ``old`` must occur
exactly once in the file as it is now.  When the code moves and an ``old`` is no
longer found (or is found twice), the mutation is reported ``STALE`` and the run
fails: update the text here so the audit keeps testing what it says.  Exit status 0
only when every mutation was caught; 1 if one survived, is stale, or the unmutated
tests failed.  The tests named for each mutation compare against values worked out
by hand or against an independent reference, never against a golden report or a
pasted output (those catch everything and explain nothing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPIED = ["serq", "tests", "programs", "lib", "docs", "benchmarks", "README.md", "pyproject.toml"]
TIMEOUT = 1800  # seconds for one pytest run; a mutation that makes a test hang counts as caught


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str  # the bug, in words
    edits: tuple[tuple[str, str, str], ...]  # (file, old text, new text)
    tests: tuple[str, ...]  # pytest node ids (files, or file::test)


MUTATIONS = [
    # -- the survivors of the first audit (issue 26) ------------------------------------------
    Mutation(
        "reuse-ignored",
        "a hold's `reuse` bound is a no-op: the whole cached prefix is read, nothing goes dead",
        (("serq/sim/holds.py", "                            if own > bound:\n",
          "                            if own > bound and False:\n"),),
        ("tests/sim/test_reuse_bound.py", "tests/programs/test_replay_figures.py"),
    ),
    Mutation(
        "fifo-service-counts-wait",
        "a fifo stage's `service` is measured from the job's arrival, not the start of its service",
        (("serq/sim/stages/queueing.py", "            self.service_sum += now - job.started\n",
          "            self.service_sum += now - job.enqueued\n"),),
        ("tests/sim/test_stage_table.py",),
    ),
    Mutation(
        "exp-1pc-long",
        "every `~exp(m)` draw is 1 % longer than it should be",
        (("serq/expr.py", "    return -mean * _log(1.0 - g.random())\n",
          "    return -1.01 * mean * _log(1.0 - g.random())\n"),),
        ("tests/sim/test_distributions.py::test_a_draws_mean_and_variance",),
    ),
    # -- the mutations the first audit found caught ---------------------------------------------
    Mutation(
        "lru-newest-first",
        "LRU eviction drains the most recently released entry first (every path: the scan, the bulk drain)",
        (("serq/sim/cache.py", "            serial = next(iter(entries))\n",
          "            serial = next(reversed(entries))\n"),
         ("serq/sim/cache.py", "                    key = next(iter(entries))\n",
          "                    key = next(reversed(entries))\n"),
         ("serq/sim/cache.py", "\n                key = next(iter(entries))\n                e = entries[key]\n",
          "\n                key = next(reversed(entries))\n                e = entries[key]\n")),
        ("tests/sim/test_pool_semantics.py", "tests/sim/test_eviction_bulk.py"),
    ),
    Mutation(
        "cache-rounds-up",
        "cached amounts round up to whole blocks instead of down",
        (("serq/sim/pool.py", "            return math.floor(x / b + EPS) * b\n",
          "            return math.ceil(x / b - EPS) * b\n"),),
        ("tests/sim/test_reuse_bound.py", "tests/sim/test_pool_semantics.py"),
    ),
    Mutation(
        "warmup-keeps-pool-averages",
        "the end of warm-up does not restart the pools' time averages",
        (("serq/sim/simulator.py", "                avg.reset(now)\n", "                pass\n"),),
        ("tests/sim/test_reuse_bound.py",),
    ),
    Mutation(
        "percentile-rank-floor",
        "p50/p90/p95/p99 take the sample of rank floor(q·n) instead of ceil(q·n)",
        (("serq/sim/stats.py", "(ordered[min(max(-(-q * n // 100), 1), n) - 1] for q in",
          "(ordered[min(max(q * n // 100, 1), n) - 1] for q in"),),
        ("tests/sim/test_stats.py",),
    ),
    Mutation(
        "lifo-victim-oldest",
        "`preempt lifo` preempts the resident admitted first instead of last",
        (("serq/sim/holds.py", "(best is None or s.adm_seq > best.adm_seq)",
          "(best is None or s.adm_seq < best.adm_seq)"),),
        ("tests/sim/stages/test_step_oracle.py", "tests/sim/stages/test_step_semantics.py"),
    ),
    Mutation(
        "chunk-ignored",
        "a step stage's `chunk` does not cap a prefilling resident's tokens",
        (("serq/sim/stages/step.py", "        if chunk > 0.0 and chunk < job.work:\n",
          "        if chunk > 0.0 and chunk < job.work and False:\n"),),
        ("tests/sim/stages/test_step_oracle.py", "tests/sim/stages/test_step_semantics.py"),
    ),
    Mutation(
        "join-one-early",
        "`join` wakes the parent when one child is still running",
        (("serq/sim/session.py", "        if w[0] == 0 and w[1] is not None:\n",
          "        if w[0] <= 1 and w[1] is not None:\n"),),
        ("tests/sim/test_spawn.py",),
    ),
    Mutation(
        "shared-prefix-straddling-block",
        "a block that straddles a segment boundary of a shared prefix is shared by chains that differ after it",
        (("serq/sim/prefix.py", "            end = self.down(bound)\n", "            end = bound\n"),),
        ("tests/sim/test_shared_prefix.py",),
    ),
    Mutation(
        "sweep-t-quantile-df",
        "the across-seed interval uses Student's t with n degrees of freedom instead of n − 1",
        (("serq/experiments/stats.py", "t_quantile(0.5 + level / 2.0, n - 1)", "t_quantile(0.5 + level / 2.0, n)"),),
        ("tests/experiments/test_sweep_stats.py",),
    ),
    Mutation(
        "trace-window-closed",
        "`serq trace import --duration D` keeps a request at exactly start + D (the window is [start, start + D))",
        (("serq/traces/convert.py", "                if end_d is not None and rel >= end_d:\n",
          "                if end_d is not None and rel > end_d:\n"),),
        ("tests/traces/test_trace_import.py",),
    ),
    # -- issue 21: whole rounds of a drain by `-size` ---------------------------------------------
    Mutation(
        "rounds-ignore-next-in-line",
        "a drain by `-size` takes whole rounds past the entry that should come in between",
        (("serq/sim/cache.py", "        if (full or part) and self._top(heap):  # the next in line",
          "        if False and (full or part) and self._top(heap):  # the next in line"),),
        ("tests/sim/test_eviction_bulk.py::test_a_drain_by_minus_size_takes_whole_rounds_as_block_by_block",),
    ),
    Mutation(
        "evict-key-memo-ignores-waiting",
        "an `evict by` key kept from an earlier read is reused after its owner started or stopped waiting",
        (("serq/sim/cache.py", "                if m is not None and m[0] == e.size and m[1] == w:\n",
          "                if m is not None and m[0] == e.size:\n"),),
        ("tests/sim/test_eviction_bulk.py::test_a_kept_heap_lasts_across_evictions_as_block_by_block",),
    ),
    Mutation(
        "kept-heap-untold",
        "the lasting heap of kept `evict by` keys is not told when an owner starts or stops waiting",
        (("serq/sim/cache.py", "            self._dirty.append((self.entries, serial))\n", "            pass\n"),),
        ("tests/sim/test_eviction_bulk.py::test_a_kept_heap_lasts_across_evictions_as_block_by_block",),
    ),
    # -- issue 22: gauges, aggregates, routers, --find-min -----------------------------------
    Mutation(
        "gauge-keeps-the-first-reading-of-an-instant",
        "a gauge read again at the same instant keeps its first value, not the one the instant ends with",
        (("serq/sim/gauges.py", "        if t == now:\n            pts.pop()\n",
          "        if t == now:\n            return\n"),),
        ("tests/sim/test_gauges.py::test_the_last_reading_of_an_instant_stands",),
    ),
    Mutation(
        "gauge-skips-run-growths",
        "a coalesced run's growths are not read by the gauges (the run replays in one step)",
        (("serq/sim/pool.py", "        after: list[tuple[float, float]] | None = [] if self.gauged else None\n",
          "        after: list[tuple[float, float]] | None = None\n"),),
        ("tests/sim/test_gauges.py::test_coalesced_runs_give_the_gauges_of_iteration_by_iteration",),
    ),
    Mutation(
        "gauge-short-span-divides-by-zero",
        "a gauge over a span too short for 20 windows divides by a window of no width",
        (("serq/sim/gauges.py", "    if min(widths) > 0.0:\n", "    if True:\n"),),
        ("tests/sim/test_gauges.py::test_a_span_too_short_for_twenty_windows_has_no_interval",),
    ),
    Mutation(
        "gauge-ci-over-all-windows-but-one",
        "the gauge's batch means drop the last window",
        (("serq/sim/gauges.py", "        means = [_fsum(p) / d for p, d in zip(pieces, widths)]\n",
          "        means = [_fsum(p) / d for p, d in zip(pieces[:-1], widths)] * 2\n"),),
        ("tests/sim/test_gauges.py::test_the_interval_is_batch_means_over_20_windows",),
    ),
    Mutation(
        "aggregate-max-is-sum",
        "`max j in n (e)` adds its terms",
        (("serq/frontend/resolve.py",
          "        return terms[0] if len(terms) == 1 else ir.Call(e.op, tuple(terms))\n",
          "        return terms[0] if len(terms) == 1 else ir.Call(\"sum\" if e.op == \"max\" else e.op, tuple(terms))\n"),),
        ("tests/frontend/test_gauges_aggregates.py::test_an_aggregate_is_its_terms_written_out",),
    ),
    Mutation(
        "find-min-answers-lo",
        "--find-min answers the end of the bracket that failed",
        (("serq/experiments/search.py", "    result.value = result.lo if up else result.hi\n",
          "    result.value = result.lo\n"),),
        ("tests/experiments/test_sweep_find_min.py::test_find_min_finds_the_fewest_replicas",),
    ),
    Mutation(
        "round-robin-by-session-only",
        "round robin ignores the turn: a session's turns all go to one replica",
        (("lib/routers.sq", "abs(j - ((serial + turn_no) - n * floor((serial + turn_no) / n)))",
          "abs(j - ((serial + 0) - n * floor((serial + 0) / n)))"),),
        ("tests/sim/test_routing.py::test_round_robin_walks_round_the_replicas",),
    ),
    # -- runs that pass over other engines' events (serq/sim/lazy.py) ---------------------------
    Mutation(
        "lazy-tie-ignored",
        "a timer set at a passing run's end leaves the run as it is: the tie is ordered by the run's plan",
        (("serq/sim/lazy.py", "        engine = self.at.get(t)\n", "        engine = None\n"),),
        ("tests/sim/test_lazy_runs.py::test_no_event_ever_falls_on_a_passing_runs_iteration_end",),
    ),
    Mutation(
        "lazy-tie-skips-latest",
        "a timer set at an end of the latest passing run (its ends not yet in the dictionary) leaves it as it is",
        (("serq/sim/lazy.py", "(engine,) if engine is not None else self.unindexed:",
          "(engine,) if engine is not None else ():"),),
        ("tests/sim/test_lazy_runs.py::test_no_event_ever_falls_on_a_passing_runs_iteration_end",),
    ),
    Mutation(
        "lazy-admit-misses-queued-tie",
        "a run is planned through a queued event's time that is one of its ends",
        (("serq/sim/lazy.py", "                    if 0 <= j < tie and (ends is None or ends[j] == t):\n",
          "                    if False:\n"),),
        ("tests/sim/test_lazy_runs.py::test_no_event_ever_falls_on_a_passing_runs_iteration_end",),
    ),
    Mutation(
        "lazy-read-skips-growths",
        "reading a passing run's pool does not replay its growths before now: a router sees stale KV",
        (("serq/sim/lazy.py", "        pid = id(pool)\n        for engine in pool.watchers:",
          "        pid = id(pool)\n        for engine in ():"),),
        ("tests/sim/test_lazy_runs.py::test_without_gauges_each_run_replays_its_own_growths_when_read",),
    ),
    Mutation(
        "lazy-join-keeps-run",
        "a request joining a passing run's queue leaves the run as planned: it waits for the run's end",
        (("serq/sim/lazy.py", "    def join(self, req: Any) -> None:\n        self.sim.lazy.changed(self)",
          "    def join(self, req: Any) -> None:\n        pass"),),
        ("tests/sim/test_lazy_runs.py::test_every_router_gives_the_report_of_one_iteration_at_a_time",),
    ),
    Mutation(
        "lazy-gauges-read-final-states",
        "with gauges, the pools are not put back to their states before the runs' growths: each growth's "
        "reading sees other pools as they end up",
        (("serq/sim/lazy.py", "                for pool, used, total in before.values():",
          "                for pool, used, total in ():"),),
        ("tests/sim/test_lazy_runs.py::test_loaded_clusters_give_the_same_report",),
    ),
    Mutation(
        "lazy-runs-share-ends",
        "a run is planned through an end that ties with another passing run's end",
        (("serq/sim/lazy.py", "        if at and not at.keys().isdisjoint(ends):  # (one look-up an end, in C, most runs)\n",
          "        if False:\n"),),
        ("tests/sim/test_lazy_runs.py::test_no_event_ever_falls_on_a_passing_runs_iteration_end",),
    ),
    Mutation(
        "lazy-work-ignores-ended-iterations",
        "`work` of an engine in a passing run is its residents' work at the run's start",
        (("serq/sim/stages/step.py", "            return [minus(j.work, 1.0, done) for j in self.residents]",
          "            return [minus(j.work, 1.0, 0) for j in self.residents]"),),
        ("tests/sim/test_lazy_runs.py::test_a_router_reading_the_engines_work_sees_the_tokens_of_ended_iterations",),
    ),
    Mutation(
        "lazy-plan-ignores-queued-ties",
        "a run is planned through an end that ties with an event already in the queue",
        (("serq/sim/lazy.py", "                    if j < tie and ends[j] == t:\n",
          "                    if False:\n"),),
        ("tests/sim/test_lazy_runs.py::test_no_event_ever_falls_on_a_passing_runs_iteration_end",),
    ),
    Mutation(
        "lazy-timers-miss-run-ends",
        "a timer set on a passing run's iteration end does not cut the run (its latest end is not kept)",
        (("serq/sim/lazy.py", "        if run.end > self.latest:\n", "        if False:\n"),),
        ("tests/sim/test_lazy_runs.py::test_no_event_ever_falls_on_a_passing_runs_iteration_end",),
    ),
    Mutation(
        "index-outside-array-picks-first",
        "a run-time index outside its array (or not a whole number) picks member 0 instead of stopping the run",
        (("serq/sim/compile.py", "        return self[member(key, len(self), self.label)]", "        return self[0]"),),
        ("tests/sim/test_guards.py::test_an_index_outside_its_array_is_a_run_time_error",),
    ),
    Mutation(
        "end-index-across-binades",
        "a run's end is looked up as a multiple of one step even where the segment crosses a binade",
        (("serq/sim/stages/decode_run.py", "    if not (t0 >= _NORMAL and frexp(t0)[1] == frexp(t1)[1]):\n",
          "    if not t0 >= _NORMAL:\n"),),
        ("tests/sim/stages/test_coalesce_runs.py::test_a_runs_end_index_is_where_its_list_of_ends_has_the_time",),
    ),
    # -- issue 23: leases, transfers, flows, queue stations -----------------------------------
    Mutation(
        "lease-is-a-victim",
        "a pool that is no engine's memory preempts its last holder even when that is a lease",
        (("serq/sim/holds.py", "        for req in reversed(pool.holders):  # a lease is no victim\n"
          "            if req.state == GRANTED:\n",
          "        for req in reversed(pool.holders):  # a lease is no victim\n"
          "            if req.state in (GRANTED, LEASED):\n"),),
        ("tests/sim/test_leases.py::test_a_lease_is_not_a_preemption_victim",),
    ),
    Mutation(
        "lease-time-ignored",
        "a lease with a finite time is never ended by it",
        (("serq/sim/holds.py", "        if t < math.inf:\n            timer = self.env.timer(t, [self._lease_due])",
          "        if t < -1.0:\n            timer = self.env.timer(t, [self._lease_due])"),),
        ("tests/sim/test_leases.py::test_an_untaken_lease_ends_at_its_bound_and_keeps_its_cache",),
    ),
    Mutation(
        "load-sets-position",
        "`load` sets the position to n instead of advancing it by n",
        (("serq/sim/session.py", "        req.pos[k] = pos + amount\n", "        req.pos[k] = amount\n"),),
        ("tests/sim/test_leases.py::test_loads_add_up_from_the_consumed_prefix",),
    ),
    Mutation(
        "release-newest-lease",
        "`release` outside a hold ends the newest lease on the pool, not the oldest",
        (("serq/sim/session.py", "            for req in self.leases:\n",
          "            for req in reversed(self.leases):\n"),),
        ("tests/sim/test_leases.py::test_release_ends_the_oldest_lease",),
    ),
    Mutation(
        "flows-equal-split",
        "flows take the bottleneck rule whatever the policy (no progressive filling)",
        (("serq/sim/stages/shared.py",
          "            rates = self.rates_of([[st.gid for st in j.stages] for j in flows], self.caps)\n",
          "            rates = RATES['bottleneck']([[st.gid for st in j.stages] for j in flows], self.caps)\n"),),
        ("tests/sim/test_shared_stages.py::test_three_flows_on_two_stages_maxmin",),
    ),
    Mutation(
        "flow-util-counts-flows",
        "a shared stage's utilisation is the time it holds a flow, not the capacity its flows carry",
        (("serq/sim/results.py", "                util = st.utilization(end, start)\n", "                pass\n"),),
        ("tests/sim/test_shared_stages.py::test_two_reads_from_one_sender_share_its_egress",),
    ),
    Mutation(
        "pull-skips-latency",
        "a pull relation's latency is dropped from the read",
        (("serq/frontend/expand.py", "        if latency is not None:\n            wait = st.member(",
          "        if latency is None:\n            wait = st.member("),),
        ("tests/frontend/test_queues.py::test_a_lone_pull_takes_latency_plus_the_read_at_the_slower_nic",),
    ),
    Mutation(
        "remote-prefill-first-token",
        "a remote prefill's end stays the client's first token",
        (("serq/sim/session.py",
          "        elif self.first_tok is None or (self.n_after == 0 and self.tok_stage is not None\n",
          "        elif self.first_tok is None or (False and self.tok_stage is not None\n"),),
        ("tests/sim/test_pd_programs.py::test_the_client_first_token_is_the_decoders",),
    ),
    # -- issue 24: the offload tier and the online estimates ----------------------------------
    Mutation(
        "spill-whole-entry",
        "a pool with blocks spills its victim's whole entry, not the block eviction took",
        (("serq/sim/cache.py",
          "            piece = min(self.block, e.size) if self.block is not None else e.size  # as _take_piece takes\n",
          "            piece = e.size  # as _take_piece takes\n"),),
        ("tests/sim/test_spill.py::test_a_pool_with_blocks_spills_block_by_block_from_the_tail",),
    ),
    Mutation(
        "spill-no-room",
        "the tier takes the piece without making room for it (it overflows its cap)",
        (("serq/sim/spill.py", "        tier.make_room(piece, now)\n", "        pass\n"),),
        ("tests/sim/test_spill.py",),
    ),
    Mutation(
        "spill-ignores-pred",
        "every evicted piece spills, whatever `when (…)` says",
        (("serq/sim/spill.py", "            if ok == 0.0:\n                return\n", "            if ok != ok + 1.0:\n                pass\n"),),
        ("tests/sim/test_spill.py::test_a_spill_predicate_reads_whether_the_owner_waits",),
    ),
    Mutation(
        "spill-in-replay",
        "a coalesced run's growth that evicts from a spilling pool stays in the run",
        (("serq/sim/stages/coalesce.py",
          "                if u + need > pcap or (spilled is not None and u + spilled + need > pcap):\n",
          "                if u + need > pcap:\n"),
         ("serq/sim/stages/coalesce.py",
          "            if pool.cache.spill is not None and used[pid] + pool.cache.total + need > pool.cap + EPS:\n",
          "            if False:\n")),
        ("tests/sim/test_offload_program.py::test_the_offload_program_gives_the_report_of_one_iteration_at_a_time",),
    ),
    Mutation(
        "estimate-wait-unweighted",
        "the estimated wait is the last job's, not a weighted average",
        (("serq/sim/stats.py", "            self.wait = (1.0 - a) * self.wait + a * wait\n",
          "            self.wait = wait\n"),),
        ("tests/sim/test_spill.py::test_estimates_follow_the_completions_hand_computed",),
    ),
    Mutation(
        "estimate-rho-uncapped",
        "the estimated utilisation is not kept below 0.99",
        (("serq/sim/stats.py", "        return lam, rho if rho < self.RHO_CAP else self.RHO_CAP, self.wait\n",
          "        return lam, rho, self.wait\n"),),
        ("tests/sim/test_spill.py::test_estimates_follow_the_completions_hand_computed",),
    ),
    # -- issue 25 and the aggregates' flat call ---------------------------------------------------
    Mutation(
        "sum-aggregate-reversed",
        "`sum j in n (…)` adds its terms from the last, rounding differently from the left fold",
        (("serq/expr.py", "    acc = xs[0]\n    for x in xs[1:]:\n        acc = acc + x\n",
          "    acc = xs[-1]\n    for x in reversed(xs[:-1]):\n        acc = acc + x\n"),),
        ("tests/frontend/test_gauges_aggregates.py::test_a_sum_aggregate_adds_from_the_left",),
    ),
    Mutation(
        "plot-bars-below-zero",
        "a figure that cannot be negative has its error bar drawn below 0",
        (("serq/experiments/plot.py", "        if floor and half == half and iv.mean - half < 0.0:\n",
          "        if False:\n"),),
        ("tests/experiments/test_plot.py::test_bars_of_a_figure_that_cannot_be_negative_stop_at_0_and_the_title_says_so",),
    ),
    Mutation(
        "jobs-spawn-always",
        "the default worker count starts the workers after the first run, however short the sweep",
        (("serq/experiments/backends.py",
          "        if left > 1 and (time.perf_counter() - start) / (k + 1) * left > PARALLEL_AFTER:\n",
          "        if left > 1:\n"),),
        ("tests/experiments/test_sweep_run.py::"
         "test_by_default_runs_start_here_and_workers_start_once_the_runs_left_would_take_long",),
    ),
    Mutation(
        "lengths-in-one-binade-skip-halfway-costs",
        "a run inside one binade takes every segment for one length, a cost halfway between two ulps too",
        (("serq/sim/stages/decode_run.py",
          "        if n > 1 and (fmod(c, u) * 2.0 == u if u is not None else not _one_step(c, t0, t1)):\n",
          "        if n > 1 and (False if u is not None else not _one_step(c, t0, t1)):\n"),),
        ("tests/sim/stages/test_coalesce_runs.py::test_a_runs_lengths_are_the_differences_of_its_ends",),
    ),
    Mutation(
        "gauges-read-the-last-pool-only",
        "at an instant where two pools changed, only the gauges of the last one are read again",
        (("serq/sim/pool.py", "                gauges.moved = self if moved is None else gauges\n",
          "                gauges.moved = self\n"),),
        ("tests/sim/test_gauges.py::test_two_pools_that_change_in_one_instant_are_both_read",),
    ),
    Mutation(
        "gauges-of-used-only-at-an-instant",
        "at an instant where one pool changed, only the gauges that read its used are read again",
        (("serq/sim/gauges.py", "            self.sample_part(moved.gauge_any, now)\n",
          "            self.sample_part(moved.gauge_part or moved.gauge_any, now)\n"),),
        ("tests/sim/test_gauges.py::test_two_pools_that_change_in_one_instant_are_both_read",),
    ),
    Mutation(
        "stalled-growth-left-uncounted",
        "a session preempted while its growth is stalled leaves the growers but stays counted",
        (("serq/sim/holds.py", "                pool.growers.remove(s)\n                self.stalled -= 1\n",
          "                pool.growers.remove(s)\n"),),
        ("tests/sim/test_pool_semantics.py::test_the_count_of_stalled_growths_follows_every_pools_growers",),
    ),
    Mutation(
        "pass-skips-stalled-growths",
        "a growth that stalls is not counted: the passes skip it and it never resumes",
        (("serq/sim/holds.py", "                pool.growers.append(s)\n                self.stalled += 1\n",
          "                pool.growers.append(s)\n"),),
        ("tests/sim/test_pool_semantics.py::test_a_growth_that_does_not_fit_waits_under_preempt_none",),
    ),
    # -- issue 38, item 3: figures that only golden snapshots pinned ---------------------------
    Mutation(
        "pool-wait-counts-warmup",
        "a pool's `wait` counts the admissions of the warm-up too",
        (("serq/sim/holds.py", "        if self.sim.stats_on:\n            first.wait_sum += self.env.now - req.joined\n",
          "        if True:\n            first.wait_sum += self.env.now - req.joined\n"),),
        ("tests/sim/test_pool_semantics.py::test_a_pools_wait_counts_only_admissions_after_the_warmup",),
    ),
    Mutation(
        "estimate-gap-between-completions",
        "`est_lambda` is 1 over the gaps between completions, not between the service starts of completions",
        (("serq/sim/stats.py", "        last = self.last_start\n        if last is not None:\n",
          "        start = start + service  # the completion\n        last = self.last_start\n"
          "        if last is not None:\n"),),
        ("tests/sim/test_spill.py::test_est_lambda_is_one_over_the_gaps_between_service_starts_not_completions",),
    ),
    Mutation(
        "paired-mark-positive-only",
        "`--baseline`'s `*` marks a significant positive difference only (no abs: a negative one is never marked)",
        (("serq/experiments/summary.py", "    mark = \" *\" if abs(iv.mean) > iv.half else \"\"\n",
          "    mark = \" *\" if iv.mean > iv.half else \"\"\n"),),
        ("tests/experiments/test_paired.py::test_a_significant_negative_difference_is_marked_and_a_null_one_is_not",),
    ),
    Mutation(
        "paired-mark-on-a-closed-interval",
        "`--baseline`'s `*` marks an interval that reaches 0 (|mean| >= half): a null difference of ± 0 is marked",
        (("serq/experiments/summary.py", "    mark = \" *\" if abs(iv.mean) > iv.half else \"\"\n",
          "    mark = \" *\" if abs(iv.mean) >= iv.half else \"\"\n"),),
        ("tests/experiments/test_paired.py::test_a_significant_negative_difference_is_marked_and_a_null_one_is_not",),
    ),
]


def copy_tree(dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=ignore, symlinks=True)
        elif src.exists():
            shutil.copy2(src, dst / name)


def environment(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_import(copy: Path, env: dict[str, str]) -> None:
    """The copy's ``serq`` is the one its tests import, not the editable install's (whose
    finder points at the working tree): from the copy (pytest runs there) and from another
    folder (a test's subprocess may run in its tmp_path), where only ``PYTHONPATH`` finds it."""
    for cwd in (copy, copy.parent):
        out = subprocess.run([sys.executable, "-c", "import serq, serq.sim.holds; print(serq.__file__)"],
                             cwd=cwd, env=env, capture_output=True, text=True)
        where = Path(out.stdout.strip()).resolve() if out.returncode == 0 else None
        if where is None or copy.resolve() not in where.parents:
            sys.exit(f"mutate: Python run in {cwd} imports serq from {where or out.stderr.strip()}, not from {copy}")


def stale(m: Mutation, copy: Path) -> str | None:
    """Why a mutation no longer applies (its text is gone, or not unique), or None."""
    for file, old, _new in m.edits:
        path = copy / file
        if not path.is_file():
            return f"{file} is gone"
        n = path.read_text(encoding="utf-8").count(old)
        if n != 1:
            return f"{file}: the text to replace is found {n} times, not once: {old.strip()!r}"
    return None


def pytest(copy: Path, env: dict[str, str], tests: tuple[str, ...]) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "pytest", "-x", "-p", "no:cacheprovider", "-o", "addopts=-q", *tests]
    try:
        done = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {TIMEOUT} s"
    return done.returncode, done.stdout + done.stderr


def last_line(output: str) -> str:
    lines = [x for x in output.strip().splitlines() if x.strip()]
    return lines[-1] if lines else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--only", action="append", metavar="NAME", default=[],
                    help="run only this mutation (repeat, or separate names with commas)")
    ap.add_argument("--list", action="store_true", help="list the mutations and the tests each runs, and exit")
    ap.add_argument("--no-baseline", action="store_true", help="do not run the tests unmutated first")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy of the tree")
    args = ap.parse_args()

    chosen = MUTATIONS
    if args.only:
        names = {n for arg in args.only for n in arg.split(",") if n}
        unknown = names - {m.name for m in MUTATIONS}
        if unknown:
            ap.error(f"no mutation {', '.join(sorted(unknown))} (see --list)")
        chosen = [m for m in MUTATIONS if m.name in names]
    if args.list:
        bad = 0
        for m in chosen:
            why = stale(m, ROOT)
            bad += why is not None
            print(f"{m.name}{'  STALE: ' + why if why else ''}\n    {m.what}\n"
                  f"    in {', '.join(sorted({f for f, _o, _n in m.edits}))}\n    caught by {' '.join(m.tests)}")
        return 1 if bad else 0

    start = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="serq-mutate-"))
    copy = scratch / "tree"
    copy.mkdir()
    try:
        copy_tree(copy)
        env = environment(copy)
        check_import(copy, env)
        print(f"mutate: {len(chosen)} mutation(s) in a copy of the tree at {copy}", flush=True)
        failed = False
        if not args.no_baseline:
            tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
            t0 = time.monotonic()
            code, out = pytest(copy, env, tests)
            print(f"{'baseline':32s} {'ok' if code == 0 else 'FAILED':9s} {time.monotonic() - t0:7.1f} s  "
                  f"(the tests, unmutated)", flush=True)
            if code != 0:
                print(out)
                print("mutate: the tests fail without a mutation; fix that first")
                return 1
        results = []
        for m in chosen:
            why = stale(m, copy)
            if why is not None:
                results.append((m.name, "STALE", 0.0))
                print(f"{m.name:32s} {'STALE':9s} {0.0:7.1f} s  {why}", flush=True)
                failed = True
                continue
            originals = {}
            for file, old, new in m.edits:
                path = copy / file
                text = originals.setdefault(path, path.read_text(encoding="utf-8"))
                path.write_text(path.read_text(encoding="utf-8").replace(old, new, 1), encoding="utf-8")
            t0 = time.monotonic()
            try:
                code, out = pytest(copy, env, m.tests)
            finally:
                for path, text in originals.items():
                    path.write_text(text, encoding="utf-8")
            took = time.monotonic() - t0
            if code == 0:
                verdict, detail = "SURVIVED", last_line(out)
                failed = True
            elif code in (1, -1):
                verdict, detail = "caught", next((x for x in out.splitlines() if x.startswith("FAILED")), last_line(out))
            else:  # 2-5: interrupted, internal error, usage error, no tests collected
                verdict, detail = "ERROR", last_line(out)
                failed = True
            results.append((m.name, verdict, took))
            print(f"{m.name:32s} {verdict:9s} {took:7.1f} s  {detail}", flush=True)
        caught = sum(1 for _n, v, _t in results if v == "caught")
        print(f"mutate: {caught} of {len(results)} caught, wall {time.monotonic() - start:.0f} s")
        for name, verdict, _t in results:
            if verdict != "caught":
                print(f"mutate: {name}: {verdict}")
        return 1 if failed else 0
    finally:
        if args.keep:
            print(f"mutate: the copy is kept at {copy}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

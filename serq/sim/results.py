"""From a finished simulation to its :class:`~serq.report.Report` (semantics §8)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..report import PoolSummary, Report, Sample, Settling, StageSummary, StepLog, TaskRecord, TaskSummary
from .session import Task
from .settling import judge
from .stages.shared import SharedStage
from .stages.step import StepEngine
from .stats import LogHistogram, exact_sum, summarize

if TYPE_CHECKING:
    from .simulator import Simulator

NAN = math.nan


def _div(a: float, b: float) -> float:
    return a / b if b else NAN


class SampleLists(dict):
    """Observation name → its samples, turned into :class:`Sample` tuples when
    first read: most runs never read them, and a long run records millions."""

    def __getitem__(self, name: str) -> list[Sample]:
        rows = dict.__getitem__(self, name)
        if rows and type(rows[0]) is not Sample:
            rows = list(map(Sample._make, rows))
            dict.__setitem__(self, name, rows)
        return rows

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default

    def values(self) -> Any:  # type: ignore[override]
        return [self[k] for k in self]

    def items(self) -> Any:  # type: ignore[override]
        return [(k, self[k]) for k in self]


def build_report(sim: "Simulator") -> Report:
    p = sim.program
    end = sim.env.now
    start = sim.warmup
    span = end - start
    observes = {}
    notes = []
    samples = {}
    for decl, rows in zip(p.observes, sim.samples):
        values = [r[3] for r in rows]
        observes[decl.name] = summarize(values)
        samples[decl.name] = rows
        if decl.is_test and len(values) >= 40 and all(v == 0.0 for v in values):
            notes.append(f"observe {decl.name} is constant 0 over {len(values)} samples")
    client = {name: summarize([r[3] for r in rows]) for name, rows in sim.population.client.items() if rows}
    if client:  # a program with a client: its rows' samples, every row, prefixed apart from the observes
        for name, rows in sim.population.client.items():
            samples.setdefault(f"client_{name}", rows)  # (an observe of that very name keeps it)
    stages = []
    for sdecl, members in zip(p.stages, sim.stages):
        for st in members:
            done = st.completed
            number, util = st.presence.means(end, start)
            if isinstance(st, SharedStage):  # the capacity its flows carried (docs/pd.md, "Flows")
                util = st.utilization(end, start)
            row = StageSummary(
                name=sdecl.name, index=st.index,
                mean_number=number, utilization=util,
                completed=done, throughput=_div(done, span),
                mean_wait=_div(st.wait_sum, done), mean_service=_div(st.service_sum, done),
                iterations=st.iterations,
                prefill_only=None, decode_only=None, mixed=None, mean_decodes=None,
                mean_decode_batch=None, mean_decode_step=None, mean_itl=None, itl_p50=None, itl_p99=None,
            )
            if isinstance(st, StepEngine):
                row.prefill_only = _div(st.t_prefill_only, span)
                row.decode_only = _div(st.t_decode_only, span)
                row.mixed = _div(st.t_mixed, span)
                row.mean_decodes = _div(st.t_decoders, span)
                row.mean_decode_batch = _div(st.dec_sum, st.dec_iters)
                row.mean_decode_step = _div(st.dec_cost, st.dec_iters)
                row.mean_itl = st.itl.mean if st.itl.count else NAN
                row.itl_p50 = st.itl.quantile(0.5) if st.itl.count else NAN
                row.itl_p99 = st.itl.quantile(0.99) if st.itl.count else NAN
            stages.append(row)
    pools = []
    for pdecl, pool_members in zip(p.pools, sim.pools):
        for pool in pool_members:
            pools.append(PoolSummary(
                name=pdecl.name, index=pool.index,
                mean_used=pool.used_avg.mean(end, start), mean_cached=pool.cached_avg.mean(end, start),
                mean_queue=pool.queue_avg.mean(end, start), mean_holders=pool.holders_avg.mean(end, start),
                mean_wait=_div(pool.wait_sum, pool.wait_count), admissions=pool.admissions,
                evicted_entries=pool.cache.evicted_entries, evicted_units=pool.cache.evicted_units,
                preemptions=pool.preemptions, spills=pool.spills, rejected=pool.rejected, stuck=pool.stuck,
            ))
    stage_totals, pool_totals = _family_totals(sim, stages, pools)
    stage_warnings = [note for e in sim.engines for note in e.notes]
    stage_warnings += [w for w in map(_starved, sim.engines) if w is not None]
    stage_warnings += [w for w in map(_passed_over, sim.engines) if w is not None]
    tasks = _tasks(sim, samples)
    logs = [(e.label, getattr(e.step_log, "log", e.step_log)) for e in sim.engines]  # (a claim's monitor forwards)
    steps = {label: StepLog(log) for label, log in logs if log is not None}
    return Report(
        settling=_settling(sim, observes, samples),
        horizon=sim.horizon, end=end, warmup=sim.warmup, seed=sim.seed, events=sim.events,
        arrivals=sim.arrivals, ended=sim.ended, turns=sim.turns, mean_live=sim.population.live_avg.mean(end, start),
        observes=observes, client=client, stages=stages, pools=pools, notes=notes, samples=SampleLists(samples),
        stage_warnings=stage_warnings, tasks=tasks, steps=steps, replay=sim.replay,
        gauges={} if sim.gauges is None else {g.name: g for g in sim.gauges.summaries(start, end)},
        timeline=None if sim.timeline is None else sim.timeline.finish(end),
        stage_totals=stage_totals, pool_totals=pool_totals,
        claims=[] if sim.claims is None else sim.claims.results(),
    )


def _settling(sim: "Simulator", observes: dict[str, Any], samples: dict[str, Any]) -> Settling:
    """The run's verdict on its steady state (:mod:`serq.sim.settling`): on the
    client's response times, else the first observe with samples, and the backlog."""
    rows = sim.population.client.get("response") or []
    name = "client.response"
    if not rows:
        name, rows = next(((k, samples[k]) for k in observes if samples.get(k)), (name, []))
    kind = sim.program.arrival.kind
    return judge(series=[(r[0], r[3]) for r in rows], series_name=name, backlog=sim.population.backlog,
                 warmup=sim.warmup, end=sim.env.now, arrival_kind=kind)


def _family_totals(sim: "Simulator", stages: list[StageSummary],
                   pools: list[PoolSummary]) -> tuple[dict[str, StageSummary], dict[str, PoolSummary]]:
    """The total row of every family (``stage engine[N]``, ``pool kv[N]``, one
    member included): each column combined from the members' as
    :mod:`serq.units` says (docs/report.md, "Families") — summed, a plain
    mean, or pooled over all the members' jobs, admissions, iterations and
    gaps, which needs the simulator's own sums (a pool's wait is recorded at a
    hold's first pool only, so its admissions are not its waits' count)."""
    from ..units import MEAN, POOL, STAGE, SUM

    p = sim.program
    stage_totals: dict[str, StageSummary] = {}
    rows = iter(stages)
    for sdecl, members in zip(p.stages, sim.stages):
        mine = [next(rows) for _ in members]
        if sdecl.size is None:
            continue
        total = StageSummary(sdecl.name, None, **_combine(STAGE, mine, SUM, MEAN))
        done = sum(st.completed for st in members)
        total.mean_wait = _div(exact_sum([st.wait_sum for st in members]), done)
        total.mean_service = _div(exact_sum([st.service_sum for st in members]), done)
        engines = [st for st in members if isinstance(st, StepEngine)]
        if engines:  # a family is one declaration: every member a step stage, or none
            iters = sum(e.dec_iters for e in engines)
            total.mean_decode_batch = _div(exact_sum([e.dec_sum for e in engines]), iters)
            total.mean_decode_step = _div(exact_sum([e.dec_cost for e in engines]), iters)
            itl = LogHistogram.merged(e.itl for e in engines)
            total.mean_itl = itl.mean
            total.itl_p50 = itl.quantile(0.5)
            total.itl_p99 = itl.quantile(0.99)
        stage_totals[sdecl.name] = total
    pool_totals: dict[str, PoolSummary] = {}
    prows = iter(pools)
    for pdecl, pool_members in zip(p.pools, sim.pools):
        pmine = [next(prows) for _ in pool_members]
        if pdecl.size is None:
            continue
        ptotal = PoolSummary(pdecl.name, None, **_combine(POOL, pmine, SUM, MEAN))
        ptotal.mean_wait = _div(exact_sum([m.wait_sum for m in pool_members]), sum(m.wait_count for m in pool_members))
        pool_totals[pdecl.name] = ptotal
    return stage_totals, pool_totals


def _combine(columns: Any, rows: list[Any], sum_rule: str, mean_rule: str) -> dict[str, Any]:
    """The summed and averaged columns of a family's total from its member
    ``rows`` (``None`` where the members have none: a stage that is not a step
    stage); the pooled ones are NaN here, for the caller to compute."""
    out: dict[str, Any] = {}
    for c in columns:
        values = [getattr(r, c.key) for r in rows]
        if any(v is None for v in values):
            out[c.key] = None
        elif c.total == sum_rule:
            out[c.key] = sum(values) if all(isinstance(v, int) for v in values) else exact_sum(values)
        elif c.total == mean_rule:
            out[c.key] = exact_sum(values) / len(values)
        else:
            out[c.key] = NAN
    return out


def _tasks(sim: "Simulator", samples: dict[str, Any]) -> TaskSummary | None:
    """The task table (docs/subagents.md, "Task statistics"): for a program
    that spawns, once the run has spawned a child (so that a `spawn (0)`
    leaves the report as it is without the statement); its task times join
    ``samples`` as ``task_time`` (an observe of that name keeps it)."""
    from .population import CHILD_SERIALS

    pop = sim.population
    if pop.tree_slots is None or pop.next_child == CHILD_SERIALS:
        return None
    log = pop.task_log
    open_tasks: dict[int, Task] = {}
    for s in pop.tree_live:  # the sessions not ended: their tasks are open, stuck if one of them is
        task = s.task
        assert task is not None, "a session of a program that spawns belongs to a task"
        open_tasks[id(task)] = task
        if s.stuck:
            task.stuck = True
    stuck = pop.tasks_stuck + sum(1 for task in open_tasks.values() if task.stuck)
    samples.setdefault("task_time", [(end, root, int(turn), end - start) for root, start, end, _n, _d, turn in log])
    return TaskSummary(
        time=summarize([end - start for _r, start, end, _n, _d, _t in log]),
        sessions=summarize([n for _r, _s, _e, n, _d, _t in log]),
        depth=summarize([d for _r, _s, _e, _n, d, _t in log]),
        open=len(open_tasks), stuck=stuck,
        records=[TaskRecord(root, start, end, n, d) for root, start, end, n, d, _t in log],
    )


def _passed_over(engine: StepEngine) -> str | None:
    """The warning for a step stage whose ``serve only`` passed over every
    resident from ``excluded_at`` to the end of the run."""
    if engine.excluded_at is None or not engine.residents:
        return None
    return (f"stage `{engine.label}` scheduled nothing from time {engine.excluded_at:g} to the end: `serve only` "
            f"passed over its residents ({len(engine.residents)} at the end)")


def _starved(engine: StepEngine) -> str | None:
    """The warning for a step stage that ends the run with work waiting and
    a budget that let it schedule nothing since ``starved_at`` (issue 8, B8)."""
    if engine.starved_at is None or not engine.has_work():
        return None
    waiting = sum(len(p.put_queue) for p in engine.admit_pools)
    return (f"stage `{engine.label}` scheduled nothing from time {engine.starved_at:g} to the end: its budget was "
            f"{engine.starved_budget:g}, so no token could be scheduled, while {len(engine.residents)} resident(s) and {waiting} "
            "request(s) queued for admission waited")


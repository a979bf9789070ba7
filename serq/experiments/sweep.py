"""Sweeps: a grid of ``--set`` values (and schedulers) × seeds, one tidy row per run.

A sweep is a list of *runs* (a point of the grid and a seed).  Each run is a
pure function of its point and seed, executed by :func:`execute` in whatever
process the backend chooses (:mod:`serq.experiments.backends`); the rows are
then put in plan order — points in grid order (the product of the axes in
the order given, each axis's values in the order given), then seeds in the
order given — so the result is the same for any number of workers and any
completion order.

A row is the point's values (one column per axis), ``seed``, every figure of
the run's report flattened from :meth:`serq.report.Report.to_dict`
(:func:`flatten`) and one derived figure, ``req_per_s``.

With ``out``, rows are appended to a JSON Lines or CSV file as runs end
(:mod:`serq.experiments.journal`), and the file is rewritten in plan order
when the sweep ends or is interrupted; ``resume`` skips the runs the file
already holds.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import SerqError, UsageError, suggest
from ..sim.engines import check_stages
from ..report import row_label, shortest
from .grid import MAX_POINTS, Axis, number_or_text, shown_value, value_text
from .summary import Paired, Summary, paired, report_columns, summarize


# ---------------------------------------------------------------------------
# rows


def flatten(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's §9.2 object as one flat mapping: nested objects join their
    keys with dots (``client.ttft.p99``, ``observes.hit.mean``); a list of
    stage or pool rows is keyed by each row's label (``pools.kvD[0].used``),
    its ``name`` and ``index`` dropped; a family's total (``totals.pools.kv``)
    is keyed by the family's name in its section (``pools.kv.preemptions``),
    as a plain pool's row is.  Order: the report's.  The settling verdict
    keeps ``settled`` (1 or 0; empty when not judged), the suggested warm-up
    and horizon, whether the backlog grew without end and the reasons joined
    by ``; `` (its evidence is in the report's JSON, not in a row).  A claim gives
    ``claims.NAME`` (1 held or witnessed, 0 failed or not witnessed, empty when it was
    not evaluated or out of scope; a mean over seeds is the share of runs it held in)
    beside ``claims.NAME.result`` and the rest of its object."""
    out: dict[str, Any] = {}
    settling = report.get("settling")
    if settling is not None:
        report = {k: v for k, v in report.items() if k != "settling"}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                if not prefix and k == "totals" and isinstance(v, Mapping):
                    walk("", v)  # `totals.pools.kv.…` → `pools.kv.…`
                    continue
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Mapping) and "name" in item:
                    label = row_label(str(item["name"]), item.get("index"))
                    rest = {k: v for k, v in item.items() if k not in ("name", "index")}
                    walk(f"{prefix}.{label}", rest)
                else:
                    walk(f"{prefix}[{i}]", item)
        else:
            out[prefix] = value

    walk("", report)
    for claim in report.get("claims") or ():  # `claims.NAME`: 1 held (or witnessed), 0 not; empty undecided
        result = claim.get("result")
        out[f"claims.{claim['name']}"] = (1 if result in ("holds", "witnessed") else
                                          0 if result in ("fails", "not witnessed") else None)
    if settling is not None:  # (verdicts as 1/0, which a CSV keeps: a mean over seeds is the share)
        if out.get("settled") is not None:
            out["settled"] = int(out["settled"])
        out["settling.warmup"] = settling.get("warmup")
        out["settling.horizon"] = settling.get("horizon")
        out["settling.overloaded"] = int(bool(settling.get("overloaded")))
        out["settling.reasons"] = "; ".join(settling.get("reasons") or []) or None
    return out


def req_per_s(figures: Mapping[str, Any]) -> float | None:
    """Throughput in requests per simulated second: the turns whose response
    completed after warm-up (``client.response.count``) over the measured time
    (``end − warmup``).  ``None`` for a program without client rows (the
    kernel form: read ``stages.NAME.throughput`` there)."""
    count = figures.get("client.response.count")
    end, warmup = figures.get("end"), figures.get("warmup")
    if count is None or end is None or warmup is None or end <= warmup:
        return None
    return count / (end - warmup)


def canon(value: Any) -> str:
    """A value as text for matching rows: numbers (and number text, as CSV
    gives them back) in shortest form, ``None`` as ``""``."""
    if value is None:
        return ""
    if isinstance(value, str):
        v = number_or_text(value)
        return shortest(v) if isinstance(v, (int, float)) else value
    return value_text(value)


# ---------------------------------------------------------------------------
# the plan


@dataclass(frozen=True)
class Task:
    """One run, as sent to a worker: only plain, picklable data (a worker
    started by ``spawn`` or on a Ray node imports and loads everything itself)."""

    index: int  # the run's place in plan order
    point: int
    seed: int
    program: tuple[str, str]  # ("path", absolute path) or ("text", source)
    sets: tuple[tuple[str, str], ...]
    engines: tuple[tuple[str, str, str], ...]  # (stage, kind, spec)
    horizon: float | None
    warmup: float | None
    arrivals: int | None
    trace: str | None
    max_live: int | None = None
    #: ``--goodput`` targets, ``--precision`` share, its figure and cap (None: not asked)
    goodput: str | None = None
    precision: float | None = None
    precision_on: str | None = None
    max_horizon: float | None = None


@dataclass
class Plan:
    """The grid: axes, points (value tuples in grid order), seeds and the run settings."""

    program: tuple[str, str]
    axes: list[Axis]
    seeds: list[int]
    horizon: float | None = None
    warmup: float | None = None
    arrivals: int | None = None
    trace: str | None = None
    max_live: int | None = None
    #: the points as their rows show them (an expression's value: :func:`~.grid.shown_value`)
    points: list[tuple[Any, ...]] = field(default_factory=list)
    #: the same points as the axes give them (``BwP`` where ``points`` has 200000)
    given: list[tuple[Any, ...]] = field(default_factory=list)
    #: per point: the horizon and warm-up its runs use (for matching rows on resume)
    settings: list[tuple[float, float]] = field(default_factory=list)
    #: every figure a run of some point can have (``summary.report_columns``), known before the runs
    figures: dict[str, None] = field(default_factory=dict)
    goodput: str | None = None
    precision: float | None = None
    precision_on: str | None = None
    max_horizon: float | None = None

    @property
    def columns(self) -> list[str]:
        return [a.name for a in self.axes]

    def task(self, point: int, seed_no: int) -> Task:
        values = self.points[point]
        sets = tuple((a.target, value_text(v)) for a, v in zip(self.axes, values) if a.kind == "set")
        engines = tuple((a.target, a.kind, str(v)) for a, v in zip(self.axes, values) if a.kind != "set")
        return Task(point * len(self.seeds) + seed_no, point, self.seeds[seed_no], self.program, sets, engines,
                    self.horizon, self.warmup, self.arrivals, self.trace, self.max_live,
                    self.goodput, self.precision, self.precision_on, self.max_horizon)

    def tasks(self) -> list[Task]:
        return [self.task(p, s) for p in range(len(self.points)) for s in range(len(self.seeds))]

    def key(self, point: int, seed: int) -> tuple[str, ...]:
        horizon, warmup = self.settings[point]
        return (*(canon(v) for v in self.points[point]), canon(seed), canon(horizon), canon(warmup))

    def row_key(self, row: Mapping[str, Any]) -> tuple[str, ...]:
        return (*(canon(row.get(c)) for c in self.columns), canon(row.get("seed")),
                canon(row.get("horizon")), canon(row.get("warmup")))


def program_ref(program: Any) -> tuple[str, str]:
    """A program as a worker can load it: an absolute path, or its text."""
    from ..api import _looks_like_source
    from ..ir import Program

    if isinstance(program, Program):
        if program.path is None:
            raise SerqError("serq.sweep needs a program's path or text (a Program loaded from text has neither)")
        return ("path", os.path.abspath(program.path))
    if isinstance(program, str) and _looks_like_source(program):
        return ("text", program)
    return ("path", os.path.abspath(os.fspath(program)))


def resolve_engine(kind: str, spec: str) -> type:
    """A ``--policy`` or ``--engine`` value as a StepEngine subclass: both
    resolve alike (:func:`serq.policies.resolve`: a ready-made policy's name
    or ``package.module:Class``); ``kind`` says which option gave it."""
    from ..policies import resolve

    return resolve(spec)


def make_plan(
    program: Any,
    axes: Sequence[Axis],
    seeds: Sequence[int],
    *,
    horizon: float | None = None,
    warmup: float | None = None,
    arrivals: int | None = None,
    trace: str | None = None,
    max_live: int | None = None,
    goodput: str | None = None,
    precision: float | None = None,
    precision_on: str | None = None,
    max_horizon: float | None = None,
) -> Plan:
    """Check the axes against the program and expand the grid.

    Every point is loaded once here, so that an unknown constant, a value the
    program refuses or a missing horizon is an error before any run starts;
    an axis naming no ``let`` (or no step stage) is a usage error with a
    did-you-mean."""
    from .. import api

    ref = program_ref(program)
    trace = os.path.abspath(trace) if trace is not None else None
    seeds = list(seeds)
    if not seeds:
        raise UsageError("no seeds to run")
    if any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds):
        raise UsageError("seeds must be unsigned integers")
    if len(set(seeds)) != len(seeds):
        raise UsageError("a seed is listed twice")
    names = [a.name for a in axes]
    for n in names:
        if names.count(n) > 1:
            raise UsageError(f"axis `{n}` is given twice")
    if any(not a.values for a in axes):
        raise UsageError(f"axis `{next(a.name for a in axes if not a.values)}` has no values")
    base = api.load(ref[1], trace=trace)
    lets = list(base.constants)
    for a in axes:
        if a.kind == "set" and a.target not in base.constants:
            raise _unknown_name("constant", a.target, lets, "--set overrides a `let`")
        if a.kind != "set":
            check_stages(base, [(a.kind, a.target)])
            for spec in a.values:
                try:
                    resolve_engine(a.kind, str(spec))
                except UsageError:
                    raise
                except SerqError as err:
                    raise UsageError(err.message, helps=err.helps) from None
    stages = [a.target for a in axes if a.kind != "set"]
    for s in stages:
        if stages.count(s) > 1:
            raise UsageError(f"step stage `{s}` is given a scheduler by two axes (--policy and --engine)")
    count = math.prod(len(a.values) for a in axes)
    if count * len(seeds) > MAX_POINTS * 10:
        raise UsageError(f"{count} points × {len(seeds)} seeds: more than {MAX_POINTS * 10} runs")
    if goodput is not None:
        from ..sim.goodput import parse_goodput

        parse_goodput(goodput)  # a bad one is an error before any run
    if precision is not None:
        from ..sim.precision import check_rel

        check_rel(precision)
    plan = Plan(ref, list(axes), seeds, horizon, warmup, arrivals, trace, max_live, figures=report_columns(base),
                goodput=goodput, precision=precision, precision_on=precision_on, max_horizon=max_horizon)
    if goodput is not None:
        plan.figures.update((f"client.goodput.{k}", None) for k in ("count", "mean", "ci", "cv2", "p50", "p90",
                                                                     "p95", "p99"))
    given: dict[tuple[str, ...], tuple[Any, ...]] = {}
    for values in itertools.product(*(a.values for a in axes)):
        sets = [(a.target, value_text(v)) for a, v in zip(axes, values) if a.kind == "set"]
        loaded = api.load(ref[1], sets=sets, trace=trace) if sets else base
        if loaded is not base:  # (a `--set` may size an array: each point's rows)
            plan.figures.update(report_columns(loaded))
        h, w = loaded.run.window(horizon, warmup)
        # the point as its rows show it (an expression's value); its runs get that value too
        shown = tuple(shown_value(a, v, loaded.constants) for a, v in zip(axes, values))
        key = tuple(value_text(v) for v in shown)
        if key in given:
            def show(point: Sequence[Any]) -> str:
                return ", ".join(f"{a.name}={value_text(v)}" for a, v in zip(axes, point))
            raise UsageError(f"the grid has the point `{show(key)}` twice: `{show(given[key])}` and "
                             f"`{show(values)}` give it", helps=["list each value once"])
        given[key] = values
        plan.points.append(shown)
        plan.given.append(tuple(values))
        plan.settings.append((float(h), float(w)))
    return plan


def _unknown_name(kind: str, name: str, known: Sequence[str], why: str) -> UsageError:
    best = suggest(name, known)
    helps = [f"did you mean `{best}`?"] if best else []
    helps.append(f"{why}; the program has " + (", ".join(f"`{k}`" for k in known) if known else "none"))
    return UsageError(f"unknown {kind} `{name}`", helps=helps)


# ---------------------------------------------------------------------------
# one run, in a worker


_LOADED: dict[tuple[Any, ...], Any] = {}
_CLASSES: dict[tuple[str, str], type] = {}


def execute(task: Task) -> tuple[int, dict[str, Any] | None, str | None]:
    """Run one task: ``(index, figures, None)``, or ``(index, None, error text)``
    for a run the program refuses (a :class:`SerqError`, rendered here: errors
    do not cross process boundaries intact)."""
    from .. import api

    try:
        key = (task.program, task.sets, task.trace)
        program = _LOADED.get(key)
        if program is None:
            _LOADED.clear()  # one point at a time: tasks arrive point by point
            program = _LOADED[key] = api.load(task.program[1], sets=task.sets, trace=task.trace)
        engines = {}
        for stage, kind, spec in task.engines:
            cls = _CLASSES.get((kind, spec))
            if cls is None:
                cls = _CLASSES[(kind, spec)] = resolve_engine(kind, spec)
            engines[stage] = cls
        report = api.run(program, seed=task.seed, horizon=task.horizon, warmup=task.warmup,
                         arrivals=task.arrivals, engines=engines, max_live=task.max_live, goodput=task.goodput,
                         precision=task.precision, precision_on=task.precision_on, max_horizon=task.max_horizon)
    except SerqError as err:
        return task.index, None, err.render()
    return task.index, flatten(report.to_dict()), None


def make_row(plan: Plan, task: Task, figures: Mapping[str, Any]) -> dict[str, Any]:
    """The tidy row: axis values, seed, the report's figures, ``req_per_s``."""
    row: dict[str, Any] = dict(zip(plan.columns, plan.points[task.point]))
    row["seed"] = task.seed
    row.update((k, v) for k, v in figures.items() if k != "seed")
    row["req_per_s"] = req_per_s(figures)
    return row


# ---------------------------------------------------------------------------
# the sweep


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: the workers are stopped and ``out`` (if any) holds
    the ``kept`` finished runs of ``total``, in plan order."""

    def __init__(self, kept: int, total: int, out: str | None) -> None:
        super().__init__(f"sweep interrupted: {kept} of {total} runs kept")
        self.kept, self.total, self.out = kept, total, out


class SweepRunError(SerqError):
    """A run of the sweep failed; the finished runs are kept in ``out``."""


@dataclass
class SweepResult:
    """The rows of a sweep, in plan order, and what made them."""

    rows: list[dict[str, Any]]
    axes: list[str]
    seeds: list[int]
    skipped: int = 0  # runs found in the file on --resume
    wall: float = 0.0

    def columns(self) -> list[str]:
        """Every column, in first-seen order."""
        return list(dict.fromkeys(c for r in self.rows for c in r))

    def summary(self, show: Sequence[str] | None = None) -> Summary:
        """Per point: the mean over seeds and the 95 % Student-t half-width
        across seeds of each figure in ``show`` (default
        :data:`~serq.experiments.summary.DEFAULT_SHOW`, each skipped when no
        row has it — and when none is there, every ``observes.NAME.mean``; a
        figure named in ``show`` that no row has is an error, with a
        did-you-mean)."""
        return summarize(self.rows, self.axes, show)

    def paired(self, baseline: str, show: Sequence[str] | None = None) -> Paired:
        """Each other design's paired difference from ``baseline`` (``"AXIS=VALUE"``,
        or a value one axis alone has): per point of the other axes, the figure
        minus the baseline's at the same seed, its mean and 95 % half-width
        over the seeds (:class:`~serq.experiments.summary.Paired`); the figures
        as :meth:`summary` chooses them."""
        from .summary import find_baseline

        axis, value = find_baseline(self.rows, self.axes, baseline)
        figures = self.summary(show).figures
        return paired(self.rows, self.axes, figures, axis, value)

    def to_frame(self) -> Any:
        """The rows as a :class:`pandas.DataFrame` (needs pandas: ``pip install 'serq[pandas]'``)."""
        try:
            import pandas as pd
        except ImportError:
            raise SerqError("SweepResult.to_frame needs pandas: pip install 'serq[pandas]' (or pandas)") from None
        return pd.DataFrame(self.rows, columns=self.columns())


def run_plan(
    plan: Plan,
    *,
    jobs: int | None = None,
    backend: str = "local",
    address: str | None = None,
    out: str | os.PathLike[str] | None = None,
    resume: bool = False,
    runner: Any = None,
    on_start: Callable[[int, int], None] | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> SweepResult:
    """Run every task of ``plan`` not already in ``out`` (with ``resume``)."""
    from .backends import run_tasks
    from .journal import Journal

    started = time.perf_counter()
    tasks = plan.tasks()
    wanted = {plan.key(t.point, t.seed): t for t in tasks}
    done: dict[int, dict[str, Any]] = {}
    foreign: list[dict[str, Any]] = []
    journal = Journal(out) if out is not None else None
    if journal is not None:
        old = journal.read() if resume else []
        for row in old:
            t = wanted.get(plan.row_key(row))
            if t is None:
                foreign.append(row)
            else:
                done[t.index] = row
        journal.start([done[i] for i in sorted(done)] + foreign)
    skipped = len(done)
    todo = [t for t in tasks if t.index not in done]
    if on_start is not None:
        on_start(skipped, len(tasks))
    by_index = {t.index: t for t in tasks}

    def finish() -> list[dict[str, Any]]:
        rows = [done[i] for i in sorted(done)]
        if journal is not None:
            journal.rewrite(rows + foreign)
        return rows

    def receive(result: tuple[int, dict[str, Any] | None, str | None]) -> None:
        index, figures, error = result
        task = by_index[index]
        if error is not None:
            where = ", ".join(f"{c}={value_text(v)}" for c, v in zip(plan.columns, plan.points[task.point]))
            where = f"{where}, seed {task.seed}" if where else f"seed {task.seed}"
            raise SweepRunError(f"the run at {where} failed:\n{error}")
        assert figures is not None
        row = make_row(plan, task, figures)
        done[index] = row
        if journal is not None:
            journal.append(row)
        if on_row is not None:
            on_row(row)

    try:
        if runner is not None:
            runner.run(todo, execute, receive)
        else:
            run_tasks(todo, execute, receive, jobs=jobs, backend=backend, address=address)
    except KeyboardInterrupt:
        finish()
        raise SweepInterrupted(len(done), len(tasks), None if out is None else os.fspath(out)) from None
    except SerqError:
        finish()
        raise
    rows = finish()
    return SweepResult(rows, plan.columns, list(plan.seeds), skipped, time.perf_counter() - started)


def class_axes(kind: str, choices: Mapping[str, Iterable[str]]) -> list[Axis]:
    """``{"engine": ["fcfs", "sjf"]}`` → axes named ``kind`` (one stage) or
    ``kind.STAGE`` (several)."""
    items = list(choices.items())
    out = []
    for stage, specs in items:
        values = tuple(str(s) for s in ([specs] if isinstance(specs, str) else specs))
        if len(set(values)) != len(values):
            raise UsageError(f"--{kind} {stage}: a value is listed twice")
        name = kind if len(items) == 1 else f"{kind}.{stage}"
        out.append(Axis(name, values, kind, stage))
    return out


def grid_axes(grid: Mapping[str, Any]) -> list[Axis]:
    """``{"Lambda": [0.2, 0.4], "B": 4096}`` → one axis per name (a scalar is one value)."""
    axes = []
    for name, values in grid.items():
        vals = (values,) if isinstance(values, (str, int, float)) else tuple(values)
        if len({value_text(v) for v in vals}) != len(vals):
            raise UsageError(f"grid `{name}`: a value is listed twice")
        axes.append(Axis(str(name), vals, "set", str(name)))
    return axes


def sweep(
    program: Any,
    grid: Mapping[str, Any] | None = None,
    *,
    seeds: Iterable[int] = (1,),
    jobs: int | None = None,
    horizon: float | None = None,
    warmup: float | None = None,
    arrivals: int | None = None,
    trace: str | None = None,
    max_live: int | None = None,
    policies: Mapping[str, Iterable[str]] | None = None,
    engines: Mapping[str, Iterable[str]] | None = None,
    out: str | os.PathLike[str] | None = None,
    resume: bool = False,
    backend: str = "local",
    address: str | None = None,
    goodput: str | None = None,
    precision: float | None = None,
    precision_on: str | None = None,
    max_horizon: float | None = None,
) -> SweepResult:
    """Run ``program`` at every point of ``grid`` (``let`` name → values) ×
    ``policies``/``engines`` (step stage → policy names / ``pkg.mod:Class``
    paths) with every seed, on ``jobs`` processes (default: this process, then
    the cores once the runs left would take over a second, as ``serq sweep``).

    Returns a :class:`SweepResult`; raises :class:`SerqError` for bad input or
    a failed run, :class:`SweepInterrupted` on Ctrl-C (``out`` then holds the
    finished runs).  ``horizon``, ``warmup``, ``arrivals``, ``trace`` and
    ``max_live`` apply to every run, as in :func:`serq.run`, and so do
    ``goodput``, ``precision``, ``precision_on`` and ``max_horizon``: each run
    lengthens itself to the precision asked (its row says the horizon reached)."""
    axes = grid_axes(grid or {}) + class_axes("policy", policies or {}) + class_axes("engine", engines or {})
    plan = make_plan(program, axes, list(seeds), horizon=horizon, warmup=warmup, arrivals=arrivals, trace=trace,
                     max_live=max_live, goodput=goodput, precision=precision, precision_on=precision_on,
                     max_horizon=max_horizon)
    return run_plan(plan, jobs=jobs, backend=backend, address=address, out=out, resume=resume)

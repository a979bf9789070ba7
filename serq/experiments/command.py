"""``serq sweep``: from parsed options to printed results.

The CLI (:mod:`serq.cli`) only collects the option strings and calls
:func:`sweep_command`, which parses them (:mod:`.grid`), runs the sweep or the
capacity search, shows progress on stderr and prints the summary; errors are
:class:`~serq.errors.SerqError` for the CLI to render.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..errors import UsageError
from ..report import _encode, shortest
from .grid import Axis, parse_baseline, parse_class_axis, parse_seeds, parse_set_axis, parse_slo, value_text
from .summary import check_show, summary_csv
from .sweep import SweepInterrupted, SweepRunError, class_axes, make_plan, run_plan

#: The exit status after Ctrl-C (128 + SIGINT), as a shell reports it.
EXIT_INTERRUPTED = 130


@dataclass
class SweepOptions:
    """The command line of ``serq sweep``, as strings and plain values."""

    file: str
    sets: list[str] = field(default_factory=list)
    seeds: str = "1"
    policy: list[str] = field(default_factory=list)
    engine: list[str] = field(default_factory=list)
    horizon: float | None = None
    warmup: float | None = None
    arrivals: int | None = None
    trace: str | None = None
    jobs: int | None = None
    out: str | None = None
    resume: bool = False
    quiet: bool = False
    show: list[str] = field(default_factory=list)
    json: bool = False
    backend: str = "local"
    address: str | None = None
    find_max: str | None = None
    slo: list[str] = field(default_factory=list)
    slo_on: str = "every"
    tol: float | None = None
    max_live: int | None = None
    find_min: str | None = None
    baseline: str | None = None
    csv: bool = False
    goodput: str | None = None
    precision: float | None = None
    precision_on: str | None = None
    max_horizon: float | None = None

    @property
    def search(self) -> tuple[str, str] | None:
        """(the axis, ``"max"`` or ``"min"``) of ``--find-max`` / ``--find-min``, if either."""
        if self.find_max is not None:
            return self.find_max, "max"
        if self.find_min is not None:
            return self.find_min, "min"
        return None


def parse_axes(opts: SweepOptions) -> list[Axis]:
    """The grid's axes: every ``--set``, then ``--policy``, then ``--engine``."""
    search = opts.search
    axes = [parse_set_axis(s, allow_interval=search is not None) for s in opts.sets]
    for kind, items in (("policy", opts.policy), ("engine", opts.engine)):
        choices: dict[str, list[str]] = {}
        for item in items:
            stage, specs = parse_class_axis(item, kind)
            if stage in choices:
                raise UsageError(f"--{kind}: stage `{stage}` is given twice")
            choices[stage] = specs
        axes += class_axes(kind, choices)
    if search is not None and search[0] not in [a.name for a in axes]:
        from ..errors import suggest

        best = suggest(search[0], [a.name for a in axes])
        raise UsageError(f"--find-{search[1]} `{search[0]}`: no such axis",
                         helps=[f"did you mean `{best}`?"] if best else
                         [f"give its interval with --set {search[0]}=START:STOP"])
    for a in axes:
        if a.interval is not None and (search is None or a.name != search[0]):
            raise UsageError(f"invalid --set `{a.name}={shortest(a.values[0])}:{shortest(a.values[1])}`: "
                             "a range is START:STOP:STEP (START:STOP only for the --find-max or --find-min axis)")
    return axes


class _Progress:
    """A rich progress bar on stderr (runs done / total, ETA), or nothing."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> "_Progress":
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self.bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("runs"),
                                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                console=Console(file=sys.stderr), transient=True)
            self.bar.__enter__()
        return self

    def start(self, skipped: int, total: int) -> None:
        if self.bar is not None:
            if self.task is None:
                self.task = self.bar.add_task("sweep", total=total, completed=skipped)
            else:
                self.bar.update(self.task, total=total, completed=skipped)

    def advance(self, _row: Any = None) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (ValueError, AttributeError):
        return False


def check_window(horizon: float | None, warmup: float | None, tol: float | None = None) -> None:
    """``--horizon`` and ``--tol`` finite and > 0, ``--warmup`` finite and >= 0
    (``serq sweep``'s and ``serq compare``'s run options)."""
    for name, value, zero in (("horizon", horizon, False), ("warmup", warmup, True), ("tol", tol, False)):
        if value is not None and not (value == value and abs(value) != float("inf") and
                                      (value > 0 or (zero and value == 0))):
            raise UsageError(f"invalid value for --{name}: {value:g} (must be finite and {'>=' if zero else '>'} 0)")


def sweep_command(opts: SweepOptions, emit: Callable[[str], None], warn: Callable[[str], None]) -> int:
    """Run ``serq sweep``; the exit code (0, or 130 after Ctrl-C)."""
    check_window(opts.horizon, opts.warmup, opts.tol)
    if opts.find_max is not None and opts.find_min is not None:
        raise UsageError("--find-max and --find-min: give one of them")
    if opts.search is None and (opts.slo or opts.tol is not None or opts.slo_on != "every"):
        raise UsageError("--slo, --slo-on and --tol go with --find-max NAME or --find-min NAME")
    if opts.resume and opts.out is None:
        raise UsageError("--resume needs --out FILE (the file to resume from)")
    if opts.csv and opts.json:
        raise UsageError("--csv and --json: give one of them")
    if opts.csv and opts.search is not None:
        raise UsageError("--csv prints a sweep's summary; --find-max and --find-min print a search (--json has it)")
    if opts.trace == "-":
        raise UsageError("--trace -: each run of a sweep reads the trace, and standard input can be read once",
                         helps=["save the trace to a file and give its name"])
    if opts.out == "-":
        raise UsageError("--out -: a sweep's rows go to a file (standard output has the summary; "
                         "--json prints the summary as JSON)", helps=["write the rows with --out FILE.jsonl or FILE.csv"])
    axes = parse_axes(opts)
    if opts.baseline is not None:
        if opts.search is not None:
            raise UsageError("--baseline goes with a sweep, not with --find-max or --find-min")
    seeds = parse_seeds(opts.seeds)
    slos = [parse_slo(s) for s in opts.slo]
    if opts.out is not None:
        from .journal import Journal

        Journal(opts.out)  # a bad name is an error before any run
    if opts.file == "-":  # the program on standard input: read once, handed to the workers as text
        from ..frontend.library import read_text

        text = read_text("-")
        opts.file = text if "\n" in text else text + "\n"
    progress = _Progress(not opts.quiet and _stderr_is_terminal())
    if opts.precision is None and (opts.precision_on is not None or opts.max_horizon is not None):
        raise UsageError("--precision-on and --max-horizon go with --precision REL")
    plan_options = {"horizon": opts.horizon, "warmup": opts.warmup, "arrivals": opts.arrivals,
                    "trace": opts.trace, "max_live": opts.max_live, "goodput": opts.goodput,
                    "precision": opts.precision, "max_horizon": opts.max_horizon,
                    "precision_on": opts.precision_on or _precision_figure(slos)}
    run_options: dict[str, Any] = {"jobs": opts.jobs, "backend": opts.backend, "address": opts.address,
                                   "out": opts.out, "resume": opts.resume,
                                   "on_start": progress.start, "on_row": progress.advance}
    from .backends import Runner

    try:
        with progress, Runner(opts.jobs, opts.backend, opts.address) as runner:
            run_options["runner"] = runner
            if opts.search is not None:
                return _find(opts, axes, seeds, slos, plan_options, run_options, emit, warn)
            plan = make_plan(opts.file, axes, seeds, **plan_options)  # type: ignore[arg-type]
            check_show(opts.show, plan.figures, plan.columns)  # a misspelt figure before the runs
            baseline = _shown_baseline(opts.baseline, plan) if opts.baseline is not None else None  # before any run
            result = run_plan(plan, **run_options)
    except SweepInterrupted as stop:
        warn(_interrupted(stop))
        return EXIT_INTERRUPTED
    except SweepRunError as err:
        if opts.out is not None:
            err.notes.append(f"the finished runs are in {opts.out}; fix the cause, then add --resume to go on")
        raise
    if opts.resume and result.skipped and not opts.quiet:
        warn(f"resumed: {result.skipped} run(s) were already in {opts.out}")
    summary = result.summary(opts.show or None)
    pairs = result.paired(baseline, opts.show or None) if baseline is not None else None
    if opts.json:
        data = summary.to_dict()
        if pairs is not None:
            data["paired"] = pairs.to_dict()
        emit(_encode(data))
    elif opts.csv:
        emit(summary_csv(summary, pairs))
    else:
        emit(summary.text() if pairs is None else summary.text() + "\n\n" + pairs.text())
    return 0


def _shown_baseline(spec: str, plan: Any) -> str:
    """``--baseline`` as the rows show its value: ``BwD=BwP`` → ``BwD=200000``
    when ``BwP`` is an expression the plan replaced by its value (a value an
    expression gives differently at different points is a usage error)."""
    try:
        axis, value = parse_baseline(spec, plan.axes)
    except UsageError:  # a value as the rows show it, or an error that lists those
        parse_baseline(spec, [replace(a, values=tuple(dict.fromkeys(p[i] for p in plan.points)))
                              for i, a in enumerate(plan.axes)])
        return spec
    i = plan.columns.index(axis)
    shown = list(dict.fromkeys(value_text(p[i]) for p, g in zip(plan.points, plan.given) if g[i] == value))
    if len(shown) > 1:
        raise UsageError(f"--baseline `{spec}`: `{value_text(value)}` gives {axis} the values {', '.join(shown)} "
                         "at different points", helps=[f"name one of them: --baseline {axis}={shown[0]}"])
    return spec if shown == [value_text(value)] else f"{axis}={shown[0]}"


def _precision_figure(slos: list[Any]) -> str | None:
    """What ``--precision`` reads in a sweep by default: the first SLO's figure
    when it is a mean, else the mean of its row (a quantile has no interval in
    one run: ``client.ttft.p99`` reads ``client.ttft.mean``); without an SLO,
    the run's default (``client.response.mean``)."""
    if not slos:
        return None
    head, _, _stat = slos[0].figure.rpartition(".")
    return f"{head}.mean" if head else None


def _interrupted(stop: SweepInterrupted) -> str:
    if stop.out is None:
        return f"interrupted: {stop.kept} of {stop.total} runs finished (nothing kept: no --out FILE)"
    return (f"interrupted: {stop.kept} of {stop.total} runs kept in {stop.out}; "
            "run the same command with --resume to finish")


def _find(opts: SweepOptions, axes: list[Axis], seeds: list[int], slos: list[Any],
          plan_options: dict[str, Any], run_options: dict[str, Any],
          emit: Callable[[str], None], warn: Callable[[str], None]) -> int:
    from .search import describe, no_answer, search

    assert opts.search is not None
    name, goal = opts.search
    # each step on stderr as it ends (a terminal or not, with --json too): stdout keeps the answer alone
    show = (lambda entry: None) if opts.quiet else (lambda entry: warn(describe(entry, name)))
    result = search(opts.file, axes, name, slos, seeds, goal=goal, on=opts.slo_on, tol=opts.tol,
                    run_options=run_options, plan_options=plan_options, on_step=show)
    if opts.json:
        emit(_encode(result.to_dict()))
    if result.value is None:
        raise no_answer(result)
    if not opts.json:
        emit(f"{name} = {shortest(result.value)}")
    return 0

"""The ``serq`` command: a thin shell over :mod:`serq.api`.

Exit codes (semantics §10): 0 success; 1 a program error (it does not load,
does not link, fails at run time) or an output that cannot be written (a
file, a folder, or standard output: closed, or a full device); 2 a usage
error (unknown option, missing or invalid value); 4 a claim did not hold
(``run --check-claims``, ``prove``); 5 ``prove`` could not decide a claim.  When the reader of
standard output goes away (``serq run … | head -1``) the exit is a quiet 1, as
click's own output (``--help``) does.  Errors go to stderr; no Python
traceback ever reaches the user.
"""

# (no `from __future__ import annotations` here: typer reads every command's annotations
# when it builds the command, and string annotations cost it two evaluations each, ~300
# compile() calls at every start; evaluated once at definition they cost nothing more)

import atexit
import math
import os
import re
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

from ._collector import for_the_command

for_the_command()  # the collector as in a run from here on: typer's and the run's modules load (serq/_collector.py)

import typer
import typer.main

if TYPE_CHECKING:  # one definition for the checker: the click that typer ≥ 0.2x vendors
    from typer._click.exceptions import UsageError as ClickUsageError
else:
    try:  # typer ≥ 0.2x vendors click; older typers depend on it
        from typer._click.exceptions import UsageError as ClickUsageError
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click.exceptions import UsageError as ClickUsageError

from ._typer_patch import quick_coercion
from .errors import RunInterrupted, SerqError, UsageError

#: The exit codes, as ``serq --help`` and the README list them.
EXIT_CODES = """\b
Exit codes:
  0    success
  1    the program is wrong (it does not load, link or run) or an output
       cannot be written
  2    a usage error (unknown option, missing or invalid value)
  3    an internal error: a bug in serq (please report it)
  4    a claim did not hold: `serq run --check-claims` (one fails or is not
       witnessed), `serq prove` (one is refuted or has no witness)
  5    `serq prove`: no claim refuted, but one is unknown
  130  interrupted (Ctrl-C); nothing is half-written"""

app = typer.Typer(
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    rich_markup_mode=None,  # click's plain help: flags without a `<bool>` type, and no rich import
    context_settings={"help_option_names": ["-h", "--help"]},
    help="serQ: check, draw and run serving-system programs.",
    epilog=EXIT_CODES,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            shown = version("serq")
        except PackageNotFoundError:  # pragma: no cover - run from a source tree that was never installed
            shown = "unknown (not installed)"
        typer.echo(f"serq {shown}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print serq's version and exit."),
) -> None:
    """serQ: check, draw and run serving-system programs."""

_SET_NAME = re.compile(r"[^\W\d]\w*\Z")


def parse_sets(values: List[str] | None) -> list[tuple[str, str]]:
    """``NAME=EXPR`` pairs; a malformed one is a usage error."""
    pairs = []
    for item in values or []:
        name, eq, expr = item.partition("=")
        name = name.strip()
        if not eq:
            raise UsageError(f"invalid --set `{item}`; expected NAME=EXPR")
        if not _SET_NAME.match(name):
            raise UsageError(f"invalid set name `{name}`; expected an identifier")
        if not expr.strip():
            raise UsageError(f"invalid expression in set `{name} = {expr}`: expected an expression")
        pairs.append((name, expr))
    return pairs


def _fail(err: SerqError, file: str | None) -> "typer.Exit":
    text = err.render()
    if err.span is None and file and not isinstance(err, UsageError) and not err.prefix:
        text = f"{'<stdin>' if file == '-' else file}: {text}"
    if isinstance(err, UsageError):
        text = f"error: {text}"
    typer.echo(text, err=True)
    return typer.Exit(2 if isinstance(err, UsageError) else 1)


def _finite_positive(value: Optional[float], name: str, allow_zero: bool = False) -> None:
    if value is None:
        return
    bad = not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero)
    if bad:
        need = "finite and >= 0" if allow_zero else "finite and > 0"
        raise UsageError(f"invalid value for --{name}: {value:g} (must be {need})")


#: The exit status when a claim did not hold (``run --check-claims``, ``prove``), and when
#: ``prove`` could not decide one (docs/claims.md)
EXIT_CLAIM = 4
EXIT_UNKNOWN = 5
#: The exit status after Ctrl-C (128 + SIGINT), as a shell reports it.
EXIT_INTERRUPTED = 130

#: The exit status when standard output's reader has gone (``… | head``), with no
#: message: click's own choice for the help it prints.
EXIT_BROKEN_PIPE = 1


def _silence_stdout() -> None:
    """Point file descriptor 1 at the null device, so that the interpreter's
    flush at exit cannot fail again (and print "Exception ignored …")."""
    try:
        fd = sys.stdout.fileno()  # type: ignore[union-attr]
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _cannot_write(what: str, reason: str) -> "typer.Exit":
    try:
        typer.echo(f"cannot write {what} to standard output: {reason}", err=True)
    except (OSError, ValueError):
        pass
    return typer.Exit(1)


def _need_stdout(what: str) -> None:
    """Refuse to start work whose result has nowhere to go (``serq run … >&-``)."""
    if sys.stdout is None:
        raise _cannot_write(what, "it is closed")


def _emit(text: str, what: str) -> None:
    """Print ``text`` (a newline added if missing) and flush, so that a full
    device or a closed pipe is noticed here rather than at interpreter exit."""
    _need_stdout(what)
    stream = sys.stdout
    assert stream is not None
    try:
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    except (OSError, ValueError) as err:
        _silence_stdout()
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise _cannot_write(what, reason) from None


SetOpt = typer.Option(None, "--set", metavar="NAME=EXPR", help="Override a `let` constant (repeatable).")
MaxLiveOpt = typer.Option(None, "--max-live", min=1, metavar="N",
                          help="End the run with an error past N sessions live at once (default 1000000).")
PrecisionOpt = typer.Option(None, "--precision", metavar="REL",
                            help="Lengthen the run until the 95% half-width is within REL of the figure "
                            "(0.05: 5%), doubling the horizon and warm-up.")
PrecisionOnOpt = typer.Option(None, "--precision-on", metavar="FIGURE",
                              help="The mean --precision reads (default: in a sweep the first --slo's row, "
                              "else client.response.mean).")
MaxHorizonOpt = typer.Option(None, "--max-horizon", metavar="T",
                             help="The longest horizon --precision may reach (default 32 x the horizon).")
GoodputOpt = typer.Option(None, "--goodput", metavar="TARGETS",
                          help="Add client.goodput, the share of turns meeting every target, e.g. "
                          "'ttft<=0.5,tpot<=0.05' (seconds).")


@app.command()
def check(
    file: str = typer.Argument(..., metavar="FILE", help="A .sq program (- reads standard input)."),
    set_: Optional[List[str]] = SetOpt,
) -> None:
    """Validate a program without running it."""
    from . import api

    _need_stdout("the summary")
    try:
        program = api.load(Path(file), sets=parse_sets(set_))
    except SerqError as err:
        raise _fail(err, file) from None
    _emit(program.summary(), "the summary")


@app.command()
def run(
    file: str = typer.Argument(..., metavar="FILE", help="A .sq program (- reads standard input)."),
    horizon: Optional[float] = typer.Option(None, metavar="T", help="Simulated end time (overrides run { horizon })."),
    warmup: Optional[float] = typer.Option(None, metavar="T", help="Statistics start here (overrides run { warmup })."),
    seed: Optional[int] = typer.Option(None, min=0, metavar="N", help="Random seed, an unsigned integer."),
    arrivals: Optional[int] = typer.Option(None, min=1, metavar="N", help="Stop after exactly N open arrivals, then drain."),
    max_live: Optional[int] = MaxLiveOpt,
    max_events: Optional[int] = typer.Option(None, "--max-events", min=1, metavar="N",
                                             help="End the run with an error past N events (default: no bound)."),
    set_: Optional[List[str]] = SetOpt,
    trace: Optional[str] = typer.Option(None, metavar="F",
                                        help="Replace the workload's trace file (- reads standard input)."),
    json_: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    dump: Optional[str] = typer.Option(None, metavar="DIR", help="Write one CSV per observation into DIR."),
    steps: bool = typer.Option(False, "--steps", help="With --dump: write DIR/STAGE.steps.csv, one row per "
                               "iteration of each step stage (for serq fit; docs/calibration.md)."),
    engine: Optional[List[str]] = typer.Option(
        None, metavar="STAGE=module:Class", help="Use a StepEngine subclass for a step stage (repeatable)."
    ),
    policy: Optional[List[str]] = typer.Option(
        None, metavar="STAGE=NAME", help="An admission policy for a step stage: fcfs, sjf, lpm, fair, priority[:ATTR], "
        "slo[:TARGET] or module:Class (repeatable; docs/policies.md)."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress line (shown on a terminal once a run lasts 1 s)."),
    goodput: Optional[str] = GoodputOpt,
    precision: Optional[float] = PrecisionOpt,
    precision_on: Optional[str] = PrecisionOnOpt,
    max_horizon: Optional[float] = MaxHorizonOpt,
    timeline: Optional[str] = typer.Option(
        None, "--timeline", metavar="DIR", help="Write DIR/timeline.csv: queues, running, used and tokens/s of "
        "every stage and pool, sampled every --timeline-every seconds (docs/report.md, \"Over time\")."),
    timeline_every: Optional[float] = typer.Option(
        None, "--timeline-every", metavar="DT", help="The timeline's interval in simulated seconds "
        "(default: the horizon / 200)."),
    check_claims: bool = typer.Option(False, "--check-claims", help="Exit 4 when a claim fails or is not "
                                      "witnessed on this run (docs/claims.md)."),
    replay: Optional[str] = typer.Option(None, "--replay", metavar="JSON|FILE", help="Run these sessions "
                                           "instead of the workload's arrivals: a JSON list of {arrival, attributes} "
                                           "(a counterexample of serq prove), or a file holding one."),
) -> None:
    """Simulate a program and print its report."""
    from . import api
    from .sim.engines import check_stages, load_engine_classes

    _need_stdout("the report")
    try:
        _finite_positive(horizon, "horizon")
        _finite_positive(warmup, "warmup", allow_zero=True)
        if precision is None and (precision_on is not None or max_horizon is not None):
            raise UsageError("--precision-on and --max-horizon go with --precision REL")
        _finite_positive(timeline_every, "timeline-every")
        if timeline_every is not None and timeline is None:
            raise UsageError("--timeline-every needs --timeline DIR: the samples are written there as timeline.csv")
        if timeline == "-":
            raise UsageError("--timeline -: the timeline is a folder with timeline.csv, which standard output "
                             "cannot hold", helps=["give a folder: --timeline DIR"])
        if steps and dump is None:
            raise UsageError("--steps needs --dump DIR: the step logs are written there as STAGE.steps.csv")
        if dump == "-":
            raise UsageError("--dump -: the dump is a folder of CSV files, which standard output cannot hold",
                             helps=["give a folder: --dump DIR"])
        if file == "-" and trace == "-":
            raise UsageError("the program and --trace both read standard input: give one of them as a file")
        sets = parse_sets(set_)
        listed = None if replay is None else _listed_sessions(replay)
        program = api.load(Path(file), sets=sets, trace=trace)
        if listed is not None:
            _check_listed(program, listed)
        check_stages(program, [(kind, spec.partition("=")[0].strip()) for kind, given in
                               (("engine", engine or []), ("policy", policy or [])) for spec in given if "=" in spec])
        engines = load_engine_classes(engine or [])
        if policy:
            from .policies import from_options

            engines = from_options(policy, engines)
        from .progress import stderr_is_terminal

        report = api.run(program, seed=seed, horizon=horizon, warmup=warmup, arrivals=arrivals, engines=engines,
                         max_live=max_live, steps=steps, progress=not quiet and stderr_is_terminal(),
                         max_events=max_events, goodput=goodput, precision=precision,
                         precision_on=precision_on, max_horizon=max_horizon,
                         timeline=None if timeline is None else (True if timeline_every is None else timeline_every),
                         sessions=listed)
    except RunInterrupted as err:
        typer.echo(f"interrupted at t={err.now:g} of {err.horizon:g} simulated seconds: no report was written",
                   err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except SerqError as err:
        raise _fail(err, file) from None
    if dump is not None:
        from .files import write_dir_atomic

        try:
            write_dir_atomic(dump, report.dump)
        except OSError as err:
            typer.echo(f"cannot write {dump}: {err.strerror or err}", err=True)
            raise typer.Exit(1) from None
    if timeline is not None and report.timeline is not None:
        from .files import write_dir_atomic

        try:
            write_dir_atomic(timeline, report.timeline.write)
        except OSError as err:
            typer.echo(f"cannot write {timeline}: {err.strerror or err}", err=True)
            raise typer.Exit(1) from None
    _emit(report.to_json() if json_ else report.text(), "the report")
    for line in report.warnings():
        typer.echo(f"warning: {line}", err=True)
    note = report.replay_note()
    if note is not None:
        typer.echo(f"note: {note}", err=True)
    if report.precision is not None:
        from .sim.precision import note as precision_note

        kind = "note" if report.precision["reached"] else "warning"
        typer.echo(f"{kind}: {precision_note(report.precision)}", err=True)
    if check_claims:
        if not report.claims:
            typer.echo("warning: --check-claims: the program states no claim", err=True)
        failed = [c for c in report.claims if not c.passed]
        for c in failed:
            at = "" if c.first is None else f" at {c.first:g}"
            typer.echo(f"claim {c.name}: {c.result}{at}", err=True)
        if failed:
            raise typer.Exit(EXIT_CLAIM)


@app.command()
def prove(
    file: str = typer.Argument(..., metavar="FILE", help="A .sq program with claims (- reads standard input)."),
    set_: Optional[List[str]] = SetOpt,
    json_: bool = typer.Option(False, "--json", help="Print the verdicts as JSON."),
    bound: Optional[List[str]] = typer.Option(None, "--bound", metavar="NAME=LO..HI[:STEP]", help="The values of a "
                                              "drawn attribute to explore (repeatable): whole numbers LO to HI."),
    sessions: Optional[int] = typer.Option(None, "--sessions", min=1, metavar="K",
                                           help="How many sessions a family of open arrivals has (default 2)."),
    grid: Optional[str] = typer.Option(None, "--grid", metavar="DT", help="Poisson arrivals: the spacing of the "
                                       "instants a session may arrive at."),
    instants: int = typer.Option(4, "--instants", min=1, metavar="M", help="With --grid: how many instants."),
    max_states: int = typer.Option(2_000_000, "--max-states", min=1, metavar="N",
                                   help="Give up (unknown) past N machine steps."),
    max_paths: int = typer.Option(200_000, "--max-paths", min=1, metavar="N",
                                  help="Give up (unknown) past N workloads."),
) -> None:
    """Decide the program's claims over every path of its family of workloads."""
    from fractions import Fraction

    from . import api
    from .prove.explore import Limits
    from .prove.family import Bound, check_bounds
    from .prove.verdicts import prove as prove_claims

    _need_stdout("the verdicts")
    try:
        try:
            bounds = [Bound.parse(b) for b in bound or []]
            step = None if grid is None else Fraction(grid)
        except (ValueError, ZeroDivisionError) as err:
            raise UsageError(str(err) if "--bound" in str(err) else f"--grid {grid}: not a number") from None
        if step is not None and step <= 0:
            raise UsageError(f"--grid {grid}: the spacing must be positive")
        sets = parse_sets(set_)
        program = api.load(Path(file), sets=sets)
        try:
            check_bounds(program, bounds)
        except ValueError as err:
            raise UsageError(str(err)) from None
        proof = prove_claims(program, bounds=bounds, sessions=sessions, grid=step, instants=instants,
                             limits=Limits(max_states=max_states, max_paths=max_paths), sets=sets)
    except SerqError as err:
        raise _fail(err, file) from None
    if json_:
        import json

        _emit(json.dumps(proof.to_dict(), separators=(",", ":"), ensure_ascii=False), "the verdicts")
    else:
        _emit(proof.text(), "the verdicts")
    raise typer.Exit(proof.exit_code)


def _listed_sessions(spec: str) -> list[dict[str, Any]]:
    """``--replay``: inline JSON (it starts with ``[``, ``{`` or ``"``) or a file holding it;
    a list of sessions, each ``{"arrival": T, "attributes": {NAME: VALUE}}`` (and the
    ``serial`` ``serq prove`` shows), arriving at finite times ≥ 0 in order."""
    import json

    text = spec
    if not spec.lstrip().startswith(("[", "{", '"')):
        try:
            text = Path(spec).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            why = getattr(err, "strerror", None) or ("not UTF-8 text" if isinstance(err, UnicodeDecodeError) else err)
            raise UsageError(f"--replay {spec}: cannot read it: {why}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"--replay: not JSON ({err.msg} at character {err.pos})") from None
    except RecursionError:
        raise UsageError("--replay: the JSON is nested too deeply") from None
    shape = '{"arrival": T, "attributes": {NAME: VALUE}}'
    if not (isinstance(value, list) and all(isinstance(x, dict) for x in value)):
        raise UsageError(f"--replay: expected a JSON list of {shape}")
    last = 0.0
    for i, x in enumerate(value):
        extra = sorted(set(x) - {"arrival", "attributes", "serial"})
        if extra:
            raise UsageError(f"--replay: session {i} has `{extra[0]}`: a session is {shape}")
        t = _finite_number(x.get("arrival", 0))
        if t is None or t < last:
            raise UsageError(f"--replay: session {i} arrives at {_shown(x.get('arrival'))}: the arrivals "
                             f"are finite times ≥ 0 in order" + (f" (session {i - 1} arrives at {last:g})" if i else ""))
        last = t
        attrs = x.get("attributes", {})
        if not isinstance(attrs, dict):
            raise UsageError(f"--replay: session {i}'s attributes are not an object {{NAME: VALUE}}")
        for name, v in attrs.items():
            if _finite_number(v) is None:
                raise UsageError(f"--replay: session {i} sets `{name}` to {_shown(v)}: not a finite number")
    return value


def _shown(v: Any) -> str:
    """A JSON value in a message, cut to 40 characters."""
    import json

    text = json.dumps(v)
    return text if len(text) <= 40 else text[:39] + "…"


def _finite_number(v: Any) -> float | None:
    """A JSON number as a finite float, or None (a string, a boolean, NaN, ±inf, 1e400, 10**400)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _check_listed(program: Any, sessions: list[dict[str, Any]]) -> None:
    """``--replay``: every attribute a session sets is one of the program's own (did you mean …)."""
    from . import ir
    from .errors import suggest

    own = list(program.attributes[len(ir.BUILTIN_ATTRIBUTES):])
    for i, x in enumerate(sessions):
        for name in x.get("attributes") or {}:
            if name not in own:
                near = suggest(name, own)
                hint = f" (did you mean `{near}`?)" if near is not None else ""
                raise UsageError(f"--replay: session {i} sets `{name}`, which is not an attribute of the "
                                 f"program{hint}; its attributes: {', '.join(own) or 'none'}")


@app.command()
def draw(
    file: str = typer.Argument(..., metavar="FILE", help="A .sq program (- reads standard input)."),
    set_: Optional[List[str]] = SetOpt,
    format_: str = typer.Option("tikz", "--format", help="svg or tikz."),
    out: Optional[str] = typer.Option(None, metavar="PATH", help="Write to PATH instead of stdout (- is stdout)."),
) -> None:
    """Draw the deployment: pools, stages, the session's flow and what each hold spans."""
    from . import api
    from .files import write_text_atomic

    if out is None:
        _need_stdout("the drawing")
    try:
        if format_ not in ("svg", "tikz"):
            raise UsageError(f"invalid value for --format: `{format_}` (expected svg or tikz)")
        program = api.load(Path(file), sets=parse_sets(set_))
        from .draw import render

        text = render(program, format_)
    except SerqError as err:
        raise _fail(err, file) from None
    if out is None:
        _emit(text, "the drawing")
        return
    try:
        write_text_atomic(out, text)
    except BrokenPipeError:
        raise
    except OSError as err:
        typer.echo(f"cannot write {out}: {err.strerror or err}", err=True)
        raise typer.Exit(1) from None


@app.command()
def sweep(
    file: str = typer.Argument(..., metavar="FILE", help="A .sq program (- reads standard input)."),
    set_: Optional[List[str]] = typer.Option(
        None, "--set", metavar="NAME=VALUES",
        help="An axis: START:STOP:STEP, A,B,C or one value (repeatable; several make a product)."),
    seeds: str = typer.Option("1", metavar="SEEDS", help="Seeds: 1-10, 1,3,5 or 7."),
    policy: Optional[List[str]] = typer.Option(None, metavar="STAGE=fcfs,sjf", help="Policies as an axis."),
    engine: Optional[List[str]] = typer.Option(None, metavar="STAGE=mod:A,mod:B", help="Engine classes as an axis."),
    horizon: Optional[float] = typer.Option(None, metavar="T", help="Simulated end time (overrides run { horizon })."),
    warmup: Optional[float] = typer.Option(None, metavar="T", help="Statistics start here (overrides run { warmup })."),
    arrivals: Optional[int] = typer.Option(None, min=1, metavar="N", help="Stop after exactly N open arrivals, then drain."),
    max_live: Optional[int] = MaxLiveOpt,
    trace: Optional[str] = typer.Option(None, metavar="F", help="Replace the workload's trace file."),
    jobs: Optional[int] = typer.Option(None, min=1, help="Worker processes (default: this process, then the cores "
                                       "once the runs left would take over a second)."),
    out: Optional[str] = typer.Option(None, metavar="FILE", help="Rows to FILE.jsonl or FILE.csv, as runs end."),
    resume: bool = typer.Option(False, "--resume", help="Skip the runs --out already holds."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar, no search steps on stderr."),
    show: Optional[List[str]] = typer.Option(None, metavar="FIGURE", help="A figure for the summary (repeatable)."),
    json_: bool = typer.Option(False, "--json", help="Print the summary (or the search) as JSON."),
    csv_: bool = typer.Option(False, "--csv", help="Print the summary as CSV: a row per point, each figure's "
                              "mean, half-width and n, and with --baseline its paired difference."),
    backend: str = typer.Option("local", help="local (a process pool) or ray."),
    address: Optional[str] = typer.Option(None, help="A Ray cluster to join (--backend ray)."),
    find_max: Optional[str] = typer.Option(None, metavar="NAME", help="Bisect NAME's START:STOP for the SLOs."),
    find_min: Optional[str] = typer.Option(None, metavar="NAME",
                                           help="The smallest NAME in START:STOP meeting the SLOs (replicas)."),
    slo: Optional[List[str]] = typer.Option(None, metavar="FIGURE<=X", help="An SLO for --find-max/--find-min (repeatable)."),
    slo_on: str = typer.Option("every", metavar="every|mean", help="SLOs hold on every seed, or on the mean."),
    tol: Optional[float] = typer.Option(None, help="The search stops when the bracket is this narrow."),
    baseline: Optional[str] = typer.Option(
        None, metavar="AXIS=VALUE",
        help="Also print each other design's paired difference from this one (same seed, same point)."),
    goodput: Optional[str] = GoodputOpt,
    precision: Optional[float] = PrecisionOpt,
    precision_on: Optional[str] = PrecisionOnOpt,
    max_horizon: Optional[float] = MaxHorizonOpt,
) -> None:
    """Run a grid of --set values x seeds in parallel; print a summary across seeds."""
    from .experiments.command import SweepOptions, sweep_command

    _need_stdout("the summary")
    opts = SweepOptions(file, set_ or [], seeds, policy or [], engine or [], horizon, warmup, arrivals, trace, jobs,
                        out, resume, quiet, [f for s in show or [] for f in s.split(",") if f], json_, backend,
                        address, find_max, slo or [], slo_on, tol, max_live, find_min, baseline, csv_,
                        goodput, precision, precision_on, max_horizon)
    try:
        code = sweep_command(opts, lambda text: _emit(text, "the summary"), lambda line: typer.echo(line, err=True))
    except SerqError as err:
        raise _fail(err, file) from None
    raise typer.Exit(code)


# The run options of the commands that run a program on many seeds (`serq compare`; `serq sweep`
# spells the same options out and can take these).
HorizonOpt = typer.Option(None, "--horizon", metavar="T", help="Simulated end time (overrides run { horizon }).")
WarmupOpt = typer.Option(None, "--warmup", metavar="T", help="Statistics start here (overrides run { warmup }).")
ArrivalsOpt = typer.Option(None, "--arrivals", min=1, metavar="N", help="Stop after exactly N open arrivals, then drain.")
JobsOpt = typer.Option(None, "--jobs", min=1, help="Worker processes (default: this process, then the cores once the "
                       "runs left would take over a second).")
BackendOpt = typer.Option("local", "--backend", help="local (a process pool) or ray.")
AddressOpt = typer.Option(None, "--address", help="A Ray cluster to join (--backend ray).")


@app.command()
def compare(
    file_a: str = typer.Argument(..., metavar="A", help="The baseline program (- reads standard input)."),
    file_b: str = typer.Argument(..., metavar="B", help="The program compared with it."),
    set_: Optional[List[str]] = typer.Option(None, "--set", metavar="NAME=EXPR",
                                             help="Override a `let` in each program that has it (repeatable)."),
    set_a: Optional[List[str]] = typer.Option(None, "--set-a", metavar="NAME=EXPR",
                                              help="Override a `let` of A alone (repeatable; wins over --set)."),
    set_b: Optional[List[str]] = typer.Option(None, "--set-b", metavar="NAME=EXPR",
                                              help="Override a `let` of B alone (repeatable; wins over --set)."),
    seeds: str = typer.Option("1", metavar="SEEDS", help="The common seeds: 1-10, 1,3,5 or 7."),
    horizon: Optional[float] = HorizonOpt,
    warmup: Optional[float] = WarmupOpt,
    arrivals: Optional[int] = ArrivalsOpt,
    max_live: Optional[int] = MaxLiveOpt,
    trace: Optional[str] = typer.Option(None, metavar="F", help="Replace both workloads' trace file."),
    jobs: Optional[int] = JobsOpt,
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    show: Optional[List[str]] = typer.Option(None, metavar="FIGURE", help="A figure to compare (repeatable)."),
    json_: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    csv_: bool = typer.Option(False, "--csv", help="Print the comparison as CSV: key, a, b, diff, half_width, n."),
    backend: str = BackendOpt,
    address: Optional[str] = AddressOpt,
    goodput: Optional[str] = GoodputOpt,
) -> None:
    """Run two programs on the same seeds; print B − A per figure, paired by seed, with 95 % intervals."""
    from .experiments.compare import CompareOptions, compare_command

    _need_stdout("the comparison")
    try:
        opts = CompareOptions(file_a, file_b, parse_sets(set_), parse_sets(set_a), parse_sets(set_b), seeds,
                              horizon, warmup, arrivals, trace, max_live, jobs, backend, address, quiet,
                              [f for s in show or [] for f in s.split(",") if f], json_, csv_, goodput)
        code = compare_command(opts, lambda text: _emit(text, "the comparison"), lambda line: typer.echo(line, err=True))
    except SerqError as err:
        raise _fail(err, None) from None
    raise typer.Exit(code)


@app.command()
def plot(
    files: List[str] = typer.Argument(..., metavar="RESULTS | CSV...",
                                      help="A sweep's .jsonl/.csv (- reads standard input), dump CSVs, "
                                           "or with --timeline a timeline folder."),
    x: Optional[str] = typer.Option(None, "--x", metavar="COLUMN", help="The axis across (e.g. Lambda)."),
    y: Optional[List[str]] = typer.Option(None, "--y", metavar="COLUMN", help="A figure (repeatable: one panel each)."),
    hue: Optional[str] = typer.Option(None, metavar="COLUMN", help="One line per value of COLUMN (e.g. policy)."),
    where: Optional[List[str]] = typer.Option(None, metavar="COLUMN=VALUE", help="Keep matching rows (repeatable)."),
    cdf: bool = typer.Option(False, "--cdf", help="Empirical CDF of each CSV's value column (from --dump)."),
    log_x: bool = typer.Option(False, "--log-x", help="Log scale on x (with --cdf)."),
    log_y: bool = typer.Option(False, "--log-y", help="Log scale on y (a sweep's figures)."),
    slo: Optional[List[str]] = typer.Option(None, "--slo", metavar="FIGURE<=X",
                                            help="Draw a target as a dashed line on FIGURE's panel (<= or >=; "
                                                 "repeatable)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="AXIS=VALUE",
                                           help="Plot each other design's paired difference from this one "
                                                "(same seed, same point), with 0 marked."),
    timeline: bool = typer.Option(False, "--timeline", help="Draw a run's timeline: the folder (or its "
                                  "timeline.csv) that serq run --timeline DIR wrote."),
    out: str = typer.Option(..., metavar="FIG.png|FIG.svg",
                            help="The figure, PNG or SVG by suffix (- writes SVG to standard output)."),
) -> None:
    """Plot a sweep's figures across seeds, CDFs of a dump's samples, or a run's timeline (needs matplotlib:
    the plot extra)."""
    from .experiments.plot import command

    try:
        command(files, x, y or [], hue, where or [], cdf, log_x, out, log_y=log_y, slo=slo or [],
                baseline=baseline, timeline=timeline)
    except SerqError as err:
        raise _fail(err, None) from None


trace_app = typer.Typer(no_args_is_help=True, help="Trace files: import public LLM traces (docs/traces.md).")
app.add_typer(trace_app, name="trace")


@trace_app.command("import")
def trace_import(
    format_: str = typer.Argument(..., metavar="FORMAT", help="splitwise (vidur), azure, mooncake or burstgpt."),
    src: str = typer.Argument(..., metavar="IN", help="The source trace (- for stdin; .gz is gunzipped)."),
    out: str = typer.Option(..., "-o", "--out", metavar="OUT.csv",
                            help="The serQ trace to write (- for standard output)."),
    limit: Optional[int] = typer.Option(None, min=1, metavar="N", help="Keep the first N requests (of the window)."),
    start: float = typer.Option(0.0, metavar="S", help="Skip the requests before S seconds into the trace."),
    duration: Optional[float] = typer.Option(None, metavar="D", help="Keep D seconds from --start."),
    scale: float = typer.Option(1.0, metavar="F", help="Multiply arrival times by F (0.5: twice as fast)."),
    model: Optional[List[str]] = typer.Option(None, metavar="NAME", help="burstgpt: keep this Model (repeatable)."),
) -> None:
    """Convert a public trace to serQ's trace CSV: one single-turn session per request, with its arrival."""
    from .traces.convert import import_trace
    from .traces.formats import get_format

    try:
        try:
            get_format(format_)
        except SerqError as err:
            raise UsageError(err.message, helps=err.helps) from None
        summary = import_trace(format_, src, out, limit=limit, start=start, duration=duration, scale=scale,
                               models=model or ())
    except SerqError as err:
        raise _fail(err, None) from None
    except BrokenPipeError:
        raise
    except OSError as err:
        typer.echo(f"cannot write {out}: {err.strerror or err}", err=True)
        raise typer.Exit(1) from None
    typer.echo(summary.text("standard output" if out == "-" else out), err=True)
    if summary.too_large:
        typer.echo(f"warning: {out} is larger than the {summary.limit_text} a trace may hold; "
                   "cut it with --limit or --duration", err=True)


@app.command()
def fit(
    file: str = typer.Argument(..., metavar="STEPS.csv",
                               help="A step log: duration and context variables (- reads standard input)."),
    terms: Optional[str] = typer.Option(None, metavar="c,decoders,...", help="A linear model of these columns "
                                        "(c: the constant; default c,tokens)."),
    roofline: bool = typer.Option(False, "--roofline", help="Fit c0 + max(omega + beta*kv, a*tokens) instead."),
    no_c0: bool = typer.Option(False, "--no-c0", help="With --roofline: no constant c0."),
    relative: bool = typer.Option(False, "--relative", help="Minimise relative residuals (weights 1/duration)."),
    json_: bool = typer.Option(False, "--json", help="Print the fit as JSON."),
    plot_: Optional[str] = typer.Option(None, "--plot", metavar="FILE.svg", help="A residual plot (matplotlib)."),
    solver: str = typer.Option("builtin", metavar="builtin|scipy",
                               help="The NNLS solver: builtin (the same digits on every machine; auto and numpy "
                                    "are other names for it) or scipy (SciPy's nnls: may differ in the last digits "
                                    "across machines)."),
) -> None:
    """Fit a step stage's cost to measured iterations (docs/calibration.md)."""
    import json

    from .calibration import fit as fitting
    from .calibration.linalg import SOLVER_ALIASES, SOLVERS

    _need_stdout("the fit")
    try:
        if solver not in SOLVERS and solver not in SOLVER_ALIASES:
            raise UsageError(f"invalid value for --solver: `{solver}` (expected builtin or scipy)")
        if roofline and terms is not None:
            raise UsageError("--terms and --roofline are two models: give one")
        if no_c0 and not roofline:
            raise UsageError("--no-c0 goes with --roofline (in a linear model, leave `c` out of --terms)")
        if plot_ is not None:
            fitting.check_plot(plot_)  # before the data is read and fitted
        if solver == "scipy":
            try:
                import scipy.optimize  # noqa: F401
            except ImportError:
                raise SerqError("--solver scipy: SciPy is not installed",
                                helps=["install the fit extra: pip install 'serq[fit]'"]) from None
        header, cols = fitting.read_csv(file)
        source = "<stdin>" if file == "-" else os.path.basename(file)
        if roofline:
            result = fitting.fit_roofline(cols, header, c0=not no_c0, source=source, method=solver,
                                          relative=relative)
        else:
            names = [t.strip() for t in (terms or "c,tokens").split(",") if t.strip()]
            result = fitting.fit_linear(cols, header, names, source=source, method=solver, relative=relative)
        if plot_ is not None:
            fitting.plot_residuals(result, plot_)
    except SerqError as err:
        raise _fail(err, None) from None
    _emit(json.dumps(result.to_json(), indent=2) if json_ else result.text(), "the fit")


@app.command(name="roofline")
def roofline_cmd(
    model: Optional[str] = typer.Option(None, metavar="NAME", help="A built-in model (see --list)."),
    params: Optional[float] = typer.Option(None, metavar="P", help="Parameters (e.g. 8.2e9)."),
    layers: Optional[int] = typer.Option(None, metavar="L", help="Layers."),
    kv_heads: Optional[int] = typer.Option(None, metavar="H", help="KV heads (grouped-query attention)."),
    head_dim: Optional[int] = typer.Option(None, metavar="D", help="Head size."),
    dtype: str = typer.Option("bf16", metavar="DTYPE", help="Weights: fp32, bf16, fp16, fp8, int8, int4."),
    kv_dtype: Optional[str] = typer.Option(None, metavar="DTYPE", help="KV cache dtype [default: --dtype]."),
    gpu: Optional[str] = typer.Option(None, metavar="NAME", help="A built-in GPU (see --list)."),
    flops: Optional[float] = typer.Option(None, metavar="F", help="Peak dense FLOP/s at the dtype."),
    bandwidth: Optional[float] = typer.Option(None, metavar="B", help="Memory bandwidth, bytes/s."),
    flops_eff: float = typer.Option(1.0, metavar="X", help="Achieved fraction of the FLOP/s peak."),
    bw_eff: float = typer.Option(1.0, metavar="X", help="Achieved fraction of the bandwidth."),
    tp: int = typer.Option(1, metavar="K", help="Tensor-parallel GPUs: weights, FLOPs and KV split K ways, "
                           "plus two all-reduces a layer."),
    hidden: Optional[int] = typer.Option(None, metavar="N", help="Hidden size (the all-reduced activations)."),
    active_params: Optional[float] = typer.Option(None, metavar="P", help="Parameters a token runs through (MoE)."),
    link_bandwidth: Optional[float] = typer.Option(None, metavar="B",
                                                   help="GPU-to-GPU link, bytes/s one direction [default: half the GPU's]."),
    ar_latency: Optional[float] = typer.Option(None, metavar="S", help="Latency of one all-reduce, seconds."),
    json_: bool = typer.Option(False, "--json", help="Print the constants as JSON."),
    list_: bool = typer.Option(False, "--list", help="List the built-in GPUs and models with their sources."),
) -> None:
    """First-principles a, omega and beta from a model's shape and a GPU (docs/calibration.md)."""
    import json

    from .calibration import roofline as rl

    _need_stdout("the constants")
    if list_:
        _emit(rl.listing(), "the list")
        return
    try:
        result = rl.compute(model_name=model, params=params, layers=layers, kv_heads=kv_heads, head_dim=head_dim,
                            dtype=dtype, kv_dtype=kv_dtype, gpu_name=gpu, flops=flops, bandwidth=bandwidth,
                            flops_eff=flops_eff, bw_eff=bw_eff, tp=tp, hidden=hidden, active_params=active_params,
                            link_bandwidth=link_bandwidth, ar_latency=ar_latency)
    except SerqError as err:
        raise _fail(UsageError(err.message, helps=err.helps), None) from None
    _emit(json.dumps(result.to_json(), indent=2) if json_ else result.text(), "the constants")


def command_name(info: Any) -> str:
    """The name ``serq`` takes a registered subcommand by (typer's ``CommandInfo``)."""
    return info.name or typer.main.get_command_name(info.callback.__name__)  # type: ignore[no-any-return]


def _command(argv: list[str]) -> Any:
    """The click command of :data:`app`, with the quick coercion of its options.
    When ``argv[1]`` names a subcommand (``serq run …``), the group is built
    with that one alone: typer reads every command's signature to build it,
    and the others would take ~7 ms of each start for nothing (their help
    and errors only show under ``serq --help`` or a mistyped name, which
    build them all)."""
    commands, groups = app.registered_commands, app.registered_groups
    name = argv[1] if len(argv) > 1 else None
    one = [c for c in commands if command_name(c) == name]
    sub = [g for g in groups if g.name == name]
    try:
        if one or sub:
            app.registered_commands, app.registered_groups = one, sub
        command = typer.main.get_command(app)
    finally:
        app.registered_commands, app.registered_groups = commands, groups
    quick_coercion(command)
    return command


def main() -> None:
    """Entry point of the ``serq`` console script."""
    try:
        code = _command(sys.argv)(standalone_mode=False)
    except ClickUsageError as err:  # unknown option, bad value, missing argument
        if type(err).__name__ == "NoArgsIsHelpError":  # bare `serq`, `serq trace`: the help, not an error
            typer.echo(err.format_message(), err=True)
            sys.exit(2)
        typer.echo(f"error: {err.format_message()}", err=True)
        ctx = err.ctx
        if ctx is not None:
            typer.echo(ctx.get_usage(), err=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except typer.Exit as err:
        sys.exit(err.exit_code)
    except BrokenPipeError:  # quiet, as click is for `serq --help | head -1`
        _silence_stdout()
        sys.exit(EXIT_BROKEN_PIPE)
    except SerqError as err:
        typer.echo(err.render(), err=True)
        sys.exit(1)
    except RecursionError:
        typer.echo("error: the program is nested too deeply to check", err=True)
        sys.exit(1)
    except Exception as err:  # noqa: BLE001 - a bug in serq: say so in one line, never a traceback
        typer.echo(internal_error_line(err), err=True)
        if os.environ.get("SERQ_DEBUG"):  # (for whoever fixes the bug)
            import traceback

            traceback.print_exception(err)
        sys.exit(3)
    sys.exit(code if isinstance(code, int) else 0)


def internal_error_line(err: BaseException) -> str:
    """An internal error in one line: its type and the first line of its
    message, at most 200 characters (a parser's error carries its whole parse
    tree after the first line; a value's repr can be a whole program)."""
    text = str(err).strip().splitlines()
    first = text[0].strip() if text else ""
    if len(first) > 200:
        first = first[:199] + "…"
    return f"internal error (a bug in serq, please report it): {type(err).__name__}" + (f": {first}" if first else "")


def one_blas_thread() -> None:
    """Start NumPy's BLAS with one thread in a ``serq`` process, unless the
    user chose (``OPENBLAS_NUM_THREADS`` set) or NumPy is already loaded.
    serQ never calls BLAS (its arrays are elementwise and sequential sums),
    but OpenBLAS starts a thread a core when NumPy is imported, and they take
    CPU from the run (docs/speed.md, "NumPy's BLAS with one thread": 0.80–0.99 s
    of user CPU against 0.94–1.07 s on the very long outputs).  A library
    caller's process is left as it is (:func:`serq.run` sets nothing)."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def console() -> None:
    """The ``serq`` console script and ``python -m serq``: :func:`main`, then
    leave without tearing the interpreter down.  Python's own exit frees every
    module and object one by one — 25 ms after a small run, seconds after a
    run of a million sessions — for nothing a user sees: once the exit
    handlers (``atexit``: Ray's shutdown, a process pool's) have run and the
    output is flushed, the process ends at once.  With another thread alive,
    or a Python without ``atexit._run_exitfuncs``, the ordinary exit.
    :func:`main` itself ends with ``SystemExit``, for callers in a process
    that goes on (the tests)."""
    one_blas_thread()
    try:
        main()
        code: Any = 0
    except SystemExit as done:
        code = done.code
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("text"): the text on stderr, exit 1
        print(code, file=sys.stderr)
        code = 1
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None or threading.active_count() > 1:
        sys.exit(code)
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):  # (None when the descriptor was closed: `>&-`)
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # `serq run | head`: quiet, as main is
            if stream is sys.stdout:
                _silence_stdout()
                code = code or EXIT_BROKEN_PIPE
    os._exit(code)

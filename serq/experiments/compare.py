"""``serq compare A.sq B.sq``: two programs run on common seeds, and their
paired differences (B − A).

Nothing here runs or counts on its own: each program is a one-point plan of
the sweep (:func:`~serq.experiments.sweep.make_plan`, its constants set by
one-value axes), run by the sweep's runner (:func:`~serq.experiments.sweep.run_plan`
on one :class:`~serq.experiments.backends.Runner`), and the rows of both,
told apart by a ``(program)`` column, go through the sweep's own statistics:
:func:`~serq.experiments.summary.summarize` for each program's mean over the
seeds and :func:`~serq.experiments.summary.paired` for the differences, with
``(program)`` as the axis and A as the baseline.  So ``serq compare P.sq Q.sq``
prints, bit for bit, what ``serq sweep --baseline`` prints where one sweep
can hold both designs (Q a copy of P with one ``let`` changed).

``--set NAME=EXPR`` sets NAME in each program that has it (an error when
neither does); ``--set-a`` and ``--set-b`` set it in one program alone (an
error when that one lacks it) and win over ``--set`` there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import SerqError, UsageError, suggest
from .grid import Axis, number_or_text, parse_seeds, value_text
from .stats import Interval
from .summary import DEFAULT_SHOW, _delta, _figure_helps, _num, paired, summarize

#: The column that tells the two programs' rows apart (not an identifier, so no ``let`` can clash with it).
PROGRAM = "(program)"


@dataclass
class CompareOptions:
    """The command line of ``serq compare``: the two files, the ``--set``
    pairs (shared, A's alone, B's alone) and the sweep's run options."""

    a: str
    b: str
    sets: list[tuple[str, str]] = field(default_factory=list)
    sets_a: list[tuple[str, str]] = field(default_factory=list)
    sets_b: list[tuple[str, str]] = field(default_factory=list)
    seeds: str = "1"
    horizon: float | None = None
    warmup: float | None = None
    arrivals: int | None = None
    trace: str | None = None
    max_live: int | None = None
    jobs: int | None = None
    backend: str = "local"
    address: str | None = None
    quiet: bool = False
    show: list[str] = field(default_factory=list)
    json: bool = False
    csv: bool = False
    goodput: str | None = None


@dataclass
class Comparison:
    """Per figure: A's and B's means over the seeds, and the paired
    difference B − A (its mean over the seeds, the 95 % Student-t half-width
    of that mean, ``n`` the pairs)."""

    a: str  # the programs as given, with their --set values
    b: str
    seeds: list[int]
    figures: list[str]
    means_a: dict[str, Interval]
    means_b: dict[str, Interval]
    diffs: dict[str, Interval]
    #: each program's runs that settled out of those judged (``"3/3"``; ``"-"``: none judged)
    settled: tuple[str, str] = ("-", "-")

    def to_dict(self) -> dict[str, Any]:
        """``{"a": …, "b": …, "seeds": […], "settled": {a, b}, "rows": [{key, a, b, diff, half_width, n}]}``;
        a number that does not exist (no value, one seed's half-width) is ``null``."""
        fin = lambda x: x if math.isfinite(x) else None  # noqa: E731
        rows = [{"key": f, "a": fin(self.means_a[f].mean), "b": fin(self.means_b[f].mean),
                 "diff": fin(self.diffs[f].mean), "half_width": fin(self.diffs[f].half), "n": self.diffs[f].n}
                for f in self.figures]
        return {"a": self.a, "b": self.b, "seeds": list(self.seeds),
                "settled": {"a": self.settled[0], "b": self.settled[1]}, "rows": rows}

    def text(self) -> str:
        """Who A and B are, then a table: the figure with its unit, A's and B's
        means, ``B − A`` as ``Δ ± half-width`` (``*`` where the interval
        excludes 0, as ``serq sweep --baseline`` marks it) and the pairs."""
        from tabulate import tabulate

        from ..units import describe

        rows = []
        for f in self.figures:
            a, b, d = self.means_a[f], self.means_b[f], self.diffs[f]
            rows.append([describe(f).header, _mean(a), _mean(b), _delta(d), str(d.n)])
        said = [f" (settled {s})" if s != "-" else "" for s in self.settled]  # the runs that settled, of those judged
        head = (f"A = {self.a}{said[0]}\nB = {self.b}{said[1]}\n"
                f"paired differences B − A on {len(self.seeds)} common seed{'s' if len(self.seeds) != 1 else ''} "
                "(mean ± 95 % half-width; * the interval excludes 0)")
        table = tabulate(rows, headers=["figure", "A", "B", "B − A", "n"], disable_numparse=True,
                         stralign="right", tablefmt="simple", colalign=("left",))
        return head + "\n" + str(table)

    def csv(self) -> str:
        """The rows as CSV: ``key,a,b,diff,half_width,n`` (numbers in shortest form, empty where none)."""
        import csv
        import io

        from ..report import shortest

        buf = io.StringIO()
        out = csv.writer(buf, lineterminator="\n")
        out.writerow(["key", "a", "b", "diff", "half_width", "n"])
        for row in self.to_dict()["rows"]:
            out.writerow([row["key"], *("" if row[k] is None else shortest(row[k])
                                        for k in ("a", "b", "diff", "half_width")), str(row["n"])])
        return buf.getvalue()


def _mean(iv: Interval) -> str:
    return "-" if iv.n == 0 else _num(iv.mean)


def split_sets(sets: Sequence[tuple[str, str]], sets_a: Sequence[tuple[str, str]],
               sets_b: Sequence[tuple[str, str]], lets_a: Sequence[str], lets_b: Sequence[str],
               names: tuple[str, str] = ("A", "B")) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Each program's ``(NAME, EXPR)`` pairs: ``sets`` go to each program that
    has NAME (to neither: an error listing both programs' constants), ``sets_a``
    / ``sets_b`` to one program, which must have NAME, and win over ``sets``."""
    for option, given in (("--set", sets), ("--set-a", sets_a), ("--set-b", sets_b)):
        seen = [n for n, _ in given]
        twice = next((n for n in seen if seen.count(n) > 1), None)
        if twice is not None:
            raise UsageError(f"{option}: constant `{twice}` is given twice")
    out: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for name, expr in sets:
        if name not in lets_a and name not in lets_b:
            best = suggest(name, list(dict.fromkeys([*lets_a, *lets_b])))
            helps = [f"did you mean `{best}`?"] if best else []
            helps += [f"--set overrides a `let` of either program; {label} has {_listing(lets)}"
                      for label, lets in zip(names, (lets_a, lets_b))]
            raise UsageError(f"unknown constant `{name}`: neither program has it", helps=helps)
        for side, lets in zip(out, (lets_a, lets_b)):
            if name in lets:
                side[name] = expr
    for option, given, side, lets, label in (("--set-a", sets_a, out[0], lets_a, names[0]),
                                             ("--set-b", sets_b, out[1], lets_b, names[1])):
        for name, expr in given:
            if name not in lets:
                best = suggest(name, list(lets))
                raise UsageError(f"{option}: unknown constant `{name}` in {label}",
                                 helps=([f"did you mean `{best}`?"] if best else [])
                                 + [f"{label} has {_listing(lets)}"])
            side[name] = expr
    return list(out[0].items()), list(out[1].items())


def _helps(f: str, columns: Sequence[str]) -> list[str]:
    """The sweep's help for an unknown figure, but for its last resort (compare has no --out)."""
    helps = _figure_helps(f, columns)
    if helps[0].startswith("the figures are the columns"):
        return ["the figures are the keys of `serq run --json`, joined with dots (client.ttft.p99)"]
    return helps


def _listing(lets: Sequence[str]) -> str:
    return ", ".join(f"`{k}`" for k in lets) if lets else "no constants"


def _label(file: str, sets: Sequence[tuple[str, str]]) -> str:
    shown = "<stdin>" if file == "-" else str(file)
    return shown + (" (" + ", ".join(f"{n}={e}" for n, e in sets) + ")" if sets else "")


def default_figures(rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]]) -> list[str]:
    """The sweep's default figures that both programs' rows have a value of;
    when there is none, the ``observes.NAME.mean`` both have."""
    def has(rows: Sequence[dict[str, Any]], f: str) -> bool:
        return any(r.get(f) is not None for r in rows)

    figures = [f for f in DEFAULT_SHOW if has(rows_a, f) and has(rows_b, f)]
    if not figures:
        figures = [c for c in dict.fromkeys(c for r in rows_a for c in r)
                   if c.startswith("observes.") and c.endswith(".mean") and has(rows_a, c) and has(rows_b, c)]
    return figures


def compare_command(opts: CompareOptions, emit: Callable[[str], None], warn: Callable[[str], None]) -> int:
    """Run ``serq compare``; the exit code (0, or 130 after Ctrl-C)."""
    from .command import EXIT_INTERRUPTED, _Progress, _stderr_is_terminal, check_window
    from .sweep import SweepInterrupted

    check_window(opts.horizon, opts.warmup)
    if opts.csv and opts.json:
        raise UsageError("--csv and --json: give one of them")
    if opts.a == "-" and opts.b == "-":
        raise UsageError("both programs read standard input: give one of them as a file")
    if opts.trace == "-":
        raise UsageError("--trace -: each run reads the trace, and standard input can be read once",
                         helps=["save the trace to a file and give its name"])
    seeds = parse_seeds(opts.seeds)
    sources = []
    for file in (opts.a, opts.b):
        if file == "-":  # read once, handed to the workers as text (as serq sweep does)
            from ..frontend.library import read_text

            text = read_text("-")
            sources.append(text if "\n" in text else text + "\n")
        else:
            sources.append(file)
    progress = _Progress(not opts.quiet and _stderr_is_terminal())
    try:
        with progress:
            result = compare(sources[0], sources[1], seeds=seeds, sets=opts.sets, sets_a=opts.sets_a,
                             sets_b=opts.sets_b, show=opts.show or None, horizon=opts.horizon, warmup=opts.warmup,
                             arrivals=opts.arrivals, trace=opts.trace, max_live=opts.max_live, jobs=opts.jobs,
                             backend=opts.backend, address=opts.address, names=(opts.a, opts.b), warn=warn,
                             on_start=progress.start, on_row=progress.advance, goodput=opts.goodput)
    except SweepInterrupted:
        warn("interrupted: no comparison was printed")
        return EXIT_INTERRUPTED
    emit(_encode(result.to_dict()) if opts.json else result.csv() if opts.csv else result.text())
    return 0


Sets = Mapping[str, Any] | Sequence[tuple[str, str]] | None


def _pairs(sets: Sets) -> list[tuple[str, str]]:
    """``{"Lambda": 1.2}`` or ``[("Lambda", "1.2")]`` → ``[("Lambda", "1.2")]`` (numbers in shortest form)."""
    if sets is None:
        return []
    items = sets.items() if isinstance(sets, Mapping) else sets
    return [(str(name), value_text(value)) for name, value in items]


def compare(
    a: Any,
    b: Any,
    *,
    seeds: Iterable[int] = (1,),
    sets: Sets = None,
    sets_a: Sets = None,
    sets_b: Sets = None,
    show: Sequence[str] | None = None,
    horizon: float | None = None,
    warmup: float | None = None,
    arrivals: int | None = None,
    trace: str | None = None,
    max_live: int | None = None,
    jobs: int | None = None,
    backend: str = "local",
    address: str | None = None,
    names: tuple[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    goodput: str | None = None,
) -> Comparison:
    """Run programs ``a`` and ``b`` (paths, program text or loaded programs
    with a path) on the same ``seeds`` and compare them (:class:`Comparison`).

    ``sets`` (``let`` name → value or expression) go to each program that has
    the constant, ``sets_a``/``sets_b`` to one; ``show`` the figures (default
    :func:`default_figures`); the run options as in :func:`serq.sweep`.
    ``names`` label the programs (default: as given); ``warn`` hears of two
    different measuring windows; ``on_start(done, total)`` and ``on_row(row)``
    follow the runs of both.  Raises :class:`SerqError` (a failed run names its
    program) and :class:`~serq.experiments.SweepInterrupted` on Ctrl-C."""
    from .. import api
    from ..ir import Program
    from .backends import Runner
    from .sweep import SweepRunError, make_plan, run_plan

    seeds = list(seeds)
    sources = [a, b]
    if names is None:
        names = (_name(a), _name(b))
    # each loaded once here, as given, so that one that does not load fails before any run
    programs = [s if isinstance(s, Program) else api.load(s, trace=trace) for s in sources]
    set_a, set_b = split_sets(_pairs(sets), _pairs(sets_a), _pairs(sets_b), list(programs[0].constants),
                              list(programs[1].constants), (_label(names[0], []), _label(names[1], [])))
    plans = []
    for source, pairs, name in zip(sources, (set_a, set_b), names):
        axes = [Axis(n, (number_or_text(expr),), "set", n) for n, expr in pairs]
        try:
            plans.append(make_plan(source, axes, seeds, horizon=horizon, warmup=warmup, arrivals=arrivals,
                                   trace=trace, max_live=max_live, goodput=goodput))
        except SerqError as err:  # a --set value one program refuses: say which
            if err.span is None and not err.prefix:
                err.message = f"{_label(name, [])}: {err.message}"
            raise
    labels = [_label(names[0], set_a), _label(names[1], set_b)]
    for f in show or ():  # a figure one program cannot have: an error before the runs
        for plan, name in zip(plans, names):
            if f not in plan.figures and not ("replay." in plan.figures and f.startswith("replay.")):
                raise UsageError(f"unknown figure `{f}`: {_label(name, [])} has no such figure",
                                 helps=_helps(f, [c for c in plan.figures if c != "replay."]))
    (ha, wa), (hb, wb) = plans[0].settings[0], plans[1].settings[0]
    if (ha, wa) != (hb, wb) and warn is not None:
        warn(f"warning: A runs to {value_text(ha)} s from warm-up {value_text(wa)} s and B to {value_text(hb)} s "
             f"from {value_text(wb)} s; give --horizon and --warmup to measure both over one window")
    total = 2 * len(seeds)
    results = []
    with Runner(jobs, backend, address) as runner:
        for offset, plan, label in ((0, plans[0], labels[0]), (len(seeds), plans[1], labels[1])):
            def start(skipped: int, _runs: int, offset: int = offset) -> None:  # one count for both programs
                if on_start is not None:
                    on_start(offset + skipped, total)

            try:
                results.append(run_plan(plan, runner=runner, on_row=on_row, on_start=start))
            except SweepRunError as err:
                raise SerqError(f"{label}: {err.message}", helps=err.helps, notes=err.notes) from None
    out = compare_rows(results[0].rows, results[1].rows, show, labels, seeds)
    for label, result in zip(labels, results):  # a transient compared is no answer: say so
        seeds_out = [r["seed"] for r in result.rows if r.get("settled") == 0]
        if seeds_out and warn is not None:
            warn(f"warning: {label} did not settle on seed {', '.join(map(str, seeds_out))}: its figures describe "
                 "a run still moving (docs/report.md, \"Did the run settle?\")")
    return out


def _name(program: Any) -> str:
    """A program as its label names it: its path as given, ``<text>`` for program text."""
    from ..api import _looks_like_source
    from ..ir import Program

    if isinstance(program, Program):
        return str(program.path)
    if isinstance(program, str) and _looks_like_source(program):
        return "<text>"
    return str(program)


def _encode(data: dict[str, Any]) -> str:
    from ..report import _encode as encode

    return str(encode(data))


def compare_rows(rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]], show: Sequence[str] | None,
                 labels: Sequence[str] = ("A", "B"), seeds: Sequence[int] | None = None) -> Comparison:
    """The comparison of two programs' rows (a sweep's rows, one point each, on
    the same seeds): the figures of ``show`` (default :func:`default_figures`),
    through the sweep's :func:`summarize` and :func:`paired` with A the baseline."""
    figures = list(show) if show else default_figures(rows_a, rows_b)
    for rows, label in zip((rows_a, rows_b), labels):  # (a `replay.…` figure is known only once the runs end)
        columns = list(dict.fromkeys(c for r in rows for c in r))
        for f in figures:
            if f not in columns:
                raise UsageError(f"unknown figure `{f}`: the runs of {label} have no such figure",
                                 helps=_helps(f, columns))
    if not figures:
        raise SerqError("no figure has a value in both programs' runs (none of the sweep's default figures, "
                        "no observe's mean)", helps=["name the figures to compare with --show FIGURE"])
    rows = [{**r, PROGRAM: "A"} for r in rows_a] + [{**r, PROGRAM: "B"} for r in rows_b]
    means = summarize(rows, [PROGRAM], figures)
    by = {values[PROGRAM]: stats for values, stats in means.points}
    diffs = paired(rows, [PROGRAM], figures, PROGRAM, "A").points
    empty = {f: Interval(math.nan, math.nan, 0) for f in figures}
    if seeds is None:
        seeds = [r["seed"] for r in rows_a]
    settled = {values[PROGRAM]: values.get("settled", "-") for values, _ in means.points}
    return Comparison(labels[0], labels[1], list(seeds), figures, by.get("A", empty), by.get("B", empty),
                      diffs[0][1] if diffs else empty, (settled.get("A", "-"), settled.get("B", "-")))

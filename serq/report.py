"""What a run reports (semantics §8, §9): plain data, and three views of it.

:class:`Report` holds the numbers; :meth:`Report.text` is the table layout of
§9.1, :meth:`Report.to_json` the object of §9.2 and :meth:`Report.dump` the
CSV files of §9.3.  The simulator builds it (:mod:`serq.sim.results`); nothing
here knows about the simulation.

Number forms, as the original (Rust) printed them:

* :func:`shortest` — Rust's ``{}``: the shortest decimal that reads back as the
  same float, never in exponent form, ``300`` not ``300.0``; ``NaN``, ``inf``;
* :func:`fixed` — Rust's ``{:.d}``: ``d`` decimals, ``NaN``, ``inf``, ``-inf``.

Tables are formatted here rather than with tabulate: tabulate pads every
column to its header plus two, and the seed report's columns are exactly
max(header, widest cell) wide (§9.1).
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import field, fields
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

from .errors import SerqError, suggest
from .node import record

INF = math.inf
NAN = math.nan

#: The client rows in their report order (§8.5, decision 2).
CLIENT_ROWS = ("ttft", "tpot", "response")
#: The task table's rows in report order (docs/subagents.md, "Task statistics").
TASK_ROWS = ("time", "sessions", "depth")


# ---------------------------------------------------------------------------
# number forms


def _word(x: float) -> str | None:
    """How Rust prints a number that is not finite, or None for a finite one."""
    if x != x:
        return "NaN"
    if x == INF:
        return "inf"
    if x == -INF:
        return "-inf"
    return None


def shortest(x: float | numbers.Real) -> str:  # numbers.Real: numpy scalars too
    """Rust's ``{}`` for a number: shortest round-trip digits, no exponent,
    no ``.0`` on an integer value (``3``, ``0.5``, ``0.0000001``); ``NaN``,
    ``inf``, ``-inf``; an integer as itself."""
    if isinstance(x, numbers.Integral):
        return str(int(x))
    x = float(x)
    word = _word(x)
    if word is not None:
        return word
    r = repr(x)
    if r.endswith(".0"):
        return r[:-2]
    if "e" in r:  # Rust never uses exponent form: expand the same digits
        from decimal import Decimal  # (rarely: a repr in exponent form)

        r = format(Decimal(r), "f")
        if "." in r:
            r = r.rstrip("0").rstrip(".")
    return r


def fixed(x: float | None, decimals: int) -> str:
    """Rust's ``{:.d}``: ``decimals`` places; ``NaN``/``inf``/``-inf`` as words.
    ``None`` (a field a stage kind does not have) prints as ``NaN``."""
    if x is None:
        return "NaN"
    x = float(x)
    return _word(x) or f"{x:.{decimals}f}"


def client_decimals(mean: float) -> int:
    """Decimals that give a client row's mean 4 significant digits (§9.1):
    ``3 − floor(log10 |mean|)``, at least 0 and at most 20; 4 for a mean of
    0, NaN or ±inf.  ``floor(log10 …)`` is :func:`decimal_exponent`, read off
    the printed number, not the C library's ``log10``."""
    if not math.isfinite(mean) or mean == 0.0:
        return 4
    return min(max(3 - decimal_exponent(abs(mean)), 0), 20)


def decimal_exponent(x: float) -> int:
    """The power of ten of the first digit of ``repr(x)`` for a finite x > 0
    (``floor(log10 x)`` of the number as Python prints it: 2 for 999.9, -3
    for 0.00125).  Exact string arithmetic, so the same on every machine."""
    mant, _, exp = repr(x).partition("e")
    e = int(exp) if exp else 0
    whole, _, frac = mant.partition(".")
    digits = whole.lstrip("0")
    if digits:
        return e + len(digits) - 1
    return e - (len(frac) - len(frac.lstrip("0"))) - 1


def _finite(x: float | None) -> float | None:
    """A JSON number: non-finite and missing values are ``null`` (§9.2)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def row_label(name: str, index: int | None) -> str:
    """A row's name: ``kvD[0]`` for an array member, ``kv`` otherwise (§9.1)."""
    return name if index is None else f"{name}[{index}]"


# ---------------------------------------------------------------------------
# the data


@record
class ObserveSummary:
    """The §8.3 statistics of one observe (or client row) after warm-up.

    ``ci`` is the half-width of the 95 % batch-means interval, ``inf`` below
    40 samples (decision 7).  ``p50``, ``p90`` and ``p95`` (issue 10) follow
    the rule of ``p99`` (nearest rank); they are in the JSON report only, the
    text report's columns being fixed by §9.1."""

    count: int
    mean: float
    ci: float
    cv2: float
    p99: float
    p50: float = NAN
    p90: float = NAN
    p95: float = NAN

    def to_dict(self) -> dict[str, Any]:
        """``{count, mean, ci, cv2, p50, p90, p95, p99}``; non-finite numbers
        are ``None``."""
        return {
            "count": int(self.count),
            "mean": _finite(self.mean),
            "ci": _finite(self.ci),
            "cv2": _finite(self.cv2),
            "p50": _finite(self.p50),
            "p90": _finite(self.p90),
            "p95": _finite(self.p95),
            "p99": _finite(self.p99),
        }


@record(frozen=True)
class GaugeSummary:
    """A gauge over [warm-up, end] (``gauge NAME = expr;``): ``mean`` its time
    average, ``ci`` the half-width of its 95 % batch-means interval (20 equal
    windows of the span), ``min`` and ``max`` the least and greatest values it
    held for a positive time in the span; ``points`` its change points
    ``(time, value)`` from time 0, what ``--dump`` writes."""

    name: str
    mean: float
    ci: float
    min: float
    max: float
    points: tuple[tuple[float, float], ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        """``{mean, ci, min, max}``; non-finite numbers are ``None``."""
        return {"mean": _finite(self.mean), "ci": _finite(self.ci), "min": _finite(self.min),
                "max": _finite(self.max)}


@record
class StageSummary:
    """One stage (or stage-array member) of the stage and step tables (§5, §8.4).

    The step fields are ``None`` for a stage that is not a step stage."""

    name: str
    index: int | None
    mean_number: float
    utilization: float
    completed: int
    throughput: float
    mean_wait: float
    mean_service: float
    iterations: int = 0
    prefill_only: float | None = None
    decode_only: float | None = None
    mixed: float | None = None
    mean_decodes: float | None = None
    mean_decode_batch: float | None = None
    mean_decode_step: float | None = None
    mean_itl: float | None = None
    itl_p50: float | None = None
    itl_p99: float | None = None

    @property
    def label(self) -> str:
        return row_label(self.name, self.index)

    @property
    def idle(self) -> float:
        """1 − prefill only − decode only − mixed (§8.4)."""
        parts = (self.prefill_only, self.decode_only, self.mixed)
        if any(p is None for p in parts):
            return NAN
        return 1.0 - float(parts[0]) - float(parts[1]) - float(parts[2])  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        return _row_dict(self, ("completed", "iterations"))


@record
class PoolSummary:
    """One pool (or pool-array member) of the pool table (§2.8)."""

    name: str
    index: int | None
    mean_used: float
    mean_cached: float
    mean_queue: float
    mean_holders: float
    mean_wait: float
    admissions: int
    evicted_entries: int
    evicted_units: float
    preemptions: int
    spills: int
    rejected: int
    stuck: int

    @property
    def label(self) -> str:
        return row_label(self.name, self.index)

    def to_dict(self) -> dict[str, Any]:
        return _row_dict(self, ("admissions", "evicted_entries", "preemptions", "spills", "rejected", "stuck"))


def _row_dict(row: StageSummary | PoolSummary, ints: Sequence[str]) -> dict[str, Any]:
    """The §9.2 object of a stage or pool row, fields in declaration order."""
    out: dict[str, Any] = {}
    for f in fields(row):
        v = getattr(row, f.name)
        if f.name == "name":
            out[f.name] = v
        elif f.name == "index":
            out[f.name] = None if v is None else int(v)
        elif f.name in ints:
            out[f.name] = int(v)
        else:
            out[f.name] = _finite(v)
    return out


# The named tuples below are made with NamedTuple's call, not its class syntax: under
# `from __future__ import annotations` a class body's field types are strings, and
# NamedTuple compiles each into a ForwardRef at import (18 fields: about 4 ms of every start).

Sample = NamedTuple("Sample", [("time", float), ("session", int), ("turn", float), ("value", float)])
Sample.__doc__ = """One observed value (§9.3): when, which session (its serial), the
    session's ``turn_no`` then (0 in ``init``), and the value.  A named tuple:
    a long run records hundreds of thousands of them."""

TaskRecord = NamedTuple("TaskRecord", [("root", int), ("start", float), ("end", float), ("sessions", int),
                                       ("depth", int)])
TaskRecord.__doc__ = """One completed task (a row of ``tasks.csv``): the root's serial, its
    arrival, the end of the last session of its tree, the tree's sessions
    (the root included) and its greatest depth (0: the root alone)."""


@record
class TaskSummary:
    """The task table of a program that spawns (docs/subagents.md, "Task
    statistics").  A task is a root and all its descendants; it completes
    when the last of them ends.  ``time`` (root's arrival to that end),
    ``sessions`` (root included) and ``depth`` (0 for a root without children)
    summarize, like the client rows, the tasks that completed after warm-up
    with no session stuck at a pool, in completion order (``records``).
    ``open`` counts the roots whose task had not completed when the run ended;
    ``stuck`` the tasks (whole run, completed or not) with a session marked
    stuck at a pool, which are never in the statistics."""

    time: ObserveSummary
    sessions: ObserveSummary
    depth: ObserveSummary
    open: int
    stuck: int
    records: list[TaskRecord] = field(default_factory=list, repr=False)

    @property
    def count(self) -> int:
        """The tasks in the statistics."""
        return int(self.time.count)

    def rows(self) -> list[tuple[str, ObserveSummary]]:
        """``time``, ``sessions``, ``depth`` with their statistics."""
        return [(name, getattr(self, name)) for name in TASK_ROWS]

    def to_dict(self) -> dict[str, Any]:
        """``{count, time, sessions, depth, open, stuck}``, each row a summary
        like a client row's."""
        out: dict[str, Any] = {"count": self.count}
        out.update((name, s.to_dict()) for name, s in self.rows())
        out["open"] = int(self.open)
        out["stuck"] = int(self.stuck)
        return out


#: The columns of a step log (``serq run --dump DIR --steps``, ``serq.run(…,
#: steps=True)``): an iteration's start, its duration, and the context
#: variables its ``cost`` read (semantics §4, docs/calibration.md).
STEP_COLUMNS = ("time", "duration", "tokens", "decoders", "prefilled", "kv_decode", "kv_prefill", "attention",
                "residents")


StepRow = NamedTuple("StepRow", [("time", float), ("duration", float), ("tokens", float), ("decoders", float),
                                 ("prefilled", float), ("kv_decode", float), ("kv_prefill", float),
                                 ("attention", float), ("residents", float)])
StepRow.__doc__ = """One iteration of a step stage (see :data:`STEP_COLUMNS`)."""


class StepLog(Sequence):  # type: ignore[type-arg]
    """A step stage's iterations in start order, as :class:`StepRow` rows
    (``len``, indexing, iteration); kept as one flat array of floats, since a
    long run has millions of iterations.  :meth:`column` gives one column."""

    def __init__(self, flat: Any) -> None:
        self._flat = flat
        self._w = len(STEP_COLUMNS)

    def __len__(self) -> int:
        return len(self._flat) // self._w

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("step log row out of range")
        w = self._w
        return StepRow(*self._flat[i * w:(i + 1) * w])

    def column(self, name: str) -> list[float]:
        """The values of column ``name`` (one of :data:`STEP_COLUMNS`)."""
        if name not in STEP_COLUMNS:
            raise _unknown("step log column", name, list(STEP_COLUMNS))
        return list(self._flat[STEP_COLUMNS.index(name)::self._w])

    def csv(self) -> str:
        """The log as CSV text: the header :data:`STEP_COLUMNS`, one row per
        iteration, numbers in their shortest round-trip form."""
        flat = self._flat
        w = self._w
        out = [",".join(STEP_COLUMNS) + "\n"]
        out.extend(",".join(map(shortest, flat[k:k + w])) + "\n" for k in range(0, len(flat), w))
        return "".join(out)


@record
class Settling:
    """Whether a run reached its steady state (docs/report.md, "Did the run
    settle?"; computed by :mod:`serq.sim.settling`).  ``settled`` is ``None``
    for a run that is not judged (``batch`` arrivals); ``reasons`` say why it
    did not settle; ``warmup`` is the suggested warm-up (MSER-5), ``horizon``
    the suggested horizon (NaN when settled; four times the run when the
    backlog grew all through it, an overload or a queue still filling:
    ``evidence["overloaded"]``); ``evidence`` holds
    the statistics behind the verdict."""

    settled: bool | None
    reasons: list[str]
    warmup: float
    horizon: float
    evidence: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """The text report's line: ``settled: yes (…)`` or ``settled: no — …``."""
        if self.settled is None:
            return f"settled: not judged ({self.reasons[0]})" if self.reasons else "settled: not judged"
        if self.settled:
            return (f"settled: yes (MSER-5 suggests warm-up {shortest(self.warmup)}; no drift in the response "
                    "time or the backlog)")
        return f"settled: no ({'; '.join(self.reasons)}): {self.advice()}"

    def advice(self) -> str:
        """What would settle it: a longer horizon, or nothing (overload)."""
        if self.evidence.get("overloaded"):
            return (f"the backlog grew all through the run, as it does when the load exceeds what the system "
                    f"serves; try --horizon {shortest(self.horizon)} to tell a queue still filling from one that "
                    "never stops")
        return f"try --warmup {shortest(self.warmup)} --horizon {shortest(self.horizon)}"

    def to_dict(self) -> dict[str, Any]:
        """``{reasons, warmup, horizon, …evidence}``: the verdict's evidence for ``--json``."""
        def clean(v: Any) -> Any:
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, float):
                return _finite(v)
            return v

        return {"reasons": list(self.reasons), "warmup": _finite(self.warmup),
                "horizon": _finite(self.horizon),
                **clean(self.evidence)}


@record
class ClaimResult:
    """What a run showed of one claim (docs/claims.md): ``result`` is ``holds``,
    ``fails``, ``witnessed``, ``not witnessed``, ``not evaluated`` or ``out of
    scope``; ``first`` the time of the first failure or witness; ``checked`` the
    iterations (or, at end, the sessions) read."""

    name: str
    kind: str  # "every", "some" or "end"
    stage: str  # the step stage's label ("" at end)
    result: str
    first: float | None = None
    checked: int = 0
    note: str = ""

    @property
    def what(self) -> str:
        """The claim's kind as the program says it: ``every iteration of engine``, ``at end``."""
        return "at end" if self.kind == "end" else f"{self.kind} iteration of {self.stage}"

    @property
    def passed(self) -> bool:
        """Neither failed nor unwitnessed (what ``--check-claims`` gates on)."""
        return self.result not in ("fails", "not witnessed")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, **({"stage": self.stage} if self.stage else {}),
                "result": self.result, "first": _finite(self.first) if self.first is not None else None,
                "checked": int(self.checked), "note": self.note}


@record
class Report:
    """The result of a run.  ``observes`` and ``client`` keep report order;
    ``samples`` holds every observe's samples (recording order) for
    :meth:`dump`, and, for a program with a client, every client row's under
    ``client_ROW`` (``client_ttft``, ``client_tpot``, ``client_response``;
    stamped with the turn's end), and, for a program whose run spawned a child,
    the task times under ``task_time`` (stamped with the task's end, the root's
    serial and the root's last ``turn_no``); ``notes`` are the ``note:`` lines'
    text (§8.3)."""

    horizon: float
    end: float
    warmup: float
    seed: int
    events: int
    arrivals: int
    ended: int
    turns: int
    mean_live: float
    observes: dict[str, ObserveSummary] = field(default_factory=dict)
    client: dict[str, ObserveSummary] = field(default_factory=dict)
    stages: list[StageSummary] = field(default_factory=list)
    pools: list[PoolSummary] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    samples: dict[str, list[Sample]] = field(default_factory=dict, repr=False)
    #: stderr-only warnings about stages (a step stage whose budget left work
    #: waiting to the end); not part of the text or JSON report
    stage_warnings: list[str] = field(default_factory=list)
    #: the task table (docs/subagents.md, "Task statistics"): only for a program
    #: that spawns and whose run spawned a child; ``None`` otherwise, and then
    #: the text, JSON and dump have no task table, ``tasks`` or ``tasks.csv``
    tasks: TaskSummary | None = None
    #: how an `arrive trace` replay ended (docs/replay.md): ``sessions`` (trace
    #: sessions to replay), ``arrived``, ``live`` at the end, ``exhausted`` (the
    #: trace was used up and every session ended, so the run stopped then) and
    #: ``end``; ``None`` for other arrivals, and then the JSON has no ``replay``
    replay: dict[str, Any] | None = None
    #: the step log of each step stage by label (``engine``, ``engine[1]``), with
    #: ``serq.run(…, steps=True)``: one :class:`StepRow` per iteration; empty
    #: otherwise.  Not part of the text or JSON report (docs/calibration.md)
    steps: dict[str, StepLog] = field(default_factory=dict, repr=False)
    #: the program's gauges in declaration order (empty without any: then the text,
    #: JSON and dump have no gauge table, ``gauges`` or ``gauge/`` folder)
    gauges: dict[str, GaugeSummary] = field(default_factory=dict)
    #: the run's judgement of its own steady state (``None``: a report built by
    #: hand, which then prints no ``settled:`` line and has no ``settled`` key)
    settling: Settling | None = None
    #: with ``precision=``: the figure, the share asked for, its mean and half-width,
    #: whether it was reached, the horizon and the number of runs (``serq.sim.precision``)
    precision: dict[str, Any] | None = None

    @property
    def settled(self) -> bool | None:
        """Whether the run settled (``None``: not judged)."""
        return None if self.settling is None else self.settling.settled
    #: the run over time (:class:`serq.timeline.Timeline`), with ``serq.run(…, timeline=DT)``
    #: or ``serq run --timeline DIR``; None otherwise.  Not part of the text or JSON report
    timeline: Any = field(default=None, repr=False)
    #: each stage family's total row by name (``stage engine[N]``, a family of
    #: one included), index ``None``: docs/report.md, "Families"; the text shows
    #: it as ``engine[*]`` after the members, for two members or more
    stage_totals: dict[str, StageSummary] = field(default_factory=dict)
    #: each pool family's total row by name (``pool kv[N]``), as ``stage_totals``
    pool_totals: dict[str, PoolSummary] = field(default_factory=dict)
    #: what the run showed of each of the program's claims, in program order (empty without
    #: any: then the text has no claim table and the JSON no ``claims``)
    claims: list[ClaimResult] = field(default_factory=list)

    def replay_note(self) -> str | None:
        """The stderr ``note:`` of an `arrive trace` run: which ended it, the trace or the horizon."""
        r = self.replay
        if r is None:
            return None
        if r["exhausted"]:
            return (f"the trace ended: its {r['sessions']:,} sessions arrived and ended by time "
                    f"{shortest(r['end'])}, before the horizon {shortest(self.horizon)}")
        return (f"the horizon {shortest(self.horizon)} ended the replay: {r['arrived']:,} of the trace's "
                f"{r['sessions']:,} sessions arrived, {r['live']:,} still live")

    # -- lookups ------------------------------------------------------------

    def client_rows(self) -> list[tuple[str, ObserveSummary]]:
        """The client rows with samples, ttft, tpot, response first (§8.5)."""
        order = [k for k in CLIENT_ROWS if k in self.client]
        order += [k for k in self.client if k not in CLIENT_ROWS]
        return [(k, self.client[k]) for k in order if self.client[k].count > 0]

    def observe(self, name: str) -> ObserveSummary:
        """The statistics of observe ``name``, or else of client row ``name``."""
        if name in self.observes:
            return self.observes[name]
        if name in self.client:
            return self.client[name]
        raise _unknown("observe", name, [*self.observes, *self.client])

    def gauge(self, name: str) -> GaugeSummary:
        """The figures of gauge ``name``."""
        if name in self.gauges:
            return self.gauges[name]
        raise _unknown("gauge", name, list(self.gauges))

    def stage(self, name: str) -> StageSummary:
        """Stage ``name`` (the first member of an array) or member ``name[i]``."""
        return _find("stage", name, self.stages)

    def pool(self, name: str) -> PoolSummary:
        """Pool ``name`` (the first member of an array; :meth:`pool_total` for the
        family as a whole) or member ``name[i]``."""
        return _find("pool", name, self.pools)

    def stage_total(self, name: str) -> StageSummary:
        """Stage family ``name`` as a whole (its total row, index ``None``), or
        stage ``name`` itself when it is not a family: what the sweep key
        ``stages.NAME.…`` reads (docs/report.md, "Families")."""
        return _total("stage", name, self.stage_totals, self.stages)

    def pool_total(self, name: str) -> PoolSummary:
        """Pool family ``name`` as a whole (its total row, index ``None``), or
        pool ``name`` itself when it is not a family: what the sweep key
        ``pools.NAME.…`` reads (docs/report.md, "Families")."""
        return _total("pool", name, self.pool_totals, self.pools)

    def stages_named(self, name: str) -> list[StageSummary]:
        """Every member of stage (array) ``name``, in index order."""
        return [s for s in self.stages if s.name == name]

    def pools_named(self, name: str) -> list[PoolSummary]:
        """Every member of pool (array) ``name``, in index order."""
        return [p for p in self.pools if p.name == name]

    def warnings(self) -> list[str]:
        """Lines for stderr (decision 8): one per pool where sessions got stuck,
        then one per step stage whose budget let nothing run while work waited
        to the end of the run, then one when the run did not settle."""
        return [
            f"{p.stuck} session(s) stuck at pool `{p.label}`: the means are over the sessions that got through"
            for p in self.pools
            if p.stuck > 0
        ] + ([f"{self.tasks.stuck} task(s) with a session stuck at a pool: the task table is over the tasks "
              "that got through"] if self.tasks is not None and self.tasks.stuck > 0 else []
             ) + list(self.stage_warnings) + (
            [f"the run did not settle ({'; '.join(self.settling.reasons)}): {self.settling.advice()}"]
            if self.settling is not None and self.settling.settled is False else [])

    # -- text (§9.1) ----------------------------------------------------------

    def text(self) -> str:
        """The report as text (§9.1), without a final newline."""
        out = [
            f"run: horizon {shortest(self.horizon)} end {shortest(self.end)} warmup {shortest(self.warmup)}"
            f" seed {int(self.seed)} events {int(self.events)} arrivals {int(self.arrivals)}"
            f" ended {int(self.ended)} turns {int(self.turns)} mean live {fixed(self.mean_live, 3)}"
        ]
        out += _table(
            ("observe", "count", "mean", "95% CI", "cv2", "p99"),
            [
                [name, str(int(s.count)), fixed(s.mean, 4), "±" + fixed(s.ci, 4), fixed(s.cv2, 3), fixed(s.p99, 4)]
                for name, s in self.observes.items()
            ],
        )
        if self.observes:
            out += [f"note: {n}" for n in self.notes]
        out += _table(("client", "count", "mean", "95% CI", "cv2", "p99"), [_client_row(k, s) for k, s in self.client_rows()])
        if self.tasks is not None:
            out += _table(("task", "count", "mean", "95% CI", "cv2", "p99"),
                          [_client_row(k, s) for k, s in self.tasks.rows()])
            if self.tasks.stuck > 0:
                out.append(f"stuck: {self.tasks.stuck} task(s) with a session stuck at a pool (the root or a "
                           "descendant): their times are not in the task table")
        out += _table(("gauge", "mean", "95% CI", "min", "max"),
                      [[name, fixed(g.mean, 4), "±" + fixed(g.ci, 4), fixed(g.min, 4), fixed(g.max, 4)]
                       for name, g in self.gauges.items()])
        out += _table(
            ("stage", "number", "util", "done", "thru", "wait", "service", "iters"),
            [
                [
                    label, fixed(st.mean_number, 3), fixed(st.utilization, 3), str(int(st.completed)),
                    fixed(st.throughput, 4), fixed(st.mean_wait, 4), fixed(st.mean_service, 4), str(int(st.iterations)),
                ]
                for label, st in _with_totals(self.stages, self.stages, self.stage_totals)
            ],
        )
        # §9.1: the step table only lists (and only appears for) stages that iterated
        out += _table(
            ("step", "prefill only", "decode only", "mixed", "idle", "decodes", "decode batch", "decode step",
             "itl p50", "itl p99"),
            [
                [
                    label, fixed(st.prefill_only, 3), fixed(st.decode_only, 3), fixed(st.mixed, 3),
                    fixed(st.idle, 3), fixed(st.mean_decodes, 3), fixed(st.mean_decode_batch, 3),
                    fixed(st.mean_decode_step, 6), fixed(st.itl_p50, 6), fixed(st.itl_p99, 6),
                ]
                for label, st in _with_totals([st for st in self.stages if st.iterations > 0], self.stages,
                                              self.stage_totals)
            ],
        )
        out += _table(
            ("pool", "used", "cached", "queue", "holders", "wait", "admits", "evict(n)", "evict(u)", "preempt",
             "spill", "rej", "stuck"),
            [
                [
                    label, fixed(p.mean_used, 1), fixed(p.mean_cached, 1), fixed(p.mean_queue, 3),
                    fixed(p.mean_holders, 3), fixed(p.mean_wait, 4), str(int(p.admissions)),
                    str(int(p.evicted_entries)), fixed(p.evicted_units, 0), str(int(p.preemptions)),
                    str(int(p.spills)), str(int(p.rejected)), str(int(p.stuck)),
                ]
                for label, p in _with_totals(self.pools, self.pools, self.pool_totals)
            ],
        )
        # §4.5, §2.8: the pathologies, named under the pool table
        out += [
            f"rej: {p.rejected} session(s) ended at pool `{p.label}` asking for more than its cap"
            for p in self.pools
            if p.rejected > 0
        ]
        out += [
            f"stuck: {p.stuck} session(s) preempted again at pool `{p.label}` without passing the position"
            " of their previous preemption"
            for p in self.pools
            if p.stuck > 0
        ]
        out += _table(("claim", "kind", "result", "first", "checked"),
                      [[c.name, c.what, c.result, "" if c.first is None else shortest(c.first), str(c.checked)]
                       for c in self.claims])
        out += [f"claim {c.name}: {c.note}" for c in self.claims if c.note]
        if self.settling is not None:  # a run's report (not one built by hand, as the seed's excerpt)
            out += ["", self.units_line(), self.settling.line()]
        return "\n".join(out)

    def units_line(self) -> str:
        """The units of the tables the text shows (docs/report.md; ``serq.units``): the
        seed's headers stay as the seed prints them, and this line says what they are in."""
        parts = []
        if self.client_rows():
            parts.append("client ttft, response in s, tpot in s a token"
                         + (", goodput a share of turns" if "goodput" in self.client else ""))
        if self.stages:
            parts.append("stage number in jobs, thru in jobs/s, wait, service in s")
        if any(st.iterations > 0 for st in self.stages):
            parts.append("step decode step, itl in s")
        if self.pools:
            parts.append("pool used, cached, evict(u) in the pool's units (KV tokens), queue, holders in holds, "
                         "wait in s")
        return "units: " + ("; ".join(parts) if parts else "observes in their own units")

    def __str__(self) -> str:
        return self.text()

    # -- JSON (§9.2) ----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The §9.2 object as Python data (non-finite numbers are ``None``)."""
        return {
            **({"settled": self.settling.settled} if self.settling is not None else {}),
            "horizon": _finite(self.horizon),
            "end": _finite(self.end),
            "warmup": _finite(self.warmup),
            "seed": int(self.seed),
            "events": int(self.events),
            "arrivals": int(self.arrivals),
            "ended": int(self.ended),
            "turns": int(self.turns),
            "mean_live": _finite(self.mean_live),
            "observes": {name: s.to_dict() for name, s in self.observes.items()},
            "client": {name: s.to_dict() for name, s in self.client_rows()},
            **({"gauges": {name: g.to_dict() for name, g in self.gauges.items()}} if self.gauges else {}),
            "stages": [st.to_dict() for st in self.stages],
            "pools": [p.to_dict() for p in self.pools],
            **({"totals": self._totals_dict()} if self.stage_totals or self.pool_totals else {}),
            **({"tasks": self.tasks.to_dict()} if self.tasks is not None else {}),
            **({"replay": {**self.replay, "end": _finite(self.replay["end"])}} if self.replay is not None else {}),
            **({"settling": self.settling.to_dict()} if self.settling is not None else {}),
            **({"precision": {k: (_finite(v) if isinstance(v, float) else v) for k, v in self.precision.items()}}
               if self.precision is not None else {}),
            **({"claims": [c.to_dict() for c in self.claims]} if self.claims else {}),
        }

    def _totals_dict(self) -> dict[str, Any]:
        """``{"stages": {NAME: total}, "pools": {NAME: total}}``, a total being
        ``{members, …}`` and the member rows' fields but ``name`` and ``index``."""
        def entry(row: StageSummary | PoolSummary, members: int) -> dict[str, Any]:
            d = row.to_dict()
            del d["name"], d["index"]
            return {"members": members, **d}

        return {"stages": {n: entry(t, len(self.stages_named(n))) for n, t in self.stage_totals.items()},
                "pools": {n: entry(t, len(self.pools_named(n))) for n, t in self.pool_totals.items()}}

    def to_json(self) -> str:
        """One JSON object on one line (§9.2): floats in shortest round-trip
        form, non-finite numbers ``null``; no final newline."""
        return _encode(self.to_dict())

    # -- CSV (§9.3) -----------------------------------------------------------

    def dump(self, folder: Path) -> None:
        """Write ``NAME.csv`` (``time,session,turn,value``, recording order) for
        every observe, ``client_ROW.csv`` for every client row and
        ``task_time.csv`` (see :attr:`samples`), and with a task table
        ``tasks.csv`` (``root,start,end,sessions,depth``, completion order),
        and with a step log (:attr:`steps`) ``STAGE.steps.csv`` per step stage,
        into ``folder`` (created if missing).  The CLI calls this
        inside :func:`serq.files.write_dir_atomic`; each file is also written
        through a rename, so a direct call leaves no half-written file."""
        from .files import write_text_atomic

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name in dict.fromkeys([*self.observes, *self.samples]):
            rows = [
                f"{shortest(s.time)},{shortest(s.session)},{shortest(s.turn)},{shortest(s.value)}\n"
                for s in self.samples.get(name, ())
            ]
            write_text_atomic(folder / f"{name}.csv", "time,session,turn,value\n" + "".join(rows))
        if self.tasks is not None:
            rows = [f"{shortest(t.root)},{shortest(t.start)},{shortest(t.end)},{shortest(t.sessions)},{shortest(t.depth)}\n"
                    for t in self.tasks.records]
            write_text_atomic(folder / "tasks.csv", "root,start,end,sessions,depth\n" + "".join(rows))
        for label, log in self.steps.items():  # only with steps=True (serq run --steps)
            write_text_atomic(folder / f"{label}.steps.csv", log.csv())
        if self.gauges:  # each gauge's change points from time 0
            (folder / "gauge").mkdir(exist_ok=True)
            for name, g in self.gauges.items():
                rows = [f"{shortest(t)},{shortest(v)}\n" for t, v in g.points]
                write_text_atomic(folder / "gauge" / f"{name}.csv", "time,value\n" + "".join(rows))


# ---------------------------------------------------------------------------
# helpers


def _client_row(name: str, s: ObserveSummary) -> list[str]:
    """A client row: mean, CI and p99 with the mean's 4-significant-digit decimals (§9.1)."""
    d = client_decimals(s.mean)
    return [name, str(int(s.count)), fixed(s.mean, d), "±" + fixed(s.ci, d), fixed(s.cv2, 3), fixed(s.p99, d)]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """One section (§9.1): a blank line, the header, a rule of dashes, the rows.

    Each column is max(header, widest cell) characters wide (``±`` is one);
    the first is left-aligned, the others right-aligned, two spaces apart;
    trailing spaces are trimmed.  No rows: no section."""
    if not rows:
        return []
    widths = [max(len(header[c]), *(len(r[c]) for r in rows)) for c in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = [cells[0].ljust(widths[0])]
        parts += [cell.rjust(w) for cell, w in zip(cells[1:], widths[1:])]
        return "  ".join(parts).rstrip()

    return ["", line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _string(s: str) -> str:
    """``s`` as a JSON string (``json.dumps``, not ASCII-escaped): json is
    imported by the first report written as JSON, not by every run."""
    from json import dumps
    return dumps(s, ensure_ascii=False)


def _encode(v: Any) -> str:
    """Compact JSON with Rust-like number forms (see :func:`shortest`)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, numbers.Real):
        return shortest(v) if math.isfinite(v) else "null"
    if isinstance(v, dict):
        return "{" + ",".join(f"{_string(str(k))}:{_encode(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_encode(x) for x in v) + "]"
    raise TypeError(f"cannot encode {type(v).__name__} in a report")


_MEMBER = re.compile(r"(.+)\[(\d+)\]\Z")


def total_label(name: str) -> str:
    """A family's total row in the text report: ``kv[*]``."""
    return f"{name}[*]"


def _with_totals(rows: Sequence[Any], every: Sequence[Any], totals: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(label, row)`` of each of ``rows``, and after the last one of a family
    of two members or more (counted in ``every``, the whole table) its total
    ``NAME[*]``: a family of one would repeat its member, and a program
    without families prints as before."""
    out: list[tuple[str, Any]] = []
    for i, r in enumerate(rows):
        out.append((r.label, r))
        last = i + 1 == len(rows) or rows[i + 1].name != r.name
        if last and r.name in totals and sum(1 for e in every if e.name == r.name) >= 2:
            out.append((total_label(r.name), totals[r.name]))
    return out


def _total(kind: str, name: str, totals: dict[str, Any], rows: Sequence[Any]) -> Any:
    """Family ``name``'s total, else the row of plain (not a family) ``name``."""
    if name in totals:
        return totals[name]
    for r in rows:
        if r.index is None and r.name == name:
            return r
    raise _unknown(kind, name, [r.name for r in rows])


def _find(kind: str, name: str, rows: Sequence[Any]) -> Any:
    """The row labelled ``name`` (``x[i]``), or the first member of ``name``."""
    for r in rows:
        if r.label == name:
            return r
    m = _MEMBER.match(name)
    if m is None:
        for r in rows:
            if r.name == name:
                return r
    labels = [r.label for r in rows] + [r.name for r in rows]
    raise _unknown(kind, name, labels)


def _unknown(kind: str, name: str, candidates: Iterable[str]) -> SerqError:
    """*unknown KIND `name`* with a did-you-mean, or the list of what there is."""
    cands = list(dict.fromkeys(candidates))
    best = suggest(name, cands)
    if best is not None:
        helps = [f"did you mean {kind} `{best}`?"]
    elif cands:
        helps = [f"the report has {kind}s " + ", ".join(f"`{c}`" for c in cands)]
    else:
        helps = [f"the report has no {kind}s"]
    return SerqError(f"unknown {kind} `{name}` in the report", helps=helps)

"""The unit of every report figure: one table for the report's docs (a test
holds docs/report.md to it), the sweep summary's headers and the plots' axis
labels.

A sweep's row names a figure by its flattened JSON key (``client.ttft.p99``,
``pools.kv.preemptions``, ``stages.eng.utilization``); :func:`describe`
gives its readable label, its unit and whether it can go below 0.  The
figures a program defines (``observe``, ``gauge``) carry the unit of their
expression, which serQ does not know: their unit is empty and they may be
negative.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """One figure of a report section: its JSON ``key``, the ``column`` the
    text report heads it with, its ``unit`` (``""``: a pure number)."""

    key: str
    column: str
    unit: str


#: The run line (docs/report.md §4), and the sweep's derived ``req_per_s``.
RUN = (
    Column("horizon", "horizon", "s"),
    Column("end", "end", "s"),
    Column("warmup", "warmup", "s"),
    Column("seed", "seed", ""),
    Column("events", "events", "count"),
    Column("arrivals", "arrivals", "count"),
    Column("ended", "ended", "count"),
    Column("turns", "turns", "count"),
    Column("mean_live", "mean live", "sessions"),
    Column("req_per_s", "requests per second", "req/s"),
    # the settling verdict (docs/report.md, "Did the run settle?"): 1 yes, 0 no
    Column("settled", "settled", "1 = yes"),
    Column("settling.warmup", "suggested warm-up", "s"),
    Column("settling.horizon", "suggested horizon", "s"),
    Column("settling.overloaded", "backlog grows without end", "1 = yes"),
    Column("settling.reasons", "why not settled", "text"),
)

#: The client table's rows (§7): each row's statistics are in its unit.
CLIENT = (
    Column("ttft", "ttft", "s"),
    Column("tpot", "tpot", "s per token"),
    Column("response", "response", "s"),
    Column("goodput", "goodput", "share of turns"),  # with --goodput: 1 a turn that met every target
)

#: The task table's rows (§8).
TASK = (
    Column("time", "time", "s"),
    Column("sessions", "sessions", "sessions"),
    Column("depth", "depth", "generations"),
)

#: The stage table (§9), then the step table (§10): fields of ``StageSummary``.
STAGE = (
    Column("mean_number", "number", "jobs"),
    Column("utilization", "util", "fraction"),
    Column("completed", "done", "jobs"),
    Column("throughput", "thru", "jobs/s"),
    Column("mean_wait", "wait", "s"),
    Column("mean_service", "service", "s"),
    Column("iterations", "iters", "iterations"),
    Column("prefill_only", "prefill only", "fraction of time"),
    Column("decode_only", "decode only", "fraction of time"),
    Column("mixed", "mixed", "fraction of time"),
    Column("mean_decodes", "decodes", "decoders"),
    Column("mean_decode_batch", "decode batch", "decoders"),
    Column("mean_decode_step", "decode step", "s"),
    Column("mean_itl", "mean itl", "s"),
    Column("itl_p50", "itl p50", "s"),
    Column("itl_p99", "itl p99", "s"),
)

#: The pool table (§11): fields of ``PoolSummary``.
POOL = (
    Column("mean_used", "used", "units"),
    Column("mean_cached", "cached", "units"),
    Column("mean_queue", "queue", "holds"),
    Column("mean_holders", "holders", "sessions"),
    Column("mean_wait", "wait", "s"),
    Column("admissions", "admits", "holds"),
    Column("evicted_entries", "evict(n)", "entries"),
    Column("evicted_units", "evict(u)", "units"),
    Column("preemptions", "preempt", "preemptions"),
    Column("spills", "spill", "pieces"),
    Column("rejected", "rej", "sessions"),
    Column("stuck", "stuck", "sessions"),
)

#: The task section's counters (``tasks.open``, ``tasks.stuck``, ``tasks.count``).
TASK_COUNTS = (
    Column("count", "count", "tasks"),
    Column("open", "open", "tasks"),
    Column("stuck", "stuck", "tasks"),
)

#: Sample statistics (§5): ``count`` counts samples, ``cv2`` is a pure number,
#: the others are in the row's unit.
STATISTICS = ("count", "mean", "ci", "cv2", "p50", "p90", "p95", "p99")


@dataclass(frozen=True)
class Figure:
    """What :func:`describe` tells of a figure: a readable ``label``, its
    ``unit`` (``""`` unknown or a pure number) and whether it can be negative."""

    key: str
    label: str
    unit: str
    signed: bool

    @property
    def axis_label(self) -> str:
        """The label with its unit: ``client ttft mean (s)``."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    @property
    def header(self) -> str:
        """The key with its unit, as the sweep summary heads a column: ``client.ttft.mean [s]``."""
        return f"{self.key} [{self.unit}]" if self.unit else self.key


def _find(columns: tuple[Column, ...], key: str) -> Column | None:
    return next((c for c in columns if c.key == key), None)


def _statistic(key: str, row: str, unit: str, stat: str, label: str) -> Figure:
    if stat == "count":
        return Figure(key, f"{label} count", "samples", False)
    if stat == "cv2":
        return Figure(key, f"{label} cv2", "", False)
    return Figure(key, f"{label} {stat}", unit, False)


def describe(key: str) -> Figure:
    """The label, unit and sign of the figure a sweep's row names ``key``;
    a key serQ does not know keeps its name, no unit, and may be negative."""
    run = _find(RUN, key)
    if run is not None:
        return Figure(key, run.column, run.unit, False)
    section, _, rest = key.partition(".")
    head, _, field = rest.rpartition(".")
    if section == "client":
        c = _find(CLIENT, head)
        if c is not None and field in STATISTICS:
            return _statistic(key, head, c.unit, field, f"client {c.column}")
    if section == "tasks":
        c = _find(TASK, head)
        if c is not None and field in STATISTICS:
            return _statistic(key, head, c.unit, field, f"task {c.column}")
        c = _find(TASK_COUNTS, rest)
        if c is not None:
            return Figure(key, f"tasks {c.column}", c.unit, False)
    if section in ("stages", "pools") and head:
        c = _find(STAGE if section == "stages" else POOL, field)
        if c is not None:
            return Figure(key, f"{section[:-1]} {head} {c.column}", c.unit, False)
    if section in ("observes", "gauges") and head and field:
        kind = section[:-1]
        if field == "count":
            return Figure(key, f"{kind} {head} count", "samples", False)
        if field == "cv2":
            return Figure(key, f"{kind} {head} cv2", "", False)
        return Figure(key, f"{kind} {head} {field}", "", field != "ci")  # (a half-width is never negative)
    return Figure(key, key, "", True)

"""The unit of every report figure: one table for the report's docs (a test
holds docs/report.md to it), the sweep summary's headers and the plots' axis
labels.

A sweep's row names a figure by its flattened JSON key (``client.ttft.p99``,
``pools.kv.preemptions``, ``stages.eng.utilization``); :func:`describe`
gives its readable label, its unit and whether it can go below 0.  A
family's key without an index (``pools.kv.preemptions`` of ``pool kv[N]``)
is its total row, combined from the members' as each column's ``total``
says; ``pools.kv[0].preemptions`` is a member's.  The
figures a program defines (``observe``, ``gauge``) carry the unit of their
expression, which serQ does not know: their unit is empty and they may be
negative.
"""

from __future__ import annotations

from .node import record


@record(frozen=True)
class Column:
    """One figure of a report section: its JSON ``key``, the ``column`` the
    text report heads it with, its ``unit`` (``""``: a pure number), and for
    a stage or pool figure how a family's ``total`` row combines its members'
    (docs/report.md, "Families"): :data:`SUM`, :data:`MEAN` or :data:`POOLED`."""

    key: str
    column: str
    unit: str
    total: str = ""


#: A family total that adds the members' figures: counts, rates of counts,
#: and time-averaged levels (by Little's law the family's level is their sum).
SUM = "sum"
#: A family total that is the plain mean of the members' figures: shares of
#: time (each member's over the same span, so the mean is the share of all the
#: members' time).
MEAN = "mean"
#: A family total computed like a member's figure over all the members' samples
#: together: a per-job or per-iteration mean weighted by the members' counts,
#: the percentiles of all the members' gaps (NaN where the family has none).
POOLED = "pooled"


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
    Column("mean_number", "number", "jobs", SUM),
    Column("utilization", "util", "fraction", MEAN),
    Column("completed", "done", "jobs", SUM),
    Column("throughput", "thru", "jobs/s", SUM),
    Column("mean_wait", "wait", "s", POOLED),
    Column("mean_service", "service", "s", POOLED),
    Column("iterations", "iters", "iterations", SUM),
    Column("prefill_only", "prefill only", "fraction of time", MEAN),
    Column("decode_only", "decode only", "fraction of time", MEAN),
    Column("mixed", "mixed", "fraction of time", MEAN),
    Column("mean_decodes", "decodes", "decoders", SUM),
    Column("mean_decode_batch", "decode batch", "decoders", POOLED),
    Column("mean_decode_step", "decode step", "s", POOLED),
    Column("mean_itl", "mean itl", "s", POOLED),
    Column("itl_p50", "itl p50", "s", POOLED),
    Column("itl_p99", "itl p99", "s", POOLED),
)

#: The pool table (§11): fields of ``PoolSummary``.
POOL = (
    Column("mean_used", "used", "units", SUM),
    Column("mean_cached", "cached", "units", SUM),
    Column("mean_queue", "queue", "holds", SUM),
    Column("mean_holders", "holders", "sessions", SUM),
    Column("mean_wait", "wait", "s", POOLED),
    Column("admissions", "admits", "holds", SUM),
    Column("evicted_entries", "evict(n)", "entries", SUM),
    Column("evicted_units", "evict(u)", "units", SUM),
    Column("preemptions", "preempt", "preemptions", SUM),
    Column("spills", "spill", "pieces", SUM),
    Column("rejected", "rej", "sessions", SUM),
    Column("stuck", "stuck", "sessions", SUM),
)

#: A family total's one figure of its own (``pools.kv.members``: the members it adds up).
MEMBERS = Column("members", "members", "members")

#: The task section's counters (``tasks.open``, ``tasks.stuck``, ``tasks.count``).
TASK_COUNTS = (
    Column("count", "count", "tasks"),
    Column("open", "open", "tasks"),
    Column("stuck", "stuck", "tasks"),
)

#: Sample statistics (§5): ``count`` counts samples, ``cv2`` is a pure number,
#: the others are in the row's unit.
STATISTICS = ("count", "mean", "ci", "cv2", "p50", "p90", "p95", "p99")


@record(frozen=True)
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
        c = _find(STAGE if section == "stages" else POOL, field) or (MEMBERS if field == "members" else None)
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

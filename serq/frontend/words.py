"""The words of the language the front end checks names against (language §1.6, §6)."""

from __future__ import annotations

from typing import Any

from .. import ir
from ..expr import DISTRIBUTIONS, POOL_PROBES, PURE_FUNCTIONS, STAGE_PROBES

#: Words with a meaning somewhere in the grammar (§1.6): no `def` or parameter takes them.
KEYWORDS = frozenset((
    "admission admit arrivals arrive at batch bernoulli block bottleneck branch budget by cache "
    "cap choose chunk closed cost decode def delay drop else end evict exclusive fifo first fits "
    "from grow growing hidden hold horizon in init lease let lifo link load loop lru maxmin memory "
    "none observe on only ordered poisson pool preempt prefill ps queue release renewal request reserve "
    "reuse run seed serve server session set share spill stage step to tool trace transfer turn use "
    "via warmup when with workload spawn into join"
).split())

#: Retired words (§5.4) and what to write instead.
RETIRED = {
    "enter": "`enter` is now `hold`",
    "admit": "`admit if … fit where x = e { … } keep (ℓ)` is now "
             "`hold … at admission (x = e) { … } cache (ℓ)`; the pool option `admit via` is unchanged",
    "keep": "`keep` is now `cache`",
    "where": "`where x = e` is now `at admission (x = e)`",
    "fit": "`fit` is gone: the pools of a `hold` are the condition",
    "fits": "`fits` is now `reserve`",
}

#: The most members a pool or stage family may have (with aggregates' terms and a
#: `choose`'s candidates: one bound, ``serq.ir.MAX_MEMBERS``).
MAX_MEMBERS = ir.MAX_MEMBERS
MAX_ALL_MEMBERS = ir.MAX_ALL_MEMBERS


def too_many_members(n: float, span: Any, shown: str = "") -> Exception:
    """A family larger than ``MAX_MEMBERS``, said at its size."""
    from .diag import error

    return error(f"a family of {shown}{n:,.0f} members: at most {MAX_MEMBERS:,}", span,
                 helps=["every member of a family is built when the run starts (about 100 µs and 5 KB each); "
                        f"aggregates and `choose` take at most {MAX_MEMBERS:,} terms too"])

#: Items and statements of the era that this version refuses (§2.9, §5.2).
ADVANCED_ITEMS: dict[str, str] = {}  # (every advanced item of the era is supported now: docs/pd.md)
ADVANCED_STMTS: dict[str, str] = {}
#: Later-era words (decision 6).
LATER = {
    "fn": "`fn` (an explicit entry point)",
    "device": "`device`",
    "engine": "`engine … on` declarations",
    "while": "`while`",
}

OBSERVABLE = frozenset(POOL_PROBES) | frozenset(STAGE_PROBES)
ESTIMATES = frozenset(("price", "est_lambda", "est_rho", "est_wait"))
FUNCTIONS = frozenset(PURE_FUNCTIONS) | OBSERVABLE | {"blocksize"} | ESTIMATES
DIST_NAMES = frozenset(DISTRIBUTIONS)

# moments (§6.4) and how messages describe them
SESSION, ADMIT, SELECT, EVICT, PS, BUDGET, STEP, SERVE, GAUGE = (
    "Session", "Admit", "Select", "Evict", "Ps", "Budget", "Step", "Serve", "Gauge")
# a claim's three moments (docs/claims.md)
ITERATION, END, GIVEN = "Iteration", "End", "Given"
MOMENT_TEXT = {
    SESSION: "a session statement, a run or a hold's cache",
    ADMIT: "a hold's header, read at admission",
    SELECT: "a pool's queue keys, read before selecting a waiting session",
    EVICT: "an eviction key or spill clause",
    PS: "a ps stage's capacity",
    BUDGET: "a step stage's budget or chunk, planned before the iteration",
    STEP: "a step stage's cost, after the iteration",
    SERVE: "a step stage's serve keys or `serve only`",
    GAUGE: "a gauge",
    ITERATION: "a claim over iterations, read as an iteration starts",
    END: "a claim `at end`, read when the last session has ended",
    GIVEN: "a claim's `given`, read for each session after `init`",
}
ALL_MOMENTS = tuple(MOMENT_TEXT)

#: Context variables and the moments they exist at (§6.4).
CONTEXT = {
    "now": tuple(m for m in ALL_MOMENTS if m not in (GAUGE, GIVEN)),
    "waited": (SELECT,),
    "size": (EVICT,), "age": (EVICT,), "last": (EVICT,), "waiting": (EVICT,),
    "present": (PS,),
    "residents": (BUDGET, STEP, SERVE, ITERATION), "decoders": (BUDGET, STEP, SERVE, ITERATION),
    "kv_decode": (BUDGET, STEP, SERVE, ITERATION), "kv_prefill": (BUDGET, STEP, SERVE, ITERATION),
    "tokens": (STEP, ITERATION), "prefilled": (STEP, ITERATION), "attention": (STEP, ITERATION),
    "decoding": (SERVE,), "admission": (SERVE,), "remaining": (SERVE,),
    # what a claim over iterations reads besides the cost's variables (docs/claims.md)
    "demand": (ITERATION,), "served": (ITERATION,), "arrived": (ITERATION,),
}

#: The aggregates of an observation a claim `at end` reads: ``total(x)``, ``count(x)`` …
CLAIM_AGGREGATES = ("total", "count", "largest", "smallest", "prefix_total")

#: Context variables renamed in this era (§6.2, step 5).
OLD_CONTEXT = {
    "queued": "waiting", "n": "present", "ntok": "tokens", "ndec": "decoders",
    "npre": "prefilled", "nres": "residents", "kvb": "kv_decode", "kvp": "kv_prefill",
    "attn": "attention",
}


def is_language_word(name: str) -> bool:
    """A keyword, function, distribution or ``inf``: no definition or parameter takes it (§2.3)."""
    return name in KEYWORDS or name in FUNCTIONS or name in DIST_NAMES or name == "inf"

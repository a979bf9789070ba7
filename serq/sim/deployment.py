"""Building a run's deployment from the program: the pools and stages (one
object per member of a family), their compiled keys and expressions, the
step engine class of each step stage, and the pairing of ``admit via`` and
``memory`` families (language §3, "Arrays")."""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Any, Mapping

from .. import ir
from ..errors import SerqError
from ..expr import Frame, code_of, compile_expr, source
from .cache import PrefixCache
from .compile import pool_source, stage_source
from .pool import Pool
from .stats import Estimator
from .stages.base import Stage
from .stages.queueing import DelayStage, FifoStage, PsStage
from .stages.shared import FlowGroup, SharedStage
from .stages.step import StepEngine

if TYPE_CHECKING:
    from .simulator import Simulator


def build(sim: "Simulator", engines: Mapping[str, type]) -> None:
    """Make ``sim.pools`` and ``sim.stages`` (lists of families), ``sim.all_pools``
    and ``sim.engines`` (flat, in declaration order); ``engines`` gives step
    stages their classes by name (``--engine``)."""
    p = sim.program
    from .engines import check_stages

    check_stages(p, [("engine", name) for name in sorted(engines)])
    sim.pools = []
    for decl in p.pools:
        members = [Pool(sim, decl, label(decl.name, i, decl.size), i if decl.size is not None else None)
                   for i in range(decl.members)]
        sim.pools.append(members)
    sim.all_pools = [m for ms in sim.pools for m in ms]
    sim.stages = [[] for _ in p.stages]
    frame = Frame(sim.ns, attrs="c.a", ctx="c", session=None, stream="_mrng",
                  resolve_pool=partial(pool_source, sim), resolve_stage=partial(stage_source, sim))
    for si, sdecl in enumerate(p.stages):
        for i in range(sdecl.members):
            name = label(sdecl.name, i, sdecl.size)
            index = i if sdecl.size is not None else None
            if sdecl.kind == "delay":
                stage: Stage = DelayStage(sim, sdecl, name, index)
            elif sdecl.kind == "fifo":
                stage = FifoStage(sim, sdecl, name, index)
            elif sdecl.kind == "ps" and si in p.shared:
                assert isinstance(sdecl.phi, ir.Num)
                stage = SharedStage(sim, sdecl, name, index, cap=sdecl.phi.value)
            elif sdecl.kind == "ps":
                assert sdecl.phi is not None
                stage = PsStage(sim, sdecl, name, index, phi=compile_expr(sdecl.phi, frame))
            else:
                stage = _step(sim, sdecl, name, index, frame, engines.get(sdecl.name, StepEngine))
            sim.stages[si].append(stage)
    sim.engines = [s for ms in sim.stages for s in ms if isinstance(s, StepEngine)]
    for si in p.estimated:  # the stages whose online estimates the program reads keep them
        for stage in sim.stages[si]:
            stage.est = Estimator()
    if p.shared:  # the flows of `run A, B (w)` (docs/pd.md, "Flows")
        assert p.share is not None
        sim.flows = FlowGroup(sim, [st for si in p.shared for st in sim.stages[si]], p.share)  # type: ignore[misc]
    # pools' keys and the pairing of `admit via` / `memory` families (language §3 "Arrays")
    for decl, members in zip(p.pools, sim.pools):
        for i, pool in enumerate(members):
            if decl.queue != "fifo":
                keys = [compile_expr(k, frame.derive(session="c.session", stream="c.srng")) for k in decl.queue]
                pool.queue_keys = keys_of(keys)
            if decl.evict != "lru":
                keys = [compile_expr(k, frame.derive(stream="c.srng")) for k in decl.evict]
                pool.cache = PrefixCache.by_keys(pool.block, decl.evict, keys, keys_of(keys), sim.eviction_stream)
                if pool.cache.memo:
                    sim.kept_caches.append(pool.cache)
            if decl.admit_via is not None:
                engine = pair(sim.stages[decl.admit_via], i, len(members))
                engine.admit_pools.append(pool)  # type: ignore[attr-defined]
        if decl.spill is not None:
            _spills(sim, decl, members, frame)
    for engine in sim.engines:
        if engine.memory is not None:
            engine.memory.engines.append(engine)
    if p.gauges:  # (compiled once the simulator knows how they are read: `gauges`)
        _gauge_flags(sim)


def _spills(sim: "Simulator", decl: ir.PoolDecl, members: list[Pool], frame: Frame) -> None:
    """Each member's ``spill`` (docs/offload.md), its tier and link paired with it."""
    from .spill import Spiller

    sp = decl.spill
    assert sp is not None
    if isinstance(sp.pred, ir.Num) and sp.pred.value == 0.0:
        return  # `when (0)` (a `--set` switch turned off): a pool that never spills, on the plain path
    at_evict = frame.derive(stream="c.srng")
    # constants are not read per piece; a bad one is, to give its error at the first spill
    fixed = isinstance(sp.work, ir.Num) and 0.0 <= sp.work.value < math.inf
    work = sp.work.value if fixed else compile_expr(sp.work, at_evict)  # type: ignore[union-attr]
    always = isinstance(sp.pred, ir.Num) and not math.isnan(sp.pred.value)
    pred = None if always else compile_expr(sp.pred, at_evict)
    for i, pool in enumerate(members):
        tier = pair(sim.pools[sp.tier], i, len(members))
        link = pair(sim.stages[sp.link], i, len(members))
        pool.cache.spill = Spiller(sim, pool, tier, link, work, pred)
        pool.cache.spill.locate(sp)


def gauges(sim: "Simulator", logged: bool) -> None:
    """The program's gauges, compiled: read as the run goes, or (``logged``)
    from a log of the pools' changes (serq/sim/gauges.py), compiled on
    stand-ins of the pools that the log sets."""
    frame = Frame(sim.ns, attrs="c.a", ctx="c", session=None, stream="_mrng",
                  resolve_pool=partial(pool_source, sim), resolve_stage=partial(stage_source, sim))
    if not logged:
        _gauges(sim, frame)
        return
    from types import SimpleNamespace

    from .gauges import Gauges, Shadow

    shadow = SimpleNamespace(program=sim.program, pools=[[Shadow(p) for p in ms] for ms in sim.pools], gauges=None)
    shadow.all_pools = [m for ms in shadow.pools for m in ms]
    _gauges(shadow, frame.derive(resolve_pool=partial(pool_source, shadow)))  # type: ignore[arg-type]
    sim.gauges = Gauges(sim, [g.name for g in sim.program.gauges], None)  # type: ignore[arg-type]
    sim.gauges.always = False
    sim.gauges.log_to(shadow.gauges, {id(p): sh for p, sh in zip(sim.all_pools, shadow.all_pools) if p.gauge_read})


def gauges_read_stages(p: ir.Program) -> bool:
    """Whether some gauge reads a stage (then every instant is read)."""
    from ..expr import walk

    return any(isinstance(x, ir.Probe) and isinstance(x.target, ir.StageRef) for g in p.gauges for x in walk(g.expr))


def _gauge_probes(sim: "Simulator") -> list[tuple[int, Any, bool]]:
    """Each gauge's reads of a pool: the gauge's index, the pool (of ``sim``:
    the deployment's, or the stand-ins of :func:`gauges`) and whether a
    growth changes what it reads (``holders`` and ``queued`` it does not)."""
    from ..expr import walk

    out = []
    for i, g in enumerate(sim.program.gauges):
        for x in walk(g.expr):
            if isinstance(x, ir.Probe) and isinstance(x.target, ir.PoolRef):
                index = x.target.index
                assert index is None or isinstance(index, ir.Num)  # a gauge's index is a number (checked)
                pool = sim.pools[x.target.pool][0 if index is None else int(index.value)]
                out.append((i, pool, x.fn not in ("holders", "queued")))
    return out


def _gauge_flags(sim: "Simulator") -> None:
    """Tell the pools the gauges read (``Pool.gauge_read``; ``Pool.gauged``:
    what a growth changes, so a coalesced run's growths there are read one by
    one, at their times)."""
    for _i, pool, grows in _gauge_probes(sim):
        pool.gauge_read = True
        if grows:
            pool.gauged = True


def _gauges(sim: "Simulator", frame: Frame) -> None:
    """The program's gauges, compiled on the deployment's state (or on the
    stand-ins of ``gauges``)."""
    from .gauges import Gauges

    p = sim.program

    # gauges are read once every passing run has replayed its growths up to then (serq/sim/lazy.py)
    raw = frame.derive()
    raw.raw_used = True

    def compiled(gauges: list[ir.Gauge]) -> Any:
        text = f"lambda c: ({', '.join(source(g.expr, raw) for g in gauges)},)"
        return eval(code_of(text, "<serq gauges>", "eval"), frame.ns)  # noqa: S307 - our own generated code

    sim.gauges = Gauges(sim, [g.name for g in p.gauges], compiled(list(p.gauges)))
    # a gauge that reads only pools is read again only once one of them changed (``Pool.record``)
    _gauge_flags(sim)
    sim.gauges.always = gauges_read_stages(p)
    readers: dict[int, list[int]] = {}  # pool (id) → the gauges that read what a growth changes there
    anyhow: dict[int, list[int]] = {}  # pool (id) → the gauges that read it at all
    for i, pool, grows in _gauge_probes(sim):
        every = anyhow.setdefault(id(pool), [])
        if i not in every:
            every.append(i)
        if grows:
            got = readers.setdefault(id(pool), [])
            if i not in got:
                got.append(i)
    parts: dict[tuple[int, ...], Any] = {}  # (members of a family mostly share one set of gauges)

    def part(gauges: list[int]) -> tuple[Any, tuple[int, ...]]:
        idx = tuple(gauges)
        if idx not in parts:
            parts[idx] = compiled([p.gauges[i] for i in idx])
        return parts[idx], idx

    for pool in sim.all_pools:  # a growth there changes only the gauges that read the pool: read those alone
        if pool.gauged:
            pool.gauge_part = part(readers[id(pool)])
        if pool.gauge_read:  # and any change there, those that read it at all
            pool.gauge_any = part(anyhow[id(pool)])
    from .gauge_terms import install

    install(sim, raw)  # aggregates over many replicas read term by term (serq/sim/gauge_terms.py)


def _step(sim: "Simulator", decl: ir.StageDecl, name: str, index: int | None, frame: Frame,
          cls: type) -> StepEngine:
    step = decl.step
    assert step is not None
    memory = None
    if step.memory is not None:
        memory = pair(sim.pools[step.memory], index or 0, decl.members)
    serve_keys = None
    if isinstance(step.serve, tuple):
        serve_keys = keys_of([compile_expr(k, frame.derive(session=None)) for k in step.serve])
    only = None if step.only is None else compile_expr(step.only, frame.derive(session=None))
    if not (isinstance(cls, type) and issubclass(cls, StepEngine)):
        raise SerqError(f"--engine {decl.name}: `{cls!r}` is not a StepEngine subclass")
    return cls(sim, decl, name, index,
               budget=compile_expr(step.budget, frame), chunk=compile_expr(step.chunk, frame),
               cost=compile_expr(step.cost, frame), serve=step.serve, serve_keys=serve_keys,
               memory=memory, only=only)


def label(name: str, i: int, size: int | None) -> str:
    """A member's label: ``kv`` for a single pool or stage, ``kv[2]`` for a member of a family."""
    return name if size is None else f"{name}[{i}]"


def pair(members: list[Any], i: int, count: int) -> Any:
    """Member ``i`` of a family of ``count`` paired with another family: one
    for one when the counts match, one for all when the other has one."""
    return members[0] if len(members) == 1 else members[i if count == len(members) else 0]


def keys_of(fns: list[Any]) -> Any:
    """Key functions as one function giving their tuple."""
    if len(fns) == 1:
        f = fns[0]
        return lambda c: (f(c),)
    if len(fns) == 2:
        f, g = fns
        return lambda c: (f(c), g(c))
    return lambda c: tuple([f(c) for f in fns])

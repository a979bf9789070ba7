"""``serq prove``: one verdict a claim, over every path of a family.

``proved`` (an ``every`` or ``at end`` claim holds on every path of the
family — for all time when the family is one path that repeats),
``refuted`` (a path fails it: the counterexample), ``witnessed`` (a ``some``
claim holds at an iteration of some path: the witness), ``no witness`` (it
holds at no iteration of any path), ``unknown`` (the reason: a construct
outside the exact fragment, an attribute without bounds, a limit reached).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

from .. import ir
from .exact import Unsupported, shown
from .explore import Explorer, Limits, Verdict, explore_endless
from .family import Bound, Family, Unbounded, build_family


@dataclass
class Proof:
    """The verdicts of a program's claims, and how to replay each counterexample."""

    program: ir.Program
    verdicts: list[Verdict] = field(default_factory=list)
    #: the flags the verdicts depend on, for the replay commands (``--set``)
    sets: Sequence[tuple[str, str]] = ()

    def replay(self, v: Verdict) -> str | None:
        """A ``serq run`` command that runs the counterexample (or witness) to the same time."""
        if v.first is None:
            return None
        path = self.program.path or "PROGRAM.sq"
        words = ["serq", "run", path]
        for name, value in self.sets:
            words += ["--set", f"{name}={value}"]
        horizon = float(v.first) * 2 + 1
        if v.sessions is not None:
            words += ["--replay", json.dumps(v.sessions, separators=(",", ":"))]
        words += ["--horizon", f"{horizon:g}", "--check-claims"]
        return " ".join(shlex.quote(w) for w in words)

    def to_dict(self) -> dict[str, Any]:
        out = []
        for v in self.verdicts:
            d = v.to_dict()
            replay = self.replay(v)
            if replay is not None:
                d["replay"] = replay
            out.append(d)
        return {"claims": out}

    def text(self) -> str:
        """One block a claim: the verdict, the family, what was explored, the counterexample."""
        if not self.verdicts:
            return "no claims: the program states none (docs/claims.md)"
        lines = []
        for v in self.verdicts:
            what = "at end" if v.kind == "end" else f"{v.kind} iteration of {v.stage}"
            head = f"claim {v.name} ({what}): {v.verdict}"
            if v.first is not None:
                head += f" at {_exactly(v.first)}"
            if v.period is not None and v.verdict in ("proved", "no witness"):
                head += f", for all time (the path repeats every {_exactly(v.period)})"
            lines.append(head)
            if v.reason:
                lines.append(f"  why: {v.reason}")
            if v.family:
                lines.append(f"  family: {v.family}")
            if v.paths or v.states or v.family != "every workload, every path":
                lines.append(f"  explored: {v.paths:,} path(s), {v.states:,} state(s)")
            if v.sessions is not None:
                label = "witness" if v.verdict == "witnessed" else "counterexample"
                for s in v.sessions:
                    attrs = ", ".join(f"{k} = {_exactly(x)}" for k, x in s["attributes"].items())
                    lines.append(f"  {label}: session {s['serial']} arrives at {_exactly(s['arrival'])}"
                                 + (f": {attrs}" if attrs else ""))
            replay = self.replay(v)
            if replay is not None:
                lines.append(f"  replay: {replay}")
        return "\n".join(lines)

    @property
    def exit_code(self) -> int:
        """0 all proved or witnessed; 4 one refuted or without witness; 5 else one unknown."""
        if any(v.verdict in ("refuted", "no witness") for v in self.verdicts):
            return 4
        if any(v.verdict == "unknown" for v in self.verdicts):
            return 5
        return 0


def prove(program: ir.Program, *, bounds: Sequence[Bound] = (), sessions: int | None = None,
          grid: Fraction | None = None, instants: int = 4, limits: Limits | None = None,
          sets: Sequence[tuple[str, str]] = ()) -> Proof:
    """Decide ``program``'s claims over every path of its family (docs/claims.md):
    first by induction where a claim is a token-rate bound (every workload), then
    by exploring the family's paths on the exact machine."""
    from .induct import prove_by_induction
    from .machine import check_fragment

    limits = limits or Limits()
    stages = [st.name for st in program.stages]
    verdicts = [Verdict(c.name, c.kind, "" if c.stage is None else stages[c.stage.stage]) for c in program.claims]
    proof = Proof(program, verdicts, sets)
    todo: list[tuple[ir.Claim, Verdict]] = []
    for c, v in zip(program.claims, verdicts):
        why = prove_by_induction(program, c)
        if why is None:
            todo.append((c, v))
        else:
            v.verdict, v.reason, v.family = "proved", why, "every workload, every path"
    if not todo:
        return proof
    try:
        check_fragment(program)
        family = build_family(program, bounds=bounds, sessions=sessions, grid=grid, instants=instants)
    except Unsupported as err:
        for _, v in todo:
            v.reason = f"outside the exact fragment: {err.construct}" + (f" ({err.label})" if err.label else "")
        return proof
    except Unbounded as err:
        for _, v in todo:
            v.reason = f"the family has no bound: {err}"
        return proof
    described = family.describe()
    for c, v in todo:
        v.family = described + ("; every session inside the claim's `given`" if c.given is not None else "")
    size = family.size()
    if not family.endless and size > limits.max_paths:
        many = "more than 1e300" if size == float("inf") else f"{size:.3g}"
        for _, v in todo:
            v.reason = (f"the family has {many} workloads, more than --max-paths {limits.max_paths:,}: narrow "
                        "it (--bound NAME=LO..HI, --set on the program's constants, --sessions K)")
        return proof
    if family.endless:
        _endless(program, todo, limits)
    else:
        _finite(program, todo, family, limits)
    return proof


def _endless(program: ir.Program, todo: list[tuple[ir.Claim, Verdict]], limits: Limits) -> None:
    """One deterministic path that never ends: its claims over iterations, until it repeats."""
    iters = [(c, v) for c, v in todo if c.kind != "end"]
    for c, v in todo:
        if c.kind == "end":
            v.reason = "the workload never ends: an `at end` claim needs an end (`batch`, run { arrivals N; })"
    if not iters:
        return
    try:
        why = explore_endless(program, [c for c, _ in iters], [v for _, v in iters], limits)
    except Unsupported as err:
        why = f"outside the exact fragment: {err.construct}"
    for _, v in iters:
        if v.verdict == "unknown" and not v.reason and why:
            v.reason = why


def _finite(program: ir.Program, todo: list[tuple[ir.Claim, Verdict]], family: Family, limits: Limits) -> None:
    """Every workload of a finite family, one exploration per distinct ``given``."""
    groups: dict[Any, list[tuple[ir.Claim, Verdict]]] = {}
    for c, v in todo:
        groups.setdefault(c.given, []).append((c, v))
    for group in groups.values():
        claims, vs = [c for c, _ in group], [v for _, v in group]
        explorer = Explorer(program, claims, vs, family, limits)
        try:
            for m in _machines(program, family):
                explorer.run(m)
                if explorer.cut or explorer.all_settled():
                    break
        except Unsupported as err:
            explorer.cut = f"outside the exact fragment: {err.construct}" + (f" ({err.label})" if err.label else "")
        for c, v in group:
            v.paths, v.states = explorer.paths, explorer.states
            if family.deterministic:
                v.sessions = None  # the program's own path: `serq run` replays it as it is
            if v.verdict in ("refuted", "witnessed"):
                continue
            if c.kind == "end" and explorer.unended:
                v.verdict, v.reason = "unknown", explorer.unended
            elif explorer.cut:
                v.verdict = "unknown"
                v.reason = explorer.cut if explorer.cut.startswith("outside") else f"stopped after {explorer.cut}"
            elif explorer.paths == 0:
                v.reason = "no workload of the family satisfies the claim's `given`: there is nothing to prove"
            else:
                v.verdict = "no witness" if c.kind == "some" else "proved"


def _machines(p: ir.Program, family: Family):
    """The machines the family's workloads start from: one, or one per choice of
    arrival instants on the grid."""
    import itertools

    from .machine import Machine

    kind = family.arrivals[0]
    if kind == "times":
        times = family.arrivals[1]
        if p.arrival.kind == "batch" or family.deterministic:
            yield Machine(p)  # (the program's own arrivals: `serq run` replays the path as it is)
        else:
            yield Machine(p, arrivals=times)
        return
    _, step, m, k = family.arrivals
    for combo in itertools.combinations_with_replacement(range(m), k):
        yield Machine(p, arrivals=[step * i for i in combo])


def _exactly(x: Any) -> str:
    """A time or value of a verdict: exact (a whole number in full), with six digits beside a fraction."""
    return shown(x, exact=True)

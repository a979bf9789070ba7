"""The step engine's hooks: one table of what a scheduler may override.

A *hook* is a method of :class:`~serq.sim.stages.step.StepEngine` that a
subclass overrides to make one decision, or to be told of one event.
:data:`HOOKS` is the one list of them (the engine, its guards, the fast path
and docs/policies.md all read it): for each, what it decides, whether an
override keeps the coalesced decode runs as it is (``keeps_runs``), whether
it may be declared pure with :func:`pure` to keep them (``may_be_pure``),
and the guard an override is wrapped in.

* **Decisions** return what the engine does next: ``order_residents``,
  ``plan_tokens``, ``select_waiting``, ``choose_victim``, ``iteration_cost``.
* **Notifications** are told of an event and return nothing:
  ``on_finish`` (a resident's run ended), ``on_remove`` (a resident left
  without finishing: its session was preempted).
* ``admit_next`` is mechanism, not a decision: overriding it still works,
  with a warning in the report; ``select_waiting`` is the admission decision.

A subclass's overrides are wrapped in their guards (:func:`guard_hooks`): an
exception, or a value the engine cannot use, stops the run with a
:class:`HookError` naming the class, the hook and the stage.  The default
hooks run unchecked.
"""

from __future__ import annotations

import math
import numbers
import os
import traceback
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...errors import SerqError, SerqRuntimeError
from ...node import record
from ..cache import EPS
from .base import Job

if TYPE_CHECKING:
    from .step import StepEngine


class HookError(SerqRuntimeError):
    """A :class:`"StepEngine"` subclass's hook raised, or returned what the
    engine cannot use.  The message names the class, the hook and the stage."""


def _where(engine: "StepEngine", hook: str) -> str:
    cls = type(engine)
    return f"engine class `{cls.__module__}.{cls.__qualname__}`, hook `{hook}` (stage `{engine.label}`)"


def _call(engine: "StepEngine", hook: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except SerqError as err:  # the simulator's own error, met inside a hook that called back into it
        if not isinstance(err, HookError) and not any(n.startswith("inside engine class") for n in err.notes):
            err.notes.append(f"inside {_where(engine, hook)}")
        raise
    except Exception as err:  # noqa: BLE001 - any exception in a user's hook is the user's to fix
        raise HookError(f"{_where(engine, hook)} raised {_describe(err)}") from err


def _describe(err: BaseException) -> str:
    """``ValueError: boom (at mysched.py:12)``: the exception and the last frame it passed."""
    text = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    text = text.splitlines()[0] if text else type(err).__name__
    if len(text) > 200:
        text = text[:197] + "..."
    tb = traceback.extract_tb(err.__traceback__)
    if tb:
        frame = tb[-1]
        text += f" (at {os.path.basename(frame.filename)}:{frame.lineno})"
    return text


def _show(value: Any) -> str:
    """A value in a message: short, with its type when that is the problem."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a user's object with a broken __repr__
        text = f"<{type(value).__name__}>"
    if len(text) > 60:
        text = text[:57] + "..."
    return text


def _amount(engine: "StepEngine", hook: str, value: Any, what: str) -> float:
    """A finite number ≥ 0 (not a bool), as a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        shown = _show(value) if value is None else f"{_show(value)} ({type(value).__name__})"
        raise HookError(f"{_where(engine, hook)} returned {shown}, not {what}")
    x = float(value)
    if not math.isfinite(x) or x < 0.0:
        raise HookError(f"{_where(engine, hook)} returned {_show(value)}, not {what}")
    return x


def _check_order(engine: "StepEngine", fn: Callable[[], Any]) -> Callable[[], list[Job]]:
    hook = "order_residents"

    def order_residents() -> list[Job]:
        before = list(engine.residents)
        value = _call(engine, hook, fn)
        if value is None or isinstance(value, (str, bytes, set, frozenset, Mapping)):
            # (a set's order is its hashes': a run would not be reproducible)
            shown = _show(value) if value is None else f"{_show(value)} ({type(value).__name__})"
            raise HookError(f"{_where(engine, hook)} returned {shown}, not a list of residents "
                            "(jobs from self.residents) in serving order")
        try:
            it = iter(value)
        except TypeError:
            raise HookError(f"{_where(engine, hook)} returned {_show(value)} ({type(value).__name__}), "
                            "not a list of residents in serving order") from None
        residents = {id(j) for j in engine.residents}
        seen: set[int] = set()
        out: list[Job] = []
        while True:  # at most one step past the residents: a duplicate or stranger ends it
            try:
                job = next(it)
            except StopIteration:
                if engine.residents != before:  # `self.residents.sort(…)`: the admission order is the engine's
                    raise HookError(f"{_where(engine, hook)} changed self.residents; return a new list "
                                    "(sorted(self.residents, key=…)) and leave the residents in admission order")
                return out
            except SerqError:
                raise
            except Exception as err:  # noqa: BLE001 - a generator of the user's
                raise HookError(f"{_where(engine, hook)} raised {_describe(err)}") from err
            if id(job) not in residents:
                raise HookError(f"{_where(engine, hook)} listed {_show(job)}, which is not a resident "
                                "(the serving order lists jobs from self.residents)")
            if id(job) in seen:
                raise HookError(f"{_where(engine, hook)} listed a resident twice")
            seen.add(id(job))
            out.append(job)

    return order_residents


def _check_plan(engine: "StepEngine", fn: Callable[[Job, float], Any]) -> Callable[[Job, float], float]:
    hook = "plan_tokens"

    def plan_tokens(job: Job, chunk: float) -> float:
        tokens = _amount(engine, hook, _call(engine, hook, fn, job, chunk), "a number of tokens >= 0")
        if tokens > job.work + EPS:
            raise HookError(f"{_where(engine, hook)} returned {tokens:g} tokens for a resident with "
                            f"{job.work:g} left")
        return tokens

    return plan_tokens


def _check_admit(engine: "StepEngine", fn: Callable[[float], Any]) -> Callable[[float], bool]:
    hook = "admit_next"
    sim = engine.sim

    def marks() -> tuple[int, int, int]:
        pools = sim.all_pools
        return (sum(p.admissions for p in pools), sum(len(p.put_queue) for p in pools), len(engine.residents))

    def admit_next(left: float) -> bool:
        before = marks()
        value = _call(engine, hook, fn, left)
        if value is not True and value is not False:
            raise HookError(f"{_where(engine, hook)} returned {_show(value)}, not True or False")
        if value and marks() == before:
            raise HookError(f"{_where(engine, hook)} returned True, but nothing was admitted "
                            "(no pool admitted a request); it must return False when it admits none")
        return value

    return admit_next


def _check_select(engine: "StepEngine", fn: Callable[[list], Any]) -> Callable[[list], Any]:
    hook = "select_waiting"

    def select_waiting(candidates: list) -> Any:
        value = _call(engine, hook, fn, candidates)
        if value is None:
            return None
        for c in candidates:
            if c is value:
                return value
        raise HookError(f"{_where(engine, hook)} returned {_show(value)}, not one of the candidates "
                        "it was given (or None to admit none)")

    return select_waiting


def _check_victim(engine: "StepEngine", fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    hook = "choose_victim"

    def choose_victim(pool: Any, grower: Any) -> Any:
        from ..session import Session

        victim = _call(engine, hook, fn, pool, grower)
        if victim is None:
            return None
        if isinstance(victim, Job):
            raise HookError(f"{_where(engine, hook)} returned a job, not a session (a resident's "
                            "session is job.session)")
        if not isinstance(victim, Session):
            raise HookError(f"{_where(engine, hook)} returned {_show(victim)} ({type(victim).__name__}), "
                            "not a session or None")
        if victim.innermost(pool) is None:
            raise HookError(f"{_where(engine, hook)} returned session {victim.serial}, which holds nothing "
                            f"on pool `{pool.label}`")
        if pool.engines and not (victim.job is not None and victim.job[0] in pool.engines):
            raise HookError(f"{_where(engine, hook)} returned session {victim.serial}, which is not a "
                            f"resident of a step stage whose memory is `{pool.label}`")
        return victim

    return choose_victim


def _check_cost(engine: "StepEngine", fn: Callable[[Any], Any]) -> Callable[[Any], float]:
    hook = "iteration_cost"

    def iteration_cost(view: Any) -> float:
        cost = _amount(engine, hook, _call(engine, hook, fn, view), "a finite duration >= 0")
        if cost == 0.0 and view.tokens > 0.0:
            raise HookError(f"{_where(engine, hook)} returned 0 for an iteration of {view.tokens:g} tokens; "
                            "an iteration that schedules tokens lasts a positive time")
        return cost

    return iteration_cost


def _check_notice(hook: str) -> Callable[["StepEngine", Callable[[Job], Any]], Callable[[Job], None]]:
    def check(engine: "StepEngine", fn: Callable[[Job], Any]) -> Callable[[Job], None]:
        def notice(job: Job) -> None:
            _call(engine, hook, fn, job)

        return notice

    return check


@record(frozen=True)
class Hook:
    """One hook of the step engine (see the module's docstring)."""

    name: str
    kind: str  # "decision", "notification" or "mechanism"
    decides: str  # what it decides or is told, in a line
    keeps_runs: bool  # an override keeps the coalesced decode runs as it is
    may_be_pure: bool  # an override declared with @pure keeps them
    guard: Callable[["StepEngine", Callable[..., Any]], Callable[..., Any]]


#: Every hook, in the order docs/policies.md lists them.
HOOKS: dict[str, Hook] = {h.name: h for h in (
    Hook("order_residents", "decision", "the order residents get the iteration's tokens", False, True,
         _check_order),
    Hook("plan_tokens", "decision", "the tokens a resident asks for this iteration", False, True, _check_plan),
    Hook("select_waiting", "decision", "which waiting request of a pool to try to admit next", True, False,
         _check_select),
    Hook("choose_victim", "decision", "whom a growth that does not fit preempts", True, False, _check_victim),
    Hook("iteration_cost", "decision", "how long an iteration takes", False, True, _check_cost),
    Hook("on_finish", "notification", "a resident's run ended (its tokens all served)", True, False,
         _check_notice("on_finish")),
    Hook("on_remove", "notification", "a resident left without finishing (its session was preempted)", True,
         False, _check_notice("on_remove")),
    Hook("admit_next", "mechanism", "admit one waiting request (deprecated: override select_waiting)", True,
         False, _check_admit),
)}
#: The methods that are the engine's mechanism, not hooks: a subclass that
#: overrides one runs iteration by iteration (nothing can be declared about them).
MECHANISM = ("start_iteration", "_launch")


def pure(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Declare a hook override pure, so the fast path stays on: it is
    deterministic, draws nothing, keeps no state, reads only its documented
    inputs, and (``order_residents``) orders residents that all decode by
    what a decode run does not change — admission numbers, modes, session
    attributes, not ``remaining`` nor memory; (``plan_tokens``) gives a
    decoding job with more than one token left one token.  Only hooks with
    ``may_be_pure`` take it (docs/policies.md, "The hook contract")."""
    fn.serq_pure = True  # type: ignore[attr-defined]
    return fn


def overridden(cls: type) -> list[str]:
    """The hooks ``cls`` overrides, in table order (none for StepEngine itself)."""
    from .step import StepEngine

    return [h for h in HOOKS if getattr(cls, h) is not getattr(StepEngine, h)]


def run_blockers(cls: type) -> list[str]:
    """The overrides of ``cls`` that make its engine run iteration by
    iteration: hooks neither ``keeps_runs`` nor declared pure, and overridden
    mechanism.  ``coalesce_safe = True`` on the class (the older spelling)
    declares every hook that may be pure pure."""
    from .step import StepEngine

    legacy = bool(getattr(cls, "coalesce_safe", False))
    out = []
    for name in overridden(cls):
        hook = HOOKS[name]
        if hook.keeps_runs:
            continue
        if hook.may_be_pure and (legacy or getattr(getattr(cls, name), "serq_pure", False)):
            continue
        out.append(name)
    return out + [m for m in MECHANISM if getattr(cls, m) is not getattr(StepEngine, m)]


def misdeclared(cls: type) -> list[str]:
    """Hooks ``cls`` declares pure that may not be (their purity buys nothing and says something false)."""
    return [h for h in overridden(cls) if getattr(getattr(cls, h), "serq_pure", False) and not HOOKS[h].may_be_pure]


def guard_hooks(engine: "StepEngine") -> None:
    """Give ``engine`` checked versions of the hooks its class overrides, as
    instance attributes (the class and the default hooks stay untouched:
    the default engine pays nothing).  A checked hook turns an exception
    into a :class:`HookError` naming the class and hook, and checks the
    value: a wrong type, NaN, a negative or too large amount, a job that is
    not a resident, an admission that did not happen would otherwise crash
    far from the cause, corrupt the report or loop for ever."""
    for name in overridden(type(engine)):
        setattr(engine, name, HOOKS[name].guard(engine, getattr(engine, name)))

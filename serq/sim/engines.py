"""Choosing a :class:`~serq.sim.stages.step.StepEngine` subclass by name.

``--engine STAGE=package.module:Class`` (CLI) and ``engines={"STAGE": Class}``
(Python) give one step stage a user's scheduler.  This is the one place that
imports a class from a ``module:Class`` path, and the one place that
checks what a user's class's hooks do (:func:`guard_hooks`).
"""

from __future__ import annotations

import importlib
import math
import numbers
import os
import traceback
from typing import Any, Callable, Iterable, Mapping

from ..errors import SerqError, SerqRuntimeError, UsageError
from .stages.base import Job
from .stages.step import EPS, StepEngine


def load_class(path: str) -> type[StepEngine]:
    """Import ``package.module:Class`` and check it is a StepEngine subclass."""
    module_name, colon, attr = path.partition(":")
    if not colon or not module_name or not attr:
        raise SerqError(f"engine class `{path}`: expected package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - any import failure is the user's to fix
        raise SerqError(f"engine class `{path}`: cannot import `{module_name}`: {err}") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise SerqError(f"engine class `{path}`: module `{module_name}` has no `{attr}`")
    if not (isinstance(cls, type) and issubclass(cls, StepEngine)):
        raise SerqError(f"engine class `{path}`: `{attr}` is not a subclass of serq.sim.stages.StepEngine")
    return cls


def load_engine_classes(specs: Iterable[str]) -> dict[str, type[StepEngine]]:
    """``STAGE=module:Class`` strings → {stage: class}."""
    out: dict[str, type[StepEngine]] = {}
    for spec in specs:
        stage, eq, path = spec.partition("=")
        if not eq or not stage.strip():
            raise UsageError(f"invalid --engine `{spec}`; expected STAGE=package.module:Class")
        out[stage.strip()] = load_class(path.strip())
    return out


# ---------------------------------------------------------------------------
# A user's hooks, checked


HOOKS = ("order_residents", "plan_tokens", "select_waiting", "admit_next", "choose_victim", "iteration_cost")


class HookError(SerqRuntimeError):
    """A :class:`StepEngine` subclass's hook raised, or returned what the
    engine cannot use.  The message names the class, the hook and the stage."""


def overridden_hooks(cls: type) -> list[str]:
    """The hooks ``cls`` overrides (none for StepEngine itself)."""
    return [h for h in HOOKS if getattr(cls, h) is not getattr(StepEngine, h)]


def guard_hooks(engine: StepEngine) -> None:
    """Give ``engine`` checked versions of the hooks its class overrides, as
    instance attributes (the class and the default hooks stay untouched:
    the default engine pays nothing).  A checked hook turns an exception
    into a :class:`HookError` naming the class and hook, and checks the
    value: a wrong type, NaN, a negative or too large amount, a job that is
    not a resident, an admission that did not happen would otherwise crash
    far from the cause, corrupt the report or loop for ever."""
    for name in overridden_hooks(type(engine)):
        setattr(engine, name, _CHECKS[name](engine, getattr(engine, name)))


def _where(engine: StepEngine, hook: str) -> str:
    cls = type(engine)
    return f"engine class `{cls.__module__}.{cls.__qualname__}`, hook `{hook}` (stage `{engine.label}`)"


def _call(engine: StepEngine, hook: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except SerqError:
        raise  # the simulator's own error, met inside a hook that called back into it
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


def _amount(engine: StepEngine, hook: str, value: Any, what: str) -> float:
    """A finite number ≥ 0 (not a bool), as a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        shown = _show(value) if value is None else f"{_show(value)} ({type(value).__name__})"
        raise HookError(f"{_where(engine, hook)} returned {shown}, not {what}")
    x = float(value)
    if not math.isfinite(x) or x < 0.0:
        raise HookError(f"{_where(engine, hook)} returned {_show(value)}, not {what}")
    return x


def _check_order(engine: StepEngine, fn: Callable[[], Any]) -> Callable[[], list[Job]]:
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


def _check_plan(engine: StepEngine, fn: Callable[[Job, float], Any]) -> Callable[[Job, float], float]:
    hook = "plan_tokens"

    def plan_tokens(job: Job, chunk: float) -> float:
        tokens = _amount(engine, hook, _call(engine, hook, fn, job, chunk), "a number of tokens >= 0")
        if tokens > job.work + EPS:
            raise HookError(f"{_where(engine, hook)} returned {tokens:g} tokens for a resident with "
                            f"{job.work:g} left")
        return tokens

    return plan_tokens


def _check_admit(engine: StepEngine, fn: Callable[[float], Any]) -> Callable[[float], bool]:
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


def _check_select(engine: StepEngine, fn: Callable[[list], Any]) -> Callable[[list], Any]:
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


def _check_victim(engine: StepEngine, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    hook = "choose_victim"

    def choose_victim(pool: Any, grower: Any) -> Any:
        from .session import Session

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


def _check_cost(engine: StepEngine, fn: Callable[[Any], Any]) -> Callable[[Any], float]:
    hook = "iteration_cost"

    def iteration_cost(view: Any) -> float:
        cost = _amount(engine, hook, _call(engine, hook, fn, view), "a finite duration >= 0")
        if cost == 0.0 and view.tokens > 0.0:
            raise HookError(f"{_where(engine, hook)} returned 0 for an iteration of {view.tokens:g} tokens; "
                            "an iteration that schedules tokens lasts a positive time")
        return cost

    return iteration_cost


_CHECKS: dict[str, Callable[[StepEngine, Any], Any]] = {
    "order_residents": _check_order,
    "plan_tokens": _check_plan,
    "select_waiting": _check_select,
    "admit_next": _check_admit,
    "choose_victim": _check_victim,
    "iteration_cost": _check_cost,
}

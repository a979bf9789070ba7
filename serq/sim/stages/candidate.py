"""What :meth:`StepEngine.select_waiting` reads: one waiting request.

A :class:`Candidate` is a read-only view of a request waiting at a pool the
engine admits (``admit via``), built for one admission attempt.  It gives
what a scheduler may know about a waiting request (vLLM's ``Request``, SGLang's
``Req``): its session's attributes by name (hidden ones excepted, as for a
header), the prefix its session has cached in the engine's memory pool,
how long it has waited, and the orders it arrived in.  Choosing one is the
hook's decision; admitting it (and whether it fits) is the engine's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ...errors import SerqRuntimeError, suggest

if TYPE_CHECKING:
    from ..pool import HoldRequest
    from .step import StepEngine


class Candidate:
    """One waiting request, as ``select_waiting`` sees it (read-only).

    * ``attr(name)`` — a session attribute by name (``c.attr("prompt")``);
    * ``cached`` — the prefix its session has cached in the engine's
      ``memory`` pool, in units (``cachedin(kv)`` in a header; 0 without a
      memory pool);
    * ``waited`` — seconds since it joined the queue (a preempted request
      re-joins, so its clock restarts), what ``queue by`` keys read;
    * ``age`` — seconds since its turn's request was sent (``server`` began:
      the client's TTFT clock), or ``waited`` when the session has no server;
    * ``serial`` — its session's serial number (sessions in arrival order);
    * ``position`` — its place in the queue, 0 for the head (queue order:
      the order requests joined, preempted ones at the front);
    * ``joined`` — the time it joined the queue.
    """

    __slots__ = ("_req", "_engine", "_at", "_position")

    def __init__(self, req: "HoldRequest", engine: "StepEngine", now: float, position: int) -> None:
        self._req = req
        self._engine = engine
        self._at = now
        self._position = position

    def attr(self, name: str) -> float:
        """The session attribute ``name`` (a built-in such as ``serial`` or
        ``turn_no``, or one the program sets); hidden attributes cannot be read."""
        slot = self._engine.attr_slot(name)
        return self._req.session.a[slot]

    @property
    def cached(self) -> float:
        memory = self._engine.memory
        return memory.cached_of(self._req.session) if memory is not None else 0.0

    @property
    def waited(self) -> float:
        return self._at - self._req.joined

    @property
    def age(self) -> float:
        sent = self._req.session.sent
        return self._at - sent if sent >= 0.0 else self._at - self._req.joined

    @property
    def serial(self) -> int:
        return self._req.session.serial

    @property
    def position(self) -> int:
        return self._position

    @property
    def joined(self) -> float:
        return self._req.joined

    def __repr__(self) -> str:
        return f"<Candidate session {self.serial} at {self._position} in queue `{self._req.pools[0].label}`>"


def attr_slots(engine: "StepEngine") -> dict[str, int]:
    """Session attribute name → slot, without the hidden ones."""
    program = engine.sim.program
    return {name: k for k, name in enumerate(program.attributes) if k not in program.hidden}


def unknown_attr(engine: "StepEngine", name: str) -> SerqRuntimeError:
    program = engine.sim.program
    if name in program.attributes:
        return SerqRuntimeError(f"stage `{engine.label}`: session attribute `{name}` is hidden; "
                                "a scheduler reads what a header may read")
    near = suggest(name, attr_slots(engine))
    helps = [f"did you mean `{near}`?"] if near else []
    return SerqRuntimeError(f"stage `{engine.label}`: the program has no session attribute `{name}`", helps=helps)


def candidates(engine: "StepEngine", queue: Sequence[Any]) -> list[Candidate]:
    """The waiting requests of one queue, in queue order."""
    now = engine.env.now
    return [Candidate(req, engine, now, i) for i, req in enumerate(queue)]

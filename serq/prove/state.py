"""The key of a machine's state: everything that decides its future, up to a
shift of time and of serial numbers (:meth:`serq.prove.machine.Machine.key`).

Two machines with equal keys, given the same attributes for the sessions
still to arrive, have futures that are the same up to that shift: the same
records, with times moved by the difference of their clocks and serials by
the difference of their serial counts.  The key holds:

* the pause, if the machine waits for a session's attributes (and how many
  of a batch are still to come);
* the arrivals still to come: the given times minus ``now``, or the count an
  ``arrivals N`` bound leaves (None: no bound; the next arrival is an event);
* the pending events in the order they will happen, each as its time minus
  ``now`` and what it is (an arrival, the end of stage e's iteration, the end
  of session i's delay);
* the live sessions in arrival order (a session is named by its place in
  that order, not its serial): its program position, the values of the
  attributes the rest of its program can read (a *time* attribute — only ever
  ``set x = now`` and read as ``now - x`` — as its value minus ``now``), its
  holds (pools, state, allocation, position, and ``waited``'s start minus
  ``now`` when a ``queue by`` key reads ``waited``), its stalled growth, and
  its admission rank among the live sessions;
* each pool's units in use, its queue and its holders in order, its stalled
  growers in order;
* each step stage's residents in order (session, work left, mode, the hold it
  grows) and the iteration in flight (the tokens of each scheduled resident).

Not in it: ``now``, the serial numbers, ``served``, ``arrived``, iteration
counts, observations already made.  Where the program reads the clock other
than as ``now - x`` of a time attribute (``branch (now < 100)``), ``now`` is
in the key; where ``init`` reads ``serial``, the next serial is; where a serve
key reads ``admission``, the admission numbers are as they are.  (Each makes
the future depend on it, so a state with it cannot recur.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Hashable

from .exact import sub
from .parts import ARRIVAL, DELAY_END, WAITING

if TYPE_CHECKING:
    from .machine import Machine


def state_key(m: "Machine") -> Hashable:
    code = m._code
    now = m.now
    live = code.live
    time_slots = code.time_slots
    sessions = list(m.sessions.values())  # arrival (serial) order
    idx = {s.serial: i for i, s in enumerate(sessions)}
    if code.admission_read:
        def adm(s: Any) -> int:
            return s.adm  # type: ignore[no-any-return]
    else:
        ranks = {v: i for i, v in enumerate(sorted({s.adm for s in sessions if s.adm >= 0}))}

        def adm(s: Any) -> int:
            return ranks.get(s.adm, -1)


    people = []
    for s in sessions:
        a = s.a
        slots = live[s.pc] if s.pc >= 0 else range(len(a))
        attrs = tuple(sub(a[i], now) if i in time_slots else a[i] for i in slots)
        holds = tuple((r.spec.id, r.state, tuple(r.alloc), tuple(r.pos), tuple(r.held), r.grown,
                       sub(r.joined, now) if code.waited and r.state == WAITING else None) for r in s.holds)
        stall = None if s.stall is None else (s.stall[0], s.holds.index(s.stall[1]), s.stall[2], s.stall[3])
        people.append((s.pc, attrs, holds, stall, adm(s)))

    def who(req: Any) -> tuple[int, int]:
        return idx[req.s.serial], req.s.holds.index(req)

    events = []
    for t, _seq, kind, payload in sorted(m._heap, key=lambda e: (e[0], e[1])):
        if kind == ARRIVAL:
            what: Any = None
        elif kind == DELAY_END:
            what = (payload.stage, idx[payload.s.serial])
        else:
            what = payload
        events.append((sub(t, now), kind, what))
    pools = tuple((p.used, tuple(who(r) for r in p.queue), tuple(who(r) for r in p.holders),
                   tuple(idx[s.serial] for s in p.growers)) for p in m._pools)
    engines = []
    for eng in m._engines:
        if eng is None:
            continue
        res = tuple((idx[j.s.serial], j.work, j.prefill, -1 if j.hold is None else j.s.holds.index(j.hold), j.k)
                    for j in eng.residents)
        engines.append((eng.iterating, res, tuple((idx[j.s.serial], t) for j, t in eng.assign)))
    if m._times is not None:
        arrivals: Any = tuple(sub(t, now) for t in m._times[m._ti:])
    else:
        arrivals = m._left
    extra = (now if code.dated else None,
             m.next_serial if code.init_serial else None)
    return (extra, (m._paused, m._batch, m._attrs), arrivals, tuple(events), tuple(people), pools,
            tuple(engines))


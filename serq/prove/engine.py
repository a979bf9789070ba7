"""The step stages of the exact machine (serq/sim/stages/step.py): residents,
an iteration planned and launched, its end."""

from __future__ import annotations

from typing import Any

from ..errors import SerqRuntimeError
from .exact import Q, add, div, mul, norm, sub
from .parts import GRANTED, ITER_END, Core, Engine, Iteration, Job, Session

_INF = float("inf")


class Engines(Core):
    """Mixed into :class:`~serq.prove.machine.Machine`: its step stages."""

    __slots__ = ()

    def _submit(self, s: Session, stage: int, work: Q, prefill: bool, growing: int, label: str) -> None:
        eng = self._engines[stage]
        assert eng is not None
        job = Job(s, work, prefill, stage, self.now)
        if growing >= 0:
            found = None
            for req in reversed(s.holds):
                if req.state == GRANTED:
                    for k, p in enumerate(req.spec.pools):
                        if p == growing and req.held[k]:
                            found = (req, k)
                            break
                    if found is not None:
                        break
            if found is None:
                name = self._code.pools[growing].name
                raise SerqRuntimeError(f"{label}: `growing {name}` outside a hold of `{name}`")
            job.hold, job.k = found
        # residents stay in the order of their sessions' admissions (vLLM's `running`)
        key = s.adm
        res = eng.residents
        i = len(res)
        while i > 0 and res[i - 1].s.adm > key:
            i -= 1
        res.insert(i, job)
        if eng.planning and i < eng.cursor:
            eng.cursor += 1
        s.job = job

    def _delay_end(self, job: Job) -> None:
        job.done = True
        self._djobs[job.stage].pop(job, None)
        job.s.job = None
        self._ready.append(job.s)  # (the simulator resumes it inside the event: nothing else is ready)

    def _has_work(self, eng: Engine) -> bool:
        if eng.residents:
            return True
        pools = self._pools
        for pidx in self._code.stages[eng.index].admit_pools:
            if pools[pidx].queue:
                return True
        return False

    def _totals(self, eng: Engine) -> None:
        """The stage's totals as the residents stand (moments Budget and Serve) into the context."""
        mem = self._code.stages[eng.index].memory
        decoders = 0
        kv_d: Q = 0
        kv_p: Q = 0
        for j in eng.residents:
            if not j.prefill:
                decoders += 1
            if mem is not None:
                if j.prefill:
                    kv_p = add(kv_p, self._held_in(j.s, mem))
                else:
                    kv_d = add(kv_d, self._held_in(j.s, mem))
        ctx = self._ctx
        ctx["residents"] = len(eng.residents)
        ctx["decoders"] = decoders
        ctx["kv_decode"] = kv_d
        ctx["kv_prefill"] = kv_p

    def _budget_chunk(self, eng: Engine) -> tuple[Any, Q]:
        info = self._code.stages[eng.index]
        if info.budget_totals:
            self._totals(eng)
        env = self._env
        budget = _INF if info.budget is None else info.budget(env)
        assert info.chunk is not None
        return budget, info.chunk(env)

    def _serve_view(self, eng: Engine, job: Job, totals: bool = True) -> None:
        """What a serve key and `serve only` read for ``job`` into the context
        (the stage's totals too when ``totals`` and they read them)."""
        if totals and self._code.stages[eng.index].serve_totals:
            self._totals(eng)
        ctx = self._ctx
        ctx["decoding"] = 0 if job.prefill else 1
        ctx["admission"] = job.s.adm
        ctx["remaining"] = job.work
        self._env.attrs = job.s.a

    def _serves(self, eng: Engine, job: Job) -> bool:
        """``serve only (P)`` for ``job``: True without the clause."""
        only = self._code.stages[eng.index].only
        if only is None:
            return True
        self._serve_view(eng, job)
        v = only(self._env)
        if v == 1:
            return True
        if v == 0:
            return False
        raise SerqRuntimeError(f"stage `{self._code.stages[eng.index].name}`: `serve only` is {v} for a resident, "
                               "not 0 or 1")

    @staticmethod
    def _plan_tokens(job: Job, chunk: Q) -> Q:
        if not job.prefill:
            return 1 if job.work > 1 else job.work
        if chunk > 0 and chunk < job.work:
            return chunk
        return job.work

    def _budget_left(self, eng: Engine) -> Any:
        budget, chunk = self._budget_chunk(eng)
        want: Q = 0
        only = self._code.stages[eng.index].only is not None
        for j in eng.residents:
            if not only or self._serves(eng, j):
                want = add(want, self._plan_tokens(j, chunk))
        v = budget - want
        if v.__class__ is not int and v != _INF:
            v = norm(v)
        return v if v > 0 else 0

    def _order(self, eng: Engine) -> list[Job]:
        info = self._code.stages[eng.index]
        res = eng.residents
        if info.serve == "decode_first":
            return sorted(res, key=lambda j: j.prefill)
        keys = info.keys
        assert keys is not None
        env = self._env
        keyed: list[tuple[tuple, Job]] = []
        for j in res:
            self._serve_view(eng, j, totals=not keyed)  # (the totals once: they stand still meanwhile)
            keyed.append((tuple(k(env) for k in keys), j))
        order = sorted(range(len(res)), key=lambda i: keyed[i][0])
        return [res[i] for i in order]

    def _next(self, eng: Engine, served: set[int]) -> Job | None:
        if self._code.stages[eng.index].default_order:
            res = eng.residents
            if eng.cursor < len(res):
                job = res[eng.cursor]
                eng.cursor += 1
                return job
            return None
        for job in self._order(eng):
            if id(job) not in served:
                served.add(id(job))
                return job
        return None

    def _has_waiting(self, eng: Engine) -> bool:
        pools = self._pools
        return any(pools[p].queue for p in self._code.stages[eng.index].admit_pools)

    def _admit_next(self, eng: Engine, left: Any) -> bool:
        """Admit the selected waiting request of the first non-empty pool the
        stage admits for, read with ``budget_left = left``; run it until it waits."""
        for pidx in self._code.stages[eng.index].admit_pools:
            req = self._select(pidx)
            if req is None:
                continue
            eng.admitting = left
            try:
                amounts = self._fits(req)
            finally:
                eng.admitting = None
            if amounts is None:
                return False
            self._pools[pidx].queue.remove(req)
            self._admit(req, amounts)
            self._run_ready()
            return True
        return False

    def _start_iteration(self, eng: Engine) -> bool:
        """``StepEngine.start_iteration``: plan and start an iteration; False when nothing runs."""
        info = self._code.stages[eng.index]
        budget, chunk = self._budget_chunk(eng)
        eng.left = budget
        assign: list[tuple[Job, Q]] = []
        eng.assign = assign
        eng.cursor = 0
        eng.planning = True
        multi = info.serve == "exclusive_prefills"
        exclusive = multi or info.serve == "exclusive_prefill"
        prefilling = False  # a prefill is in the batch (`exclusive prefills`)
        only = info.only is not None
        prefill_resident = exclusive and any(j.prefill and self._serves(eng, j) for j in eng.residents)
        served: set[int] = set()
        attention: Q = 0
        try:
            while True:
                job = self._next(eng, served)
                if job is None:
                    if eng.left > 0 and self._has_waiting(eng) and self._admit_next(eng, eng.left):
                        continue
                    break
                if only and not self._serves(eng, job):
                    continue  # no token this iteration; still a resident
                s = job.s
                wish = self._plan_tokens(job, chunk)
                if exclusive:
                    if not job.prefill:
                        if prefill_resident:
                            continue
                    elif not prefilling:  # the prefill runs alone: earlier decodes leave the batch
                        for j, t in assign:
                            if j.hold is not None:
                                j.hold.pos[j.k] = sub(j.hold.pos[j.k], t)
                        assign.clear()
                        eng.left = budget
                    elif wish > eng.left:
                        break  # a later prompt that does not fit whole stops the batch
                left = eng.left
                tokens = wish if wish < left else left
                if tokens <= 0:
                    continue
                req = job.hold
                if req is not None:
                    if s.stall is not None:
                        continue  # stalled growing from an earlier iteration: no tokens
                    k = job.k
                    pos = req.pos[k]
                    need = sub(add(pos, tokens), req.alloc[k])
                    if need > 0 and not self._grow(s, req, k, need):
                        continue  # stalled
                    if job.prefill:
                        attention = add(attention, mul(tokens, add(pos, div(tokens, 2))))
                    req.pos[k] = add(pos, tokens)
                    req.grown = True
                elif job.prefill:
                    attention = add(attention, div(mul(tokens, tokens), 2))
                assign.append((job, tokens))
                eng.left = left - tokens if left == _INF else sub(left, tokens)
                if exclusive and job.prefill:
                    if not multi:
                        break
                    prefilling = prefill_resident = True  # later decodes stay out
                if eng.left <= 0:
                    break
        finally:
            eng.planning = False
        if not assign:
            return False
        self._launch(eng, attention)
        return True

    def _launch(self, eng: Engine, attention: Q) -> None:
        info = self._code.stages[eng.index]
        tokens: Q = 0
        prefilled: Q = 0
        kv_d: Q = 0
        kv_p: Q = 0
        decoders = 0
        mem = info.memory
        for job, t in eng.assign:
            tokens = add(tokens, t)
            if job.prefill:
                prefilled = add(prefilled, t)
                if mem is not None:
                    kv_p = add(kv_p, self._held_in(job.s, mem))
            else:
                decoders += 1
                if mem is not None:
                    kv_d = add(kv_d, self._held_in(job.s, mem))
        ctx = self._ctx
        ctx["tokens"] = tokens
        ctx["prefilled"] = prefilled
        ctx["decoders"] = decoders
        ctx["kv_decode"] = kv_d
        ctx["kv_prefill"] = kv_p
        ctx["residents"] = len(eng.residents)
        ctx["attention"] = attention
        raw = info.cost(self._env)
        cost = raw if raw > 0 else 0
        if tokens > 0 and not cost > 0:
            raise SerqRuntimeError(f"stage `{info.name}`: an iteration of {tokens} tokens costs {raw}; an iteration "
                                   "that schedules tokens lasts a positive time", at=info.sites.get("cost"))
        demand: Q = 0
        for j in eng.residents:
            demand = add(demand, j.work if j.prefill else 1)
        record = Iteration(eng.index, self.now, cost, tokens, decoders, prefilled, kv_d,
                           kv_p, attention, len(eng.residents), demand, eng.served, self.arrived)
        self._out.append(record)
        if self.on_iteration is not None:
            self.on_iteration(self, record)
        eng.served = add(eng.served, tokens)
        eng.iterating = True
        self._push(add(self.now, cost), ITER_END, eng.index)

    def _iter_end(self, eng: Engine) -> None:
        """Commit the iteration's tokens; finished jobs' sessions become ready, in batch order."""
        eng.iterating = False
        finished = []
        for job, tokens in eng.assign:
            if job.done:
                continue
            job.work = sub(job.work, tokens)
            if job.work <= 0:
                finished.append(job)
        eng.assign = []
        for job in finished:
            eng.residents.remove(job)
            job.done = True
            job.s.job = None
            self._ready.append(job.s)

"""The pool side of the exact machine (serq/sim/holds.py and pool.py): holds
joining, admitted, released; queues selected; growths and their stalls."""

from __future__ import annotations


from .. import ir
from .code import HoldSpec
from .exact import Q, Unsupported, add, ceil, div, mul, sub
from ..errors import SerqRuntimeError
from .parts import GRANTED, RELEASED, Core, Req, Session



def bad_amount(label: str, value: Q) -> SerqRuntimeError:
    return SerqRuntimeError(f"{label}: the amount is {value}, not a number of units, tokens or seconds", at=label)


class Holds(Core):
    """Mixed into :class:`~serq.prove.machine.Machine`: its pools."""

    __slots__ = ()

    def _round_up(self, pidx: int, x: Q) -> Q:
        b = self._code.pools[pidx].block
        if b is None:
            return x
        return mul(ceil(div(x, b)), b)

    def _amounts(self, req: Req) -> list[tuple[Q, Q]]:
        """(units, units that must fit) per pool, read now (moment Admit)."""
        spec = req.spec
        env = self._env
        out = []
        for k in range(len(spec.pools)):
            env.attrs = req.s.a
            u = spec.units[k](env)
            if u < 0:
                raise bad_amount(spec.labels[k], u)
            r_fn = spec.reserve[k]
            need = u
            if r_fn is not None:
                env.attrs = req.s.a
                r = r_fn(env)
                if r < 0:
                    raise bad_amount(spec.labels[k], r)
                if r > u:
                    need = r
            out.append((u, need))
        return out

    def _enqueue(self, s: Session, spec: HoldSpec) -> bool:
        """A hold joins its first pool's queue; False: some pool can never fit it."""
        req = Req(s, spec, self.now)
        infos = self._code.pools
        for pidx, (_u, need) in zip(spec.pools, self._amounts(req)):
            if not self._round_up(pidx, need) <= infos[pidx].cap:
                return False
        s.holds.append(req)
        self._pools[spec.pools[0]].queue.append(req)
        return True

    def _fits(self, req: Req) -> list[tuple[Q, Q]] | None:
        amounts = self._amounts(req)
        infos = self._code.pools
        for pidx, (_u, need) in zip(req.spec.pools, amounts):
            if not add(self._pools[pidx].used, self._round_up(pidx, need)) <= infos[pidx].cap:
                return None
        return amounts

    def _admit(self, req: Req, amounts: list[tuple[Q, Q]]) -> None:
        """Grant every pool of a hold at once and make its session ready."""
        for k, pidx in enumerate(req.spec.pools):
            pool = self._pools[pidx]
            need = self._round_up(pidx, amounts[k][0])
            pool.used = add(pool.used, need)
            pool.holders.append(req)
            req.alloc[k] = need
            req.pos[k] = 0
            req.held[k] = True
        s = req.s
        s.adm = self._adm
        self._adm += 1
        s.a[ir.CACHED] = 0
        req.state = GRANTED
        self._ready.append(s)

    def _release(self, req: Req) -> None:
        for k, pidx in enumerate(req.spec.pools):
            if req.held[k]:
                pool = self._pools[pidx]
                pool.used = sub(pool.used, req.alloc[k])
                pool.holders.remove(req)
                req.held[k] = False
        req.state = RELEASED

    def _select(self, pidx: int) -> Req | None:
        """The head, or under ``queue by`` the smallest keys (ties in queue order)."""
        q = self._pools[pidx].queue
        if not q:
            return None
        keys = self._code.pools[pidx].keys
        if keys is None:
            return q[0]
        env = self._env
        ctx = self._ctx
        best, best_key = None, None
        for req in q:
            env.attrs = req.s.a
            ctx["waited"] = sub(self.now, req.joined)
            key = tuple(k(env) for k in keys)
            if best_key is None or key < best_key:
                best, best_key = req, key
        return best

    def _trigger_put(self, pidx: int) -> None:
        """Admit from the queue while the selected hold fits (head-of-line blocking)."""
        queue = self._pools[pidx].queue
        while True:
            req = self._select(pidx)
            if req is None:
                return
            amounts = self._fits(req)
            if amounts is None:
                return
            queue.remove(req)
            self._admit(req, amounts)

    def _try_admit_all(self) -> None:
        pools = self._pools
        if not self._stalled:
            for pidx in self._code.passed:
                if pools[pidx].queue:
                    self._trigger_put(pidx)
            return
        infos = self._code.pools
        for pidx, pool in enumerate(pools):
            if pool.growers:
                self._retry_growers(pidx)
            if pool.queue and infos[pidx].admit_via is None:
                self._trigger_put(pidx)

    def _retry_growers(self, pidx: int) -> None:
        """Stalled growths in stall order; the first that still does not fit stops."""
        pool = self._pools[pidx]
        cap = self._code.pools[pidx].cap
        while pool.growers:
            s = pool.growers[0]
            stall = s.stall
            if stall is None:
                pool.growers.pop(0)
                self._stalled -= 1
                continue
            _p, req, k, units = stall
            alloc = req.alloc[k]
            need = sub(self._round_up(pidx, add(alloc, units)), alloc)
            if not add(pool.used, need) <= cap:
                break
            pool.growers.pop(0)
            self._stalled -= 1
            pool.used = add(pool.used, need)
            req.alloc[k] = add(alloc, need)
            s.stall = None

    def _grow(self, s: Session, req: Req, k: int, units: Q) -> bool:
        """Grow a hold on one pool by ``units`` (rounded up to blocks); False: stalled."""
        pidx = req.spec.pools[k]
        info = self._code.pools[pidx]
        pool = self._pools[pidx]
        alloc = req.alloc[k]
        need = sub(self._round_up(pidx, add(alloc, units)), alloc)
        if need <= 0:
            return True
        if add(pool.used, need) <= info.cap:
            pool.used = add(pool.used, need)
            req.alloc[k] = add(alloc, need)
            return True
        if info.lifo and self._has_victim(pidx):
            raise Unsupported("a preemption (`preempt lifo`)", info.name)
        s.stall = (pidx, req, k, units)
        pool.growers.append(s)
        self._stalled += 1
        return False

    def _has_victim(self, pidx: int) -> bool:
        """Whether ``Holds.lifo_victim`` would find a session to preempt."""
        engines = self._code.pools[pidx].engines
        for req in self._pools[pidx].holders:
            if req.state != GRANTED:
                continue
            if not engines:
                return True
            job = req.s.job
            if job is not None and job.stage in engines and self._engines[job.stage] is not None:
                return True
        return False

    def _held_in(self, s: Session, pidx: int) -> Q:
        total: Q = 0
        for req in s.holds:
            if req.state == GRANTED:
                for k, p in enumerate(req.spec.pools):
                    if p == pidx and req.held[k]:
                        total = add(total, req.alloc[k])
        return total

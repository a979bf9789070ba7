"""The exact reference semantics against the simulator: the same program and
workload run on both, every iteration record (the step log's columns) and
every observation compared — exactly where every number is a dyadic rational
(a float then holds it exactly: costs like `3 + 2 * tokens`), after rounding
otherwise.

Each shape is a small program whose sessions get random attributes (fixed by
a seeded `random.Random`) through `init` expressions that pick a value by
`serial`, so the simulator and the machine read the same numbers.  Arrivals
come from the program (`batch(N)` with a per-session delay, `renewal(gap)`)
or, for the machine's given-times interface, from a trace replay.
"""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import pytest

import serq
from serq import ir
from serq.prove.machine import Ended, Iteration, Machine, NeedSession, Observed
from serq.sim.simulator import Simulator

SEEDS = 20  # random workloads per shape; 12 shapes
MAX_EVENTS = 200_000


def pick(values: list) -> str:
    """An expression giving session `serial` its own value."""
    expr = str(values[-1])
    for i in range(len(values) - 2, -1, -1):
        expr = f"(serial == {i} ? {values[i]} : {expr})"
    return expr


def simulate(p: ir.Program, horizon: float):
    sim = Simulator(p, seed=1, horizon=horizon, warmup=0.0, steps=True, arrivals=p.run.arrivals,
                    max_events=MAX_EVENTS)
    sim.run()
    logs = {}
    for e in sim.engines:
        flat = list(e.step_log)
        logs[p.stage_index(e.label)] = [tuple(flat[i:i + 9]) for i in range(0, len(flat), 9)]
    obs = {p.observes[i].name: sorted((s, t, v) for t, s, _turn, v in samples)
           for i, samples in enumerate(sim.samples)}
    return logs, obs


def explore(p: ir.Program, horizon: float, arrivals=None):
    """The machine's one path up to the horizon: iteration rows per stage, observations, ends."""
    m = Machine(p, arrivals)
    logs: dict[int, list] = {}
    obs: dict[str, list] = {d.name: [] for d in p.observes}
    ends = []
    steps = 0
    while not m.done:
        t = m.next_time()
        if t is None or t > horizon:
            break
        steps += 1
        assert steps < MAX_EVENTS
        for r in m.step():
            if isinstance(r, NeedSession):
                m.supply_init()
            elif isinstance(r, Iteration):
                logs.setdefault(r.stage, []).append(
                    (r.now, r.cost, r.tokens, r.decoders, r.prefilled, r.kv_decode, r.kv_prefill, r.attention,
                     r.residents))
            elif isinstance(r, Observed):
                obs[p.observes[r.obs].name].append((r.serial, r.time, r.value))
            elif isinstance(r, Ended):
                ends.append((r.serial, r.time))
    return logs, {k: sorted(v) for k, v in obs.items()}, sorted(ends)


def dyadic(x) -> bool:
    d = x.denominator
    return d & (d - 1) == 0


def agree(p: ir.Program, horizon: float, *, arrivals=None, sim_program: ir.Program | None = None,
          exact: bool = True) -> int:
    """Run both; assert every iteration and observation agrees; the number of iterations compared."""
    a_logs, a_obs = simulate(sim_program or p, horizon)
    b_logs, b_obs, ends = explore(p, horizon, arrivals)
    n = 0
    for stage in sorted(set(a_logs) | set(b_logs)):
        rows, mine = a_logs.get(stage, []), b_logs.get(stage, [])
        assert len(rows) == len(mine), f"stage {stage}: {len(rows)} iterations simulated, {len(mine)} exact"
        for i, (x, y) in enumerate(zip(rows, mine)):
            if exact:
                assert all(dyadic(v) for v in y), f"a non-dyadic number in an exact shape: {y}"
                assert x == tuple(float(v) for v in y), f"stage {stage} iteration {i}: {x} != {y}"
            else:
                assert all(math.isclose(u, float(v), rel_tol=1e-9, abs_tol=1e-12) for u, v in zip(x, y)), \
                    f"stage {stage} iteration {i}: {x} != {y}"
        n += len(rows)
    for name, samples in a_obs.items():
        mine = b_obs[name]
        assert len(samples) == len(mine), f"observe {name}: {samples} != {mine}"
        for (s1, t1, v1), (s2, t2, v2) in zip(samples, mine):
            assert s1 == s2
            assert math.isclose(t1, float(t2), rel_tol=1e-12, abs_tol=1e-12) and \
                math.isclose(v1, float(v2), rel_tol=1e-9, abs_tol=1e-9), f"observe {name}: {(s1, t1, v1)} != {(s2, t2, v2)}"
    if "done" in b_obs:  # a session's end is its last observation's time
        assert [(s, t) for s, t, _v in b_obs["done"]] == [e for e in ends if e[0] in {s for s, _t, _v in b_obs["done"]}]
    return n


# ---------------------------------------------------------------------------
# shapes: each gives (program text, horizon) for a random workload

EXACT_COSTS = ["3 + 2 * tokens", "1128 + 3547 * ceil(tokens / 128)", "1 + tokens + decoders",
               "2 + max(tokens, 4 * residents)", "1", "5 + prefilled / 4 + decoders / 2"]


def requests(rng: random.Random, n: int, *, prompt=(1, 12), out=(1, 6), spread=12) -> str:
    prompts = [rng.randint(*prompt) for _ in range(n)]
    outs = [rng.randint(*out) for _ in range(n)]
    at = [rng.choice([0, 0, rng.randint(0, spread), rng.randint(0, 2 * spread) / 2]) for _ in range(n)]
    return f"set p = {pick(prompts)}; set o = {pick(outs)}; set at = {pick(at)};"


def _served(serve: str, rng: random.Random, n: int, arrive: str = "") -> tuple[str, float]:
    b = rng.choice([4, 6, 8, 16, 64])
    c = rng.choice([0, 2, 3, 4, 5])
    cost = rng.choice(EXACT_COSTS)
    return f"""
pool reqs {{ cap {rng.randint(1, 4)}; admit via engine; }}
stage engine : step {{ budget {b}; chunk {c}; cost {cost}; {serve} }}
stage gate : delay;
workload {{ {arrive or f"arrive batch({n});"} init {{ {requests(rng, n)} }} }}
session {{
  {"" if arrive else "run gate (at);"} set t0 = now;
  hold reqs (1) {{ run engine prefill (p); run engine decode (o); }}
  observe response = now - t0; observe done = now; end;
}}
""", 1e7


def shape_chunked(rng):
    return _served("", rng, rng.randint(1, 8))


def shape_decode_first(rng):
    return _served("serve decode first;", rng, rng.randint(1, 6))


def shape_exclusive(rng):
    return _served("serve exclusive prefill;", rng, rng.randint(1, 6))


def shape_exclusive_prefills(rng):
    return _served("serve exclusive prefills;", rng, rng.randint(1, 6))


def shape_serve_by(rng):
    keys = rng.choice(["remaining", "-remaining, admission", "decoding, o", "p - remaining"])
    return _served(f"serve by ({keys});", rng, rng.randint(1, 6))


def shape_kv_growing(rng):
    """Slots and KV blocks: the prefill and each decode grow the hold (a full pool stalls the growth)."""
    n = rng.randint(1, 7)
    bs = rng.choice([1, 2, 4])
    cap = rng.choice([12, 16, 24, 32])
    return f"""
pool reqs {{ cap {rng.randint(1, 4)}; admit via engine; }}
pool kv {{ cap {cap}; block {bs}; }}
stage engine : step {{ budget {rng.choice([4, 8, 12])}; chunk {rng.choice([0, 3, 4])};
  cost 5 + tokens + floor(kv_decode / 4) + kv_prefill / 8; memory kv; }}
stage gate : delay;
workload {{ arrive batch({n}); init {{ {requests(rng, n, prompt=(1, 10), out=(1, 5))} }} }}
session {{
  run gate (at); set t0 = now;
  hold reqs (1), kv (min(p, budget_left(engine))) reserve (p) {{
    run engine prefill (p) growing kv;
    run engine decode (o) growing kv;
  }}
  observe response = now - t0; observe done = now; end;
}}
""", 1e7


def shape_svf(rng):
    """Kong et al.'s shortest-volume-first: a KV pool queued by each request's volume, one decode job each."""
    n = rng.randint(1, 8)
    sizes = [rng.randint(1, 8) for _ in range(n)]
    outs = [rng.randint(1, 5) for _ in range(n)]
    at = [rng.choice([0, rng.randint(0, 6)]) for _ in range(n)]
    cap = max(s + o for s, o in zip(sizes, outs)) + rng.randint(-3, 8)  # (a volume above the cap is rejected)
    return f"""
pool kv {{ cap {cap}; queue by (s * o + floor((o * o + o) / 2)); }}
stage engine : step {{ cost 1; }}
stage gate : delay;
workload {{ arrive batch({n}); init {{ set s = {pick(sizes)}; set o = {pick(outs)}; set at = {pick(at)}; }} }}
session {{
  run gate (at); set t0 = now;
  hold kv (s + o) {{ run engine decode (o); }}
  observe response = now - t0; observe done = now; end;
}}
""", 1e6


def shape_renewal(rng):
    """Renewal arrivals on whole times with whole costs and tool delays: arrivals meet iteration
    ends and delays' ends at the same instants."""
    n = rng.randint(2, 10)
    gap = rng.choice([1, 2, 3, 4, 5, 6])
    prompts = [rng.randint(1, 10) for _ in range(n)]
    outs = [rng.randint(1, 5) for _ in range(n)]
    tools = [rng.choice([0, 0, 1, 2, 3]) for _ in range(n)]
    return f"""
pool reqs {{ cap {rng.randint(1, 3)}; admit via engine; }}
stage engine : step {{ budget {rng.choice([3, 4, 8])}; chunk {rng.choice([0, 2, 3])};
  cost {rng.choice(["1", "2", "1 + decoders", "tokens", "1 + floor(tokens / 3)"])}; }}
stage tool : delay;
workload {{ arrive renewal({gap}); init {{ set p = {pick(prompts)}; set o = {pick(outs)}; set d = {pick(tools)}; }} }}
session {{
  set t0 = now;
  run tool (d);
  hold reqs (1) {{ run engine prefill (p); run tool (d); run engine decode (o); }}
  observe response = now - t0; observe done = now; end;
}}
run {{ arrivals {n}; }}
""", 1e6


def shape_delay_turns(rng):
    """Two turns with a think time on a delay stage between them, and a second pool in passing."""
    n = rng.randint(1, 5)
    thinks = [rng.choice([0, 1, 2, 3, 5, 0.5]) for _ in range(n)]
    return f"""
pool reqs {{ cap {rng.randint(1, 3)}; admit via engine; }}
pool gpu {{ cap {rng.randint(1, 3)}; }}
stage engine : step {{ budget {rng.choice([4, 8])}; chunk {rng.choice([0, 3])}; cost 2 + tokens; }}
stage gate : delay;
stage think : delay;
workload {{ arrive batch({n}); init {{ {requests(rng, n)} set z = {pick(thinks)}; }} }}
session {{
  run gate (at); set t0 = now;
  hold gpu (1) {{
    hold reqs (1) {{ run engine prefill (p); run engine decode (o); }}
  }}
  turn;
  run think (z);
  hold reqs (1) {{ run engine prefill (p + o); run engine decode (o); }}
  observe load = queued(reqs) + holders(gpu) + queue(engine) + busy(engine) + used(gpu) + work(think) + work(engine);
  observe response = now - t0; observe turns = turn_no; observe done = now; end;
}}
""", 1e7


def shape_queue_waited(rng):
    """A pool queued by a key that reads `waited` (the time a hold has waited), admitted by passes."""
    n = rng.randint(2, 6)
    return f"""
pool slots {{ cap {rng.randint(1, 2)}; queue by (p - waited, o); }}
stage engine : step {{ budget 8; cost 2 + tokens; }}
stage gate : delay;
workload {{ arrive batch({n}); init {{ {requests(rng, n)} }} }}
session {{
  run gate (at); set t0 = now;
  hold slots (1) {{ run engine prefill (p); run engine decode (o); }}
  observe response = now - t0; observe done = now; end;
}}
""", 1e7


def shape_branchy(rng):
    """Branches and a loop: a session decodes in rounds until its output is done, some skip the prefill."""
    n = rng.randint(1, 5)
    return f"""
pool reqs {{ cap {rng.randint(1, 3)}; admit via engine; }}
stage engine : step {{ budget {rng.choice([4, 8])}; chunk 3; cost 1 + tokens; }}
stage gate : delay;
workload {{ arrive batch({n}); init {{ {requests(rng, n)} set left = o; }} }}
session {{
  run gate (at); set t0 = now;
  hold reqs (1) {{
    branch (p > 3) {{ run engine prefill (p); }} else {{ run engine prefill (0); }}
    loop {{
      run engine decode (min(2, left));
      set left = left - min(2, left);
      branch (left == 0) {{ observe response = now - t0; observe done = now; end; }}
    }}
  }}
}}
""", 1e7


def shape_approx(rng):
    """A vLLM-like cost in seconds (2e-5 is not a dyadic number): equal after rounding."""
    text, _ = _served("", rng, rng.randint(1, 6))
    return text.replace("cost ", "cost 0.0002 + 2e-5 * tokens + 0 * ", 1), 1e7


def shape_serve_only(rng):
    """`serve only (P)`: the residents P passes over take no token this iteration."""
    pred = rng.choice(["decoding || decoders == 0", "remaining > 1 || residents < 3", "o > 2 || decoding",
                       "admission < 2 || decoders < 2"])
    order = rng.choice(["", "serve decode first;", "serve exclusive prefill;", "serve exclusive prefills;"])
    return _served(f"serve only ({pred}); {order}", rng, rng.randint(1, 8))


SHAPES = {
    "chunked": shape_chunked, "decode_first": shape_decode_first, "exclusive": shape_exclusive,
    "exclusive_prefills": shape_exclusive_prefills,
    "serve_by": shape_serve_by, "kv_growing": shape_kv_growing, "svf": shape_svf, "renewal": shape_renewal,
    "delay_turns": shape_delay_turns, "queue_waited": shape_queue_waited, "branchy": shape_branchy,
    "approx": shape_approx,
}
if "only" in {f.name for f in dataclasses.fields(ir.StepDecl)}:  # (`serve only` is another helper's)
    SHAPES["serve_only"] = shape_serve_only


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_iteration_and_observation_agrees_with_the_simulator(shape: str) -> None:
    total = 0
    for seed in range(SEEDS):
        rng = random.Random(f"{shape}-{seed}")
        text, horizon = SHAPES[shape](rng)
        p = serq.load(text)
        try:
            total += agree(p, horizon, exact=shape != "approx")
        except AssertionError as err:
            raise AssertionError(f"shape {shape}, seed {seed}:\n{text}\n{err}") from None
    assert total > SEEDS  # (every shape ran iterations)


def test_given_arrival_times_agree_with_a_trace_replay_at_those_times(tmp_path: Path) -> None:
    """`Machine(p, arrivals=times)` schedules each arrival when the previous one
    arrives, as `arrive trace` does: the two agree iteration by iteration."""
    total = 0
    for seed in range(SEEDS):
        rng = random.Random(f"times-{seed}")
        n = rng.randint(1, 6)
        times = sorted(rng.choice([0, 1, 2, 3, 4.5, 6, 7.25, 9]) for _ in range(n))
        csv = tmp_path / f"t{seed}.csv"
        csv.write_text("session,turn,new,out,think,arrival\n" +
                       "".join(f"{i},1,1,1,0,{t}\n" for i, t in enumerate(times)))
        text = _served("", rng, n, arrive=f'trace "{csv}" ordered; arrive trace;')[0]
        p = serq.load(text)
        bare = dataclasses.replace(p, trace=None, arrival=ir.Arrival())
        try:
            total += agree(bare, 1e7, arrivals=times, sim_program=p)
        except AssertionError as err:
            raise AssertionError(f"seed {seed}, times {times}:\n{text}\n{err}") from None
    assert total > SEEDS


def test_renewal_times_given_are_the_renewal_program_s_own() -> None:
    """Times k·gap given to the machine are the program's `renewal(gap)`: the same iterations."""
    text = shape_renewal(random.Random("given"))[0]
    p = serq.load(text)
    gap = p.arrival.gap.value  # type: ignore[union-attr]
    own = explore(p, 1e6)
    given = explore(dataclasses.replace(p, arrival=ir.Arrival()), 1e6,
                    arrivals=[gap * (k + 1) for k in range(p.run.arrivals)])  # type: ignore[arg-type]
    assert own == given and own[0]

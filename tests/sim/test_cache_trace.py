"""The multi-turn prefix-cache scenario of semantics §11.3 (`cache_trace`):
the replay program's server on a unit step clock, three sessions of three
turns from a trace, a 20-block KV pool.  Expected (sent, ttft, latency,
cached) per turn, exactly."""

from __future__ import annotations

from pathlib import Path

import serq

TRACE = """session,turn,new,out,think,forced
0,1,100,3,2,0
0,2,150,3,2,0
0,3,210,3,0,0
1,1,120,3,2,0
1,2,180,3,2,0
1,3,230,3,0,0
2,1,90,3,2,0
2,2,140,3,2,0
2,3,200,3,0,0
"""

PROGRAM = """
// vllm_replay.sq's server on the step clock: 3 sessions, 3 turns each
let bs = 16;
pool kv { cap 320; block bs; evict lru; preempt lifo; }
pool reqs { cap 4; admit via engine; }
stage engine : step { budget 64; cost 1; memory kv; }
stage front : delay;
stage gate : delay;
stage tool : delay;
workload {
  arrive batch(3);
  trace "cache_trace.csv" ordered;
  hidden out;
  session {
    run gate (serial * 3);
    set prev = 0;
    set prevout = 0;
    turn;
    loop {
      request;
      set prev = prompt;
      set prevout = out;
      branch (more) { tool think; turn; } else { end; }
    }
  }
}
server {
  set t0 = now;
  set prompt = new;
  run front (0);
  set hitmax = forced ? 0 : floor(min(prev, prompt - 1) / bs) * bs;
  hold reqs (1), kv (hit + min(known - hit, budget_left(engine))) reserve (known)
       reuse (max(hitmax, floor(computed / bs) * bs))
       at admission (known = computed < prompt ? prompt : computed + 1,
                     hit = min(cachedin(kv), max(hitmax, floor(computed / bs) * bs))) {
    set c = cached;
    observe cached_tokens = c;
    observe sent = t0;
    prefill (known - c) growing kv;
    branch (known == prompt) { observe ttft = now - t0; }
    decode (out - 1 - (known - prompt)) growing kv;
  } cache (prompt + out - 1);
  observe latency = now - t0;
}
run { horizon 43; }
"""

EXPECTED = {  # session: [(sent, ttft, latency, cached) per turn]
    0: [(0, 2, 4, 0), (6, 3, 5, 96), (13, 11, 13, 0)],
    1: [(3, 2, 4, 0), (9, 4, 6, 64), (17, 13, 15, 0)],  # turn 2: a partial hit
    2: [(6, 2, 4, 0), (12, 6, 8, 0), (22, 14, 16, 0)],
}


def test_the_cache_trace_scenario_is_reproduced_turn_by_turn(tmp_path: Path) -> None:
    (tmp_path / "cache_trace.csv").write_text(TRACE)
    path = tmp_path / "cache_trace.sq"
    path.write_text(PROGRAM)
    report = serq.run(serq.load(path))
    rows = {}
    for name in ("sent", "ttft", "latency", "cached_tokens"):
        for s in report.samples[name]:
            rows.setdefault((s.session, s.turn), {})[name] = s.value
    got = {
        session: [
            tuple(rows[(session, turn)][k] for k in ("sent", "ttft", "latency", "cached_tokens"))
            for turn in (1, 2, 3)
        ]
        for session in (0, 1, 2)
    }
    assert got == EXPECTED

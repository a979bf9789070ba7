"""The bundled programs: each checks clean (in-process and through `serq check`),
the four vLLM programs share their engine line for line and keep the seeds'
workload blocks verbatim (language §10), and each says what it models."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from serq import ir
from serq.frontend import load_program

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "programs").glob("*/*.sq"))
VLLM = ["programs/multi-turn/vllm.sq", "programs/multi-turn/vllm_chat.sq",
        "programs/single-turn/vllm_single_turn.sq", "programs/subagent/vllm_subagents.sq"]
# the seed's subagents with spawn/join (issue 11): on the shared engine, but no seed block verbatim
SPAWN = "programs/subagent/vllm_spawn.sq"
# the Azure conversation trace replayed at its own arrival times (issue 12): on the shared engine too
AZURE = "programs/replay/azure_conv.sq"
# on the shared prefix cache (issue 14): the same engine; the server passes a prefix chain
SHARED = ["programs/single-turn/vllm_system_prompt.sq", "programs/subagent/vllm_spawn_shared.sq"]

SUMMARIES = {
    # issue 22: the agent and the system prompts on N replicas behind a router (docs/cluster.md)
    "programs/cluster/agents.sq": "OK: 2 pool(s), 2 stage(s), 19 attribute(s), 17 block(s)",
    # issue 41: the chat on four replicas of Llama-2-7B on an A100 (lib/a100.sq, fitted to Vidur's batches)
    "programs/cluster/chat.sq": "OK: 2 pool(s), 2 stage(s), 19 attribute(s), 17 block(s)",
    "programs/cluster/system_prompt.sq": "OK: 2 pool(s), 1 stage(s), 24 attribute(s), 16 block(s)",
    # issue 41: Vidur 0.0.26's four replicas, `serve exclusive prefills` (docs/cluster.md)
    "programs/cluster/vidur.sq": "OK: 2 pool(s), 1 stage(s), 14 attribute(s), 4 block(s)",
    "programs/pd/llmd.sq": "OK: 4 pool(s), 6 stage(s), 25 attribute(s), 16 block(s)",
    "programs/pd/colocated.sq": "OK: 2 pool(s), 2 stage(s), 18 attribute(s), 8 block(s)",
    "programs/pd/llmd_flat.sq": "OK: 4 pool(s), 6 stage(s), 25 attribute(s), 16 block(s)",
    "programs/multi-turn/closed.sq": "OK: 0 pool(s), 2 stage(s), 11 attribute(s), 2 block(s)",
    "programs/multi-turn/vllm.sq": "OK: 2 pool(s), 2 stage(s), 16 attribute(s), 7 block(s)",
    "programs/multi-turn/vllm_chat.sq": "OK: 2 pool(s), 2 stage(s), 16 attribute(s), 7 block(s)",
    "programs/single-turn/mg1.sq": "OK: 0 pool(s), 1 stage(s), 11 attribute(s), 2 block(s)",
    "programs/single-turn/ps.sq": "OK: 0 pool(s), 1 stage(s), 11 attribute(s), 2 block(s)",
    "programs/single-turn/vllm_single_turn.sq": "OK: 2 pool(s), 1 stage(s), 16 attribute(s), 4 block(s)",
    "programs/single-turn/vllm_system_prompt.sq": "OK: 2 pool(s), 1 stage(s), 21 attribute(s), 4 block(s)",
    "programs/subagent/vllm_subagents.sq": "OK: 2 pool(s), 3 stage(s), 19 attribute(s), 10 block(s)",
    "programs/subagent/vllm_spawn.sq": "OK: 2 pool(s), 2 stage(s), 23 attribute(s), 10 block(s)",
    "programs/subagent/vllm_spawn_shared.sq": "OK: 2 pool(s), 2 stage(s), 27 attribute(s), 10 block(s)",
    "programs/replay/vllm_replay.sq": "OK: 2 pool(s), 4 stage(s), 16 attribute(s), 6 block(s)",
    "programs/replay/azure_conv.sq": "OK: 2 pool(s), 1 stage(s), 16 attribute(s), 4 block(s)",
    # issue 24: the chat over a host-memory tier (docs/offload.md)
    "programs/offload/vllm_offload.sq": "OK: 3 pool(s), 4 stage(s), 17 attribute(s), 8 block(s)",
    # issue 40: four papers' systems with their propositions as claims (docs/claims.md)
    "programs/papers/bari_rad.sq": "OK: 0 pool(s), 1 stage(s), 12 attribute(s), 2 block(s)",
    "programs/papers/dai_fastertransformer.sq": "OK: 0 pool(s), 1 stage(s), 10 attribute(s), 2 block(s)",
    "programs/papers/dai_sarathi.sq": "OK: 0 pool(s), 1 stage(s), 10 attribute(s), 2 block(s)",
    "programs/papers/kong_svf.sq": "OK: 1 pool(s), 1 stage(s), 11 attribute(s), 3 block(s)",
}


def text(path: str) -> str:
    return (ROOT / path).read_text()


def load(path: str, **kw) -> ir.Program:
    return load_program(path=str(ROOT / path), **kw)


def test_every_bundled_program_is_listed():
    assert PROGRAMS == sorted(SUMMARIES)


@pytest.mark.parametrize("path", PROGRAMS)
def test_a_bundled_program_checks_clean(path):
    assert load(path).summary() == SUMMARIES[path]


@pytest.mark.parametrize("path", PROGRAMS)
def test_serq_check_prints_the_ok_line_and_exits_0(path):
    done = subprocess.run([sys.executable, "-m", "serq", "check", path], cwd=ROOT, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, SUMMARIES[path] + "\n", "")


def test_serq_check_of_a_broken_program_exits_1_with_the_diagnostic(tmp_path):
    bad = tmp_path / "bad.sq"
    bad.write_text("pool kv { cap 10; }\nsession { hold kz (1) { } }\n")
    done = subprocess.run([sys.executable, "-m", "serq", "check", str(bad)], capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"{bad}:2:16: session: unknown pool `kz`\n")
    assert "help: did you mean pool `kv`?" in done.stderr and "Traceback" not in done.stderr


def test_serq_check_with_an_unknown_or_a_malformed_set_constant_exits_2():
    path = "programs/subagent/vllm_subagents.sq"
    done = subprocess.run([sys.executable, "-m", "serq", "check", path, "--set", "qq=0"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "unknown --set constant `qq`" in done.stderr
    done = subprocess.run([sys.executable, "-m", "serq", "check", path, "--set", "q"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and "expected NAME=EXPR" in done.stderr


# ---------------------------------------------------------------- the shared engine (§10.2)
def engine_parts(source: str) -> tuple[str, str, str]:
    """The constants `B` to `c0`, `pool kv` to the end of `stage engine`, and the server block."""
    lines = source.splitlines()
    first = next(i for i, l in enumerate(lines) if l.startswith("let B "))
    last = next(i for i, l in enumerate(lines) if l.startswith("let c0 "))
    consts = "\n".join(lines[first:last + 1])
    start = next(i for i, l in enumerate(lines) if l.startswith("pool kv "))
    stage = next(i for i, l in enumerate(lines) if l.startswith("stage engine "))
    end = next(i for i in range(stage, len(lines)) if lines[i].startswith("}"))
    decls = "\n".join(lines[start:end + 1])
    s = next(i for i, l in enumerate(lines) if l.startswith("server {"))
    e = next(i for i in range(s, len(lines)) if lines[i].startswith("}"))
    return consts, decls, "\n".join(lines[s:e + 1])


def test_the_vllm_programs_share_the_engine_line_for_line():
    parts = [engine_parts(text(p)) for p in VLLM + [SPAWN, AZURE]]
    assert all(p == parts[0] for p in parts[1:])
    consts, decls, server = parts[0]
    names = re.findall(r"^let (\w+) =", consts, re.M)
    assert names == ["B", "max_seqs", "blocks", "bs", "chunk_cap", "a", "omega", "beta", "c0"]
    assert "pool reqs { cap max_seqs; admit via engine; }" in decls
    assert "chunk long_prefill(reqs, chunk_cap);" in decls
    assert "observe" not in server


def test_the_shared_prefix_programs_share_the_engine_and_pass_a_chain_in_the_server():
    """The constants and declarations are the other vLLM programs' line for line; the
    server is theirs with `vllm_request` → `vllm_request_prefix` and the chain
    `seg1: len1, seg2: len2` (attributes the workload sets)."""
    consts, decls, server = engine_parts(text(SPAWN))
    want = server.replace("vllm_request(reqs, kv, engine, prompt, o);",
                          "vllm_request_prefix(reqs, kv, engine, prompt, o, seg1, len1, seg2, len2);")
    assert want != server
    for path in SHARED:
        assert engine_parts(text(path)) == (consts, decls, want), path
        holds = [s for s in ir.walk_blocks(load(path).session) if isinstance(s, ir.Hold)]
        assert len(holds) == 1 and len(holds[0].prefix) == 2


def test_the_engine_constants_and_declarations_have_the_seed_values():
    p = load("programs/multi-turn/vllm.sq")
    assert {k: p.constants[k] for k in ["B", "max_seqs", "blocks", "bs", "chunk_cap", "a", "omega", "beta", "c0"]} == {
        "B": 8192.0, "max_seqs": 16.0, "blocks": 10000.0, "bs": 16.0, "chunk_cap": 0.0,
        "a": 2e-5, "omega": 2e-4, "beta": 2e-9, "c0": 0.0}
    kv, reqs = p.pools
    assert kv == ir.PoolDecl("kv", None, 160000.0, 16.0, "lru", "lifo", "fifo", None)
    assert reqs == ir.PoolDecl("reqs", None, 16.0, None, "lru", "none", "fifo", 0)
    engine = p.stages[0]
    assert engine.kind == "step" and engine.step.budget == ir.Num(8192.0) and engine.step.memory == 0
    assert p.run == ir.RunSettings(2000.0, 200.0, 1, None)


@pytest.mark.parametrize("path", VLLM + [SPAWN, AZURE] + SHARED)
def test_vllm_request_observes_only_hit_and_prefill_tokens_and_reserves_nothing(path):
    p = load(path)
    names = [o.name for o in p.observes]
    assert names[:2] == ["hit", "prefill_tokens"] and set(names[2:]) <= {"subagent", "join_wait"}
    holds = [s for s in ir.walk_blocks(p.session) if isinstance(s, ir.Hold)]
    assert holds and all(hp.reserve is None for h in holds for hp in h.pools)
    assert all(h.cache is not None and h.reuse is None for h in holds)


def test_the_server_is_spliced_once_per_request():
    p = load("programs/multi-turn/vllm.sq")
    assert p.two_sided
    flat = list(ir.walk_blocks(p.session))
    assert flat.count(ir.ServerBegin()) == 1 and flat.count(ir.ServerEnd()) == 1


def test_the_spawn_program_delegates_with_spawn_and_join_and_only_parents_arrive():
    p = load(SPAWN)
    assert p.handles == ("kids",) and p.arrival.kind == "poisson"
    assert p.constants["kids"] == pytest.approx(8.1)  # the `let`, beside the handle of the same name
    spawns = [s for s in ir.walk_blocks(p.session) if isinstance(s, ir.Spawn)]
    joins = [s for s in ir.walk_blocks(p.session) if isinstance(s, ir.Join)]
    assert len(spawns) == 1 and len(joins) == 1
    assert [p.attributes[x.slot] for x in spawns[0].sets] == ["K", "sub"]
    assert "delegate" not in [s.name for s in p.stages]


def test_set_q_0_removes_the_subagents():
    p = load("programs/subagent/vllm_subagents.sq", sets=[("q", "0")])
    assert p.constants["kids"] == 0.0 and p.arrival.rate == pytest.approx(0.1)
    assert load("programs/subagent/vllm_subagents.sq").constants["kids"] == pytest.approx(8.1)
    assert load("programs/subagent/vllm_subagents.sq", sets=[("W", "20")]).constants["W"] == 20.0


# ---------------------------------------------------------------- the seeds' workload blocks, verbatim (§10.1)
SEED_WORKLOADS = {
    "programs/single-turn/vllm_single_turn.sq": """\
// A request arrives, is served, and its session ends: no context carries
// over, so `K` stays 0 and the prefix cache is never read back (entries
// are per session, docs/language.md §9).
workload {
  arrive poisson(Lambda);
  hidden o;              // the scheduler knows max_tokens, not the length (sched/utils.py:98-119)
  init { set K = 0; }
  turn {
    set n = ~uniform(1000, 3000);
    set o = ~exp(200) + 1;
  }
  session { turn; request; end; }
}
""",
    "programs/multi-turn/vllm_chat.sq": """\
// Each turn resends the conversation so far (`K`) with a short message;
// the gap between turns is a person, not a tool.
workload {
  arrive poisson(Lambda);
  hidden o;              // the scheduler knows max_tokens, not the length (sched/utils.py:98-119)
  init { set K = 0; }
  turn {
    set n = K == 0 ? ~uniform(200, 1000) : ~exp(100);
    set o = ~exp(300) + 1;
    set more = ~bernoulli(p);
  }
  session {
    turn;
    loop {
      request;
      set K = prompt + o;
      branch (more) { run user (~exp(Z)); turn; } else { end; }
    }
  }
}
""",
    "programs/multi-turn/vllm.sq": """\
// The client: sessions arrive, each turn brings a prompt of n new tokens
// on a context of K and wants o tokens back, and after a turn the session
// calls a tool and comes back with probability p. Nothing here is vLLM.
workload {
  arrive poisson(Lambda);
  hidden o;              // the scheduler knows max_tokens, not the length (sched/utils.py:98-119)
  init { set K = 0; }
  turn {
    set n = K == 0 ? ~uniform(1000, 3000) : ~exp(500);
    set o = ~exp(200) + 1;
    set more = ~bernoulli(p);
  }
  session {
    turn;
    loop {
      request;
      set K = prompt + o;
      branch (more) { tool (~exp(Z)); turn; } else { end; }
    }
  }
}
""",
    "programs/subagent/vllm_subagents.sq": """\
// An arrival is a subagent with probability kids / (1 + kids), so the
// stream carries both at the rate the parents would create them. A
// subagent starts from a context of its own: the parent's context it
// copies is not shared across sessions (docs/language.md §9).
workload {
  arrive poisson(Lambda * (1 + kids));
  hidden o;              // the scheduler knows max_tokens, not the length (sched/utils.py:98-119)
  init {
    set sub = ~bernoulli(kids / (1 + kids));
    set K = sub ? ~uniform(2000, 6000) : 0;
    set t_s = now;
  }
  turn {
    set n = K == 0 ? ~uniform(1000, 3000) : ~exp(500);
    set o = ~exp(200) + 1;
    set more = ~bernoulli(sub ? pc : p);
    set fan = sub ? 0 : ~bernoulli(q);
  }
  session {
    turn;
    loop {
      request;
      set K = prompt + o;
      branch (more) {
        branch (fan) { run delegate (W); } else { tool (~exp(Z)); }
        turn;
      } else {
        branch (sub) { observe subagent = now - t_s; }
        end;
      }
    }
  }
}
""",
}


@pytest.mark.parametrize("path", VLLM)
def test_the_seed_workload_block_is_kept_verbatim(path):
    source = text(path)
    start = source.index("// --8<-- [start:workload]\n") + len("// --8<-- [start:workload]\n")
    end = source.index("// --8<-- [end:workload]")
    assert source[start:end] == SEED_WORKLOADS[path]


# ---------------------------------------------------------------- every program says what it is
@pytest.mark.parametrize("path", PROGRAMS + ["lib/vllm.sq", "lib/a100.sq"])
def test_a_program_opens_with_a_comment_and_every_let_names_its_setting(path):
    lines = text(path).splitlines()
    assert lines[0].startswith("// ")
    for i, line in enumerate(lines):
        if line.startswith("let "):
            assert "//" in line or lines[i - 1].lstrip().startswith("//"), f"{path}:{i + 1} has no comment"


def test_the_queueing_checks_select_their_law_at_check_time():
    mg1 = load("programs/single-turn/mg1.sq")
    assert mg1.init[1].expr == ir.Draw("exp", (ir.Num(1.0),))
    assert [o.name for o in mg1.observes] == ["response", "wait", "service"]
    det = load("programs/single-turn/mg1.sq", sets=[("law", "0")])
    assert det.init[1].expr == ir.Num(1.0)
    h2 = load("programs/single-turn/ps.sq", sets=[("law", "3")])
    assert h2.init[1].expr == ir.Draw("h2", (ir.Num(1.0), ir.Num(9.0)))
    assert h2.stages[0].phi == ir.Num(1.0)
    closed = load("programs/multi-turn/closed.sq")
    assert closed.arrival == ir.Arrival("closed", n=8)
    assert [o.name for o in closed.observes] == ["wait", "response"]

"""`gauge NAME = E;` and the aggregates `max|min|sum j in n (E)` in the front
end (docs/language.md §16, §25): how an aggregate is written out, what a gauge
may read, and every refusal with its place."""

from __future__ import annotations

import pytest

import serq
from serq import ir
from tests.frontend_util import fails

DEPLOYMENT = """\
pool kv[2] { cap 100; }
stage svc[2] : fifo;
workload { arrive poisson(1.5); }
session {
  choose j in 2 by (holders(kv[j]));
  set n = ~uniform(1, 20);
  hold kv[j] (n) { run svc[j] (~exp(0.5)); }
  end;
}
run { horizon 400; warmup 10; seed 3; }
"""


def gauges(extra: str) -> tuple[ir.Gauge, ...]:
    return serq.load(DEPLOYMENT + extra).gauges


def test_an_aggregate_is_its_terms_written_out() -> None:
    assert gauges("let N = 2; gauge x = max k in N (used(kv[k]) + k);") == \
        gauges("gauge x = max(used(kv[0]) + 0, used(kv[1]) + 1);")
    (x,) = gauges("gauge x = sum k in 2 (holders(kv[k]));")  # one call of its terms, added from the left
    y = gauges("gauge x = holders(kv[0]) + holders(kv[1]);")[0].expr
    assert isinstance(y, ir.Binary) and x.expr == ir.Call("sum", (y.a, y.b))
    # more than two terms fold from the left
    three = serq.load("let a = max k in 3 (k * k - 4 * k);\nrun { horizon 1; }").constants["a"]
    assert three == 0.0  # max(0, -3, -4)
    assert serq.load("let s = sum k in 4 (sum i in (k + 1) (1));\nrun { horizon 1; }").constants["s"] == 10.0


def test_an_aggregate_in_a_def_keeps_its_own_index() -> None:
    prog = serq.load(DEPLOYMENT + "def total(k) = sum k in 2 (used(kv[k]));\ngauge t = total(5);")
    (t,) = prog.gauges
    assert t.expr == ir.Call("sum", (gauges("gauge t = used(kv[0]);")[0].expr, gauges("gauge t = used(kv[1]);")[0].expr))


@pytest.mark.parametrize("count, size", [("sum j in 2 (1)", 2), ("max j in 3 (j)", 2), ("min j in 2 (3 - j)", 2)])
def test_an_aggregate_let_sizes_a_family(count: str, size: int) -> None:
    prog = serq.load(f"let N = {count};\nstage s[N] : delay;\nworkload {{ arrive batch(1); }}\n"
                     "session { run s[0] (N); end; }\nrun { horizon 10; }")
    assert prog.stages[0].size == size


def test_a_family_size_is_a_constant_that_set_overrides() -> None:
    text = ("let N = 4;\npool kv[N] { cap 10; }\nstage s[N] : delay;\nworkload { arrive batch(1); }\n"
            "session { hold kv[N - 1] (1) { run s[N - 1] (1); } end; }\nrun { horizon 10; }")
    assert serq.load(text).pools[0].size == 4
    assert serq.load(text, sets=[("N", "8")]).stages[0].size == 8
    e = fails(text.replace("let N = 4;", "let N = 2.5;"))
    assert "array size must be a positive integer, found `N` = 2.5" in e.message
    assert (e.line, e.col) == (2, 9)


def test_a_gauge_reads_the_deployment_at_the_gauge_moment() -> None:
    (g,) = gauges("let N = 2; gauge x = used(kv[N - 1]) + queue(svc[0]) - busy(svc[1]) + free(kv[0]);")
    probes = [x for x in __import__("serq.expr", fromlist=["walk"]).walk(g.expr) if isinstance(x, ir.Probe)]
    assert [p.fn for p in probes] == ["used", "queue", "busy", "free"]
    assert probes[0].target.index == ir.Num(1.0)  # folded to a number


REFUSED = [
    ("gauge x = n;", "`n` is a session attribute, but a gauge, has no session", 11, 11),
    ("gauge x = ~exp(1);", "a gauge may not draw", 11, 11),
    ("gauge x = cachedin(kv[0]);", "`cachedin` reads a session's own cache, but a gauge has no session", 11, 11),
    ("gauge x = tokens;", "`tokens` is read in a gauge, but it exists only in a step stage's cost", 11, 11),
    ("gauge x = now;", "a gauge may not read `now`", 11, 11),
    ("gauge x = work(svc[0]);", "a gauge may not read `work(…)`", 11, 11),
    ("gauge x = 1; gauge x = 2;", "`gauge x` is declared twice", 11, 20),
    ("gauge x = max j in 2 (used(kv[j]));", "the index `j` is also a session attribute", 11, 15),
    ("let k = 1; gauge x = max k in 2 (used(kv[k]));", "the index `k` is also a `let` constant", 11, 26),
    ("let x = sum k in 2 (k); let k = 1; gauge y = x;", "the index `k` is also a `let` constant", 11, 13),
    ("let k = sum k in 2 (k); gauge y = k;", "the index `k` is also a `let` constant", 11, 13),
    ("gauge x = max kv in 2 (1);", "the index `kv` is also a pool", 11, 15),
    ("let x = sum svc in 2 (1); gauge y = x;", "the index `svc` is also a stage", 11, 13),
    ("gauge x = sum k in 2 (sum k in 2 (1));", "the index `k` is also an aggregate's index", 11, 27),
    ("gauge x = sum k in 1.5 (1);", "the count of `sum k in …` must be a positive integer, found 1.5", 11, 20),
    ("gauge x = sum k in 3 (used(kv[k]));", "index `k` is 2: a member of an array of 2 is 0 to 1", 11, 31),
    ("gauge x = sum k in 1e20 (1);", "writes out 1e+20 terms: at most 4096", 11, 11),
    ("gauge x = sum k in 64 (sum i in 65 (1));", "writes out 4160 terms with the aggregates it is inside: at most 4096",
     11, 24),
    ("gauge x = used(kv[-1]);", "index `-1` is -1", 11, 19),
    ("let N = 2; gauge x = used(kv[N + 1 - 1]);", "index `N + 1 - 1` is 2", 11, 30),
    ("pool b { cap 1; block 4; } gauge x = used(kv[blocksize(b)]);", "index `blocksize(b)` is 4", 11, 46),
    ("gauge x = used(kv[sum k in 2100 (1)]);", "index `sum k in 2100 (1)` is 2100", 11, 19),
    ("gauge x = used(kv[holders(kv[0]) + 1]);", "a gauge's index is a number in range", 11, 19),
    ("gauge x = sum k in 2 (k) + k;", "unknown name `k`", 11, 28),
]


@pytest.mark.parametrize("extra, message, line, col", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_its_place(extra: str, message: str, line: int, col: int) -> None:
    e = fails(DEPLOYMENT + extra)
    assert message in e.message
    assert (e.line, e.col) == (line, col)


def test_a_gauge_and_an_observe_do_not_share_a_name() -> None:
    e = fails(DEPLOYMENT.replace("end;", "observe x = now; end;") + "gauge x = 1;")
    assert "`gauge x`: `x` is also an `observe`" in e.message


def test_gauge_is_a_contextual_keyword() -> None:
    """A top-level item starting with `gauge` is a gauge; elsewhere the word is a name."""
    prog = serq.load(DEPLOYMENT.replace("set n =", "set gauge =").replace("(n)", "(gauge)") + "gauge g = 1;")
    assert "gauge" in prog.attributes and [g.name for g in prog.gauges] == ["g"]


BRANCHED = """\
let router = 0;
stage a : delay;
stage b : delay;
workload { arrive batch(1); }
session {
  branch (router == 1) { run a (1); } else { run b (2); }
  end;
}
run { horizon 10; }
"""


def test_a_test_on_constants_keeps_the_side_taken() -> None:
    """`branch (router == 1)` with `--set router=…` is decided when linking:
    the IR holds the statements of the side taken, in the branch's place."""
    for router, stage in (("0", 1), ("1", 0)):
        session = serq.load(BRANCHED, sets=[("router", router)]).session
        assert not any(isinstance(s, ir.Branch) for s in session)
        runs = [s for s in session if isinstance(s, ir.Run)]
        assert [r.stage.stage for r in runs] == [stage]
    # both sides are still checked
    e = fails(BRANCHED.replace("run a (1);", "run c (1);"))
    assert "unknown stage `c`" in e.message
    # a test on a session's state stays a test
    kept = serq.load(BRANCHED.replace("router == 1", "serial == 1")).session
    assert any(isinstance(s, ir.Branch) for s in kept)


def test_a_min_or_max_aggregate_is_one_call_with_the_left_folds_value() -> None:
    # `max r in 4 (…)` compiles to one `_maxn(…)` call: the same value as f_max folded left to
    # right, NaNs (passed over) and signed zeros (the first of equals kept) included
    import itertools
    import math
    from functools import reduce

    from serq.expr import f_max, f_maxn, f_min, f_minn

    values = [math.nan, 0.0, -0.0, 1.0, -1.0, math.inf, -math.inf]
    for n in (1, 2, 3, 4):
        for xs in itertools.product(values, repeat=n):
            for pair, each in ((f_max, f_maxn), (f_min, f_minn)):
                want, got = reduce(pair, xs), each(*xs)
                assert (want != want and got != got) or (want == got and math.copysign(1.0, want) == math.copysign(1.0, got))


def test_a_sum_aggregate_adds_from_the_left() -> None:
    # one `_sumn(…)` call: the rounding of ((x0 + x1) + x2) + …, not the compensated built-in sum
    from functools import reduce

    from serq.expr import f_sumn

    xs = (1e16, 1.0, -1e16, 1.0, 0.1, 0.2, 0.3)
    assert f_sumn(*xs) == reduce(lambda a, b: a + b, xs) == 1.6
    assert f_sumn(1.0) == 1.0
    text = "let s = sum k in 7 (k == 0 ? 1e16 : k == 2 ? -1e16 : k == 4 ? 0.1 : k == 5 ? 0.2 : k == 6 ? 0.3 : 1);"
    assert serq.load(text + "\nrun { horizon 1; }").constants["s"] == 1.6


def test_an_aggregate_of_the_most_terms_checks_and_runs() -> None:
    # 4096 terms (the most an aggregate may write out) make one flat call: a gauge over a family of
    # 4096 members compiles and runs (a chain of 4095 nested calls did not: "nested too deeply")
    text = """let N = 4096;
pool kv[N] { cap 10; }
stage svc : fifo;
workload { arrive poisson(1); }
session { set j = floor(~uniform(0, N)); hold kv[j] (1) { run svc (~exp(0.5)); } }
gauge spread = max k in N (used(kv[k])) - min k in N (used(kv[k]));
gauge total = sum k in N (used(kv[k]));
run { horizon 2000; seed 1; }
"""
    g = serq.run(serq.load(text)).to_dict()["gauges"]
    # the total held is the M/M/1 queue's number in system (ρ = 0.5: L = 1), the spread the most
    # any one member holds (most of the 4096 hold nothing)
    assert abs(g["total"]["mean"] - 1.0) < g["total"]["ci"] + 0.05
    assert g["spread"]["min"] == 0.0 and g["spread"]["max"] in (1.0, 2.0, 3.0)


def test_nested_aggregates_keep_every_term() -> None:
    # max over 2 of a max over 3: the one non-zero term is the inner first call's last (j = 0, k = 2); it
    # was lost once, when the compiler still folded min(min(a, b), c) chains as if every call took two
    program = """
pool kv { cap 100; }
stage svc : fifo;
workload { arrive poisson(1); }
session { hold kv (1) { run svc (0.1); } observe x = max j in 2 (max k in 3 (k == 2 && j == 0 ? serial * 0 + 50 : 0)); }
run { horizon 20; seed 1; }
"""
    x = serq.run(serq.load(program)).observes["x"]
    assert x.count > 5 and x.mean == 50.0 and x.p99 == 50.0

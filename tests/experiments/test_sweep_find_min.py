"""`--find-min` (serq/experiments/search.py): the fewest replicas that meet an
SLO, checked against the M/M/1 closed form of replicas behind a random router."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from frontend_util import cli_main, cli_streams
from test_sweep_search import search_writes_every_point_and_resumes

ROOT = Path(__file__).resolve().parents[2]

# N FIFO replicas of rate 1 behind a random router, Poisson arrivals at rate 3:
# each replica is an M/M/1 queue at load 3/N, mean response 1/(1 - 3/N):
# N = 4: 4.0, N = 5: 2.5, N = 6: 2.0, N = 8: 1.6. With R <= 2.2 the fewest is 6.
REPLICAS = """\
use "{lib}";
let N = 4;
let router = 0;
pool reqs[N] {{ cap inf; }}
pool kv[N] {{ cap inf; }}
stage svc[N] : fifo;
workload {{ arrive poisson(3); }}
session {{
  set t0 = now;
  route(router, N, kv, reqs);
  hold reqs[j] (1) {{ run svc[j] (~exp(1)); }}
  observe response = now - t0;
  end;
}}
run {{ horizon 4000; warmup 200; seed 1; }}
"""


@pytest.fixture()
def replicas(tmp_path: Path) -> str:
    path = tmp_path / "replicas.sq"
    path.write_text(REPLICAS.format(lib=ROOT / "lib" / "routers.sq"))
    return str(path)


def test_find_min_finds_the_fewest_replicas(replicas: str) -> None:
    code, out, err = cli_streams("sweep", replicas, "--set", "N=1:16", "--find-min", "N", "--slo",
                                 "observes.response.mean<=2.2", "--slo-on", "mean", "--seeds", "1-2")
    assert code == 0, out + err
    assert out == "N = 6\n"  # standard output has the answer alone; the steps are on standard error
    steps = err.splitlines()
    assert all("bracket [" in line for line in steps)
    assert steps[0] == ("N = 1 fails the SLOs; bracket [1, 16] (not settled on seed 1, 2: its backlog grew all "
                        "through the run, an overload or a queue still filling: a horizon of 16000 would tell)")
    # (load 3 on one server: an overload; the run is 4000 s, four times that tells)
    assert steps[1] == "N = 16 meets the SLOs; bracket [1, 16]"
    # whole numbers only, and the bracket ends one apart
    values = [float(s.split(" ")[2]) for s in steps]
    assert all(v == int(v) for v in values)
    assert steps[-1].endswith("bracket [5, 6]")


def test_find_min_in_json_and_when_even_the_top_fails(replicas: str) -> None:
    code, out, err = cli_streams("sweep", replicas, "--set", "N=5:8", "--find-min", "N", "--slo",
                                 "observes.response.mean<=2.2", "--slo-on", "mean", "--seeds", "1", "--json")
    assert code == 0, out + err
    doc = json.loads(out)
    assert doc["goal"] == "min" and doc["value"] == 6.0 and doc["bracket"] == [5.0, 6.0]
    # N = 5 fails (mean 2.5), 8 meets (1.6), then 6 meets (2.0): each step on stderr, with --json too
    assert err.splitlines() == ["N = 5 fails the SLOs; bracket [5, 8]", "N = 8 meets the SLOs; bracket [5, 8]",
                                "N = 6 meets the SLOs; bracket [5, 6]"]
    code, out = cli_main("sweep", replicas, "--set", "N=3:5", "--find-min", "N", "--slo",
                         "observes.response.mean<=2.2", "--seeds", "1", "--quiet")
    assert code == 1
    assert "--find-min N: even 5 (the interval's high end) does not meet observes.response.mean<=2.2" in out


def test_find_min_answers_the_bottom_when_it_meets_the_slo(replicas: str) -> None:
    argv = ("sweep", replicas, "--set", "N=8:12", "--find-min", "N", "--slo", "observes.response.mean<=2.2",
            "--seeds", "1")
    assert cli_streams(*argv) == (0, "N = 8\n", "N = 8 meets the SLOs; bracket [8, 8]\n")
    assert cli_streams(*argv, "--quiet") == (0, "N = 8\n", "")  # --quiet silences the steps


def test_each_step_is_told_as_it_ends(replicas: str) -> None:
    # the search evaluates N = 5, 8, 6 (the test above): when the k-th step line
    # is written, k evaluations have run, not all three
    from serq.experiments import command, search

    ran: list[int] = []
    told: list[tuple[int, str]] = []
    real = search.run_plan

    def counted(plan: Any, **kw: Any) -> Any:
        ran.append(len(ran))
        return real(plan, **kw)

    opts = command.SweepOptions(replicas, sets=["N=5:8"], find_min="N", slo=["observes.response.mean<=2.2"],
                                slo_on="mean", json=True)
    printed: list[str] = []
    with mock.patch.object(search, "run_plan", counted):
        assert command.sweep_command(opts, printed.append, lambda line: told.append((len(ran), line))) == 0
    assert [k for k, _ in told] == [1, 2, 3]
    assert len(printed) == 1 and json.loads(printed[0])["value"] == 6.0


@pytest.mark.parametrize("argv, message", [
    (["--set", "N=1:9", "--find-min", "N", "--find-max", "N", "--slo", "x<=2"], "give one of them"),
    (["--set", "N=1:9", "--find-min", "M", "--slo", "x<=2"], "--find-min `M`: no such axis"),
    (["--set", "N=1:9", "--find-min", "N"], "--find-min needs at least one --slo"),
    (["--set", "N=4", "--slo", "x<=2"], "go with --find-max NAME or --find-min NAME"),
])
def test_bad_find_min_is_a_usage_error(replicas: str, argv: list[str], message: str) -> None:
    code, out = cli_main("sweep", replicas, *argv, "--horizon", "50", "--warmup", "0", "--quiet")
    assert code == 2, out
    assert message in out and "Traceback" not in out


def test_find_min_writes_every_point_and_resumes(replicas: str, tmp_path: Path) -> None:
    out = tmp_path / "search.jsonl"
    argv = ("sweep", replicas, "--set", "N=4:8", "--find-min", "N", "--slo", "observes.response.mean<=2.2",
            "--slo-on", "mean", "--seeds", "1-2", "--horizon", "2000", "--warmup", "100", "--quiet", "--json",
            "--out", str(out))
    search_writes_every_point_and_resumes(argv, out, "N")

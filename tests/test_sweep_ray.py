"""`--backend ray`: the same rows as the process pool, on a local Ray with two
workers.  Skipped when Ray is not installed (`pip install 'serq[ray]'`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from frontend_util import cli_main

MG1 = "programs/single-turn/mg1.sq"


def sweep(tmp_path: Path, name: str, *extra: str) -> bytes:
    out = tmp_path / name
    code, text = cli_main("sweep", MG1, "--set", "lam=0.5,0.7", "--seeds", "1-3", "--horizon", "300",
                          "--warmup", "20", "--jobs", "2", "--quiet", "--out", str(out), *extra)
    assert code == 0, text
    return out.read_bytes()


def test_ray_gives_the_same_rows_as_the_process_pool(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    assert sweep(tmp_path, "ray.jsonl", "--backend", "ray") == sweep(tmp_path, "pool.jsonl")


def test_without_ray_the_backend_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    code, text = cli_main("sweep", MG1, "--set", "lam=0.5", "--horizon", "50", "--warmup", "0", "--backend", "ray",
                          "--quiet")
    assert code == 1
    assert "--backend ray needs Ray: pip install 'serq[ray]'" in text


def test_address_is_for_ray_only() -> None:
    code, text = cli_main("sweep", MG1, "--set", "lam=0.5", "--address", "auto", "--quiet")
    assert code == 2 and "--address joins a Ray cluster" in text

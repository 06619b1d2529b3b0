"""`toolweave bench` options users read figures with: --at, --graph, --no-floor, the embedding cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.test_cli_core import run, tiny_dataset  # noqa: F401 - the fixture is used by name

pytestmark = pytest.mark.integration


def rows(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.strip().splitlines()]


def test_bench_at_5_every_graph_floor_off_and_cached(tiny_dataset: Path) -> None:  # noqa: F811
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "toolweave" / "embeddings.sqlite"
    for graph in ("inferred", "none"):  # declared: see test_cli_core
        code, out, err = run(
            "bench", str(tiny_dataset), "--json", "--at", "5", "--graph", graph, "--no-floor"
        )
        assert code == 0, err
        (row,) = rows(out)
        assert {"map@5", "recall@5", "ndcg@5", "complete@5", "returned", "precision"} <= set(row)
        assert "map@10" not in row
        assert row["returned"] >= 1
    assert cache.is_file()  # the runs shared one cache file (tiny tools + queries embedded once)
    code, out, err = run("bench", str(tiny_dataset), "--json", "--at", "0")
    assert code == 1 and "--at" in err


def test_bench_runs_with_the_gateways_retrieval_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """``TOOLWEAVE_RETRIEVAL__*`` reach ``toolweave bench`` as they reach the gateway (a setting can be
    compared without editing code); ``--no-floor`` turns off the floor and nothing else."""
    from toolweave.commands.bench import bench_retrieval

    assert bench_retrieval(floor=True).fusion == "fleet"
    monkeypatch.setenv("TOOLWEAVE_RETRIEVAL__FUSION", "zscore")
    monkeypatch.setenv("TOOLWEAVE_RETRIEVAL__TOP_K", "4")
    with_floor, without = bench_retrieval(floor=True), bench_retrieval(floor=False)
    assert (with_floor.fusion, with_floor.top_k) == (without.fusion, without.top_k) == ("zscore", 4)
    assert with_floor.floor_relative > 0
    assert (without.floor_relative, without.floor_absolute, without.floor_destructive) == (0.0, 0.0, 0.0)

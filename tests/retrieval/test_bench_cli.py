"""`toolweave bench` options users read figures with: --at, --graph, --no-floor, the embedding cache."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_core import run, tiny_dataset  # noqa: F401 - the fixture is used by name

pytestmark = pytest.mark.integration


def rows(out: str) -> list[dict[str, Any]]:
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

    assert bench_retrieval(floor=True).name_match == 1.0
    monkeypatch.setenv("TOOLWEAVE_RETRIEVAL__NAME_MATCH", "0")
    monkeypatch.setenv("TOOLWEAVE_RETRIEVAL__TOP_K", "4")
    with_floor, without = bench_retrieval(floor=True), bench_retrieval(floor=False)
    assert (with_floor.name_match, with_floor.top_k) == (without.name_match, without.top_k) == (0.0, 4)
    assert with_floor.floor_relative > 0
    assert (without.floor_relative, without.floor_absolute, without.floor_destructive) == (0.0, 0.0, 0.0)


def test_bench_walks_the_graph_another_folder_declares_for_the_same_tools(
    tiny_dataset: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.test_cli_core import TOOLS
    from toolweave.settings import MINILM_MODEL

    # the tiny fixture's first pass misses a dependency with MiniLM (the walk must bring it): with the
    # default model's request encoder it finds everything, and no graph could show
    monkeypatch.setenv("TOOLWEAVE_EMBEDDING_MODEL", MINILM_MODEL)

    def folder(name: str, tools: list[dict[str, Any]]) -> str:
        path = tmp_path / name
        path.mkdir()
        (path / "tools.jsonl").write_text("\n".join(json.dumps(t) for t in tools))
        return str(path)

    def scored(*options: str) -> dict[str, Any]:
        code, out, err = run(
            "bench", str(tiny_dataset), "--json", "--no-floor", "--final-k", "2", "--at", "2", *options
        )
        assert code == 0, err
        (row,) = rows(out)
        return row

    no_edges = folder("bare", [{**t, "depends_on": []} for t in TOOLS])
    declared, walked_bare, none = scored(), scored("--graph-from", no_edges), scored("--graph", "none")
    assert walked_bare["map@2"] == none["map@2"] < declared["map@2"]  # the edges came from the other folder
    assert scored("--graph-from", folder("same", TOOLS))["map@2"] == declared["map@2"]
    code, _out, err = run("bench", str(tiny_dataset), "--graph", "inferred", "--graph-from", no_edges)
    assert code == 1 and "--graph declared" in err
    other = folder("other", [{**TOOLS[0], "name": "Elsewhere"}])
    code, _out, err = run("bench", str(tiny_dataset), "--graph-from", other)
    assert code == 1 and "not the tools of" in err

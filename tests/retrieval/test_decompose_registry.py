"""Decomposition on a real registry (LanceDB on disk, the real embedder, MetaTool's 199 real tool
descriptions): a two-part request finds both tools, where the whole query alone misses one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_two_part_request_retrieves_both_tools(
    dataset_dir: Callable[[str], Path],
    shared_embedder,
    tmp_path: Path,
) -> None:
    from toolweave.benchmark import load_dataset
    from toolweave.registry import Registry
    from toolweave.retrieval.decompose import Decomposition, decompose_query
    from toolweave.retrieval.pipeline import retrieve
    from toolweave.settings import RetrievalSettings, Settings

    data = load_dataset(str(dataset_dir("metatool")))
    # a request of MetaTool's multi-tool set (gold: WeatherTool, FinanceTool)
    query = (
        "What's the forecast for tomorrow? Also, can you check the current value of a specific stock for me?"
    )
    assert decompose_query(query, level="clauses", min_content_words=3)[1:] == [
        "What's the forecast for tomorrow",
        "can you check the current value of a specific stock for me",
    ]
    reg = Registry.open(tmp_path / "reg", embedder=shared_embedder, settings=Settings(home=tmp_path / "reg"))
    try:
        reg.ingest("metatool", data.tools, [])
        params = RetrievalSettings(method="hybrid", final_k=5)

        def top(decomposition: Decomposition | None) -> list[str]:
            ranked = retrieve(
                query, reg, reg.dependencies, params, source_of=reg.source_of, decomposition=decomposition
            )
            return [r.tool_id for r in ranked]

        whole, split = top(None), top(Decomposition(level="clauses", min_content_words=3))
    finally:
        reg.close()
    assert "metatool__FinanceTool" in whole
    assert "metatool__WeatherTool" not in whole  # the stock words outweigh the forecast in one vector
    assert {"metatool__FinanceTool", "metatool__WeatherTool"} <= set(split), split

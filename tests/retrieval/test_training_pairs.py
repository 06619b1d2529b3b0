"""Training pairs for the project's retrieval model: capped per tool, ToolLinkOS never, hard negatives
never a gold tool or a paraphrase of one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from toolweave.benchmark.datasets import load_dataset
from toolweave.benchmark.training_pairs import (
    TRAINING_DATASETS,
    ZERO_SHOT_DATASETS,
    base_name,
    hard_negative_indices,
    training_queries,
)
from toolweave.errors import CatalogError
from toolweave.registry.documents import tool_document


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir()
    tools = [
        {"name": "get_weather", "description": "Weather forecast for a city", "parameters": None},
        {"name": "get_weather#2", "description": "Forecast of the weather", "parameters": None},
        {"name": "send_mail", "description": "Send an e-mail", "parameters": None},
    ]
    (folder / "tools.jsonl").write_text("\n".join(json.dumps(t) for t in tools), encoding="utf-8")
    queries = [
        {"id": f"w{i}", "query": f"weather in city {i}", "gold_tools": ["get_weather"]} for i in range(10)
    ]
    queries += [
        {"id": "m", "query": "mail the forecast", "gold_tools": ["get_weather", "send_mail"]},
        {"id": "dup", "query": "weather in city 0", "gold_tools": ["get_weather"]},
        {"id": "s", "query": "send a note", "gold_tools": ["send_mail"]},
    ]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries), encoding="utf-8")
    return folder


def test_single_tool_requests_are_capped_per_tool_and_multi_tool_ones_kept(tmp_path: Path) -> None:
    data = load_dataset(str(_folder(tmp_path)))
    pairs = training_queries(["tiny"], cap_per_tool=3, seed=1, loaded={"tiny": data})
    weather = [p for p in pairs if p.positives == (0,)]
    assert len(weather) == 3  # ten distinct requests for the tool, capped
    assert {p.text for p in pairs if len(p.positives) == 2} == {"mail the forecast"}
    assert [p.text for p in pairs if p.positives == (2,)] == ["send a note"]
    # the document is the registry's own text for the tool
    assert pairs[0].documents[2] == tool_document(data.tools[2], with_examples=False)
    again = training_queries(["tiny"], cap_per_tool=3, seed=1, loaded={"tiny": data})
    assert [p.text for p in again] == [p.text for p in pairs]  # fixed seed, same sample


def test_toollinkos_requests_are_never_training_data() -> None:
    assert "toollinkos" in ZERO_SHOT_DATASETS
    assert "toollinkos" not in TRAINING_DATASETS
    with pytest.raises(CatalogError, match="zero-shot"):
        training_queries(["toollinkos"])


def test_hard_negatives_skip_gold_tools_and_their_paraphrased_variants() -> None:
    names = ["get_weather", "get_weather#2", "send_mail", "read_mail"]
    scores = np.array([0.9, 0.95, 0.5, 0.7])
    assert base_name("get_weather#2") == "get_weather"
    assert hard_negative_indices(scores, [0], names, 2) == [3, 2]
    assert hard_negative_indices(scores, [2], names, 1) == [1]

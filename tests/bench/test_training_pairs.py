"""Training pairs for the project's retrieval model: the pool and its fixed split, capped per tool, the
out-of-pool sets never trained on (not even their tools)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from training_pairs import (
    OUT_OF_POOL,
    POOL,
    base_name,
    pool_split,
    pseudo_request,
    training_queries,
)

from toolweave.benchmark.datasets import BenchQuery, load_dataset
from toolweave.errors import CatalogError
from toolweave.records import ToolRecord
from toolweave.registry.documents import tool_document


def _write(folder: Path, tools: list[dict[str, Any]], sets: dict[str, list[dict[str, Any]]]) -> Path:
    folder.mkdir()
    (folder / "tools.jsonl").write_text("\n".join(json.dumps(t) for t in tools), encoding="utf-8")
    for stem, queries in sets.items():
        (folder / f"{stem}.jsonl").write_text("\n".join(json.dumps(q) for q in queries), encoding="utf-8")
    return folder


def _api_bank(tmp_path: Path) -> Path:
    """A folder named like a pool dataset, so the pool's rules apply to it."""
    tools = [
        {"name": "get_weather", "description": "Weather forecast for a city", "parameters": None},
        {"name": "get_weather#2", "description": "Forecast of the weather", "parameters": None},
        {"name": "send_mail", "description": "Send an e-mail", "parameters": None},
    ]
    queries = [
        {"id": f"w{i}", "query": f"weather in city {i}", "gold_tools": ["get_weather"]} for i in range(60)
    ]
    queries += [
        {"id": f"m{i}", "query": f"mail the forecast {i}", "gold_tools": ["get_weather", "send_mail"]}
        for i in range(30)
    ]
    return _write(tmp_path / "api_bank", tools, {"queries": queries})


def test_single_tool_requests_are_capped_per_tool_and_multi_tool_ones_kept(tmp_path: Path) -> None:
    data = load_dataset(str(_api_bank(tmp_path)))
    loaded = {"api_bank": data}
    pairs = training_queries(["api_bank"], cap_per_tool=3, seed=1, loaded=loaded)
    assert len([p for p in pairs if p.positives == (0,)]) == 3  # dozens of requests for the tool, capped
    multi = [p for p in pairs if len(p.positives) == 2]
    assert multi and all(p.text.startswith("mail the forecast") for p in multi)
    # the catalogue as the registry embeds it: what the first pass ranks
    assert pairs[0].documents[2] == tool_document(data.tools[2], with_examples=False)
    again = training_queries(["api_bank"], cap_per_tool=3, seed=1, loaded=loaded)
    assert [p.text for p in again] == [p.text for p in pairs]  # fixed seed, same sample


def test_the_splits_partition_the_pool_and_training_reads_only_its_own(tmp_path: Path) -> None:
    data = load_dataset(str(_api_bank(tmp_path)))
    loaded = {"api_bank": data}
    by_split = {
        s: {p.text for p in training_queries(["api_bank"], splits=(s,), cap_per_tool=100, loaded=loaded)}
        for s in ("train", "val", "test")
    }
    assert all(by_split.values())  # 90 requests: every split gets some
    assert not by_split["train"] & by_split["val"]
    assert not by_split["train"] & by_split["test"]
    assert not by_split["val"] & by_split["test"]
    assert sum(len(v) for v in by_split.values()) == 90


def test_one_dialogue_and_one_api_never_straddle_splits() -> None:
    turns = [BenchQuery(f"multi_turn_base_{d}-turn{t}", "x", ("a",)) for d in range(40) for t in range(4)]
    for d in range(40):
        assert len({pool_split("bfcl_multi_turn", q) for q in turns[d * 4 : d * 4 + 4]}) == 1
    api = [BenchQuery(f"real-Nager.Date-{i}", "x", ("a",)) for i in range(6)]
    assert len({pool_split("toolalpaca", q) for q in api}) == 1
    # Seal-Tools keeps its own test split; its dev split is never test
    assert pool_split("seal_tools", BenchQuery("t-1", "x", ("a",), "test_in_domain")) == "test"
    assert {pool_split("seal_tools", BenchQuery(f"d-{i}", "x", ("a",), "dev")) for i in range(50)} <= {
        "train",
        "val",
    }


def test_out_of_pool_sets_are_never_training_data() -> None:
    for name in ("toollinkos", "metatool"):
        assert name in OUT_OF_POOL and name not in POOL
        with pytest.raises(CatalogError, match="not in the training pool"):
            training_queries([name])
    assert "queries_live_multiple" not in (POOL["bfcl_multiple"] or ())


def test_a_tool_only_live_multiple_needs_is_never_a_training_document(tmp_path: Path) -> None:
    tools = [
        {"name": n, "description": f"{n} tool", "parameters": None}
        for n in ("shared", "pool_only", "live_only")
    ]
    folder = _write(
        tmp_path / "bfcl_multiple",
        tools,
        {
            "queries_multiple": [
                {"id": f"multiple_{i}", "query": f"q{i}", "gold_tools": ["shared", "pool_only"]}
                for i in range(9)
            ],
            "queries_live_multiple": [
                {"id": f"live_{i}", "query": f"l{i}", "gold_tools": ["shared", "live_only"]} for i in range(9)
            ],
        },
    )
    data = load_dataset(str(folder))
    pairs = training_queries(
        ["bfcl_multiple"], splits=("train", "val", "test"), loaded={"bfcl_multiple": data}
    )
    assert pairs and all(p.text.startswith("q") for p in pairs)  # no live_multiple request
    assert set(pairs[0].names) == {"shared", "pool_only"}  # nor a tool only live_multiple needs


def test_paraphrased_variants_are_one_function() -> None:
    assert base_name("get_weather#2") == base_name("get_weather") == "get_weather"


def _tool(name: str, description: str = "") -> ToolRecord:
    return ToolRecord(id=f"s__{name}", source="s", name=name, description=description)


def test_a_pseudo_request_is_the_tools_own_first_sentence_without_boilerplate() -> None:
    bfcl = _tool(
        "touch",
        "This tool belongs to the Gorilla file system. It is simple. Tool description: "
        "Create a new file in the current directory. Returns nothing.",
    )
    assert pseudo_request(bfcl) == "Create a new file in the current directory"
    alpaca = _tool("A::holidays", "[Holidays API: dates] List a country's holidays.")
    assert pseudo_request(alpaca) == "List a country's holidays"
    # nothing said beyond the name: the name's words
    bare = _tool("link-example:getRepository", "link-example:getRepository")
    assert pseudo_request(bare) == pseudo_request(_tool("link-example:getRepository"))
    assert "repository" in pseudo_request(bare).lower()


def test_pseudo_requests_are_training_data_only_and_one_per_tool(tmp_path: Path) -> None:
    loaded = {"api_bank": load_dataset(str(_api_bank(tmp_path)))}
    plain = training_queries(["api_bank"], cap_per_tool=3, seed=1, loaded=loaded)
    pairs = training_queries(["api_bank"], cap_per_tool=3, seed=1, loaded=loaded, pseudo=True)
    pseudo = [p for p in pairs if p.query_set == "pseudo"]
    assert [p.text for p in pairs if p.query_set != "pseudo"] == [p.text for p in plain]
    assert [(p.names[p.positives[0]], p.text) for p in pseudo] == [
        ("get_weather", "Weather forecast for a city"),
        ("get_weather#2", "Forecast of the weather"),
        ("send_mail", "Send an e-mail"),
    ]
    assert pseudo[0].documents is pairs[0].documents  # one catalogue, ranked over as one
    val = training_queries(["api_bank"], splits=("val",), cap_per_tool=100, loaded=loaded, pseudo=True)
    assert val and all(p.query_set != "pseudo" for p in val)  # never chosen on


def test_no_pseudo_request_for_a_tool_no_pool_request_needs_beside_live_multiple(tmp_path: Path) -> None:
    tools = [
        {"name": n, "description": f"The {n} tool of the catalogue", "parameters": None}
        for n in ("shared", "pool_only", "live_only", "candidate")
    ]
    folder = _write(
        tmp_path / "bfcl_multiple",
        tools,
        {
            "queries_multiple": [
                {"id": f"multiple_{i}", "query": f"q{i}", "gold_tools": ["pool_only"]} for i in range(9)
            ],
            "queries_live_multiple": [
                {"id": f"live_{i}", "query": f"l{i}", "gold_tools": ["shared", "live_only"]} for i in range(9)
            ],
        },
    )
    loaded = {"bfcl_multiple": load_dataset(str(folder))}
    pairs = training_queries(["bfcl_multiple"], splits=("train", "val", "test"), loaded=loaded, pseudo=True)
    pseudo = {p.names[p.positives[0]] for p in pairs if p.query_set == "pseudo"}
    assert pseudo == {"pool_only"}  # a tool live_multiple may rank (a candidate of its own) is not taught

"""The inferrer never sees queries or gold edges: its input type has no room for them, and scrambling
a dataset's ``depends_on`` (or removing its queries) changes nothing."""

from __future__ import annotations

import inspect
import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from toolweave.inference import infer_edges
from toolweave.records import ToolRecord
from toolweave.registry.catalog import load_catalog


def test_the_inputs_carry_no_queries_and_no_edges() -> None:
    fields = set(ToolRecord.model_fields)
    assert not fields & {"depends_on", "edges", "queries", "query", "instances", "gold"}
    params = set(inspect.signature(infer_edges).parameters)
    # `confidence` is a per-rule number table (calibration), not tools, edges or queries
    assert params == {"tools", "vectors", "only_for", "known", "confidence"}


def test_results_do_not_change_when_gold_edges_are_scrambled_and_queries_removed(
    tmp_path: Path, dataset_dir: Callable[[str], Path]
) -> None:
    src = dataset_dir("toollinkos")
    copy = tmp_path / "toollinkos"
    copy.mkdir()
    rng = random.Random(3)
    for name in ("core_tools.json", "regular_tools.json"):
        tools = json.loads((src / name).read_text(encoding="utf-8"))
        names = [t["name"] for t in json.loads((src / "regular_tools.json").read_text(encoding="utf-8"))]
        for t in tools:
            for dep in t.get("depends_on") or []:
                dep["name"] = rng.choice(names)
                dep["reason"] = "scrambled"
        (copy / name).write_text(json.dumps(tools), encoding="utf-8")
    # no instances.json / split.json in the copy: queries cannot matter
    original = load_catalog([src], "toollinkos", require_description=False)
    scrambled = load_catalog([copy], "toollinkos", require_description=False)
    assert {(e.tool, e.depends_on) for e in original.edges} != {
        (e.tool, e.depends_on) for e in scrambled.edges
    }
    assert infer_edges(original.tools) == infer_edges(scrambled.tools)
    shutil.rmtree(copy)


def test_vectors_are_optional_and_only_add(dataset_dir: Callable[[str], Path]) -> None:
    cat = load_catalog([dataset_dir("api_bank")], "api_bank", require_description=False)
    rng = pytest.importorskip("numpy").random.default_rng(0)
    vectors = {
        t.id: v / (v @ v) ** 0.5 for t, v in zip(cat.tools, rng.normal(size=(len(cat.tools), 8)), strict=True)
    }
    base = {(e.tool, e.depends_on) for e in infer_edges(cat.tools)}
    with_vectors = {(e.tool, e.depends_on) for e in infer_edges(cat.tools, vectors=vectors)}
    assert base <= with_vectors

"""Graph-smoothed tool vectors: the pure smoothing, and a real registry ranking by them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.registry.smoothing import smooth_rows
from toolweave.settings import Settings


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_row_moves_towards_the_mean_of_its_neighbours_and_stays_unit_length() -> None:
    matrix = np.stack([unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1)])
    out = smooth_rows(matrix, [(0, 1), (0, 2), (0, 1)], beta=0.5)  # a repeated pair counts once
    expected = unit(1, 0.25, 0.25)
    assert np.allclose(out[0], expected, atol=1e-6)
    assert np.allclose(out[1:], matrix[1:])  # rows without neighbours are unchanged
    assert np.allclose(matrix[0], unit(1, 0, 0))  # the input is not changed in place


def test_no_pairs_beta_zero_and_self_pairs_change_nothing() -> None:
    matrix = np.stack([unit(1, 2, 0), unit(0, 1, 3)])
    assert np.array_equal(smooth_rows(matrix, [], 0.35), matrix)
    assert np.array_equal(smooth_rows(matrix, [(0, 1)], 0.0), matrix)
    assert np.array_equal(smooth_rows(matrix, [(1, 1)], 0.35), matrix)


def tool(name: str, description: str) -> ToolRecord:
    return ToolRecord(id=f"demo__{name}", source="demo", name=name, description=description)


TOOLS = [
    tool("login", "Sign in to the booking service with a username and password."),
    tool("book_ride", "Book a ride from a start location to a destination."),
    tool("get_location", "Current GPS location of the device."),
    tool("get_weather", "Weather forecast for a city."),
]
EDGES = [
    DependencyEdge(
        tool="demo__book_ride",
        depends_on=dep,
        kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON,
        origin="declared",
        confidence=1.0,
    )
    for dep in ("demo__login", "demo__get_location")
]


def scores(reg: Registry, query: str) -> dict[str, float]:
    ((vector, _text),) = reg.search([(query,)], 4)
    return {h.tool_id: h.score for h in vector}


@pytest.mark.integration
def test_the_registry_ranks_by_vectors_smoothed_over_the_walked_edges(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    query = "book me a ride to the airport"
    plain = Registry.open(
        tmp_path / "plain", embedder=shared_embedder, settings=Settings(infer_dependencies=False)
    )
    plain.ingest("demo", TOOLS, EDGES)
    settings = Settings(infer_dependencies=False, graph_smoothing=0.35)
    reg = Registry.open(tmp_path / "smoothed", embedder=shared_embedder, settings=settings)
    reg.ingest("demo", TOOLS, EDGES)

    own = reg.vectors()
    q = shared_embedder.embed_queries([query])[0]
    ride = own["demo__book_ride"] + 0.35 * (own["demo__login"] + own["demo__get_location"]) / 2
    ride /= np.linalg.norm(ride)
    smoothed, raw = scores(reg, query), scores(plain, query)
    assert smoothed["demo__book_ride"] == pytest.approx(float(ride @ q), abs=1e-5)
    assert raw["demo__book_ride"] == pytest.approx(float(own["demo__book_ride"] @ q), abs=1e-5)
    assert smoothed["demo__book_ride"] != pytest.approx(raw["demo__book_ride"], abs=1e-4)
    # a tool that depends on nothing keeps its own vector; the stored vectors are never smoothed
    assert smoothed["demo__get_weather"] == pytest.approx(raw["demo__get_weather"], abs=1e-6)
    assert np.array_equal(own["demo__book_ride"], plain.vectors()["demo__book_ride"])

    # an inferred edge too weak to walk does not smooth either; a manifest edge that is walked does
    weak = EDGES[0].model_copy(update={"tool": "demo__get_weather", "origin": "inferred", "confidence": 0.2})
    reg.add_edges([weak])
    assert scores(reg, query)["demo__get_weather"] == pytest.approx(raw["demo__get_weather"], abs=1e-6)
    reg.add_edges([weak.model_copy(update={"origin": "manifest", "confidence": 1.0})])
    assert scores(reg, query)["demo__get_weather"] != pytest.approx(raw["demo__get_weather"], abs=1e-4)
    reg.close()
    plain.close()

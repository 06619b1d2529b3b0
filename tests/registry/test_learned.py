"""Learned edges (registry/evidence.py, registry/learned.py): evidence from traffic, batched, merged across
replicas, kept across restarts, overruled by the manifest. Real LanceDB, the real embedder."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import mcp_types as types
import pytest

from tests.registry.demo import tool
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.registry import Embedder, Registry
from toolweave.registry.evidence import SKETCH_SIZE, Evidence, Sighting, Sketch, confidence
from toolweave.registry.overrides import EdgeSelector, GraphOverrides
from toolweave.server.calls.traffic import TrafficObserver

pytestmark = pytest.mark.integration

SHOP = [
    tool("place_order", "Place an order for an item; returns the order id.", source="shop"),
    tool("get_order", "Details of an order by its id.", source="shop"),
    tool("get_weather", "Weather forecast for a city.", source="shop"),
]
PLACE, GET = "shop__place_order", "shop__get_order"
BAR = 0.5  # Settings.infer_min_confidence


def flow(
    session: int, *, adjacent: bool = True, consumer: str = GET, producer: str = PLACE
) -> list[Sighting]:
    """What the observer reports when ``consumer.order_id`` takes ``producer``'s order id in a session."""
    now = time.time_ns()
    return [
        Sighting(consumer, "order_id", producer, "order_id", 1.0, session, adjacent, now),
        Sighting(consumer, "", "", "", 0.0, session, False, now),
    ]


def learned(reg: Registry) -> list[DependencyEdge]:
    return [e for e in reg.edges() if e.origin == "learned"]


def shop(path: Path, embedder: Embedder) -> Registry:
    reg = Registry.open(path, embedder=embedder)
    reg.ingest("shop", SHOP)
    return reg


def test_confidence_one_session_is_never_an_edge() -> None:
    assert confidence(1, 1.0) == 0.0 and confidence(0, 1.0) == 0.0
    assert confidence(2, 1.0) == BAR  # two sessions of fully specific values: just walkable
    assert confidence(2, 0.9) < BAR <= confidence(3, 0.9)  # a weaker value needs a third
    assert confidence(3, 1.0) < confidence(4, 1.0) < confidence(30, 1.0) <= 1.0
    assert confidence(50, 0.3) < BAR  # what a value cannot say, no number of sessions makes up
    row = Evidence(GET, "", PLACE, adjacent=Sketch((1, 2, 3)))  # a sequence seen in 3 sessions
    assert row.edge_confidence(consumer_sessions=3) == 0.75  # every time the consumer ran
    assert row.edge_confidence(consumer_sessions=30) < BAR  # now and then


def test_sketches_count_each_session_once_and_merge_by_union() -> None:
    a, b = Sketch().add([5, 1, 3]), Sketch().add([3, 9])
    assert a.union(b).count() == 4 == b.union(a).count()
    big = Sketch().add(range(1, 10_000))
    assert len(big.hashes) == SKETCH_SIZE and big.hashes[0] == 1
    spread = Sketch().add(range(0, 1 << 63, (1 << 63) // 1000))  # 1,000 hashes spread evenly
    assert 800 < spread.count() < 1250


def test_sightings_become_a_learned_edge_at_the_second_session_in_one_commit_per_flush(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    reg = shop(tmp_path / "r", shared_embedder)
    generation = reg.loaded_generation
    assert reg.record_sightings(flow(101)) == 2
    assert reg.loaded_generation == generation  # buffered, not written
    assert reg.flush_observations()
    assert reg.loaded_generation == generation + 1
    assert learned(reg) == []  # one session is no edge
    assert reg.record_sightings(flow(202) + flow(202)) == 4
    assert reg.flush_observations()
    [edge] = learned(reg)
    assert (edge.tool, edge.depends_on, edge.kind, edge.parameter_name) == (
        GET,
        PLACE,
        EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
        "order_id",
    )
    assert edge.confidence == BAR
    assert edge.reason == f"learned from 2 sessions: {GET}.order_id took {PLACE}'s order_id"
    assert "3 sightings in 2 sessions, 2 of them right after it" in edge.evidence
    assert edge in reg.dependencies(GET)  # walkable
    assert reg.next_steps(PLACE) == ((GET, BAR, EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON),)
    reg.close()

    again = Registry.open(tmp_path / "r", embedder=shared_embedder)  # a restart keeps it
    assert learned(again) == [edge]
    assert again.next_steps(PLACE) == reg.next_steps(PLACE)
    again.close()


def test_replicas_batches_merge_without_counting_a_session_twice(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    one = shop(tmp_path / "r", shared_embedder)
    two = Registry.open(tmp_path / "r", embedder=shared_embedder)
    one.record_sightings(flow(7))
    two.record_sightings(flow(7))  # the same session, seen by both
    assert one.flush_observations() and two.flush_observations()
    assert learned(two) == []  # still one session
    one.record_sightings(flow(8))
    assert one.flush_observations()  # caught up with two's batch first
    [edge] = learned(one)
    assert "3 sightings in 2 sessions" in edge.evidence
    full = two._state.full_loads
    assert two.refresh() and learned(two) == [edge]
    assert two._state.full_loads == full  # loaded as a change: the evidence and the edges it touched
    assert two.next_steps(PLACE) == one.next_steps(PLACE) != ()  # the evidence followed too
    one.close()
    two.close()


def test_a_manifest_remove_keeps_a_learned_edge_out_and_a_pin_wins(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    reg = shop(tmp_path / "r", shared_embedder)
    reg.record_sightings(flow(1) + flow(2))
    reg.flush_observations()
    assert len(learned(reg)) == 1
    reg.set_overrides(GraphOverrides(remove=[EdgeSelector(GET, PLACE)]))
    assert learned(reg) == []
    reg.record_sightings(flow(3) + flow(4))  # traffic keeps seeing it
    reg.flush_observations()
    assert learned(reg) == [] and reg.next_steps(PLACE) == ()

    pinned = DependencyEdge(
        tool=GET,
        depends_on=PLACE,
        kind=EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
        parameter_name="order_id",
        origin="manifest",
        evidence="manifest:pin",
    )
    reg.set_overrides(GraphOverrides(pin=[pinned]))
    reg.record_sightings(flow(5))
    reg.flush_observations()
    assert learned(reg) == [] and [e.origin for e in reg.dependencies(GET)] == ["manifest"]
    reg.close()


def test_private_tools_leave_no_evidence(tmp_path: Path, shared_embedder: Embedder) -> None:
    reg = shop(tmp_path / "r", shared_embedder)
    reg.record_sightings(flow(1) + flow(2))
    reg.flush_observations()
    assert len(learned(reg)) == 1
    reg.set_private(["shop__place_order"])
    assert reg.record_sightings(flow(3)) == 1  # the consumer's own call count only
    reg.record_sightings(flow(4, consumer="shop__get_weather", producer=GET))
    reg.flush_observations()
    assert learned(reg) == []
    rows = reg._learned.rows  # the stored evidence naming the private tool went too
    assert rows and all(PLACE not in (k[0], k[2]) for k in rows)
    reg.close()


def test_values_reach_no_table_file_and_no_log(
    tmp_path: Path, shared_embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reg = shop(tmp_path / "r", shared_embedder)
    secret = "ORD-7731-QUOKKA"
    observer = TrafficObserver()
    for session in ("alice", "bob"):
        placed = types.CallToolResult(content=[], structured_content={"order_id": secret})
        reg.record_sightings(observer.observe(session, PLACE, {"item": "lamp"}, placed, 1))
        got = types.CallToolResult(content=[], structured_content={"state": "open"})
        reg.record_sightings(observer.observe(session, GET, {"order_id": secret}, got, 2))
    assert reg.flush_observations()
    assert len(learned(reg)) == 1  # the value flowed, and was seen
    reg.close()
    needle = secret.encode()
    files = [p for p in (tmp_path / "r").rglob("*") if p.is_file()]
    assert files and not [p for p in files if needle in p.read_bytes()]
    assert secret not in caplog.text
    for key in (b"alice", b"bob"):  # session keys are hashed too
        assert not [p for p in files if key in p.read_bytes()]

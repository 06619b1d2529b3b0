"""Do-no-harm inference: weak inferred edges are kept but never walked; fleet priors need the fleet.

The registry tests use the real embedder and LanceDB on disk; the API-Bank test skips without
../shared/datasets and compares the inferred graph with no graph on the same registry (computed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.registry.inference.inference_helpers import tool
from toolweave.benchmark import load_dataset
from toolweave.inference import infer_edges, rule_of, walkable
from toolweave.inference.calibration import NO_EVIDENCE, RULE_CONFIDENCE
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.registry.embeddings import Embedder
from toolweave.registry.registry import Registry
from toolweave.retrieval import retrieve_tools
from toolweave.retrieval.metrics import summarize
from toolweave.settings import RetrievalSettings, Settings


def _fleet() -> list[ToolRecord]:
    return [
        tool(
            "k",
            "login",
            "Log in and get a session token.",
            {"user": "", "password": ""},
            outputs={"token": ""},
        ),
        tool("k", "list_invoices", "List the invoices of the account.", {"token": ""}),
        tool("k", "make_timestamp", "Turn a date into a timestamp.", {"date": ""}, outputs={"timestamp": ""}),
        tool("k", "schedule_reminder", "Remind the user later.", {"remind_at": "", "note": ""}),
    ]


def test_every_edge_carries_its_rules_calibrated_confidence() -> None:
    edges = infer_edges(_fleet())
    assert edges
    for e in edges:
        assert e.confidence == RULE_CONFIDENCE.get(rule_of(e), NO_EVIDENCE)
    by_pair = {(e.tool, e.depends_on): e for e in edges}
    assert by_pair[("k__list_invoices", "k__login")].confidence >= 0.5  # auth: strong on gold graphs
    weak = by_pair[("k__schedule_reminder", "k__make_timestamp")]
    assert rule_of(weak) in ("producer_rule", "dataflow_rule/kind-time") and weak.confidence < 0.5
    # a caller's own table wins (benchmarks pass leave-one-dataset-out values)
    again = infer_edges(_fleet(), confidence={rule_of(weak): 0.9})
    assert {(e.tool, e.depends_on): e for e in again}[
        ("k__schedule_reminder", "k__make_timestamp")
    ].confidence == 0.9


def test_walkable_drops_only_weak_inferred_edges() -> None:
    declared = DependencyEdge(
        tool="a", depends_on="b", kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON, confidence=0.1
    )
    weak = declared.model_copy(update={"origin": "inferred", "depends_on": "c"})
    strong = weak.model_copy(update={"confidence": 0.8, "depends_on": "d"})
    assert walkable([declared, weak, strong], 0.5) == [declared, strong]


def test_a_weak_inferred_edge_is_walked_by_weight_but_never_published_after_a_call(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    reg = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    reg.ingest("k", _fleet(), [])
    stored = {(e.tool, e.depends_on): e for e in reg.edges()}
    weak = stored[("k__schedule_reminder", "k__make_timestamp")]  # shown by `toolweave graph`
    assert weak.confidence < Settings().infer_min_confidence
    # the walk is given it, and weighs it: from a clear hit, it is walked (a prerequisite on day one)
    assert [e.depends_on for e in reg.dependencies("k__schedule_reminder")] == ["k__make_timestamp"]
    assert [e.depends_on for e in reg.dependencies("k__list_invoices")] == ["k__login"]
    ranked = retrieve_tools(reg, "remind me to call mum tomorrow", RetrievalSettings(top_k=1, final_k=2))
    assert [(r.tool_id, r.reason) for r in ranked] == [
        ("k__schedule_reminder", "first_pass"),
        ("k__make_timestamp", "dependency"),
    ]
    # but the gateway never publishes a weak edge's dependents after a call (its next steps)
    assert reg.dependents("k__make_timestamp") == []
    assert "k__list_invoices" in [e.tool for e in reg.dependents("k__login")]


def test_no_connectivity_edges_on_a_fleet_of_local_tools() -> None:
    local = [
        tool("l", "get_network_status", "Returns whether the network connection is up.", {}, kind="core"),
        tool("l", "resize_image", "Resize an image file on disk.", {"path": "", "width": ""}),
        tool("l", "count_words", "Count the words of a text.", {"text": ""}),
        tool("l", "sort_lines", "Sort the lines of a text.", {"text": ""}),
        tool("l", "open_document", "Open a document in the editor.", {"name": ""}),
        tool("l", "sync_folder", "Sync a folder with the cloud server.", {"folder": ""}),
    ]
    edges = infer_edges(local)
    to_reader = [e for e in edges if e.depends_on == "l__get_network_status"]
    # one tool says it uses the network: it gets the edge from its own text; the prior stays off
    assert [(e.tool, rule_of(e)) for e in to_reader] == [("l__sync_folder", "connectivity_rule")]


def test_the_connectivity_prior_holds_where_most_of_the_fleet_mentions_the_network() -> None:
    online = [
        tool("o", "get_wifi_status", "Returns whether Wi-Fi connectivity is up.", {}, kind="core"),
        tool("o", "stream_song", "Stream a song from the online catalogue.", {"song": ""}),
        tool("o", "upload_photo", "Upload a photo to the cloud.", {"photo": ""}),
        tool("o", "fetch_news", "Read the news from the web.", {"topic": ""}),
        tool("o", "play_playlist", "Play a playlist.", {"playlist": ""}),
    ]
    rules = {e.tool: rule_of(e) for e in infer_edges(online) if e.depends_on == "o__get_wifi_status"}
    assert rules["o__play_playlist"] == "connectivity_prior_rule"
    assert rules["o__upload_photo"] == "connectivity_rule"
    prior = next(e for e in infer_edges(online) if e.tool == "o__play_playlist")
    assert prior.confidence < Settings().infer_min_confidence  # no gold graph supports the prior


def test_api_bank_inferred_graph_is_not_worse_than_no_graph(
    dataset_dir: Callable[[str], Path], tmp_path: Path, shared_embedder: Embedder
) -> None:
    data = load_dataset(str(dataset_dir("api_bank")))
    reg = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    reg.ingest(data.name, data.tools, [])  # the product path: edges inferred at ingest
    assert any(e.origin == "inferred" for e in reg.edges())
    names = {t.id: t.name for t in reg.tools()}
    queries = data.query_sets["queries"]

    def score(method: str) -> float:
        params = RetrievalSettings(method=method)
        runs = [([names[r.tool_id] for r in retrieve_tools(reg, q.text, params)], q.gold) for q in queries]
        return summarize(runs, (10,))["map@10"]

    assert score("grtf") >= score("hybrid") - 0.005  # hybrid = grtf without a graph

"""Tool2Vec usage vectors: examples beside the text vector, with the real embedder and real LanceDB."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from toolweave.errors import RegistryError
from toolweave.records import ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.registry.documents import tool_document
from toolweave.registry.usage import UsageExample, fuse_usage, merge_examples
from toolweave.retrieval import retrieve_tools
from toolweave.settings import RetrievalSettings, Settings

VECTOR = RetrievalSettings(method="vector", final_k=5, top_k=5)


def tool(name: str, description: str, source: str = "demo", **kw: object) -> ToolRecord:
    return ToolRecord(id=f"{source}__{name}", source=source, name=name, description=description, **kw)  # type: ignore[arg-type]


# ``ledger_post`` says what it does in accountant's words; users ask in their own.
TOOLS = [
    tool("ledger_post", "Post a journal entry between two ledger accounts."),
    tool("get_weather", "Weather forecast for a city."),
    tool("send_email", "Send an email message to an address."),
    tool("bank_balance", "Current balance of a bank account."),
    tool("create_invoice", "Create an invoice for a customer."),
]
QUERY = "move 200 dollars from my checking into my savings"
EXAMPLES = ("transfer money from checking to savings", "move cash into my savings account")


def rank_of(reg: Registry, tool_id: str, query: str = QUERY) -> int:
    ids = [r.tool_id for r in retrieve_tools(reg, query, VECTOR)]
    return ids.index(tool_id) if tool_id in ids else len(ids)


def ex(query: str, at: int, origin: str = "call") -> UsageExample:
    return UsageExample("t", query, origin, at, np.zeros(2, dtype=np.float32))  # type: ignore[arg-type]


def test_merge_keeps_one_example_per_text_and_the_newest_up_to_the_cap() -> None:
    merged = merge_examples([ex("a", 1), ex("b", 2)], [ex("A ", 5), ex("c", 3), ex("d", 4)], cap=3)
    assert [(e.query, e.at_ns) for e in merged] == [("A ", 5), ("d", 4), ("c", 3)]


def test_document_leaves_examples_out_when_usage_vectors_hold_them() -> None:
    t = tool("ledger_post", "Post a journal entry.", examples=EXAMPLES)
    assert EXAMPLES[0] in tool_document(t)
    assert EXAMPLES[0] not in tool_document(t, with_examples=False)


def ingested(path: Path, embedder: Embedder, settings: Settings | None = None) -> Registry:
    """A registry at ``path`` holding ``TOOLS`` (source ``demo``)."""
    registry = Registry.open(path, embedder=embedder, settings=settings)
    registry.ingest("demo", TOOLS)
    return registry


@pytest.mark.integration
def test_declared_examples_become_a_usage_vector_that_lifts_the_tool(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    plain = ingested(tmp_path / "plain", shared_embedder)
    with_examples = [
        t.model_copy(update={"examples": EXAMPLES}) if t.name == "ledger_post" else t for t in TOOLS
    ]
    reg = Registry.open(tmp_path / "usage", embedder=shared_embedder)
    reg.ingest("demo", with_examples)

    assert reg.usage_examples("demo__ledger_post") == list(EXAMPLES)
    assert rank_of(reg, "demo__ledger_post") == 0
    assert rank_of(plain, "demo__ledger_post") > 0
    # usage vectors off: no fusion (the examples then sit in the document instead)
    off = ingested(tmp_path / "off", shared_embedder, settings=Settings(usage_weight=0))
    assert off.record_usage("demo__ledger_post", EXAMPLES[0]) is False


@pytest.mark.integration
def test_recorded_calls_persist_across_reopen_and_respect_cap_and_dedup(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    settings = Settings(usage_cap=2)
    reg = ingested(tmp_path / "r", shared_embedder, settings=settings)
    before = rank_of(reg, "demo__ledger_post")
    assert reg.record_usage("demo__ledger_post", "what is the weather like") is True
    assert reg.record_usage("demo__ledger_post", EXAMPLES[0]) is True
    assert reg.record_usage("demo__ledger_post", EXAMPLES[0]) is False  # already the newest
    assert reg.record_usage("demo__ledger_post", EXAMPLES[1]) is True
    assert reg.record_usage("demo__nope", EXAMPLES[1]) is False
    assert reg.usage_examples("demo__ledger_post") == [EXAMPLES[1], EXAMPLES[0]]  # cap 2, newest first
    after = rank_of(reg, "demo__ledger_post")
    assert after == 0 < before
    reg.close()

    again = Registry.open(tmp_path / "r", embedder=shared_embedder, settings=settings)
    assert again.usage_examples("demo__ledger_post") == [EXAMPLES[1], EXAMPLES[0]]
    assert rank_of(again, "demo__ledger_post") == 0
    # a re-ingest of unchanged tools keeps recorded calls; removing the tool drops them
    again.ingest("demo", TOOLS)
    assert again.usage_examples("demo__ledger_post") == [EXAMPLES[1], EXAMPLES[0]]
    again.ingest("demo", [t for t in TOOLS if t.name != "ledger_post"])
    assert again.usage_examples("demo__ledger_post") == []


@pytest.mark.integration
def test_private_tools_and_sources_record_no_usage(tmp_path: Path, shared_embedder: Embedder) -> None:
    reg = Registry.open(tmp_path / "r", embedder=shared_embedder)
    reg.ingest("demo", [*TOOLS[1:3], tool("ledger_post", "Post a journal entry.", examples=(EXAMPLES[0],))])
    reg.ingest("vault", [tool("read_secret", "Read a secret.", source="vault")])
    assert reg.record_usage("demo__ledger_post", EXAMPLES[1]) is True

    reg.set_private(["demo__ledger_post", "vault"])
    # the recorded call is forgotten, the declared example stays
    assert reg.usage_examples("demo__ledger_post") == [EXAMPLES[0]]
    assert reg.record_usage("demo__ledger_post", "another request") is False
    assert reg.record_usage("vault__read_secret", "show me the api key") is False
    assert reg.record_usage("demo__get_weather", "rain in Paris tomorrow?") is True
    reg.close()
    again = Registry.open(tmp_path / "r", embedder=shared_embedder)
    assert again.usage_examples("demo__ledger_post") == [EXAMPLES[0]]
    assert again.usage_examples("vault__read_secret") == []


@pytest.mark.integration
def test_reindex_keeps_recorded_calls(tmp_path: Path, shared_embedder: Embedder) -> None:
    reg = ingested(tmp_path / "r", shared_embedder)
    reg.record_usage("demo__ledger_post", EXAMPLES[0])
    reg.close()
    Registry.reindex(tmp_path / "r", embedder=shared_embedder)
    again = Registry.open(tmp_path / "r", embedder=shared_embedder)
    assert again.usage_examples("demo__ledger_post") == [EXAMPLES[0]]
    assert rank_of(again, "demo__ledger_post") == 0


def test_usage_scores_are_put_on_the_text_scale_before_fusing() -> None:
    # query-to-query cosines (usage) run higher than query-to-document ones: raw, they would lift both
    # tools with examples over both without; calibrated, only the closer one gains, and none loses
    scores = np.array([0.5, 0.4, 0.3, 0.2], dtype=np.float32)
    fused = fuse_usage(scores.copy(), np.array([2, 3]), np.array([0.9, 0.8], dtype=np.float32), 0.7)
    assert list(np.argsort(-fused)) == [0, 2, 1, 3]
    assert np.all(fused >= scores - 1e-6)


@pytest.mark.integration
def test_a_failed_usage_write_is_logged_and_loses_nothing_else(
    tmp_path: Path,
    shared_embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ingested(tmp_path / "r", shared_embedder)

    def broken(*_: object) -> None:
        raise RegistryError("usage table: disk full")

    monkeypatch.setattr(reg._usage, "replace", broken)
    assert reg.record_usage("demo__ledger_post", EXAMPLES[0]) is False
    assert "could not keep a usage example" in caplog.text
    assert reg.usage_examples("demo__ledger_post") == []
    assert len(reg) == len(TOOLS)


@pytest.mark.integration
def test_usage_written_but_never_committed_is_rolled_back_at_open(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    reg = ingested(tmp_path / "r", shared_embedder)
    assert reg.record_usage("demo__ledger_post", EXAMPLES[0]) is True
    # as a process killed between its usage write and the commit record would leave it
    vector = shared_embedder.embed_query(EXAMPLES[1])
    reg._usage.replace(
        ["demo__ledger_post"], [UsageExample("demo__ledger_post", EXAMPLES[1], "call", 1, vector)]
    )
    reg.close()
    again = Registry.open(tmp_path / "r", embedder=shared_embedder)
    assert again.usage_examples("demo__ledger_post") == [EXAMPLES[0]]

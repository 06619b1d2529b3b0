"""Tool2Vec usage vectors: examples beside the text vector, with the real embedder and real LanceDB."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from tests.registry.demo import committed_generation, stored_examples
from toolweave.errors import RegistryError
from toolweave.records import ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.registry.documents import tool_document
from toolweave.registry.observations import Observations, UsageCall
from toolweave.registry.usage import (
    Origin,
    UsageExample,
    UsageTable,
    abstract_values,
    fuse_usage,
    merge_examples,
)
from toolweave.retrieval import retrieve_tools
from toolweave.settings import RetrievalSettings, Settings

VECTOR = RetrievalSettings(method="vector", final_k=5, top_k=5)


def tool(name: str, description: str, source: str = "demo", **kw: object) -> ToolRecord:
    return ToolRecord(id=f"{source}__{name}", source=source, name=name, description=description, **kw)


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


def word(n: int) -> str:
    """A different word per ``n`` (numbers in a recorded query are stored as ``<number>``)."""
    return chr(ord("a") + n) * 3


def ex(query: str, at: int, origin: Origin = "call") -> UsageExample:
    return UsageExample("t", query, origin, at, np.zeros(2, dtype=np.float32))


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

    assert stored_examples(reg.path, "demo__ledger_post") == list(EXAMPLES)
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
    assert reg.record_usage("demo__ledger_post", EXAMPLES[0]) is False  # already the newest (buffered)
    assert reg.record_usage("demo__ledger_post", EXAMPLES[1]) is True
    assert reg.record_usage("demo__nope", EXAMPLES[1]) is False
    assert rank_of(reg, "demo__ledger_post") == before  # buffered: searches see it after the flush
    assert reg.flush_observations()
    assert reg.record_usage("demo__ledger_post", EXAMPLES[1]) is False  # already the newest (stored)
    assert stored_examples(reg.path, "demo__ledger_post") == [EXAMPLES[1], EXAMPLES[0]]  # cap 2, newest first
    after = rank_of(reg, "demo__ledger_post")
    assert after == 0 < before
    reg.close()

    again = Registry.open(tmp_path / "r", embedder=shared_embedder, settings=settings)
    assert rank_of(again, "demo__ledger_post") == 0
    # a re-ingest of unchanged tools keeps recorded calls; removing the tool drops them
    again.ingest("demo", TOOLS)
    assert stored_examples(again.path, "demo__ledger_post") == [EXAMPLES[1], EXAMPLES[0]]
    again.ingest("demo", [t for t in TOOLS if t.name != "ledger_post"])
    assert stored_examples(again.path, "demo__ledger_post") == []


@pytest.mark.integration
def test_a_call_commits_nothing_and_one_flush_commits_every_buffered_call(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = ingested(tmp_path / "r", shared_embedder)
    generation = committed_generation(reg.path)

    def no_store(*_: object, **__: object) -> None:
        raise AssertionError("recording a call touched the store")

    with monkeypatch.context() as patch:  # the call path: neither the usage table nor the commit record
        patch.setattr(reg._state.usage, "replace", no_store)
        patch.setattr(reg._state.db, "commit", no_store)
        patch.setattr(reg._state.db.lock, "acquire", no_store)
        for n, t in enumerate(TOOLS * 4):
            assert reg.record_usage(t.id, f"request {word(n)} for {t.name}") is True
    assert committed_generation(reg.path) == generation
    assert stored_examples(reg.path, "demo__ledger_post") == []

    assert reg.flush_observations() is True
    assert committed_generation(reg.path) == generation + 1  # twenty calls, one commit
    assert stored_examples(reg.path, "demo__ledger_post") == [
        f"request {word(n)} for ledger_post" for n in (15, 10, 5, 0)
    ]
    assert reg.flush_observations() is False  # nothing buffered: nothing written
    assert committed_generation(reg.path) == generation + 1


@pytest.mark.integration
def test_close_writes_what_is_buffered(tmp_path: Path, shared_embedder: Embedder) -> None:
    reg = ingested(tmp_path / "r", shared_embedder)
    generation = committed_generation(reg.path)
    assert reg.record_usage("demo__ledger_post", EXAMPLES[0])
    reg.close()
    assert committed_generation(tmp_path / "r") == generation + 1
    assert stored_examples(tmp_path / "r", "demo__ledger_post") == [EXAMPLES[0]]
    again = Registry.open(tmp_path / "r", embedder=shared_embedder)
    assert rank_of(again, "demo__ledger_post") == 0


@pytest.mark.integration
def test_the_flusher_writes_on_its_cadence(tmp_path: Path, shared_embedder: Embedder) -> None:
    reg = ingested(tmp_path / "r", shared_embedder, settings=Settings(usage_flush_s=0.2))
    generation = committed_generation(reg.path)
    assert reg.record_usage("demo__ledger_post", EXAMPLES[0])
    deadline = time.monotonic() + 60  # a bounded poll: the flush thread writes it, nobody else does
    while rank_of(reg, "demo__ledger_post") != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rank_of(reg, "demo__ledger_post") == 0  # searches see it once the flush published it
    assert stored_examples(reg.path, "demo__ledger_post") == [EXAMPLES[0]]
    assert committed_generation(reg.path) == reg.loaded_generation == generation + 1
    reg.close()


@pytest.mark.integration
def test_private_tools_and_sources_record_no_usage(tmp_path: Path, shared_embedder: Embedder) -> None:
    reg = Registry.open(tmp_path / "r", embedder=shared_embedder)
    reg.ingest("demo", [*TOOLS[1:3], tool("ledger_post", "Post a journal entry.", examples=(EXAMPLES[0],))])
    reg.ingest("vault", [tool("read_secret", "Read a secret.", source="vault")])
    assert reg.record_usage("demo__ledger_post", EXAMPLES[1]) is True
    assert reg.flush_observations()
    assert stored_examples(reg.path, "demo__ledger_post") == [EXAMPLES[1], EXAMPLES[0]]
    assert reg.record_usage("demo__ledger_post", "buffered, not yet written") is True

    reg.set_private(["demo__ledger_post", "vault"])
    # the recorded call is forgotten (stored and buffered), the declared example stays
    assert stored_examples(reg.path, "demo__ledger_post") == [EXAMPLES[0]]
    assert reg.record_usage("demo__ledger_post", "another request") is False
    assert reg.record_usage("vault__read_secret", "show me the api key") is False
    assert reg.record_usage("demo__get_weather", "rain in Paris tomorrow?") is True
    reg.close()
    assert stored_examples(tmp_path / "r", "demo__ledger_post") == [EXAMPLES[0]]
    assert stored_examples(tmp_path / "r", "vault__read_secret") == []
    assert stored_examples(tmp_path / "r", "demo__get_weather") == ["rain in Paris tomorrow?"]


@pytest.mark.integration
def test_reindex_keeps_recorded_calls(tmp_path: Path, shared_embedder: Embedder) -> None:
    reg = ingested(tmp_path / "r", shared_embedder)
    reg.record_usage("demo__ledger_post", EXAMPLES[0])
    reg.close()
    Registry.reindex(tmp_path / "r", embedder=shared_embedder)
    assert stored_examples(tmp_path / "r", "demo__ledger_post") == [EXAMPLES[0]]
    again = Registry.open(tmp_path / "r", embedder=shared_embedder)
    assert rank_of(again, "demo__ledger_post") == 0


def test_usage_scores_are_put_on_the_text_scale_before_fusing() -> None:
    # query-to-query cosines (usage) run higher than query-to-document ones: raw, they would lift both
    # tools with examples over both without; calibrated, only the closer one gains, and none loses
    scores = np.array([0.5, 0.4, 0.3, 0.2], dtype=np.float32)
    fused = fuse_usage(scores.copy(), np.array([2, 3]), np.array([0.9, 0.8], dtype=np.float32), 0.7)
    assert list(np.argsort(-fused)) == [0, 2, 1, 3]
    assert np.all(fused >= scores - 1e-6)


@pytest.mark.integration
def test_a_failed_flush_keeps_its_batch_and_never_reaches_the_call(
    tmp_path: Path,
    shared_embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ingested(tmp_path / "r", shared_embedder)
    generation = committed_generation(reg.path)

    def broken(*_: object) -> None:
        raise RegistryError("usage table: disk full")

    with monkeypatch.context() as patch:
        patch.setattr(UsageTable, "replace", broken)  # every handle: a rollback opens new ones
        assert reg.record_usage("demo__ledger_post", EXAMPLES[0]) is True
        assert reg.flush_observations() is False  # failed: logged, not raised
        assert "could not write 1 observations, kept for the next flush" in caplog.text
        assert reg.record_usage("demo__ledger_post", EXAMPLES[1]) is True  # the call path never notices
        assert reg.flush_observations() is False
    assert committed_generation(reg.path) == generation  # rolled back, nothing committed
    assert stored_examples(reg.path, "demo__ledger_post") == []
    assert len(reg) == len(TOOLS)

    assert reg.flush_observations() is True  # the store is back: both calls, one commit
    assert stored_examples(reg.path, "demo__ledger_post") == [EXAMPLES[1], EXAMPLES[0]]
    assert committed_generation(reg.path) == generation + 1


@pytest.mark.integration
def test_a_flush_that_cannot_commit_keeps_its_batch(
    tmp_path: Path, shared_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = ingested(tmp_path / "r", shared_embedder)
    real_commit = reg._state.db.commit

    def busy(*_: object, **__: object) -> None:
        raise RegistryError("another process committed first")

    monkeypatch.setattr(reg._state.db, "commit", busy)
    assert reg.record_usage("demo__ledger_post", EXAMPLES[0]) is True
    assert reg.flush_observations() is False
    assert stored_examples(reg.path, "demo__ledger_post") == []  # the usage rows were rolled back
    monkeypatch.setattr(reg._state.db, "commit", real_commit)
    assert reg.flush_observations() is True
    assert stored_examples(reg.path, "demo__ledger_post") == [EXAMPLES[0]]


@pytest.mark.integration
def test_usage_written_but_never_committed_is_rolled_back_at_open(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    reg = ingested(tmp_path / "r", shared_embedder)
    assert reg.record_usage("demo__ledger_post", EXAMPLES[0]) is True
    assert reg.flush_observations()
    # as a process killed between its usage write and the commit record would leave it
    vector = shared_embedder.embed_query(EXAMPLES[1])
    assert reg._state.db.lock.try_acquire()
    reg._state.usage.replace(
        ["demo__ledger_post"], [UsageExample("demo__ledger_post", EXAMPLES[1], "call", 1, vector)]
    )
    reg._state.db.lock.release()  # what the kernel does for a process that dies
    assert stored_examples(tmp_path / "r", "demo__ledger_post") == [EXAMPLES[0]]


def call(tool_id: str, query: str, at: int) -> UsageCall:
    return UsageCall(tool_id, query, at)


def test_the_buffer_is_bounded_and_asks_for_a_flush_when_full() -> None:
    full: list[bool] = []
    buffer = Observations(limit=3)
    buffer.on_full = lambda: full.append(True)
    for n in range(5):
        assert buffer.add_usage(call("t", f"q{n}", n))
    assert len(buffer) == 3 and buffer.dropped == 2 and full  # the oldest went
    assert [c.query for c in buffer.take().usage] == ["q2", "q3", "q4"]
    assert len(buffer) == 0


def test_the_buffer_keeps_one_call_per_text_and_skips_a_repeat_of_the_newest() -> None:
    buffer = Observations()
    assert buffer.add_usage(call("t", "Rain in Paris?", 1))
    assert not buffer.add_usage(call("t", "rain  in paris?", 2))  # the same text as the newest
    assert buffer.add_usage(call("u", "rain in paris?", 3))  # another tool
    assert buffer.add_usage(call("t", "snow in Oslo?", 4))
    assert buffer.add_usage(call("t", "rain in Paris?", 5))  # not the newest any more: it moves up
    assert [(c.tool_id, c.query, c.at_ns) for c in buffer.take().usage] == [
        ("u", "rain in paris?", 3),
        ("t", "snow in Oslo?", 4),
        ("t", "rain in Paris?", 5),
    ]


def test_a_batch_put_back_is_older_than_what_came_since() -> None:
    buffer = Observations(limit=3)
    buffer.add_usage(call("t", "a", 1))
    buffer.add_usage(call("t", "b", 2))
    batch = buffer.take()
    buffer.add_usage(call("t", "b", 3))  # the same text again, after the failed flush took it
    buffer.add_usage(call("u", "c", 4))
    buffer.put_back(batch)
    assert [(c.query, c.at_ns) for c in buffer.take().usage] == [("a", 1), ("b", 3), ("c", 4)]
    buffer.put_back(batch)
    buffer.add_usage(call("t", "d", 5))
    buffer.add_usage(call("t", "e", 6))
    assert [c.query for c in buffer.take().usage] == ["b", "d", "e"]  # the bound holds: the oldest went


def test_discard_forgets_the_tools_made_private() -> None:
    buffer = Observations()
    buffer.add_usage(call("vault__read", "my secret", 1))
    buffer.add_usage(call("demo__x", "hello", 2))
    buffer.discard(lambda tool_id: tool_id.startswith("vault__"))
    assert [c.tool_id for c in buffer.take().usage] == ["demo__x"]


def test_values_users_typed_are_stored_as_their_kind() -> None:
    assert abstract_values("Please check the status of my order with id 12446") == (
        "Please check the status of my order with id <number>"
    )
    assert abstract_values("my user id is 'USR005', mail bob.smith@example.com") == (
        "my user id is '<id>', mail <email>"
    )
    assert abstract_values("use key sk_live_4eC39HqLyjWDarjtT1zdp7dc on https://x.test/a?b=1") == (
        "use key <token> on <url>"
    )
    assert abstract_values("flights on 2024-05-01 for ORD-7731, call +1 (555) 123-4567") == (
        "flights on <date> for <id>, call <phone>"
    )
    assert abstract_values("weather in Paris on the 1st, as mp3") == "weather in Paris on the 1st, as mp3"


def test_declared_examples_are_never_pushed_out_by_recorded_calls() -> None:
    declared = [ex("declared one", 1, "example"), ex("declared two", 2, "example")]
    calls = [ex(f"call {word(n)}", 10 + n) for n in range(5)]
    merged = merge_examples(declared, calls, cap=3)
    assert [e.query for e in merged] == ["call eee", "declared two", "declared one"]
    # a call of the same text as a declared example does not take its place
    again = merge_examples(merged, [ex("Declared One", 99)], cap=3)
    assert {(e.query, e.origin) for e in again} >= {("declared one", "example"), ("declared two", "example")}


@pytest.mark.integration
def test_recorded_examples_age_by_count_and_hold_no_typed_values(
    tmp_path: Path, shared_embedder: Embedder
) -> None:
    """A replica whose clock runs a day ahead does not keep its examples over newer ones; the
    manifest's declared examples stay whatever is recorded; what users typed is stored as its kind."""
    settings = Settings(usage_cap=3)
    declared = tool("ledger_post", "Post a journal entry between two ledger accounts.", examples=EXAMPLES[:1])
    ahead = Registry.open(tmp_path / "r", embedder=shared_embedder, settings=settings)
    ahead.ingest("demo", [declared, *TOOLS[1:]])
    ahead_ns = time.time_ns() + 86_400 * 10**9
    ahead._usage._observations.add_usage(UsageCall("demo__ledger_post", "from the replica ahead", ahead_ns))
    assert ahead.flush_observations()
    on_time = Registry.open(tmp_path / "r", embedder=shared_embedder, settings=settings)
    for n in range(3):
        assert on_time.record_usage("demo__ledger_post", f"post {word(n)} for user USR005 to bob@example.com")
        assert on_time.flush_observations()
    stored = stored_examples(on_time.path, "demo__ledger_post")
    assert stored[0] == "post ccc for user <id> to <email>"  # the newest by count, not by clock
    assert "from the replica ahead" not in stored  # pushed out by the later calls
    assert EXAMPLES[0] in stored  # the declared example stays
    assert not [q for q in stored if "USR005" in q or "bob@" in q]
    ahead.close()
    on_time.close()

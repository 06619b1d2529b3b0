"""The gateway in process (real registry + embedder, in-test backends), in both protocol eras."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from tests.registry.demo import stored_examples
from tests.results import text_part
from toolweave.server.gateway import Gateway
from toolweave.settings import PublishSettings, Settings

from .helpers import (
    NOTE_EDGE,
    FakeBackend,
    ListChanged,
    fake_backends,
    names,
    notes_tools,
    time_tools,
    tool,
    watching,
)

pytestmark = pytest.mark.anyio

MODES = ["legacy", "auto"]


def make_gateway(registry: Any, *backends: FakeBackend, **publish: Any) -> Gateway:
    settings = Settings(home=registry.path, publish=PublishSettings(**publish), call_timeout_s=2)
    return Gateway(registry, list(backends), settings)


@asynccontextmanager
async def connected(gateway: Gateway, mode: str, watch: ListChanged) -> AsyncIterator[Client]:
    async with Client(gateway.server, mode=mode, message_handler=watch.on_message) as client:
        for backend in fake_backends(gateway):
            with anyio.fail_after(20):
                await backend.reported.wait()
        async with watching(client, watch):
            yield client


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return result.structured_content


@pytest.fixture
def backends() -> tuple[FakeBackend, FakeBackend]:
    return FakeBackend("clock", time_tools()), FakeBackend("notes", notes_tools(), [NOTE_EDGE])


@pytest.mark.parametrize("mode", MODES)
async def test_find_publish_call_in_both_eras(registry: Any, backends: Any, mode: str) -> None:
    clock, notes = backends
    gateway = make_gateway(registry, clock, notes, pinned=("notes__create_note",))
    watch = ListChanged()
    async with connected(gateway, mode, watch) as client:
        # auto reaches the 2026 era against our server; legacy stays in the handshake era's latest
        expected = LATEST_MODERN_VERSION if mode == "auto" else LATEST_HANDSHAKE_VERSION
        assert client.protocol_version == expected
        first = await client.list_tools(cache_mode="bypass")
        assert names(first) == ["find_tools", "call_tool", "notes__create_note"]

        found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 3})
        assert not found.is_error, found
        doc = structured(found)
        top = doc["tools"][0]
        assert top["name"] == "clock__get_current_time"
        assert top["input_schema"]["required"] == ["timezone"]
        assert "why" not in top  # a search hit; a dependency says what it feeds
        assert doc["tool_list_changed"] is True
        await watch.wait()

        listed = names(await client.list_tools(cache_mode="bypass"))
        assert "clock__get_current_time" in listed
        assert listed[:3] == ["find_tools", "call_tool", "notes__create_note"]

        called = await client.call_tool("clock__get_current_time", {"timezone": "Asia/Tokyo"})
        assert not called.is_error
        assert text_part(called) == "get_current_time {'timezone': 'Asia/Tokyo'}"
        # The upstream's identity stamp is gone (a 2026-era response carries the gateway's own).
        assert (called.meta or {}).get("io.modelcontextprotocol/serverInfo", {}).get("name") != "upstream"
        assert clock.calls == [("get_current_time", {"timezone": "Asia/Tokyo"})]

        # Same query again: same set, no notification.
        (session,) = list(gateway.sessions)
        before, sent = await watch.flushed(client), session.notices
        again = await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 3})
        assert structured(again)["tool_list_changed"] is False
        assert session.notices == sent  # the server sent none (it would have before answering)
        assert await watch.flushed(client) == before
        assert names(await client.list_tools(cache_mode="bypass")) == listed

        # call_tool reaches a tool that is not published.
        assert "notes__search_notes" not in listed
        via_meta = await client.call_tool(
            "call_tool", {"name": "notes__search_notes", "arguments": {"keyword": "x"}}
        )
        assert not via_meta.is_error, via_meta
        assert notes.calls == [("search_notes", {"keyword": "x"})]


async def test_dependencies_are_published_with_the_tool(registry: Any, backends: Any) -> None:
    gateway = make_gateway(registry, *backends)
    watch = ListChanged()
    async with connected(gateway, "legacy", watch) as client:
        doc = structured(await client.call_tool("find_tools", {"query": "delete a note", "k": 2}))
        by_name = {t["name"]: t for t in doc["tools"]}
        assert by_name["notes__search_notes"]["why"].startswith("feeds notes__delete_note")
        listed = names(await client.list_tools())
        assert {"notes__delete_note", "notes__search_notes"} <= set(listed)
        # in detail: the walk's own words, rank and source
        detailed = structured(
            await client.call_tool("find_tools", {"query": "delete a note", "k": 2, "detail": True})
        )
        entry = {t["name"]: t for t in detailed["tools"]}["notes__search_notes"]
        assert entry["reason"] == "dependency" and entry["source"] == "notes" and entry["rank"] == 2


@pytest.mark.parametrize("mode", MODES)
async def test_sessions_are_isolated(registry: Any, backends: Any, mode: str) -> None:
    gateway = make_gateway(registry, *backends)
    watch_a, watch_b = ListChanged(), ListChanged()
    # Two 2026-era clients on one in-process server have no connection: their clientInfo tells them apart.
    async with (
        connected(gateway, mode, watch_a) as a,
        Client(
            gateway.server,
            mode=mode,
            message_handler=watch_b.on_message,
            client_info=types.Implementation(name="other-client", version="1"),
        ) as b,
        watching(b, watch_b),
    ):
        await a.call_tool("find_tools", {"query": "what time is it in Tokyo"})
        await watch_a.wait()
        assert "clock__get_current_time" in names(await a.list_tools(cache_mode="bypass"))
        assert all(s.notices == 0 for s in gateway.sessions if not s.queries)  # only a searched
        assert await watch_b.flushed(b) == 0
        assert names(await b.list_tools(cache_mode="bypass")) == ["find_tools", "call_tool"]


async def test_invalid_arguments_name_the_field(registry: Any, backends: Any) -> None:
    clock, _ = backends
    gateway = make_gateway(registry, *backends)
    async with connected(gateway, "legacy", ListChanged()) as client:
        bad = await client.call_tool(
            "call_tool",
            {"name": "clock__convert_time", "arguments": {"source_timezone": "UTC", "time": "25h"}},
        )
        assert bad.is_error
        err = structured(bad)["error"]
        assert err["code"] == "invalid_arguments"
        fields = {e["field"]: e for e in err["details"]["errors"]}
        assert fields["time"]["keyword"] == "pattern"
        assert "'target_timezone' is a required property" in fields["(arguments)"]["problem"]
        assert "time: '25h' does not match" in text_part(bad)
        wrong_type = await client.call_tool("clock__get_current_time", {"timezone": 9})
        assert "timezone: 9 is not of type 'string'" in text_part(wrong_type)
        missing_query = await client.call_tool("find_tools", {"k": 2})
        assert structured(missing_query)["error"]["code"] == "invalid_arguments"
        unknown = await client.call_tool("nope__nothing", {})
        assert structured(unknown)["error"]["code"] == "unknown_tool"
        assert clock.calls == []


async def test_loosely_written_arguments_reach_the_backend_as_read(
    registry: Any, backends: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``"7"`` for an integer is sent as 7, and the call path learns from what the tool got; a value
    that reads as no integer is refused and sent nowhere."""
    _, notes = backends
    gateway = make_gateway(registry, *backends)
    learnt: list[Any] = []
    monkeypatch.setattr(gateway.calls.after_reply, "add", learnt.append)
    async with connected(gateway, "legacy", ListChanged()) as client:
        assert not (await client.call_tool("notes__delete_note", {"note_id": "7"})).is_error
        via_meta = await client.call_tool(
            "call_tool", {"name": "notes__delete_note", "arguments": '{"note_id": 8}'}
        )
        assert not via_meta.is_error
        refused = await client.call_tool("notes__delete_note", {"note_id": "seven"})
        assert structured(refused)["error"]["code"] == "invalid_arguments"
    assert notes.calls == [("delete_note", {"note_id": 7}), ("delete_note", {"note_id": 8})]
    assert [dict(call.arguments) for call in learnt] == [{"note_id": 7}, {"note_id": 8}]


async def test_a_misspelt_name_is_taken_when_it_means_one_tool(registry: Any, backends: Any) -> None:
    """Models drop or respell an id's source part: a name that means one tool once case and separators
    are set aside calls it; one that may mean several calls none and names them."""
    clock, notes = backends
    watch_tools = [tool("watch", "get_current_time", "The time on the wrist watch.", {})]
    gateway = make_gateway(registry, clock, notes, FakeBackend("watch", watch_tools))
    async with connected(gateway, "legacy", ListChanged()) as client:
        for name in ("clock.get_current_time", "Clock/getCurrentTime", "clock_get_current_time"):
            result = await client.call_tool(name, {"timezone": "Asia/Tokyo"})
            assert not result.is_error, (name, result)
        via_meta = await client.call_tool("call_tool", {"name": "convertTime", "arguments": CONVERT})
        assert not via_meta.is_error, via_meta
        assert [c[0] for c in clock.calls] == ["get_current_time"] * 3 + ["convert_time"]
        both = await client.call_tool("get_current_time", {"timezone": "UTC"})
        assert structured(both)["error"]["code"] == "unknown_tool"
        assert "it may mean clock__get_current_time, watch__get_current_time" in text_part(both)
        unknown = await client.call_tool("nope__nothing", {})
        assert "may mean" not in text_part(unknown) and "closest" not in text_part(unknown)
        # a name no tool has, whose words some tools' names share: those are suggested, nothing called
        guessed = await client.call_tool("get_time", {"timezone": "UTC"})
        assert structured(guessed)["error"]["code"] == "unknown_tool"
        suggested = text_part(guessed).split("the closest tools are ")[1].split(":")[0].split(", ")
        assert "clock__get_current_time" in suggested and not any(n.startswith("notes__") for n in suggested)
        assert len(clock.calls) == 4


async def test_unavailable_backend_is_hidden_and_calls_fail_clearly(registry: Any, backends: Any) -> None:
    clock, notes = backends
    gateway = make_gateway(registry, clock, notes)
    watch = ListChanged()
    async with connected(gateway, "legacy", watch) as client:
        await client.call_tool("find_tools", {"query": "what time is it in Tokyo"})
        await watch.wait()
        clock.up = False
        await watch.wait()  # availability flip re-publishes
        assert not any(n.startswith("clock__") for n in names(await client.list_tools()))
        doc = structured(await client.call_tool("find_tools", {"query": "what time is it in Tokyo"}))
        assert all(not t["name"].startswith("clock__") for t in doc["tools"])
        down = await client.call_tool("clock__get_current_time", {"timezone": "UTC"})
        assert down.is_error and structured(down)["error"]["code"] == "unavailable"
        assert "'clock' is not connected" in text_part(down)
        clock.up = True
        await watch.wait()
        assert "clock__get_current_time" in names(await client.list_tools())


async def test_backend_failures_become_error_results(registry: Any, backends: Any) -> None:
    clock, _ = backends
    gateway = make_gateway(registry, *backends)
    gateway.proxy._timeout_s = 0.2  # the backend "hangs" past the timeout + margin
    import toolweave.server.calls.proxy as proxy_module

    async with connected(gateway, "auto", ListChanged()) as client:
        clock.behaviour = "raise"
        crashed = await client.call_tool("clock__get_current_time", {"timezone": "UTC"})
        assert structured(crashed)["error"]["code"] == "upstream_error"
        assert "backend exploded" in text_part(crashed)
        clock.behaviour = "hang"
        old_margin = proxy_module._TIMEOUT_MARGIN_S
        proxy_module._TIMEOUT_MARGIN_S = 0.1
        try:
            hung = await client.call_tool("clock__get_current_time", {"timezone": "UTC"})
        finally:
            proxy_module._TIMEOUT_MARGIN_S = old_margin
        assert structured(hung)["error"]["code"] == "timeout"
        clock.behaviour = "answer"
        ok = await client.call_tool("clock__get_current_time", {"timezone": "UTC"})
        assert not ok.is_error


async def test_tool_added_at_run_time_is_findable(registry: Any, backends: Any) -> None:
    clock, notes = backends
    gateway = make_gateway(registry, clock, notes)
    async with connected(gateway, "auto", ListChanged()) as client:
        doc = structured(await client.call_tool("find_tools", {"query": "translate text to French", "k": 3}))
        assert "notes__translate_text" not in [t["name"] for t in doc["tools"]]
        from .helpers import tool

        extra = tool(
            "notes", "translate_text", "Translate a text into another language.", {"text": {"type": "string"}}
        )
        await notes.set_tools([*notes.tools, extra])
        doc = structured(await client.call_tool("find_tools", {"query": "translate text to French", "k": 3}))
        assert doc["tools"][0]["name"] == "notes__translate_text"
        result = await client.call_tool("notes__translate_text", {"text": "bonjour"})
        assert not result.is_error


async def test_sampling_is_forwarded_to_a_handshake_client(registry: Any, backends: Any) -> None:
    clock, _ = backends
    gateway = make_gateway(registry, *backends)
    clock.behaviour = "sample"

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", model="test", content=types.TextContent(text="from-client")
        )

    async with Client(gateway.server, mode="legacy", sampling_callback=sampling) as client:
        await clock.reported.wait()
        result = await client.call_tool("clock__get_current_time", {"timezone": "UTC"})
        assert text_part(result) == "sampled: from-client"
    async with Client(gateway.server, mode="legacy") as client:  # no sampling capability declared
        await clock.reported.wait()
        result = await client.call_tool("clock__get_current_time", {"timezone": "UTC"})
        assert result.is_error and text_part(result) == "no sampler"


async def test_manifest_overrides_catalogs_and_stale_sources(
    registry: Any, backends: Any, tmp_path: Any
) -> None:
    from toolweave.manifest import load_manifest

    from .helpers import tool

    registry.ingest("old", [tool("old", "leftover", "A tool from an upstream no longer configured.", {})])
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "tools.jsonl").write_text(
        json.dumps(
            {"name": "lookup_city", "description": "Find a city.", "parameters": None, "depends_on": []}
        ),
        encoding="utf-8",
    )
    manifest_path = tmp_path / "m.yaml"
    manifest_path.write_text(
        """
servers:
  clock: {command: unused}
  notes: {command: unused}
catalogs:
  - {path: cat, source: cities}
core_tools: [notes__search_notes]
examples:
  clock__convert_time: [what hour is it in Lima when it is noon in Oslo]
dependencies:
  add:
    - {tool: clock__convert_time, depends_on: clock__get_current_time, parameter: time}
""",
        encoding="utf-8",
    )
    manifest = load_manifest(manifest_path)
    clock, notes = backends
    gateway = Gateway(registry, [clock, notes], Settings(home=registry.path), manifest=manifest)
    async with gateway.running():
        with anyio.fail_after(20):
            await clock.reported.wait()
            await notes.reported.wait()
        assert registry.get("notes__search_notes").kind == "core"
        assert registry.get("clock__convert_time").examples == (
            "what hour is it in Lima when it is noon in Oslo",
        )
        with anyio.fail_after(20):  # the manifest's overrides apply once the registry is open
            while not registry.dependencies("clock__convert_time"):
                await anyio.sleep(0.05)
        deps = registry.dependencies("clock__convert_time")  # in this gateway's view ...
        assert [(e.depends_on, e.origin, e.parameter_name) for e in deps] == [
            ("clock__get_current_time", "manifest", "time")
        ]
        assert not registry.graph.dependencies("clock__convert_time")  # ... never in the shared graph
        assert registry.find("cities__lookup_city") is not None
        assert gateway.sources.excluded_sources() == {"old"}  # in the registry, not in this manifest
        # A catalog tool is searchable but has no upstream: calling it says so.
        result = await gateway.proxy.call(registry.get("cities__lookup_city"), {})
        assert result.structured_content["error"]["code"] == "no_backend"


async def test_a_successful_call_keeps_the_turns_request_as_a_usage_example(
    registry: Any, backends: Any
) -> None:
    clock, notes = backends
    gateway = make_gateway(registry, clock, notes)
    async with connected(gateway, "legacy", ListChanged()) as client:
        await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 3})
        assert not (await client.call_tool("clock__get_current_time", {"timezone": "Asia/Tokyo"})).is_error
        await client.call_tool("find_tools", {"query": "note down the milk", "k": 3})
        notes.behaviour = "raise"  # a failed call teaches nothing
        assert (await client.call_tool("notes__create_note", {"title": "milk", "body": "2 l"})).is_error
        assert registry.flush_observations()  # what the flusher does on its cadence
        assert stored_examples(registry.path, "clock__get_current_time") == ["what time is it in Tokyo"]
        assert stored_examples(registry.path, "notes__create_note") == []


async def test_weak_matches_are_listed_but_not_published(registry: Any, backends: Any) -> None:
    gateway = make_gateway(registry, *backends)
    watch = ListChanged()
    async with connected(gateway, "legacy", watch) as client:
        doc = structured(await client.call_tool("find_tools", {"query": "what time is it in Tokyo"}))
        assert "clock__get_current_time" in [t["name"] for t in doc["tools"]]  # all of them published
        # the list is still filled: the notes tools are named in one line each, callable via call_tool
        weak = [name for name in doc["also_found"] if name.startswith("notes__")]
        assert weak and all(isinstance(doc["also_found"][name], str) for name in weak), doc
        assert not [t for t in doc["tools"] if t["name"].startswith("notes__")], doc
        listed = names(await client.list_tools(cache_mode="bypass"))
        assert "clock__get_current_time" in listed
        assert not [name for name in listed if name.startswith("notes__")], listed


@pytest.mark.parametrize("always_load", [True, False])
async def test_published_tools_ask_claude_code_not_to_defer_them(
    registry: Any, backends: Any, always_load: bool
) -> None:
    gateway = make_gateway(registry, *backends, pinned=("notes__create_note",), always_load=always_load)
    async with connected(gateway, "legacy", ListChanged()) as client:
        listed = (await client.list_tools(cache_mode="bypass")).tools
    assert [t.name for t in listed] == ["find_tools", "call_tool", "notes__create_note"]
    assert all(bool((t.meta or {}).get("anthropic/alwaysLoad")) is always_load for t in listed), listed


async def test_a_busy_gateway_searches_whole_queries(
    registry: Any, backends: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Query decomposition costs a split request ~7 ms more CPU. With ``shed_decomposition_at`` searches
    computing, a new one searches the whole query alone; an answer already cached is given as it is."""
    settings = make_gateway(registry).settings.model_copy(update={"shed_decomposition_at": 2})
    gateway = Gateway(registry, list(backends), settings)
    asked: list[str] = []
    retrieve = gateway.turns._retrieve

    def recording(text: str, params: Any, *args: Any) -> Any:
        asked.append(params.decompose)
        return retrieve(text, params, *args)

    monkeypatch.setattr(gateway.turns, "_retrieve", recording)
    split = "What time is it in Tokyo right now? Then write a note to call Kenji tomorrow."
    async with connected(gateway, "legacy", ListChanged()) as client:

        async def find(query: str) -> list[str]:
            doc = structured(await client.call_tool("find_tools", {"query": query, "k": 3}))
            return [t["name"] for t in doc["tools"]]

        idle = await find(split)
        gateway.turns._searching = 2  # as if two other searches were computing
        assert await find(split) == idle  # the split answer is cached: given as it is
        assert await find("Delete the note about Kenji. Then tell me the time in Lima.")  # searched whole
        gateway.turns._searching = 0
    assert asked == ["sentences", "off"]
    assert gateway.find_cache.hits == 1


async def test_a_re_listed_unchanged_tool_list_keeps_the_cached_answers(registry: Any, backends: Any) -> None:
    """Upstreams re-list (every replica's do, and on each list_changed): only a change to the registry
    sends cached find_tools answers away."""
    clock, notes = backends
    gateway = make_gateway(registry, clock, notes)
    async with connected(gateway, "legacy", ListChanged()) as client:
        query = {"query": "what time is it in Tokyo", "k": 3}
        await client.call_tool("find_tools", query)
        await clock.set_tools(clock.tools)  # the same list again
        await client.call_tool("find_tools", query)
        assert (gateway.find_cache.hits, gateway.find_cache.misses) == (1, 1)
        await clock.set_tools([*clock.tools[:-1]])  # one tool gone
        await client.call_tool("find_tools", query)
        assert (gateway.find_cache.hits, gateway.find_cache.misses) == (1, 2)


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_is_counted_and_audited(
    registry: Any, backends: Any, mode: str, tmp_path: Any
) -> None:
    """A call the client gives up on (its request cancelled, or its session closed) still leaves its
    metrics sample and its audit line, with the outcome ``cancelled``."""
    from toolweave.settings import SecuritySettings

    clock, _ = backends
    audit = tmp_path / "audit.jsonl"
    settings = Settings(
        home=registry.path, call_timeout_s=60, security=SecuritySettings(audit_log=str(audit))
    )
    gateway = Gateway(registry, list(backends), settings)
    clock.behaviour = "hang"
    async with connected(gateway, mode, ListChanged()) as client:
        with anyio.move_on_after(1.0):
            await client.call_tool("clock__get_current_time", {"timezone": "UTC"})
        deadline = anyio.current_time() + 20
        while not audit.exists() or "cancelled" not in audit.read_text():
            assert anyio.current_time() < deadline, "the cancelled call was not audited"
            await anyio.sleep(0.05)
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["tool"], r["outcome"]) for r in lines if r["kind"] == "call"] == [
        ("clock__get_current_time", "cancelled")
    ]
    sample = gateway.metrics.calls.labels("clock__get_current_time", "cancelled")._value.get()
    assert sample == 1


CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}

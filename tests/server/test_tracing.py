"""OpenTelemetry spans (optional): find_tools → retrieve → search, and call → upstream, nested as such."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers import NOTE_EDGE, FakeBackend, ListChanged, notes_tools, time_tools
from .test_gateway import connected, make_gateway

pytestmark = pytest.mark.anyio

sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk is not installed")


@pytest.fixture(scope="module")
def exporter() -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)  # global, once per process: the first provider set wins
    if trace.get_tracer_provider() is not provider:
        pytest.skip("another tracer provider is already installed in this process")
    return memory


async def test_find_tools_and_calls_are_traced_as_nested_spans(registry: Any, exporter: Any) -> None:
    clock, notes = FakeBackend("clock", time_tools()), FakeBackend("notes", notes_tools(), [NOTE_EDGE])
    gateway = make_gateway(registry, clock, notes)
    exporter.clear()
    async with connected(gateway, "legacy", ListChanged()) as client:
        await client.call_tool("find_tools", {"query": "delete a note"})
        await client.call_tool(
            "call_tool", {"name": "clock__get_current_time", "arguments": {"timezone": "UTC"}}
        )
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {
        "toolweave.find_tools",
        "toolweave.search",
        "toolweave.retrieve",
        "toolweave.call",
        "toolweave.upstream",
    } <= set(spans), sorted(spans)

    def parent_of(name: str) -> str | None:
        parent = spans[name].parent
        return next((s.name for s in spans.values() if parent and s.context.span_id == parent.span_id), None)

    assert parent_of("toolweave.retrieve") == "toolweave.find_tools"  # across the worker thread
    assert parent_of("toolweave.search") == "toolweave.retrieve"
    assert parent_of("toolweave.upstream") == "toolweave.call"
    assert spans["toolweave.call"].attributes["toolweave.outcome"] == "ok"
    assert spans["toolweave.upstream"].attributes["source"] == "clock"
    # neither the query nor the arguments are recorded
    recorded = " ".join(str(v) for s in spans.values() for v in s.attributes.values())
    assert "delete a note" not in recorded and "UTC" not in recorded

"""In-test backends and a list_changed watcher usable in both protocol eras."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Unpack

import anyio
import mcp_types as types
from mcp import Client

from tests.e2e.watch import ListChanged, names, watching
from tests.edges import edge
from toolweave.adapters.backend import CallOptions, ToolsCallback
from toolweave.records import DependencyEdge, ToolRecord, make_tool_id
from toolweave.server.gateway import Gateway

__all__ = [
    "FakeBackend",
    "ListChanged",
    "call_held_by_start_up",
    "fake_backends",
    "names",
    "notes_tools",
    "time_tools",
    "tool",
    "watching",
]


def tool(
    source: str, name: str, description: str, properties: dict[str, Any], required: Sequence[str] = ()
) -> ToolRecord:
    return ToolRecord(
        id=make_tool_id(source, name),
        source=source,
        name=name,
        description=description,
        input_schema={"type": "object", "properties": properties, "required": list(required)},
    )


def time_tools() -> list[ToolRecord]:
    return [
        tool(
            "clock",
            "get_current_time",
            "Get the current time in a specific IANA timezone, e.g. Asia/Tokyo or Europe/Paris.",
            {"timezone": {"type": "string", "description": "IANA timezone name"}},
            ["timezone"],
        ),
        tool(
            "clock",
            "convert_time",
            "Convert a time between two timezones.",
            {
                "source_timezone": {"type": "string"},
                "time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"},
                "target_timezone": {"type": "string"},
            },
            ["source_timezone", "time", "target_timezone"],
        ),
    ]


def notes_tools() -> list[ToolRecord]:
    return [
        tool(
            "notes",
            "create_note",
            "Create a text note with a title and a body.",
            {"title": {"type": "string"}, "body": {"type": "string"}},
            ["title"],
        ),
        tool(
            "notes",
            "search_notes",
            "Search saved notes by keyword.",
            {"keyword": {"type": "string"}},
            ["keyword"],
        ),
        tool(
            "notes",
            "delete_note",
            "Delete a note given its note id.",
            {"note_id": {"type": "integer"}},
            ["note_id"],
        ),
    ]


NOTE_EDGE = edge(
    "notes__delete_note", "notes__search_notes", "note_id", reason="the note id comes from a search"
)


class FakeBackend:
    """A Backend in memory: reports ``tools``, answers calls with ``answer`` (or hangs / raises)."""

    def __init__(self, name: str, tools: Sequence[ToolRecord], edges: Sequence[DependencyEdge] = ()) -> None:
        self.name = name
        self.tools = list(tools)
        self.edges = list(edges)
        self.up = True
        self.last_error: str | None = None
        self.call_timeout_s: float | None = None  # no budget of its own: the gateway's applies
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.behaviour: str = "answer"  # answer | hang | raise | sample
        self._on_tools: ToolsCallback | None = None
        self.reported = anyio.Event()

    @property
    def available(self) -> bool:
        return self.up and self._on_tools is not None

    async def run(self, on_tools: ToolsCallback) -> None:
        self._on_tools = on_tools
        await on_tools(self.name, self.tools, self.edges)
        self.reported.set()
        await anyio.sleep_forever()

    async def set_tools(self, tools: Sequence[ToolRecord]) -> None:
        """Like an upstream's list_changed: report the new complete list."""
        self.tools = list(tools)
        assert self._on_tools is not None
        await self._on_tools(self.name, self.tools, self.edges)

    async def call(
        self, tool: ToolRecord, arguments: dict[str, Any], **options: Unpack[CallOptions]
    ) -> types.CallToolResult:
        self.calls.append((tool.name, arguments))
        sampler = options.get("sampler")
        if self.behaviour == "hang":
            await anyio.sleep(3600)
        if self.behaviour == "raise":
            raise RuntimeError("backend exploded")
        if self.behaviour == "sample":
            if sampler is None:
                return types.CallToolResult(content=[types.TextContent(text="no sampler")], is_error=True)
            got = await sampler(
                types.CreateMessageRequestParams(
                    messages=[types.SamplingMessage(role="user", content=types.TextContent(text="hi"))],
                    max_tokens=5,
                )
            )
            if isinstance(got, types.ErrorData):
                text = f"error {got.message}"
            else:
                assert isinstance(got.content, types.TextContent), got
                text = got.content.text
            return types.CallToolResult(content=[types.TextContent(text=f"sampled: {text}")])
        return types.CallToolResult(
            content=[types.TextContent(text=f"{tool.name} {arguments}")],
            _meta={"io.modelcontextprotocol/serverInfo": {"name": "upstream"}},
        )


def fake_backends(gateway: Gateway) -> list[FakeBackend]:
    """The gateway's backends, which a test built from ``FakeBackend``s."""
    backends = list(gateway.sources.backends.values())
    assert all(isinstance(b, FakeBackend) for b in backends), backends
    return [b for b in backends if isinstance(b, FakeBackend)]


async def call_held_by_start_up(
    client: Client, wait_s: float, *releases: Callable[[], None]
) -> types.CallToolResult:
    """Call ``clock__get_current_time`` (Tokyo) while start-up holds it: it must not have returned after
    ``wait_s``; then run each of ``releases``, ``wait_s`` apart, and return the call's result."""
    called: list[types.CallToolResult] = []
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            called.append(await client.call_tool("clock__get_current_time", {"timezone": "Asia/Tokyo"}))

        tg.start_soon(call)
        await anyio.sleep(wait_s)
        assert not called
        for n, release in enumerate(releases):
            if n:
                await anyio.sleep(wait_s)
            release()
    return called[0]

"""Instant start end to end: `toolweave serve` over stdio answers the handshake and `tools/list` even
when its registry cannot be opened, and says why on stderr and in every find_tools/call result."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from .conftest import TOOLWEAVE, gateway_env
from .watch import names

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_registry_of_another_model_is_reported_not_hung(tmp_path: Path, mode: str) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    (registry / "registry.json").write_text(
        json.dumps({"format": "toolweave-registry/1", "embedding_model": "acme/other-embedder", "dim": 384})
    )
    manifest = tmp_path / "m.yaml"
    manifest.write_text("servers:\n  gone:\n    command: toolweave-e2e-no-such-command\n")
    params = StdioServerParameters(
        command=TOOLWEAVE,
        args=["serve", "--manifest", str(manifest), "--registry", str(registry)],
        env=gateway_env(),
    )
    with (tmp_path / "gateway.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            assert names(await client.list_tools(cache_mode="bypass")) == ["find_tools", "call_tool"]
            found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo"})
            assert found.is_error
            message = text(found)
            prefix = "unavailable: the tool registry could not be opened: ModelMismatchError"
            assert message.startswith(prefix)
            assert "acme/other-embedder" in message and "toolweave reindex" in message
            called = await client.call_tool("gone__anything", {})
            assert text(called) == message
    logs = (tmp_path / "gateway.log").read_text()
    errors = [line for line in logs.splitlines() if " ERROR " in line and "could not be opened" in line]
    assert errors and "acme/other-embedder" in errors[0], logs[-3000:]

"""`toolweave serve` in front of a real pydantic-typed ``MCPServer`` upstream (tests/upstreams/typed.py).

Arguments written loosely reach the upstream as it would have read them, in both protocol eras: the
upstream alone takes ``"3"`` for an integer, ``"false"`` for a boolean and a list sent as JSON text; the
gateway used to refuse all three with ``invalid_arguments``, so a call that works without it failed
through it. What cannot be read as the schema's type is still refused, and reaches no tool.

An upstream's progress reports reach the client that asked for them, over streamable HTTP and stdio."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.results import call_through
from tests.upstreams import typed

from .conftest import TOOLWEAVE, UPSTREAMS, gateway_env, start_http_gateway, stop, until_callable

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

CLOSE, ALARM, TAG = "desk__close_ticket", "desk__set_alarm", "desk__tag_items"
EXPORT = "desk__export_report"


def answer_of(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict), result.content
    return result.structured_content


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result.content
    assert isinstance(result.structured_content, dict), result.content
    error: dict[str, Any] = result.structured_content["error"]
    return error


async def test_loosely_typed_arguments_reach_a_pydantic_upstream(tmp_path: Path) -> None:
    async with Client(typed.app) as direct:  # the same server in process: what it takes on its own
        assert not (await direct.call_tool("close_ticket", {"ticket_id": "1"})).is_error

    manifest = tmp_path / "gw.yaml"
    manifest.write_text(
        f"servers:\n  desk:\n    command: {sys.executable}\n    args: [{UPSTREAMS / 'typed.py'}]\n",
        encoding="utf-8",
    )
    gateway = start_http_gateway(manifest, tmp_path / "registry", tmp_path / "gw.log")
    try:
        await until_callable(gateway.url, CLOSE, 300)
        for ticket, mode in ((2, "legacy"), (3, "auto")):
            async with Client(gateway.url, mode=mode) as client:
                closed = answer_of(await client.call_tool(CLOSE, {"ticket_id": f" {ticket} "}))
                assert closed["closed"] == ticket and closed["tickets"][str(ticket)] == "closed"

                alarm = answer_of(
                    await client.call_tool(
                        ALARM, {"hour": "7", "enabled": "False", "minutes": "1.5", "label": None}
                    )
                )
                assert alarm == {
                    "hour": [7, "int"],
                    "enabled": [False, "bool"],
                    "minutes": [1.5, "float"],
                    "label": ["", "str"],  # null for an optional string: left out, its default taken
                }

                # through call_tool, its own arguments sent as JSON text, a list and a model inside
                inner = {"items": "[4, 5]", "options": json.dumps({"priority": "2", "notify": "true"})}
                tagged = await call_through(client, TAG, inner)
                assert tagged["items"] == [[4, 5], "list"]
                assert tagged["options"] == {"priority": 2, "notify": True}
                as_text = await client.call_tool(
                    "call_tool", {"name": TAG, "arguments": json.dumps({"items": [6]})}
                )
                assert answer_of(as_text)["items"] == [[6], "list"]

                found = answer_of(await client.call_tool("find_tools", {"query": "close a ticket", "k": "1"}))
                assert [t["name"] for t in found["tools"]][:1] == [CLOSE]

                # what is no integer stays refused, naming the field; the tool is not reached
                for wrong in ("ticket_001", "1.5", "", "1_0"):
                    refused = error_of(await client.call_tool(CLOSE, {"ticket_id": wrong}))
                    assert refused["code"] == "invalid_arguments", refused
                    assert refused["details"]["errors"][0]["field"] == "ticket_id"
                refused = error_of(await client.call_tool(ALARM, {"hour": 7, "label": 5}))
                assert refused["code"] == "invalid_arguments"  # a number is not made text
        async with Client(gateway.url, mode="legacy") as client:
            state = await call_through(client, CLOSE, {"ticket_id": 4})
        assert state["tickets"] == {"1": "open", "2": "closed", "3": "closed", "4": "closed"}
    finally:
        stop(gateway.proc)


async def test_an_upstreams_progress_reaches_the_client_that_asked_for_it(tmp_path: Path) -> None:
    """``notifications/progress`` of a proxied call reach the caller that gave a progress token, over
    streamable HTTP (both eras) and stdio (where such a call leaves the relay for the SDK's path)."""
    manifest = tmp_path / "gw.yaml"
    manifest.write_text(
        f"servers:\n  desk:\n    command: {sys.executable}\n    args: [{UPSTREAMS / 'typed.py'}]\n",
        encoding="utf-8",
    )
    registry = tmp_path / "registry"

    async def exported(client: Client) -> list[tuple[float, float | None, str | None]]:
        seen: list[tuple[float, float | None, str | None]] = []

        async def heard(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        # first a call nobody watches (on stdio the relay serves such calls once the session is known)
        assert answer_of(await client.call_tool(EXPORT, {"pages": 2})) == {"pages": 2}
        answer = await client.call_tool(EXPORT, {"pages": 3}, progress_callback=heard)
        assert answer_of(answer) == {"pages": 3}
        return seen

    expected = [(1.0, 3.0, "page 1 of 3"), (2.0, 3.0, "page 2 of 3"), (3.0, 3.0, "page 3 of 3")]
    gateway = start_http_gateway(manifest, registry, tmp_path / "gw.log")
    try:
        await until_callable(gateway.url, EXPORT, 300)
        for mode in ("legacy", "auto"):
            async with Client(gateway.url, mode=mode) as client:
                assert await exported(client) == expected, mode
    finally:
        stop(gateway.proc)
    params = StdioServerParameters(
        command=TOOLWEAVE,
        args=["serve", "--manifest", str(manifest), "--registry", str(registry)],
        env=gateway_env(),
    )
    with (tmp_path / "stdio.log").open("w") as errlog:
        for mode in ("legacy", "auto"):
            async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                assert await exported(client) == expected, mode

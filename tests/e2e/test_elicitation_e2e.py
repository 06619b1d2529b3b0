"""`toolweave serve` in front of a real upstream that asks its client's user for input (elicitation):
the question reaches the client that made the call, over streamable HTTP and stdio, and the user's answer
reaches the tool. A client that cannot be asked (none declared, or a 2026-era client) gets the tool's
error saying so, and the gateway serves on."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from .conftest import TOOLWEAVE, UPSTREAMS, gateway_env, start_http_gateway, stop, until_callable

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

CONFIRM, ECHO = "dyn__confirm", "dyn__echo"


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


class User:
    """The client's user: answers each question it is shown, and remembers it."""

    def __init__(self) -> None:
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"sure": True})


async def confirmed(client: Client, user: User) -> None:
    """One form and one URL asked through the gateway, and answered by ``user``."""
    assert text(await client.call_tool(ECHO, {"text": "first"})) == "echo:first"  # the relay's path on stdio
    answer = await client.call_tool(CONFIRM, {"what": "delete the branch"})
    assert not answer.is_error and text(answer) == "accept: {'sure': True}", answer.content
    answer = await client.call_tool(CONFIRM, {"what": "sign in", "url": "https://login.example/device"})
    assert not answer.is_error and text(answer) == "decline: None", answer.content
    form, url = user.asked
    assert isinstance(form, types.ElicitRequestFormParams) and form.message == "Really delete the branch?"
    assert form.requested_schema["properties"] == {"sure": {"type": "boolean"}}
    assert isinstance(url, types.ElicitRequestURLParams) and url.url == "https://login.example/device"
    assert url.elicitation_id  # a 2026-era upstream gives none; a handshake-era client requires one


async def refused(client: Client) -> None:
    answer = await client.call_tool(CONFIRM, {"what": "delete the branch"})
    assert answer.is_error and "elicitation not supported by the client" in text(answer), answer.content
    assert text(await client.call_tool(ECHO, {"text": "still here"})) == "echo:still here"


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_an_upstreams_question_reaches_the_user_of_the_call(tmp_path: Path, era: str) -> None:
    """``era``: the upstream's protocol (it asks through ``InputRequiredResult`` or a request of its own)."""
    manifest = tmp_path / "gw.yaml"
    manifest.write_text(
        f"servers:\n  dyn:\n    command: {sys.executable}\n    args: [{UPSTREAMS / 'dynamic.py'}, stdio]\n"
        f"    protocol: {era}\n",
        encoding="utf-8",
    )
    registry = tmp_path / "registry"
    gateway = start_http_gateway(manifest, registry, tmp_path / "gw.log")
    try:
        await until_callable(gateway.url, ECHO, 60)
        user = User()
        async with Client(gateway.url, mode="legacy", elicitation_callback=user) as client:
            await confirmed(client, user)
        async with Client(gateway.url, mode="legacy") as client:  # declared no elicitation
            await refused(client)
        async with Client(gateway.url, mode="auto") as client:  # 2026 era: no requests to the client
            await refused(client)
    finally:
        stop(gateway.proc)
    if era == "legacy":
        return  # stdio's own path (the relay leaves such a client's calls to the SDK) once is enough
    params = StdioServerParameters(
        command=TOOLWEAVE,
        args=["serve", "--manifest", str(manifest), "--registry", str(registry)],
        env=gateway_env(),
    )
    with (tmp_path / "stdio.log").open("w") as errlog:
        user = User()
        async with Client(
            stdio_client(params, errlog=errlog), mode="legacy", elicitation_callback=user
        ) as client:
            await confirmed(client, user)
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            await refused(client)

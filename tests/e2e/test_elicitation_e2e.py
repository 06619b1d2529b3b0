"""`toolweave serve` in front of a real upstream that asks its client's user for input (elicitation):
the question reaches the client that made the call, over streamable HTTP and stdio, and the user's answer
reaches the tool. A client that cannot be asked (none declared, or a 2026-era client) gets the tool's
error saying so, and the gateway serves on. The TypeScript SDK (Claude Code's) gets a form it accepts, and
a URL it never declared it could open is refused for it."""

from __future__ import annotations

import json
import subprocess
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
async def test_an_upstreams_question_reaches_the_user_of_the_call(
    tmp_path: Path, era: str, request: pytest.FixtureRequest
) -> None:
    """``era``: the upstream's protocol (it asks through ``InputRequiredResult`` or a request of its own).
    On stdio the client is the SDK's own in one era and the TypeScript SDK in the other."""
    manifest = tmp_path / "gw.yaml"
    manifest.write_text(
        f"servers:\n  dyn:\n    command: {sys.executable}\n    args: [{UPSTREAMS / 'dynamic.py'}, stdio]\n"
        f"    protocol: {era}\n",
        encoding="utf-8",
    )
    registry = tmp_path / "registry"
    gateway = start_http_gateway(manifest, registry, tmp_path / "gw.log")
    try:
        await until_callable(gateway.url, ECHO, 300)
        user = User()
        async with Client(gateway.url, mode="legacy", elicitation_callback=user) as client:
            await confirmed(client, user)
        async with Client(gateway.url, mode="legacy") as client:  # declared no elicitation
            await refused(client)
        async with Client(gateway.url, mode="auto") as client:  # 2026 era: no requests to the client
            await refused(client)
    finally:
        stop(gateway.proc)
    if era == "legacy":  # the same registry (built above) on stdio, for Claude Code's SDK
        typescript_client_gets_the_form_only(
            request.getfixturevalue("ts_client"), manifest, registry, tmp_path
        )
        return
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


def typescript_client_gets_the_form_only(
    ts_client: Path, manifest: Path, registry: Path, tmp_path: Path
) -> None:
    """tests/e2e/ts_elicit.mjs, which declares elicitation as Claude Code does (forms only), over stdio."""
    gateway = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    calls = [{"what": "delete the branch"}, {"what": "sign in", "url": "https://login.example/device"}]
    with (tmp_path / "node.log").open("ab") as err:
        done = subprocess.run(
            [
                "node",
                str(ts_client.with_name("ts_elicit.mjs")),
                json.dumps(gateway),
                CONFIRM,
                json.dumps(calls),
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            env=gateway_env(),
            timeout=600,
        )
    assert done.returncode == 0, (tmp_path / "node.log").read_text(errors="replace")[-3000:]
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    form, url = seen["answers"]
    assert form == "accept: {'sure': True}", seen
    assert "URL elicitation not supported by the client" in url, seen
    assert [asked["message"] for asked in seen["asked"]] == ["Really delete the branch?"], seen

"""`toolweave serve` as a subprocess, real clients, real upstreams: stdio, streamable HTTP and SSE,
both protocol eras, an upstream killed and restarted, broken upstreams, bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client

from tests.registry.demo import stored_examples
from tests.results import text

from .conftest import TOOLWEAVE, Upstream, gateway_env, start_http_gateway, stop, write_manifest
from .watch import ListChanged, names, watching

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

MODES = ["legacy", "auto"]
LONG_NAME = "fetch_the_quarterly_financial_statements_for_every_registered_subsidiary_company"


def doc(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return result.structured_content


async def scenario(client: Client, watch: ListChanged) -> None:
    """The acceptance walk-through, against whatever transport/era ``client`` uses."""
    first = names(await client.list_tools(cache_mode="bypass"))
    if first == ["find_tools", "call_tool"]:
        # Instant start: answered before the registry opened or the upstream connected; the pinned
        # tool follows with list_changed.
        await watch.wait(60)
        first = names(await client.list_tools(cache_mode="bypass"))
    assert first == ["find_tools", "call_tool", "dyn__echo"]  # meta-tools + pinned

    found = await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 3})
    by_name = {t["name"]: t for t in doc(found)["tools"]}
    assert "time__get_current_time" in by_name, list(by_name)
    assert by_name["time__get_current_time"]["input_schema"]["required"] == ["timezone"]
    assert doc(found)["tool_list_changed"] is True
    await watch.wait()
    listed = names(await client.list_tools(cache_mode="bypass"))
    assert "time__get_current_time" in listed

    now = await client.call_tool("time__get_current_time", {"timezone": "Asia/Tokyo"})
    assert not now.is_error, text(now)
    answer = json.loads(text(now))  # mcp-server-time's own answer
    assert answer["timezone"] == "Asia/Tokyo" and answer["datetime"].endswith("+09:00")

    unpublished = await client.call_tool("call_tool", {"name": "dyn__big", "arguments": {"size": 5}})
    assert "dyn__big" not in listed
    assert text(unpublished) == "xxxxx"

    before = await watch.flushed(client)
    listed = names(await client.list_tools(cache_mode="bypass"))
    assert "dyn__big" in listed  # in use now: published after the call (into free room)
    again = await client.call_tool("find_tools", {"query": "what time is it in Tokyo", "k": 3})
    assert doc(again)["tool_list_changed"] is False
    assert await watch.flushed(client) == before
    assert names(await client.list_tools(cache_mode="bypass")) == listed

    bad = await client.call_tool("time__get_current_time", {"timezone": 5})
    assert bad.is_error
    assert doc(bad)["error"]["code"] == "invalid_arguments"
    assert "timezone: 5 is not of type 'string'" in text(bad)


async def added_at_run_time(client: Client) -> None:
    """The upstream adds a tool (with a name too long for clients) while the gateway runs."""
    added = await client.call_tool("call_tool", {"name": "dyn__add_tool", "arguments": {"name": LONG_NAME}})
    assert not added.is_error, text(added)
    with anyio.fail_after(20):
        while True:
            tools = doc(
                await client.call_tool("find_tools", {"query": "quarterly financial statements subsidiary"})
            )
            hit = [t for t in tools["tools"] if "quarterly" in t["name"]]
            if hit:
                break
            await anyio.sleep(0.2)
    name = hit[0]["name"]
    assert len(name) <= 64 and name.startswith("dyn__fetch_the_quarterly")
    ran = await client.call_tool(name, {})
    assert text(ran) == f"{LONG_NAME} ran"


@pytest.mark.parametrize("mode", MODES)
async def test_stdio(mode: str, upstream: Upstream, registry_copy: Path, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", upstream.url)
    params = StdioServerParameters(
        command=TOOLWEAVE,
        args=["serve", "--manifest", str(manifest), "--registry", str(registry_copy)],
        env=gateway_env(),
    )
    watch = ListChanged()
    with (tmp_path / "gateway.log").open("w") as errlog:
        # stdio_client's errlog must be a real file: the gateway's stderr (its logs) goes there.
        from mcp.client.stdio import stdio_client

        async with Client(
            stdio_client(params, errlog=errlog), mode=mode, message_handler=watch.on_message
        ) as client:
            assert (client.protocol_version == "2026-07-28") == (mode == "auto")
            async with watching(client, watch):
                await scenario(client, watch)
                await added_at_run_time(client)
    logs = (tmp_path / "gateway.log").read_text()
    assert "toolweave-e2e-no-such-command" in logs  # the missing upstream was reported ...
    # ... and so was the one that never answers initialize (its connect timeout is 2 s)
    assert any("'silent'" in line and "initialize" in line for line in logs.splitlines()), logs[-3000:]


@pytest.mark.parametrize("mode", MODES)
async def test_streamable_http(mode: str, upstream: Upstream, registry_copy: Path, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", upstream.url)
    gateway = start_http_gateway(manifest, registry_copy, tmp_path / "gateway.log")
    try:
        watch = ListChanged()
        async with Client(gateway.url, mode=mode, message_handler=watch.on_message) as client:
            assert (client.protocol_version == "2026-07-28") == (mode == "auto")
            async with watching(client, watch):
                await scenario(client, watch)
                if mode == "auto":
                    await upstream_killed_and_restarted(client, upstream)
                else:
                    await added_at_run_time(client)
        assert gateway.proc.poll() is None
    finally:
        stop(gateway.proc)
    # the successful call's request was buffered as a usage example (usage_flush_s is a minute): the
    # graceful shutdown (SIGTERM) wrote it
    assert stored_examples(registry_copy, "time__get_current_time")[:1] == ["what time is it in Tokyo"], (
        gateway.logs()[-3000:]
    )


async def upstream_killed_and_restarted(client: Client, upstream: Upstream) -> None:
    assert text(await client.call_tool("dyn__echo", {"text": "hi"})) == "echo:hi"
    upstream.kill()
    failed = await client.call_tool("dyn__echo", {"text": "hi"})
    assert failed.is_error, text(failed)
    # The gateway is alive and its other upstream still answers.
    assert not (await client.call_tool("time__get_current_time", {"timezone": "UTC"})).is_error
    with anyio.fail_after(20):  # the dead upstream is noticed (HTTP upstreams are probed on failure)
        while "dyn__echo" in names(await client.list_tools(cache_mode="bypass")):
            await anyio.sleep(0.2)
    down = await client.call_tool("dyn__echo", {"text": "hi"})
    assert doc(down)["error"]["code"] == "unavailable"
    upstream.start()
    with anyio.fail_after(40):  # reconnect with backoff
        while (await client.call_tool("dyn__echo", {"text": "back"})).is_error:
            await anyio.sleep(0.3)
    assert "dyn__echo" in names(await client.list_tools(cache_mode="bypass"))


async def test_legacy_sse(upstream: Upstream, registry_copy: Path, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", upstream.url)
    gateway = start_http_gateway(manifest, registry_copy, tmp_path / "gateway.log", transport="sse")
    try:
        watch = ListChanged()
        # Legacy SSE clients speak the handshake era (mode="auto" would reach 2026 over SSE too).
        async with Client(sse_client(gateway.url), mode="legacy", message_handler=watch.on_message) as client:
            assert client.protocol_version != "2026-07-28"
            await scenario(client, watch)
    finally:
        stop(gateway.proc)


def test_invalid_manifest_exits_1_naming_file_line_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers:\n  time:\n    command: python\n    argz: [x]\n", encoding="utf-8")
    run = subprocess.run(
        [TOOLWEAVE, "serve", "--manifest", str(bad), "--registry", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=60,
        env=gateway_env(),
    )
    assert run.returncode == 1
    assert f"{bad}:4:5: servers.time.argz: unknown key" in run.stderr
    assert run.stdout == ""  # stdout belongs to the protocol, even when failing


@pytest.mark.skipif(shutil.which("npx") is None, reason="the MCP Inspector CLI needs node/npx")
def test_mcp_inspector_cli_lists_and_calls(upstream: Upstream, registry_copy: Path, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "m.yaml", upstream.url)
    base = [
        "npx",
        "-y",
        "@modelcontextprotocol/inspector",
        "--cli",
        TOOLWEAVE,
        "serve",
        "--manifest",
        str(manifest),
        "--registry",
        str(registry_copy),
    ]

    def inspector(*args: str) -> dict[str, Any]:
        run = subprocess.run([*base, *args], capture_output=True, text=True, timeout=180, env=gateway_env())
        if run.returncode != 0 and "ENOTFOUND" in run.stderr + run.stdout:
            pytest.skip("npx could not download the MCP Inspector (offline, empty npm cache)")
        assert run.returncode == 0, run.stderr[-2000:]
        return json.loads(run.stdout)

    listed = [t["name"] for t in inspector("--method", "tools/list")["tools"]]
    # A one-shot client lists once, right after spawning: instant start answers before the registry
    # is open, so the pinned tool may not be there yet (it follows with list_changed).
    assert listed in (["find_tools", "call_tool"], ["find_tools", "call_tool", "dyn__echo"])
    called = inspector(
        "--method",
        "tools/call",
        "--tool-name",
        "call_tool",
        "--tool-arg",
        "name=time__get_current_time",
        "--tool-arg",
        'arguments={"timezone": "Europe/Paris"}',
    )
    assert json.loads(called["content"][0]["text"])["timezone"] == "Europe/Paris"

"""MCPBackend against real upstream processes: stdio and streamable HTTP, both protocol eras.

Each test starts real subprocess upstreams (tests/upstreams/, mcp-server-time); no mocks.
"""

from __future__ import annotations

import os
import signal
import sys

import anyio
import mcp_types as types
import pytest

from tests.adapters.mcp.mcp_harness import DYNAMIC, SILENT, HttpUpstream, running
from toolweave.adapters.backend import Backend
from toolweave.adapters.mcp import MCPBackend
from toolweave.adapters.mcp.config import stdio_environment
from toolweave.manifest import HttpServer, SseServer, StdioServer
from toolweave.records import ToolRecord

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

DYNAMIC_TOOLS = ["add_tool", "ask_llm", "big", "confirm", "crash", "echo", "fail", "pid", "slow"]


def stdio(*args: str, protocol: str = "auto", command: str = sys.executable) -> StdioServer:
    return StdioServer(transport="stdio", command=command, args=list(args), protocol=protocol)


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def fake_llm(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    question = params.messages[0].content
    assert isinstance(question, types.TextContent)
    return types.CreateMessageResult(
        role="assistant", model="fake", content=types.TextContent(text=f"answer to {question.text}")
    )


async def fake_user(params: types.ElicitRequestParams) -> types.ElicitResult:
    assert isinstance(params, types.ElicitRequestFormParams), params
    assert params.message == "Really delete?" and params.requested_schema["required"] == ["sure"]
    return types.ElicitResult(action="accept", content={"sure": True})


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_stdio_upstream_lifecycle(protocol: str) -> None:
    """List (all pages), call, list_changed, sampling, errors, timeout, crash and reconnect — one era each."""
    backend = MCPBackend("dyn", stdio(DYNAMIC, "stdio", protocol=protocol), connect_timeout_s=15)
    assert isinstance(backend, Backend)
    async with running(backend) as h:
        await h.wait(lambda: backend.available and bool(h.reports))
        # The upstream pages 3 tools at a time: all 9 arrive in one report.
        assert h.names == DYNAMIC_TOOLS
        assert h.statuses == [True]
        assert backend.protocol_version == ("2026-07-28" if protocol == "auto" else "2025-11-25")
        echo = h.tool("echo")
        assert echo.id == "dyn__echo" and echo.title == "Echo" and echo.backend["tool"] == "echo"
        assert echo.input_schema["required"] == ["text"] and "read-only" in echo.tags

        result = await backend.call(echo, {"text": "hi"}, timeout_s=10)
        assert not result.is_error and text(result) == "echo:hi"
        # the 2026 era stamps a result with its server: the raw hop drops that stamp as it parses the
        # answer (``raw._drop_stamp``), before the gateway stamps its own; the proxy drops any left
        # (tests/server/test_proxy.py)
        assert "io.modelcontextprotocol/serverInfo" not in (result.meta or {})

        # Sampling goes to the sampler of the call; without one the upstream is told it is unsupported.
        ask = h.tool("ask_llm")
        result = await backend.call(ask, {"text": "why"}, timeout_s=10, sampler=fake_llm)
        assert text(result) == "llm said: answer to why"
        result = await backend.call(ask, {"text": "why"}, timeout_s=10)
        assert result.is_error and "sampling not supported by the client" in text(result)
        # Elicitation likewise: the call's own elicitor asks the user.
        confirm = h.tool("confirm")
        result = await backend.call(confirm, {"what": "delete"}, timeout_s=10, elicitor=fake_user)
        assert text(result) == "accept: {'sure': True}"
        result = await backend.call(confirm, {"what": "delete"}, timeout_s=10, sampler=fake_llm)
        assert result.is_error and "elicitation not supported by the client" in text(result)

        result = await backend.call(h.tool("fail"), {}, timeout_s=10)
        assert result.is_error and text(result) == "it failed on purpose"

        result = await backend.call(h.tool("big"), {"size": 5_000}, timeout_s=10)
        assert text(result) == "x" * 5_000  # whole: the proxy finishes every backend's result once

        result = await backend.call(h.tool("slow"), {"seconds": 30}, timeout_s=0.5)
        assert result.is_error and "'dyn'" in text(result) and "'slow'" in text(result)
        assert "no answer within 0.5 s" in text(result)

        # A tool added at run time is re-reported through on_tools (list_changed in this era).
        result = await backend.call(h.tool("add_tool"), {"name": "fresh"}, timeout_s=10)
        assert text(result) == "added fresh"
        await h.wait(lambda: "fresh" in h.names, what="list_changed re-report")
        assert sorted(h.names) == sorted([*DYNAMIC_TOOLS, "fresh"])

        # The process dies mid-call: a clear is_error result, unavailable, then back after backoff.
        reports_before = len(h.reports)
        result = await backend.call(h.tool("crash"), {}, timeout_s=10)
        assert result.is_error and "'dyn'" in text(result) and "'crash'" in text(result)
        assert not backend.available
        await h.wait(lambda: h.statuses[-2:] == [False, True] and backend.available, what="reconnect")
        assert len(h.reports) > reports_before and h.names == DYNAMIC_TOOLS  # fresh process, fresh list
        result = await backend.call(echo, {"text": "back"}, timeout_s=10)
        assert text(result) == "echo:back"

        # Killed from outside while idle: noticed without any call, then reconnected.
        pid = int(text(await backend.call(h.tool("pid"), {}, timeout_s=10)))
        os.kill(pid, signal.SIGKILL)
        await h.wait(lambda: h.statuses[-1] is False, what="idle loss noticed")
        await h.wait(lambda: backend.available, what="second reconnect")
        assert int(text(await backend.call(h.tool("pid"), {}, timeout_s=10))) != pid


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_upstream_entry_without_elicitation_never_asks_the_client(protocol: str) -> None:
    """``elicitation: false``: the upstream is told the client cannot be asked, whoever calls."""
    asked: list[types.ElicitRequestParams] = []

    async def recording_user(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"sure": True})

    config = stdio(DYNAMIC, "stdio", protocol=protocol).model_copy(update={"elicitation": False})
    backend = MCPBackend("dyn", config, connect_timeout_s=15)
    async with running(backend) as h:
        await h.wait(lambda: backend.available and bool(h.reports))
        result = await backend.call(
            h.tool("confirm"), {"what": "delete"}, timeout_s=10, elicitor=recording_user
        )
        assert result.is_error and "elicitation not supported" in text(result).lower()
        assert asked == []


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_the_time_the_user_takes_to_answer_is_not_the_upstreams(protocol: str) -> None:
    """A call whose user answers the upstream's question after the call's whole budget still succeeds:
    the budget stops while the client answers (the upstream's own time still counts)."""

    async def slow_user(params: types.ElicitRequestParams) -> types.ElicitResult:
        await anyio.sleep(1.5)
        return await fake_user(params)

    backend = MCPBackend("dyn", stdio(DYNAMIC, "stdio", protocol=protocol), connect_timeout_s=15)
    async with running(backend) as h:
        await h.wait(lambda: backend.available and bool(h.reports))
        confirm = h.tool("confirm")
        result = await backend.call(confirm, {"what": "delete"}, timeout_s=1, elicitor=slow_user)
        assert text(result) == "accept: {'sure': True}"
        result = await backend.call(h.tool("slow"), {"seconds": 30}, timeout_s=1, elicitor=slow_user)
        assert result.is_error and "no answer within 1 s" in text(result)


async def test_mcp_server_time_over_stdio() -> None:
    backend = MCPBackend(
        "time", stdio("-m", "mcp_server_time", "--local-timezone", "UTC"), connect_timeout_s=20
    )
    async with running(backend) as h:
        await h.wait(lambda: backend.available, timeout=25)
        assert {t.id for t in h.reports[-1]} == {"time__get_current_time", "time__convert_time"}
        result = await backend.call(h.tool("get_current_time"), {"timezone": "UTC"}, timeout_s=10)
        assert not result.is_error and "UTC" in text(result)


async def test_a_bare_command_installed_beside_toolweave_runs_without_an_activated_venv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`command: mcp-server-time` finds the server installed next to toolweave although PATH lacks its
    bin directory; only the child's PATH has it first: the gateway's own environment is left alone."""
    bin_dir = os.path.dirname(sys.executable)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    backend = MCPBackend(
        "time", stdio("--local-timezone", "UTC", command="mcp-server-time"), connect_timeout_s=20
    )
    async with running(backend) as h:
        await h.wait(lambda: backend.available, timeout=25)
        assert "time__get_current_time" in {t.id for t in h.reports[-1]}
    assert os.environ["PATH"] == "/usr/bin:/bin"
    assert stdio_environment({}, "/usr/bin")["PATH"] == f"{bin_dir}:/usr/bin"
    assert stdio_environment({"PATH": "/mine"}, "/usr/bin") == {"PATH": "/mine"}  # the entry's own PATH wins


async def test_http_upstream_list_change_kill_restart(http_upstream: HttpUpstream) -> None:
    config = HttpServer(transport="http", url=http_upstream.url, headers={"Authorization": "Bearer ${TOKEN}"})
    # Default probe interval (15 s): the failed call itself must make the backend notice the loss.
    backend = MCPBackend("web", config, connect_timeout_s=10, environ={"TOKEN": "t0ken"}, backoff_max_s=1)
    assert "t0ken" not in repr(backend)
    async with running(backend) as h:
        await h.wait(lambda: backend.available)
        assert h.names == DYNAMIC_TOOLS
        result = await backend.call(h.tool("echo"), {"text": "over http"}, timeout_s=10)
        assert text(result) == "echo:over http"

        await backend.call(h.tool("add_tool"), {"name": "late"}, timeout_s=10)
        await h.wait(lambda: "late" in h.names, what="list_changed over HTTP")

        http_upstream.kill()
        result = await backend.call(h.tool("echo"), {"text": "anyone?"}, timeout_s=5)
        assert result.is_error and "'web'" in text(result)
        await h.wait(lambda: not backend.available and h.statuses[-1] is False, what="loss noticed")
        result = await backend.call(h.tool("echo"), {"text": "anyone?"}, timeout_s=1)
        assert result.is_error and "unavailable" in text(result)

        http_upstream.start()  # same port
        await h.wait(lambda: backend.available, timeout=20, what="reconnect")
        assert h.statuses[-1] is True and h.names == DYNAMIC_TOOLS
        result = await backend.call(h.tool("echo"), {"text": "again"}, timeout_s=10)
        assert text(result) == "echo:again"


async def test_sse_upstream(sse_upstream: HttpUpstream) -> None:
    backend = MCPBackend("legacy", SseServer(transport="sse", url=sse_upstream.url), connect_timeout_s=10)
    async with running(backend) as h:
        await h.wait(lambda: backend.available)
        assert h.names == DYNAMIC_TOOLS
        result = await backend.call(h.tool("echo"), {"text": "sse"}, timeout_s=10)
        assert text(result) == "echo:sse"


async def test_command_not_found_is_reported_and_retried() -> None:
    backend = MCPBackend(
        "ghost", stdio(command="toolweave-no-such-command"), backoff_initial_s=0.1, backoff_max_s=0.2
    )
    async with running(backend) as h:
        await h.wait(lambda: backend.last_error is not None)
        assert backend.last_error is not None
        assert "command 'toolweave-no-such-command' not found" in backend.last_error
        assert not backend.available and h.reports == [] and h.statuses == []
        result = await backend.call(ToolRecord(id="ghost__x", source="ghost", name="x"), {}, timeout_s=0.3)
        assert result.is_error and "upstream 'ghost'" in text(result) and "not found" in text(result)


async def test_initialize_that_never_answers_times_out(caplog: pytest.LogCaptureFixture) -> None:
    backend = MCPBackend("mute", stdio(SILENT), connect_timeout_s=1.0, backoff_initial_s=0.1)
    async with running(backend) as h:
        await h.wait(lambda: backend.last_error is not None, timeout=15)
        assert backend.last_error is not None
        assert "no answer to initialize" in backend.last_error and "1 s" in backend.last_error
        assert not backend.available
    assert any("'mute'" in r.getMessage() and "retrying" in r.getMessage() for r in caplog.records)


async def test_a_call_waiting_for_a_reconnect_spends_one_budget_in_all() -> None:
    """After a stdio upstream crashed, a call made while it reconnects waited for
    it and then got its whole budget again (a 5 s call took 10 s). The wait comes out of the budget:
    the call answers by its deadline, a timeout or not connected, never later."""
    backend = MCPBackend("dyn", stdio(DYNAMIC, "stdio"), backoff_initial_s=1.0, healthy_after_s=0.0)
    async with running(backend) as h:
        await h.wait(lambda: backend.available)
        crashed = await backend.call(h.tool("crash"), {}, timeout_s=10.0)
        assert crashed.is_error and not backend.available  # reconnects in a second or two
        budget = 8.0
        with anyio.fail_after(budget + 1.5):  # before: the wait for the reconnect, then 8 s more
            slow = await backend.call(h.tool("slow"), {"seconds": 30}, timeout_s=budget)
        assert slow.is_error and ("call timeout" in text(slow) or "not connected" in text(slow)), text(slow)

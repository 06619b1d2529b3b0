"""Python agent frameworks through the gateway: a real `toolweave serve` (stdio and streamable HTTP) in
front of the real PyPI time server, the framework's own MCP client, and the framework's own scripted
model, so no LLM and no network is needed.

The demo task is "what time is it in Tokyo?": the model calls `find_tools`, then the published
`time__get_current_time` directly when the framework lists the tools again before its next step, or
`call_tool` when it keeps its first list. Both frameworks here speak the 2026-07-28 era and open no
`subscriptions/listen` stream, so they never hear `list_changed`: which path a run takes depends only
on the framework's tool-list cache, and each test asserts the path it must take, the tools the model
was offered at each step, and mcp-server-time's real answer. A last step calls a tool with a bad
argument and checks the model is shown the upstream's error (an `isError` result), not a crash.

LangChain (`langchain-mcp-adapters` pins `mcp<2`) cannot share this venv: bench/agent_frameworks.py
drives it from a scratch venv.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .conftest import TOOLWEAVE, gateway_env, start_http_gateway, stop
from .test_turnloop_e2e import TOKYO, time_manifest

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

TOOL = "time__get_current_time"
BAD_ZONE = "Mars/Olympus_Mons"
TRANSPORTS = ["stdio", "http"]


@dataclass
class Script:
    """The scripted model's plan, shared by every framework: it records the tool names offered at each
    step and the tools it called, and picks the next call from what it is offered."""

    offered: list[list[str]] = field(default_factory=list)
    called: list[str] = field(default_factory=list)

    def next_call(self, step: int, offered: list[str]) -> tuple[str, dict[str, Any]] | None:
        self.offered.append(offered)
        call: tuple[str, dict[str, Any]] | None
        if step == 0:
            call = ("find_tools", {"query": TOKYO})
        elif step == 1 and TOOL in offered:
            call = (TOOL, {"timezone": "Asia/Tokyo"})
        elif step == 1:
            call = ("call_tool", {"name": TOOL, "arguments": {"timezone": "Asia/Tokyo"}})
        elif step == 2:  # an upstream error must reach the model as an error it can read
            call = ("call_tool", {"name": TOOL, "arguments": {"timezone": BAD_ZONE}})
        else:
            call = None
        if call is not None:
            self.called.append(call[0])
        return call


def flat(shown: Any) -> str:
    """What the model was shown, as one string: JSON text nested in JSON loses its escapes."""
    text = shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
    return text.replace('\\"', '"')


def check_run(script: Script, seen: list[str], keeps_first_list: bool) -> None:
    """``seen``: what the model was shown after each of its tool calls, in order."""
    assert script.called[0] == "find_tools"
    assert f'"name":"{TOOL}"' in seen[0] and '"published":true' in seen[0], seen[0][:2000]
    assert script.offered[0][:2] == ["find_tools", "call_tool"], script.offered
    if keeps_first_list:
        # the tool showing up here means the framework now hears list_changed: update docs/clients.md
        assert TOOL not in script.offered[1], script.offered
        assert script.called[1] == "call_tool"
    else:  # listed again before the next step: the published tool is there, and called directly
        assert TOOL in script.offered[1], script.offered
        assert script.called[1] == TOOL
    # mcp-server-time's real answer, whichever path carried it
    assert "Asia/Tokyo" in seen[1] and re.search(r"T\d\d:\d\d:\d\d\+09:00", seen[1]), seen[1]
    assert "Invalid timezone" in seen[2] and BAD_ZONE in seen[2], seen[2]
    assert len(script.offered) == 4  # find, call, failing call, final answer: no retries, no crash


@asynccontextmanager
async def gateway_target(transport: str, registry: Path, tmp_path: Path) -> AsyncIterator[str | list[str]]:
    """A stdio command line for the framework to spawn, or the URL of an HTTP gateway started here."""
    manifest = time_manifest(tmp_path / "m.yaml")
    command = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    if transport == "stdio":
        yield command
        return
    gateway = start_http_gateway(manifest, registry, tmp_path / "gateway.log")
    try:
        yield gateway.url
        assert gateway.proc.poll() is None, gateway.logs()[-3000:]
    finally:
        stop(gateway.proc)


# --- pydantic-ai: MCPToolset (FastMCP client) + FunctionModel -------------------------------------


async def run_pydantic_ai(
    target: str | list[str], keeps_first_list: bool, log: Path
) -> tuple[Script, list[str]]:
    pytest.importorskip(
        "pydantic_ai", reason="pydantic-ai-slim[mcp] is not installed (pip install -e '.[dev]')"
    )
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    script = Script()

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        call = script.next_call(step, [t.name for t in info.function_tools])
        if call is None:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(call[0], call[1])])

    client: Any
    if isinstance(target, list):
        # keep_alive=False: the gateway ends with the run (FastMCP would keep it for the next one)
        client = StdioTransport(target[0], target[1:], env=gateway_env(), log_file=log, keep_alive=False)
    else:
        client = target
    # cache_tools=True is pydantic-ai's default: the list is fetched once and dropped only on a
    # list_changed it never hears in the 2026 era; False lists again before every model request.
    toolset = MCPToolset(client, cache_tools=keeps_first_list, init_timeout=120, read_timeout=120)
    agent = Agent(FunctionModel(model), toolsets=[toolset])
    result = await agent.run("what time is it in Tokyo?")
    assert result.output == "done"
    seen = [
        flat(part.content if isinstance(part, ToolReturnPart) else part.model_response())
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    ]
    return script, seen


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("keeps_first_list", [True, False], ids=["cached", "relisting"])
async def test_pydantic_ai_agent_answers_through_the_gateway(
    transport: str, keeps_first_list: bool, registry_copy: Path, tmp_path: Path
) -> None:
    async with gateway_target(transport, registry_copy, tmp_path) as target:
        script, seen = await run_pydantic_ai(target, keeps_first_list, tmp_path / "stdio-gateway.log")
    check_run(script, seen, keeps_first_list)


# --- OpenAI Agents SDK: MCPServerStdio / MCPServerStreamableHttp + agents.testing.ScriptedModel -----


async def run_openai_agents(target: str | list[str], keeps_first_list: bool) -> tuple[Script, list[str]]:
    pytest.importorskip("agents.testing", reason="openai-agents is not installed (pip install -e '.[dev]')")
    from agents import Agent, RunConfig, Runner
    from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp
    from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

    script = Script()
    seen: list[str] = []

    def respond(step: int) -> Callable[[ModelCall], Awaitable[Any]]:
        async def answer(call: ModelCall) -> Any:
            if step:  # the output of the previous step's call is the last item of the input
                outputs = [
                    i for i in call.input if isinstance(i, dict) and i.get("type") == "function_call_output"
                ]
                seen.append(flat(outputs[-1]["output"]))
            chosen = script.next_call(step, [t.name for t in call.tools])
            if chosen is None:
                return [assistant_message("done")]
            return [function_call(chosen[0], chosen[1], call_id=f"call-{step}")]

        return answer

    server: MCPServer
    # cache_tools_list=False is the SDK's default: it lists the tools again before every model request.
    if isinstance(target, list):
        params = {"command": target[0], "args": target[1:], "env": gateway_env()}
        server = MCPServerStdio(params, cache_tools_list=keeps_first_list, client_session_timeout_seconds=120)
    else:
        server = MCPServerStreamableHttp(
            {"url": target}, cache_tools_list=keeps_first_list, client_session_timeout_seconds=120
        )
    model = ScriptedModel([ModelStep.respond(respond(step)) for step in range(4)])
    async with server:
        agent = Agent(name="tokyo", model=model, mcp_servers=[server])
        result = await Runner.run(
            agent, "what time is it in Tokyo?", run_config=RunConfig(tracing_disabled=True)
        )
    assert result.final_output == "done"
    model.assert_complete()
    return script, seen


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("keeps_first_list", [True, False], ids=["cached", "relisting"])
async def test_openai_agents_answer_through_the_gateway(
    transport: str, keeps_first_list: bool, registry_copy: Path, tmp_path: Path
) -> None:
    async with gateway_target(transport, registry_copy, tmp_path) as target:
        script, seen = await run_openai_agents(target, keeps_first_list)
    check_run(script, seen, keeps_first_list)

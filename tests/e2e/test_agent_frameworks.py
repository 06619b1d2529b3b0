"""Python agent frameworks through the gateway: a real `toolweave serve` (stdio and streamable HTTP) in
front of the real PyPI time server, the framework's own MCP client, and the framework's own scripted
model, so no LLM and no network is needed.

Each framework runs with its default timeouts (pydantic-ai: 5 s to connect; the OpenAI Agents SDK: 5 s
per request) against a cold gateway, and also with every core kept busy (``machine``): a `find_tools`
that comes while the gateway still starts is answered within 3 s (`startup_call_wait_s`) with a note to
call again, which the scripted model does, as a model would.

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


STARTING = "the gateway is still starting"
MAX_FINDS = 40
"""find_tools calls a scripted run makes at most (all but the last answered "still starting")."""


@dataclass
class Script:
    """The scripted model's plan, shared by every framework: it records the tool names offered at each
    step, what it was shown after each call and the tools it called, and picks the next call from what
    it is offered and shown."""

    offered: list[list[str]] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    called: list[str] = field(default_factory=list)

    def next_call(self, offered: list[str], shown: str | None) -> tuple[str, dict[str, Any]] | None:
        self.offered.append(offered)
        if shown is not None:
            self.shown.append(shown)
        last = self.called[-1] if self.called else None
        done = len(self.called) - self.called.count("find_tools")  # calls after the search
        call: tuple[str, dict[str, Any]] | None
        if last is None or (last == "find_tools" and STARTING in (shown or "")):
            call = ("find_tools", {"query": TOKYO}) if len(self.called) < MAX_FINDS else None
        elif last == "find_tools" and TOOL in offered:
            call = (TOOL, {"timezone": "Asia/Tokyo"})
        elif last == "find_tools":
            call = ("call_tool", {"name": TOOL, "arguments": {"timezone": "Asia/Tokyo"}})
        elif done == 1:  # an upstream error must reach the model as an error it can read
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


def check_run(script: Script, keeps_first_list: bool) -> None:
    starts = script.called.count("find_tools") - 1  # answered "still starting": called again
    assert script.called[: starts + 1] == ["find_tools"] * (starts + 1), script.called
    assert all(STARTING in shown for shown in script.shown[:starts]), script.shown
    found, answered, failed = script.shown[starts:]
    # published: in the answer's tools, not only named under also_found
    assert f'"name":"{TOOL}"' in found.split('"also_found"')[0], found[:2000]
    assert script.offered[0][:2] == ["find_tools", "call_tool"], script.offered
    after_search = script.offered[starts + 1]
    if keeps_first_list:
        # the tool showing up here means the framework now hears list_changed: update docs/clients.md
        assert TOOL not in after_search, script.offered
        assert script.called[starts + 1] == "call_tool"
    else:  # listed again before the next step: the published tool is there, and called directly
        assert TOOL in after_search, script.offered
        assert script.called[starts + 1] == TOOL
    # mcp-server-time's real answer, whichever path carried it
    assert "Asia/Tokyo" in answered and re.search(r"T\d\d:\d\d:\d\d\+09:00", answered), answered
    assert "Invalid timezone" in failed and BAD_ZONE in failed, failed
    assert len(script.offered) == starts + 4  # find, call, failing call, final answer: no retries, no crash


@asynccontextmanager
async def gateway_target(transport: str, registry: Path, tmp_path: Path) -> AsyncIterator[str | list[str]]:
    """A stdio command line for the framework to spawn, or the URL of an HTTP gateway started here."""
    manifest = time_manifest(tmp_path / "m.yaml")
    command = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry)]
    if transport == "stdio":
        yield command
        return
    gateway = start_http_gateway(manifest, registry, tmp_path / "gateway.log", patient=False)
    try:
        yield gateway.url
        assert gateway.proc.poll() is None, gateway.logs()[-3000:]
    finally:
        stop(gateway.proc)


# --- pydantic-ai: MCPToolset (FastMCP client) + FunctionModel -------------------------------------


async def run_pydantic_ai(target: str | list[str], keeps_first_list: bool, log: Path) -> Script:
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
        last = messages[-1] if messages else None
        returned = [
            flat(part.content if isinstance(part, ToolReturnPart) else part.model_response())
            for part in (last.parts if isinstance(last, ModelRequest) else [])
            if isinstance(part, ToolReturnPart | RetryPromptPart)
        ]
        call = script.next_call([t.name for t in info.function_tools], returned[-1] if returned else None)
        if call is None:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(call[0], call[1])])

    client: Any
    if isinstance(target, list):
        # keep_alive=False: the gateway ends with the run (FastMCP would keep it for the next one)
        env = gateway_env(patient=False)  # the gateway's default start-up bound: these clients call again
        client = StdioTransport(target[0], target[1:], env=env, log_file=log, keep_alive=False)
    else:
        client = target
    # cache_tools=True is pydantic-ai's default: the list is fetched once and dropped only on a
    # list_changed it never hears in the 2026 era; False lists again before every model request.
    toolset = MCPToolset(client, cache_tools=keeps_first_list)
    agent = Agent(FunctionModel(model), toolsets=[toolset])
    result = await agent.run("what time is it in Tokyo?")
    assert result.output == "done"
    return script


# The framework's default tool-list behaviour runs on a busy machine too; the other one as it is.
PYDANTIC_AI_RUNS = [(True, "as-is"), (True, "busy"), (False, "as-is")]
OPENAI_AGENTS_RUNS = [(False, "as-is"), (False, "busy"), (True, "as-is")]


def run_id(keeps_first_list: bool, machine: str) -> str:
    return f"{'cached' if keeps_first_list else 'relisting'}-{machine}"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("keeps_first_list", "machine"),
    PYDANTIC_AI_RUNS,
    ids=[run_id(*run) for run in PYDANTIC_AI_RUNS],
    indirect=["machine"],
)
async def test_pydantic_ai_agent_answers_through_the_gateway(
    machine: str, transport: str, keeps_first_list: bool, registry_copy: Path, tmp_path: Path
) -> None:
    async with gateway_target(transport, registry_copy, tmp_path) as target:
        script = await run_pydantic_ai(target, keeps_first_list, tmp_path / "stdio-gateway.log")
    check_run(script, keeps_first_list)


# --- OpenAI Agents SDK: MCPServerStdio / MCPServerStreamableHttp + agents.testing.ScriptedModel -----


async def run_openai_agents(target: str | list[str], keeps_first_list: bool) -> Script:
    pytest.importorskip("agents.testing", reason="openai-agents is not installed (pip install -e '.[dev]')")
    from agents import Agent, RunConfig, Runner
    from agents.mcp import MCPServer, MCPServerStdio, MCPServerStdioParams, MCPServerStreamableHttp
    from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

    script = Script()

    def respond(step: int) -> Callable[[ModelCall], Awaitable[Any]]:
        async def answer(call: ModelCall) -> Any:
            shown = None
            if step:  # the output of the previous step's call is the last item of the input
                outputs = [
                    i for i in call.input if isinstance(i, dict) and i.get("type") == "function_call_output"
                ]
                shown = flat(outputs[-1]["output"])
            chosen = script.next_call([t.name for t in call.tools], shown)
            if chosen is None:
                return [assistant_message("done")]
            return [function_call(chosen[0], chosen[1], call_id=f"call-{step}")]

        return answer

    server: MCPServer
    # cache_tools_list=False is the SDK's default: it lists the tools again before every model request.
    if isinstance(target, list):
        params: MCPServerStdioParams = {
            "command": target[0],
            "args": target[1:],
            "env": gateway_env(patient=False),
        }
        server = MCPServerStdio(params, cache_tools_list=keeps_first_list)
    else:
        server = MCPServerStreamableHttp({"url": target}, cache_tools_list=keeps_first_list)
    model = ScriptedModel([ModelStep.respond(respond(step)) for step in range(MAX_FINDS + 3)])
    async with server:
        agent = Agent(name="tokyo", model=model, mcp_servers=[server])
        result = await Runner.run(
            agent,
            "what time is it in Tokyo?",
            run_config=RunConfig(tracing_disabled=True),
            max_turns=MAX_FINDS + 3,
        )
    assert result.final_output == "done"
    return script


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("keeps_first_list", "machine"),
    OPENAI_AGENTS_RUNS,
    ids=[run_id(*run) for run in OPENAI_AGENTS_RUNS],
    indirect=["machine"],
)
async def test_openai_agents_answer_through_the_gateway(
    machine: str, transport: str, keeps_first_list: bool, registry_copy: Path, tmp_path: Path
) -> None:
    async with gateway_target(transport, registry_copy, tmp_path) as target:
        script = await run_openai_agents(target, keeps_first_list)
    check_run(script, keeps_first_list)

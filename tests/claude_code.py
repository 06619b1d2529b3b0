"""Claude Code driven by a scripted model: what the e2e test (``tests/e2e/test_claude_code_e2e.py``) and
the bench (``bench/claude_code_turns.py``) share.

A scripted Anthropic Messages endpoint on 127.0.0.1 plays the model (``ScriptedModel``): request 1 →
``find_tools``; the next → the time tool directly if listed (``direct``), else through ``call_tool``
(``deferred`` when Claude Code holds it behind its tool search, ``fallback`` when it is in neither its
list nor its deferred set); then a final answer. Every model request's tool names are recorded. Claude
Code itself is the npm package, installed once into a folder of the caller's (``install_claude_code``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = [
    "CLAUDE_CODE",
    "PROMPT",
    "SERVER",
    "STARTING",
    "TIME_TOOL",
    "ScriptedModel",
    "add_toolweave",
    "answer",
    "claude_env",
    "deferred_now",
    "install_claude_code",
    "last_tool_result_for",
    "last_tool_result_text",
    "prefixed",
    "serve_in_thread",
    "tool_use",
]

CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.332"
SERVER = "toolweave"
TIME_TOOL = "time__get_current_time"
STARTING = "the gateway is still starting"
"""What a find_tools answer says when it came while the gateway was starting (server/turns/starting.py)."""
MAX_RESTARTS = 30
PROMPT = "what time is it in Tokyo"


def prefixed(name: str) -> str:
    return f"mcp__{SERVER}__{name}"


class ScriptedModel:
    """Plays the model: decides each answer from the request, records which tools each request carried."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.bodies: list[dict[str, Any]] = []
        """Every model request as sent (``--trace`` keeps them)."""
        self.outcome: str | None = None
        self.first_has_tool: bool | None = None
        self.first_has_meta_tools: bool | None = None
        self.restarts = 0
        self.found: list[str] = []
        """The text of each ``find_tools`` answer the model was given, in order."""
        self.called: str | None = None
        """The text of the time tool's answer (called directly or through ``call_tool``)."""
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self.messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
            ]
        )

    async def count_tokens(self, request: Request) -> Response:
        return JSONResponse({"input_tokens": 100})

    async def messages(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        tools = [t.get("name", "") for t in body.get("tools") or []]
        if not tools:  # a side request (title, summary...): answer briefly
            return answer(body, [{"type": "text", "text": "ok"}], "end_turn")
        self.requests.append({"tools": tools, "at": time.monotonic(), "wall": time.time()})
        if self.first_has_meta_tools is None:  # not deferred: the model sees them and may call them
            self.first_has_meta_tools = {prefixed("find_tools"), prefixed("call_tool")} <= set(tools)
        if prefixed("find_tools") not in tools:  # the gateway was not connected in time for this request
            self.outcome = self.outcome or "not-connected"
            return answer(body, [{"type": "text", "text": "I have no tool for that."}], "end_turn")
        answered = last_tool_result_for(body.get("messages") or [])
        if answered is None:
            self.first_has_tool = prefixed(TIME_TOOL) in tools
            if self.first_has_tool:
                self.outcome = "first"
                return tool_use(body, prefixed(TIME_TOOL), {"timezone": "Asia/Tokyo"})
            return tool_use(body, prefixed("find_tools"), {"query": PROMPT})
        result = last_tool_result_text(body.get("messages") or [])
        if answered == prefixed("find_tools"):
            self.found.append(result)
        if answered == prefixed("find_tools") and STARTING in result and self.restarts < MAX_RESTARTS:
            self.restarts += 1  # the gateway was still starting: as a model would, call it again
            return tool_use(body, prefixed("find_tools"), {"query": PROMPT})
        if answered == prefixed("find_tools"):
            if prefixed(TIME_TOOL) in tools:
                self.outcome = "direct"
                return tool_use(body, prefixed(TIME_TOOL), {"timezone": "Asia/Tokyo"})
            # Claude Code with its tool search on defers a tool listed mid-conversation: it holds it, and
            # says so in a reminder after the tool result (module docstring)
            deferred = prefixed(TIME_TOOL) in deferred_now(body.get("messages") or [])
            self.outcome = "deferred" if deferred else "fallback"
            args = {"name": TIME_TOOL, "arguments": {"timezone": "Asia/Tokyo"}}
            return tool_use(body, prefixed("call_tool"), args)
        if answered in (prefixed(TIME_TOOL), prefixed("call_tool")):
            self.called = result
        return answer(body, [{"type": "text", "text": "It is late in Tokyo."}], "end_turn")


DEFERRED = "deferred tools are now available via ToolSearch"


def deferred_now(messages: list[dict[str, Any]]) -> list[str]:
    """The tools Claude Code announced as deferred (listed, behind its ToolSearch) so far: with tool search
    on, every tool that appears after a conversation's first request is deferred so, in a reminder after
    the next tool result ("... before calling them: mcp__toolweave__time__..."). Announced once: a tool
    published by a turn whose answer said "still starting" is announced after that answer."""
    names: list[str] = []
    for n in range(len(messages)):
        text = last_tool_result_text(messages[: n + 1]) if messages[n].get("role") == "user" else ""
        if DEFERRED in text:
            listed = text.split(DEFERRED, 1)[1].split(":", 1)[-1].split("</system-reminder>", 1)[0]
            names += [name for name in listed.split() if name.startswith("mcp__")]
    return names


def last_tool_result_text(messages: list[dict[str, Any]]) -> str:
    """The text of the tool results the last user message carries."""
    content = messages[-1].get("content") if messages else None
    texts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            inner = block.get("content")
            parts = inner if isinstance(inner, list) else [{"text": inner}]
            texts += [str(p.get("text", "")) for p in parts if isinstance(p, dict)]
    return "\n".join(texts)


def last_tool_result_for(messages: list[dict[str, Any]]) -> str | None:
    """The name of the tool whose result the last user message carries (None: a plain prompt)."""
    if (
        not messages
        or messages[-1].get("role") != "user"
        or not isinstance(messages[-1].get("content"), list)
    ):
        return None
    ids = [b.get("tool_use_id") for b in messages[-1]["content"] if b.get("type") == "tool_result"]
    if not ids:
        return None
    for message in reversed(messages[:-1]):
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id") in ids:
                return str(block.get("name"))
    return None


_counter = iter(range(1, 1_000_000))


def tool_use(body: dict[str, Any], name: str, args: dict[str, Any]) -> Response:
    block = {"type": "tool_use", "id": f"toolu_{next(_counter):06d}", "name": name, "input": args}
    return answer(body, [block], "tool_use")


def answer(body: dict[str, Any], content: list[dict[str, Any]], stop: str) -> Response:
    message = {
        "id": f"msg_{next(_counter):06d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "scripted"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 10},
    }
    if not body.get("stream"):
        return JSONResponse(message)

    def events() -> Any:
        def sse(kind: str, data: dict[str, Any]) -> str:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

        yield sse("message_start", {"message": {**message, "content": [], "stop_reason": None}})
        for i, block in enumerate(content):
            if block["type"] == "text":
                yield sse("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}})
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                yield sse("content_block_start", {"index": i, "content_block": {**block, "input": {}}})
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            yield sse("content_block_delta", {"index": i, "delta": delta})
            yield sse("content_block_stop", {"index": i})
        yield sse(
            "message_delta",
            {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}},
        )
        yield sse("message_stop", {})

    return StreamingResponse(events(), media_type="text/event-stream")


def serve_in_thread(app: Any, port: int) -> uvicorn.Server:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    return server


def install_claude_code(prefix: Path) -> tuple[str | None, str]:
    """Claude Code's ``claude`` installed under ``prefix`` (npm, once): its path, or None and why not
    (no npm, or the install failed: offline)."""
    binary = prefix / "node_modules" / ".bin" / "claude"
    if binary.exists():
        return str(binary), ""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return None, "node/npm not found: Claude Code is an npm package"
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix), CLAUDE_CODE],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 or not binary.exists():
        return None, f"npm install {CLAUDE_CODE} failed (offline?): {done.stderr[-500:]}"
    return str(binary), ""


def claude_env(home: Path, **extra: str) -> dict[str, str]:
    """Claude Code's environment for one run: a home of its own (its settings, its ``claude mcp add``s)."""
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOME=str(home), DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1", **extra)
    env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
    return env


def add_toolweave(claude: str, work: Path, env: dict[str, str], target: list[str] | str, scope: str) -> None:
    """Register the gateway exactly as docs/clients.md says: ``claude mcp add toolweave -- <serve ...>``
    (stdio; ``--scope project`` writes .mcp.json) or ``claude mcp add --transport http toolweave URL``."""
    if isinstance(target, str):
        command = [claude, "mcp", "add", "--transport", "http", SERVER, target]
    else:
        command = [
            claude,
            "mcp",
            "add",
            *(["--scope", scope] if scope != "local" else []),
            SERVER,
            "--",
            *target,
        ]
    subprocess.run(command, env=env, cwd=str(work), check=True, capture_output=True, timeout=120)
    if scope == "project":
        # a project's servers wait for the user's approval; only the user's own settings can give it
        user = Path(env["HOME"]) / ".claude" / "settings.json"
        user.parent.mkdir(parents=True, exist_ok=True)
        current = json.loads(user.read_text()) if user.exists() else {}
        user.write_text(json.dumps({**current, "enabledMcpjsonServers": [SERVER]}))

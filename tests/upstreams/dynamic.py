"""A small real MCP upstream for toolweave's integration tests (low-level ``mcp.server.Server``).

Tools: ``echo`` (text back), ``add_tool`` (adds a tool at run time and announces tools/list_changed
to both protocol eras), ``slow`` (sleeps ``seconds``), ``crash`` (the process exits mid-call),
``big`` (returns ``size`` characters), ``fail`` (answers ``is_error``), ``pid``, ``ask_llm`` (asks the
client's LLM through sampling: handshake era via ``create_message``, 2026 era via
``InputRequiredResult``), ``confirm`` (asks the client's user through elicitation, a form or, given
``url``, a URL to open; both eras likewise). ``tools/list`` pages three tools at a time so clients must
follow cursors.

Usage: python dynamic.py stdio | http PORT | sse PORT   (http: env REQUIRE_BEARER=token demands that token)
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.message import ServerMessageMetadata

PAGE = 3
MODERN = "2026-07-28"


class DynamicServer:
    def __init__(self) -> None:
        self.tools: dict[str, types.Tool] = {}
        self.sessions: set[ServerSession] = set()
        self.bus = InMemorySubscriptionBus()
        self.server = Server(
            "dynamic-test-upstream",
            version="1.0",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
        )
        self.server.middleware.append(self._track)
        orig = self.server.create_initialization_options
        # Advertise tools.listChanged on every transport (the HTTP manager passes no options).
        self.server.create_initialization_options = (  # type: ignore[method-assign]
            lambda no=None, *a, **k: orig(no or NotificationOptions(tools_changed=True), *a, **k)
        )
        text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        self.add("echo", "Echo the text back.", text, title="Echo")
        self.add(
            "add_tool",
            "Add a tool named `name`.",
            {"type": "object", "properties": {"name": {"type": "string"}}},
        )
        self.add(
            "slow",
            "Sleep `seconds` then answer.",
            {"type": "object", "properties": {"seconds": {"type": "number"}}},
        )
        self.add("crash", "Exit the server process in the middle of the call.", {"type": "object"})
        self.add(
            "big",
            "Return `size` characters.",
            {"type": "object", "properties": {"size": {"type": "integer"}}},
        )
        self.add("fail", "Always answers with an error result.", {"type": "object"})
        self.add("ask_llm", "Ask the client's LLM a question.", text)
        self.add("pid", "The server's process id (tests kill it from outside).", {"type": "object"})
        self.add(
            "confirm",
            "Ask the user to confirm `what` (or to open `url`).",
            {"type": "object", "properties": {"what": {"type": "string"}, "url": {"type": "string"}}},
        )

    def add(self, name: str, desc: str, schema: dict[str, Any], title: str | None = None) -> None:
        self.tools[name] = types.Tool(
            name=name,
            title=title,
            description=desc,
            input_schema=schema,
            annotations=types.ToolAnnotations(read_only_hint=name == "echo"),
        )

    async def _track(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "notifications/initialized":
            self.sessions.add(ctx.session)
            ctx.session._connection.exit_stack.callback(self.sessions.discard, ctx.session)
        return result

    async def announce(self) -> None:
        for s in list(self.sessions):
            try:
                await s.send_tool_list_changed()
            except Exception:
                self.sessions.discard(s)
        await self.bus.publish(ToolsListChanged())

    async def list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        start = int(params.cursor) if params and params.cursor else 0
        names = sorted(self.tools)
        page = [self.tools[n] for n in names[start : start + PAGE]]
        more = start + PAGE < len(names)
        return types.ListToolsResult(tools=page, next_cursor=str(start + PAGE) if more else None)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> Any:
        args = params.arguments or {}

        def text(t: str, error: bool = False) -> types.CallToolResult:
            return types.CallToolResult(content=[types.TextContent(text=t)], is_error=error)

        name = params.name
        if name == "echo":
            return text(f"echo:{args.get('text', '')}")
        if name == "add_tool":
            # an existing name with a new description is a "rug pull" (the definition changes)
            self.add(
                args["name"], args.get("description") or f"Dynamic tool {args['name']}.", {"type": "object"}
            )
            await self.announce()
            return text(f"added {args['name']}")
        if name == "slow":
            await anyio.sleep(float(args.get("seconds", 5)))
            return text("slept")
        if name == "crash":
            os._exit(3)
        if name == "big":
            return text("x" * int(args.get("size", 10)))
        if name == "fail":
            return text("it failed on purpose", error=True)
        if name == "pid":
            return text(str(os.getpid()))
        if name == "ask_llm":
            return await self.ask(ctx, params, str(args.get("text", "")))
        if name == "confirm":
            return await self.confirm(ctx, params, str(args.get("what", "")), args.get("url"))
        if name in self.tools:
            return text(f"{name} ran")
        return text(f"unknown tool {name}", error=True)

    async def ask(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, q: str
    ) -> Any:
        msgs = [types.SamplingMessage(role="user", content=types.TextContent(text=q))]
        if ctx.protocol_version != MODERN:
            res = await ctx.session.create_message(msgs, max_tokens=50, related_request_id=ctx.request_id)
            assert isinstance(res.content, types.TextContent), res.content
            return types.CallToolResult(content=[types.TextContent(text=f"llm said: {res.content.text}")])
        answer = (params.input_responses or {}).get("q")
        if answer is None:
            req = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams(messages=msgs, max_tokens=50)
            )
            return types.InputRequiredResult(input_requests={"q": req}, request_state="asked")
        assert isinstance(answer, types.CreateMessageResult), answer
        content = answer.content
        assert isinstance(content, types.TextContent), content
        return types.CallToolResult(content=[types.TextContent(text=f"llm said: {content.text}")])

    async def confirm(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, what: str, url: Any
    ) -> Any:
        message = f"Really {what}?"
        schema: types.ElicitRequestedSchema = {
            "type": "object",
            "properties": {"sure": {"type": "boolean"}},
            "required": ["sure"],
        }
        asked: types.ElicitRequestParams = (
            types.ElicitRequestURLParams(message=message, url=str(url), elicitation_id="e1")
            if url
            else types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
        if ctx.protocol_version != MODERN:
            answer: Any = await ctx.session.send_request(
                types.ElicitRequest(params=asked),
                types.ElicitResult,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        else:
            answer = (params.input_responses or {}).get("sure")
            if answer is None:
                request = types.ElicitRequest(params=asked)
                return types.InputRequiredResult(input_requests={"sure": request}, request_state="asked")
        assert isinstance(answer, types.ElicitResult), answer
        return types.CallToolResult(content=[types.TextContent(text=f"{answer.action}: {answer.content}")])


def require_bearer(app: Any, token: str) -> Any:
    """ASGI wrapper answering 401 unless ``Authorization: Bearer <token>``: proves headers reach us."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and dict(scope["headers"]).get(b"authorization") != f"Bearer {token}".encode()
        ):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    d = DynamicServer()
    if mode == "stdio":
        from mcp.server.stdio import stdio_server

        async def run() -> None:
            async with stdio_server() as (r, w):
                await d.server.run(r, w, d.server.create_initialization_options())

        anyio.run(run)
        return
    import uvicorn

    port = int(sys.argv[2])
    if mode == "http":
        app = d.server.streamable_http_app()
        token = os.environ.get("REQUIRE_BEARER")
        uvicorn.run(
            require_bearer(app, token) if token else app, host="127.0.0.1", port=port, log_level="warning"
        )
        return
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    sse = SseServerTransport("/messages/")

    async def handle_sse(request: Any) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (r, w):
            await d.server.run(r, w, d.server.create_initialization_options())
        return Response()

    app = Starlette(
        routes=[Route("/sse", handle_sse, methods=["GET"]), Mount("/messages/", app=sse.handle_post_message)]
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

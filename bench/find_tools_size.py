"""How much of the model's context one ``find_tools`` answer takes, per call, on the demo manifest.

A real `toolweave serve` over stdio (manifests/demo.yaml: mcp-server-time, mcp-server-git and, with
Node, server-memory) answers a few everyday requests of one session, "what time is it in Tokyo" first,
for a client that re-lists on ``list_changed`` as Claude Code does (``compact``: the default answer)
and with ``find_tools(query, detail=true)`` (``detail``: every tool whole; its text with the old
separators is the answer as it was before the compact form, ``before``).

Size is the answer's text content, the JSON the model reads (the structured content carries the same
document). Tokens are estimated as bytes / 4 (no tokenizer: a rough figure for English and JSON).

Usage: .venv/bin/python bench/find_tools_size.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_bench import TOOLWEAVE, machine

REPO = Path(__file__).resolve().parents[1]
QUERIES = [
    "what time is it in Tokyo",
    "when it is 9am in Paris, what time is it in Sydney",
    "show the last commits of this repository",
    "stage my changes and commit them",
    "remember that Alice works at Acme",
]
CLIENTS = ["compact", "detail"]


def tokens(size: int) -> int:
    return round(size / 4)


async def answers(registry: Path, client_kind: str) -> list[dict[str, Any]]:
    # a patient client: the sizes, not the start-up note, are measured
    env = dict(os.environ, TOOLWEAVE_LOG_LEVEL="WARNING", TOOLWEAVE_STARTUP_CALL_WAIT_S="0")
    manifest = REPO / "manifests" / "demo.yaml"
    params = StdioServerParameters(
        command=TOOLWEAVE, args=["serve", "--manifest", str(manifest), "--registry", str(registry)], env=env
    )
    send, receive = anyio.create_memory_object_stream[None](100)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            await send.send(None)

    rows = []
    with open(os.devnull, "w") as quiet:
        connecting = Client(stdio_client(params, errlog=quiet), mode="legacy", message_handler=on_message)
        async with connecting as client, anyio.create_task_group() as tg:

            async def relist() -> None:
                async for _ in receive:  # as Claude Code does: list again on every notice
                    await client.list_tools(cache_mode="bypass")

            tg.start_soon(relist)
            await client.list_tools()
            for query in QUERIES:
                arguments: dict[str, Any] = {"query": query}
                if client_kind == "detail":
                    arguments["detail"] = True
                result = await client.call_tool("find_tools", arguments)
                text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
                doc = json.loads(text)
                size = len(text.encode())
                row = {
                    "query": query,
                    "bytes": size,
                    "tokens_est": tokens(size),
                    # compact: every tool listed is published (detail: a flag says)
                    "published": [t["name"] for t in doc["tools"] if t.get("published", True)],
                    "also_found": len(doc.get("also_found", {})),
                }
                if client_kind == "detail":  # the same document with the old separators: the old answer
                    before = len(json.dumps(doc, ensure_ascii=False).encode())
                    row |= {"before_bytes": before, "before_tokens_est": tokens(before)}
                rows.append(row)
            tg.cancel_scope.cancel()
    return rows


async def main(as_json: bool) -> dict[str, Any]:
    report: dict[str, Any] = {"machine": machine(), "tokens": "estimated as bytes / 4", "clients": {}}
    with tempfile.TemporaryDirectory(prefix="tw-size-") as tmp:
        registry = Path(tmp) / "registry"  # shared: only the first gateway embeds the demo's tools
        for kind in CLIENTS:
            report["clients"][kind] = await answers(registry, kind)
            if not as_json:
                for row in report["clients"][kind]:
                    extra = f" (before: {row['before_bytes']} B)" if "before_bytes" in row else ""
                    print(f"{kind:14} {row['bytes']:5} B ~{row['tokens_est']:4} tok{extra}  {row['query']}")
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args()
    result = anyio.run(main, ns.json)
    if ns.json:
        print(json.dumps(result, indent=2))

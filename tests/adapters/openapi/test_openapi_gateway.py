"""Through the gateway: an OpenAPI source is found, published and called like an MCP upstream.

The real petstore of ``test_openapi_e2e`` (Starlette + uvicorn on 127.0.0.1) records what arrives,
so the assertions are about the wire, reached through ``find_tools`` and ``call_tool``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import yaml
from mcp import Client

from tests.adapters.openapi.test_openapi_e2e import TOKEN, _spec, petstore  # noqa: F401  (petstore is the server fixture)
from tests.e2e.watch import ListChanged, names, watching
from tests.results import text_part
from toolweave.adapters.openapi import OpenAPIBackend, OpenAPISourceConfig
from toolweave.registry import Embedder, Registry
from toolweave.server.gateway import Gateway
from toolweave.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


def found_names(result: types.CallToolResult) -> list[str]:
    assert not result.is_error, result
    payload = result.structured_content or json.loads(text_part(result))
    return [t["name"] for t in payload["tools"]] + list(payload.get("also_found", {}))


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_buy_the_cheapest_dog_through_the_gateway(
    petstore: Any,  # noqa: F811
    tmp_path: Path,
    shared_embedder: Embedder,
) -> None:
    store, base = petstore
    spec = tmp_path / "petstore.yaml"
    spec.write_text(yaml.safe_dump(_spec(base), sort_keys=False))
    config = OpenAPISourceConfig(
        name="petstore",
        spec=str(spec),
        timeout_s=0.5,
        retries=0,
        auth={"type": "bearer", "token_env": "PET_TOKEN"},
    )
    backend = OpenAPIBackend(config, environ={"PET_TOKEN": TOKEN})
    registry = Registry.open(tmp_path / "reg", embedder=shared_embedder)
    # the source's own timeout (0.5 s) wins over the gateway default
    gateway = Gateway(registry, [backend], Settings(home=registry.path, call_timeout_s=30))
    watch = ListChanged()
    async with Client(gateway.server, message_handler=watch.on_message) as client:
        with anyio.fail_after(30):
            while not backend.available or not registry.find("petstore__placeOrder"):
                await anyio.sleep(0.05)
        async with watching(client, watch):
            assert "petstore__placeOrder" not in names(await client.list_tools())
            chosen = found_names(await client.call_tool("find_tools", {"query": "buy the cheapest dog"}))
            # the order operation, and what it needs: the pet list (petId) and the login (token)
            assert {"petstore__placeOrder", "petstore__findPets", "petstore__login"} <= set(chosen)
            await watch.wait()
            assert "petstore__placeOrder" in names(await client.list_tools(cache_mode="bypass"))

            store.requests.clear()
            listed = await client.call_tool("petstore__findPets", {"status": "available", "limit": 5})
            assert not listed.is_error and "Rex" in text(listed)
            order = await client.call_tool(
                "call_tool",
                {"name": "petstore__placeOrder", "arguments": {"body": {"petId": 1, "quantity": 1}}},
            )
            assert not order.is_error, text(order)
            pets, placed = store.requests[0], store.requests[-1]
            assert (pets["method"], pets["path"]) == ("GET", "/api/pets")
            assert sorted(pets["query"]) == [("limit", "5"), ("status", "available")]
            assert (placed["method"], placed["path"]) == ("POST", "/api/store/order")
            assert placed["body"] == {"petId": 1, "quantity": 1}
            assert placed["authorization"] == f"Bearer {TOKEN}"

            missing = await client.call_tool("petstore__getPetById", {"petId": "404"})
            assert missing.is_error and "HTTP 404" in text(missing)
            boom = await client.call_tool("call_tool", {"name": "petstore__boom", "arguments": {}})
            assert boom.is_error and "HTTP 500" in text(boom)
            slow = await client.call_tool("call_tool", {"name": "petstore__slow", "arguments": {}})
            assert slow.is_error and "no answer within 0.5 s (call timeout)" in text(slow)
            wrong = await client.call_tool(
                "call_tool", {"name": "petstore__placeOrder", "arguments": {"body": "x"}}
            )
            assert wrong.is_error and "body" in text(wrong)  # schema violation, caught before the call

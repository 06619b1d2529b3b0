"""build_backends, the manifest-aware on_tools wrapper, and the OpenAPI backend wrapper."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from tests.results import text_part
from toolweave.adapters.backend import Backend, call_budget
from toolweave.adapters.factory import build_backends
from toolweave.adapters.mcp import MCPBackend
from toolweave.adapters.openapi import OpenAPIBackend
from toolweave.manifest import load_manifest
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.settings import Settings

MANIFEST = """\
servers:
  time: {command: python, args: ["-m", "mcp_server_time"], timeout_s: 7}
  web:  {url: "http://127.0.0.1:1/mcp", headers: {Authorization: "Bearer ${TOKEN}"}}
  off:  {command: nothing, enabled: false}
openapi:
  pets: {spec: ./pets.json}
core_tools: [time__get_current_time]
examples: {time__convert_time: ["8am Tokyo in Paris"]}
dependencies:
  add: [{tool: time__convert_time, depends_on: time__get_current_time, parameter: time}]
  remove: [{tool: time__convert_time, depends_on: web__thing}]
"""

SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "Pets", "version": "1"},
    "paths": {
        "/pets/{petId}": {
            "get": {
                "operationId": "getPet",
                "summary": "Get one pet by id.",
                "parameters": [
                    {"name": "petId", "in": "path", "required": True, "schema": {"type": "integer"}}
                ],
                "responses": {"200": {"description": "The pet."}},
            }
        }
    },
}


@pytest.fixture
def manifest_dir(tmp_path: Path) -> Path:
    (tmp_path / "toolweave.yaml").write_text(MANIFEST)
    (tmp_path / "pets.json").write_text(json.dumps(SPEC))
    return tmp_path


def test_build_backends_from_a_manifest(manifest_dir: Path) -> None:
    manifest = load_manifest(manifest_dir / "toolweave.yaml", environ={"TOKEN": "x"})
    settings = Settings(
        home=manifest_dir / "reg",
        connect_timeout_s=3,
        call_timeout_s=11,
        max_result_chars=5_000,
        max_result_bytes=300_000,
        ping_interval_s=2,
    )
    backends = build_backends(manifest.backends(), settings, environ={"TOKEN": "x"})
    assert [b.name for b in backends] == ["time", "web", "pets"]  # the disabled entry is skipped
    assert all(isinstance(b, Backend) for b in backends)
    time, web, pets = backends
    assert isinstance(time, MCPBackend) and isinstance(web, MCPBackend)
    # the entry's own budget where it sets one, else the gateway's: one rule for every kind
    assert call_budget(time.call_timeout_s, 11) == 7 and call_budget(web.call_timeout_s, 11) == 11
    assert isinstance(pets, OpenAPIBackend)
    assert pets.call_timeout_s is None and pets._default_call_s == 11  # OpenAPI too (was 30 s x 3 tries)
    assert time.connect_timeout_s == 3
    assert time.probe_interval_s is None and web.probe_interval_s == 15.0
    assert isinstance(pets, OpenAPIBackend) and pets.config.spec == str(manifest_dir / "pets.json")
    # One streaming cap for every upstream answer (MCP lines/bodies and OpenAPI bodies alike).
    assert time.max_result_bytes == web.max_result_bytes == pets.max_read_bytes == 300_000
    assert time.ping_interval_s == 2


class _PetHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        pet_id = self.path.rsplit("/", 1)[-1]
        body = json.dumps({"id": int(pet_id), "name": f"pet {pet_id}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass


@pytest.fixture
def pet_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PetHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.integration
@pytest.mark.anyio
async def test_openapi_adapter_loads_reports_and_calls(manifest_dir: Path, pet_api: str) -> None:
    (manifest_dir / "toolweave.yaml").write_text(
        f"openapi:\n  pets: {{spec: ./pets.json, base_url: '{pet_api}'}}\n"
        "  broken: {spec: ./missing.json}\n"
    )
    manifest = load_manifest(manifest_dir / "toolweave.yaml", environ={})
    statuses: list[tuple[str, bool]] = []
    reports: dict[str, list[ToolRecord]] = {}

    async def on_status(source: str, ok: bool) -> None:
        statuses.append((source, ok))

    async def on_tools(source: str, tools: Sequence[ToolRecord], edges: Sequence[DependencyEdge]) -> None:
        reports[source] = list(tools)

    pets, broken = build_backends(manifest.backends(), Settings(), on_status=on_status)
    assert isinstance(broken, OpenAPIBackend)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pets.run, on_tools)
        tg.start_soon(broken.run, on_tools)
        with anyio.fail_after(20):
            while not (pets.available and broken.last_error):
                await anyio.sleep(0.05)
        assert statuses == [("pets", True)] and "broken" not in reports
        assert "missing.json" in broken.last_error
        (tool,) = reports["pets"]
        result = await pets.call(tool, {"petId": 7}, timeout_s=5)
        assert not result.is_error
        assert any(isinstance(c, types.TextContent) and "pet 7" in c.text for c in result.content)
        assert not broken.available
        result = await broken.call(tool, {"petId": 7}, timeout_s=5)  # not its tool: refused, clearly
        assert result.is_error and "'broken'" in text_part(result)
        tg.cancel_scope.cancel()

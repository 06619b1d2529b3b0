"""Nothing secret and nothing observed is stored, nor logged at DEBUG: a real `toolweave serve` over HTTP
with every source kind carrying secrets in every field (an OpenAPI spec URL with a token and a secret
folder, an MCP stdio server's env and args, an MCP HTTP server's URL and headers), an upstream that
echoes its secrets in a tool description and returns values keyed by values plus an ``access_token``,
and two client sessions whose searches hold a user id and an email. Afterwards every table of the
registry, at every version, is read through LanceDB (its files encode strings: grepping them is not
enough) and grepped as well, and so is the gateway's DEBUG log: none of the raw values is there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import lancedb
import pytest
from mcp import Client

from tests.net import free_port, wait_port
from tests.results import call_through
from toolweave.registry.database import table_names

from .conftest import TOOLWEAVE, UPSTREAMS, committed_learned_edges, stop, until_callable

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

SECRETS = {
    "SPEC_TOKEN": "spectok-Q8v2LX71",
    "SPEC_DIR": "specdir-K2m9PW44",
    "BASE_KEY": "basekey-Z7c1RT93",
    "VAULT_TOKEN": "vaulttok-H5n8DJ26",
    "ARG_SECRET": "argsecret-M3x6QB58",
    "URL_SECRET": "urlsecret-T9k4VF17",
    "HEADER_SECRET": "headersecret-W1p7GC35",
}
OBSERVED = {  # what the upstream returns (tests/upstreams/vault.py), in no manifest
    "VAULT_ACCOUNT_KEY": "acct-KEYLEAK-5521",
    "VAULT_ACCOUNT": "AC-99812-KEYLEAK",
    "VAULT_RESULT_TOKEN": "resulttok-J6r3NS82",
}
USER_ID, EMAIL = "USR005", "bob.smith@example.com"
LIST, BALANCE = "vault__list_accounts", "vault__get_balance"

SPEC = """openapi: 3.0.3
info: {title: ledger, version: "1"}
servers: [{url: "v1"}]
paths:
  /entries:
    get:
      operationId: listEntries
      summary: List the ledger's journal entries.
      responses: {"200": {description: ok}}
"""


@pytest.fixture
def spec_server() -> Iterator[int]:
    """The OpenAPI spec over HTTP, at a folder and with a query token (whatever they are)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = SPEC.encode() if self.path.split("?")[0].endswith("/spec.yaml") else b"{}"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def manifest(path: Path, spec_port: int) -> Path:
    dead = free_port()
    path.write_text(
        f"""openapi:
  ledger:
    spec: "http://127.0.0.1:{spec_port}/${{SPEC_DIR}}/spec.yaml?token=${{SPEC_TOKEN}}"
    base_url: "http://127.0.0.1:{spec_port}/${{SPEC_DIR}}/v1?key=${{BASE_KEY}}"
servers:
  vault:
    command: {sys.executable}
    args: ["{UPSTREAMS / "vault.py"}", "--label", "${{ARG_SECRET}}"]
    connect_timeout_s: 120
    env:
      VAULT_TOKEN: "${{VAULT_TOKEN}}"
  remote:
    url: "http://127.0.0.1:{dead}/mcp?key=${{URL_SECRET}}"
    headers:
      Authorization: "Bearer ${{HEADER_SECRET}}"
""",
        encoding="utf-8",
    )
    return path


def registry_dump(registry: Path) -> str:
    """Every row of every table of the registry at every version, as text."""
    db = lancedb.connect(str(registry))
    out = []
    for name in sorted(table_names(db)):
        table = db.open_table(name)
        for version in table.list_versions():
            table.checkout(version["version"])
            out.append(json.dumps(table.to_arrow().to_pylist(), default=str))
    return "\n".join(out)


async def test_no_secret_and_no_observed_value_reaches_the_registry_or_the_debug_log(
    tmp_path: Path, spec_server: int
) -> None:
    env = {**os.environ, **SECRETS}
    env.update(TOOLWEAVE_LOG_LEVEL="DEBUG", TOOLWEAVE_USAGE_FLUSH_S="0.5", TOOLWEAVE_STARTUP_CALL_WAIT_S="0")
    registry, log = tmp_path / "registry", tmp_path / "gw.log"
    port = free_port()
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [TOOLWEAVE, "serve", "--manifest", str(manifest(tmp_path / "gw.yaml", spec_server)), "--registry",
             str(registry), "--transport", "http", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_port(port, proc, timeout=60)
        await until_callable(url, LIST, 300)
        for session in range(2):
            async with Client(url, mode="legacy") as client:
                query = f"my user id is '{USER_ID}', mail {EMAIL}: the balance of my account {session}?"
                await client.call_tool("find_tools", {"query": query})
                accounts = await call_through(client, LIST, {})
                assert accounts["access_token"] == OBSERVED["VAULT_RESULT_TOKEN"]
                account = accounts["accounts"][OBSERVED["VAULT_ACCOUNT_KEY"]]["account_id"]
                await call_through(client, BALANCE, {"account_id": account})
        edges = await committed_learned_edges(registry, BALANCE, 90)
    finally:
        stop(proc)
    [edge] = edges
    taken = f"{BALANCE}.account_id took {LIST}'s accounts.*.account_id"
    assert edge["reason"] == f"learned from 2 sessions: {taken}"

    dump = registry_dump(registry)
    assert "ledger__" in dump and "<email>" in dump  # the OpenAPI source was ingested, the usage recorded
    raw_files = b"".join(p.read_bytes() for p in registry.rglob("*") if p.is_file())
    text = log.read_text(errors="replace")
    assert "DEBUG" in text
    for value in [*SECRETS.values(), *OBSERVED.values(), USER_ID, EMAIL]:
        assert value not in dump, f"{value} is in the registry"
        assert value.encode() not in raw_files, f"{value} is in a registry file"
        assert value not in text, f"{value} is in the DEBUG log"

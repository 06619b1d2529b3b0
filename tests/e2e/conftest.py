"""End-to-end fixtures: `toolweave serve` as a real subprocess, real upstream MCP servers.

The registry is built once per session (real embedder) with the upstreams' tools already ingested;
every gateway gets its own copy, so a gateway's own ingest finds every tool unchanged and embeds
nothing, and gateways never share a LanceDB directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.busy import cpu_hogs
from tests.net import free_port, wait_port

REPO = Path(__file__).resolve().parents[2]
UPSTREAMS = REPO / "tests" / "upstreams"
TOOLWEAVE = str(Path(sys.executable).parent / "toolweave")
TS_SDK = "@modelcontextprotocol/sdk@1.32"


@pytest.fixture(params=["as-is", "busy"])
def machine(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test on the machine as it is, then again with every core kept busy (``tests/busy.py``).
    Ask for it first, so the hogs run before anything the test starts."""
    if request.param == "as-is":
        yield "as-is"
        return
    with cpu_hogs():
        yield "busy"


class Upstream:
    """tests/upstreams/dynamic.py over streamable HTTP on a fixed port: can be killed and restarted."""

    def __init__(self, port: int, log: Path) -> None:
        self.port = port
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(UPSTREAMS / "dynamic.py"), "http", str(self.port)],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        wait_port(self.port, self.proc)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Upstream]:
    up = Upstream(free_port(), tmp_path / "upstream.log")
    up.start()
    yield up
    up.kill()


@pytest.fixture
def time_manifest(tmp_path: Path) -> Path:
    """A manifest of the real time server alone (``mcp_server_time``, UTC)."""
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        f"servers:\n  time:\n    command: {sys.executable}\n"
        "    args: [-m, mcp_server_time, --local-timezone, UTC]\n",
        encoding="utf-8",
    )
    return manifest


def write_manifest(path: Path, dyn_url: str, **extra: str) -> Path:
    """time (PyPI, stdio) + dyn (test upstream, HTTP) + two broken upstreams that must not matter."""
    py = sys.executable
    path.write_text(
        f"""
servers:
  time:
    command: {py}
    args: [-m, mcp_server_time, --local-timezone, UTC]
  dyn:
    url: {dyn_url}
  missing:
    command: toolweave-e2e-no-such-command
  silent:
    command: {py}
    args: ["{UPSTREAMS / "silent.py"}"]
    connect_timeout_s: 2
publish:
  pinned: [dyn__echo]
  max_tools: 12
{extra.get("tail", "")}
""",
        encoding="utf-8",
    )
    return path


async def _records_of(target: Any, source: str) -> list[Any]:
    from mcp import Client

    from toolweave.adapters.mcp.convert import tools_to_records

    async with Client(target, mode="legacy") as client:
        tools, cursor = [], None
        while True:
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                return tools_to_records(source, tools)


@pytest.fixture(scope="session")
def template_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A registry holding the time and dyn tools, embedded once for the whole session."""
    from mcp import StdioServerParameters

    from toolweave.registry import Registry
    from toolweave.settings import Settings

    path = tmp_path_factory.mktemp("template") / "registry"

    async def collect() -> dict[str, list[Any]]:
        env = dict(os.environ)
        time_params = StdioServerParameters(
            command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"], env=env
        )
        dyn_params = StdioServerParameters(
            command=sys.executable, args=[str(UPSTREAMS / "dynamic.py"), "stdio"], env=env
        )
        return {"time": await _records_of(time_params, "time"), "dyn": await _records_of(dyn_params, "dyn")}

    records = anyio.run(collect)
    settings = Settings(home=path)
    reg = Registry.open(path, settings=settings)
    try:
        for source, tools in records.items():
            reg.ingest(source, tools)
    finally:
        reg.close()
    return path


@pytest.fixture
def registry_copy(template_registry: Path, tmp_path: Path) -> Path:
    target = tmp_path / "registry"
    shutil.copytree(template_registry, target)
    return target


def gateway_env(*, patient: bool = True) -> dict[str, str]:
    """The gateway's environment. ``patient``: the test's client is a script that does not call
    ``find_tools`` again when told the gateway is still starting, so the search waits for the start
    (``startup_call_wait_s=0``); the tests of a client with a short timeout keep the default bound."""
    env = dict(os.environ)
    env["TOOLWEAVE_LOG_LEVEL"] = "INFO"
    if patient:
        env["TOOLWEAVE_STARTUP_CALL_WAIT_S"] = "0"
    return env


class HttpGateway:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path, transport: str) -> None:
        self.proc = proc
        self.port = port
        self.log = log
        self.transport = transport

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'mcp' if self.transport == 'http' else 'sse'}"

    def logs(self) -> str:
        return self.log.read_text(errors="replace")


def start_http_gateway(
    manifest: Path, registry: Path, log: Path, transport: str = "http", *, patient: bool = True
) -> HttpGateway:
    port = free_port()
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [
                TOOLWEAVE,
                "serve",
                "--manifest",
                str(manifest),
                "--registry",
                str(registry),
                "--transport",
                transport,
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=gateway_env(patient=patient),
        )
    try:
        wait_port(port, proc, timeout=60)
    except Exception:
        proc.kill()
        raise RuntimeError(f"gateway did not start:\n{log.read_text(errors='replace')}") from None
    return HttpGateway(proc, port, log, transport)


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="session")
def ts_client() -> Path:
    """tests/e2e/ts_client.mjs (and the other clients of tests/e2e/*.mjs) beside an npm install of the
    TypeScript SDK in ~/.cache (once)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node/npm not found: the TypeScript SDK client tests need Node >= 18")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolweave-tests" / "ts-sdk-1.32"
    cache.mkdir(parents=True, exist_ok=True)
    if not (cache / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
        (cache / "package.json").write_text('{"name": "toolweave-ts-e2e", "private": true, "type": "module"}')
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", TS_SDK],
            cwd=cache,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            pytest.skip(f"npm install {TS_SDK} failed (offline?): {done.stderr[-500:]}")
    for script in Path(__file__).parent.glob("*.mjs"):  # the clients beside it (ts_client.mjs, ts_elicit.mjs)
        shutil.copyfile(script, cache / script.name)
    return cache / "ts_client.mjs"


def learned_edges(registry: Path, tool: str) -> list[dict[str, Any]]:
    """What `toolweave graph show` says ``tool`` depends on through traffic (a second process reading the
    committed registry, as an operator would)."""
    done = subprocess.run(
        [TOOLWEAVE, "graph", "show", tool, "--json", "--registry", str(registry)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [e for e in json.loads(done.stdout)["depends_on"] if e["origin"] == "learned"]


async def committed_learned_edges(registry: Path, tool: str, timeout: float) -> list[dict[str, Any]]:
    """``learned_edges``, polled until the gateway has committed at least one (within ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while not (edges := await anyio.to_thread.run_sync(learned_edges, registry, tool)):
        assert time.monotonic() < deadline, "no learned edge was committed"
        await anyio.sleep(0.5)
    return edges


async def until_callable(
    url: str, tool: str, timeout: float, waiting: tuple[str, ...] = ("unknown_tool", "unavailable")
) -> None:
    """Poll until calling ``tool`` through the gateway at ``url`` answers with no error code in ``waiting``
    (the gateway has listed its upstream and reaches it). ``unavailable`` is also how a call answers while
    a busy machine's gateway still opens its registry."""
    deadline = time.monotonic() + timeout
    async with Client(url, mode="legacy") as client:
        while True:
            answer = await client.call_tool("call_tool", {"name": tool, "arguments": {}})
            error = (answer.structured_content or {}).get("error") or {}
            if error.get("code") not in waiting:
                return
            assert time.monotonic() < deadline, f"the gateway never listed {tool}"
            await anyio.sleep(0.3)

"""The turn loop with real clients: `toolweave serve` as a subprocess in front of the real PyPI time server.

* the TypeScript SDK client (on the machine as it is and with every core kept busy: ``machine``) and the
  Python SDK client re-list on list_changed; the newly published tool must be in their list when the
  find_tools result arrives (stdio and streamable HTTP). On this machine they pass even when the answer
  is released as the list reply is built (the race needs a slower link between the two;
  tests/server/test_relist.py makes one inside the server and fails then);
* the Claude Code hook: prompt in -> list_changed -> the tool is listed before any find_tools;
* the HTTP host endpoint and `toolweave turn --url`, loopback only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._context_streams import create_context_streams

from .conftest import TOOLWEAVE, gateway_env, start_http_gateway, stop
from .watch import Relister, relisting

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

REPO = Path(__file__).resolve().parents[2]
TOKYO = "what time is it in Tokyo"


@pytest.fixture(autouse=True)
def generous_relist_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every gateway here gets a generous re-list wait: these tests check the order of events, and on a
    loaded machine a client's re-list can take longer than the default 300 ms."""
    monkeypatch.setenv("TOOLWEAVE_PUBLISH__RELIST_WAIT_MS", "5000")
    monkeypatch.setenv("TOOLWEAVE_PUBLISH__RELIST_PROBE_MS", "5000")


def time_manifest(path: Path) -> Path:
    """The demo's time server alone (the registry copy also holds a `dyn` source: stale, never shown)."""
    path.write_text(
        f"servers:\n  time:\n    command: {sys.executable}\n"
        "    args: [-m, mcp_server_time, --local-timezone, UTC]\n",
        encoding="utf-8",
    )
    return path


def run_ts_client(script: Path, mode: str, target: str, log: Path) -> dict[str, Any]:
    env = gateway_env()
    with log.open("ab") as err:
        done = subprocess.run(
            ["node", str(script), mode, target, TOKYO],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
            timeout=600,
        )
    assert done.returncode == 0, log.read_text(errors="replace")[-3000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def check_published_before_answered(seen: dict[str, Any]) -> None:
    assert seen["first"] == ["find_tools", "call_tool"]
    assert seen["published"] is True
    assert "time__get_current_time" in seen["found"]
    # The client's own list, when the result arrived, already held the new tool:
    assert "time__get_current_time" in seen["atResult"], seen
    assert seen["events"].index("result") > seen["events"].index("list_changed")


def test_ts_client_has_the_new_tool_when_find_tools_answers_stdio(
    machine: str, ts_client: Path, registry_copy: Path, tmp_path: Path
) -> None:
    manifest = time_manifest(tmp_path / "m.yaml")
    command = [TOOLWEAVE, "serve", "--manifest", str(manifest), "--registry", str(registry_copy)]
    seen = run_ts_client(ts_client, "stdio", json.dumps(command), tmp_path / "client.log")
    check_published_before_answered(seen)


def test_ts_client_has_the_new_tool_when_find_tools_answers_http(
    machine: str, ts_client: Path, registry_copy: Path, tmp_path: Path
) -> None:
    manifest = time_manifest(tmp_path / "m.yaml")
    gateway = start_http_gateway(manifest, registry_copy, tmp_path / "gateway.log")
    try:
        seen = run_ts_client(ts_client, "http", gateway.url, tmp_path / "client.log")
        check_published_before_answered(seen)
    finally:
        stop(gateway.proc)


class WireOrder:
    """The client's side of the wire: what it received, in order (``tools/list`` replies with the tools
    they hold, ``find_tools`` answers), recorded as its transport hands the messages to the SDK.

    Recorded there and not in the client's own list: the Python SDK lists the tools again by itself to
    check a result against its tool's output schema, which would hide the order."""

    def __init__(self) -> None:
        self.received: list[tuple[str, list[str]]] = []

    def see(self, item: Any) -> None:
        message = getattr(item, "message", None)
        result = getattr(message, "result", None)
        if not isinstance(result, dict):
            return
        if isinstance(result.get("tools"), list):
            self.received.append(("list", [t.get("name", "") for t in result["tools"]]))
        elif (
            isinstance(result.get("structuredContent"), dict)
            and "tool_list_changed" in result["structuredContent"]
        ):
            found = result["structuredContent"]
            self.received.append(
                ("find_tools", [t["name"] for t in found["tools"]] if found["tool_list_changed"] else [])
            )

    @asynccontextmanager
    async def tapping(self, transport: Any) -> AsyncIterator[tuple[Any, Any]]:
        """``transport`` (an SDK client transport), its incoming messages seen by ``see`` in order."""
        async with transport as streams:
            read, write = streams[0], streams[1]
            send, receive = create_context_streams[Any](0)

            async def relay() -> None:
                async with send:
                    async for item in read:
                        self.see(item)
                        await send.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(relay)
                yield receive, write
                tg.cancel_scope.cancel()

    def check_listed_before_answered(self, tool: str) -> None:
        """The answer that published ``tool`` came after a list reply that holds it."""
        answer = next(
            i for i, (kind, names) in enumerate(self.received) if kind == "find_tools" and tool in names
        )
        listed = [i for i, (kind, names) in enumerate(self.received) if kind == "list" and tool in names]
        assert listed and listed[0] < answer, self.received


@pytest.mark.parametrize(("transport", "mode"), [("stdio", "auto"), ("http", "legacy"), ("http", "auto")])
async def test_python_sdk_client_has_the_new_tool_when_find_tools_answers(
    registry_copy: Path, tmp_path: Path, transport: str, mode: str
) -> None:
    """The Python SDK client, re-listing on every notice (both eras), against `toolweave serve`: the
    find_tools answer that published the time tool reaches it after the list reply holding the tool."""
    manifest = time_manifest(tmp_path / "m.yaml")
    serve = ["serve", "--manifest", str(manifest), "--registry", str(registry_copy)]
    wire, relister, gateway = WireOrder(), Relister(), None
    log = (tmp_path / "stdio-gateway.log").open("w")
    with ExitStack() as stack:
        if transport == "stdio":
            params = StdioServerParameters(command=TOOLWEAVE, args=serve, env=gateway_env())
            target: Any = stdio_client(params, errlog=log)
        else:
            gateway = start_http_gateway(manifest, registry_copy, tmp_path / "gateway.log")
            stack.callback(stop, gateway.proc)
            target = streamable_http_client(gateway.url)
        stack.callback(log.close)
        with anyio.fail_after(200):
            async with (
                Client(wire.tapping(target), mode=mode, message_handler=relister.on_message) as client,
                relisting(client, relister),
            ):
                for _ in range(60):  # a gateway still starting answers "call again"
                    found = await client.call_tool("find_tools", {"query": TOKYO})
                    if found.structured_content and found.structured_content["tools"]:
                        break
                    await anyio.sleep(1)
    wire.check_listed_before_answered("time__get_current_time")


@pytest.fixture
def runtime_dir(tmp_path: Path) -> Iterator[Path]:
    """A private XDG_RUNTIME_DIR, so the test's gateway sockets never mix with the user's."""
    path = tmp_path / "run"
    path.mkdir(mode=0o700)
    yield path


def hook(prompt_event: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [TOOLWEAVE, "hook", "claude-code"],
        input=json.dumps(prompt_event).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )


async def test_claude_code_hook_publishes_before_the_first_request(
    registry_copy: Path, runtime_dir: Path, tmp_path: Path
) -> None:
    env = {**gateway_env(), "XDG_RUNTIME_DIR": str(runtime_dir)}
    manifest = time_manifest(tmp_path / "m.yaml")
    params = StdioServerParameters(
        command=TOOLWEAVE,
        args=["serve", "--manifest", str(manifest), "--registry", str(registry_copy)],
        env=env,
    )
    relister = Relister()
    # This test process plays Claude Code: it spawns the gateway (stdio) and runs the hook. Bounded, so
    # that a stuck step fails with its traceback instead of running into the suite's timeout.
    with (tmp_path / "gateway.log").open("w") as errlog, anyio.fail_after(200):
        async with (
            Client(
                stdio_client(params, errlog=errlog), mode="legacy", message_handler=relister.on_message
            ) as client,
            relisting(client, relister),
        ):
            assert [t.name for t in (await client.list_tools(cache_mode="bypass")).tools] == [
                "find_tools",
                "call_tool",
            ]
            with anyio.fail_after(30):  # the gateway's host socket appears once it serves
                while not list(runtime_dir.glob(f"toolweave/host-{os.getpid()}-*.sock")):
                    await anyio.sleep(0.05)
            event = {"session_id": "abc", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit"}
            done = await anyio.to_thread.run_sync(hook, {**event, "prompt": TOKYO}, env)
            assert done.returncode == 0 and done.stdout == b"", done.stderr
            # Before any find_tools, the client re-lists and its list carries the tool. The hook gives up
            # waiting after its own short budget (the prompt goes on); the turn it handed over still
            # publishes, so the list may come a little after it returned:
            with anyio.move_on_after(30):
                while not (relister.lists and "time__get_current_time" in relister.lists[-1]):
                    await anyio.sleep(0.05)
            assert relister.lists and "time__get_current_time" in relister.lists[-1], relister.lists
    assert "host channel:" in (tmp_path / "gateway.log").read_text()


def test_hook_never_breaks_the_prompt(runtime_dir: Path) -> None:
    env = {**gateway_env(), "XDG_RUNTIME_DIR": str(runtime_dir)}
    for stdin in (b"not json", b"", json.dumps({"prompt": TOKYO}).encode()):  # no gateway anywhere
        done = subprocess.run([TOOLWEAVE, "hook", "claude-code"], input=stdin, capture_output=True, env=env)
        assert done.returncode == 0 and done.stdout == b""


def test_another_users_socket_is_never_used(runtime_dir: Path) -> None:
    from toolweave.server.fronts.host import find_host_sockets

    private = runtime_dir / "toolweave"
    private.mkdir(mode=0o700)
    import socket

    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(private / f"host-{os.getppid()}-1.sock"))
        os.environ["XDG_RUNTIME_DIR"] = str(runtime_dir)
        try:
            assert find_host_sockets(iter([os.getppid()])) == [private / f"host-{os.getppid()}-1.sock"]
            private.chmod(0o755)  # a directory others can enter is not trusted
            assert find_host_sockets(iter([os.getppid()])) == []
        finally:
            private.chmod(0o700)
            del os.environ["XDG_RUNTIME_DIR"]


async def test_python_client_over_sse_has_the_new_tool_when_find_tools_answers(
    registry_copy: Path, tmp_path: Path
) -> None:
    gateway = start_http_gateway(
        time_manifest(tmp_path / "m.yaml"), registry_copy, tmp_path / "gw.log", "sse"
    )
    try:
        relister = Relister()
        async with (
            Client(sse_client(gateway.url), mode="legacy", message_handler=relister.on_message) as client,
            relisting(client, relister),
        ):
            found = await client.call_tool("find_tools", {"query": TOKYO})
            assert found.structured_content and found.structured_content["tool_list_changed"] is True
            assert relister.lists and "time__get_current_time" in relister.lists[-1]
    finally:
        stop(gateway.proc)


async def test_http_2026_era_relist_turn_endpoint_and_turn_command(
    registry_copy: Path, tmp_path: Path
) -> None:
    manifest = time_manifest(tmp_path / "m.yaml")
    gateway = start_http_gateway(manifest, registry_copy, tmp_path / "gateway.log")
    base = f"http://127.0.0.1:{gateway.port}"
    try:
        # 2026 era over streamable HTTP: the notice rides the listen stream, the re-list is another POST.
        relister = Relister()
        async with (
            Client(gateway.url, message_handler=relister.on_message) as client,
            relisting(client, relister),
        ):
            assert client.protocol_version == "2026-07-28"
            found = await client.call_tool("find_tools", {"query": TOKYO})
            assert found.structured_content and found.structured_content["tool_list_changed"] is True
            assert relister.lists and "time__get_current_time" in relister.lists[-1]
        await anyio.to_thread.run_sync(check_turn_endpoint, base)
        assert gateway.proc.poll() is None
    finally:
        stop(gateway.proc)


def check_turn_endpoint(base: str) -> None:
    with httpx.Client(timeout=60) as http:
        foreign = http.post(f"{base}/toolweave/turn", json={"turn": TOKYO}, headers={"Host": "evil.example"})
        assert foreign.status_code == 403
        form = http.post(f"{base}/toolweave/turn", content=json.dumps({"turn": TOKYO}))
        assert form.status_code == 415  # not application/json: a browser form cannot post turns
        bad = http.post(f"{base}/toolweave/turn", json={"text": TOKYO})
        assert bad.status_code == 400 and "turn" in bad.json()["error"]
    done = subprocess.run(
        [TOOLWEAVE, "turn", TOKYO, "--url", base, "--json"],
        capture_output=True,
        env=gateway_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True


def test_the_hook_waits_for_a_gateway_its_host_is_still_starting(
    runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host runs its prompt hook while its MCP servers start: the hook must find the socket that
    appears a moment later, but only wait when a gateway child is really starting."""
    from toolweave.server.fronts.host import find_host_sockets

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime_dir))
    private = runtime_dir / "toolweave"
    private.mkdir(mode=0o700)
    assert find_host_sockets(iter([os.getpid()]), wait_s=30) == []  # no gateway starting: no wait, none
    # the socket appears only after the child's first half second: finding it proves the hook waited
    late = (
        "import os, socket, sys, time; time.sleep(0.5); s = socket.socket(socket.AF_UNIX); "
        f"s.bind({str(private)!r} + f'/host-{{os.getppid()}}-{{os.getpid()}}.sock'); time.sleep(60)"
    )
    # argv names it a stdio `toolweave serve`, as the host's real gateway child would be
    child = subprocess.Popen([sys.executable, "-c", late, "toolweave", "serve"])
    try:
        found = find_host_sockets(iter([os.getpid()]), wait_s=30)
        assert found == [private / f"host-{os.getpid()}-{child.pid}.sock"]
    finally:
        child.kill()
        child.wait()


def test_a_finished_child_of_the_host_is_no_gateway_to_wait_for() -> None:
    """A zombie child has an empty command line, like a process mid-exec; only the latter may be a
    gateway starting, so a zombie must not keep the hook waiting."""
    from toolweave.server.fronts.host import _parents_of_starting_gateways

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    stat = Path(f"/proc/{child.pid}/stat")
    try:
        deadline = time.monotonic() + 30
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":  # exited, not yet reaped
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.02)
        assert os.getpid() not in _parents_of_starting_gateways()
    finally:
        child.wait()

"""A real ``toolweave serve`` and an MCP client playing the dialogues through it (for bench/bfcl_replay.py).

Everything that runs the gateway as a subprocess lives here (``Gateway``, ``adapt``), with the client
side of a replay (``play``): the entry script only plans the phases and reports. The client imports
``tests.e2e.watch`` (the re-listing client): the entry script puts the repository root on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import yaml
from bfcl_dialogues import CallOutcome, Dialogue, Names, Replay, TurnRecord
from bfcl_servers import DISTRACTORS, BackendFleet, catalogue
from load_bench import wait_ready
from ports import free_port, wait_port

TOOLWEAVE = str(Path(sys.executable).parent / "toolweave")


# -- the gateway ---------------------------------------------------------------------------------------
def write_manifest(
    path: Path, urls: dict[str, str], catalogs: dict[str, Path], method: str, graph: str
) -> Path:
    retrieval: dict[str, Any] = {"method": method}
    if graph == "none":
        retrieval["edge_kinds"] = []
    doc = {
        "servers": {source: {"url": url} for source, url in urls.items()},
        "catalogs": [
            {"path": str(p), "source": s, "require_description": False} for s, p in catalogs.items()
        ],
        "retrieval": retrieval,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def readiness_tools(names: Names) -> list[str]:
    """One tool per served source whose schema requires an argument: ``call_tool`` with ``{}`` answers
    ``invalid_arguments`` once the gateway knows it (``unknown_tool`` before), and runs nothing."""
    chosen: dict[str, str] = {}
    for tool in catalogue():
        if tool["class"] not in DISTRACTORS and tool["parameters"].get("required"):
            chosen.setdefault(tool["class"], names.published[tool["name"]])
    return list(chosen.values())


class Gateway:
    """``toolweave serve --transport http`` on ``registry``, until the ``async with`` ends."""

    def __init__(
        self, manifest: Path, registry: Path, log: Path, probes: Sequence[str], env: Mapping[str, str]
    ) -> None:
        self.manifest, self.registry, self.log, self.probes = manifest, registry, log, probes
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    @property
    def audit(self) -> Path:
        """The gateway's audit log: one line per find_tools and per call, with its session (no values)."""
        return self.log.with_suffix(".audit.jsonl")

    async def __aenter__(self) -> Gateway:
        port = free_port()
        env = {
            **os.environ,
            "TOOLWEAVE_LOG_LEVEL": "WARNING",
            "TOOLWEAVE_SECURITY__AUDIT_LOG": str(self.audit),
            **self.env,
        }
        cmd = [TOOLWEAVE, "serve", "--manifest", str(self.manifest), "--registry", str(self.registry)]
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(
                [*cmd, "--transport", "http", "--port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )
        self.url = f"http://127.0.0.1:{port}/mcp"
        try:
            # in a thread: this loop serves the upstreams the gateway is connecting to meanwhile
            await anyio.to_thread.run_sync(wait_port, port, self.proc)
            await wait_ready(self.url, 600)
            await self._tools_known()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise RuntimeError(f"gateway did not start; log {self.log}:\n{self.log_tail()}") from None
        return self

    async def _tools_known(self, timeout: float = 600) -> None:  # a busy machine embeds slowly
        from mcp import Client

        deadline = time.monotonic() + timeout
        async with Client(self.url, mode="legacy") as client:
            for name in self.probes:
                while True:
                    answer = await client.call_tool("call_tool", {"name": name, "arguments": {}})
                    error = (answer.structured_content or {}).get("error") or {}
                    if error.get("code") != "unknown_tool":
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the gateway never listed {name}")
                    await anyio.sleep(0.5)

    async def __aexit__(self, *exc: object) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            await anyio.to_thread.run_sync(proc.wait, 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            await anyio.to_thread.run_sync(proc.wait, 10)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


# -- playing dialogues ---------------------------------------------------------------------------------
async def ask(url: str, text: str) -> list[str]:
    """``find_tools(text)`` in a fresh session (no context): the ranked names."""
    from mcp import Client

    from tests.e2e.watch import Relister, relisting

    relister = Relister()
    async with (
        Client(url, mode="legacy", message_handler=relister.on_message) as client,
        relisting(client, relister),
    ):
        answer = await client.call_tool("find_tools", {"query": text})
        await relister.settled()
    return [t["name"] for t in _found(answer, text)]


def _found(answer: Any, text: str) -> list[dict[str, Any]]:
    if answer.is_error or not isinstance(answer.structured_content, dict):
        raise RuntimeError(f"find_tools({text[:60]!r}) failed: {answer.content}")
    tools: list[dict[str, Any]] = answer.structured_content["tools"]
    return tools


META_TOOLS = frozenset({"find_tools", "call_tool"})
"""The gateway's own tools: always listed, not part of the published set."""


async def play_dialogue(url: str, d: Dialogue, names: Names, probe: bool, replay: Replay) -> None:
    from mcp import Client

    from tests.e2e.watch import Relister, relisting
    from tests.e2e.watch import names as listed_names

    relister = Relister()
    async with (
        Client(url, mode="legacy", message_handler=relister.on_message) as client,
        relisting(client, relister),
    ):
        first = listed_names(await client.list_tools(cache_mode="bypass"))

        def view() -> set[str]:
            return set(relister.lists[-1] if relister.lists else first)

        needed = {names.published[c.tool] for t in d.turns for c in t.calls}
        for turn in d.turns:
            probed = names.to_bare(await ask(url, turn.text)) if probe and turn.gold else None
            found = _found(await client.call_tool("find_tools", {"query": turn.text}), turn.text)
            await relister.settled()
            replay.turns.append(
                TurnRecord(
                    d.id,
                    turn.index,
                    turn.gold,
                    names.to_bare(t["name"] for t in found),
                    names.to_bare(t["name"] for t in found if t.get("published", True)),  # compact: all are
                    probed,
                )
            )
            for i, (call, expected) in enumerate(zip(turn.calls, turn.expected, strict=True)):
                name = names.published[call.tool]
                in_view = view() - META_TOOLS
                seen = name in in_view
                listed = name in listed_names(await client.list_tools(cache_mode="bypass"))
                outcome = CallOutcome(
                    d.id, turn.index, i, call.tool, call.arguments, seen, listed, "", False, False, None
                )
                outcome.list_size, outcome.list_needed = len(in_view), len(in_view & needed)
                try:
                    if seen:
                        outcome.via = "direct"
                        answer = await client.call_tool(name, call.arguments)
                    else:
                        outcome.via = "call_tool"
                        answer = await client.call_tool(
                            "call_tool", {"name": name, "arguments": call.arguments}
                        )
                    await relister.settled()
                except Exception as exc:  # e.g. the SDK refused the result: the replay is not faithful
                    outcome.error = f"{type(exc).__name__}: {exc}"
                else:
                    outcome.ok = not answer.is_error
                    outcome.result = answer.structured_content if outcome.ok else None
                    outcome.identical = outcome.ok and answer.structured_content == expected
                    if not outcome.ok:
                        outcome.error = " ".join(getattr(c, "text", "") for c in answer.content)[:300]
                replay.calls.append(outcome)
        replay.lists[d.id] = [first, *relister.lists]


async def play(
    url: str, dialogues: Sequence[Dialogue], fleet: BackendFleet, names: Names, *, probe: bool, label: str
) -> Replay:
    replay = Replay()
    started = time.monotonic()
    for n, d in enumerate(dialogues, 1):
        fleet.reset(d.raw)
        with anyio.fail_after(600):
            await play_dialogue(url, d, names, probe, replay)
        if n % 10 == 0 or n == len(dialogues):
            print(f"   {label}: {n}/{len(dialogues)} dialogues", file=sys.stderr, flush=True)
    replay.wall_s = time.monotonic() - started
    return replay


def adapt(registry: Path) -> dict[str, Any]:
    """``toolweave adapt`` on ``registry`` (no gateway holds it), with its wall time."""
    started = time.monotonic()
    done = subprocess.run(
        [TOOLWEAVE, "adapt", "--registry", str(registry), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"toolweave adapt failed: {done.stderr.strip()[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    report["wall_s"] = round(time.monotonic() - started, 1)
    return report

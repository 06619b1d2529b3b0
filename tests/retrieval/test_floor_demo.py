"""The demo fleet's real tools (mcp-server-time, mcp-server-git) in a real registry: "what time is it
in Tokyo" publishes the time tools and no git tool with the default relevance floor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.conftest import _records_of

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo_tools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    from mcp import StdioServerParameters

    repo = tmp_path_factory.mktemp("repo")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = dict(os.environ)

    def server(*args: str) -> StdioServerParameters:
        return StdioServerParameters(command=sys.executable, args=list(args), env=env)

    async def collect() -> dict[str, list[Any]]:
        return {
            "time": await _records_of(server("-m", "mcp_server_time", "--local-timezone", "UTC"), "time"),
            "git": await _records_of(server("-m", "mcp_server_git", "--repository", str(repo)), "git"),
        }

    return anyio.run(collect)


def test_tokyo_time_publishes_no_git_tool(demo_tools, shared_embedder, tmp_path: Path) -> None:
    from toolweave.registry import Registry
    from toolweave.retrieval import retrieve_tools
    from toolweave.settings import RetrievalSettings, Settings

    assert len(demo_tools["git"]) >= 8  # the fleet really holds git tools that could be published
    reg = Registry.open(tmp_path / "reg", embedder=shared_embedder, settings=Settings(home=tmp_path / "reg"))
    try:
        for source, tools in demo_tools.items():
            reg.ingest(source, tools)
        query = "what time is it in Tokyo"
        ranked = retrieve_tools(
            reg, query, RetrievalSettings()
        )  # the shipped floor, chosen on the dev splits
        on = [r.tool_id for r in ranked if r.publish]
        off = [r.tool_id for r in ranked]
    finally:
        reg.close()
    assert "time__get_current_time" in on
    assert not [t for t in on if t.startswith("git__")], on
    assert len([t for t in off if t.startswith("git__")]) >= 5  # the list is still filled to final_k

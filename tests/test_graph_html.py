"""The HTML picture loads in a real headless browser and draws every node (no network, no CDN)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from toolweave.inference import infer_edges
from toolweave.records import ToolRecord
from toolweave.registry.catalog import load_catalog
from toolweave.registry.graph import DependencyGraph
from toolweave.views.graph_page import export_html

pytestmark = pytest.mark.integration


def _browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no chromium on this machine (`apt-get install -y chromium`; .ci/run installs it)")


def _dump_dom(page: Path, tmp_path: Path) -> str:
    cmd = [
        _browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1400,900",
        "--virtual-time-budget=5000",
        "--dump-dom",
        page.as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _graph(dataset: Path, source: str) -> tuple[DependencyGraph, dict[str, ToolRecord]]:
    cat = load_catalog([dataset], source, require_description=False)
    g = DependencyGraph()
    for t in cat.tools:
        g.add_tool(t.id, t.kind, t.source)
    g.add_edges(infer_edges(cat.tools))
    return g, {t.id: t for t in cat.tools}


def test_toollinkos_picture_draws_all_nodes(tmp_path: Path, dataset_dir: Callable[[str], Path]) -> None:
    graph, tools = _graph(dataset_dir("toollinkos"), "toollinkos")
    page = tmp_path / "graph.html"
    page.write_text(export_html(graph, tools, title="ToolLinkOS"), encoding="utf-8")
    dom = _dump_dom(page, tmp_path)
    m = re.search(r'data-nodes-rendered="(\d+)"', dom)
    assert m, "the page script did not run"
    assert int(m.group(1)) == len(graph) == 573


def test_neighbourhood_view_selects_the_tool(tmp_path: Path, dataset_dir: Callable[[str], Path]) -> None:
    graph, tools = _graph(dataset_dir("api_bank"), "api_bank")
    page = tmp_path / "hood.html"
    page.write_text(export_html(graph, tools, focus="api_bank__QueryBalance", depth=1), encoding="utf-8")
    dom = _dump_dom(page, tmp_path)
    assert re.search(r'data-nodes-rendered="2"', dom)  # QueryBalance and GetUserToken
    # the focused tool is selected: its info panel lists the dependency with the inferred reason
    assert "Depends on (1)" in dom and "api_bank__GetUserToken" in dom

"""The dependency graph as a self-contained HTML page (a view for people; the data stays in ``registry/``).

The page needs no network: the layout is computed here (numpy Fruchterman-Reingold, hubs set apart so
that 500+ nodes stay readable), and the page (``graph_page.html``, shipped as package data) draws it on a
``<canvas>`` with inline vanilla JavaScript: pan, zoom, hover tooltips, search, click to highlight a tool's
dependencies and dependents (``graph.html#tool=<id>`` opens on one). After drawing it writes the number of
nodes drawn to ``data-nodes-rendered`` on ``<body>`` so a headless browser can check it.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.resources import files
from typing import Any

import numpy as np

from toolweave.records import ToolRecord
from toolweave.registry.graph import DependencyGraph
from toolweave.registry.graph_export import neighbourhood, node_doc

__all__ = ["EDGE_COLOURS", "NODE_COLOURS", "compute_layout", "export_html"]

EDGE_COLOURS = {
    "TOOL_DIRECTLY_DEPENDS_ON": "#1f77b4",
    "TOOL_INDIRECTLY_DEPENDS_ON": "#17becf",
    "PARAMETER_DIRECTLY_DEPENDS_ON": "#d62728",
    "PARAMETER_INDIRECTLY_DEPENDS_ON": "#ff7f0e",
}
NODE_COLOURS = {"core": "#e6550d", "regular": "#3182bd"}
_EDGE_LEGEND = [(kind.lower().replace("_", " "), colour) for kind, colour in EDGE_COLOURS.items()]
_EDGE_LEGEND = [(kind.lower().replace("_", " "), colour) for kind, colour in EDGE_COLOURS.items()]
_PLACEHOLDER = re.compile(r"__(TITLE|SUMMARY|DATA|NODE_LEGEND|EDGE_LEGEND)__")


# -- layout --------------------------------------------------------------------------------------------
def compute_layout(
    graph: DependencyGraph, *, seed: int = 7, iterations: int = 120
) -> dict[str, tuple[float, float]]:
    """Positions in [0, 1000]², deterministic for a given graph and seed.

    Hubs (tools that a large share of the graph depends on, e.g. a connectivity check) would pull
    every node into one hairball, so their edges do not take part in the force layout; hubs are
    then put on a small circle at the centre of their dependents. Clusters (one service, one
    identifier family) come out as separate groups.
    """
    g = graph.nx_graph
    nodes = sorted(g.nodes)
    n = len(nodes)
    if n == 0:
        return {}
    if n == 1:
        return {nodes[0]: (500.0, 500.0)}
    index = {node: i for i, node in enumerate(nodes)}
    hub_floor = max(6, int(0.03 * n))
    hubs = [node for node in nodes if g.in_degree(node) >= hub_floor]
    hub_set = set(hubs)
    rng = np.random.default_rng(seed)
    if n > 3000:  # the dense O(n²) pass would be too slow: a spiral ordered by source keeps groups together
        order = sorted(nodes, key=lambda x: (g.nodes[x].get("source", ""), x))
        rank = {x: i for i, x in enumerate(order)}
        r = np.array([rank[x] for x in nodes], dtype=np.float64)
        pos = np.stack([np.sqrt(r) * np.cos(r * 2.4), np.sqrt(r) * np.sin(r * 2.4)], axis=1)
    else:
        adj = np.zeros((n, n), dtype=np.float32)
        for a, b in g.edges():
            if a in hub_set or b in hub_set:
                continue
            adj[index[a], index[b]] = adj[index[b], index[a]] = 1.0
        pos = _fruchterman_reingold(adj, rng, iterations)
    if hubs:
        centre = pos.mean(axis=0)
        spread = float(np.ptp(pos, axis=0).max()) or 1.0
        radius = spread * min(0.2, 0.05 + 0.01 * len(hubs))
        for j, hub in enumerate(sorted(hubs, key=lambda h: -g.in_degree(h))):
            angle = 2 * math.pi * j / len(hubs)
            pos[index[hub]] = centre + radius * np.array([math.cos(angle), math.sin(angle)])
    lo, hi = pos.min(axis=0), pos.max(axis=0)
    span = np.where(hi - lo == 0, 1.0, hi - lo)
    scaled = 40 + 920 * (pos - lo) / span
    return {node: (round(float(scaled[i, 0]), 1), round(float(scaled[i, 1]), 1)) for node, i in index.items()}


def _fruchterman_reingold(adj: np.ndarray, rng: np.random.Generator, iterations: int) -> np.ndarray:
    n = adj.shape[0]
    pos = rng.random((n, 2), dtype=np.float64)
    k = 1.6 * math.sqrt(1.0 / n)
    temp = 0.1
    cool = temp / (iterations + 1)
    for _ in range(iterations):
        delta = pos[:, None, :] - pos[None, :, :]
        dist = np.linalg.norm(delta, axis=-1)
        np.clip(dist, 0.01, None, out=dist)
        force = k * k / dist**2 - adj * dist / k
        disp = np.einsum("ijk,ij->ik", delta, force)
        length = np.linalg.norm(disp, axis=-1)
        length = np.where(length < 0.01, 0.1, length)
        pos += disp * (temp / length)[:, None]
        temp -= cool
    return pos


# -- HTML ----------------------------------------------------------------------------------------------
def export_html(
    graph: DependencyGraph,
    tools: Mapping[str, ToolRecord] | None = None,
    *,
    title: str = "toolweave dependency graph",
    focus: str | None = None,
    depth: int = 2,
) -> str:
    """A self-contained page (no CDN, no network). ``focus`` limits it to a tool's neighbourhood."""
    if focus is not None:
        graph = neighbourhood(graph, focus, depth)
    layout = compute_layout(graph)
    g = graph.nx_graph
    nodes: list[dict[str, Any]] = []
    for n in sorted(g.nodes):
        doc = node_doc(graph, n, tools)
        x, y = layout[n]
        nodes.append(
            {
                "id": n,
                "kind": doc["kind"],
                "source": doc["source"],
                "desc": (doc.get("description") or "")[:300],
                "x": x,
                "y": y,
                "in": g.in_degree(n),
                "out": g.out_degree(n),
            }
        )
    sources = {nd["source"] for nd in nodes}
    for nd in nodes:
        prefix = f"{nd['source']}__"
        shared = len(sources) == 1 and nd["id"].startswith(prefix)
        nd["label"] = nd["id"][len(prefix) :] if shared else nd["id"]
    edges: list[dict[str, Any]] = [
        {
            "s": e.tool,
            "t": e.depends_on,
            "kind": str(e.kind),
            "origin": e.origin,
            "param": e.parameter_name or "",
            "reason": e.reason[:200],
            "evidence": e.evidence[:200],
            "conf": e.confidence,
        }
        for e in graph.edges()
    ]
    data = {
        "nodes": nodes,
        "edges": edges,
        "focus": focus,
        "edgeColours": EDGE_COLOURS,
        "nodeColours": NODE_COLOURS,
    }
    # "</" inside the JSON would end the <script> element early
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    # One pass over the template: a tool description that happens to contain a placeholder stays text.
    values = {
        "TITLE": html.escape(title),
        "SUMMARY": html.escape(_summary(graph, focus, depth)),
        "DATA": blob,
        "NODE_LEGEND": _legend_rows(list(NODE_COLOURS.items()), "dot"),
        "EDGE_LEGEND": _legend_rows(_EDGE_LEGEND, "line"),
    }
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], _template())


@cache
def _template() -> str:
    return files("toolweave.views").joinpath("graph_page.html").read_text(encoding="utf-8")


def _summary(graph: DependencyGraph, focus: str | None, depth: int) -> str:
    n_edges = sum(1 for _ in graph.edges())
    where = f" — neighbourhood of {focus} (depth {depth})" if focus else ""
    return f"{len(graph)} tools, {n_edges} edges{where}"


def _legend_rows(items: Sequence[tuple[str, str]], shape: str) -> str:
    return "".join(
        f'<div><span class="{shape}" style="background:{c}"></span>{html.escape(k)}</div>' for k, c in items
    )

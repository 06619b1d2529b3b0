"""Export the dependency graph as GraphML, JSON or a self-contained HTML picture.

The HTML page needs no network: the layout is computed here (numpy Fruchterman-Reingold, hubs set
apart so that 500+ nodes stay readable), and the page draws it on a ``<canvas>`` with inline
vanilla JavaScript: pan, zoom, hover tooltips, search, click to highlight a tool's dependencies
and dependents (``graph.html#tool=<id>`` opens on one). After drawing it writes the number of
nodes drawn to ``data-nodes-rendered`` on ``<body>`` so a headless browser can check it.
"""

from __future__ import annotations

import html
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from toolweave.errors import ToolNotFound
from toolweave.records import ToolRecord
from toolweave.registry.graph import DependencyGraph

__all__ = [
    "EDGE_COLOURS",
    "compute_layout",
    "export_graphml",
    "export_html",
    "export_json",
    "neighbourhood",
]

EDGE_COLOURS = {
    "TOOL_DIRECTLY_DEPENDS_ON": "#1f77b4",
    "TOOL_INDIRECTLY_DEPENDS_ON": "#17becf",
    "PARAMETER_DIRECTLY_DEPENDS_ON": "#d62728",
    "PARAMETER_INDIRECTLY_DEPENDS_ON": "#ff7f0e",
}
NODE_COLOURS = {"core": "#e6550d", "regular": "#3182bd"}


def neighbourhood(graph: DependencyGraph, tool_id: str, depth: int = 2) -> DependencyGraph:
    """The tools within ``depth`` hops of ``tool_id`` (dependencies and dependents) and their edges."""
    if tool_id not in graph:
        raise ToolNotFound(f"no tool {tool_id!r} in the graph")
    g = graph.nx_graph
    keep = {tool_id}
    frontier = {tool_id}
    for _ in range(max(0, depth)):
        nxt: set[str] = set()
        for n in frontier:
            nxt.update(g.successors(n))
            nxt.update(g.predecessors(n))
        frontier = nxt - keep
        keep |= frontier
    sub = DependencyGraph()
    for n in sorted(keep):
        attrs = g.nodes[n]
        sub.add_tool(n, attrs.get("kind", "regular"), attrs.get("source", ""))
    sub.add_edges(e for e in graph.edges() if e.tool in keep and e.depends_on in keep)
    return sub


# -- JSON / GraphML ------------------------------------------------------------------------------------
def _node_doc(graph: DependencyGraph, node: str, tools: Mapping[str, ToolRecord] | None) -> dict[str, Any]:
    attrs = graph.nx_graph.nodes[node]
    doc: dict[str, Any] = {
        "id": node,
        "kind": attrs.get("kind", "regular"),
        "source": attrs.get("source", ""),
    }
    tool = tools.get(node) if tools else None
    if tool is not None:
        doc.update(name=tool.name, description=tool.description)
    return doc


def export_json(graph: DependencyGraph, tools: Mapping[str, ToolRecord] | None = None) -> str:
    """Nodes (with name and description when ``tools`` is given) and typed edges with all their fields."""
    doc = graph.to_json()
    doc["nodes"] = [_node_doc(graph, n, tools) for n in graph.nx_graph.nodes]
    return json.dumps(doc, indent=2, ensure_ascii=False)


def export_graphml(graph: DependencyGraph, tools: Mapping[str, ToolRecord] | None = None) -> str:
    """GraphML for Gephi, yEd or Cytoscape: one ``<edge>`` per typed edge (parallel edges allowed)."""
    mg = nx.MultiDiGraph()
    for n in graph.nx_graph.nodes:
        mg.add_node(n, **{k: str(v) for k, v in _node_doc(graph, n, tools).items() if k != "id"})
    for e in graph.edges():
        mg.add_edge(
            e.tool,
            e.depends_on,
            kind=str(e.kind),
            origin=e.origin,
            parameter_name=e.parameter_name or "",
            reason=e.reason,
            evidence=e.evidence,
            confidence=float(e.confidence),
        )
    buf = io.BytesIO()
    nx.write_graphml(mg, buf, encoding="utf-8")
    return buf.getvalue().decode("utf-8")


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
        doc = _node_doc(graph, n, tools)
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
    return (
        _PAGE.replace("__TITLE__", html.escape(title))
        .replace("__SUMMARY__", html.escape(_summary(graph, focus, depth)))
        .replace("__DATA__", blob)
        .replace("__SCRIPT__", _SCRIPT)
    )


def _summary(graph: DependencyGraph, focus: str | None, depth: int) -> str:
    n_edges = sum(1 for _ in graph.edges())
    where = f" — neighbourhood of {focus} (depth {depth})" if focus else ""
    return f"{len(graph)} tools, {n_edges} edges{where}"


def _legend_rows(items: Sequence[tuple[str, str]], shape: str) -> str:
    return "".join(
        f'<div><span class="{shape}" style="background:{c}"></span>{html.escape(k)}</div>' for k, c in items
    )


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
html,body{margin:0;height:100%;overflow:hidden;font:13px/1.35 system-ui,-apple-system,"Segoe UI",sans-serif;
  background:#fbfbfd;color:#222}
#bar{position:absolute;top:0;left:0;right:0;height:44px;display:flex;align-items:center;gap:12px;
  padding:0 12px;background:#fff;border-bottom:1px solid #ddd;z-index:2}
#bar h1{font-size:15px;margin:0;font-weight:600}
#search{width:260px;padding:5px 8px;border:1px solid #bbb;border-radius:4px;font:inherit}
#summary{color:#666}
#stage{position:absolute;top:45px;left:0;right:0;bottom:0}
canvas{display:block;cursor:grab}
#tip{position:absolute;pointer-events:none;background:rgba(255,255,255,.97);border:1px solid #999;
  border-radius:4px;padding:6px 8px;max-width:420px;box-shadow:0 2px 8px rgba(0,0,0,.15);
  display:none;z-index:3}
#tip b{font-weight:600}
#legend{position:absolute;right:10px;bottom:10px;background:rgba(255,255,255,.93);border:1px solid #ccc;
  border-radius:4px;padding:8px 10px;z-index:2}
#legend div{margin:2px 0}
.dot,.line{display:inline-block;margin-right:6px;vertical-align:middle}
.dot{width:10px;height:10px;border-radius:50%}
.line{width:18px;height:3px}
#info{position:absolute;left:10px;bottom:10px;max-width:460px;max-height:45%;overflow:auto;
  background:rgba(255,255,255,.95);border:1px solid #ccc;border-radius:4px;padding:8px 10px;
  display:none;z-index:2}
#info ul{margin:4px 0 6px 16px;padding:0}
#rendered-count{display:none}
</style></head>
<body data-nodes-rendered="0">
<div id="bar"><h1>__TITLE__</h1>
<input id="search" type="search" placeholder="Search a tool (Enter to focus)" autocomplete="off">
<span id="summary">__SUMMARY__</span></div>
<div id="stage"><canvas id="view"></canvas></div>
<div id="tip"></div>
<div id="info"></div>
<div id="legend"><b>Nodes</b>
__NODE_LEGEND__<b>Edges (A → B: A depends on B)</b>
__EDGE_LEGEND__<div style="color:#666;margin-top:4px">drag to pan · wheel to zoom · click a tool</div></div>
<span id="rendered-count">0</span>
<script id="graph-data" type="application/json">__DATA__</script>
<script>__SCRIPT__</script>
</body></html>
"""
_EDGE_LEGEND = [(k.lower().replace("_", " "), c) for k, c in EDGE_COLOURS.items()]
_PAGE = _PAGE.replace("__NODE_LEGEND__", _legend_rows(list(NODE_COLOURS.items()), "dot")).replace(
    "__EDGE_LEGEND__", _legend_rows(_EDGE_LEGEND, "line")
)

_SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var nodes = data.nodes, edges = data.edges;
  var byId = {};
  nodes.forEach(function (n, i) { n.i = i; byId[n.id] = n; n.deps = []; n.users = []; });
  edges.forEach(function (e) {
    e.a = byId[e.s]; e.b = byId[e.t];
    if (e.a && e.b) { e.a.deps.push(e); e.b.users.push(e); }
  });
  var byImportance = nodes.slice().sort(function (a, b) {
    return b["in"] - a["in"] || (a.kind === "core" ? -1 : 1);
  });
  var edgeAlpha = edges.length > 800 ? 0.14 : edges.length > 300 ? 0.22 : 0.35;
  var canvas = document.getElementById("view"), ctx = canvas.getContext("2d");
  var stage = document.getElementById("stage"), tip = document.getElementById("tip");
  var info = document.getElementById("info"), search = document.getElementById("search");
  var scale = 1, ox = 0, oy = 0, dpr = window.devicePixelRatio || 1;
  var selected = null, hover = null, hoverEdge = null, matches = [];

  function radius(n) { return 3 + Math.min(12, Math.sqrt(n["in"]) * 1.4); }
  function sx(n) { return n.x * scale + ox; }
  function sy(n) { return n.y * scale + oy; }

  function fit() {
    var w = stage.clientWidth || 1200, h = stage.clientHeight || 800;
    canvas.width = w * dpr; canvas.height = h * dpr;
    canvas.style.width = w + "px"; canvas.style.height = h + "px";
    var minx = 1e9, miny = 1e9, maxx = -1e9, maxy = -1e9;
    nodes.forEach(function (n) {
      minx = Math.min(minx, n.x); miny = Math.min(miny, n.y);
      maxx = Math.max(maxx, n.x); maxy = Math.max(maxy, n.y);
    });
    if (!nodes.length) { minx = miny = 0; maxx = maxy = 1; }
    scale = Math.min(w / (maxx - minx + 80), h / (maxy - miny + 80));
    ox = (w - (maxx + minx) * scale) / 2; oy = (h - (maxy + miny) * scale) / 2;
  }

  function related() {
    var set = null;
    if (selected) {
      set = {}; set[selected.id] = "self";
      selected.deps.forEach(function (e) { set[e.t] = set[e.t] || "dep"; });
      selected.users.forEach(function (e) { set[e.s] = set[e.s] || "user"; });
    }
    return set;
  }

  function draw() {
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    var rel = related(), drawn = 0;
    ctx.lineWidth = 1;
    edges.forEach(function (e) {
      if (!e.a || !e.b) return;
      var on = !rel || e.a === selected || e.b === selected;
      ctx.globalAlpha = rel ? (on ? 0.9 : 0.04) : (e === hoverEdge ? 1 : edgeAlpha);
      ctx.strokeStyle = data.edgeColours[e.kind] || "#999";
      ctx.lineWidth = (on && rel) || e === hoverEdge ? 2 : 1;
      var x1 = sx(e.a), y1 = sy(e.a), x2 = sx(e.b), y2 = sy(e.b);
      ctx.beginPath(); ctx.moveTo(x1, y1); ctx.lineTo(x2, y2); ctx.stroke();
      if ((rel && on) || scale > 1.6) {  // arrow head at the dependency's end
        var ang = Math.atan2(y2 - y1, x2 - x1), r = radius(e.b) * Math.sqrt(scale);
        var hx = x2 - Math.cos(ang) * r, hy = y2 - Math.sin(ang) * r;
        ctx.beginPath(); ctx.moveTo(hx, hy);
        ctx.lineTo(hx - 7 * Math.cos(ang - 0.4), hy - 7 * Math.sin(ang - 0.4));
        ctx.lineTo(hx - 7 * Math.cos(ang + 0.4), hy - 7 * Math.sin(ang + 0.4));
        ctx.closePath(); ctx.fillStyle = ctx.strokeStyle; ctx.fill();
      }
    });
    ctx.globalAlpha = 1; ctx.lineWidth = 1;
    var matchSet = {};
    matches.forEach(function (n) { matchSet[n.id] = true; });
    nodes.forEach(function (n) {
      var r = radius(n) * Math.sqrt(scale), role = rel ? rel[n.id] : null;
      ctx.globalAlpha = rel && !role ? 0.15 : 1;
      ctx.beginPath(); ctx.arc(sx(n), sy(n), r, 0, 2 * Math.PI);
      ctx.fillStyle = data.nodeColours[n.kind] || "#3182bd"; ctx.fill();
      ctx.strokeStyle = role === "self" || matchSet[n.id] ? "#000" : role === "dep" ? "#d62728" :
        role === "user" ? "#2ca02c" : "#fff";
      ctx.lineWidth = role || matchSet[n.id] ? 3 : 1; ctx.stroke();
      drawn++;
    });
    ctx.globalAlpha = 1;
    // labels: hubs and core tools always, everything when zoomed in, and the highlighted set
    // greedy placement, most important first; a label that would overlap a placed one is skipped
    ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle";
    var placed = [];
    byImportance.forEach(function (n) {
      var role = rel ? rel[n.id] : null, forced = role === "self" || n === hover || matchSet[n.id];
      var show = forced || role || scale > 2.2 || (!rel && (n.kind === "core" || n["in"] >= 3));
      if (!show) return;
      var label = n.label.length > 42 ? n.label.slice(0, 40) + "…" : n.label;
      var r = radius(n) * Math.sqrt(scale), w = ctx.measureText(label).width, cx = sx(n), cy = sy(n);
      // right of the node, else left, above, below: the first spot no placed label covers
      var spots = [[cx + r + 3, cy], [cx - r - 3 - w, cy],
                   [cx - w / 2, cy - r - 9], [cx - w / 2, cy + r + 9]];
      var x = spots[0][0], y = spots[0][1], free = false;
      for (var k = 0; k < spots.length && !free; k++) {
        var box = [spots[k][0] - 1, spots[k][1] - 7, spots[k][0] + w + 1, spots[k][1] + 7];
        free = !placed.some(function (b) {
          return box[0] < b[2] && b[0] < box[2] && box[1] < b[3] && b[1] < box[3];
        });
        if (free) { x = spots[k][0]; y = spots[k][1]; }
      }
      if (!free && !forced) return;
      placed.push([x - 1, y - 7, x + w + 1, y + 7]);
      ctx.lineWidth = 3; ctx.strokeStyle = "rgba(255,255,255,.9)"; ctx.strokeText(label, x, y);
      ctx.fillStyle = "#111"; ctx.fillText(label, x, y);
    });
    document.body.setAttribute("data-nodes-rendered", String(drawn));
    document.getElementById("rendered-count").textContent = String(drawn);
  }

  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c];
    });
  }
  function nodeAt(mx, my) {
    var best = null, bd = 1e9;
    nodes.forEach(function (n) {
      var dx = sx(n) - mx, dy = sy(n) - my, d = dx * dx + dy * dy, r = radius(n) * Math.sqrt(scale) + 3;
      if (d < r * r && d < bd) { bd = d; best = n; }
    });
    return best;
  }
  function edgeAt(mx, my) {
    var best = null, bd = 25;
    edges.forEach(function (e) {
      if (!e.a || !e.b) return;
      var x1 = sx(e.a), y1 = sy(e.a), x2 = sx(e.b), y2 = sy(e.b), vx = x2 - x1, vy = y2 - y1;
      var L = vx * vx + vy * vy || 1, t = Math.max(0, Math.min(1, ((mx - x1) * vx + (my - y1) * vy) / L));
      var dx = x1 + t * vx - mx, dy = y1 + t * vy - my, d = dx * dx + dy * dy;
      if (d < bd) { bd = d; best = e; }
    });
    return best;
  }
  function showTip(html, mx, my) {
    tip.innerHTML = html; tip.style.display = "block";
    tip.style.left = Math.min(mx + 14, window.innerWidth - 440) + "px"; tip.style.top = (my + 58) + "px";
  }
  function edgeLine(e, other) {
    return "<li><b>" + esc(other) + "</b> — " + esc(e.kind.toLowerCase().replace(/_/g, " ")) +
      (e.param ? " (" + esc(e.param) + ")" : "") + ", " + esc(e.origin) + " " + Number(e.conf).toFixed(2) +
      (e.reason ? "<br><i>" + esc(e.reason) + "</i>" : "") + "</li>";
  }
  function select(n) {
    selected = n;
    if (!n) { info.style.display = "none"; draw(); return; }
    var h = "<b>" + esc(n.id) + "</b> <span style='color:#666'>(" + esc(n.kind) + ")</span>" +
      (n.desc ? "<div>" + esc(n.desc) + "</div>" : "");
    h += "<div><b style='color:#d62728'>Depends on (" + n.deps.length + ")</b><ul>" +
      n.deps.map(function (e) { return edgeLine(e, e.t); }).join("") + "</ul></div>";
    h += "<div><b style='color:#2ca02c'>Needed by (" + n.users.length + ")</b><ul>" +
      n.users.slice(0, 60).map(function (e) { return edgeLine(e, e.s); }).join("") +
      (n.users.length > 60 ? "<li>… " + (n.users.length - 60) + " more</li>" : "") + "</ul></div>";
    info.innerHTML = h; info.style.display = "block"; draw();
  }
  function centreOn(n) {
    var w = stage.clientWidth, h = stage.clientHeight;
    scale = Math.max(scale, 2.5); ox = w / 2 - n.x * scale; oy = h / 2 - n.y * scale;
  }

  var drag = null, moved = false;
  canvas.addEventListener("mousedown", function (ev) {
    drag = {x: ev.clientX, y: ev.clientY, ox: ox, oy: oy}; moved = false;
  });
  window.addEventListener("mouseup", function (ev) {
    if (drag && !moved) {
      var r = canvas.getBoundingClientRect();
      select(nodeAt(ev.clientX - r.left, ev.clientY - r.top));
    }
    drag = null; canvas.style.cursor = "grab";
  });
  canvas.addEventListener("mousemove", function (ev) {
    var r = canvas.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
    if (drag) {
      if (Math.abs(ev.clientX - drag.x) + Math.abs(ev.clientY - drag.y) > 3) moved = true;
      ox = drag.ox + ev.clientX - drag.x; oy = drag.oy + ev.clientY - drag.y;
      canvas.style.cursor = "grabbing";
      draw(); return;
    }
    hover = nodeAt(mx, my); hoverEdge = hover ? null : edgeAt(mx, my);
    if (hover) {
      showTip("<b>" + esc(hover.id) + "</b> (" + esc(hover.kind) + ")<br>" + esc(hover.desc) +
        "<br>depends on " + hover.deps.length + " · needed by " + hover.users.length, mx, my);
    } else if (hoverEdge) {
      var e = hoverEdge;
      showTip("<b>" + esc(e.s) + "</b> → <b>" + esc(e.t) + "</b><br>" + esc(e.kind) +
        (e.param ? " · parameter <b>" + esc(e.param) + "</b>" : "") + "<br>" + esc(e.origin) +
        ", confidence " + Number(e.conf).toFixed(2) + (e.reason ? "<br><i>" + esc(e.reason) + "</i>" : "") +
        (e.evidence ? "<br><span style='color:#666'>" + esc(e.evidence) + "</span>" : ""), mx, my);
    } else { tip.style.display = "none"; }
    draw();
  });
  canvas.addEventListener("mouseleave", function () {
    tip.style.display = "none"; hover = hoverEdge = null; draw();
  });
  canvas.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    var r = canvas.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
    var f = Math.exp(-ev.deltaY * 0.0015), ns = Math.max(0.2, Math.min(40, scale * f));
    ox = mx - (mx - ox) * ns / scale; oy = my - (my - oy) * ns / scale; scale = ns; draw();
  }, {passive: false});
  search.addEventListener("input", function () {
    var q = search.value.trim().toLowerCase();
    matches = q ? nodes.filter(function (n) { return n.id.toLowerCase().indexOf(q) >= 0; }) : [];
    draw();
  });
  search.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter" && matches.length) { centreOn(matches[0]); select(matches[0]); }
    if (ev.key === "Escape") { search.value = ""; matches = []; select(null); }
  });
  window.addEventListener("resize", function () { fit(); if (selected) centreOn(selected); draw(); });
  fit();
  // a link can name a tool to open on: graph.html#tool=<id>
  var wanted = decodeURIComponent((location.hash.match(/tool=([^&]+)/) || [])[1] || "") || data.focus;
  if (wanted && byId[wanted]) { if (!data.focus) centreOn(byId[wanted]); select(byId[wanted]); } else draw();
})();
"""

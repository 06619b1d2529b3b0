"""`toolweave graph stats|show|export` over a registry, and `toolweave bench-graph` on a benchmark folder."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolweave.commands.options import JsonOption, RegistryOption, settings_for, setup_logging, user_errors

if TYPE_CHECKING:
    from toolweave.records import DependencyEdge, ToolRecord
    from toolweave.registry.graph import DependencyGraph

__all__ = ["register"]

graph_app = typer.Typer(
    name="graph",
    help="See the dependency graph (declared, manifest and inferred edges) and export it.",
    no_args_is_help=True,
)

FORMATS = ("graphml", "json", "html")


def _open(registry: str | None) -> tuple[DependencyGraph, dict[str, ToolRecord]]:
    from toolweave.registry import Registry

    settings = settings_for(registry)
    reg = Registry.open(settings.home, settings=settings)
    try:
        return reg.graph, {t.id: t for t in reg.tools()}
    finally:
        reg.close()


def _resolve_tool(tool: str, tools: dict[str, ToolRecord]) -> str:
    """An id, or a tool name when exactly one tool has it."""
    from toolweave.errors import ToolNotFound

    if tool in tools:
        return tool
    named = sorted(t.id for t in tools.values() if t.name == tool)
    if len(named) == 1:
        return named[0]
    if named:
        raise ToolNotFound(f"{tool!r} names several tools: {', '.join(named)}; give the id")
    close = sorted(i for i in tools if tool.lower() in i.lower())[:5]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ToolNotFound(f"no tool {tool!r} in the registry{hint}")


def graph_stats(graph: DependencyGraph, top: int = 10) -> dict[str, Any]:
    """Counts for `graph stats` (pure, so tests can check it without a registry)."""
    import networkx as nx

    g = graph.nx_graph
    edges = list(graph.edges())
    components = sorted((len(c) for c in nx.weakly_connected_components(g)), reverse=True) if len(g) else []
    most = sorted(g.nodes, key=lambda n: (-g.in_degree(n), n))[:top]
    return {
        "nodes": len(g),
        "edges": len(edges),
        "edges_by_kind": dict(sorted(Counter(str(e.kind) for e in edges).items())),
        "edges_by_origin": dict(sorted(Counter(e.origin for e in edges).items())),
        "core_tools": sorted(n for n in g.nodes if graph.kind(n) == "core"),
        "components": len(components),
        "largest_component": components[0] if components else 0,
        "isolated_tools": sum(1 for n in g.nodes if g.degree(n) == 0),
        "most_depended_on": [{"tool": n, "dependents": g.in_degree(n)} for n in most if g.in_degree(n)],
    }


def _cell(x: float | None, width: int) -> str:
    return f"{'-':>{width}s}" if x is None else f"{x:{width}.3f}"


def _edge_doc(e: DependencyEdge, other: str) -> dict[str, Any]:
    return {
        "tool": other,
        "kind": str(e.kind),
        "parameter": e.parameter_name,
        "origin": e.origin,
        "confidence": e.confidence,
        "reason": e.reason,
        "evidence": e.evidence,
    }


@graph_app.command("stats")
def stats(registry: RegistryOption = None, json_out: JsonOption = False) -> None:
    """Nodes, edges per kind and origin, core tools, components, the most depended-on tools."""
    setup_logging("WARNING")
    with user_errors():
        graph, _tools = _open(registry)
        doc = graph_stats(graph)
        if json_out:
            typer.echo(json.dumps(doc, indent=2))
            return
        typer.echo(f"tools: {doc['nodes']}   edges: {doc['edges']}")
        typer.echo(
            f"components: {doc['components']} (largest {doc['largest_component']}, "
            f"isolated tools {doc['isolated_tools']})"
        )
        typer.echo("edges by kind:   " + ", ".join(f"{k} {v}" for k, v in doc["edges_by_kind"].items()))
        typer.echo("edges by origin: " + ", ".join(f"{k} {v}" for k, v in doc["edges_by_origin"].items()))
        typer.echo(
            f"core tools ({len(doc['core_tools'])}): "
            + ", ".join(doc["core_tools"][:20])
            + (" …" if len(doc["core_tools"]) > 20 else "")
        )
        typer.echo("most depended on:")
        for row in doc["most_depended_on"]:
            typer.echo(f"  {row['dependents']:5d}  {row['tool']}")


@graph_app.command("show")
def show(
    tool: Annotated[str, typer.Argument(help="A tool id (or a tool name, if only one tool has it).")],
    registry: RegistryOption = None,
    json_out: JsonOption = False,
) -> None:
    """A tool's dependencies and dependents: kind, parameter, origin, confidence, reason, evidence."""
    setup_logging("WARNING")
    with user_errors():
        graph, tools = _open(registry)
        tool_id = _resolve_tool(tool, tools)
        deps = [_edge_doc(e, e.depends_on) for e in graph.dependencies(tool_id)]
        users = [_edge_doc(e, e.tool) for e in graph.dependents(tool_id)]
        if json_out:
            doc = {"tool": tool_id, "kind": graph.kind(tool_id), "depends_on": deps, "needed_by": users}
            typer.echo(json.dumps(doc, indent=2))
            return
        typer.echo(f"{tool_id} ({graph.kind(tool_id)})")
        for title, rows in (("depends on", deps), ("needed by", users)):
            typer.echo(f"{title} ({len(rows)}):")
            for r in rows:
                param = f" [{r['parameter']}]" if r["parameter"] else ""
                typer.echo(f"  {r['tool']}  {r['kind']}{param}  {r['origin']} {r['confidence']:.2f}")
                if r["reason"]:
                    typer.echo(f"      why: {r['reason']}")
                if r["evidence"]:
                    typer.echo(f"      evidence: {r['evidence']}")


@graph_app.command("export")
def export(
    fmt: Annotated[str, typer.Option("--format", "-f", help="graphml, json or html.")] = "html",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")
    ] = None,
    tool: Annotated[str | None, typer.Option("--tool", help="Only this tool's neighbourhood.")] = None,
    depth: Annotated[int, typer.Option("--depth", help="Hops around --tool (both directions).")] = 2,
    registry: RegistryOption = None,
) -> None:
    """Write the graph as GraphML (Gephi, yEd), JSON, or a self-contained HTML picture."""
    setup_logging("WARNING")
    with user_errors():
        from toolweave.errors import ConfigError
        from toolweave.registry.graph_export import export_graphml, export_json, neighbourhood
        from toolweave.views.graph_page import export_html

        if fmt not in FORMATS:
            raise ConfigError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
        graph, tools = _open(registry)
        focus = _resolve_tool(tool, tools) if tool else None
        if fmt == "html":
            text = export_html(graph, tools, focus=focus, depth=depth)
        else:
            sub = neighbourhood(graph, focus, depth) if focus else graph
            text = export_graphml(sub, tools) if fmt == "graphml" else export_json(sub, tools)
        if output is None:
            typer.echo(text)
        else:
            output.write_text(text, encoding="utf-8")
            typer.echo(f"wrote {output} ({len(graph)} tools in the registry)", err=True)


def bench_graph(
    dataset: Annotated[
        str, typer.Argument(help="A folder under ../shared/datasets (e.g. toollinkos) or a path.")
    ],
    embed: Annotated[
        bool, typer.Option("--embed", help="Also run the embedding-similarity pass (embeds every tool).")
    ] = False,
    json_out: JsonOption = False,
) -> None:
    """Edge precision / recall / F1 of the inferred graph against the dataset's gold `depends_on` (BFCL
    multi-turn's: the graph read from the code of its backend classes).

    The inferrer sees the tools only (names, descriptions, schemas): never the gold edges, never
    the queries. The last line of output is one JSON object.
    """
    setup_logging("WARNING")
    with user_errors():
        import time

        from toolweave.benchmark.datasets import resolve_dataset
        from toolweave.benchmark.gold_graphs import CODE_GRAPHS, code_gold_edges
        from toolweave.inference import infer_edges, score_edges
        from toolweave.registry.catalog import load_catalog

        path = resolve_dataset(dataset)
        catalog = load_catalog([path], path.name, require_description=False)
        started = time.perf_counter()
        vectors = None
        if embed:
            from toolweave.registry import Embedder, tool_document

            matrix = Embedder().embed_documents([tool_document(t) for t in catalog.tools])
            vectors = {t.id: matrix[i] for i, t in enumerate(catalog.tools)}
        predicted = infer_edges(catalog.tools, vectors=vectors)
        seconds = time.perf_counter() - started
        gold = catalog.edges
        if path.name in CODE_GRAPHS:  # no declared edges: the graph its backends' code states
            gold = code_gold_edges(path, catalog.tools)
        scores = score_edges(predicted, gold)
        doc = {
            "dataset": path.name,
            "tools": len(catalog.tools),
            **scores.as_dict(),
            "seconds": round(seconds, 3),
        }
        if not json_out:
            typer.echo(
                f"{path.name}: {len(catalog.tools)} tools, {scores.gold_edges} gold edges, "
                f"{scores.predicted_edges} predicted, {scores.matched} matched ({seconds:.2f}s)"
            )
            typer.echo(
                f"precision {scores.precision:.3f}  recall {scores.recall:.3f}  F1 {scores.f1:.3f}  "
                f"kind accuracy {scores.kind_accuracy:.3f}"
            )
            typer.echo(
                f"{'kind':34s} {'gold':>5s} {'pred':>5s} {'P':>6s} {'R':>6s} {'F1':>6s} {'kind acc':>8s}"
            )
            for kind, k in scores.per_kind.items():
                cells = " ".join(_cell(k[m], 6) for m in ("precision", "recall", "f1"))
                acc = _cell(k["kind_accuracy"], 8)
                typer.echo(f"{kind:34s} {k['gold']:5d} {k['predicted']:5d} {cells} {acc}")
        typer.echo(json.dumps(doc))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.add_typer(graph_app, name="graph")
    app.command("bench-graph")(bench_graph)

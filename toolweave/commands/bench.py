"""`toolweave bench`: retrieval quality and latency on a benchmark folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast, get_args

import typer

from toolweave.commands.options import JsonOption, setup_logging, user_errors
from toolweave.commands.search import MethodOption, retrieval_params

if TYPE_CHECKING:
    from toolweave.settings import RetrievalSettings

__all__ = ["register"]


def bench(
    dataset: Annotated[
        str, typer.Argument(help="A folder under ../shared/datasets (e.g. toollinkos) or a path.")
    ],
    method: MethodOption = None,
    top_k: Annotated[
        int, typer.Option("--top-k", help="First-pass tools whose dependencies are walked.")
    ] = 3,
    final_k: Annotated[int, typer.Option("--final-k", help="Length of the ranked list.")] = 10,
    split: Annotated[
        str, typer.Option("--split", help="all, test or examples (ToolLinkOS split.json).")
    ] = "all",
    queries: Annotated[Path | None, typer.Option("--queries", help="Score only this query file.")] = None,
    graph: Annotated[
        str, typer.Option("--graph", help="grtf's graph: declared (the dataset's), inferred, or none.")
    ] = "declared",
    examples: Annotated[
        bool,
        typer.Option("--examples", help="Few-shot: the examples split becomes usage examples; scores test."),
    ] = False,
    at: Annotated[
        list[int] | None,
        typer.Option(
            "--at", help="Cut-off K of the metrics (repeatable; default 10, 20, 30). --at 5: Recall@5."
        ),
    ] = None,
    floor: Annotated[
        bool,
        typer.Option(
            "--floor/--no-floor",
            help="Apply the configured relevance floor (it decides what is published; lists stay whole).",
        ),
    ] = True,
    cache: Annotated[
        bool,
        typer.Option(
            "--cache/--no-cache", help="Reuse embeddings cached on disk ($XDG_CACHE_HOME/toolweave)."
        ),
    ] = True,
    json_out: JsonOption = False,
) -> None:
    """Score retrieval (mAP, Recall, nDCG, Complete at each K; tools published per query, their
    precision and recall; latency p50/p95; index build seconds).

    With no --method the best shipped method is used (grtf). With --json each query file gives one
    JSON line; the last line is a JSON object.
    """
    setup_logging("WARNING")
    with user_errors():
        import json

        from toolweave.benchmark import load_dataset, run_benchmark
        from toolweave.benchmark.embedding_cache import CachedEmbedder
        from toolweave.benchmark.runner import GraphChoice, SplitChoice
        from toolweave.errors import ConfigError
        from toolweave.registry.embeddings import Embedder

        split_choice = cast("SplitChoice", _choice("--split", split, get_args(SplitChoice)))
        graph_choice = cast("GraphChoice", _choice("--graph", graph, get_args(GraphChoice)))
        ks = tuple(sorted(set(at or (10, 20, 30))))
        if any(k < 1 for k in ks):
            raise ConfigError(f"--at: cut-offs must be at least 1, got {list(ks)}")
        base = bench_retrieval(floor)
        params = retrieval_params(base, method=method or "grtf", top_k=top_k, final_k=final_k)
        data = load_dataset(dataset, query_file=queries)
        from toolweave.settings import Settings

        # the configured model (TOOLWEAVE_EMBEDDING_MODEL), so models are compared without editing code
        model = Embedder(Settings().embedding_model)
        embedder = CachedEmbedder(model) if cache else model
        results = run_benchmark(
            data,
            params,
            split=split_choice,
            graph=graph_choice,
            examples=examples,
            embedder=embedder,
            ks=ks,
        )
        for result in results:
            row = result.as_json()
            if json_out:
                typer.echo(json.dumps(row))
            else:
                typer.echo(_table_line(row, ks))


def _table_line(row: dict[str, object], ks: tuple[int, ...]) -> str:
    head = f"{row['dataset']}/{row['queries_file']} {row['method']} split={row['split']} n={row['queries']}"
    quality = "  ".join(
        f"{m}@{k} {row[f'{m}@{k}']:.3f}" for k in ks for m in ("map", "recall", "ndcg", "complete")
    )
    quality += (
        f"\n  published/query {row['returned']:.2f}  precision {row['precision']:.3f}"
        f"  recall {row['published_recall']:.3f}"
    )
    speed = (
        f"latency p50 {row['latency_ms_p50']} ms, p95 {row['latency_ms_p95']} ms; index {row['index_s']} s"
    )
    return f"{head}\n  {quality}\n  {speed}"


def bench_retrieval(floor: bool) -> RetrievalSettings:
    """The retrieval settings a benchmark runs with: the gateway's own (``TOOLWEAVE_RETRIEVAL__*``
    variables included, so a setting can be compared without editing code), minus the relevance
    floor when ``floor`` is off."""
    from toolweave.settings import Settings

    base = Settings().retrieval
    if floor:
        return base
    return base.model_copy(update={"floor_relative": 0.0, "floor_absolute": 0.0, "floor_destructive": 0.0})


def _choice(option: str, value: str, allowed: tuple[str, ...]) -> str:
    """``value`` if it is one of ``allowed`` (a ``Literal``'s values: typer has no Literal options)."""
    from toolweave.errors import ConfigError

    if value not in allowed:
        raise ConfigError(f"{option}: expected {', '.join(allowed)}, got {value!r}")
    return value


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.command("bench")(bench)

"""The retrieval benchmark: build a fresh registry from a dataset, run its queries, score them.

Latency is measured per query around ``retrieve_tools`` (query embedding included, index build
excluded); the index build is timed on its own (``index_s``). Embeddings come from the disk cache
(``embedding_cache``) unless an embedder is given. ``share_first_pass`` records each query's first pass
once and replays it for every parameter set (``recorded``): five methods for the price of one, but
no latency.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Literal

import numpy as np

from toolweave.benchmark.datasets import BenchDataset, BenchQuery
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.benchmark.recorded import RecordedIndex
from toolweave.errors import CatalogError
from toolweave.records import ToolRecord
from toolweave.registry.embeddings import Embedder
from toolweave.registry.registry import Registry
from toolweave.retrieval import retrieve, retrieve_tools
from toolweave.retrieval.metrics import summarize
from toolweave.retrieval.query import clean_query
from toolweave.settings import RetrievalSettings, Settings

__all__ = ["BenchResult", "GraphChoice", "SplitChoice", "run_benchmark"]

GraphChoice = Literal["declared", "inferred", "none"]
SplitChoice = Literal["all", "test", "examples"]


@dataclass
class BenchResult:
    dataset: str
    query_set: str
    method: str
    split: str
    graph: str
    shots: str
    metrics: dict[str, float]
    latencies_ms: list[float]
    index_s: float
    queries: int
    final_k: int = 10
    per_query: list[tuple[BenchQuery, list[str]]] = field(default_factory=list, repr=False)

    def as_json(self) -> dict[str, object]:
        lat = np.asarray(self.latencies_ms) if self.latencies_ms else None
        return {
            "dataset": self.dataset,
            "queries_file": self.query_set,
            "method": self.method,
            "split": self.split,
            "graph": self.graph,
            "shots": self.shots,
            "final_k": self.final_k,
            "queries": self.queries,
            **{k: round(v, 4) for k, v in self.metrics.items()},
            "latency_ms_p50": None if lat is None else round(float(np.percentile(lat, 50)), 2),
            "latency_ms_p95": None if lat is None else round(float(np.percentile(lat, 95)), 2),
            "index_s": round(self.index_s, 2),
        }


def run_benchmark(
    dataset: BenchDataset,
    params: RetrievalSettings | Sequence[RetrievalSettings],
    *,
    split: SplitChoice = "all",
    graph: GraphChoice = "declared",
    examples: bool = False,
    embedder: Embedder | None = None,
    progress: Callable[[int, int], None] | None = None,
    ks: Sequence[int] = (10, 20, 30),
    share_first_pass: bool = False,
) -> list[BenchResult]:
    """One result per query set of ``dataset`` and per parameter set (all share one index build).

    ``examples=True`` is the few-shot setting: queries of the ``examples`` split become usage examples
    of their main tool (Tool2Vec-style usage-driven vectors) and only the ``test`` split is scored.
    ``graph`` picks the dependency graph: the dataset's own, one inferred from the tools alone, or none.
    ``ks`` are the cut-offs scored (``(5, 10)`` for Recall@5 as MetaTool and Seal-Tools report).
    """
    if examples:
        if split == "examples":
            raise CatalogError(
                "the examples split cannot be scored in the few-shot setting (it is the training data)"
            )
        split = "test"
    tools = _with_examples(dataset) if examples else dataset.tools
    with tempfile.TemporaryDirectory(prefix="toolweave-bench-") as tmp:
        started = time.perf_counter()
        # "inferred" is the product's own path: edges inferred at ingest from the tools alone
        settings = Settings(infer_dependencies=graph == "inferred")
        embedder = embedder or CachedEmbedder(Embedder())
        registry = Registry.open(Path(tmp) / "registry", embedder=embedder, settings=settings)
        registry.ingest(dataset.name, tools, dataset.edges if graph == "declared" else [])
        index_s = time.perf_counter() - started
        names = {t.id: t.name for t in registry.tools()}
        results = []
        runs_of = [params] if isinstance(params, RetrievalSettings) else list(params)
        recorded = RecordedIndex(live=registry) if share_first_pass else None
        replays = [recorded.view() if recorded is not None else None for _ in runs_of]
        for (replay, params_), (set_name, queries) in product(
            zip(replays, runs_of, strict=True), dataset.query_sets.items()
        ):
            chosen = [q for q in queries if split == "all" or q.split == split]
            if not chosen:
                raise CatalogError(f"{dataset.name}/{set_name}: no queries in split {split!r}")
            latencies: list[float] = []
            runs: list[tuple[BenchQuery, list[str]]] = []
            published: list[list[str]] = []
            if replay is not None:  # one batched search per 256 queries, replayed by every run
                texts = [(clean_query(q.text),) for q in chosen]
                for start in range(0, len(texts), 256):
                    replay.record(texts[start : start + 256])
            for n, query in enumerate(chosen, 1):
                if replay is not None:
                    ranked = retrieve(query.text, replay, registry.dependencies, params_)
                else:
                    t0 = time.perf_counter()
                    ranked = retrieve_tools(registry, query.text, params_)
                    latencies.append((time.perf_counter() - t0) * 1000)
                runs.append((query, [names[r.tool_id] for r in ranked]))
                published.append([names[r.tool_id] for r in ranked if r.publish])
                if progress is not None and (n % 50 == 0 or n == len(chosen)):
                    progress(n, len(chosen))
            metrics = summarize([(ranked, q.gold) for q, ranked in runs], ks, published)
            results.append(
                BenchResult(
                    dataset=dataset.name,
                    query_set=set_name,
                    method=params_.method,
                    split=split,
                    graph=graph if params_.method == "grtf" else "n/a",
                    shots="few-shot" if examples else "zero-shot",
                    metrics=metrics,
                    latencies_ms=latencies,
                    index_s=index_s,
                    queries=len(chosen),
                    final_k=params_.final_k,
                    per_query=runs,
                )
            )
    return results


def _with_examples(dataset: BenchDataset) -> list[ToolRecord]:
    """Attach the ``examples`` split's queries to their main tool (ToolLinkOS says which tool that is)."""
    by_name: dict[str, list[str]] = {}
    for queries in dataset.query_sets.values():
        for q in queries:
            if q.split == "examples":
                main = q.main or (q.gold[0] if len(q.gold) == 1 else None)
                if main:
                    by_name.setdefault(main, []).append(q.text)
    if not by_name:
        raise CatalogError(f"{dataset.name}: no queries in an 'examples' split to use as usage examples")
    return [t.model_copy(update={"examples": tuple(by_name.get(t.name, ()))}) for t in dataset.tools]

"""The scale bench's measure step, run in its own process by bench/scale.py: find_tools latency (whole
and stage by stage), recall of the ANN first pass against exact search, and the process's RSS.

Apart from the build and ingest steps: it opens a built registry and only reads it, and its RSS
helpers are the figures the other steps report too.
"""

from __future__ import annotations

import json
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from gateway_bench import TOOLLINKOS, pct
from scale_fleet import registry_dir

RECALL_K = 30


def bench_queries(n: int) -> list[str]:
    """ToolLinkOS requests of the ``examples`` split (never ``test``)."""
    rows = json.loads((TOOLLINKOS / "instances.json").read_text())
    split = json.loads((TOOLLINKOS / "split.json").read_text())
    return [rows[i]["user_query"] for i in split["examples"][:n]]


def measure(
    size: int, mode: str, n: int, threshold: int | None, registry: Path | None = None
) -> dict[str, Any]:
    """In a fresh process: open the registry, time ``find_tools`` retrieval (the real pipeline) and each
    of its stages alone, recall@30 of the ANN first pass against exact search, RSS.

    Settings come from the environment as in the gateway (``TOOLWEAVE_VECTOR_INDEX_EF=100 ...``: the
    parameter sweep); ``registry`` measures another copy (e.g. one with another index kind)."""
    import os

    import numpy as np

    from toolweave.registry import Embedder, Registry
    from toolweave.registry.vector_index import ann_search, index_state
    from toolweave.retrieval import retrieve_tools
    from toolweave.settings import Settings

    path = registry or registry_dir(size, mode)
    settings = Settings(home=path)
    if threshold is not None:
        settings = Settings(home=path, vector_index_threshold=threshold)
    load = [os.getloadavg()[0]]
    base_rss = rss_mb()
    embedder = Embedder()
    embedder.embed_query("warm the model up")
    model_rss = rss_mb()
    started = time.perf_counter()
    reg = Registry.open(path, embedder=embedder, settings=settings)
    open_s = time.perf_counter() - started
    started = time.perf_counter()
    refreshed = reg.vector_index.refresh() if reg.vector_index.in_use else "none"  # a lowered threshold
    refresh_s = time.perf_counter() - started
    state = index_state(reg._state.table)
    open_rss = rss_mb()
    qs = bench_queries(n)
    for q in qs[:5]:
        retrieve_tools(reg, q)
    ms = []
    for q in qs:  # each query once: embedding, full-text search and record decoding all fresh
        t0 = time.perf_counter()
        retrieve_tools(reg, q)
        ms.append((time.perf_counter() - t0) * 1000)
    load.append(os.getloadavg()[0])
    stages = _stage_timings(reg, embedder, qs)
    rss_after = rss_mb()
    out: dict[str, Any] = {
        "tools": len(reg),
        "uses_vector_index": reg.vector_index.in_use,
        "index_kind": state.kind,
        "index_rows": [state.indexed, state.unindexed],
        "refine": reg._state.snap.ann_refine,
        "ef": settings.vector_index_ef,
        "refine_factor": settings.vector_index_refine,
        "open_s": round(open_s, 1),
        "vector_index_refresh": refreshed,
        "vector_index_refresh_s": round(refresh_s, 1),
        "queries": len(qs),
        "find_tools_p50_ms": round(statistics.median(ms), 1),
        "find_tools_p95_ms": round(pct(ms, 0.95), 1),
        **stages,
        "rss_mb_python_and_libs": base_rss,
        "rss_mb_with_model": model_rss,
        "rss_mb_registry_open": open_rss,
        "rss_mb_after_queries": rss_after,
        "peak_rss_mb": peak_rss_mb(),
    }
    # exact search needs every vector in memory: after the RSS figures
    vectors = reg._state.table.load_vectors()
    ids = list(vectors)
    matrix = np.stack([vectors[i] for i in ids])
    recalls = []
    for q in qs:
        qv = embedder.embed_query(q)
        exact = {ids[i] for i in np.argsort(-(matrix @ qv))[:RECALL_K]}
        found = ann_search(
            reg._state.table, qv, RECALL_K, reg.vector_index.params, refine=reg._state.snap.ann_refine
        )
        recalls.append(len({i for i, _ in found} & exact) / RECALL_K)
    load.append(os.getloadavg()[0])
    out["ann_recall_at_30"] = round(float(np.mean(recalls)), 4)
    out["ann_recall_at_30_min"] = round(float(np.min(recalls)), 4)
    out["ann_recall_at_30_worst5"] = sorted(round(r, 3) for r in recalls)[:5]
    out["queries_below_0.9"] = sum(r < 0.9 for r in recalls)
    out["load_average_1m"] = [round(x, 1) for x in load]
    reg.close()
    return out


def _stage_timings(reg: Any, embedder: Any, qs: list[str]) -> dict[str, float]:
    """p50 wall and CPU milliseconds of each find_tools stage run alone, the query's own work only:
    embedding (query cache emptied first), BM25 (LanceDB full-text query, uncached), the ANN vector
    pass (query vector cached), and everything after the first pass (fusion, floor, walk: searches
    replayed from memory)."""
    from toolweave.retrieval import retrieve_tools

    def timed(run: Any) -> tuple[list[float], list[float]]:
        wall, cpu = [], []
        for q in qs:
            w0, c0 = time.perf_counter(), time.process_time()
            run(q)
            wall.append((time.perf_counter() - w0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
        return wall, cpu

    def embed(q: str) -> None:
        embedder._query_cache.clear()
        embedder.embed_query(q)

    scope = _vector_scope()
    search = reg.search
    recorded: dict[Any, Any] = {}  # every variant's search (a split request has several), for the replay

    def recording(queries: Any, k: int, scope: Any = None) -> Any:
        found = search(queries, k, scope)
        recorded.update(zip(queries, found, strict=True))
        return found

    reg.search = recording
    for q in qs:
        retrieve_tools(reg, q)
    runs = {  # the embedding last: it empties the query cache the vector pass reads
        "bm25": lambda q: reg._state.table.text_search(q, RECALL_K),
        "vector_pass": lambda q: search([(q,)], RECALL_K, scope),
        "after_first_pass": lambda q: retrieve_tools(reg, q),
        "embed": embed,
    }
    out: dict[str, float] = {}
    for name, run in runs.items():
        # the searches replayed: what is left is our own Python
        reg.search = (
            (lambda queries, k, scope=None: [recorded[v] for v in queries])
            if name == "after_first_pass"
            else search
        )
        wall, cpu = timed(run)
        out[f"{name}_p50_ms"] = round(statistics.median(wall), 1)
        out[f"{name}_cpu_p50_ms"] = round(statistics.median(cpu), 1)
    reg.search = search
    return out


def _vector_scope() -> Any:
    from toolweave.records import SearchScope

    return SearchScope(vector=True, text=False)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

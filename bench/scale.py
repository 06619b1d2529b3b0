"""Scale benchmark: synthetic fleets of 10k, 50k and 100k tools built from the
datasets' tools; ingest rate, find_tools retrieval p50/p95 (the real pipeline), recall@30 of the ANN
first pass against exact search, and the process's RSS.

    .venv/bin/python bench/scale.py --size 10000 --size 100000      # default: 10k, 50k and 100k
    .venv/bin/python bench/scale.py --size 100000 --vectors composed   # 100k from composed vectors
    .venv/bin/python bench/scale.py --ingest 2000 --size 100000 --vectors composed   # ingest rate at 100k

The fleet: every dataset's tools (ToolLinkOS, API-Bank, MetaTool, Seal-Tools, OpenAPI links), the
synthetic domain x action x object tools of ``gateway_bench.synthetic_tools`` (up to 10k), then
per-domain variants of the normalized datasets' tools ("Billing: <description>", their declared
edges renamed along; one source per four domains, ~17k tools) until the size is reached. Fleets are nested:
the 10k fleet is the start of the 50k one.

Embeddings: the real embedder behind the benchmarks' shared disk cache (``CachedEmbedder``,
``~/.cache/toolweave/embeddings.sqlite``, keyed by sha256(model, document text)). The build step
times the embedding of the texts the cache lacks: that is the embedding rate. The ingest rate is then
measured into a fresh registry with every vector from the cache, so it times the registry's own work
(rows, full-text index, dependency inference, commits, ANN index); both are reported, with what was
cached. ``--vectors composed`` embeds only the datasets' own tools and the parts variants are made
of (see ``prepare``): minutes instead of hours for 100k on a shared machine.

Each size runs in its own process (RSS is the process's, measured after opening the registry and
after the queries). Needs ../shared/datasets beside the repository (skipped without it).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gateway_bench import ACTIONS, DOMAINS, TOOLLINKOS, machine, pct, synthetic_tools  # noqa: E402

DATASETS = HERE.parent.parent / "shared" / "datasets"
NORMALIZED = ("api_bank", "metatool", "seal_tools", "openapi_links")
OUT = HERE / "out" / "scale"
SIZES = (10_000, 50_000, 100_000)
SYNTHETIC_MAX = 10_000
RECALL_K = 30
DOMAINS_PER_SOURCE = 4


def _rows(dataset: str) -> list[dict[str, Any]]:
    with (DATASETS / dataset / "tools.jsonl").open() as f:
        return [json.loads(line) for line in f if line.strip()]


def _variant(row: dict[str, Any], domain: str) -> dict[str, Any]:
    """``row`` as the ``domain`` team's copy of the tool: its own name, a description naming the domain,
    declared dependencies renamed to the same copy's tools."""
    out = dict(row, name=f"{domain}_{row['name']}", description=f"{domain.title()}: {row['description']}")
    out["depends_on"] = [f"{domain}_{d}" for d in row.get("depends_on") or []]
    out.pop("depends_on_detail", None)
    return out


def fleet_folders(size: int) -> Iterator[tuple[str, Path]]:
    """``(source, catalog folder)`` of the ``size``-tool fleet, written under bench/out/scale once."""
    yield "toollinkos", TOOLLINKOS
    count = len(json.loads((TOOLLINKOS / "core_tools.json").read_text()))
    count += len(json.loads((TOOLLINKOS / "regular_tools.json").read_text()))
    for name in NORMALIZED:
        yield name, DATASETS / name
        count += len(_rows(name))
    synth = min(SYNTHETIC_MAX, size - count)
    if synth > 0:
        yield "synth", _write(f"synth-{synth}", synthetic_tools(synth))
        count += synth
    # Few, large variant sources: every ingest re-reads the whole registry (snapshot, full-text index,
    # inference), so a fleet cut into many small sources would time that, not the per-tool work.
    for group in range(0, len(DOMAINS), DOMAINS_PER_SOURCE):
        if count >= size:
            return
        domains = DOMAINS[group : group + DOMAINS_PER_SOURCE]
        rows = [_variant(r, d) for d in domains for name in NORMALIZED for r in _rows(name)][: size - count]
        names = {r["name"] for r in rows}
        for r in rows:  # a cut-off copy keeps only edges inside itself
            r["depends_on"] = [d for d in r["depends_on"] if d in names]
        yield f"variants-{domains[0]}", _write(f"variants-{domains[0]}-{len(rows)}", rows)
        count += len(rows)


def _write(name: str, rows: list[dict[str, Any]]) -> Path:
    folder = OUT / "fleet" / name
    if not (folder / "tools.jsonl").exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / "tools.jsonl.tmp"
        with tmp.open("w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        tmp.rename(folder / "tools.jsonl")
    return folder


def catalogs(size: int) -> list[Any]:
    from toolweave.registry import load_catalog

    return [
        load_catalog([folder], source, require_description=False) for source, folder in fleet_folders(size)
    ]


# -- vectors -------------------------------------------------------------------------------------------
def cached_embedder() -> Any:
    from toolweave.benchmark.embedding_cache import CachedEmbedder
    from toolweave.registry import Embedder

    return CachedEmbedder(Embedder())  # the benchmarks' shared cache: other runs filled most of it


def composition(tool: Any) -> tuple[str, str] | None:
    """``(base text, domain)`` a fleet tool was made from, or None for a dataset's own tool: a variant
    is ``(its dataset tool's document, domain)``, a synthetic tool ``("<action> <object>", domain)``."""
    from toolweave.registry.documents import tool_document

    source = tool.source
    if source == "synth":
        domain, verb, obj = tool.name.split("_", 2)
        return f"{dict(ACTIONS)[verb]} {obj}", domain
    if source.startswith("variants-"):
        domain = tool.name.split("_", 1)[0]
        base = tool.model_copy(update={"name": tool.name.removeprefix(f"{domain}_")})
        description = tool.description.removeprefix(f"{domain.title()}: ")
        return tool_document(
            base.model_copy(update={"description": description}), with_examples=False
        ), domain
    return None


class FleetEmbedder:
    """Document vectors of a fleet looked up by text (filled by ``prepare``); queries (and any text it
    was not prepared for) go to the real embedder. Has the ``Embedder`` surface the registry uses."""

    def __init__(self, real: Any, vectors: dict[str, Any]) -> None:
        self.real = real
        self.vectors = vectors
        self.model_name = real.model_name

    @property
    def model_id(self) -> str:
        return str(self.real.model_id)

    @property
    def dim(self) -> int:
        return int(self.real.dim)

    def embed_documents(self, texts: Any, batch_size: int = 16) -> Any:
        import numpy as np

        missing = [t for t in texts if t not in self.vectors]
        if missing:
            self.vectors.update(zip(missing, self.real.embed_documents(missing, batch_size), strict=True))
        return np.stack([self.vectors[t] for t in texts])

    def embed_queries(self, texts: Any) -> Any:
        return self.real.embed_queries(texts)

    def embed_query(self, text: str) -> Any:
        return self.real.embed_query(text)


def prepare(size: int, mode: str) -> tuple[FleetEmbedder, list[Any], dict[str, Any]]:
    """The fleet's catalogs and an embedder holding every document's vector.

    ``real``: every document through the real embedder behind the disk cache (what is not cached is
    embedded now, and timed). ``composed``: the datasets' own tools are embedded for real (cached);
    a variant or synthetic tool gets ``normalise(v(base text) + beta * v(domain))`` from real vectors
    of its parts, with ``beta`` fitted on a sample of real variant embeddings (the report gives the
    fit's mean cosine to the real vectors). Composed vectors let the 100k figures be taken where
    embedding 100k documents would take hours (a loaded shared machine).
    """
    import numpy as np

    from toolweave.registry.documents import tool_document

    cached = cached_embedder()
    cats = catalogs(size)
    docs = {tool_document(t, with_examples=False): t for c in cats for t in c.tools}
    info: dict[str, Any] = {"tools": sum(len(c.tools) for c in cats), "vectors": mode}
    started = time.perf_counter()
    if mode == "real":
        texts = list(docs)
        vectors = dict(zip(texts, _embed_chunked(cached, texts), strict=True))
    else:
        parts = {t: composition(tool) for t, tool in docs.items()}
        own = [t for t, part in parts.items() if part is None]
        bases = list(dict.fromkeys(p[0] for p in parts.values() if p is not None))
        domains = list(dict.fromkeys(p[1] for p in parts.values() if p is not None))
        vectors = dict(zip(own, _embed_chunked(cached, own), strict=True))
        base_v = dict(zip(bases, _embed_chunked(cached, bases), strict=True))
        domain_v = dict(zip(domains, cached.embed_documents([d.title() for d in domains]), strict=True))
        beta, fit = _fit_beta(cached, parts, base_v, domain_v)
        info |= {"beta": beta, "composed_vs_real_mean_cosine": fit}
        for text, part in parts.items():
            if part is not None:
                v = base_v[part[0]] + beta * domain_v[part[1]]
                vectors[text] = (v / np.linalg.norm(v)).astype(np.float32)
    seconds = time.perf_counter() - started
    info |= {
        "embedded_now": cached.misses,
        "from_cache": cached.hits,
        "embed_seconds": round(seconds, 1),
        "embed_docs_per_s": round(cached.misses / seconds, 1) if cached.misses else None,
    }
    return FleetEmbedder(cached, vectors), cats, info


def _embed_chunked(embedder: Any, texts: list[str]) -> list[Any]:
    out: list[Any] = []
    for start in range(0, len(texts), 1024):
        out.extend(embedder.embed_documents(texts[start : start + 1024]))
        print(f"embedded {min(start + 1024, len(texts))}/{len(texts)}", file=sys.stderr, flush=True)
    return out


def _fit_beta(cached: Any, parts: dict[str, Any], base_v: dict[str, Any], domain_v: dict[str, Any]) -> Any:
    """The ``beta`` whose composed vectors come closest (mean cosine) to real embeddings of 48 variants."""
    import numpy as np

    sample = [t for t, p in parts.items() if p is not None][:: max(1, len(parts) // 48)][:48]
    real = cached.embed_documents(sample)
    best = (0.0, -1.0)
    for beta in np.arange(0.0, 1.01, 0.05):
        composed = np.stack([base_v[parts[t][0]] + beta * domain_v[parts[t][1]] for t in sample])
        composed /= np.linalg.norm(composed, axis=1, keepdims=True)
        fit = float(np.mean(np.sum(composed * real, axis=1)))
        best = max(best, (fit, float(beta)), key=lambda x: x[0])
    return round(best[1], 2), round(best[0], 3)


# -- building and measuring ----------------------------------------------------------------------------
def registry_dir(size: int, mode: str) -> Path:
    return OUT / f"registry-{size}-{mode}"


def build(size: int, mode: str, *, resume: Path | None = None, infer: bool = True) -> dict[str, Any]:
    """Ingest the fleet source by source into a fresh registry (vectors ready: the registry's own
    work is timed), then build the vector index (what the background refresh does) and time it.

    ``resume``: start from a copy of that (smaller fleet's) registry and ingest only the sources it
    lacks; ``infer=False``: without dependency inference (its cost grows with the registry on every
    ingest: see bench/HISTORY.md)."""
    import shutil

    from toolweave.registry import Registry
    from toolweave.settings import Settings

    embedder, cats, info = prepare(size, mode)
    path = registry_dir(size, mode)
    shutil.rmtree(path, ignore_errors=True)
    if resume is not None:
        shutil.copytree(resume, path)
    settings = Settings(home=path, infer_dependencies=infer)
    reg = Registry.open(path, embedder=embedder, settings=settings)  # type: ignore[arg-type]
    present = set(reg.sources())
    cats = [c for c in cats if c.source not in present]
    start_tools = len(reg)
    reg.vector_index.refresh_later = lambda: None  # type: ignore[method-assign]  # timed apart, below
    started = time.perf_counter()
    for catalog in cats:
        print(reg.ingest(catalog.source, catalog.tools, catalog.edges), file=sys.stderr, flush=True)
    ingest_s = time.perf_counter() - started
    started = time.perf_counter()
    index = reg.vector_index.refresh()
    index_s = time.perf_counter() - started
    tools = len(reg)
    ingested = tools - start_tools
    reg.close()
    (path / "built.json").write_text(json.dumps(info))
    return {
        **info,
        "registry_tools": tools,
        "sources": len(cats),
        "ingest_s": round(ingest_s, 1),
        "ingested": ingested,
        "resumed_from_tools": start_tools,
        "dependency_inference": infer,
        "ingest_tools_per_s": round(ingested / ingest_s, 1),
        "vector_index": index,
        "vector_index_build_s": round(index_s, 1),
        "peak_rss_mb_building": peak_rss_mb(),
    }


def new_sources(size: int, count: int, how_many: int = 2) -> list[tuple[str, Path]]:
    """Sources the ``size``-tool fleet lacks: the first ``count`` variants of each of the next groups of
    domains (one domain's copy of the datasets' tools while ``count`` is at most ~4.3k)."""
    used = {source for source, _ in fleet_folders(size) if source.startswith("variants-")}
    out: list[tuple[str, Path]] = []
    for group in range(0, len(DOMAINS), DOMAINS_PER_SOURCE):
        domains = DOMAINS[group : group + DOMAINS_PER_SOURCE]
        source = f"variants-{domains[0]}"
        if source in used or len(out) == how_many:
            continue
        rows = [_variant(r, d) for d in domains for name in NORMALIZED for r in _rows(name)][:count]
        names = {r["name"] for r in rows}
        for r in rows:
            r["depends_on"] = [d for d in r["depends_on"] if d in names]
        out.append((source, _write(f"new-{domains[0]}-{len(rows)}", rows)))
    if len(out) < how_many:
        raise ValueError(f"not enough domain groups left for new sources beside the {size}-tool fleet")
    return out


class PhaseTimer:
    """Seconds spent in named methods of an object or functions of a module (the ingest's phases), by
    wrapping them. Phases may overlap: the full-text index is built beside the inference (wall seconds
    of each, on whichever thread)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._wrapped: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, method: str, phase: str) -> None:
        inner = getattr(owner, method)
        self._wrapped.append((owner, method, vars(owner).get(method)))

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - started

        setattr(owner, method, timed)

    def unwrap(self) -> None:
        for owner, method, own in self._wrapped:
            if own is None:
                vars(owner).pop(method, None)  # the class's method shows through again
            else:
                setattr(owner, method, own)  # a module's function

    def report(self) -> dict[str, float]:
        return {phase: round(s, 2) for phase, s in sorted(self.seconds.items())}


def ingest_new(size: int, mode: str, count: int, embedding: str) -> dict[str, Any]:
    """Ingest two new sources of ``count`` tools each, one after the other, into a copy of the built
    ``size``-tool registry (defaults: dependency inference on) and time each by phase. The first
    ingest after opening profiles every tool of the registry for inference; the next one reuses those
    profiles (as a running gateway does).

    ``embedding="cached"``: the new documents are embedded first with the real embedder (timed: the
    embedder's documents/s on every core), then the ingests get them ready, so they time the
    registry's own work (rows, full-text index, snapshot, inference, commit). ``"real"``: each ingest
    embeds its tools itself (end to end). The full-text index is built beside the inference, so the
    phases overlap and may add up to more than the ingest's wall time. The vector index merge that an
    ingest schedules on a background thread is timed apart, after both."""
    import os
    import shutil

    from toolweave.registry import Embedder, Registry, load_catalog
    from toolweave.registry.documents import tool_document
    from toolweave.settings import Settings

    built = registry_dir(size, mode)
    if not (built / "built.json").exists():
        raise FileNotFoundError(f"{built} is not built: run the build step (or copy one) first")
    cats = [load_catalog([f], s, require_description=False) for s, f in new_sources(size, count)]
    work = OUT / f"ingest-{size}-{mode}-{embedding}-{os.getpid()}"  # runs may overlap
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(built, work)
    settings = Settings(home=work)
    real = Embedder()
    real.embed_documents(["warm the model up"])
    out: dict[str, Any] = {"embedding": embedding, "load_average_at_start": os.getloadavg()}
    embedder: Any = real
    if embedding == "cached":  # through the disk cache: what it lacks is embedded now, and timed
        with_examples = settings.usage_weight <= 0
        documents = [tool_document(t, with_examples=with_examples) for c in cats for t in c.tools]
        cache = cached_embedder()
        cache.inner = real  # the model already loaded
        started, cpu = time.perf_counter(), time.process_time()
        vectors = [
            v
            for n in range(0, len(documents), 256)
            for v in cache.embed_documents(documents[n : n + 256], batch_size=settings.embedding_batch_size)
        ]
        embed_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu
        out |= {"embedded_now": cache.misses, "from_cache": cache.hits}
        if cache.misses:
            out |= {
                "embed_s": round(embed_s, 1),
                "embed_docs_per_s": round(cache.misses / embed_s, 1),
                "embed_docs_per_cpu_s": round(cache.misses / cpu_s, 1),
            }
        embedder = FleetEmbedder(real, dict(zip(documents, vectors, strict=True)))
    reg = Registry.open(work, embedder=embedder, settings=settings)
    out["tools_before"] = len(reg)
    reg.vector_index.refresh_later = lambda: None  # type: ignore[method-assign]  # timed apart, below
    out["ingests"] = [_timed_ingest(reg, c) for c in cats]
    started = time.perf_counter()
    out["vector_index"] = reg.vector_index.refresh()
    out["vector_index_s"] = round(time.perf_counter() - started, 1)
    reg.close()
    shutil.rmtree(work, ignore_errors=True)
    return out | {"load_average_at_end": os.getloadavg(), "peak_rss_mb": peak_rss_mb()}


def _timed_ingest(reg: Any, catalog: Any) -> dict[str, Any]:
    from toolweave.registry import ingest as ingest_module

    phases = PhaseTimer()
    phases.wrap(reg._ingest, "_embed", "embed")
    phases.wrap(reg._state.table, "upsert", "rows")
    phases.wrap(reg._state.table, "rebuild_text_index", "full-text index")
    phases.wrap(reg._follower, "reload", "snapshot")
    phases.wrap(ingest_module, "propose_by_rules", "rules (beside the full-text index)")
    phases.wrap(reg._ingest, "_infer", "inference")
    phases.wrap(reg._commits, "commit", "commit")
    started, cpu = time.perf_counter(), time.process_time()
    summary = reg.ingest(catalog.source, catalog.tools, catalog.edges)
    seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    phases.unwrap()
    print(summary, file=sys.stderr, flush=True)
    return {
        "source": catalog.source,
        "added": summary.added,
        "edges_of_new_tools": summary.edges,
        "ingest_s": round(seconds, 1),
        "ingest_tools_per_s": round(summary.added / seconds, 1),
        "ingest_cpu_s": round(cpu_s, 1),  # every thread's: on a loaded machine, less noisy than wall time
        "phases_s": phases.report(),
    }


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


def _child(args: list[str]) -> dict[str, Any]:
    """One step in a fresh process (so RSS is that step's), its last stdout line as JSON."""
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / "steps.log").open("a") as log:  # the step's progress, to follow a long build
        proc = subprocess.run(
            [sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=log, text=True
        )
    if proc.returncode != 0:
        raise RuntimeError(f"{args}: exit {proc.returncode}; see {OUT / 'steps.log'}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(ns: argparse.Namespace) -> int:
    if not TOOLLINKOS.exists():
        print(f"skipped: {TOOLLINKOS} is absent", file=sys.stderr)
        return 0
    report: dict[str, Any] = {"machine": machine()}
    if ns.ingest:
        ingest_runs(ns, report)
    for size in [] if ns.ingest else ns.size or SIZES:
        key = f"{size}-{ns.vectors}"
        row: dict[str, Any] = {}
        if ns.rebuild or not (registry_dir(size, ns.vectors) / "built.json").exists():
            row["build"] = _child(["--step", "build", "--size", str(size), "--vectors", ns.vectors])
        for threshold in ns.threshold or [None]:
            extra = [] if threshold is None else ["--threshold", str(threshold)]
            step = [
                "--step",
                "measure",
                "--size",
                str(size),
                "--vectors",
                ns.vectors,
                "--queries",
                str(ns.queries),
            ]
            row[f"measure_threshold_{threshold or 'default'}"] = _child(step + extra)
        report[key] = row
        print(json.dumps({key: row}), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / "results.jsonl").open("a") as f:
        f.write(json.dumps(report) + "\n")
    return 0


def ingest_runs(ns: argparse.Namespace, report: dict[str, Any]) -> None:
    """``--ingest N``: for each size, the new sources with vectors ready, then with real embeddings."""
    for size in ns.size or SIZES:
        key = f"ingest-{ns.ingest}-into-{size}-{ns.vectors}"
        step = ["--step", "ingest", "--size", str(size), "--vectors", ns.vectors, "--ingest", str(ns.ingest)]
        report[key] = {e: _child([*step, "--embedding", e]) for e in ("cached", "real")}
        print(json.dumps({key: report[key]}), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--size", type=int, action="append", help="fleet size (repeatable; default 10k 50k 100k)"
    )
    parser.add_argument("--vectors", choices=("real", "composed"), default="real", help="see prepare()")
    parser.add_argument("--queries", type=int, default=200, help="timed find_tools calls per size")
    parser.add_argument(
        "--threshold", type=int, action="append", help="vector_index_threshold for a measure run (repeatable)"
    )
    parser.add_argument("--rebuild", action="store_true", help="ingest again even if the registry exists")
    parser.add_argument("--resume", type=Path, help="build: start from a copy of this registry")
    parser.add_argument("--no-infer", action="store_true", help="build: without dependency inference")
    parser.add_argument("--registry", type=Path, help="measure: this registry instead of the size's own")
    parser.add_argument(
        "--ingest",
        type=int,
        metavar="N",
        help="instead of build + measure: time ingesting a new source of N tools into a copy of the built "
        "registry of each size, with vectors ready and with real embeddings (see ingest_new())",
    )
    parser.add_argument("--embedding", choices=("cached", "real"), help=argparse.SUPPRESS)
    parser.add_argument("--step", choices=("build", "measure", "ingest"), help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.step == "ingest":
        print(json.dumps(ingest_new(ns.size[0], ns.vectors, ns.ingest, ns.embedding)))
    elif ns.step == "build":
        print(json.dumps(build(ns.size[0], ns.vectors, resume=ns.resume, infer=not ns.no_infer)))
    elif ns.step == "measure":
        threshold = ns.threshold[0] if ns.threshold else None
        print(json.dumps(measure(ns.size[0], ns.vectors, ns.queries, threshold, ns.registry)))
    else:
        sys.exit(main(ns))

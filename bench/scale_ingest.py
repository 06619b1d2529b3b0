"""The scale bench's build and ingest steps, each run in its own process by bench/scale.py.

``build`` ingests a whole fleet into a fresh registry; ``ingest_new`` times ingesting new sources into
a copy of a built one, phase by phase (``PhaseTimer``). Apart from ``measure``: these write registries,
it only reads one.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from scale_fleet import OUT, new_sources, registry_dir
from scale_measure import peak_rss_mb
from scale_vectors import FleetEmbedder, cached_embedder, prepare


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

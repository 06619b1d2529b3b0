"""Document vectors of a scale fleet: the real embedder behind the disk cache, or vectors composed
from real vectors of their parts (for bench/scale.py).

Apart from the fleet (plain files) and the steps: how the vectors are made is its own choice
(``--vectors real|composed``), and the build and ingest steps both take an embedder from here.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from gateway_bench import ACTIONS
from scale_fleet import catalogs


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

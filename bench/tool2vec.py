"""Tool2Vec on dev splits: (a) zero-shot, (b) examples in the document, (c) usage vector fused.

    .venv/bin/python bench/tool2vec.py --explore [--only metatool]   # fusion variants, vector side only
    .venv/bin/python bench/tool2vec.py [--only api_bank]              # real registry: vector/hybrid/grtf
    .venv/bin/python bench/tool2vec.py --test                         # ToolLinkOS test, once, at the end

Dev protocol (never ToolLinkOS ``test``): queries with one gold tool (ToolLinkOS: the ``examples``
split and its main tool) are dealt per tool, alternately, into usage examples and scored queries; a
tool's first query goes to usage or scoring by a hash of its name, so with one query per tool
(ToolLinkOS) half the tools get a usage vector and the other half's queries are scored. Queries with
several gold tools are always scored. Embeddings are cached in bench/out/emb-cache-*.npz.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from toolweave.benchmark import load_dataset
from toolweave.benchmark.datasets import BenchDataset, BenchQuery
from toolweave.registry import Embedder, Registry
from toolweave.registry.documents import tool_document
from toolweave.retrieval import retrieve_tools
from toolweave.retrieval.metrics import summarize
from toolweave.settings import RetrievalSettings, Settings

OUT = Path(__file__).parent / "out"
CAP = 32


def deal(
    dataset: BenchDataset, set_name: str, per_tool: int
) -> tuple[dict[str, list[str]], list[BenchQuery]]:
    """(tool name → usage queries, scored queries) for one query set."""
    queries = dataset.query_sets[set_name]
    if dataset.name == "toollinkos":
        queries = [q for q in queries if q.split == "examples"]
    usage: dict[str, list[str]] = {}
    scored: list[BenchQuery] = []
    seen: dict[str, int] = {}
    scored_per_tool: dict[str, int] = {}
    for q in queries:
        main = q.main or (q.gold[0] if len(q.gold) == 1 else None)
        if main is None:
            scored.append(q)
            continue
        n = seen.get(main, int(hashlib.sha256(main.encode()).digest()[0]) % 2)
        seen[main] = n + 1
        if n % 2 == 0:
            if len(usage.setdefault(main, [])) < CAP:
                usage[main].append(q.text)
        elif scored_per_tool.get(main, 0) < per_tool:
            scored_per_tool[main] = scored_per_tool.get(main, 0) + 1
            scored.append(q)
    return usage, scored


class CachedEmbedder(Embedder):
    """The real embedder with a disk cache of document vectors (queries go through it too)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.cache = Cache(Embedder(), name)

    def embed_documents(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        return self.cache.embed(texts)


class Cache:
    def __init__(self, embedder: Embedder, name: str) -> None:
        self.embedder = embedder
        self.path = OUT / f"emb-cache-{hashlib.sha256(embedder.model_id.encode()).hexdigest()[:8]}-{name}.npz"
        self.vecs: dict[str, np.ndarray] = {}
        if self.path.exists():
            data = np.load(self.path, allow_pickle=False)
            self.vecs = dict(zip(json.loads(str(data["texts"])), data["matrix"], strict=True))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        missing = [t for t in dict.fromkeys(texts) if t not in self.vecs]
        if missing:
            for t, v in zip(missing, self.embedder.embed_documents(missing), strict=True):
                self.vecs[t] = v
            if len(missing) < 8:  # single queries at search time: not worth rewriting the file
                return np.stack([self.vecs[t] for t in texts])
            keys = list(self.vecs)
            np.savez(self.path, texts=json.dumps(keys), matrix=np.stack([self.vecs[k] for k in keys]))
        return np.stack([self.vecs[t] for t in texts])


Fuse = Callable[[np.ndarray, np.ndarray], np.ndarray]
FUSIONS: dict[str, Fuse] = {
    "max": np.maximum,
    "blend0.3": lambda t, u: 0.7 * t + 0.3 * u,
    "blend0.5": lambda t, u: 0.5 * t + 0.5 * u,
    "blend0.7": lambda t, u: 0.3 * t + 0.7 * u,
    "max-blend0.5": lambda t, u: np.maximum(t, 0.5 * t + 0.5 * u),
}


def explore(name: str, per_tool: int) -> None:
    data = load_dataset(name)
    cache = Cache(Embedder(), name)
    names = [t.name for t in data.tools]
    plain = cache.embed([tool_document(t) for t in data.tools])
    for set_name in data.query_sets:
        usage, scored = deal(data, set_name, per_tool)
        if not scored or not usage:
            continue
        qv = cache.embed([q.text for q in scored])
        # (b) examples in the document, as tool_document writes them (its first 5)
        with_ex = [t.model_copy(update={"examples": tuple(usage.get(t.name, ()))}) for t in data.tools]
        doc_ex = cache.embed([tool_document(t) for t in with_ex])
        rows = [i for i, n in enumerate(names) if usage.get(n)]
        cache.embed([q for i in rows for q in usage[names[i]]])  # one model run, one cache write
        umat = np.stack([_unit(cache.embed(usage[names[i]]).mean(axis=0)) for i in rows])
        variants: dict[str, np.ndarray] = {"a zero-shot": qv @ plain.T, "b examples in doc": qv @ doc_ex.T}
        text_scores = qv @ plain.T
        u_scores = qv @ umat.T
        for fname, fuse in FUSIONS.items():
            s = text_scores.copy()
            s[:, rows] = fuse(text_scores[:, rows], u_scores)
            variants[f"c usage {fname}"] = s
        # per-query centring: a usage score counts by how far it stands above the other usage scores
        # (query-to-query cosines run higher than query-to-document ones)
        mu_t = text_scores.mean(axis=1, keepdims=True)
        mu_u = u_scores.mean(axis=1, keepdims=True)
        sd_t = text_scores.std(axis=1, keepdims=True) + 1e-6
        sd_u = u_scores.std(axis=1, keepdims=True) + 1e-6
        centred = u_scores - mu_u + mu_t
        zu = (u_scores - mu_u) / sd_u * sd_t + mu_t
        for w in (0.3, 0.5, 0.7, 1.0):
            for label, uu in (("centre", centred), ("z", zu)):
                s = text_scores.copy()
                s[:, rows] = np.maximum(text_scores[:, rows], (1 - w) * text_scores[:, rows] + w * uu)
                variants[f"c usage {label}-maxblend{w}"] = s
        gold = [q.gold for q in scored]
        for vname, scores in variants.items():
            top = np.argsort(-scores, axis=1)[:, :10]
            ranked = [[names[j] for j in row] for row in top]
            m = summarize(list(zip(ranked, gold, strict=True)), (10,))
            line = {
                "dataset": name,
                "set": set_name,
                "variant": vname,
                "scored": len(scored),
                "tools_with_usage": len(rows),
                "map@10": round(m["map@10"], 4),
                "recall@10": round(m["recall@10"], 4),
            }
            print(json.dumps(line), flush=True)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / (np.linalg.norm(v) or 1.0)


METHODS = ("vector", "hybrid", "grtf")


def registry_run(name: str, per_tool: int, weights: Sequence[float], test: bool) -> None:
    """Real registries (LanceDB, fusion in ``SnapshotSearch._rank``), one per variant, on the dev split;
    ``test``: ToolLinkOS ``test`` split with every ``examples`` query as usage (the few-shot setting)."""
    data = load_dataset(name)
    embedder = CachedEmbedder(name)
    by_name = {t.name: t for t in data.tools}
    for set_name in data.query_sets:
        if test:
            usage = {q.main: [q.text] for q in data.query_sets[set_name] if q.split == "examples" and q.main}
            scored = [q for q in data.query_sets[set_name] if q.split == "test"]
        else:
            usage, scored = deal(data, set_name, per_tool)
        if not scored or not usage:
            continue
        embedder.cache.embed([q.text for q in scored])  # one model run and one cache write for all queries
        with_ex = [t.model_copy(update={"examples": tuple(usage.get(t.name, ()))}) for t in data.tools]
        variants = [("a zero-shot", data.tools, 0.0), ("b examples in doc", with_ex, 0.0)]
        variants += [(f"c usage w={w}", with_ex, w) for w in weights]
        for label, tools, weight in variants:
            settings = Settings(infer_dependencies=False, usage_weight=weight)
            with tempfile.TemporaryDirectory() as tmp:
                reg = Registry.open(Path(tmp), embedder=embedder, settings=settings)
                reg.ingest(name, tools, data.edges)
                ids = {t.name: t.id for t in reg.tools()}
                names = {v: k for k, v in ids.items()}
                for method in METHODS:
                    params = RetrievalSettings(method=method)
                    runs = [
                        ([names[r.tool_id] for r in retrieve_tools(reg, q.text, params)], q.gold)
                        for q in scored
                    ]
                    m = summarize(runs, (10,))
                    line = {
                        "dataset": name,
                        "set": set_name,
                        "split": "test (few-shot)" if test else "dev: examples dealt",
                        "variant": label,
                        "method": method,
                        "scored": len(scored),
                        "tools_with_usage": sum(1 for t in by_name if usage.get(t)),
                        "map@10": round(m["map@10"], 4),
                        "recall@10": round(m["recall@10"], 4),
                    }
                    print(json.dumps(line), flush=True)
                    with (OUT / "tool2vec.jsonl").open("a") as f:
                        f.write(json.dumps(line) + "\n")
                reg.close()


def latency(n_tools: int = 10_000, with_usage: int = 5_000, repeats: int = 500) -> None:
    """Cost of the fusion in the vector scoring at ``n_tools`` (random unit vectors; numpy only),
    and of one query embedding with the real model."""
    import time

    from threadpoolctl import threadpool_limits

    from toolweave.registry.usage import fuse_usage

    threadpool_limits(limits=1, user_api="blas")  # as the registry runs it

    rng = np.random.default_rng(0)
    matrix = _units(rng.standard_normal((n_tools, 384)).astype(np.float32))
    usage = _units(rng.standard_normal((with_usage, 384)).astype(np.float32))
    rows = np.sort(rng.choice(n_tools, with_usage, replace=False))
    queries = _units(rng.standard_normal((repeats, 384)).astype(np.float32))
    timings: dict[str, list[float]] = {"text only": [], "text + usage fused": []}
    for q in queries:
        t0 = time.perf_counter()
        scores = matrix @ q
        timings["text only"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        scores = matrix @ q
        fuse_usage(scores, rows, usage @ q, 0.7)
        timings["text + usage fused"].append(time.perf_counter() - t0)
    embedder = Embedder()
    t0 = time.perf_counter()
    embedder.embed_query("warm up the model")
    load = time.perf_counter() - t0
    embed = []
    for n in range(100):
        t0 = time.perf_counter()
        embedder.embed_documents([f"find the weather forecast for city number {n} tomorrow"])
        embed.append(time.perf_counter() - t0)
    out = {k: round(float(np.percentile(v, 50)) * 1000, 3) for k, v in timings.items()}
    out["model load + first query s"] = round(load, 2)
    out["query embedding p50 ms"] = round(float(np.percentile(embed, 50)) * 1000, 2)
    out["query embedding p95 ms"] = round(float(np.percentile(embed, 95)) * 1000, 2)
    print(json.dumps({"tools": n_tools, "with_usage": with_usage, "p50_ms": out}))


def _units(m: np.ndarray) -> np.ndarray:
    units: np.ndarray = m / np.linalg.norm(m, axis=1, keepdims=True)
    return units


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", action="append")
    parser.add_argument("--per-tool", type=int, default=5, help="scored queries per tool at most")
    parser.add_argument("--explore", action="store_true", help="fusion variants, vector side only")
    parser.add_argument("--test", action="store_true", help="ToolLinkOS test split (report once)")
    parser.add_argument("--weight", type=float, action="append", help="usage weights for (c)")
    parser.add_argument("--latency", action="store_true", help="fusion and query-embedding cost")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.latency:
        latency()
        return
    if args.test:
        registry_run("toollinkos", args.per_tool, args.weight or [0.5], test=True)
        return
    for name in args.only or ["toollinkos", "api_bank", "metatool", "seal_tools"]:
        if args.explore:
            explore(name, args.per_tool)
        else:
            registry_run(name, args.per_tool, args.weight or [0.5], test=False)


if __name__ == "__main__":
    main()

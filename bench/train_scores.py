"""The real pipeline's figures of a trained model (``train_model.py score`` and ``latency``): a fresh
registry per dataset with the gateway's retrieval settings, the pool's test splits reported in sample and
the out-of-pool sets out of sample. Kept apart from the training commands: it needs the whole product
(LanceDB, fastembed), which a machine that trains from a pack does not have."""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from train_recipe import log, sha256

if TYPE_CHECKING:
    from toolweave.benchmark.datasets import BenchDataset

__all__ = ["cmd_latency", "cmd_score", "local_query_encoder", "out_of_pool_view", "pool_test_view"]


def pool_test_view(data: BenchDataset) -> BenchDataset:
    """``data`` with only its in-pool query sets, each cut to the pool's ``test`` split."""
    from training_pairs import POOL, pool_split

    sets = {
        s: [q for q in qs if pool_split(data.name, q) == "test"]
        for s, qs in data.query_sets.items()
        if POOL[data.name] is None or s in (POOL[data.name] or ())
    }
    return replace(data, query_sets={s: qs for s, qs in sets.items() if qs})


def out_of_pool_view(data: BenchDataset) -> BenchDataset:

    from training_pairs import OUT_OF_POOL

    sets = OUT_OF_POOL[data.name]
    return replace(data, query_sets={s: qs for s, qs in data.query_sets.items() if sets is None or s in sets})


def cmd_score(args: argparse.Namespace) -> None:
    """grtf through the real pipeline (a fresh registry per dataset, the gateway's retrieval settings,
    declared graphs), each model in ``--model``: the pool's test splits (in-sample) and the out-of-pool
    sets (out of sample). One JSON line per (model, dataset, query set); ``--out`` collects them."""
    from training_pairs import OUT_OF_POOL, POOL

    from toolweave.benchmark import run_benchmark
    from toolweave.benchmark.datasets import load_dataset
    from toolweave.benchmark.embedding_cache import CachedEmbedder
    from toolweave.commands.bench import bench_retrieval
    from toolweave.commands.search import retrieval_params
    from toolweave.registry.embeddings import Embedder

    params = retrieval_params(bench_retrieval(True), method=args.method, top_k=None, final_k=None)
    args.model = [local_query_encoder(Path(m)) if m.endswith(".onnx") else m for m in args.model]
    rows: list[dict[str, Any]] = []
    names = args.dataset or [*POOL, *(d for d in OUT_OF_POOL if d not in POOL)]
    for model in args.model:
        embedder = CachedEmbedder(Embedder(model))
        for name in names:
            data = load_dataset(name)
            views = []
            if name in POOL:
                views.append(("in-pool test (in sample)", pool_test_view(data)))
            if name in OUT_OF_POOL:
                views.append(("out of pool", out_of_pool_view(data)))
            for kind, view in views:
                t0 = time.time()
                for r in run_benchmark(view, params, embedder=embedder, ks=(5, 10)):
                    row = {
                        "model": model,
                        "kind": kind,
                        "dataset": name,
                        "set": r.query_set,
                        "queries": r.queries,
                        "map@10": round(r.metrics["map@10"], 4),
                        "recall@5": round(r.metrics["recall@5"], 4),
                        "complete@10": round(r.metrics["complete@10"], 4),
                        "s": round(time.time() - t0),
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows, indent=1), encoding="utf-8")


def local_query_encoder(path: Path) -> str:
    """A run's exported ``model.onnx`` as a query encoder over MiniLM's tool vectors, under a name made
    from its sha256 (the benchmarks' embedding cache is keyed by model name, so two files never share
    cached vectors); returns the ``embedding_model`` value to score it with."""

    from toolweave.registry import models

    digest = sha256(path)
    queries = replace(
        models.TOOLRET_V2_QUERIES,
        name=f"local/{digest[:12]}-queries",
        file=str(path.resolve()),
        sha256=digest,
    )
    encoder = models.QueryEncoderSpec(
        name=f"local/{digest[:12]}", base=models.MINILM.name, queries=queries.name
    )
    models.OFFLINE_MODELS[queries.name] = queries
    models.QUERY_ENCODERS[encoder.name] = encoder
    log(f"{path}: scored as {encoder.name}")
    return encoder.name


def cmd_latency(args: argparse.Namespace) -> None:
    """Query embedding wall time, one request at a time as a gateway embeds them (the single-threaded
    query instance, no cache: every request new), each model in ``--model`` alternating request by
    request so both see the same machine load."""
    from toolweave.benchmark.datasets import load_dataset
    from toolweave.registry.embeddings import Embedder

    texts = [q.text for q in load_dataset("bfcl_multiple").query_sets["queries_live_multiple"]][: args.n]
    models = {m: Embedder(m) for m in args.model}
    for emb in models.values():
        emb.embed_query("warm up")
    times: dict[str, list[float]] = {m: [] for m in models}
    for i, text in enumerate(texts):
        for m, emb in models.items():
            t0 = time.perf_counter()
            emb.request_vectors([f"{text} #{i}"])  # a new text every time: no LRU hit
            times[m].append((time.perf_counter() - t0) * 1000)
    load = round(os.getloadavg()[0], 2)
    for m, ms in times.items():
        row = {"model": m, "n": len(ms), "p50_ms": round(float(np.percentile(ms, 50)), 2)}
        row |= {"p95_ms": round(float(np.percentile(ms, 95)), 2), "load_1m": load}
        print(json.dumps(row), flush=True)

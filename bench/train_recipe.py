"""The training recipe itself, free of the project's runtime: torch, transformers, tokenizers, numpy and the
pure metrics module only, so one file runs on any machine with PyTorch, a GPU machine without network or
the project's dependencies included.

``bench/train_model.py`` builds the requests (``Pair``) and the catalogues' fixed tool vectors (``Fleet``)
from ``../shared`` and the registry's own embedder, then either trains here in-process or writes them to a
*pack* (``train_model.py pack``): the pairs, the vectors and the base model's weights, which a machine
without the datasets or the registry trains from (``train_model.py train --pack DIR``). Such a run
returns the change of the trained weights (``delta-*.pt``), which ``train_model.py unpack`` adds to the
exact base model and exports as the registry runs it.
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from toolweave.retrieval.metrics import summarize

PACK_FORMAT = 1


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Pair:
    """One request as the recipe reads it."""

    dataset: str
    text: str
    """Already cleaned as the gateway cleans a request (``clean_query``)."""
    catalogue: str
    """Key of the ``Fleet`` the request ranks over."""
    positives: tuple[int, ...]
    """Indices of the tools the request needs; one cross-entropy term each."""
    gold: tuple[int, ...]
    """Every index that is one of those tools, BFCL's paraphrases (``name#2``) included: masked in each
    other's term, never negatives."""


@dataclass
class Fleet:
    """One catalogue as the registry holds it: today's int8 tool vectors, never trained."""

    name: str
    names: list[str]
    vectors: Any
    """torch tensor (tools × dim) on the training device, unit rows."""
    host: np.ndarray
    """The same vectors in host memory (val scoring ranks with numpy)."""

    @classmethod
    def of(cls, name: str, names: Sequence[str], vectors: np.ndarray, device: str) -> Fleet:
        import torch

        host = np.ascontiguousarray(vectors, dtype=np.float32)
        return cls(name, list(names), torch.tensor(host, device=device), host)


class Encoder:
    """A BERT encoder with mean pooling and unit normalisation (what the registry's ONNX run does)."""

    def __init__(self, model_dir: Path, device: str = "cpu", weights: dict[str, Any] | None = None) -> None:
        """``weights`` (a pack's base model): built from ``model_dir``'s config and loaded from them, as
        fp32 whatever dtype they travelled in; otherwise ``model_dir``'s own weights."""
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoConfig, AutoModel

        self.torch = torch
        self.device = device
        if weights is None:
            model = AutoModel.from_pretrained(str(model_dir), local_files_only=True)
        else:
            config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
            model = cast(Any, AutoModel).from_config(config)  # untyped in transformers 5; absent in CI
            missing, _ = model.load_state_dict({k: v.float() for k, v in weights.items()}, strict=False)
            if missing:
                raise SystemExit(f"the pack's base weights lack {missing[:5]} (another model's layout?)")
        self.model = model.float().to(device)
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


# ------------------------------------------------------------------------------------------ one step


def batch_loss(
    enc: Encoder, batch: Sequence[Pair], fleets: dict[str, Fleet], args: argparse.Namespace
) -> Any:
    """Cross-entropy of each request over every tool of its own catalogue (the whole catalogue is the
    negatives: the document side is fixed, so scoring it all costs one matrix product), once per gold
    tool with the request's other gold tools and their paraphrases masked; averaged. ``args.margin`` > 0
    subtracts that cosine from the gold's logit (additive-margin softmax)."""
    import torch

    qv = enc.forward([p.text for p in batch], args.query_len)
    losses = []
    for i, pair in enumerate(batch):
        logits = args.scale * qv[i] @ fleets[pair.catalogue].vectors.T
        for p in pair.positives:
            others = torch.zeros_like(logits, dtype=torch.bool)
            others[[j for j in pair.gold if j != p]] = True
            masked = logits.masked_fill(others, float("-inf"))
            if args.margin:  # additive margin: the gold must lead its nearest rivals by it, not merely lead
                masked = masked - args.scale * args.margin * torch.nn.functional.one_hot(
                    torch.tensor(p, device=logits.device), logits.shape[0]
                )
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
    enc: Encoder, batch: Sequence[Pair], fleets: dict[str, Fleet], opt: Any, args: argparse.Namespace
) -> float:
    import torch

    loss = batch_loss(enc, batch, fleets, args)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in enc.model.parameters() if p.requires_grad], 1.0)
    opt.step()
    return float(loss.item())


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


def val_scores(pairs: Sequence[Pair], vectors: np.ndarray, fleets: dict[str, Fleet]) -> dict[str, float]:
    """mAP@10 of each dataset's requests, vector only, over the registry's own tool vectors;
    ``vectors`` are the requests' (one row per pair)."""
    by_set: dict[str, list[tuple[list[str], tuple[str, ...]]]] = {}
    for pair, vec in zip(pairs, vectors, strict=True):
        fleet = fleets[pair.catalogue]
        top = np.argsort(-(fleet.host @ vec))[:10]
        gold = tuple(fleet.names[g] for g in pair.positives)
        by_set.setdefault(pair.dataset, []).append(([fleet.names[i] for i in top], gold))
    out = {name: round(summarize(runs, (10,))["map@10"], 4) for name, runs in sorted(by_set.items())}
    out["mean"] = round(float(np.mean(list(out.values()))), 4)
    return out


# ------------------------------------------------------------------------------------------- the run


def run_training(
    enc: Encoder,
    examples: Sequence[Pair],
    val: Sequence[Pair],
    fleets: dict[str, Fleet],
    today: Callable[[], dict[str, float]],
    args: argparse.Namespace,
    out: Path,
) -> dict[str, Any]:
    """Train on ``examples``, score ``val`` after every epoch, keep the best epoch (``out/best.pt``, the
    whole state dict); resumes from ``out/checkpoint.pt`` unless ``args.fresh``. ``today`` gives the
    model of today's val figures, which an epoch must beat to be kept. Returns the run's record."""
    import torch

    started = time.time()
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
        figures = today()
        state["val"].append({"epoch": 0, "model": "int8 MiniLM (today)", **figures})
        state["best"] = {"epoch": 0, **figures}  # an epoch must beat today's model to be kept
        log(f"val, today's model: {figures}")
    log(f"{len(examples)} requests, {per_epoch} steps/epoch × {args.epochs}, {trainable:,} trainable")
    resumed_s = state["elapsed_s"]
    val_texts = [p.text for p in val]
    for epoch in range(state["epoch"], args.epochs):
        rng = random.Random(args.seed * 1000 + epoch)  # the same order whether or not the run resumed
        order = list(examples)
        rng.shuffle(order)
        enc.model.train()
        t0 = time.time()
        for n, start in enumerate(range(0, len(order), args.batch), 1):
            loss = one_step(enc, order[start : start + args.batch], fleets, opt, args)
            sched.step()
            if n % 10 == 0 or n == per_epoch:
                rate = (time.time() - t0) / n
                log(f"epoch {epoch + 1} step {n}/{per_epoch} loss {loss:.4f} ({rate:.2f} s/step)")
        if args.device == "cuda":
            torch.cuda.synchronize()
        step_s = (time.time() - t0) / per_epoch
        scores = val_scores(val, enc.embed(val_texts, max_len=128), fleets)
        state["val"].append({"epoch": epoch + 1, "step_s": round(step_s, 3), **scores})
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
    return {
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
        "params": {k: v for k, v in vars(args).items() if k != "func"},
    }


# ------------------------------------------------------------------------------------------- the pack


def write_pack(
    folder: Path,
    examples: Sequence[Pair],
    val: Sequence[Pair],
    fleets: dict[str, Fleet],
    today: dict[str, float],
    base_dir: Path,
    meta: dict[str, Any],
    max_len: int,
) -> None:
    """Everything a run needs, for a machine without ``../shared`` or the registry: the pairs, the
    catalogues' tool vectors, today's val figures and the base model (config, tokenizer, its weights in
    fp16, halving what travels; the run returns only the change it made, see ``write_delta``)."""
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModel

    folder.mkdir(parents=True, exist_ok=True)
    doc = {
        "format": PACK_FORMAT,
        "meta": meta,
        "today": today,
        "train": [asdict(p) for p in examples],
        "val": [asdict(p) for p in val],
        "fleets": {k: {"name": f.name, "names": f.names} for k, f in fleets.items()},
    }
    (folder / "pairs.json").write_text(json.dumps(doc), encoding="utf-8")
    # fp16 tool vectors: they came from an int8 model, so the rounding is far below what is there already
    arrays: dict[str, Any] = {k: f.host.astype(np.float16) for k, f in fleets.items()}
    np.savez(folder / "fleets.npz", **arrays)
    base = AutoModel.from_pretrained(str(base_dir), local_files_only=True)
    weights = {k: v.half() for k, v in base.state_dict().items()}
    # Only the vocabulary rows the pack's requests use travel (a fifth of the table): the recipe freezes
    # the embeddings and never tokenizes anything else, so the run computes exactly what it would here.
    tokenizer = Tokenizer.from_file(str(base_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_len)
    used = sorted({i for e in tokenizer.encode_batch([p.text for p in [*examples, *val]]) for i in e.ids})
    table = weights.pop(_WORDS)
    weights[_WORDS + ".rows"] = table[used].clone()
    weights[_WORDS + ".ids"] = torch.tensor(used, dtype=torch.int64)
    weights[_WORDS + ".shape"] = torch.tensor(list(table.shape), dtype=torch.int64)
    torch.save(weights, folder / "base_fp16.pt")
    for name in ("config.json", "tokenizer.json"):
        (folder / name).write_bytes((base_dir / name).read_bytes())


def read_pack(folder: Path, device: str) -> tuple[list[Pair], list[Pair], dict[str, Fleet], dict[str, Any]]:
    doc = json.loads((folder / "pairs.json").read_text(encoding="utf-8"))
    if doc.get("format") != PACK_FORMAT:
        raise SystemExit(f"{folder}: pack format {doc.get('format')}, this script reads {PACK_FORMAT}")

    def pairs(rows: list[dict[str, Any]]) -> list[Pair]:
        return [
            Pair(r["dataset"], r["text"], r["catalogue"], tuple(r["positives"]), tuple(r["gold"]))
            for r in rows
        ]

    with np.load(folder / "fleets.npz") as arrays:
        fleets = {k: Fleet.of(f["name"], f["names"], arrays[k], device) for k, f in doc["fleets"].items()}
    return pairs(doc["train"]), pairs(doc["val"]), fleets, doc


def pack_weights(folder: Path) -> dict[str, Any]:
    import torch

    weights: dict[str, Any] = torch.load(folder / "base_fp16.pt", map_location="cpu", weights_only=True)
    rows, ids, shape = (weights.pop(f"{_WORDS}.{part}") for part in ("rows", "ids", "shape"))
    table = torch.zeros(*shape.tolist(), dtype=rows.dtype)
    table[ids] = rows
    weights[_WORDS] = table
    return weights


_WORDS = "embeddings.word_embeddings.weight"


def write_delta(enc: Encoder, best: Path, base: dict[str, Any], out: Path, parts: int = 2) -> list[Path]:
    """The kept epoch's change to every trainable weight, fp16, in ``parts`` files (a GPU machine's
    files come back 16 MiB at most each): ``unpack`` adds it to the exact fp32 base model."""
    import torch

    tuned = torch.load(best, map_location="cpu", weights_only=True)
    trained = [k for k, p in enc.model.named_parameters() if p.requires_grad]
    delta = {k: (tuned[k].float() - base[k].float()).half() for k in trained}
    shares: list[dict[str, Any]] = [{} for _ in range(parts)]
    for key in sorted(delta, key=lambda k: -delta[k].numel()):  # largest first, each to the lightest part
        min(shares, key=lambda d: sum(v.numel() for v in d.values()))[key] = delta[key]
    paths = []
    for i, share in enumerate(shares):
        path = out / f"delta-{i}.pt"
        torch.save(share, path)
        paths.append(path)
    return paths


def apply_delta(state: dict[str, Any], paths: Sequence[Path]) -> dict[str, Any]:
    """``state`` (the exact base model's) plus the change that ``write_delta`` wrote to ``paths``."""
    import torch

    out = dict(state)
    for path in paths:
        for key, change in torch.load(path, map_location="cpu", weights_only=True).items():
            out[key] = out[key] + change.float()
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()

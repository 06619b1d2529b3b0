"""A learned query adapter over the registry's own vectors: leave-one-dataset-out lab.

The cheap candidate beside the fine-tuned encoder (``bench/train_model.py``): the tool vectors stay the int8
MiniLM's (no re-embedding), and a request's vector is mapped ``q → normalise(q + W q)`` before the cosine.
``W`` (384 × 384, starting at 0: the identity map) is trained on request → tool pairs with the whole
catalogue of the request's dataset as negatives (softmax over every tool, scale 20), with an L2 pull of
``W`` towards 0. Runs on the cached vectors: seconds per model.

    nice -n 15 .venv/bin/python bench/query_adapter.py lodo --out bench/out/model/adapter_lodo.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolweave.benchmark.datasets import BenchDataset, load_dataset
from toolweave.benchmark.training_pairs import (
    TRAINING_DATASETS,
    base_name,
    training_queries,
)
from toolweave.registry.documents import tool_document
from toolweave.retrieval.metrics import summarize
from toolweave.retrieval.query import clean_query

SEED = 13
SCALE = 20.0
CAP = 16


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class Fleet:
    """One dataset's vectors: tools and every query set."""

    name: str
    data: BenchDataset
    names: list[str]
    docs: np.ndarray
    sets: dict[str, tuple[list[tuple[str, ...]], np.ndarray]]
    """query set → (gold names per query, query vectors)."""
    vector_of: dict[str, np.ndarray]


def embed(texts: Sequence[str]) -> np.ndarray:
    from toolweave.benchmark.embedding_cache import CachedEmbedder
    from toolweave.registry.embeddings import Embedder

    global _EMB
    if _EMB is None:
        _EMB = CachedEmbedder(Embedder(threads=2))
    return np.asarray(_EMB.embed_documents(list(texts)), dtype=np.float32)


_EMB = None


def load_fleet(name: str, every: int) -> Fleet:
    data = load_dataset(name)
    if name == "metatool" and every > 1:
        # 20k single-tool requests: score every n-th, train on the capped picks (kept whatever n is)
        picked = {q.text for q in training_queries([name], cap_per_tool=CAP, seed=SEED, loaded={name: data})}
        single = data.query_sets["queries_single"]
        data.query_sets["queries_single"] = [
            q for i, q in enumerate(single) if i % every == 0 or q.text.strip() in picked
        ]
        data.query_sets["queries_single_scored"] = single[::every]
    names = [t.name for t in data.tools]
    docs = embed([tool_document(t, with_examples=False) for t in data.tools])
    sets: dict[str, tuple[list[tuple[str, ...]], np.ndarray]] = {}
    vector_of: dict[str, np.ndarray] = {}
    for set_name, queries in data.query_sets.items():
        texts = [clean_query(q.text) for q in queries]
        vecs = embed(texts)
        sets[set_name] = ([q.gold for q in queries], vecs)
        vector_of.update(zip(texts, vecs, strict=True))
    log(f"{name}: {len(names)} tools, {sum(len(g) for g, _ in sets.values())} queries")
    return Fleet(name, data, names, docs, sets, vector_of)


def adapt(q: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    if w is None:
        return q
    out = q + q @ w.T
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def score(fleet: Fleet, w: np.ndarray | None) -> dict[str, dict[str, float]]:
    out = {}
    for set_name, (golds, vecs) in fleet.sets.items():
        if set_name + "_scored" in fleet.sets:
            continue  # scored through its sample
        top = np.argsort(-(adapt(vecs, w) @ fleet.docs.T), axis=1)[:, :10]
        runs = [([fleet.names[i] for i in row], g) for row, g in zip(top, golds, strict=True)]
        m = summarize(runs, (5, 10))
        out[set_name] = {"map@10": round(m["map@10"], 4), "recall@5": round(m["recall@5"], 4)}
    return out


def train_adapter(
    fleets: dict[str, Fleet], train_on: Sequence[str], *, l2: float, steps: int, cap: int, lr: float
) -> np.ndarray:
    """``W`` trained on the requests of ``train_on`` (every tool of a request's dataset a negative)."""
    import torch

    torch.manual_seed(SEED)
    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "2")))
    rng = np.random.default_rng(SEED)
    loaded = {  # the scored sample is not trained on
        n: replace(
            fleets[n].data,
            query_sets={k: v for k, v in fleets[n].data.query_sets.items() if not k.endswith("_scored")},
        )
        for n in train_on
    }
    groups = []  # per dataset: query vectors, positive mask, allowed mask, doc matrix
    for name in train_on:
        fleet = fleets[name]
        qs = training_queries([name], cap_per_tool=cap, seed=SEED, loaded=loaded)
        if not qs:
            continue
        qv = np.stack([fleet.vector_of[clean_query(q.text)] for q in qs])
        base = [base_name(n) for n in fleet.names]
        pos = np.zeros((len(qs), len(base)), dtype=bool)
        allowed = np.ones_like(pos)
        for i, q in enumerate(qs):
            pos[i, list(q.positives)] = True
            gold = {base[p] for p in q.positives}
            for j, b in enumerate(base):  # a paraphrased variant of a gold tool is neither
                if b in gold and not pos[i, j]:
                    allowed[i, j] = False
        groups.append(
            (torch.tensor(qv), torch.tensor(pos), torch.tensor(allowed), torch.tensor(fleet.docs), name)
        )
    # each dataset weighs by the square root of its size: the big ones lead, the small ones still count
    sizes = np.array([len(g[0]) for g in groups], dtype=float)
    probs = np.sqrt(sizes) / np.sqrt(sizes).sum()
    dim = groups[0][0].shape[1]
    w = torch.zeros((dim, dim), requires_grad=True)
    opt = torch.optim.Adam([w], lr=lr)
    for _ in range(steps):
        g = groups[int(rng.choice(len(groups), p=probs))]
        idx = torch.tensor(rng.choice(len(g[0]), size=min(256, len(g[0])), replace=False))
        q, pos, allowed, docs = g[0][idx], g[1][idx], g[2][idx], g[3]
        qa = torch.nn.functional.normalize(q + q @ w.T, dim=-1)
        logits = SCALE * qa @ docs.T
        logits = logits.masked_fill(~allowed, float("-inf"))
        pos_lse = torch.logsumexp(logits.masked_fill(~pos, float("-inf")), dim=1)
        loss = (torch.logsumexp(logits, dim=1) - pos_lse).mean() + l2 * (w**2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return w.detach().numpy()


def cmd_lodo(args: argparse.Namespace) -> None:
    names = [*TRAINING_DATASETS, "toollinkos"]
    fleets = {n: load_fleet(n, args.every) for n in names}
    base = {n: score(f, None) for n, f in fleets.items()}
    grid = [(l2, steps) for l2 in args.l2 for steps in args.steps]
    out: dict[str, object] = {"base": base, "runs": {}}
    runs: dict[str, object] = {}
    for l2, steps in grid:
        key = f"l2={l2} steps={steps}"
        held: dict[str, object] = {}
        for left in TRAINING_DATASETS:
            train_on = [d for d in TRAINING_DATASETS if d != left]
            w = train_adapter(fleets, train_on, l2=l2, steps=steps, cap=args.cap, lr=args.lr)
            held[left] = score(fleets[left], w)
        w_all = train_adapter(fleets, TRAINING_DATASETS, l2=l2, steps=steps, cap=args.cap, lr=args.lr)
        held["toollinkos"] = score(fleets["toollinkos"], w_all)
        insample = {d: score(fleets[d], w_all) for d in TRAINING_DATASETS}
        runs[key] = {"out_of_sample": held, "in_sample_all": insample}
        log(json.dumps({key: held}))
    out["runs"] = runs
    Path(args.out).write_text(json.dumps(out, indent=1), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(required=True)
    p = sub.add_parser("lodo")
    p.set_defaults(func=cmd_lodo)
    p.add_argument("--out", default="bench/out/model/adapter_lodo.json")
    p.add_argument("--l2", type=float, action="append", default=None)
    p.add_argument("--steps", type=int, action="append", default=None)
    p.add_argument("--cap", type=int, default=CAP)
    p.add_argument("--every", type=int, default=4, help="MetaTool single: score every n-th request")
    p.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args(argv)
    args.l2 = args.l2 or [0.01]
    args.steps = args.steps or [300]
    args.func(args)


if __name__ == "__main__":
    main()

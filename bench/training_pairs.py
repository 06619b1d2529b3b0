"""Request → tool training pairs for the project's own retrieval model, and the protocol that keeps its
figures honest.

**One pool, one split.** The model is trained on the *pool*: the datasets of ``POOL`` (only the query sets
named there). ToolLinkOS, MetaTool and BFCL live_multiple are never in it: they are the out-of-pool check,
and none of their requests, nor a tool that only they use, is ever a training document. Inside the pool
every request falls in one fixed split, ``pool_split``: ``train`` (trained on), ``val`` (the only data
hyperparameters and the stopping epoch are chosen on) and ``test`` (reported as in-sample figures).
Requests of one dialogue (BFCL multi-turn) or one API (ToolAlpaca) share a split, so no test request has
a sibling in training; Seal-Tools keeps its own ``test_in_domain`` as the test split.

Each pair is a request and the indices of the tools it needs in its catalogue; the catalogue's
``documents`` are its tools as the registry embeds them (``tool_document``), which the query-tower recipe
scores against. Pure data: no model, no torch (``train_model.py`` beside it trains on it); the product
never reads it.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from toolweave.benchmark.datasets import BenchDataset, BenchQuery, load_dataset
from toolweave.errors import CatalogError
from toolweave.names import name_words
from toolweave.records import ToolRecord
from toolweave.registry.documents import tool_document

__all__ = [
    "OUT_OF_POOL",
    "POOL",
    "PoolSplit",
    "TrainingQuery",
    "base_name",
    "pool_split",
    "pseudo_request",
    "training_queries",
]

PoolSplit = Literal["train", "val", "test"]

POOL: dict[str, tuple[str, ...] | None] = {
    "api_bank": None,
    "bfcl_multi_turn": None,
    "bfcl_multiple": ("queries_multiple",),  # live_multiple is out of the pool
    "nestful": None,
    "openapi_links": None,
    "seal_tools": None,
    "toolalpaca": None,
}
"""Dataset → the query sets that may be trained on (None: all). Each folder has a licence file."""

OUT_OF_POOL: dict[str, tuple[str, ...] | None] = {
    "toollinkos": None,
    "metatool": None,
    "bfcl_multiple": ("queries_live_multiple",),
}
"""Never trained on: every model's figures on these are out of sample."""

_TEST_SHARE = 20  # of 100 buckets
_VAL_SHARE = 12


def _group_key(dataset: str, query: BenchQuery) -> str:
    """Requests that must share a split: one BFCL dialogue's turns, one ToolAlpaca API's requests."""
    if dataset == "bfcl_multi_turn":
        return re.sub(r"-turn\d+$", "", query.id)
    if dataset == "toolalpaca":
        return re.sub(r"-\d+$", "", query.id)
    return query.id


def pool_split(dataset: str, query: BenchQuery) -> PoolSplit:
    """The fixed split of a pool request: a hash of its group, so it never moves between runs."""
    if dataset == "seal_tools":
        if query.split == "test_in_domain":
            return "test"
        bucket = _bucket(dataset, query.id)
        return "val" if bucket < _VAL_SHARE else "train"
    bucket = _bucket(dataset, _group_key(dataset, query))
    if bucket < _TEST_SHARE:
        return "test"
    return "val" if bucket < _TEST_SHARE + _VAL_SHARE else "train"


def _bucket(dataset: str, key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{dataset}\x00{key}".encode()).digest()[:4], "big") % 100


def in_pool(dataset: str, query_set: str) -> bool:
    if dataset not in POOL:
        return False
    sets = POOL[dataset]
    return sets is None or query_set in sets


@dataclass(frozen=True)
class TrainingQuery:
    dataset: str
    query_set: str
    text: str
    positives: tuple[int, ...]
    """Indices into the dataset's ``documents`` of every tool the request needs."""
    documents: tuple[str, ...]
    """The trainable part of the request's catalogue as the registry embeds it (``tool_document``): what
    the first pass ranks (one tuple per catalogue, shared by its requests, not copied)."""
    names: tuple[str, ...]
    """Tool names, parallel to ``documents``."""


def base_name(name: str) -> str:
    """BFCL names paraphrased variants of one function ``name#2``, ``name#3``: they are one function,
    so neither a hard negative nor an in-batch negative of each other."""
    return name.split("#", 1)[0]


def _trainable_tools(data: BenchDataset) -> list[ToolRecord]:
    """Tools an out-of-pool request needs, and no pool request does, are never training documents."""
    outside = OUT_OF_POOL.get(data.name, ())
    if not outside:
        return list(data.tools)
    inside = {g for s, qs in data.query_sets.items() if in_pool(data.name, s) for q in qs for g in q.gold}
    held = {g for s, qs in data.query_sets.items() if s in outside for q in qs for g in q.gold}
    return [t for t in data.tools if t.name in inside or t.name not in held]


_BOILERPLATE = (
    # BFCL multi-turn: "This tool belongs to … Tool description: X"; ToolAlpaca: "[API: what it is] X"
    re.compile(r"^.*?Tool description:\s*", re.S),
    re.compile(r"^\[[^\]]*\]\s*"),
)


def pseudo_request(tool: ToolRecord) -> str:
    """A request made from the tool's own text: the first sentence of its description without the
    catalogue's boilerplate, or its name's words when the description says nothing more. It teaches
    the query tower the pool's *tools* (thousands of them, Seal-Tools' 4,076 across domains) rather
    than only the wording of the pool's 1,790 requests."""
    text = tool.description.strip()
    for pattern in _BOILERPLATE:
        text = pattern.sub("", text, count=1)
    first = re.split(r"(?<=[.!?])\s+", text, maxsplit=1)[0].strip().rstrip(".")
    if len(first.split()) < 3 or first.lower() == tool.name.lower():
        return name_words(tool.name)
    return first


def _pseudo_tools(data: BenchDataset, tools: list[ToolRecord]) -> list[ToolRecord]:
    """Tools a pseudo-request may be made for: every trainable tool, except in a dataset with an
    out-of-pool query set, where only tools an in-pool request needs (its other tools may be the
    out-of-pool set's candidates)."""
    if not OUT_OF_POOL.get(data.name, ()):
        return tools
    inside = {g for s, qs in data.query_sets.items() if in_pool(data.name, s) for q in qs for g in q.gold}
    return [t for t in tools if t.name in inside]


def training_queries(
    datasets: Iterable[str],
    *,
    splits: Sequence[PoolSplit] = ("train",),
    cap_per_tool: int = 16,
    seed: int = 0,
    loaded: dict[str, BenchDataset] | None = None,
    pseudo: bool = False,
) -> list[TrainingQuery]:
    """The pool requests of ``datasets`` in ``splits``, each with its gold tools' documents.

    A single-tool request counts against its tool's cap (``cap_per_tool``, chosen at random with
    ``seed``) so that no tool's wording dominates; requests with several gold tools are all kept.
    ``pseudo`` adds one ``pseudo_request`` per tool (query set ``"pseudo"``) when ``splits`` has
    ``train``. A dataset outside the pool is refused.
    """
    rng = random.Random(seed)
    out: list[TrainingQuery] = []
    for name in datasets:
        if name not in POOL:
            raise CatalogError(f"{name}: not in the training pool (its figures stay out of sample)")
        data = (loaded or {}).get(name) or load_dataset(name)
        tools = _trainable_tools(data)
        documents = tuple(tool_document(t, with_examples=False) for t in tools)
        names = tuple(t.name for t in tools)
        index = {n: i for i, n in enumerate(names)}
        for set_name, queries in sorted(data.query_sets.items()):
            if not in_pool(name, set_name):
                continue
            by_tool: dict[tuple[int, ...], list[str]] = defaultdict(list)
            seen: set[tuple[str, tuple[int, ...]]] = set()
            for q in queries:
                if pool_split(name, q) not in splits:
                    continue
                gold = tuple(dict.fromkeys(index[g] for g in q.gold if g in index))
                text = q.text.strip()
                if not gold or not text or (text, gold) in seen:
                    continue
                seen.add((text, gold))
                by_tool[gold if len(gold) == 1 else ()].append(text)
                if len(gold) > 1:
                    out.append(TrainingQuery(name, set_name, text, gold, documents, names))
            for gold, texts in sorted(by_tool.items()):
                if not gold:
                    continue
                chosen = rng.sample(texts, cap_per_tool) if len(texts) > cap_per_tool else texts
                out.extend(TrainingQuery(name, set_name, t, gold, documents, names) for t in chosen)
        if pseudo and "train" in splits:
            out.extend(
                TrainingQuery(name, "pseudo", pseudo_request(t), (index[t.name],), documents, names)
                for t in _pseudo_tools(data, tools)
            )
    return out

"""Request → tool training pairs from the benchmark folders, for the project's own retrieval model.

Each pair is a request and the enriched document of a tool it needs (``tool_document``: the very text the
registry embeds), grouped by dataset so a model can be trained *without* a dataset and scored on it
(leave-one-dataset-out). ToolLinkOS is never a source of training requests: its figure stays zero-shot.
Pure data: no model, no torch (``bench/train_model.py`` trains on it).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from toolweave.benchmark.datasets import BenchDataset, load_dataset
from toolweave.errors import CatalogError
from toolweave.registry.documents import tool_document

__all__ = [
    "TRAINING_DATASETS",
    "ZERO_SHOT_DATASETS",
    "TrainingQuery",
    "base_name",
    "hard_negative_indices",
    "training_queries",
]

TRAINING_DATASETS = (
    "api_bank",
    "bfcl_multi_turn",
    "bfcl_multiple",
    "metatool",
    "nestful",
    "openapi_links",
    "seal_tools",
    "toolalpaca",
)
"""The folders under ../shared/datasets whose requests may be trained on (each has a licence file)."""

ZERO_SHOT_DATASETS = ("toollinkos",)
"""Never trained on: their figures are zero-shot for every model the project trains."""


@dataclass(frozen=True)
class TrainingQuery:
    dataset: str
    query_set: str
    text: str
    positives: tuple[int, ...]
    """Indices into the dataset's ``documents`` of every tool the request needs."""
    documents: tuple[str, ...]
    """The whole catalogue of the request's dataset, as the registry embeds it (shared, not copied)."""
    names: tuple[str, ...]
    """Tool names, parallel to ``documents``."""


def base_name(name: str) -> str:
    """BFCL names paraphrased variants of one function ``name#2``, ``name#3``: they are one function,
    so neither a hard negative nor an in-batch negative of each other."""
    return name.split("#", 1)[0]


def training_queries(
    datasets: Iterable[str],
    *,
    cap_per_tool: int = 16,
    seed: int = 0,
    loaded: dict[str, BenchDataset] | None = None,
) -> list[TrainingQuery]:
    """Every request of ``datasets`` with its gold tools' documents.

    A single-tool request counts against its tool's cap (``cap_per_tool``, chosen at random with
    ``seed``): MetaTool has 20k requests over 199 tools and would otherwise be most of the data. Requests
    with several gold tools are all kept. ToolLinkOS is refused.
    """
    rng = random.Random(seed)
    out: list[TrainingQuery] = []
    for name in datasets:
        if name in ZERO_SHOT_DATASETS:
            raise CatalogError(f"{name}: its requests are never trained on (its figure stays zero-shot)")
        data = (loaded or {}).get(name) or load_dataset(name)
        documents = tuple(tool_document(t, with_examples=False) for t in data.tools)
        names = tuple(t.name for t in data.tools)
        index = {n: i for i, n in enumerate(names)}
        for set_name, queries in sorted(data.query_sets.items()):
            by_tool: dict[tuple[int, ...], list[str]] = defaultdict(list)
            seen: set[tuple[str, tuple[int, ...]]] = set()
            for q in queries:
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
    return out


def hard_negative_indices(
    scores: np.ndarray, positives: Sequence[int], names: Sequence[str], k: int
) -> list[int]:
    """The ``k`` best-scored tools of a request's first pass that are not gold (nor a paraphrased
    variant of a gold function): the negatives the model gets wrong today."""
    gold = {base_name(names[i]) for i in positives}
    out: list[int] = []
    for i in np.argsort(-scores, kind="stable"):
        if base_name(names[int(i)]) not in gold:
            out.append(int(i))
            if len(out) == k:
                break
    return out

"""Which earlier turns a BFCL multi-turn turn should be ranked with: conversation-context rules, offline.

    .venv/bin/python bench/bfcl_context_lab.py [--half learning|measured|all] [--graph none|inferred]

Each dialogue is played as the gateway's ``TurnEngine`` plays it (earlier turns kept as context, at most
``RECENT_TURNS``; a turn whose mean similarity to them is below the topic-shift bar starts a new topic),
except for what a rule changes; every rule ranks with ``retrieve_tools`` on its own fresh registry
(``toolweave bench``'s: tools.jsonl, grtf, the gateway's defaults; fleet fusion keeps a running record
per registry, so rules do not share one). Scored: mAP@10 / Complete@10 of the turns with gold tools.
Rules are chosen on the learning half (even ids) and confirmed on the measured half (odd ids).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bfcl_servers import DATASET, read_jsonl

from toolweave.benchmark.datasets import load_dataset
from toolweave.benchmark.embedding_cache import CachedEmbedder
from toolweave.registry.embeddings import Embedder
from toolweave.registry.registry import Registry
from toolweave.retrieval import retrieve_tools
from toolweave.retrieval.metrics import average_precision, complete
from toolweave.retrieval.turns import conversation_context, topic_shifted
from toolweave.server.sessions.session_book import RECENT_TURNS
from toolweave.settings import RetrievalSettings, Settings

Rule = Callable[[Registry, str, list[str]], list[str]]


def context_below(words: int) -> Callable[[str, list[str]], list[str]]:
    """Keeps the context only for a request shorter than ``words`` words."""

    def keep(text: str, context: list[str]) -> list[str]:
        return context if len(text.split()) < words else []

    return keep


def topic_rule(bar: float, keep: Callable[[str, list[str]], list[str]] | None = None) -> Rule:
    """The gateway's topic-shift test at ``bar``, then ``keep`` narrows what stays context."""

    def rule(registry: Registry, text: str, context: list[str]) -> list[str]:
        context = [q for q in context if q != text]
        if context:
            *earlier, latest = registry.embedder.embed_queries([*context, text])
            if sum(float(v @ latest) for v in earlier) / len(earlier) < bar:
                context.clear()
        return keep(text, context) if keep else context

    return rule


def shipped(registry: Registry, text: str, context: list[str]) -> list[str]:
    """What ``TurnEngine`` passes today (after its topic-shift test)."""
    context = [q for q in context if q != text]
    if context:
        *earlier, latest = registry.embedder.embed_queries([*context, text])
        if topic_shifted(earlier, latest):
            return []
    return conversation_context(text, context)


RULES: dict[str, Rule] = {
    "no context": lambda registry, text, context: [],
    "topic 0.08 (main)": topic_rule(0.08),
    "shipped": shipped,
    "latest turn only": topic_rule(0.08, lambda text, c: c[-1:]),
    **{f"context below {n} words": topic_rule(0.08, context_below(n)) for n in (8, 12, 16, 24)},
}


def play(rule: Rule, numbers: set[int], graph: str) -> tuple[float, float, int]:
    dataset = load_dataset(str(DATASET))
    queries = {(q["dialogue_id"], q["turn"]): q for q in read_jsonl(DATASET / "queries.jsonl")}
    dialogues = [
        d for d in read_jsonl(DATASET / "dialogues.jsonl") if int(d["id"].rsplit("_", 1)[1]) in numbers
    ]
    params = RetrievalSettings(method="grtf")
    if graph == "none":
        params = params.model_copy(update={"edge_kinds": []})
    aps: list[float] = []
    completes: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bfcl-context-") as tmp:
        settings = Settings(infer_dependencies=True)
        registry = Registry.open(Path(tmp) / "r", embedder=CachedEmbedder(Embedder()), settings=settings)
        registry.ingest(dataset.name, dataset.tools, [])
        names = {t.id: t.name for t in registry.tools()}
        for d in dialogues:
            session: deque[str] = deque(maxlen=RECENT_TURNS)
            for t, messages in enumerate(d["turns"]):
                q = queries.get((d["id"], t))
                text = (q["query"] if q else " ".join(messages)).strip()
                context = rule(registry, text, list(session))
                if not context and session and [x for x in session if x != text]:
                    session.clear()  # the rule started a new topic (or dropped the context)
                ranked = [names[r.tool_id] for r in retrieve_tools(registry, text, params, context=context)]
                if q:
                    aps.append(average_precision(ranked, q["gold_tools"], 10))
                    completes.append(complete(ranked, q["gold_tools"], 10))
                if not session or session[-1] != text:
                    session.append(text)
    return sum(aps) / len(aps), sum(completes) / len(completes), len(aps)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=["learning", "measured", "all"], default="learning")
    parser.add_argument("--graph", choices=["none", "inferred"], default="inferred")
    parser.add_argument("--rules", help="comma list of rule names (default: all)")
    args = parser.parse_args(argv)
    numbers = {n for n in range(200) if args.half == "all" or n % 2 == (args.half == "measured")}
    chosen = args.rules.split(",") if args.rules else list(RULES)
    for name in chosen:
        m, c, n = play(RULES[name], numbers, args.graph)
        print(
            json.dumps(
                {
                    "rule": name,
                    "half": args.half,
                    "graph": args.graph,
                    "turns": n,
                    "map@10": round(m, 4),
                    "complete@10": round(c, 4),
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

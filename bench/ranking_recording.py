"""The ranking lab's recordings: one dataset's first passes and graphs, recorded once, replayed often.

``record`` builds a dataset's registries (declared and inferred graphs) and keeps every query's vector
and full-text candidates; ``evaluate`` replays a recording through the real pipeline
(``toolweave.retrieval.retrieve``) under one setting. Every experiment of ``bench/ranking_lab.py``
(fusion, walk, decomposition) and the labs beside it (``name_match_lab.py``) start from these, so they
live apart from any one experiment.
"""

from __future__ import annotations

import pickle
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from toolweave.benchmark import load_dataset
from toolweave.benchmark.recorded import RecordedGraph, RecordedIndex
from toolweave.records import DependencyEdge, ToolRecord
from toolweave.registry import Embedder, Registry
from toolweave.retrieval import retrieve
from toolweave.retrieval.decompose import Decomposition
from toolweave.retrieval.metrics import summarize
from toolweave.retrieval.query import clean_query
from toolweave.retrieval.results import Hit
from toolweave.settings import RetrievalSettings, Settings

OUT = Path(__file__).parent / "out" / "lab"
DESIGN = {"toollinkos": "examples", "seal_tools": "dev"}
"""The only splits a choice may be made on."""


@dataclass
class Recording:
    name: str
    queries: dict[str, list[tuple[str, tuple[str, ...], str | None]]]
    """Query set → (text, gold names, split)."""
    hits: dict[tuple[str, ...], tuple[list[Hit], list[Hit]]]
    names: dict[str, str]
    records: dict[str, ToolRecord]
    graphs: dict[str, dict[str, list[DependencyEdge]]]
    """``declared`` / ``inferred`` → tool id → edges."""


SAMPLE_ABOVE = 5000
"""Query sets larger than this are sampled (every ``--every``-th query): MetaTool single has 20,563."""


def record(name: str, embedder: Embedder, every: int = 1) -> Recording:
    data = load_dataset(name)
    for set_name, qs in data.query_sets.items():
        if len(qs) > SAMPLE_ABOVE and every > 1:
            data.query_sets[set_name] = qs[::every]
    graphs: dict[str, dict[str, list[DependencyEdge]]] = {}
    hits: dict[tuple[str, ...], tuple[list[Hit], list[Hit]]] = {}
    with tempfile.TemporaryDirectory(prefix="toolweave-lab-") as tmp:
        for graph in ("declared", "inferred"):
            settings = Settings(infer_dependencies=graph == "inferred")
            reg = Registry.open(Path(tmp) / graph, embedder=embedder, settings=settings)
            t0 = time.perf_counter()
            reg.ingest(data.name, data.tools, data.edges if graph == "declared" else [])
            print(f"{name}: {graph} registry in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            graphs[graph] = {t.id: reg.dependencies(t.id) for t in reg.tools()}
            if graph == "declared":
                names = {t.id: t.name for t in reg.tools()}
                records = {t.id: t for t in reg.tools()}
                index = RecordedIndex(live=reg)
                texts = list(
                    dict.fromkeys((clean_query(q.text),) for qs in data.query_sets.values() for q in qs)
                )
                t0 = time.perf_counter()
                for start in range(0, len(texts), 256):
                    index.record(texts[start : start + 256])
                print(f"{name}: {len(texts)} queries in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
                hits = index.hits
            reg.close()
    queries = {
        set_name: [(clean_query(q.text), q.gold, q.split) for q in qs]
        for set_name, qs in data.query_sets.items()
    }
    return Recording(name, queries, hits, names, records, graphs)


def load(name: str) -> Recording:
    with (OUT / f"{name}.pkl").open("rb") as f:
        recording: Recording = pickle.load(f)
    return recording


def evaluate(
    rec: Recording,
    params: RetrievalSettings,
    graph: str,
    *,
    split: str | None = None,
    ks: tuple[int, ...] = (5, 10),
    decomposition: Decomposition | None = None,
) -> dict[str, dict[str, float]]:
    """Metrics per query set (``split`` None = all queries) of ``params`` on the recording; without a
    ``decomposition`` the whole query alone (the recordings hold whole queries only)."""
    if decomposition is None:
        params = params.model_copy(update={"decompose": "off"})
    index = RecordedIndex(records=rec.records, hits=rec.hits)
    deps = RecordedGraph(rec.graphs.get(graph, {}))
    out = {}
    for set_name, queries in rec.queries.items():
        chosen = [q for q in queries if split is None or q[2] == split]
        if not chosen:
            continue
        runs, published = [], []
        for text, gold, _split in chosen:
            ranked = retrieve(text, index, deps, params, decomposition=decomposition)
            runs.append(([rec.names[r.tool_id] for r in ranked], gold))
            published.append([rec.names[r.tool_id] for r in ranked if r.publish])
        out[set_name] = summarize(runs, ks, published)
    return out

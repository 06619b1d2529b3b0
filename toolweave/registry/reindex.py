"""Re-embed a whole registry with another model: new tables beside the old, swapped by one commit."""

from __future__ import annotations

from dataclasses import replace

from toolweave.registry.database import RegistryDatabase
from toolweave.registry.documents import tool_document
from toolweave.registry.embeddings import Embedder, Progress, embed_chunked
from toolweave.registry.store import StoredTool
from toolweave.settings import Settings

__all__ = ["reindex_database"]


def reindex_database(
    database: RegistryDatabase, embedder: Embedder, settings: Settings, progress: Progress | None
) -> int:
    """Re-embed every tool and usage example of ``database`` (held under its writer lease, recovered)
    into new tables, commit them (the swap), then drop the old ones. Returns the number of tools.

    Until the commit the old registry is intact, so an interrupted reindex leaves it usable."""
    old, old_usage = database.tool_table(), database.usage_table()
    rows = old.load_all()
    with_examples = settings.usage_weight <= 0
    documents = [tool_document(r.record, with_examples=with_examples) for r in rows]
    vectors = embed_chunked(embedder, documents, settings.embedding_batch_size, progress)
    new = database.new_tool_table(embedder.dim)
    new.upsert(
        [StoredTool(r.record, r.content_hash, v) for r, v in zip(rows, vectors, strict=True)], documents
    )
    new.rebuild_text_index()
    examples = [e for kept in old_usage.load_all().values() for e in kept]
    usage = database.new_usage_table(embedder.dim)
    if examples:
        # examples are requests: embedded as requests are (a query encoder's own model, if any)
        queries = list(embedder.request_vectors([e.query for e in examples]))
        usage.replace([], [replace(e, vector=v) for e, v in zip(examples, queries, strict=True)])
    database.commit(
        action="reindex", tools=new, usage=usage, embedding_model=embedder.model_id, dim=embedder.dim
    )
    # a crash before these leaves garbage the next open drops
    database.drop(old.name)
    database.drop(old_usage.name)
    return len(rows)

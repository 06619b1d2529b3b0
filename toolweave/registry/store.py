"""The LanceDB tool table: one row per tool, with its vector and a full-text index over its document.

This module and ``toolweave.registry.database`` are the only ones that talk to LanceDB; their errors are
translated into ``RegistryError``s here (``lance_errors``). Writes are batched (every LanceDB write makes
a table version); which version counts is decided by the registry's commit record, not here.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from toolweave.errors import RegistryError
from toolweave.records import ToolKind, ToolRecord
from toolweave.registry.vector_rows import VectorRows

__all__ = [
    "CompactRecords",
    "Guard",
    "StoredTool",
    "ToolTable",
    "lance_errors",
    "no_guard",
    "open_table_at",
    "sql_in",
    "sql_string",
    "store_problem",
]

log = logging.getLogger(__name__)

TABLE_NAME = "tools"
_FTS_COLUMN = "document"
_DESTRUCTIVE = re.compile(r'"destructive_hint"\s*:\s*true')
"""What a stored record of a destructive tool contains (``CompactRecords.is_destructive`` confirms by
decoding: the text may also occur inside a description)."""


Guard = Callable[[], None]
"""Called before every write of a table: raises when this process may no longer write (it lost the
registry's writer lock: ``toolweave.registry.lock``)."""


def no_guard() -> None:
    return None


@dataclass(frozen=True, slots=True)
class StoredTool:
    record: ToolRecord
    content_hash: str
    vector: np.ndarray


@contextmanager
def lance_errors(action: str, what: str = "tool table") -> Iterator[None]:
    """LanceDB raises plain RuntimeError/ValueError/OSError: name what we were doing instead, in one
    line (an object store's failure comes as a multi-line dump of the Rust layer's error)."""
    try:
        yield
    except RegistryError:
        raise
    except (RuntimeError, ValueError, OSError, pa.ArrowException) as exc:
        raise RegistryError(f"{what}: {action} failed: {store_problem(str(exc))}") from exc


def open_table_at(db: Any, name: str, schema: pa.Schema, version: int | None, what: str) -> Any:
    """The LanceDB table ``name`` (created empty with ``schema`` when missing), at ``version`` (the
    committed one) where another process has written a newer one since: a reader sees only commits."""
    with lance_errors(f"opening table {name}", what):
        try:
            table = db.open_table(name)
        except ValueError:  # LanceDB's "table not found"
            table = db.create_table(name, schema=schema)
        if version is not None and int(table.version) != version:
            table.checkout(version)
    return table


_S3_CODE = re.compile(r"<Code>(\w+)</Code>")
_BUCKET = re.compile(r"<BucketName>([^<]+)</BucketName>")
_STORE_ADVICE = {
    "NoSuchBucket": "the bucket {bucket} does not exist: create it (e.g. `aws s3 mb s3://{bucket}`, or in "
    "the store's console); toolweave creates everything inside it",
    "AccessDenied": "the object store refused access: check the credentials (AWS_ACCESS_KEY_ID, "
    "AWS_SECRET_ACCESS_KEY) and the bucket's policy",
    "InvalidAccessKeyId": "the object store does not know the access key (AWS_ACCESS_KEY_ID)",
    "SignatureDoesNotMatch": "the object store rejected the signature: check AWS_SECRET_ACCESS_KEY and "
    "aws_region",
}


def store_problem(message: str) -> str:
    """What an object-store failure means, in one line: advice for the usual mistakes (a missing bucket,
    refused credentials, an unreachable endpoint), else the message's first line, cut."""
    code = _S3_CODE.search(message)
    if code and code.group(1) in _STORE_ADVICE:
        bucket = _BUCKET.search(message)
        return _STORE_ADVICE[code.group(1)].format(
            bucket=bucket.group(1) if bucket else "(the registry's bucket)"
        )
    if "error sending request" in message or "Connection refused" in message or "tcp connect" in message:
        return (
            "cannot reach the object store (check aws_endpoint in registry_storage_options, and the network)"
        )
    first = " ".join(message.split("\n", 1)[0].split())
    return first if len(first) <= 400 else first[:400] + "…"


def tool_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("source", pa.string()),
            pa.field("name", pa.string()),
            pa.field("kind", pa.string()),
            pa.field("content_hash", pa.string()),
            pa.field(_FTS_COLUMN, pa.string()),
            pa.field("record", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def _run_on_lancedb_loop(coro: Any) -> Any:
    """Run ``coro`` on lancedb's own event loop thread (where its async tables live) and wait for it."""
    from lancedb.background_loop import LOOP

    run: Callable[[Any], Any] = LOOP.run  # lancedb leaves it untyped
    return run(coro)


async def _fts_rows(table: Any, query: str, limit: int) -> pa.Table:
    """``table.search(MatchQuery(query, document), query_type="fts").select(["id", "_score"]).limit(limit)
    .to_arrow()``, as one trip to lancedb's event loop.

    The synchronous builder makes six (it reads the table's schema three times to look for blob
    columns this table does not have, then starts the query and fetches each batch): each a wake-up
    of lancedb's thread and of ours, which cost more than the search itself. The query object and
    its execution are the builder's own, so the hits and scores are the same. Private lancedb API
    (``AsyncTable._execute_query``): the public one has no single-trip form (third-party gap)."""
    from lancedb.query import FullTextSearchQuery, MatchQuery, Query

    plan = Query(
        # lancedb's kw_only Field defaults are invisible to pydantic's mypy plugin (third-party gap)
        full_text_query=FullTextSearchQuery(columns=[], query=MatchQuery(query, _FTS_COLUMN)),  # type: ignore[call-arg]
        columns=["id", "_score"],
        limit=limit,
    )
    batches = await table._table._execute_query(plan)
    return pa.Table.from_batches([batch async for batch in batches], schema=batches.schema)


class ToolTable:
    """The tool table ``name`` of an open LanceDB database (created empty when missing)."""

    def __init__(
        self, db: Any, name: str, dim: int, version: int | None = None, *, guard: Guard = no_guard
    ) -> None:
        self.name = name
        self._dim = dim
        self._schema = tool_schema(dim)
        self.guard = guard
        self._table = open_table_at(db, name, self._schema, version, "tool table")
        self._fts_ready = self._has_fts_index()

    def writable(self) -> None:
        """Back to the latest version (a handle opened at a committed version that was not the
        latest is read-only). Only under the writer lease, after recovery: then latest = committed."""
        with lance_errors("checking out the latest version"):
            self._table.checkout_latest()

    # -- versions ------------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The table version this handle reads (every write makes a new one)."""
        return int(self._table.version)

    def restore(self, version: int) -> None:
        """Make ``version``'s rows and indexes current again (as a new version): undoes later writes."""
        self.guard()
        with lance_errors(f"restoring version {version}"):
            self._table.restore(version)
        self._fts_ready = self._has_fts_index()

    @property
    def has_text_index(self) -> bool:
        return self._fts_ready

    @property
    def lance(self) -> Any:
        """The LanceDB table (for ``toolweave.registry.vector_index``, the other module that queries it)."""
        return self._table

    # -- reads ---------------------------------------------------------------------------------------
    def count(self) -> int:
        with lance_errors("counting rows"):
            return int(self._table.count_rows())

    def load_all(self, sources: Collection[str] | None = None) -> list[StoredTool]:
        """Every row (or the rows of ``sources``), decoded. At gateway scale (≤ ~10k tools) this fits
        easily in memory."""
        with lance_errors("reading the table"):
            if sources is None:
                arrow = self._table.to_arrow()
            else:
                arrow = self._table.search().where(_source_in(sources)).limit(None).to_arrow()
        if arrow.num_rows == 0:
            return []
        records = arrow.column("record").to_pylist()
        hashes = arrow.column("content_hash").to_pylist()
        vectors = self.decode_vectors(arrow)
        try:
            return [
                StoredTool(ToolRecord.model_validate_json(rec), h, vectors[i])
                for i, (rec, h) in enumerate(zip(records, hashes, strict=True))
            ]
        except ValidationError as exc:
            raise RegistryError(
                f"tool table {self.name}: a stored tool record does not decode: {exc}"
            ) from exc

    def load_compact(
        self, sources: Collection[str] | None = None
    ) -> tuple[list[str], list[str], list[str], list[str], CompactRecords]:
        """``(ids, sources, content hashes, names, records)`` without vectors or documents, the records
        left as stored JSON (``CompactRecords``): for registries too large to hold decoded. ``sources``:
        the rows of those sources only."""
        with lance_errors("reading the table"):
            arrow = self._select(
                ["id", "source", "kind", "content_hash", "name", "record"],
                None if sources is None else _source_in(sources),
            )
        ids = arrow.column("id").to_pylist()
        kind_of: dict[str, ToolKind] = {"core": "core", "regular": "regular"}
        kinds = {
            i: kind_of.get(k, "regular") for i, k in zip(ids, arrow.column("kind").to_pylist(), strict=True)
        }
        records = CompactRecords(dict(zip(ids, arrow.column("record").to_pylist(), strict=True)), kinds)
        owners, hashes, names = (arrow.column(c).to_pylist() for c in ("source", "content_hash", "name"))
        return ids, owners, hashes, names, records

    def load_vectors(self) -> VectorRows:
        """Tool id → vector, read from the table (for dependency inference when no matrix is held)."""
        with lance_errors("reading the vectors"):
            arrow = self._select(["id", "vector"])
        return VectorRows(arrow.column("id").to_pylist(), self.decode_vectors(arrow))

    def _select(self, columns: list[str], where: str | None = None) -> pa.Table:
        query = self._table.search()
        if where is not None:
            query = query.where(where)
        return query.select(columns).limit(None).to_arrow()

    def decode_vectors(self, arrow: pa.Table) -> np.ndarray:
        """The ``vector`` column of ``arrow`` as a rows x dim float32 matrix."""
        return np.asarray(
            arrow.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False), dtype=np.float32
        ).reshape(arrow.num_rows, self._dim)

    def text_search(self, query: str, limit: int) -> list[tuple[str, float]]:
        """BM25 over the tool documents (LanceDB full-text index).

        The query is matched as plain words (``MatchQuery``), never parsed as query syntax: user text
        with quotes, colons or ``AND`` must not turn into phrase or field queries (or errors).
        """
        if not query.strip() or not self._fts_ready:
            return []
        with lance_errors("full-text search"):
            rows = _run_on_lancedb_loop(_fts_rows(self._table, query, limit))
        return list(zip(rows.column("id").to_pylist(), rows.column("_score").to_pylist(), strict=True))

    # -- writes --------------------------------------------------------------------------------------
    def upsert(self, rows: Sequence[StoredTool], documents: Sequence[str]) -> None:
        """Insert or replace rows by id, in one write."""
        if not rows:
            return
        table = pa.table(
            {
                "id": [r.record.id for r in rows],
                "source": [r.record.source for r in rows],
                "name": [r.record.name for r in rows],
                "kind": [r.record.kind for r in rows],
                "content_hash": [r.content_hash for r in rows],
                _FTS_COLUMN: list(documents),
                "record": [r.record.model_dump_json() for r in rows],
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(np.concatenate([r.vector for r in rows]).astype(np.float32)), self._dim
                ),
            },
            schema=self._schema,
        )
        self.guard()
        with lance_errors(f"writing {len(rows)} tools"):
            (
                self._table.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(table)
            )

    def delete_ids(self, ids: Collection[str]) -> None:
        if not ids:
            return
        quoted = ", ".join(sql_string(i) for i in ids)
        self.guard()
        with lance_errors(f"deleting {len(ids)} tools"):
            self._table.delete(f"id IN ({quoted})")

    def rebuild_text_index(self) -> None:
        """(Re)build the full-text index; cheap at gateway scale, and keeps BM25 statistics exact."""
        from lancedb.index import FTS

        self.guard()
        with lance_errors("building the full-text index"):
            if self.count() == 0:
                self._fts_ready = False
                return
            self._table.create_index(_FTS_COLUMN, config=FTS(), replace=True)
        self._fts_ready = True

    def compact(self) -> None:
        """Merge the small versions many upserts leave behind."""
        self.guard()
        with lance_errors("compacting"):
            self._table.optimize()

    def _has_fts_index(self) -> bool:
        try:
            return any(_FTS_COLUMN in idx.columns for idx in self._table.list_indices())
        except (RuntimeError, ValueError, AttributeError):
            return False


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Collection[str]) -> str:
    """``column IN (...)`` for a filter (false for no values)."""
    if not values:
        return "false"
    return f"{column} IN ({', '.join(sql_string(v) for v in sorted(values))})"


def _source_in(sources: Collection[str]) -> str:
    return sql_in("source", sources)


class CompactRecords(Mapping[str, ToolRecord]):
    """Tool id → record, kept as the stored JSON and decoded on access (the most recently used ones
    stay decoded). For registries above the vector-index threshold: decoded records take ~6 KB each in
    Python objects, their JSON a fraction of that, and a search touches only the few tools it returns."""

    def __init__(self, stored: dict[str, str], kinds: dict[str, ToolKind], keep: int = 4096) -> None:
        self._stored = stored
        self.kinds = kinds
        self._decoded: OrderedDict[str, ToolRecord] = OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()

    def __getitem__(self, tool_id: str) -> ToolRecord:
        with self._lock:
            record = self._decoded.get(tool_id)
            if record is not None:
                self._decoded.move_to_end(tool_id)
                return record
        try:
            record = ToolRecord.model_validate_json(self._stored[tool_id])
        except ValidationError as exc:
            raise RegistryError(f"stored tool record {tool_id!r} does not decode: {exc}") from exc
        with self._lock:
            self._decoded[tool_id] = record
            while len(self._decoded) > self._keep:
                self._decoded.popitem(last=False)
        return record

    def merged(self, kept: Collection[str], fresh: CompactRecords) -> CompactRecords:
        """The records of ``kept`` (ids of this one) and all of ``fresh``: a follower loading the rows
        of the sources a commit changed. Decoded records of kept ids stay decoded."""
        stored = {i: self._stored[i] for i in kept}
        stored.update(fresh._stored)
        kinds = {i: self.kinds[i] for i in kept}
        kinds.update(fresh.kinds)
        out = CompactRecords(stored, kinds, self._keep)
        with self._lock:
            out._decoded.update((i, r) for i, r in self._decoded.items() if i in stored and i not in fresh)
        return out

    def is_destructive(self, tool_id: str) -> bool:
        """``self[tool_id].destructive`` (False for an unknown tool), decoding only records whose JSON
        says so: the relevance floor asks it of every candidate of every query, and decoding them all
        cost ~6 ms a query at 100k tools (few are cached: candidates differ from query to query)."""
        stored = self._stored.get(tool_id)
        if stored is None or (tool_id not in self._decoded and not _DESTRUCTIVE.search(stored)):
            return False
        return self[tool_id].destructive

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._stored

    def __iter__(self) -> Iterator[str]:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)

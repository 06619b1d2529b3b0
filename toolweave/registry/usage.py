"""Usage examples per tool (Tool2Vec): the queries a tool answers, embedded, in their own Lance table.

A tool's usage vector is the normalised mean of its example-query vectors. It sits beside the text
vector and is fused with it when vectors are scored (see ``Registry``): a query phrased like the
requests a tool has served finds that tool even when its description uses other words. Examples come
from manifests and catalogs (``ToolRecord.examples``, origin ``example``) and from successful calls in
the gateway (origin ``call``). Each tool keeps at most ``cap`` examples, newest first, one per text.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from toolweave.registry.store import Guard, lance_errors, no_guard, open_table_at, sql_in, sql_string
from toolweave.registry.usage_fusion import fuse_usage

__all__ = [
    "USAGE_TABLE",
    "UsageExample",
    "UsageTable",
    "abstract_values",
    "fuse_usage",
    "merge_examples",
    "text_key",
    "usage_vector",
]

USAGE_TABLE = "usage"
Origin = Literal["example", "call"]


@dataclass(frozen=True, slots=True)
class UsageExample:
    tool_id: str
    query: str
    origin: Origin
    at_ns: int
    """When it was recorded: the newest examples are the ones kept under the cap."""
    vector: np.ndarray


def text_key(query: str) -> str:
    """What makes two example texts the same example: case and spacing do not count."""
    return " ".join(query.split()).lower()


def merge_examples(
    current: Iterable[UsageExample], new: Iterable[UsageExample], cap: int
) -> list[UsageExample]:
    """``current`` plus ``new``, one example per query text, at most ``cap``, newest first.

    Declared examples (origin ``example``: the manifest's or catalog's) are never pushed out by recorded
    calls: they are kept first (a text both declared and called stays declared), and recorded calls
    fill what the cap leaves. Among examples of one origin the newer wins."""
    by_text: dict[str, UsageExample] = {}
    for ex in [*current, *new]:
        key = text_key(ex.query)
        old = by_text.get(key)
        if (
            old is None
            or (ex.origin == "example" and old.origin != "example")
            or (ex.origin == old.origin and ex.at_ns >= old.at_ns)
        ):
            by_text[key] = ex
    newest_first = sorted(by_text.values(), key=lambda e: e.at_ns, reverse=True)
    declared = [e for e in newest_first if e.origin == "example"][: max(cap, 0)]
    calls = [e for e in newest_first if e.origin != "example"][: max(cap - len(declared), 0)]
    return sorted([*declared, *calls], key=lambda e: e.at_ns, reverse=True)


_VALUES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"), "<email>"),
    (re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+"), "<url>"),
    # long runs of letters and digits: keys, tokens, hashes (before ids: the same shape, longer)
    (re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{20,}\b"), "<token>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"), "<date>"),
    (re.compile(r"\+?\d[\d ().-]{7,}\d\b"), "<phone>"),
    # a word with digits and letters (or separators): USR005, ORD-7731, a1b2c3 (not 1st, 3rd, mp3)
    (re.compile(r"\b(?!\d+(?:st|nd|rd|th)\b)(?=[\w-]*\d)(?=[\w-]*[A-Za-z_-])[\w-]{4,}\b"), "<id>"),
    (re.compile(r"\b\d+(?:[.,:]\d+)*\b"), "<number>"),
)
"""What a user typed that is a value, by kind, in the order they are looked for."""


def abstract_values(query: str) -> str:
    """``query`` with the values a user typed replaced by their kind (``order 12446 for
    bob@example.com`` -> ``order <number> for <email>``): a usage example says how a tool is asked for,
    and the registry is shared, so it keeps the words, not the ids, numbers, emails or tokens."""
    for pattern, kind in _VALUES:
        query = pattern.sub(kind, query)
    return query


def usage_vector(examples: Sequence[UsageExample]) -> np.ndarray:
    """Unit-normalised mean of the examples' vectors (Tool2Vec)."""
    mean: np.ndarray = np.mean([e.vector for e in examples], axis=0).astype(np.float32)
    unit: np.ndarray = mean / (float(np.linalg.norm(mean)) or 1.0)
    return unit


def usage_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("tool_id", pa.string(), nullable=False),
            pa.field("query", pa.string(), nullable=False),
            pa.field("origin", pa.string(), nullable=False),
            pa.field("at_ns", pa.int64(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def now_ns() -> int:
    return time.time_ns()


class UsageTable:
    """The usage table ``name`` of an open LanceDB database (created empty when missing).

    Like the tool table it is named by the registry's commit record: usage written since the last
    commit is rolled back with everything else, and a reindex swaps in a re-embedded copy.
    """

    def __init__(
        self, db: Any, name: str, dim: int, version: int | None = None, *, guard: Guard = no_guard
    ) -> None:
        self.name = name
        self._dim = dim
        self._schema = usage_schema(dim)
        self.guard = guard
        self._table = open_table_at(db, name, self._schema, version, "usage table")

    def writable(self) -> None:
        """Back to the latest version (see ``ToolTable.writable``)."""
        with lance_errors("checking out the latest version", "usage table"):
            self._table.checkout_latest()

    @property
    def version(self) -> int:
        return int(self._table.version)

    def load_all(self, tool_ids: Collection[str] | None = None) -> dict[str, list[UsageExample]]:
        """Tool id → its examples, newest first (of ``tool_ids`` only, when given)."""
        with lance_errors("reading", "usage table"):
            if tool_ids is None:
                arrow = self._table.to_arrow()
            else:
                arrow = self._table.search().where(sql_in("tool_id", tool_ids)).limit(None).to_arrow()
        out: dict[str, list[UsageExample]] = {}
        if arrow.num_rows == 0:
            return out
        vectors = np.asarray(
            arrow.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False), dtype=np.float32
        ).reshape(arrow.num_rows, self._dim)
        columns = [arrow.column(c).to_pylist() for c in ("tool_id", "query", "origin", "at_ns")]
        for i, (tool_id, query, origin, at_ns) in enumerate(zip(*columns, strict=True)):
            out.setdefault(tool_id, []).append(UsageExample(tool_id, query, origin, at_ns, vectors[i]))
        for examples in out.values():
            examples.sort(key=lambda e: e.at_ns, reverse=True)
        return out

    def replace(self, tool_ids: Collection[str], rows: Sequence[UsageExample]) -> None:
        """Make ``rows`` the examples of ``tool_ids`` (every other row of those tools goes)."""
        self.guard()
        if tool_ids:
            quoted = ", ".join(sql_string(i) for i in tool_ids)
            with lance_errors(f"deleting examples of {len(tool_ids)} tools", "usage table"):
                self._table.delete(f"tool_id IN ({quoted})")
        if not rows:
            return
        table = pa.table(
            {
                "tool_id": [r.tool_id for r in rows],
                "query": [r.query for r in rows],
                "origin": [r.origin for r in rows],
                "at_ns": [r.at_ns for r in rows],
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(np.concatenate([r.vector for r in rows]).astype(np.float32)), self._dim
                ),
            },
            schema=self._schema,
        )
        with lance_errors(f"writing {len(rows)} examples", "usage table"):
            self._table.add(table)

    def compact(self) -> None:
        self.guard()
        with lance_errors("compacting", "usage table"):
            self._table.optimize()

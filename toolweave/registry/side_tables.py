"""The small tables beside the tool and usage tables: dependency edges, manifest overrides, source specs,
and the traffic evidence behind learned edges.

Each is written whole (an overwrite: one new table version) and named by the commit record like every
registry table (``toolweave.registry.database``): a reader reads it at its committed version, never a
writer's work in progress.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import asdict
from typing import Any

import pyarrow as pa
from pydantic import ValidationError

from toolweave.errors import RegistryError
from toolweave.records import DependencyEdge, EdgeKind
from toolweave.registry.overrides import EdgeSelector, GraphOverrides
from toolweave.registry.sources import SOURCE_SCHEMA, SOURCE_TABLE
from toolweave.registry.store import Guard, lance_errors, no_guard, sql_in

__all__ = ["EDGE_TABLE", "FLEET_MAP_TABLE", "OVERRIDE_TABLE", "TRAFFIC_TABLE", "SideTables", "override_rows"]

log = logging.getLogger(__name__)

EDGE_TABLE = "edges"
OVERRIDE_TABLE = "overrides"
TRAFFIC_TABLE = "traffic"
FLEET_MAP_TABLE = "fleet_map"
_EDGE_SCHEMA = pa.schema(
    [
        pa.field("tool", pa.string(), nullable=False),
        pa.field("depends_on", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("parameter_name", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("origin", pa.string()),
        pa.field("confidence", pa.float64()),
        pa.field("evidence", pa.string()),
    ]
)
_OVERRIDE_SCHEMA = pa.schema(
    [
        pa.field("section", pa.string(), nullable=False),  # add | remove | pin
        pa.field("tool", pa.string(), nullable=False),
        pa.field("depends_on", pa.string(), nullable=False),
        pa.field("kind", pa.string()),  # a remove entry may leave kind and parameter open
        pa.field("parameter_name", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("evidence", pa.string()),
        pa.field("where", pa.string()),
    ]
)

_TRAFFIC_SCHEMA = pa.schema(
    [
        pa.field("consumer", pa.string(), nullable=False),
        pa.field("parameter", pa.string(), nullable=False),
        pa.field("producer", pa.string(), nullable=False),
        pa.field("field", pa.string()),
        pa.field("sightings", pa.int64()),
        pa.field("sessions", pa.list_(pa.int64())),
        pa.field("adjacent", pa.list_(pa.int64())),
        pa.field("specificity_sum", pa.float64()),
        pa.field("first_ns", pa.int64()),
        pa.field("last_ns", pa.int64()),
    ]
)
"""Evidence rows (``toolweave.registry.evidence.Evidence``): tool ids, a parameter and a field path,
counts and keyed session hashes; never a value."""

_FLEET_MAP_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string(), nullable=False),
        pa.field("dim", pa.int64(), nullable=False),
        pa.field("matrix", pa.binary(), nullable=False),
        pa.field("examples", pa.int64()),
        pa.field("requests", pa.int64()),
        pa.field("tools", pa.int64()),
        pa.field("fitted_ns", pa.int64()),
        pa.field("fingerprint", pa.string()),
        pa.field("before", pa.float64()),
        pa.field("after", pa.float64()),
        pa.field("reached", pa.list_(pa.string())),
    ]
)
"""The fleet's request map (``toolweave.registry.fleet_map``): none or one row; ``matrix`` is ``W`` as
little-endian float32, dim × dim; ``reached``, the ids of the tools the traffic reached. Figures and ids
only: no request text is stored here."""


class SideTables:
    """The edge, override and source tables of one LanceDB database. ``committed`` gives the table
    versions the current commit record names."""

    def __init__(
        self, db: Any, committed: Callable[[], Mapping[str, int]], *, guard: Guard = no_guard
    ) -> None:
        self._db = db
        self._committed = committed
        self._guard = guard
        self._handles: dict[str, Any] = {}
        """Open handles: each sees its own writes (and versions) without re-opening."""

    def clear(self) -> None:
        """Forget the open handles (after a rollback, a re-read of the commit record or a drop)."""
        self._handles.clear()

    def versions(self) -> dict[str, int]:
        """Each table's current version, for the commit record (tables missing yet are created empty)."""
        return {name: self._ensure(name, schema).version for name, schema in _SCHEMAS.items()}

    def compact(self) -> None:
        """Merge the small versions the edge and override tables collect (one per commit), through the
        cached handles: the next commit must name the compacted versions. Failures cost only disk."""
        for name in (EDGE_TABLE, OVERRIDE_TABLE, TRAFFIC_TABLE):
            try:
                with lance_errors("compacting", name):
                    self._ensure(name, _SCHEMAS[name]).optimize()
            except RegistryError:
                log.warning("compacting %s failed; will try again later", name, exc_info=True)

    def _ensure(self, name: str, schema: pa.Schema) -> Any:
        if name in self._handles:
            return self._handles[name]
        with lance_errors(f"opening table {name}", "registry"):
            try:
                table = self._db.open_table(name)
            except ValueError:  # not found
                table = self._db.create_table(name, schema=schema)
        self._handles[name] = table
        return table

    def _replace_rows(self, name: str, schema: pa.Schema, rows: list[dict[str, Any]] | pa.Table) -> None:
        table = self._ensure(name, schema)
        arrow = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows, schema=schema)
        self._guard()
        with lance_errors(f"writing {arrow.num_rows} rows", name):
            table.add(arrow, mode="overwrite")

    def _committed_rows(self, name: str, schema: pa.Schema, where: str | None = None) -> list[dict[str, Any]]:
        """The rows of table ``name`` (those matching ``where``) at its committed version (never a
        writer's work in progress); what this process wrote since, when it is the writer (its handle)."""
        with lance_errors("reading", name):
            if name in self._handles:
                table = self._handles[name]
            else:
                version = self._committed().get(name)
                if version is None:  # a table the commit does not name yet (older registries): empty
                    return []
                table = self._db.open_table(name, version=version)
            if where is None:
                return list(table.to_arrow().to_pylist())
            return list(table.search().where(where).limit(None).to_arrow().to_pylist())

    def save_sources(self, rows: list[dict[str, Any]]) -> None:
        """Replace the source table (not yet committed)."""
        self._replace_rows(SOURCE_TABLE, SOURCE_SCHEMA, rows)

    def load_sources(self) -> list[dict[str, Any]]:
        return self._committed_rows(SOURCE_TABLE, SOURCE_SCHEMA)

    def save_traffic(self, rows: list[dict[str, Any]]) -> None:
        """Replace the traffic evidence table (not yet committed)."""
        self._replace_rows(TRAFFIC_TABLE, _TRAFFIC_SCHEMA, rows)

    def load_traffic(self) -> list[dict[str, Any]]:
        return self._committed_rows(TRAFFIC_TABLE, _TRAFFIC_SCHEMA)

    def save_fleet_map(self, rows: list[dict[str, Any]]) -> None:
        """Replace the fleet map table (none or one row; not yet committed)."""
        self._replace_rows(FLEET_MAP_TABLE, _FLEET_MAP_SCHEMA, rows)

    def load_fleet_map(self) -> list[dict[str, Any]]:
        return self._committed_rows(FLEET_MAP_TABLE, _FLEET_MAP_SCHEMA)

    # -- edges and overrides -------------------------------------------------------------------------
    def save_edges(self, edges: Iterable[DependencyEdge]) -> None:
        """Replace the edge table (not yet committed: ``commit`` makes it count)."""
        edges = list(edges)
        # column by column: dumping each of 50k edges to a dict took most of a 100k-tool commit
        columns: dict[str, list[Any]] = {n: [getattr(e, n) for e in edges] for n in _EDGE_SCHEMA.names}
        columns["kind"] = [str(e.kind) for e in edges]  # a StrEnum (or, written by hand, a str)
        self._replace_rows(EDGE_TABLE, _EDGE_SCHEMA, pa.Table.from_pydict(columns, schema=_EDGE_SCHEMA))

    def load_edges(self, tools: Collection[str] | None = None) -> list[DependencyEdge]:
        """The committed edges (those going out of ``tools``, when given)."""
        rows = self._committed_rows(
            EDGE_TABLE, _EDGE_SCHEMA, None if tools is None else sql_in("tool", tools)
        )
        try:
            return [DependencyEdge.model_validate(row) for row in rows]
        except ValidationError as exc:
            raise RegistryError(f"{EDGE_TABLE}: a stored dependency edge does not decode: {exc}") from exc

    def save_overrides(self, overrides: GraphOverrides | None) -> None:
        self._replace_rows(OVERRIDE_TABLE, _OVERRIDE_SCHEMA, _override_rows(overrides))

    def load_overrides(self) -> GraphOverrides | None:
        """The committed manifest overrides, or None when none were ever set."""
        rows = self._committed_rows(OVERRIDE_TABLE, _OVERRIDE_SCHEMA)
        if not rows:
            return None
        out = GraphOverrides()
        for row in rows:
            kind = EdgeKind(row["kind"]) if row["kind"] else None
            if row["section"] == "remove":
                out.remove.append(EdgeSelector(row["tool"], row["depends_on"], kind, row["parameter_name"]))
                continue
            edge = DependencyEdge(
                tool=row["tool"],
                depends_on=row["depends_on"],
                kind=kind or EdgeKind.TOOL_DIRECTLY_DEPENDS_ON,
                parameter_name=row["parameter_name"],
                reason=row["reason"] or "",
                origin="manifest",
                evidence=row["evidence"] or "",
            )
            (out.pin if row["section"] == "pin" else out.add).append(edge)
            if row["where"]:
                out.where[edge.key] = row["where"]
        return out


_SCHEMAS = {
    EDGE_TABLE: _EDGE_SCHEMA,
    OVERRIDE_TABLE: _OVERRIDE_SCHEMA,
    SOURCE_TABLE: SOURCE_SCHEMA,
    TRAFFIC_TABLE: _TRAFFIC_SCHEMA,
    FLEET_MAP_TABLE: _FLEET_MAP_SCHEMA,
}


def _override_rows(overrides: GraphOverrides | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if overrides is not None:
        for section, edges in (("add", overrides.add), ("pin", overrides.pin)):
            rows += [
                {
                    "section": section,
                    **{k: v for k, v in e.model_dump(mode="json").items() if k in _OVERRIDE_SCHEMA.names},
                    "where": overrides.where.get(e.key),
                }
                for e in edges
            ]
        rows += [
            {"section": "remove", **asdict(sel), "kind": sel.kind.value if sel.kind else None}
            for sel in overrides.remove
        ]
    return rows


def override_rows(overrides: GraphOverrides | None) -> list[str]:
    """What the override table would hold for ``overrides``, in a canonical order, without where each
    entry was written (a moved manifest line changes no edge): equal for the same corrections."""
    return sorted(
        json.dumps({k: v for k, v in row.items() if k != "where"}, sort_keys=True)
        for row in _override_rows(overrides)
    )

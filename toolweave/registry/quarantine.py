"""Quarantine: every tool definition is pinned by hash when approved; changed or flagged ones are held.

The state is a LanceDB table (``quarantine``) in the registry's own database directory, beside the tool
table, so it survives restarts, is shared by the gateway and the ``toolweave tools`` commands, and moves
with the registry (object storage included). One row per tool id:

* ``status``: ``approved`` or ``held``;
* ``pinned_hash`` / ``pinned``: the approved definition (hash and JSON), empty while never approved;
* ``current_hash`` / ``current``: the definition last reported by the source;
* ``reasons``: why it is held (scanner findings, "definition changed", "new tool held for review").

``review`` runs on every tool list a source reports: an unknown tool is scanned and approved (or held
when flagged, or when its source holds new tools); an approved tool whose definition hash changed (a
"rug pull") is held with the old definition kept for the diff; a held tool whose definition returns to
the pinned one is released. ``approve`` pins the current definition. Held tools stay in the registry
(so they can be reviewed and diffed) but the gateway never retrieves, publishes or runs them.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from toolweave.errors import RegistryError
from toolweave.records import ToolRecord
from toolweave.registry.store import lance_errors
from toolweave.scanner import scan_tool

__all__ = ["HeldTool", "QuarantineStore", "definition", "definition_hash"]

log = logging.getLogger(__name__)

TABLE_NAME = "quarantine"
_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("status", pa.string()),
        pa.field("pinned_hash", pa.string()),
        pa.field("pinned", pa.string()),
        pa.field("current_hash", pa.string()),
        pa.field("current", pa.string()),
        pa.field("reasons", pa.string()),
        pa.field("updated_at", pa.float64()),
    ]
)


def definition(record: ToolRecord) -> dict[str, Any]:
    """What a client's model sees of a tool: name, title, description, schemas, annotations."""
    return {
        "name": record.name,
        "title": record.title,
        "description": record.description,
        "input_schema": record.input_schema,
        "output_schema": record.output_schema,
        "annotations": record.annotations,
    }


def _dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False)


def definition_hash(record: ToolRecord) -> str:
    return hashlib.sha256(_dump(definition(record)).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class HeldTool:
    id: str
    source: str
    reasons: tuple[str, ...]
    pinned: str
    current: str

    def diff(self) -> str:
        """Unified diff from the approved definition (empty for a never-approved tool) to the held one."""
        return "".join(
            difflib.unified_diff(
                self.pinned.splitlines(keepends=True),
                self.current.splitlines(keepends=True),
                fromfile=f"{self.id} (approved)" if self.pinned else "(never approved)",
                tofile=f"{self.id} (held)",
            )
        )


class QuarantineStore:
    """The quarantine table of the registry in ``directory``."""

    def __init__(self, directory: Path | str, storage_options: Mapping[str, str] | None = None) -> None:
        import lancedb

        self._lock = threading.Lock()
        with lance_errors("open", "quarantine table"):
            self._db = lancedb.connect(str(directory), storage_options=dict(storage_options or {}) or None)
            # exist_ok: replicas sharing the registry may create it at the same moment
            self._table = self._db.create_table(TABLE_NAME, schema=_SCHEMA, exist_ok=True)
        self._rows: dict[str, dict[str, Any]] = {}
        self._version = -1
        self.refresh()

    # -- reading ----------------------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Re-read the table if another process (``toolweave tools approve``) changed it; True if so."""
        with self._lock, lance_errors("read", "quarantine table"):
            self._table.checkout_latest()  # type: ignore[no-untyped-call]  # lancedb leaves it unannotated
            version = self._table.version
            if version == self._version:
                return False
            self._rows = {row["id"]: row for row in self._table.to_arrow().to_pylist()}
            self._version = version
            return True

    def held_ids(self) -> frozenset[str]:
        return frozenset(i for i, row in self._rows.items() if row["status"] == "held")

    def held(self) -> list[HeldTool]:
        return [
            HeldTool(
                row["id"],
                row["source"],
                tuple(json.loads(row["reasons"] or "[]")),
                row["pinned"],
                row["current"],
            )
            for row in sorted(self._rows.values(), key=lambda r: r["id"])
            if row["status"] == "held"
        ]

    # -- writing ----------------------------------------------------------------------------------------
    def review(
        self,
        source: str,
        tools: Sequence[ToolRecord],
        *,
        hold_new: bool = False,
        other_tools: Collection[str] = (),
        max_description_chars: int = 4000,
    ) -> frozenset[str]:
        """Pin, hold or release ``source``'s current tools; returns the ids now held."""
        self.refresh()
        others = frozenset(other_tools)
        now = time.time()
        changed: list[dict[str, Any]] = []
        for record in tools:
            digest = definition_hash(record)
            row = self._rows.get(record.id)
            if row is not None and row["current_hash"] == digest and row["source"] == source:
                continue  # nothing new about this tool
            text = _dump(definition(record))
            findings = scan_tool(record, other_tools=others, max_description_chars=max_description_chars)
            reasons = [str(f) for f in findings]
            pinned_hash = row["pinned_hash"] if row else ""
            if findings:
                status = "held"
            elif row is None:
                status = "held" if hold_new else "approved"
                reasons = ["new tool held for review"] if hold_new else []
            elif pinned_hash == digest:
                status = "approved"  # back to what was approved
            elif pinned_hash:
                status, reasons = "held", ["definition changed since it was approved"]
            else:
                status, reasons = "held", ["new tool held for review"]
            if status == "approved":
                pinned_hash = digest
            changed.append(
                {
                    "id": record.id,
                    "source": source,
                    "status": status,
                    "pinned_hash": pinned_hash,
                    "pinned": text if status == "approved" else (row["pinned"] if row else ""),
                    "current_hash": digest,
                    "current": text,
                    "reasons": json.dumps(reasons),
                    "updated_at": now,
                }
            )
            if status == "held":
                log.warning("quarantined %s: %s", record.id, "; ".join(reasons))
        self._write(changed)
        ids = {t.id for t in tools}
        return frozenset(i for i in self.held_ids() if i in ids)

    def approve(self, ids: Sequence[str]) -> list[str]:
        """Pin the held definitions of ``ids``; returns the ids released. Unknown ids are an error."""
        self.refresh()
        unknown = [i for i in ids if i not in self._rows]
        if unknown:
            raise RegistryError(f"not in quarantine: {', '.join(unknown)} (see `toolweave tools quarantine`)")
        rows = []
        for tool_id in ids:
            row = dict(self._rows[tool_id])
            if row["status"] != "held":
                continue
            row.update(
                status="approved",
                pinned_hash=row["current_hash"],
                pinned=row["current"],
                reasons="[]",
                updated_at=time.time(),
            )
            rows.append(row)
        self._write(rows)
        return [r["id"] for r in rows]

    def _write(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        with self._lock, lance_errors("write", "quarantine table"):
            data = pa.Table.from_pylist(rows, schema=_SCHEMA)
            (
                self._table.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(data)
            )
        self.refresh()

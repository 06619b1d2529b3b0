"""Quarantine: every tool definition is pinned by hash when approved; changed or flagged ones are held.

The state is a LanceDB table (``quarantine``) in the registry's own database directory, beside the tool
table, so it survives restarts, is shared by the gateway and the ``toolweave tools`` commands, and moves
with the registry (object storage included). One row per tool id:

* ``pinned_hash`` / ``pinned``: the approved definitions (space-separated hashes: an operator may
  approve several, one per replica's upstream) and the last approved one's JSON; empty while never
  approved;
* ``status`` / ``current_hash`` / ``current`` / ``reasons``: the last definition a gateway reported
  with what it decided (``approved`` or ``held``, and why: scanner findings, "definition changed", "new
  tool held for review"), for ``toolweave tools quarantine`` and its diff.

``review`` runs on every tool list a source reports: an unknown tool is scanned and approved (pinned)
or held when flagged, or when its source holds new tools; an approved tool whose definition is not
one of the pinned ones (a "rug pull") is held; a held tool whose definition returns to a pinned one is
released. **What is held is decided per gateway, from its own upstream's definition**: a gateway whose
upstream differs (another version, another flag) holds the tool itself and reports it (one log line,
the row for ``toolweave tools quarantine``), while replicas whose upstream still gives an approved
definition keep serving it; a row another gateway wrote applies here only to tools this gateway has not
reviewed itself yet. ``approve`` pins the current definition for the whole fleet. Held tools stay in
the registry (so they can be reviewed and diffed) but the gateway that holds them never retrieves,
publishes or runs them.
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


_MAX_PINS = 8
"""Approved definitions kept per tool (one per upstream version or flag a fleet runs, and then some)."""


@dataclass(frozen=True, slots=True)
class _View:
    """A tool as this gateway's upstream defines it."""

    digest: str
    findings: tuple[str, ...]
    hold_new: bool


def _pins(row: Mapping[str, Any] | None) -> set[str]:
    return set((row["pinned_hash"] or "").split()) if row is not None else set()


def _row(
    tool_id: str,
    source: str,
    status: str,
    old: Mapping[str, Any] | None,
    text: str,
    digest: str,
    reasons: list[str],
    now: float,
    *,
    pin: bool = False,
) -> dict[str, Any]:
    """A quarantine row reporting ``text`` (pins kept from ``old``, or ``digest`` pinned with ``pin``)."""
    return {
        "id": tool_id,
        "source": source,
        "status": status,
        "pinned_hash": digest if pin else (old["pinned_hash"] if old else ""),
        "pinned": text if pin else (old["pinned"] if old else ""),
        "current_hash": digest,
        "current": text,
        "reasons": json.dumps(reasons),
        "updated_at": now,
    }


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
        self._mine: dict[str, _View] = {}
        """Tool id -> this gateway's own view of it (from its upstreams' lists): what it holds."""
        self._said: set[tuple[str, str]] = set()
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
        """The tools this gateway holds: those it reviewed, by its own upstreams' definitions; the
        others as the table says (another gateway's report, until this one reviews them)."""
        mine = self._mine
        here = {i for i, view in mine.items() if self._held_here(i, view)}
        reported = {i for i, row in self._rows.items() if i not in mine and row["status"] == "held"}
        return frozenset(here | reported)

    def _held_here(self, tool_id: str, view: _View) -> bool:
        pins = _pins(self._rows.get(tool_id))
        if view.digest in pins:
            return False
        return bool(view.findings) or bool(pins) or view.hold_new

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
        """Pin, hold or release ``source``'s current tools, as this gateway sees them; returns the ids
        it holds now. Writes a row only for a new tool, or for what this gateway holds and the table
        does not report yet (a report, never a decision for the other gateways)."""
        self.refresh()
        others = frozenset(other_tools)
        now = time.time()
        changed: list[dict[str, Any]] = []
        for record in tools:
            digest = definition_hash(record)
            row = self._rows.get(record.id)
            known = self._mine.get(record.id)
            if known is not None and known.digest == digest and row is not None and row["source"] == source:
                continue  # nothing new about this tool
            findings = scan_tool(record, other_tools=others, max_description_chars=max_description_chars)
            view = _View(digest, tuple(str(f) for f in findings), hold_new)
            self._mine[record.id] = view
            pins = _pins(row)
            held = self._held_here(record.id, view)
            text = _dump(definition(record))
            if held:
                reasons = list(view.findings) or (
                    ["definition changed since it was approved"] if pins else ["new tool held for review"]
                )
                if row is None or (row["current_hash"], row["status"]) != (digest, "held"):
                    changed.append(_row(record.id, source, "held", row, text, digest, reasons, now))
                self._say_held(record.id, digest, reasons, bool(pins))
            elif row is None:  # first seen anywhere: its definition is the approved one
                changed.append(_row(record.id, source, "approved", None, text, digest, [], now, pin=True))
            elif row["status"] == "held" and row["current_hash"] in {digest, known.digest if known else ""}:
                # what this gateway reported held is approved now (back to a pinned definition)
                changed.append(_row(record.id, source, "approved", row, text, digest, [], now))
        self._write(changed)
        ids = {t.id for t in tools}
        return frozenset(i for i in self.held_ids() if i in ids)

    def _say_held(self, tool_id: str, digest: str, reasons: list[str], approved_before: bool) -> None:
        """One log line per definition held here."""
        if (tool_id, digest) in self._said:
            return
        self._said.add((tool_id, digest))
        where = " (by this gateway: other gateways keep the approved one)" if approved_before else ""
        log.warning(
            "quarantined %s%s: %s; `toolweave tools quarantine` shows it, `toolweave tools approve %s` "
            "approves it for the fleet",
            tool_id,
            where,
            "; ".join(reasons),
            tool_id,
        )

    def approve(self, ids: Sequence[str]) -> list[str]:
        """Pin the held definitions of ``ids`` for the fleet (beside those pinned already: a
        gateway whose upstream gives one of them serves it); returns the ids released. Unknown ids are
        an error."""
        self.refresh()
        unknown = [i for i in ids if i not in self._rows]
        if unknown:
            raise RegistryError(f"not in quarantine: {', '.join(unknown)} (see `toolweave tools quarantine`)")
        rows = []
        for tool_id in ids:
            row = dict(self._rows[tool_id])
            if row["status"] != "held":
                continue
            pins = [p for p in (row["pinned_hash"] or "").split() if p != row["current_hash"]]
            row.update(
                status="approved",
                pinned_hash=" ".join([*pins[-(_MAX_PINS - 1) :], row["current_hash"]]),
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

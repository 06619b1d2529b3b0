"""The registry database: one LanceDB database (a local directory or an object-store URI) holding the
tool table, the dependency edges, the manifest overrides and the commit record that says which version
of each table is the registry.

Crash safety rests on one rule: **a write counts only once the commit record names it.** Every LanceDB
write is atomic (a new table version), but an ingest is several writes (rows, deletions, full-text
index, edges). They all go first; the commit record (a one-row table, overwritten) goes last and names
the table versions that belong together. Opening the database compares each table's latest version with
the committed one and restores (``Table.restore``) whatever is ahead: a crash at any point leaves the old
state or the new one, never rows without their edges or index. A reindex writes a new tool table beside
the old; the commit record switching to it is the swap.

Many processes may share one database (gateway replicas): only the holder of the writer lock
(``toolweave.registry.lock``) writes or recovers. The commit record is written with a compare-and-set
on its generation, after the lock's fencing check, and only when every table it names is still at the
version this writer wrote: a writer that lost its lock, or whose table another wrote meanwhile, fails
and rolls back instead of committing someone else's half-write. Everyone else reads the table versions
the commit record names, never a writer's work in progress. Readers detect a newer state cheaply:
``generation()`` reads the one-row commit table; the record's ``log`` says what recent commits changed
(``toolweave.registry.changes``). See docs/registry.md ("Writers", "Replicas").
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from toolweave.errors import ConfigError, GraphError, NotARegistryError, RegistryBusyError, RegistryError
from toolweave.records import DependencyEdge, ToolKind
from toolweave.registry.changes import Delta, extend_log
from toolweave.registry.graph import GRAPH_FILE, DependencyGraph
from toolweave.registry.lock import LOCK_FILE, WriterLock, writer_lock
from toolweave.registry.side_tables import EDGE_TABLE, OVERRIDE_TABLE, SideTables
from toolweave.registry.sources import SOURCE_TABLE
from toolweave.registry.store import TABLE_NAME, ToolTable, lance_errors
from toolweave.registry.usage import USAGE_TABLE, UsageTable

__all__ = [
    "EDGE_TABLE",
    "FORMAT",
    "LEGACY_META_FILE",
    "CommitRecord",
    "RegistryDatabase",
    "RegistryLocation",
    "is_uri",
    "table_names",
]

log = logging.getLogger(__name__)

FORMAT = "toolweave-registry/2"
LEGACY_META_FILE = "registry.json"
_LEGACY_FORMAT = "toolweave-registry/1"
COMMIT_TABLE = "commit"
_OLD_LEASE_TABLE = "lease"
"""The writer lease of earlier versions (a Lance row): dropped by the first recovery under the lock."""
_TOOL_TABLE = re.compile(rf"^{TABLE_NAME}(_g\d+)?$")
_USAGE_TABLE = re.compile(rf"^{USAGE_TABLE}(_g\d+)?$")
RegistryLocation = Path | str
"""A local directory, or an object-store URI (``s3://bucket/prefix``) as a string."""

_COMMIT_SCHEMA = pa.schema([pa.field("generation", pa.int64()), pa.field("record", pa.string())])


def is_uri(location: RegistryLocation) -> bool:
    return isinstance(location, str) and "://" in location


@dataclass(frozen=True)
class CommitRecord:
    """The committed registry: which version of each table belongs to it, and how it was embedded."""

    generation: int
    embedding_model: str
    dim: int
    tools_table: str
    versions: dict[str, int] = field(default_factory=dict)
    """Table name → committed version (tool table, usage table, edges, overrides)."""
    usage_table: str = USAGE_TABLE
    action: str = ""
    committed_at: float = 0.0
    format: str = FORMAT
    fence: int = 0
    """The writer lock's fencing token of the commit's writer (0: a file lock, which needs none)."""
    log: list[list[Any]] = field(default_factory=list)
    """``[generation, changes]`` of the newest commits (``toolweave.registry.changes``)."""


class RegistryDatabase:
    """The LanceDB database of one registry. ``open`` connects, migrates and recovers."""

    def __init__(
        self, location: RegistryLocation, db: Any, head: CommitRecord | None, lock: WriterLock
    ) -> None:
        self.location = location
        self._db = db
        self.head = head
        self.lock = lock
        """Only its holder writes or recovers (see ``toolweave.registry.lock``)."""
        self._guard: Callable[[], None] = lambda: self.lock.check()
        """Before every data write: this handle still holds the writer lock (its fencing check)."""
        self.side = SideTables(
            db, lambda: self.head.versions if self.head is not None else {}, guard=self._guard
        )
        """The edge, override and source tables (``side_tables.py``)."""
        self.graph_lost = False
        """Set by migrating an old registry whose rows outlived its graph file: edges must be re-inferred."""

    # -- opening -------------------------------------------------------------------------------------
    @classmethod
    def exists(cls, location: RegistryLocation, storage_options: Mapping[str, str] | None = None) -> bool:
        """Whether ``location`` holds a registry (committed, or in the old layout). Read-only: unlike
        ``open`` nothing is rolled back or migrated, so it is safe while a gateway is writing."""
        import lancedb

        if not is_uri(location):
            location = Path(location).expanduser()
            if not location.is_dir():
                return False
            if (location / LEGACY_META_FILE).exists():
                return True
        with lance_errors(f"opening {location}", "registry"):
            db = lancedb.connect(str(location), storage_options=dict(storage_options or {}) or None)
        return COMMIT_TABLE in table_names(db)

    @classmethod
    def open(
        cls,
        location: RegistryLocation,
        storage_options: Mapping[str, str] | None = None,
        *,
        lock_url: str = "",
        lock_ttl_s: float = 60.0,
    ) -> RegistryDatabase:
        """Connect to ``location``; roll back writes no commit names; migrate a ``graph.json`` registry.

        Recovery needs the writer lock: while another process holds it (its write is in progress,
        not interrupted), nothing is rolled back and the committed versions are read; the next
        write, under the lock, recovers. ``head`` is None for a new (empty) registry: ``create``
        makes it (under the lock). ``lock_url``: the Redis of an object-store registry's lock.
        """
        import lancedb

        if not is_uri(location):
            location = Path(location).expanduser()
            if location.exists() and not location.is_dir():
                raise NotARegistryError(f"{location} is a file, not a registry directory")
        with lance_errors(f"opening {location}", "registry"):
            db = lancedb.connect(str(location), storage_options=dict(storage_options or {}) or None)
        out = cls(location, db, None, writer_lock(location, lock_url, lock_ttl_s))
        names = out._table_names()
        if COMMIT_TABLE not in names and _legacy_meta(location) is None:
            _refuse_foreign(location, names)  # before the lock file is made in someone else's directory
        try:
            holding = out.lock.try_acquire()
        except ConfigError:  # no lock to be had here: read-only until a write says what to set
            holding = False
        if not holding:  # a live writer is at work: read what is committed
            out.head = out._read_head() if COMMIT_TABLE in out._table_names() else None
            return out
        try:
            out.head = out._recover()
        finally:
            out.lock.release()
        return out

    def recover(self) -> CommitRecord | None:
        """Re-read the commit record and roll back what no commit names. Only under the lock."""
        self.head = self._recover()
        return self.head

    def reread_head(self) -> CommitRecord:
        """Re-read the commit record (a follower that saw a newer generation); nothing is written."""
        self.side.clear()
        self.head = self._read_head()
        return self.head

    def _table_names(self) -> set[str]:
        return table_names(self._db)

    def _recover(self) -> CommitRecord | None:
        self.side.clear()
        names = self._table_names()
        if COMMIT_TABLE not in names:
            return self._first_open(names)
        head = self._read_head()
        self._guard()  # rolling back is a write: never over a new holder's write in progress
        restored = []
        for name, version in head.versions.items():
            table = self._open(name)
            if table.version != version:
                restored.append(f"{name} {table.version} -> {version}")
                with lance_errors(f"rolling {name} back to version {version}", "registry"):
                    table.restore(version)
        for name in names:
            if (_TOOL_TABLE.match(name) and name != head.tools_table) or (
                _USAGE_TABLE.match(name) and name != head.usage_table
            ):
                self.drop(name)  # a reindex that never committed, or the table a committed one replaced
        if _OLD_LEASE_TABLE in names:
            self.drop(_OLD_LEASE_TABLE)
        if restored:
            log.warning(
                "registry %s: rolled back writes of an interrupted ingest (%s)",
                self.location,
                "; ".join(restored),
            )
            self.head = head
            head = self.commit(action="recover")  # the restored versions are new versions: name them
        _remove_legacy_files(self.location)
        return head

    def _first_open(self, names: set[str]) -> CommitRecord | None:
        legacy = _legacy_meta(self.location)
        if legacy is not None:
            return self._migrate(legacy)
        _refuse_foreign(self.location, names)
        ours = {
            n
            for n in names
            if _TOOL_TABLE.match(n)
            or _USAGE_TABLE.match(n)
            or n in (EDGE_TABLE, OVERRIDE_TABLE, SOURCE_TABLE, _OLD_LEASE_TABLE)
        }
        for name in ours:  # a registry whose very first commit never happened
            self.drop(name)
        return None

    def create(self, embedding_model: str, dim: int) -> CommitRecord:
        """Start an empty registry: empty tables, then the first commit."""
        tools = ToolTable(self._db, TABLE_NAME, dim, guard=self._guard)
        usage = UsageTable(self._db, USAGE_TABLE, dim, guard=self._guard)
        head = CommitRecord(0, embedding_model, dim, tools.name, action="create")
        self.head = self.commit(head, tools=tools, usage=usage)
        return self.head

    # -- the commit record ---------------------------------------------------------------------------
    def _read_head(self) -> CommitRecord:
        with lance_errors("reading the commit record", "registry"):
            rows = self._db.open_table(COMMIT_TABLE).to_arrow().to_pylist()
        if len(rows) != 1:
            raise NotARegistryError(f"{self.location}: damaged commit record ({len(rows)} rows)")
        try:
            record = CommitRecord(**json.loads(rows[0]["record"]))
        except (TypeError, ValueError) as exc:
            raise NotARegistryError(f"{self.location}: unreadable commit record: {exc}") from exc
        if record.format != FORMAT:
            raise NotARegistryError(f"{self.location}: registry format {record.format!r}, expected {FORMAT}")
        return record

    def roll_back(self) -> None:
        """Undo every write since the last commit (a failed ingest in this process)."""
        if self.head is not None:
            self.head = self._recover()

    def committed_generation(self) -> int:
        """The generation this handle last read or wrote (no I/O)."""
        return self._committed().generation

    def generation(self) -> int:
        """The committed generation as stored now (another process may have committed since open)."""
        return self._read_head().generation

    def commit(
        self,
        head: CommitRecord | None = None,
        *,
        action: str = "",
        tools: ToolTable | None = None,
        usage: UsageTable | None = None,
        delta: Delta | None = None,
        **changes: Any,
    ) -> CommitRecord:
        """Record the current version of every registry table as the registry: the last write of any
        change. ``tools`` and ``usage`` name the handles written through (a reindex switches both to new
        tables); ``delta``: what changed, for followers (None: everything); ``changes`` update model
        and dim."""
        base = head or self.head
        if base is None:
            raise RegistryError(f"registry {self.location} has no commit to build on")
        tools_table = tools.name if tools is not None else base.tools_table
        usage_table = usage.name if usage is not None else base.usage_table
        versions = {
            tools_table: tools.version if tools is not None else self._open(tools_table).version,
            **self.side.versions(),
        }
        if usage is not None:
            versions[usage_table] = usage.version
        elif usage_table in base.versions:
            versions[usage_table] = self._open(usage_table).version
        for name, version in versions.items():
            _check_version(self.location, name, self._open(name).version, version)
        generation = (self.head.generation + 1) if self.head is not None else 0
        record = replace(
            base,
            generation=generation,
            tools_table=tools_table,
            usage_table=usage_table,
            versions=versions,
            action=action or base.action,
            fence=self.lock.token,
            log=extend_log(base.log if self.head is not None else [], generation, delta),
            **changes,
        )
        self.head = self._write_head(record, expected=self.head.generation if self.head else None)
        return self.head

    def _write_head(self, record: CommitRecord, expected: int | None) -> CommitRecord:
        """Write the one-row commit record. Over an existing one, a compare-and-set on ``expected``
        (the generation this write built on): a newer commit by another process makes it fail; and
        before it, the writer lock's fencing check."""
        self.lock.check()
        record = replace(record, committed_at=time.time())
        encoded = json.dumps(asdict(record), sort_keys=True)
        if expected is None or COMMIT_TABLE not in self._table_names():
            row = pa.table({"generation": [record.generation], "record": [encoded]}, schema=_COMMIT_SCHEMA)
            with lance_errors("writing the commit record", "registry"):
                # create_table(mode="overwrite") replaces the one row in one atomic table version
                self._db.create_table(COMMIT_TABLE, row, mode="overwrite")
            return record
        with lance_errors("writing the commit record", "registry"):
            result = self._open(COMMIT_TABLE).update(
                where=f"generation = {int(expected)}",
                values={"generation": record.generation, "record": encoded},
            )
        if int(result.rows_updated) != 1:
            raise RegistryBusyError(
                f"registry {self.location}: another process committed generation > {expected} during this "
                "write; the write is rolled back. Try again."
            )
        return record

    # -- tables --------------------------------------------------------------------------------------
    def _committed(self) -> CommitRecord:
        if self.head is None:
            raise RegistryError(f"registry {self.location} is not created yet")
        return self.head

    def tool_table(self) -> ToolTable:
        """The committed tool table, at its committed version (writable when that is the latest)."""
        head = self._committed()
        return ToolTable(
            self._db, head.tools_table, head.dim, head.versions.get(head.tools_table), guard=self._guard
        )

    def new_tool_table(self, dim: int) -> ToolTable:
        """An empty tool table beside the committed one (for a reindex), named after the next generation."""
        name = self._next_name(TABLE_NAME)
        self.drop(name)
        return ToolTable(self._db, name, dim, guard=self._guard)

    def usage_table(self) -> UsageTable:
        head = self._committed()
        return UsageTable(
            self._db, head.usage_table, head.dim, head.versions.get(head.usage_table), guard=self._guard
        )

    def new_usage_table(self, dim: int) -> UsageTable:
        """An empty usage table beside the committed one (for a reindex)."""
        name = self._next_name(USAGE_TABLE)
        self.drop(name)
        return UsageTable(self._db, name, dim, guard=self._guard)

    def _next_name(self, base: str) -> str:
        generation = self.head.generation + 1 if self.head is not None else 0
        return f"{base}_g{generation}"

    def drop(self, name: str) -> None:
        self.side.clear()
        with lance_errors(f"dropping table {name}", "registry"):
            self._db.drop_table(name, ignore_missing=True)

    def compact(self) -> None:
        """Merge the small versions the edge, override and commit tables collect (one per commit).
        Changes their versions, not their rows: call it before a commit. Failures cost only disk."""
        self.side.compact()
        try:  # no commit names the commit table's version
            with lance_errors("compacting", COMMIT_TABLE):
                self._open(COMMIT_TABLE).optimize()
        except RegistryError:
            log.warning("compacting %s failed; will try again later", COMMIT_TABLE, exc_info=True)

    def _open(self, name: str) -> Any:
        with lance_errors(f"opening table {name}", "registry"):
            return self._db.open_table(name)

    # -- registries written before the commit record -------------------------------------------------
    def _migrate(self, meta: dict[str, Any]) -> CommitRecord:
        """``registry.json`` + tool table + ``graph.json`` → edges table and a commit record. Safe to
        repeat: a crash before the commit leaves the old files, and migration runs again."""
        assert isinstance(self.location, Path)
        tools = ToolTable(self._db, TABLE_NAME, int(meta["dim"]), guard=self._guard)
        graph_path = self.location / GRAPH_FILE
        edges: list[DependencyEdge] = []
        if graph_path.exists():
            edges = list(DependencyGraph.load(self.location).edges())
        elif tools.count():
            self.graph_lost = True
            log.warning(
                "registry %s: %d tools but no %s; dependencies will be re-inferred",
                self.location,
                tools.count(),
                GRAPH_FILE,
            )
        self.side.save_edges(edges)
        self.side.save_overrides(None)
        head = CommitRecord(0, str(meta["embedding_model"]), int(meta["dim"]), tools.name, action="migrate")
        self.head = None
        usage = UsageTable(self._db, USAGE_TABLE, int(meta["dim"]), guard=self._guard)
        head = self.commit(head, tools=tools, usage=usage)
        log.info(
            "registry %s: migrated %d edges from %s into the database", self.location, len(edges), GRAPH_FILE
        )
        _remove_legacy_files(self.location)
        return head


def _refuse_foreign(location: RegistryLocation, names: set[str]) -> None:
    """A local directory without a commit record that holds files LanceDB does not list is someone
    else's: refused. Other tables (the quarantine, ...) keep their own state beside ours."""
    foreign: list[str] = []
    if isinstance(location, Path) and location.exists():
        foreign = sorted(
            p.name
            for p in location.iterdir()
            if p.name.removesuffix(".lance") not in names and p.name != LOCK_FILE
        )
    if foreign:
        raise NotARegistryError(
            f"{location} is not a toolweave registry (no commit record; it holds "
            f"{', '.join(foreign[:5])}). Choose an empty or new location with --registry."
        )


def _check_version(location: RegistryLocation, name: str, latest: int, version: int) -> None:
    """A table to be named must still be at the version this writer wrote or read: a table another
    writer wrote since (one whose lock lapsed) would commit that writer's half-write."""
    if latest != version:
        raise RegistryBusyError(
            f"registry {location}: table {name} was written by another writer during this write "
            f"(version {latest}, this write's {version}); the write is rolled back. Try again."
        )


def table_names(db: Any) -> set[str]:
    """Every table of the LanceDB database ``db`` (read page by page)."""
    with lance_errors("listing tables", "registry"):
        names: set[str] = set()
        token = None
        while True:
            page = db.list_tables(page_token=token, limit=1000)
            names.update(page.tables)
            token = page.page_token
            if not token:
                return names


def graph_from_rows(
    nodes: Iterable[tuple[str, ToolKind, str]], edges: Iterable[DependencyEdge]
) -> DependencyGraph:
    """The in-memory graph (networkx) from tool ``(id, kind, source)`` rows and stored edges. An edge
    naming a missing tool cannot come from a commit (rows and edges commit together): it is skipped
    with a warning rather than failing the open."""
    graph = DependencyGraph()
    for tool_id, kind, source in nodes:
        graph.add_tool(tool_id, kind, source)
    problems: list[GraphError] = graph.add_edges(edges)
    if problems:
        log.warning(
            "dependency edges naming unknown tools skipped: %d (first: %s)", len(problems), problems[0]
        )
    return graph


def _legacy_meta(location: RegistryLocation) -> dict[str, Any] | None:
    if not isinstance(location, Path):
        return None
    path = location / LEGACY_META_FILE
    if not path.exists():
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise NotARegistryError(f"{path}: unreadable registry metadata: {exc}") from exc
    if not isinstance(meta, dict) or meta.get("format") != _LEGACY_FORMAT or "embedding_model" not in meta:
        raise NotARegistryError(f"{path}: not toolweave registry metadata (format {_LEGACY_FORMAT} expected)")
    return meta


def _remove_legacy_files(location: RegistryLocation) -> None:
    if not isinstance(location, Path):
        return
    for name in (GRAPH_FILE, LEGACY_META_FILE):
        (location / name).unlink(missing_ok=True)

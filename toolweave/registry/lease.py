"""The writer lease: one row in a Lance table saying which process may write the registry, until when.

Several gateway replicas (and CLI ingests) may share one registry. Their writes must not interleave:
recovery at open rolls back table versions no commit names, which would include another process's
ingest still in progress, and concurrent ``merge_insert``s of the same ids can leave duplicate rows in
Lance. So a writer first takes the lease, and only a lease holder writes or recovers.

Taking the lease is a compare-and-set that Lance makes atomic: ``update(where=<free, expired or
mine>)`` on the one row. Two processes updating the same row at once conflict in Lance's commit (each
commit writes version N+1 with put-if-not-exists: a rename on local disk, a conditional PUT
``If-None-Match`` on S3); the loser's update is retried against the new version, where the ``where``
no longer matches, and reports 0 rows updated. A holder renews the lease from a background thread
while it writes; a holder that dies stops renewing, and the lease is free for others once it expires.

Clocks: expiry compares wall clocks of different machines, so keep them loosely in sync (NTP); the
TTL (``Settings.registry_lease_s``) should be well above any clock skew. See docs/registry.md, "Replicas".
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from toolweave.errors import RegistryBusyError, RegistryError
from toolweave.registry.store import lance_errors, sql_string

__all__ = ["LEASE_TABLE", "WriterLease"]

log = logging.getLogger(__name__)

LEASE_TABLE = "lease"
_SCHEMA = pa.schema(
    [
        pa.field("holder", pa.string(), nullable=False),  # "" when free
        pa.field("expires_at", pa.float64(), nullable=False),  # wall-clock seconds
    ]
)
_POLL_S = (0.02, 0.5)
"""Back-off between attempts to take a busy lease (first, longest)."""


def new_holder_id() -> str:
    """Unique per process and per registry handle: host, pid and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class WriterLease:
    """The lease of one registry database, held on behalf of ``holder``. Re-entrant within a process
    (the registry's own write lock serialises its threads)."""

    def __init__(self, db: Any, ttl_s: float, holder: str | None = None) -> None:
        self._db = db
        self.ttl_s = ttl_s
        self.holder = holder or new_holder_id()
        self._table: Any = None
        self._depth = 0
        self.holding = False
        """Whether this process took the lease and has not given it back (commits then verify it)."""
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()
        self.lost = False
        """Set when a renewal found the lease taken by another process (this holder overran its TTL)."""

    # -- the table ------------------------------------------------------------------------------------
    def _lease_table(self) -> Any:
        if self._table is not None:
            return self._table
        with lance_errors("opening the writer lease", "registry"):
            try:
                table = self._db.open_table(LEASE_TABLE)
            except ValueError:  # not found: the first writer makes it (a racing creator loses, then opens)
                try:
                    table = self._db.create_table(
                        LEASE_TABLE, pa.table({"holder": [""], "expires_at": [0.0]}, schema=_SCHEMA)
                    )
                except (ValueError, OSError, RuntimeError):
                    table = self._db.open_table(LEASE_TABLE)
        self._table = table
        return table

    def _set(self, where: str, holder: str, expires_at: float) -> bool:
        """Compare-and-set on the one row: True when ``where`` matched (see the module docstring)."""
        table = self._lease_table()
        with lance_errors("updating the writer lease", "registry"):
            # the handle would evaluate ``where`` on the version it last saw: a stale "held" never matches
            table.checkout_latest()
            result = table.update(where=where, values={"holder": holder, "expires_at": expires_at})
        return int(result.rows_updated) == 1

    def state(self) -> tuple[str, float]:
        """(holder, expires_at) as stored now; ("", 0.0) when free."""
        table = self._lease_table()
        with lance_errors("reading the writer lease", "registry"):
            table.checkout_latest()
            rows = table.to_arrow().to_pylist()
        if len(rows) != 1:
            raise RegistryError(f"damaged writer lease ({len(rows)} rows)")
        return str(rows[0]["holder"]), float(rows[0]["expires_at"])

    def verify(self) -> None:
        """Raise unless this holder still holds the lease (checked right before a commit: a holder
        that overran its TTL must not commit over what the next holder wrote)."""
        holder, expires_at = self.state()
        if self.lost or holder != self.holder or expires_at <= time.time():
            raise RegistryBusyError(
                f"the registry writer lease was lost to {holder or 'nobody'} during this write (it ran "
                f"past {self.ttl_s:.0f} s without a renewal); the write is rolled back"
            )

    # -- taking and giving back ----------------------------------------------------------------------
    def try_acquire(self) -> bool:
        me = sql_string(self.holder)
        now = time.time()
        try:
            self.holding = self._set(
                f"holder = '' OR holder = {me} OR expires_at < {now!r}", self.holder, now + self.ttl_s
            )
            return self.holding
        except RegistryError:  # Lance gives up on a hot row ("too many concurrent writers"): try later
            log.debug("writer lease attempt failed", exc_info=True)
            return False

    def acquire(self, timeout_s: float) -> None:
        """Take the lease, waiting (with back-off) up to ``timeout_s`` for its holder to finish."""
        deadline = time.monotonic() + timeout_s
        delay = _POLL_S[0]
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                holder, expires_at = self.state()
                raise RegistryBusyError(
                    f"another process ({holder}) is writing the registry; its lease runs "
                    f"{max(0.0, expires_at - time.time()):.0f} s more. Try again later."
                )
            time.sleep(delay)
            delay = min(delay * 2, _POLL_S[1])

    def extend(self, seconds: float) -> None:
        """Hold the lease ``seconds`` from now (at least its TTL), for one write that blocks renewals.

        LanceDB runs a process's writes one at a time: while an index build of a large table runs
        (minutes at 100k tools), the renewal's update waits behind it and the lease would expire under
        a live writer. A writer that dies meanwhile keeps the registry until this longer expiry."""
        until = time.time() + max(seconds, self.ttl_s)
        if not self._set(f"holder = {sql_string(self.holder)}", self.holder, until):
            self.lost = True
            raise RegistryBusyError("the registry writer lease was lost before a long write began")

    def release(self) -> None:
        self.holding = False
        try:
            self._set(f"holder = {sql_string(self.holder)}", "", 0.0)
        except RegistryError:  # the lease expires by itself
            log.warning("could not release the registry writer lease", exc_info=True)

    @contextmanager
    def held(self, timeout_s: float) -> Iterator[None]:
        """Hold the lease for the block, renewed in the background; nested blocks share it."""
        if self._depth == 0:
            self.acquire(timeout_s)
            self.lost = False
            self._start_renewing()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._stop_renewing()
                self.release()

    def _start_renewing(self) -> None:
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew_loop, name="toolweave-lease", daemon=True)
        self._renewer.start()

    def _stop_renewing(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                if not self._set(
                    f"holder = {sql_string(self.holder)}", self.holder, time.time() + self.ttl_s
                ):
                    self.lost = True
                    log.error("registry writer lease was taken over by another process; this write will fail")
                    return
            except RegistryError:  # the store hiccuped: the next renewal tries again before expiry
                log.warning("could not renew the registry writer lease", exc_info=True)

"""The writer lock: which process may write a registry now, held through an engine built for it.

Several gateway replicas, CLI ingests and index builds may share one registry. Their writes must not
interleave: recovery rolls back table versions no commit names (which would include another process's
write in progress), and concurrent ``merge_insert``s of the same ids can leave duplicate rows in Lance.
So a writer first takes this lock, and only its holder writes or recovers.

Two engines, chosen by where the registry lives:

- **A local directory: an OS file lock** (``flock`` on ``<registry>/.writer.lock``). The kernel holds it
  for the process and drops it when the process dies, however it dies: no expiry, no renewal, no
  clock, nothing to lose while a starved thread sleeps, and no service to run beside a single-user
  gateway and its CLI. (Not for network file systems, whose ``flock`` semantics vary: use an
  object-store registry with Redis for a fleet.)
- **An object-store URI (``s3://``): a Redis lease with a fencing token** (``registry_lock_url``,
  default the session store's Redis). Taking it increments a counter (``INCR``) in the same atomic
  script that sets the lock key with a short TTL (``registry_lock_ttl_s``, default 6 s), so every
  holder gets a larger token than the last. A renewer thread extends the TTL every sixth of it (one
  tiny Redis command, never queued behind this process's Lance writes), so a holder that dies (kill
  -9, a lost machine) frees the registry within seconds; when a renewal finds the key expired but the
  counter still at its token, nobody took the lock meanwhile and it is taken back, so a starved
  renewer costs nothing unless another writer was waiting. Every data write and the commit check the
  token first (``check``): a writer whose lock another took fails there and rolls back instead of
  writing over the new holder. Expiry is counted by Redis alone (no clocks of different machines
  compared).

  A request that timed out must not land later: a Redis paused (SIGSTOP, a stalled VM) runs the
  scripts queued in its sockets when it resumes, and a late acquire would set a lock nobody holds.
  So each script that can set the key carries a deadline in Redis's own time (read with ``TIME``
  just before; its clock keeps running while the process is stopped) shorter than the client's
  read timeout, and refuses once it is past: a request the client gave up on is a no-op.

What the lock cannot fence (a writer paused between its check and its write longer than the TTL), the
commit catches: the commit record is a compare-and-set on the generation (Lance's conditional commit),
and it refuses to name a table whose latest version is not the one this writer wrote
(``toolweave.registry.database``). See docs/registry.md ("Writers").
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from toolweave.errors import ConfigError, RegistryBusyError, RegistryError
from toolweave.redaction import display_url

__all__ = ["LOCK_FILE", "LOCK_POLL_MAX_S", "FileLock", "RedisLock", "WriterLock", "writer_lock"]

log = logging.getLogger(__name__)

LOCK_FILE = ".writer.lock"
"""The lock file in a local registry directory (not a table: LanceDB ignores it)."""
_POLL_S = (0.02, 0.5)
LOCK_POLL_MAX_S = _POLL_S[1]
"""The longest a waiting writer sleeps between two looks at the lock (a writer that takes it again
right away leaves it free this long, twice over, for one that waits: ``Ingest.ingest``'s chunks)."""
"""Back-off between attempts to take a busy lock (first, longest)."""
_SAY_AFTER_S = 5.0
"""A writer that has waited this long for the lock logs what it waits for (a flush behind another
replica's write waits a second or two: no line for that)."""
REDIS_IO_TIMEOUT_S = 2.0
"""Connect and read deadline of one Redis command of the lock (a hung Redis fails the write, cleanly)."""


class WriterLock(Protocol):
    """The lock of one registry. Re-entrant within a handle (the registry's own write lock serialises
    its threads); ``held`` nests."""

    where: str
    """What coordinates the writers, for messages (no credentials)."""
    token: int
    """The fencing token of the current holding (0 when the engine needs none, or not held)."""

    def try_acquire(self) -> bool:
        """Take the lock if it is free now."""
        ...

    def check(self) -> None:
        """Raise ``RegistryBusyError`` unless this handle still holds the lock (before a write)."""
        ...

    def release(self) -> None: ...

    @contextmanager
    def held(self, timeout_s: float) -> Iterator[None]:
        """Hold the lock for the block, waiting up to ``timeout_s`` for another writer to finish."""
        ...


class _Reentrant:
    """``held`` for both engines: take once, nest, give back once; waiting with back-off."""

    where = ""
    token = 0
    _depth = 0

    def try_acquire(self) -> bool:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def _busy(self) -> str:
        return "another process is writing the registry"

    def acquire(self, timeout_s: float) -> None:
        started = time.monotonic()
        deadline = started + timeout_s
        delay = _POLL_S[0]
        said, said_at = "", 0.0
        while not self.try_acquire():
            now = time.monotonic()
            if now >= deadline:
                raise RegistryBusyError(
                    f"{self._busy()} ({self.where}); waited {timeout_s:.0f} s. Try again later."
                )
            if now - started >= _SAY_AFTER_S:
                # a CLI that waits says for what, once, and again when the reason changes (the holder
                # finished and Redis went away, ...): never silent for a minute
                busy = self._busy()
                if busy != said and now - said_at >= _SAY_AFTER_S * 5:
                    log.warning(
                        "waiting for the registry writer lock (%s): %s; giving up in %.0f s",
                        self.where,
                        busy,
                        deadline - now,
                    )
                    said, said_at = busy, now
            time.sleep(delay)
            delay = min(delay * 2, _POLL_S[1])

    @contextmanager
    def held(self, timeout_s: float) -> Iterator[None]:
        if self._depth == 0:
            self.acquire(timeout_s)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.release()


class FileLock(_Reentrant):
    """``flock`` on a file in the registry directory (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self.where = f"file lock {self.path}"
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # flock, not lockf: it belongs to the open file, so a second handle of the same process
            # (a CLI ingest beside a gateway, a benchmark) waits too; a per-process lock would let it in
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError as exc:
            os.close(fd)
            raise RegistryError(f"registry writer lock {self.path}: {exc}") from exc
        self._fd = fd
        try:  # who holds it, for a waiting writer's message (the lock is the flock, not this text)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        except OSError:
            pass
        return True

    def _busy(self) -> str:
        try:
            holder = self.path.read_text(errors="replace").strip()[:80]
        except OSError:
            holder = ""
        held_by = f" (held by {holder})" if holder else ""
        return f"another process is writing the registry{held_by}"

    def check(self) -> None:
        if self._fd is None:
            raise RegistryBusyError(f"this process does not hold the registry writer lock ({self.where})")

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock


# Redis's clock in microseconds, inside a script (Redis 7 replicates a script's effects, so a script
# may read TIME before it writes). Doubles hold 16 digits: microseconds since 1970 fit.
_NOW = "local t = redis.call('time') local now = t[1] * 1000000 + t[2]\n"
# KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] holder; ARGV[1] ttl ms, ARGV[2] deadline (Redis us),
# ARGV[3] who holds it (for a waiting writer's message). Returns the new token, 0 when held, -1 when late.
_ACQUIRE = (
    _NOW
    + """
if now > tonumber(ARGV[2]) then return -1 end
if redis.call('exists', KEYS[1]) == 1 then return 0 end
local token = redis.call('incr', KEYS[2])
redis.call('set', KEYS[1], token, 'PX', ARGV[1])
redis.call('set', KEYS[3], ARGV[3], 'PX', ARGV[1])
return token
"""
)
# ARGV[1] token, ARGV[2] ttl ms, ARGV[3] deadline (Redis us). 1: extended (or taken back: expired, and
# nobody took it since); 0: lost; -1: late (the client gave up on this request; it changes nothing).
_RENEW = (
    _NOW
    + """
if now > tonumber(ARGV[3]) then return -1 end
local held = redis.call('get', KEYS[1])
if held == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2]) redis.call('pexpire', KEYS[3], ARGV[2]) return 1
end
if held == false and redis.call('get', KEYS[2]) == ARGV[1] then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1
end
return 0
"""
)
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[3]) return redis.call('del', KEYS[1]) end
return 0
"""
_LATE_MARGIN_S = 0.5
"""A script that reaches Redis later than this before the client's read timeout refuses to run: time
for the reply to travel back, so no request the client gave up on ever changes the lock."""


class RedisLock(_Reentrant):
    """A Redis lease with a fencing token (see the module docstring)."""

    def __init__(self, url: str, location: str, ttl_s: float) -> None:
        import redis

        self.where = f"Redis lock at {display_url(url)}"
        digest = hashlib.sha256(location.encode()).hexdigest()[:24]
        self._key = f"toolweave:registry:{digest}:writer"
        self._fence = f"toolweave:registry:{digest}:fence"
        self._holder = f"toolweave:registry:{digest}:holder"
        self.ttl_s = ttl_s
        self._ttl_ms = max(1000, int(ttl_s * 1000))
        self.token = 0
        self.lost = False
        """Set when a renewal found the lock taken by another writer."""
        self._client: Any = redis.Redis.from_url(
            url, socket_timeout=REDIS_IO_TIMEOUT_S, socket_connect_timeout=REDIS_IO_TIMEOUT_S
        )
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()
        self._unreachable = ""
        """Why the last attempt failed when Redis did not answer (else the lock was busy)."""
        self._clock: tuple[int, float] | None = None
        """Redis's time (us) and our monotonic clock when we read it: deadlines in Redis's time."""
        self.who = f"pid {os.getpid()} on {socket.gethostname()}"
        """What a waiting writer is told holds the lock."""

    def _run(self, script: str, *args: int | str) -> int:
        from redis.exceptions import RedisError

        try:
            return int(self._client.eval(script, 3, self._key, self._fence, self._holder, *args))
        except RedisError as exc:
            raise RegistryError(
                f"registry writer lock: {self.where} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def _deadline(self, *, sync: bool) -> int:
        """A deadline in Redis's microseconds for a request sent now: before the client gives up on it.
        ``sync`` reads Redis's clock first (one round trip); else it is extrapolated from the last read
        (the monotonic clock drifts by microseconds per minute; the margin is half a second)."""
        from redis.exceptions import RedisError

        if sync or self._clock is None:
            try:
                seconds, micros = self._client.time()
            except RedisError as exc:
                raise RegistryError(
                    f"registry writer lock: {self.where} failed: {type(exc).__name__}: {exc}"
                ) from exc
            self._clock = (int(seconds) * 1_000_000 + int(micros), time.monotonic())
        redis_us, at = self._clock
        elapsed_us = int((time.monotonic() - at) * 1_000_000)
        return redis_us + elapsed_us + int((REDIS_IO_TIMEOUT_S - _LATE_MARGIN_S) * 1_000_000)

    def try_acquire(self) -> bool:
        if self.token:
            return True
        try:
            token = self._run(_ACQUIRE, self._ttl_ms, self._deadline(sync=True), self.who)
        except RegistryError as exc:
            self._unreachable = str(exc)
            return False
        self._unreachable = ""
        if token <= 0:  # busy, or (-1) answered too late to count: try again
            return False
        self.token, self.lost = token, False
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew_loop, name="toolweave-writer-lock", daemon=True)
        self._renewer.start()
        return True

    def _busy(self) -> str:
        if self._unreachable:
            return self._unreachable
        try:
            holder = self._client.get(self._holder)
        except Exception:  # a message only: Redis answered a moment ago
            holder = None
        held_by = f" (held by {holder.decode(errors='replace')})" if holder else ""
        return f"another process is writing the registry{held_by}"

    def _renew(self) -> int:
        return self._run(_RENEW, self.token, self._ttl_ms, self._deadline(sync=False))

    def check(self) -> None:
        """One Redis command: still ours (extended), or taken back if expired and untaken."""
        renewed = self._renew() if self.token and not self.lost else 0
        if renewed < 0:  # Redis stalled past our estimate of its clock: read it again, once
            self._clock = None
            renewed = self._renew()
        if renewed != 1:
            self.lost = True
            raise RegistryBusyError(
                f"the registry writer lock ({self.where}) was taken by another writer during this write "
                f"(token {self.token} fenced); the write is rolled back. Try again."
            )

    def _renew_loop(self) -> None:
        failing = False
        while not self._stop.wait(self.ttl_s / 6):
            try:
                renewed = self._renew()
                if renewed == 0:
                    self.lost = True
                    log.error("registry writer lock was taken by another writer; this write will fail")
                    return
                if renewed < 0:  # Redis stalled: this renewal came too late; the next one tries again
                    self._clock = None
                    continue
                failing = False
            except RegistryError as exc:  # Redis hiccuped: the next renewal tries again before expiry
                self._clock = None  # read Redis's clock again: it may have been restarted
                if not failing:
                    log.warning("could not renew the registry writer lock: %s", exc)
                failing = True

    def release(self) -> None:
        token, self.token = self.token, 0
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        if token:
            try:
                self._run(_RELEASE, token)
            except RegistryError as exc:  # the key expires by itself
                log.warning("could not release the registry writer lock: %s", exc)


class _Unconfigured(_Reentrant):
    """An object-store registry without a Redis to coordinate its writers: reads work, writes say what
    to set (one line) instead of writing uncoordinated."""

    def __init__(self, location: str) -> None:
        self.where = "no writer lock configured"
        self._location = location

    def try_acquire(self) -> bool:
        raise ConfigError(
            f"registry {self._location} is on an object store: writers need a Redis to take turns. Set "
            "registry_lock_url (TOOLWEAVE_REGISTRY_LOCK_URL=redis://...; the session store's Redis will "
            "do, and is used when session_store_url is set). See docs/registry.md, 'Writers'."
        )

    def check(self) -> None:
        self.try_acquire()

    def release(self) -> None:
        return None


def writer_lock(location: Path | str, lock_url: str, ttl_s: float) -> WriterLock:
    """The lock for a registry at ``location``: a file lock for a directory, Redis for a URI."""
    if isinstance(location, Path):
        return FileLock(location)
    if not lock_url:
        return _Unconfigured(location)
    return RedisLock(lock_url, location, ttl_s)

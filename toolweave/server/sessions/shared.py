"""Session state shared by gateway replicas: Redis, behind the in-process sessions (``sessions.py``).

With ``session_store_url`` set, the published set and conversation context of every session that can
move between replicas (2026-era HTTP sessions the client names in ``_meta``) are written to Redis
when they change and read when a replica meets a session it does not hold, so a client the load
balancer sends elsewhere keeps its set. Handshake-era sessions are tied to one connection (one
process) and stay local. See docs/deploy.md.

Correctness across replicas without a round trip per request: a write also publishes the session's
hashed key on one pub/sub channel; every replica listens, and a change made elsewhere marks its copy
stale, so the next request reloads it. While that subscription is down, changes could be missed, so
every cached copy is stale again once it is back.

Degrade, never die: any Redis failure is logged once (the URL without credentials), sessions then
live in this process alone, and Redis is retried with backoff; sessions changed meanwhile are written
when it is back (this replica's state wins over what Redis still holds for them).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

import anyio

from toolweave.errors import ConfigError
from toolweave.redaction import display_url, redact

__all__ = ["NAMESPACE", "RedisSessions", "SharedSessions", "display_url", "state_key"]

log = logging.getLogger(__name__)

NAMESPACE = "toolweave:session:"
"""Prefix of every session key in Redis (one deployment per Redis database: pick another ``/db``)."""
CHANNEL = "toolweave:session-changes"
"""Pub/sub channel on which a replica announces ``<replica id> <hashed session key>`` after a write."""
IO_TIMEOUT_S = 0.5
"""Connect and read timeout of one Redis command: a dead Redis must not stall requests for long."""
RETRY_MIN_S = 0.2
RETRY_MAX_S = 5.0
"""Backoff bounds between attempts while Redis is unreachable."""
SCHEMES = ("redis", "rediss", "unix")


def state_key(session_key: str) -> str:
    """The Redis-side name of a session: hashed, since keys hold client-chosen strings of any length."""
    return hashlib.sha256(session_key.encode()).hexdigest()[:40]


class SharedSessions(Protocol):
    """Where shared session state lives besides this process. Methods never raise."""

    where: str
    """Where it is, for logs (no credentials)."""

    async def load(self, key: str) -> tuple[bool, dict[str, Any] | None]:
        """``(reachable, state)``: the state stored under ``key`` (None: none stored)."""
        ...

    async def save(self, key: str, state: dict[str, Any]) -> bool:
        """Store ``state`` under ``key`` and tell the other replicas; False if it could not."""
        ...

    async def watch(self, changed: Callable[[str], Awaitable[None]], lost: Callable[[], None]) -> None:
        """Until cancelled: call ``changed(key)`` for each change another replica made, and ``lost()``
        whenever changes may have been missed (so cached copies must be re-read)."""
        ...

    async def aclose(self) -> None: ...


class RedisSessions:
    """``SharedSessions`` on Redis (``redis.asyncio``, imported on first use: not before the handshake)."""

    def __init__(self, url: str, ttl_s: float) -> None:
        self.where = display_url(url)
        if (urlsplit(url).scheme if "://" in url else "") not in SCHEMES:
            # a typo must stop the start with a clear message, not degrade forever (no credentials in it)
            raise ConfigError(
                f"session_store_url: expected redis://, rediss:// or unix:// URL, got {self.where!r}"
            )
        self._url = url
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self._replica = uuid.uuid4().hex  # own announcements are ignored
        self._redis: Any = None
        self._listener: Any = None
        self.healthy = True  # until a failure says otherwise
        self._retry_at = 0.0
        self._backoff = RETRY_MIN_S

    def _clients(self) -> tuple[Any, Any]:
        if self._redis is None:
            import redis.asyncio as aioredis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            # No silent retries inside the client: a failure must surface here, where it degrades.
            common: dict[str, Any] = {
                "socket_connect_timeout": IO_TIMEOUT_S,
                "retry": Retry(NoBackoff(), 0),
                "health_check_interval": 10,
            }
            self._redis = aioredis.Redis.from_url(self._url, socket_timeout=IO_TIMEOUT_S, **common)
            # pub/sub waits for messages indefinitely: no read timeout on its connection
            self._listener = aioredis.Redis.from_url(self._url, **common)
        return self._redis, self._listener

    def _usable(self) -> bool:
        return self.healthy or time.monotonic() >= self._retry_at

    def _failed(self, exc: BaseException) -> None:
        if self.healthy:
            reason = redact(f"{type(exc).__name__}: {exc}")[:300]
            log.warning(
                "session store %s is unreachable (%s): sessions live in this process until it is back",
                self.where,
                reason,
            )
        self.healthy = False
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, RETRY_MAX_S)

    async def _failed_command(self, exc: BaseException) -> None:
        self._failed(exc)
        # Idle pooled connections are to the server that went away: the first command after it is back
        # would fail on one of them and count as a second outage. New connections are opened instead.
        await _quietly(self._clients()[0].connection_pool.disconnect(inuse_connections=False))

    def _reached(self) -> None:
        if not self.healthy:
            log.warning("session store %s is reachable again", self.where)
        self.healthy = True
        self._backoff = RETRY_MIN_S

    async def load(self, key: str) -> tuple[bool, dict[str, Any] | None]:
        if not self._usable():
            return False, None
        try:
            raw = await self._clients()[0].get(NAMESPACE + key)
        except Exception as exc:  # any Redis failure degrades to local state
            await self._failed_command(exc)
            return False, None
        self._reached()
        if raw is None:
            return True, None
        try:
            state = json.loads(raw)
        except ValueError:
            log.warning("session state %s in %s is not JSON: ignored", key, self.where)
            return True, None
        return True, state if isinstance(state, dict) else None

    async def save(self, key: str, state: dict[str, Any]) -> bool:
        if not self._usable():
            return False
        try:
            async with self._clients()[0].pipeline(transaction=False) as pipe:
                pipe.set(NAMESPACE + key, json.dumps(state, separators=(",", ":")), px=self._ttl_ms)
                pipe.publish(CHANNEL, f"{self._replica} {key}")
                await pipe.execute()
        except Exception as exc:  # any Redis failure degrades to local state
            await self._failed_command(exc)
            return False
        self._reached()
        return True

    async def watch(self, changed: Callable[[str], Awaitable[None]], lost: Callable[[], None]) -> None:
        while True:
            try:
                pubsub = self._clients()[1].pubsub(ignore_subscribe_messages=True)
                try:
                    await pubsub.subscribe(CHANNEL)
                    if not self.healthy:  # back after an outage: no pooled connection to the old server
                        await _quietly(self._clients()[0].connection_pool.disconnect())
                    self._reached()
                    lost()  # whatever changed before this subscription was not heard
                    async for message in pubsub.listen():
                        sender, _, key = bytes(message["data"]).decode(errors="replace").partition(" ")
                        if sender != self._replica and key:
                            await changed(key)
                finally:
                    with anyio.CancelScope(shield=True):
                        await _quietly(pubsub.aclose())
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:  # Redis went away: degrade, retry with backoff
                self._failed(exc)
                lost()
            await anyio.sleep(self._backoff)

    async def aclose(self) -> None:
        for client in (self._redis, self._listener):
            if client is not None:
                await _quietly(client.aclose())


async def _quietly(closing: Awaitable[Any]) -> None:
    try:
        await closing
    except Exception:  # closing a connection to a dead server: nothing to do about it
        log.debug("closing a Redis connection failed", exc_info=True)

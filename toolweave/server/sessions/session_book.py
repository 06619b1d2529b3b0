"""Per-client state: each session has its own published set and conversation context.

How a session is recognised across requests depends on the protocol era (see ``docs/gateway.md``):

* **Handshake era** (2024-11-05 … 2025-11-25, every transport): the SDK builds one ``Connection`` per
  client connection (stdio pipe, SSE stream, ``Mcp-Session-Id`` of streamable HTTP) and a fresh
  ``ServerSession`` wrapper per request around it. The key is stored in ``connection.state``, which the
  SDK documents as "per-connection scratch state; persists across requests". It ends with the
  connection (``connection.exit_stack``).
* **2026-07-28 era on a duplex stream** (stdio): every request gets a fresh ``Connection``, but all of
  them share the stream's notify-only outbound channel, so that object identifies the client.
* **2026-07-28 era on streamable HTTP**: each POST is self-contained, with no session id by design. A
  client that wants its own state, kept across its own reconnects and across replicas, sends
  ``_meta["io.toolweave/session"]`` (any string) on its requests. Otherwise the key is the envelope's
  ``clientInfo`` (name, version), the peer address and the client *process* the request comes from
  (``processes.py``: each ``server/discover`` begins one, a TCP connection stays with its process, and
  a request that cannot be placed while another copy of the app runs gets a set of its own), so two
  copies of one client app on one host never share a published set. Sessions without a connection to
  end them are dropped least-recently-seen first beyond ``MAX_SESSIONS``.

An authenticated caller's identity (``server/fronts/auth.py``) is part of every key, so two identities never
share a session; for them the 2026-era HTTP fallback is identity + client app + process, without the
peer address.

**Replicas** (``session_store_url``, ``shared_sessions.py``): 2026-era HTTP sessions named by the client
(``client-`` keys) can be kept in Redis as well, so any replica serves them; their state is written
through on change (``commit``) and re-read when another replica changed it. The others name one
connection or one client process as one replica saw it, and their counters are per process: they are
never shared.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave.server.fronts.auth import identity_of_request
from toolweave.server.fronts.processes import ClientProcesses, Domain, Peer
from toolweave.server.sessions.shared import RedisSessions, SharedSessions, state_key
from toolweave.server.turns.publishing import PublishedSet
from toolweave.settings import Settings

__all__ = [
    "PROCESSES",
    "RECENT_TURNS",
    "SESSION_META_KEY",
    "Session",
    "SessionStore",
    "follow_processes",
    "session_key",
]

SESSION_META_KEY = "io.toolweave/session"
"""Optional ``_meta`` key a 2026-era HTTP client may send to get a session of its own."""

_STATE_KEY = "toolweave.session"
_SHAREABLE = ("client-",)
"""Key kinds that name no connection and no process, so may move between replicas (2026-era HTTP)."""
MAX_SESSIONS = 256
RESYNC_S = 1.0
"""How often sessions changed while the shared store was unreachable are written back."""
RECENT_TURNS = 5
"""Turns (find_tools queries and host-reported user prompts) kept as the conversation's context."""

_counter = itertools.count(1)
# Outbound channel of a 2026-era duplex stream -> session key; weak so a closed stream frees it.
_outbound_keys: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
PROCESSES = ClientProcesses()
"""The client processes behind 2026-era HTTP requests that name no session (one gateway per process)."""


def _connection(ctx: ServerRequestContext[Any, Any]) -> Any:
    # ServerRequestContext exposes no connection; ServerSession keeps it in `_connection` (mcp 2.3).
    return ctx.session._connection


def session_key(ctx: ServerRequestContext[Any, Any], identity: str | None = None) -> str:
    """The key of the client session this request belongs to (see the module docstring).

    ``identity`` is the authenticated caller (None: unauthenticated); it prefixes the key.
    """
    key = _client_key(ctx, identity)
    return key if identity is None else f"{identity}|{key}"


def _client_key(ctx: ServerRequestContext[Any, Any], identity: str | None) -> str:
    conn = _connection(ctx)
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        key = conn.state.get(_STATE_KEY)
        if key is None:
            key = conn.state[_STATE_KEY] = f"conn-{next(_counter)}"
        return str(key)
    explicit = (ctx.meta or {}).get(SESSION_META_KEY)
    if isinstance(explicit, str) and explicit:
        return f"client-{explicit}"
    if conn.has_standalone_channel:
        try:
            key = _outbound_keys.get(conn.outbound)
            if key is None:
                key = _outbound_keys[conn.outbound] = f"stream-{next(_counter)}"
            return key
        except TypeError:  # an outbound that cannot be weakly referenced: fall through
            pass
    domain, peer = _unnamed_http(ctx, conn, identity)
    process = PROCESSES.process_for(domain, peer)
    _, who, host = domain
    return f"http-{who}#{process.label}" if identity is not None else f"http-{who}@{host}#{process.label}"


def _unnamed_http(
    ctx: ServerRequestContext[Any, Any], conn: Any, identity: str | None
) -> tuple[Domain, Peer]:
    """Whose processes a 2026-era HTTP request without a session id is one of, and its connection."""
    info = conn.client_params.client_info if conn.client_params is not None else None
    who = f"{info.name}/{info.version}" if info is not None else "anonymous"
    client = getattr(ctx.request, "client", None)
    host = getattr(client, "host", None) or "local"
    # authenticated: the identity names the caller wherever it connects from (a proxy's address is no name)
    domain = (identity or "", who, "" if identity is not None else host)
    return domain, (host, getattr(client, "port", None))


def _unnamed(ctx: ServerRequestContext[Any, Any]) -> tuple[Domain, Peer] | None:
    """Domain and connection of a 2026-era HTTP request that names no session; None for any other."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS or ctx.request is None:
        return None
    explicit = (ctx.meta or {}).get(SESSION_META_KEY)
    if isinstance(explicit, str) and explicit:
        return None
    conn = _connection(ctx)
    if conn.has_standalone_channel:
        return None
    identity = identity_of_request(ctx.request)
    return _unnamed_http(ctx, conn, identity.name if identity is not None else None)


async def follow_processes(ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
    """Server middleware (streamable HTTP): tell ``PROCESSES`` where each client process begins
    (``server/discover``) and which of its requests are in progress (a listen stream for its life)."""
    where = _unnamed(ctx) if ctx.request_id is not None else None
    if where is None:
        return await call_next(ctx)
    domain, peer = where
    discover = ctx.method == "server/discover"
    process = PROCESSES.discovered(domain, peer) if discover else PROCESSES.process_for(domain, peer)
    PROCESSES.started(domain, peer, process)
    try:
        return await call_next(ctx)
    finally:
        PROCESSES.finished(domain, peer, process)


@dataclass
class Session:
    """One client's state. A *turn* is a ``find_tools`` call, a host-reported prompt or a proxied call.

    Call arguments are never kept (they may hold secrets and nothing reads them); the conversation
    context is the recent turn texts, reset when the topic clearly shifts (``start_topic``).
    """

    key: str
    published: PublishedSet
    queries: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_TURNS))
    turn: int = 0
    identity: str = ""
    """Who this session belongs to (policy and audit); the default identity when unauthenticated."""
    signed_in: set[str] = field(default_factory=set)
    """Sources whose credential this session holds: a login or a tool taking a credential answered it
    without an error (``retrieval.credentials.signs_in``); searches walk no login for their tools."""
    connection: Any = None
    """The handshake-era connection (has ``send_tool_list_changed``); None in the 2026 era."""
    bound: bool = False
    """Whether the connection's teardown already removes this session."""
    notices: int = 0
    """list_changed notices sent to this session so far."""
    listed_notices: int = 0
    """``notices`` as of the latest list reply written to the client: equal means it has the current list."""
    client_lists: frozenset[str] = frozenset()
    """The tool ids of the latest list reply written to the client: what its own tool list holds."""
    list_settle_s: float = 0.0
    """How long after that reply an answer waits still (``notify.py``: 0 when it was written on the same
    wire as the answer)."""
    relists_on_notice: bool | None = None
    """Whether the client re-lists after a notice: None until known, True once a list reply answering a
    notice was written to it, False once a notice went unanswered by a re-list within the hold's bound
    (its answers are not held again until it re-lists after a notice; a re-list that comes only after
    the held answer went makes it unknown again, not known: it gets the short probe, never the bound)."""
    lists_no_more: bool = False
    """The client can send nothing more (its stdin ended): no re-list will come, no answer waits for one."""
    _list_written: anyio.Event | None = None
    _holding: int = 0
    """Answers waiting in ``wait_listed`` now."""
    shared: str | None = None
    """This session's key in the shared store (``state_key``); None: it lives in this process only."""
    stale: bool = True
    """Another replica may have changed it since this process last read or wrote the shared copy."""
    dirty: bool = False
    """Changed here while the shared store was unreachable: written (winning) once it is back."""
    _stored: dict[str, Any] | None = None

    def state(self) -> dict[str, Any]:
        """What other replicas need: published set, turn counter, conversation context (plain data)."""
        return {
            "published": self.published.state(),
            "standing": self.published.standing_state(),
            "turn": self.turn,
            "queries": list(self.queries),
            "signed_in": sorted(self.signed_in),
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Take over a state another replica saved (connection-bound bookkeeping stays as it is)."""
        standing = state.get("standing")
        self.published.restore(state.get("published") or [], standing if isinstance(standing, dict) else None)
        turn = state.get("turn")
        self.turn = turn if isinstance(turn, int) else self.turn
        self.queries.clear()
        self.queries.extend(str(q) for q in state.get("queries") or [])
        self.signed_in = {str(s) for s in state.get("signed_in") or []}

    def next_turn(self) -> int:
        self.turn += 1
        return self.turn

    def context(self) -> list[str]:
        """Earlier turns of this conversation, oldest first, for contextual retrieval."""
        return list(self.queries)

    def add_turn(self, text: str) -> None:
        """Remember ``text`` as the latest turn (a repeat of the latest is not added twice)."""
        if not self.queries or self.queries[-1] != text:
            self.queries.append(text)

    def start_topic(self) -> None:
        """The conversation moved on: earlier turns are no longer context."""
        self.queries.clear()

    def notice_sent(self) -> None:
        self.notices += 1

    def list_written(self, tool_ids: frozenset[str], notices: int, settle_s: float = 0.0) -> None:
        """A list reply holding ``tool_ids``, built when ``notices`` notices had been sent, was written
        to the client: its own list now holds them (a reply older than one already written changes
        nothing). Wakes the answers waiting for it (``wait_listed``)."""
        if notices < self.listed_notices:
            return
        if notices > self.listed_notices:  # the client re-listed after a notice
            if self.relists_on_notice is False and not self._holding:
                # ... only once the answer held for it had gone (a client that reads its answer before
                # its notices): not known to re-list while held, so it gets the probe again, never the
                # long bound, which it would wait out whole
                self.relists_on_notice = None
            else:
                self.relists_on_notice = True
        self.listed_notices = notices
        self.client_lists, self.list_settle_s = tool_ids, settle_s
        if self._list_written is not None:
            self._list_written.set()
            self._list_written = None

    def input_ended(self) -> None:
        """The client's input ended (``lists_no_more``): release the answers waiting for a re-list."""
        self.lists_no_more = True
        if self._list_written is not None:
            self._list_written.set()
            self._list_written = None

    def client_has(self, tool_ids: Collection[str]) -> bool:
        """Whether the client's list holds every one of ``tool_ids`` that is still published."""
        return all(t in self.client_lists or t not in self.published for t in tool_ids)

    async def wait_listed(self, tool_ids: Collection[str], timeout_s: float) -> bool:
        """Wait (at most ``timeout_s``) until a list reply holding ``tool_ids`` was written to the client.
        A re-list that lacks them (a list built before the change) does not end the wait. After a
        timeout the client is taken as one that does not re-list (``relists_on_notice``)."""
        self._holding += 1
        try:
            with anyio.move_on_after(timeout_s):
                while not self.client_has(tool_ids) and not self.lists_no_more:
                    if self._list_written is None:
                        self._list_written = anyio.Event()
                    await self._list_written.wait()
        finally:
            self._holding -= 1
        if self.client_has(tool_ids):
            return True
        if self.listed_notices < self.notices:  # no re-list after the latest notice reached it
            self.relists_on_notice = False
        return False


class SessionStore:
    """Sessions by key; connection-bound ones end with their connection, the rest are LRU-capped.

    With ``shared`` (Redis), shareable sessions are also kept there: read when first met or after
    another replica changed them, written through by ``commit``. Without it, everything is local.
    """

    def __init__(
        self,
        max_tools: int,
        pinned: tuple[str, ...],
        max_sessions: int = MAX_SESSIONS,
        shared: SharedSessions | None = None,
    ) -> None:
        self._max_tools = max_tools
        self._pinned = pinned
        self._max_sessions = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._shared = shared
        self._by_state_key: dict[str, Session] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> SessionStore:
        """In-process sessions, shared through Redis too when ``session_store_url`` is set."""
        url = settings.session_store_url
        shared = RedisSessions(url, settings.session_ttl_s) if url else None
        return cls(settings.publish.max_tools, tuple(settings.publish.pinned), shared=shared)

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Any:
        return iter(list(self._sessions.values()))

    def get(self, key: str) -> Session | None:
        return self._sessions.get(key)

    async def for_request(
        self, ctx: ServerRequestContext[Any, Any], identity: str | None = None, default_identity: str = ""
    ) -> Session:
        """The request's session, created on first sight (``identity``: the authenticated caller)."""
        key = session_key(ctx, identity)
        session = self._sessions.get(key)
        if session is None:
            session = Session(key, PublishedSet(self._max_tools, self._pinned))
            session.identity = identity or default_identity
            client_key = key[len(identity) + 1 :] if identity is not None else key
            if self._shared is not None and client_key.startswith(_SHAREABLE):
                session.shared = state_key(key)
                self._by_state_key[session.shared] = session
            self._sessions[key] = session
            self._trim()
        else:
            self._sessions.move_to_end(key)
        if session.shared is not None and session.stale:
            await self._refresh(session)
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and not session.bound:
            conn = _connection(ctx)
            session.connection = conn
            session.bound = True
            conn.exit_stack.callback(self.drop, key)
        return session

    def holds(self, session: Session) -> bool:
        """Whether ``session`` is still this store's own (not dropped, not shared with other replicas),
        seen now: what ``for_request`` would give its client without asking the shared store."""
        if session.shared is not None or self._sessions.get(session.key) is not session:
            return False
        self._sessions.move_to_end(session.key)
        return True

    async def _refresh(self, session: Session) -> None:
        """Read ``session`` from the shared store; local changes it missed win and are written."""
        assert self._shared is not None and session.shared is not None
        reachable, state = await self._shared.load(session.shared)
        if not reachable:
            return  # stays stale: re-read once the store is back
        session.stale = False
        if session.dirty or (state is None and session.turn > 0):
            # changed here while the store was away, or the store lost it (restart, expiry): the
            # store's copy is missing or older whatever this process wrote before, so write it again
            session.dirty = True
            await self.commit(session)
        elif state is not None:
            session.restore(state)
            session._stored = session.state()

    async def commit(self, session: Session) -> None:
        """Write ``session`` through to the shared store if it changed (no-op for local sessions)."""
        if self._shared is None or session.shared is None:
            return
        state = session.state()
        if state == session._stored and not session.dirty:
            return
        if await self._shared.save(session.shared, state):
            session._stored, session.dirty = state, False
        else:
            session.dirty = True

    async def watch(self, on_changed: Callable[[Session], Awaitable[None]] | None = None) -> None:
        """Follow changes other replicas make (runs until cancelled; returns at once without a shared
        store). ``on_changed(session)``: a session held here changed its published set elsewhere."""
        if self._shared is None:
            return

        async def follow(session: Session) -> None:
            """Read ``session`` again; tell ``on_changed`` when its published set changed elsewhere."""
            before = session.published.ids()
            await self._refresh(session)
            if on_changed is not None and session.published.ids() != before:
                await on_changed(session)

        async def changed(state_key: str) -> None:
            session = self._by_state_key.get(state_key)
            if session is None:
                return
            session.stale = True
            if on_changed is not None:
                await follow(session)

        resync = anyio.Event()

        def lost() -> None:
            for session in self._by_state_key.values():
                session.stale = True
            resync.set()

        async def keep_in_sync() -> None:
            """After a reconnect, read every held session again and write back those the store lost (a
            Redis restarted empty) or that changed here meanwhile; between reconnects, write the
            sessions changed while the store was unreachable. Nothing waits for a next request."""
            nonlocal resync
            while True:
                with anyio.move_on_after(RESYNC_S):
                    await resync.wait()
                reconnected = resync.is_set()
                if reconnected:
                    resync = anyio.Event()
                for session in list(self._by_state_key.values()):
                    # a change made elsewhere while this replica was not subscribed is told like one heard
                    if session.dirty or (reconnected and session.stale):
                        await follow(session)

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(keep_in_sync)
                await self._shared.watch(changed, lost)
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._shared.aclose()

    def drop(self, key: str) -> None:
        session = self._sessions.pop(key, None)
        if session is not None and session.shared is not None:
            self._by_state_key.pop(session.shared, None)

    def _trim(self) -> None:
        # Only unbound (2026-era HTTP) sessions pile up without an end; bound ones end with their connection.
        unbound = [k for k, s in self._sessions.items() if not s.bound]
        for key in unbound[: max(0, len(unbound) - self._max_sessions)]:
            self.drop(key)

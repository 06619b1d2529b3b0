"""What the HTTP front's ``find_tools`` answers offered, shown to the client that asked, before the gateway
takes over (``server/fronts/http_front.py``). Standard library only, like the front.

A ``find_tools`` the front answers from the ready table is replayed into the gateway, which publishes the
tools it offers into the client's session. Until then the client would list the meta-tools only: a
client that re-lists on ``list_changed`` (fast-agent, Claude Code) saw the tools only once the SDK had
loaded and the replay published them, many seconds later on a busy machine, and a 2026-era client did
not hear that notice at all (its listen stream is handed to the gateway after the replay). So, as the
stdio front does (``server/fronts/early.py``), the front shows what it offered at once:

* an answer that offers tools the client was not shown yet says ``tool_list_changed: true``, and the
  client hears ``notifications/tools/list_changed`` where its era carries it. Handshake era: on that
  answer's own response, an SSE event before the result (streamable HTTP lets a server send
  notifications that relate to a request on its response; the gateway's own notices travel on the
  session's GET stream, which only the gateway serves). 2026-07-28 era: on each listen stream of that
  client the front holds open (a notice anywhere else is not heard in that era);
* its ``tools/list`` then carries those tools after the meta-tools, in the table's order, as the
  gateway lists them from the same table while its registry opens (``Gateway._ready_tools``), so the
  replayed list is the same answer;
* in the 2026 era the answer itself waits until that client's next ``tools/list`` was answered (within
  ``FrontPolicy.relist_wait_s``; ``awaiting_list``), as the gateway holds its own
  (``server/turns/notify.py``): Claude Code sends its next model request as soon as it has the answer,
  with the tools it listed by then.

"The client" is what the gateway will call its session: a handshake-era session (the front's
``Mcp-Session-Id``); in the 2026 era the session a request names (``_meta["io.toolweave/session"]``),
else the client process behind it, told apart by the gateway's own rules (``processes.py``: each
``server/discover`` begins one, a connection stays with its process, nothing is guessed while another
copy of the app runs). Two clients never see each other's tools.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any

from toolweave.server.fronts import handshake
from toolweave.server.fronts.front_answers import Decision, Offered
from toolweave.server.fronts.http_wire import sse_event
from toolweave.server.fronts.processes import ClientProcesses, Domain, Peer, Process
from toolweave.server.turns import ready_index

__all__ = [
    "LIST_CHANGED",
    "OTHER_CONNECTION_SETTLE_S",
    "SESSION_META",
    "FrontClient",
    "Offers",
    "until_listed",
]

LIST_CHANGED = "notifications/tools/list_changed"
OTHER_CONNECTION_SETTLE_S = 0.01
"""``notify.OTHER_CONNECTION_SETTLE_S`` (a test keeps them equal): the held answer goes this much after the
list reply, which went out on another connection."""

SESSION_META = "io.toolweave/session"
"""``session_book.SESSION_META_KEY`` (a test keeps them equal): the SDK is not loaded here."""


@dataclass(eq=False)
class FrontClient:
    """Whom a request the front answers comes from (see the module docstring)."""

    key: str
    modern: bool
    session: str | None = None
    """The front's ``Mcp-Session-Id`` (handshake era)."""
    where: tuple[Domain, Peer, Process] | None = None
    """A 2026-era client process: its app and host, the request's connection, the process."""


@dataclass
class Offers:
    """Per client: the tools the front's answers offered, and the 2026-era listen streams it holds."""

    processes: ClientProcesses = field(default_factory=ClientProcesses)
    _shown: dict[str, dict[str, Offered]] = field(default_factory=dict)
    _streams: dict[str, dict[object, asyncio.Queue[dict[str, Any]]]] = field(default_factory=dict)
    _on_get_stream: set[str] = field(default_factory=set)
    _listing: dict[str, list[asyncio.Event]] = field(default_factory=dict)

    def client(self, scope: MutableMapping[str, Any], decision: Decision) -> FrontClient:
        """The client ``decision`` answers (a 2026-era ``server/discover`` begins a process)."""
        if decision.session is not None:
            return FrontClient(f"session-{decision.session}", modern=False, session=decision.session)
        message = decision.message
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        explicit = meta.get(SESSION_META)
        if isinstance(explicit, str) and explicit:
            return FrontClient(f"client-{explicit}", modern=True)
        info = meta.get(handshake.CLIENT_INFO_META)
        who = f"{info['name']}/{info['version']}" if isinstance(info, dict) else "anonymous"
        address = scope.get("client") or (None, None)
        host = address[0] or "local"
        domain, peer = ("", who, host), (host, address[1])
        if message.get("method") == "server/discover":
            process = self.processes.discovered(domain, peer)
        else:
            process = self.processes.process_for(domain, peer)
        return FrontClient(f"http-{who}@{host}#{process.label}", modern=True, where=(domain, peer, process))

    def answer(self, client: FrontClient, decision: Decision, always_load: bool) -> tuple[Decision, bytes]:
        """``decision`` as this client gets it, and what goes before its reply on its own response (an SSE
        event, or nothing): a ``tools/list`` carries the tools shown to the client; a ``find_tools`` says
        whether it offered new ones, which the client then hears about."""
        method = decision.message.get("method")
        shown = self._shown.get(client.key, {})
        if method == "tools/list" and shown and decision.reply is not None:
            result = decision.reply["result"]
            listed = [handshake.listed_ready_tool(o.entry, always_load, o.listed) for o in _in_order(shown)]
            return replace(decision, reply={"result": {**result, "tools": [*result["tools"], *listed]}}), b""
        if method != "tools/call" or decision.reply is None or "result" not in decision.reply:
            return decision, b""
        new = [o for o in decision.offered if o.id not in shown]
        self._shown.setdefault(client.key, {}).update((o.id, o) for o in new)
        result = decision.reply["result"]
        doc = {**result["structuredContent"], "tool_list_changed": bool(new)}
        decision = replace(decision, reply={"result": {**result, **ready_index.call_result(doc)}})
        if not new:
            return decision, b""
        if not client.modern:
            return decision, sse_event({"jsonrpc": "2.0", "method": LIST_CHANGED})
        self._to_streams(client)
        return decision, b""

    def awaiting_list(self, client: FrontClient) -> asyncio.Event | None:
        """For an answer that just offered ``client`` new tools: set once the client's next ``tools/list``
        was answered here (``listed``); None when the client cannot hear of them (not a 2026-era client
        with a listen stream here: handshake-era notices travel on the answer's own response)."""
        if not client.modern or not self._streams.get(client.key):
            return None
        event = asyncio.Event()
        self._listing.setdefault(client.key, []).append(event)
        return event

    def listed(self, client: FrontClient) -> None:
        """A ``tools/list`` reply to ``client`` was sent: its held answers may go."""
        for event in self._listing.pop(client.key, []):
            event.set()

    def shown_to(self, client: FrontClient) -> bool:
        """Whether the front's answers offered this client tools."""
        return bool(self._shown.get(client.key))

    def announce(self, client: FrontClient) -> None:
        """The gateway, taking the client over, lists or found otherwise than the front did (its registry
        opened meanwhile), and its own ``list_changed`` went nowhere (the client's streams are not its
        yet): the client hears one more, on the listen streams the front still holds (2026 era) or on
        its GET stream as soon as the gateway serves it (``on_get_stream``)."""
        if client.modern:
            self._to_streams(client)
        elif client.session is not None:
            self._on_get_stream.add(client.session)

    def on_get_stream(self, session: str) -> bool:
        """Whether the GET stream of the front's ``session`` begins with ``list_changed`` (once)."""
        if session not in self._on_get_stream:
            return False
        self._on_get_stream.discard(session)
        return True

    def _to_streams(self, client: FrontClient) -> None:
        for sid, stream in self._streams.get(client.key, {}).items():
            meta = {handshake.SUBSCRIPTION_ID_META: sid}
            stream.put_nowait({"jsonrpc": "2.0", "method": LIST_CHANGED, "params": {"_meta": meta}})

    def listening(self, client: FrontClient, sid: object) -> asyncio.Queue[dict[str, Any]]:
        """A listen stream of ``client`` opened (acknowledged by the front): the notices for it. It is
        a request in progress of its process, as for the gateway, until ``ended``."""
        stream: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._streams.setdefault(client.key, {})[sid] = stream
        if client.where is not None:
            self.processes.started(*client.where)
        return stream

    def ended(self, client: FrontClient, sid: object) -> None:
        """The front's part of that listen stream is over (the gateway serves it now, or it closed)."""
        streams = self._streams.get(client.key, {})
        streams.pop(sid, None)
        if not streams:
            self._streams.pop(client.key, None)
        if client.where is not None:
            self.processes.finished(*client.where)


async def until_listed(relist: asyncio.Event, gateway_ready: asyncio.Event, bound_s: float) -> None:
    """Wait until the client re-listed (``Offers.awaiting_list``; then a moment more: the list went out on
    another connection), the gateway took over (it answers the list), or ``bound_s`` passed."""
    waits = {asyncio.ensure_future(relist.wait()), asyncio.ensure_future(gateway_ready.wait())}
    try:
        await asyncio.wait(waits, timeout=bound_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
    if relist.is_set():
        await asyncio.sleep(OTHER_CONNECTION_SETTLE_S)


def _in_order(shown: dict[str, Offered]) -> list[Offered]:
    return sorted(shown.values(), key=lambda o: o.position)

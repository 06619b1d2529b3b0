"""The call path: one proxied call, from the name a client used to what follows a success.

``CallPath.call`` resolves the name (published name or full id), answers hidden, stale and unknown
tools alike, waits out a backend's first connection, proxies through ``Proxy`` (schema check, timeout,
result limits) and commits the session. A successful call is reported in exactly one place,
``CallPath._succeeded``, with everything known about it (``ProxiedCall``): the likely next tools are
published before the reply (a client that re-lists on the notice lists them with the answer), and the
call is queued for what only learns from it (``after_reply.py``: run once the reply was written), where
the conversation's request becomes the tool's usage example and the traffic observer (``traffic.py``)
matches its arguments against the session's earlier results and holds its result's values (as keyed
hashes) for later calls. Whatever else should learn from traffic is added to ``CallPath._learn``, not
to the dispatch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext

from toolweave.call_errors import ECHO_NAME_CHARS, echo_name, tool_error_result
from toolweave.names import name_of, name_words
from toolweave.records import ToolRecord
from toolweave.retrieval.credentials import signs_in
from toolweave.server.calls.after_reply import AfterReply
from toolweave.server.calls.audit import AuditLog
from toolweave.server.calls.back_channel import NO_BACK_CHANNEL, BackChannel
from toolweave.server.calls.metrics import GatewayMetrics
from toolweave.server.calls.proxy import Proxy
from toolweave.server.calls.traffic import TrafficObserver
from toolweave.server.served import Served
from toolweave.server.sessions.session_book import Session, SessionStore
from toolweave.server.sources import SourceSync
from toolweave.server.turns.engine import TurnEngine
from toolweave.server.turns.meta_tools import CALL_TOOL, FIND_TOOLS
from toolweave.server.turns.names import NameMap
from toolweave.server.turns.notify import WrittenReplies
from toolweave.tracing import span

__all__ = [
    "NO_BACK_CHANNEL",
    "CallPath",
    "ProxiedCall",
    "observe_turn",
    "outcome",
]

log = logging.getLogger(__name__)


_MEANT_SHOWN = 5
"""At most this many tools a misspelt name may mean are named in its error."""
_CLOSEST_SHOWN = 3
"""How many tools an unknown name's error suggests by its words."""
_CLOSEST_WAIT_S = 1.0
"""How long that search may take before the error goes without it (the embedding model may still load)."""


@dataclass(frozen=True)
class ProxiedCall:
    """A proxied call that succeeded, as ``CallPath._succeeded`` reports it. The arguments live only as
    long as the report (queued until its reply is written, at most ``after_reply.MAX_PENDING`` of them):
    they may hold secrets, so nothing keeps or logs them."""

    session: Session
    tool: ToolRecord
    arguments: Mapping[str, Any]
    result: types.CallToolResult
    turn: int
    request: str | None = None
    """The conversation's latest request when the call was made (learned from after the reply, when a
    later ``find_tools`` may have moved the session on)."""


class CallPath:
    """Proxies calls of registry tools for the gateway's sessions (module docstring)."""

    def __init__(
        self,
        *,
        served: Served,
        sources: SourceSync,
        turns: TurnEngine,
        sessions: SessionStore,
        proxy: Proxy,
        names: NameMap,
    ) -> None:
        self.served = served
        self.sources = sources
        self.turns = turns
        self.sessions = sessions
        self.proxy = proxy
        self.names = names
        self.traffic = TrafficObserver()
        self.after_reply: AfterReply[ProxiedCall] = AfterReply(self._learn)
        """Successes whose learning waits for their reply's write: whoever sends the reply runs it."""
        self._signing: dict[str, tuple[ToolRecord, bool]] = {}
        """Tool id → (its record, whether a success of it signs a session in): read on every success."""

    def _signs_in(self, record: ToolRecord) -> bool:
        """``credentials.signs_in`` for ``record``, worked out once per record (a changed tool is a new
        record): every successful call asks, and most tools never sign anything in."""
        known = self._signing.get(record.id)
        if known is None or known[0] is not record:
            known = self._signing[record.id] = (record, signs_in(record.id, record.input_schema))
        return known[1]

    def record_named(self, name: str) -> ToolRecord | None:
        """The tool a client means by ``name``: its published name or its full id."""
        registry = self.served.registry
        record = registry.find(name)
        if record is None and (tool_id := self.names.tool_id(name)) is not None:
            record = registry.find(tool_id)
        return record

    def _loosely_named(self, session: Session, name: str) -> tuple[ToolRecord | None, list[str]]:
        """The one tool ``session`` may call that ``name`` means once case and separators are set aside
        (``time.get_current_time``, ``getCurrentTime``, the backend's own ``get_current_time``: models
        drop or respell the source part), else None and the published names of every such tool (none,
        or several: the client chooses). Tools hidden from ``session`` are neither taken nor named."""
        registry, guard = self.served.registry, self.served.guard
        allowed = [
            record
            for tool_id in registry.loosely_named(name)
            if (record := registry.find(tool_id)) is not None and guard.allows(session.identity, record)
        ]
        if len(allowed) == 1:
            log.debug("tools/call %r taken as %r", name[:ECHO_NAME_CHARS], allowed[0].id)
            return allowed[0], []
        return None, [self.names.name(record.id) for record in allowed]

    async def _unknown(self, session: Session, name: str, meant: list[str]) -> types.CallToolResult:
        """The ``unknown_tool`` error for ``name``: the tools it may mean (``_loosely_named``), else the few
        its words rank first among those ``session`` may call, when a search answers within
        ``_CLOSEST_WAIT_S`` (a model misremembers names: ``get_time`` for ``get_current_time``)."""
        text = name_words(name)
        words = set(text.split())
        if not meant and words and self.served.is_ready():
            with anyio.move_on_after(_CLOSEST_WAIT_S):
                ranked = await self.turns.closest(session, text, _CLOSEST_SHOWN * 3)
                # only tools whose own name shares a word with it: a name of none (``nope``) gets none
                closest = [t for t in ranked if words & set(name_words(name_of(t)).split())][:_CLOSEST_SHOWN]
                if closest:
                    names = ", ".join(self.names.name(tool_id) for tool_id in closest)
                    hint = f"the closest tools are {names}: call one by name, or use"
                    return self._unknown_error(name, hint)
        hint = f"it may mean {', '.join(meant[:_MEANT_SHOWN])}; or use" if meant else "use"
        return self._unknown_error(name, hint)

    @staticmethod
    def _unknown_error(name: str, hint: str) -> types.CallToolResult:
        return tool_error_result(
            "unknown_tool",
            f"no tool named {echo_name(name)}; {hint} {FIND_TOOLS} to search for the tool you need",
            tool=name[:ECHO_NAME_CHARS],
        )

    async def call(
        self, session: Session, name: str, arguments: Any, back: BackChannel = NO_BACK_CHANNEL
    ) -> types.CallToolResult:
        """Call the tool ``name`` with ``arguments`` for ``session``; every failure is an error result.
        ``back``: where the upstream's progress and requests to the client go (``back_channel`` of the
        client's request)."""
        with span("call", tool=name[:128], identity=session.identity) as current:
            result = await self._call(session, name, arguments, back)
            if current is not None:
                current.set_attribute("toolweave.outcome", outcome(result))
            return result

    async def _call(
        self, session: Session, name: str, arguments: Any, back: BackChannel
    ) -> types.CallToolResult:
        record = self.record_named(name)
        if record is None:
            # A client may know the name from an earlier session while its upstream is still connecting.
            await self.sources.first_connections(for_call=True)
            record = self.record_named(name)
        if record is not None and not self.served.guard.allows(session.identity, record):
            record = None  # hidden by policy or quarantine: answered exactly like a missing tool
        if record is None:
            record, meant = self._loosely_named(session, name)
            if record is None:
                return await self._unknown(session, name, meant)
        if not self.sources.serves(record.source):
            return tool_error_result(
                "unknown_tool",
                f"{echo_name(name)} belongs to {record.source!r}, which this gateway does not serve",
                tool=name[:ECHO_NAME_CHARS],
            )
        await self.sources.connected_once(record.source)
        turn = session.next_turn()
        session.published.touch(record.id, turn)
        # the arguments as the tool gets them (a "5" read as 5): what the call teaches is about those
        arguments, refused = self.proxy.checked(record, arguments)
        result = refused or await self.proxy.send(
            record, arguments, sampler=back.sampler, elicitor=back.elicitor, progress=back.progress
        )
        if not (result.is_error or record.source in session.signed_in) and self._signs_in(record):
            session.signed_in.add(record.source)  # its logins are behind it (committed with the turn)
        await self.sessions.commit(session)
        if not result.is_error:
            request = session.queries[-1] if session.queries else None
            await self._succeeded(ProxiedCall(session, record, arguments, result, turn, request))
        return result

    async def _succeeded(self, call: ProxiedCall) -> None:
        """What follows a successful call (the one place a success is reported): its next steps now,
        what it teaches once its reply is written (``after_reply``). Queued first: a call cancelled
        while its next steps wait for the client's re-list still taught what it did."""
        self.after_reply.add(call)
        await self.turns.next_steps(call.session, call.tool, call.turn)

    def learn_after(self, ctx: ServerRequestContext[Any, Any] | None) -> None:
        """Learn from the successes queued so far once the reply to the request ``ctx`` was written
        (``after_reply``): on the loop's turn after the wire reports it, or after the turn that sent it
        where the wire cannot say. ``ctx`` None: the caller writes its reply itself and then runs
        ``after_reply.run`` (the stdio relay)."""
        if ctx is None or not self.after_reply:
            return
        replies = WrittenReplies.of(ctx.request)
        if replies is None or ctx.request_id is None:
            self.after_reply.run_soon()
        else:
            replies.after(ctx.request_id, self.after_reply.run_soon)

    def _learn(self, call: ProxiedCall) -> None:
        """What a successful call teaches, after its reply (``AfterReply``), in the order calls succeeded."""
        registry, tool_id = self.served.registry, call.tool.id
        if call.request is not None:  # Tool2Vec: the conversation's latest request led to this tool
            # an append to an in-memory buffer (the flusher writes it): cheaper than a worker-thread hop
            registry.record_usage(tool_id, call.request)
        # value flow between calls: a few microseconds of hashing, then an append to the registry's buffer
        private = registry.is_private(tool_id)
        sightings = self.traffic.observe(
            call.session.key, tool_id, call.arguments, call.result, call.turn, private=private
        )
        if sightings:
            registry.record_sightings(sightings)


def outcome(result: types.CallToolResult) -> str:
    """How a call ended, for metrics, audit and traces: ``ok`` or the error result's code."""
    if not result.is_error:
        return "ok"
    error = (result.structured_content or {}).get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else "tool_error"


def observe_turn(
    metrics: GatewayMetrics,
    audit: AuditLog | None,
    known: Callable[[str], bool],
    session: Session | None,
    name: str,
    arguments: Mapping[str, Any],
    result: types.CallToolResult | None,
    elapsed: float,
) -> None:
    """Metrics and audit line of one ``tools/call`` turn (``result`` None: cancelled); ``known``: whether
    a tool name may label a metric. Never raises: observing must not break serving."""
    try:
        kind = "find_tools" if name == FIND_TOOLS else "call"
        tool, args = name, arguments
        if name == CALL_TOOL and isinstance(arguments.get("name"), str):
            tool, inner = arguments["name"], arguments.get("arguments")
            args = inner if isinstance(inner, Mapping) else {}
        ended = "cancelled" if result is None else outcome(result)
        metrics.turn(kind, tool if known(tool) else "(unknown)", ended, elapsed)
        if kind == "find_tools" and session is not None:
            metrics.published_size.observe(len(session.published))
        if audit is not None:
            if kind == "find_tools":
                args = {k: (str(v)[:80] if k == "query" else v) for k, v in arguments.items()}
            audit.record(
                kind=kind,
                identity=session.identity if session else "?",
                session=session.key if session else "?",
                tool=tool[:128],
                outcome=ended,
                latency_s=elapsed,
                arguments=args,
            )
    except Exception:  # bookkeeping must never fail the call
        log.exception("could not record metrics/audit for %s", name)

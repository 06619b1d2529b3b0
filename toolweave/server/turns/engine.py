"""The turn engine: what one turn of a conversation publishes.

A turn is a ``find_tools`` call, a host-reported prompt (``hear_turn``: a hook or ``toolweave turn``)
or a successful proxied call. ``TurnEngine.retrieve_turn`` retrieves on the turn's text with the
conversation as context (dropped when the topic shifts), answers repeats from the ``find_tools``
cache, publishes into the session's set, and notifies the client and holds the answer until it
re-listed (bounded), so that the answer reaches a client that already lists the new tools. After a
successful call, ``next_steps`` publishes the few tools most likely to come next.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from toolweave.errors import ServerError
from toolweave.records import ToolRecord
from toolweave.retrieval.pipeline import retrieve_tools
from toolweave.retrieval.turns import (
    asked_steps,
    by_request_act,
    conversation_context,
    evidence_order,
    named_source,
    next_steps,
    part_order,
    request_parts,
    served_part,
    topic_shifted,
)
from toolweave.server.served import Served
from toolweave.server.sessions.session_book import Session, SessionStore
from toolweave.server.sources import SourceSync
from toolweave.server.turns.find_cache import FindCache
from toolweave.server.turns.meta_tools import FoundTool
from toolweave.server.turns.names import NameMap
from toolweave.server.turns.notify import Notifier
from toolweave.settings import RetrievalSettings, Settings
from toolweave.tracing import span

if TYPE_CHECKING:  # the registry's types come with it, after the handshake
    from toolweave.retrieval.results import RankedTool

__all__ = ["MAX_QUERY_CHARS", "TurnEngine"]

log = logging.getLogger(__name__)

SESSION_WAIT_S = 5.0
"""How long a host's turn waits for the first client session of a gateway that has none yet."""

MAX_QUERY_CHARS = 4000
"""Longer find_tools queries and host turns are cut to this many characters before retrieval."""


class TurnEngine:
    """Turns of every session: retrieve, publish, notify and hold; next steps after a call."""

    def __init__(
        self,
        settings: Settings,
        *,
        served: Served,
        sources: SourceSync,
        sessions: SessionStore,
        notifier: Notifier,
        names: NameMap,
        find_cache: FindCache[Any],
    ) -> None:
        self.settings = settings
        self.served = served
        self.sources = sources
        self.sessions = sessions
        self.notifier = notifier
        self.names = names
        self.find_cache = find_cache
        self._searching = 0  # find_tools searches computing now (on the event loop: no lock needed)
        self._pending_turn: _PendingTurn | None = None
        self._parts: tuple[str, list[str]] = ("", [])
        """The latest request and its parts (``request_parts``): every call of a request asks again."""

    # -- find_tools --------------------------------------------------------------------------------------
    async def find_tools(self, session: Session, query: str, k: int | None) -> tuple[list[FoundTool], bool]:
        """A ``find_tools`` turn (``query`` stripped, not blank, cut to ``MAX_QUERY_CHARS``; ``k`` in
        range): the tools found, and whether the session's published set changed."""
        await self.sources.first_connections()
        params = self.settings.retrieval
        if k is not None:
            params = params.model_copy(update={"final_k": k, "top_k": min(params.top_k, k)})
        return await self.retrieve_turn(session, query, params)

    async def closest(self, session: Session, text: str, k: int) -> list[str]:
        """The ids of the ``k`` tools ``text`` ranks first that ``session`` may call, as ``find_tools``
        ranks them but without the conversation, publishing or remembering anything: the tools an
        ``unknown_tool`` error suggests (``call_path``)."""
        top_k = min(self.settings.retrieval.top_k, k)
        params = self.settings.retrieval.model_copy(update={"final_k": k, "top_k": top_k, "decompose": "off"})
        params, exclude = self._scope(session, params)
        ranked = await self._cached_search(text, params, exclude, (), frozenset(session.signed_in))
        return [found.record.id for found in self._allowed(session, ranked)[:k]]

    def _scope(
        self, session: Session, params: RetrievalSettings
    ) -> tuple[RetrievalSettings, Collection[str]]:
        """``params`` for ``session``'s search, and the sources it leaves out: those down or stale, and
        those its identity may not see."""
        registry, guard = self.served.registry, self.served.guard
        exclude = self.sources.excluded_sources()
        if guard.hides_any(session.identity):
            # Hidden tools are cut after ranking: ask for more so the answer keeps its length.
            exclude = exclude | guard.denied_sources(session.identity, registry.sources())
            params = params.model_copy(update={"final_k": min(params.final_k * 2 + 10, 500)})
        return params, exclude

    def _allowed(self, session: Session, ranked: Sequence[RankedTool]) -> list[FoundTool]:
        """``ranked``, in order, less what ``session``'s identity may not see."""
        registry, guard = self.served.registry, self.served.guard
        return [
            FoundTool(rec, r)
            for r in ranked
            if (rec := registry.find(r.tool_id)) is not None and guard.allows(session.identity, rec)
        ]

    # -- host turns --------------------------------------------------------------------------------------
    async def hear_turn(
        self, text: str, session_key: str | None = None, *, first_session: bool = False
    ) -> dict[str, Any]:
        """A host reports the user's turn: retrieve on the conversation, publish and notify each chosen
        session before the model's first request, and return once each has re-listed (bounded by
        ``publish.relist_wait_ms``). ``session_key`` picks one: an ``Mcp-Session-Id``, the
        ``_meta["io.toolweave/session"]`` value a 2026-era client sends, or a gateway session key;
        without it, every session (a stdio gateway has exactly one). ``first_session``: with no session
        yet, the turn is for the first one to come (only for the host that spawned this stdio gateway:
        on HTTP that could be anybody's)."""
        text = text.strip()[:MAX_QUERY_CHARS]
        if not text:
            raise ServerError("the turn text is empty")
        if not await self.served.wait():
            raise ServerError(self.served.error or "the tool registry is still opening; try again shortly")
        await self.sources.first_connections()
        sessions = [s for s in self.sessions if session_key is None or _is_session(s, session_key)]
        if not sessions and session_key is None and first_session:
            return await self._turn_for_first_session(text)
        report: dict[str, Any] = {"sessions": []}
        for session in sessions:
            found, changed = await self.retrieve_turn(session, text, self.settings.retrieval)
            report["sessions"].append(self._session_report(session, found, changed))
        return report

    async def _turn_for_first_session(self, text: str) -> dict[str, Any]:
        """A host ran its prompt hook while it still connects to this (stdio) gateway: the turn is for
        the session about to start. Its first ``tools/list`` applies the turn before it is answered, so
        that first list already carries the tools (a notice now could reach nobody)."""
        pending = _PendingTurn(text)
        self._pending_turn = pending
        with anyio.move_on_after(SESSION_WAIT_S):
            await pending.done.wait()
        if self._pending_turn is pending:
            self._pending_turn = None
        return {"sessions": pending.sessions}

    def has_pending_turn(self) -> bool:
        """A host's turn waits for the first session (and the registry is open to apply it)."""
        return self._pending_turn is not None and self.served.is_ready()

    async def apply_pending_turn(self, session: Session) -> None:
        """``session`` is listing: apply the host's turn that waited for it first (no notice: the list
        being answered carries the tools)."""
        pending, self._pending_turn = self._pending_turn, None
        if pending is None:
            return
        found, changed = await self.retrieve_turn(
            session, pending.text, self.settings.retrieval, announce=False
        )
        pending.sessions.append(self._session_report(session, found, changed))
        pending.done.set()

    def _session_report(self, session: Session, found: list[FoundTool], changed: bool) -> dict[str, Any]:
        return {
            "session": session.key,
            "tool_list_changed": changed,
            "found": [self.names.name(f.record.id) for f in found],
        }

    # -- one turn ----------------------------------------------------------------------------------------
    async def retrieve_turn(
        self, session: Session, text: str, params: RetrievalSettings, *, announce: bool = True
    ) -> tuple[list[FoundTool], bool]:
        """One turn of the conversation: retrieve with its context, publish, notify, hold until re-listed."""
        registry = self.served.registry
        # The same text again must give the same answer, so it is never its own context.
        context = [q for q in session.context() if q != text]
        moved = bool(context) and await self._topic_shifted(context, text)
        if moved:
            session.start_topic()
            context = []
        context = conversation_context(text, context)
        wanted = params.final_k
        params, exclude = self._scope(session, params)
        signed_in = frozenset(session.signed_in)
        if self._sheds_decomposition(params) and not self.find_cache.holds(
            _search_key(text, context, params, exclude, signed_in)
        ):
            params = params.model_copy(update={"decompose": "off"})  # cached under its own key
        ranked = await self._cached_search(text, params, exclude, context, signed_in)
        found = self._allowed(session, ranked)[:wanted]
        turn = session.next_turn()
        # below the relevance floor: listed in the answer (callable via call_tool), not published
        # a published tool whose server is out of the search (down, stale) could not be chosen: it stays
        unseen = [
            t for t in session.published.ids() if (rec := registry.find(t)) is None or rec.source in exclude
        ]
        change = session.published.select(
            [f.record.id for f in found if f.ranked.publish], turn, topic_moved=moved, unseen=unseen
        )
        session.add_turn(text)
        await self.sessions.commit(session)  # before the notice: the re-list may reach another replica
        if change.changed:
            log.info("%s: +%s -%s", session.key, list(change.added), list(change.evicted))
        # also when an earlier turn's notice or hold was cut short (a start-up bound): the client's list
        # still lacks what this answer names
        if announce and (change.changed or self.notifier.behind(session)):
            await self.notify_and_hold(session)
        return found, change.changed

    def _sheds_decomposition(self, params: RetrievalSettings) -> bool:
        """Whether a search now skips query decomposition: so many are computing that CPU is the queue
        (``Settings.shed_decomposition_at``; one client's turns never get there)."""
        limit = self.settings.shed_decomposition_at
        return params.decompose != "off" and limit > 0 and self._searching >= limit

    async def _cached_search(
        self,
        text: str,
        params: RetrievalSettings,
        exclude: Collection[str],
        context: Sequence[str],
        signed_in: frozenset[str],
    ) -> list[RankedTool]:
        """The ranking of ``text`` from the find cache, searched on a miss (a turn and a request's parts
        share it)."""
        key = _search_key(text, context, params, exclude, signed_in)
        search = partial(self._search, text, params, exclude, context, signed_in)
        ranked: list[RankedTool] = await self.find_cache.get(key, search)
        return ranked

    async def _search(
        self,
        text: str,
        params: RetrievalSettings,
        exclude: Collection[str],
        context: Sequence[str],
        signed_in: frozenset[str],
    ) -> list[RankedTool]:
        self._searching += 1
        try:
            # Abandoned on cancel: retrieval is pure, and the start-up bound (``server/turns/starting.py``)
            # must be able to answer while the thread still waits for the embedding model to load.
            return await anyio.to_thread.run_sync(
                partial(self._retrieve, text, params, exclude, context, signed_in),
                abandon_on_cancel=True,
            )
        finally:
            self._searching -= 1

    def _retrieve(
        self,
        text: str,
        params: RetrievalSettings,
        exclude: Collection[str],
        context: Sequence[str],
        signed_in: frozenset[str],
    ) -> list[RankedTool]:
        """Retrieval over the registry (in a worker thread). The retrieve span holds the registry's search
        span; what is left of it is fusion, floor and the walk (retrieval itself imports no tracing)."""
        with span("retrieve", method=params.method, top_k=params.top_k, final_k=params.final_k):
            return retrieve_tools(
                self.served.registry,
                text,
                params,
                exclude_sources=exclude,
                context=context,
                signed_in=signed_in,
            )

    async def _topic_shifted(self, context: list[str], text: str) -> bool:
        """Whether ``text`` is unrelated to the conversation so far (``retrieval.turns.topic_shifted``)."""
        texts = [*context, text]
        # Usually every text was embedded before (the context by earlier turns, a repeated question by
        # earlier sessions): then no worker-thread hop, which costs more than the arithmetic.
        embedder = self.served.registry.embedder
        vectors = embedder.cached_queries(texts)
        if vectors is None:
            try:
                vectors = await anyio.to_thread.run_sync(
                    embedder.embed_queries, texts, abandon_on_cancel=True
                )
            except Exception:  # retrieval itself reports embedder problems; keep the context meanwhile
                return False
        *earlier, latest = vectors
        return topic_shifted(earlier, latest)

    async def notify_and_hold(self, session: Session) -> None:
        """Notify ``session`` and hold the answer until a list reply holding its published tools was
        written to the client (bounded: ``Notifier.hold``)."""
        await self.notifier.tools_changed(session)
        publish = self.settings.publish
        ids, bound_s, probe_s = (
            session.published.ids(),
            publish.relist_wait_ms / 1000,
            publish.relist_probe_ms / 1000,
        )
        await self.notifier.hold(session, ids, bound_s, probe_s)

    # -- after a call ------------------------------------------------------------------------------------
    async def next_steps(self, session: Session, record: ToolRecord, turn: int) -> None:
        """Publish the tools most likely to follow a call of ``record``, into the set's free room: the
        called tool itself when the client reached it through ``call_tool`` (it is in use, and the same
        tool often comes again: ``cd`` from folder to folder), then at most ``NEXT_STEPS`` next steps, the
        rest of the request first and edge evidence second (``toolweave.retrieval.turns``): the best
        tool of a part of the request that no published tool serves yet joins into free room, the
        others only while the set holds fewer tools than one answer publishes (``final_k``,
        ``asked_steps``)."""
        parts = await self._rest_of_request(session, record)
        evident = self._evidence_next(record)
        if not parts and not evident and record.id in session.published:
            return  # nothing to suggest (a one-part request, no edge evidence): the usual call
        registry, guard = self.served.registry, self.served.guard
        excluded = self.sources.excluded_sources()

        def publishable(tool_id: str) -> bool:
            dep = registry.find(tool_id)
            return (
                tool_id not in session.published
                and dep is not None
                and dep.source not in excluded
                and guard.allows(session.identity, dep)
            )

        rest = [[t for t in part if t != record.id and publishable(t)] for part in parts]
        evidence = [t for t in evident if t != record.id and publishable(t)]
        used = [record.id] if publishable(record.id) else []
        steps = next_steps(rest, evidence)
        asked = asked_steps(steps, parts)
        # the tool in use and the best tool of a part nothing published serves yet join into free room;
        # the other steps only fill the set up to one answer's size
        change = session.published.suggest(
            [*used, *steps], turn, up_to=self.settings.retrieval.final_k, beyond={*used, *asked}
        )
        if change.changed:
            await self.sessions.commit(session)
            log.info("%s: next steps after %s: +%s", session.key, record.id, list(change.added))
            await self.notify_and_hold(session)

    def _evidence_next(self, record: ToolRecord) -> list[str]:
        """Tools that follow ``record`` by traffic or by the graph, most confident first, above the bar."""
        kinds = self.settings.retrieval.edge_kinds
        if not kinds:
            return []
        registry = self.served.registry
        return evidence_order(
            registry.next_steps(record.id),
            registry.dependents(record.id, kinds),
            kinds,
            self.settings.infer_min_confidence,
        )

    async def _rest_of_request(self, session: Session, record: ToolRecord) -> list[list[str]]:
        """The current turn's other parts once ``record`` served one of them (``retrieval.turns``), in the
        order they come next, each part's publishable hits ranked alone (cached like a find_tools) and
        ordered by the act the part asks for. Nothing for a request of one part, or on a registry too
        large to hold its vectors in memory."""
        if not session.queries:
            return []
        request = session.queries[-1]
        if self._parts[0] != request:
            self._parts = (request, request_parts(request))
        parts = self._parts[1]
        registry = self.served.registry
        if not parts or len(registry) >= self.settings.vector_index_threshold:
            return []  # a request of one part (the usual): no vectors to fetch
        vectors = registry.vectors()
        if record.id not in vectors:
            return []
        embedder = registry.embedder
        part_vectors = embedder.cached_queries(parts)
        if part_vectors is None:
            part_vectors = await anyio.to_thread.run_sync(
                embedder.embed_queries, parts, abandon_on_cancel=True
            )
        tool_vector = vectors[record.id]
        served = served_part([float(v @ tool_vector) for v in part_vectors])
        params = self.settings.retrieval.model_copy(update={"decompose": "off"})
        exclude = self.sources.excluded_sources()
        sources = {t.partition("__")[0] for t in vectors}  # ToolRecord.id is ``<source>__<name>``
        signed_in = frozenset(session.signed_in)
        out: list[list[str]] = []
        for n in part_order(len(parts), served):
            part = parts[n]
            ranked = await self._cached_search(part, params, exclude, (), signed_in)
            hits = [r.tool_id for r in ranked if r.publish]
            named = named_source(part, sources)
            best = next((t for t in vectors if t.startswith(f"{named}__")), None) if named else None
            best = best or (hits[0] if hits else None)
            subject = self._subject(best, part_vectors[n], vectors) if best else None
            out.append(by_request_act(part, hits, subject, named=named))
        return out

    def _subject(self, best: str, part_vector: Any, vectors: Mapping[str, Any]) -> list[str]:
        """The tools of ``best``'s server, closest to the part first: where the act the part asks for is
        looked for (``retrieval.turns.by_request_act``)."""
        record = self.served.registry.find(best)
        if record is None:
            return []
        prefix = record.source + "__"
        siblings = [t for t in vectors if t.startswith(prefix)]
        return sorted(siblings, key=lambda t: -float(vectors[t] @ part_vector))


@dataclass
class _PendingTurn:
    """A host's turn waiting for the gateway's first client session."""

    text: str
    done: anyio.Event = field(default_factory=anyio.Event)
    sessions: list[dict[str, Any]] = field(default_factory=list)


def _is_session(session: Session, ref: str) -> bool:
    connection_id = getattr(session.connection, "session_id", None)
    return ref in (session.key, connection_id) or session.key == f"client-{ref}"


def _search_key(
    text: str,
    context: Sequence[str],
    params: RetrievalSettings,
    exclude: Collection[str],
    signed_in: frozenset[str],
) -> Hashable:
    """The find cache's key: everything a ranking is a function of besides the registry snapshot."""
    return (text, tuple(context), params.model_dump_json(), frozenset(exclude), signed_in)

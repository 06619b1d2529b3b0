"""A ``find_tools`` that comes while the gateway starts is answered at once from the ready table, or
else within a bound, never when start-up is over.

The gateway answers the handshake and ``tools/list`` at once (``server/fronts/early.py``) and opens its
registry, loads its embedding model and connects its upstreams in the background: seconds, tens of
them on a busy machine. On a registry that a gateway served before, the tool table it left beside the
registry (``server/turns/ready_index.py``) answers ``find_tools`` meanwhile: BM25 over the tools' texts, an
ordinary answer whose tools are published into the session as any answer's are (``tools/list`` shows
them from the same table until the registry is open). ``keep_ready_table`` leaves that table, and
rewrites it when the registry's tools change.

Without a table (a registry's first start, an object store), ``find_tools`` gets
``startup_call_wait_s``: answered in that time, it is answered as ever; otherwise it is dropped (it was
still waiting: nothing was searched or published) and answered as when nothing matched, with a note to
call again, which a model acts on. The bound counts from the request's arrival: one an early front
(stdio's or HTTP's) kept while the SDK loaded carries that time. Not an error: pydantic-ai counts a
tool error against its one retry.

Only ``find_tools``: a proxied call may already have reached its upstream when the bound ends, and
dropping it then could run a side effect twice (the model would call again); it waits for its
upstream within its own budget. Once start-up is over nothing is answered here.
"""

from __future__ import annotations

import logging
import time
import weakref
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from toolweave.server.calls.call_path import observe_turn
from toolweave.server.fronts.early import ARRIVED_META, EARLY_ID_PREFIX
from toolweave.server.turns import ready_index
from toolweave.server.turns.meta_tools import (
    FIND_TOOLS,
    find_tools_result,
    to_mcp_tool,
    tool_summary,
    untitled_schema,
)

if TYPE_CHECKING:
    from pathlib import Path

    from mcp.server import ServerRequestContext

    from toolweave.records import ToolRecord
    from toolweave.registry.embeddings import RequestEncoder
    from toolweave.server.gateway import Gateway
    from toolweave.server.sessions.session_book import Session

__all__ = [
    "SETTLE_RETRY_S",
    "STILL_STARTING",
    "answer_find_tools_while_starting",
    "keep_ready_table",
    "leave_first_ready_table",
    "ready_table",
    "request_encoder",
    "start_in_background",
    "starting",
    "turn_from_ready_table",
    "write_ready_table",
]

log = logging.getLogger(__name__)

SETTLE_RETRY_S = (1.0, 30.0)
"""The manifest's start-up writes (``_settle``) are retried after 1 s, then twice as long each time, at
most 30 s apart, until they succeed."""

READY_TABLE_CHECK_S = 1.0
"""How often the gateway checks whether its registry's tools changed since it left its ready table (a
check compares one object's identity: the write is what costs)."""

READY_TABLE_GAP_S = 5.0
"""At least this long between two writes of the ready table (a large ingest commits many times)."""

STILL_STARTING = (
    "the gateway is still starting (opening its tool registry, loading its embedding model, connecting "
    "its upstreams): call find_tools again in a few seconds"
)


def starting(gateway: Gateway) -> bool:
    """Whether a ``find_tools`` may still wait for start-up: the registry or the embedding model is
    loading, or an upstream is on its first connection attempt (neither connected nor failed yet). A
    start that failed is over: every call then answers its error at once."""
    if not gateway.served.ready.is_set():
        return True
    if not gateway.served.is_ready():
        return False
    if not gateway.warmed.is_set():
        return True
    backends = gateway.sources.backends.values()
    return any(not b.available and getattr(b, "last_error", None) is None for b in backends)


def answer_find_tools_while_starting(gateway: Gateway) -> None:
    """Bound the gateway server's ``find_tools`` by ``settings.startup_call_wait_s`` while the gateway
    starts (see the module docstring)."""
    bound_s = gateway.settings.startup_call_wait_s
    entry = gateway.server.get_request_handler("tools/call")
    if bound_s <= 0 or entry is None:
        return
    inner = entry.handler

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        if params.name != FIND_TOOLS or not starting(gateway):
            return await inner(ctx, params)
        answered = await _from_ready_table(gateway, ctx, params)
        if answered is not None:
            return answered
        arrived = (ctx.meta or {}).get(ARRIVED_META)  # kept by the early front while the SDK loaded
        waited = time.monotonic() - arrived if isinstance(arrived, float) else 0.0
        with anyio.move_on_after(min(bound_s, max(0.0, bound_s - waited))):
            return await inner(ctx, params)
        query = (params.arguments or {}).get("query")
        return find_tools_result(str(query or ""), [], list_changed=False, published=(), note=STILL_STARTING)

    gateway.server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)


def _loading(gateway: Gateway) -> bool:
    """Whether the gateway's own search cannot run yet: the registry or the embedding model is loading
    (a start that failed is over)."""
    served = gateway.served
    return not served.ready.is_set() or (served.error is None and not gateway.warmed.is_set())


async def _table(gateway: Gateway, *, inline: bool = False) -> ready_index.ReadyIndex | None:
    """The gateway's ready table while its own search cannot run; None once it can, or without one, or
    when clients authenticate as anyone else: the table is what the default identity may see, and an
    identity's policy may hide some of it (a shared gateway's one token is named as the default identity,
    ``server/fronts/sharing.py``). ``inline``: read it on the event loop (``_from_ready_table``)."""
    security = gateway.settings.security
    only_default = security.auth == "tokens" and set(security.tokens) == {security.default_identity}
    if not _loading(gateway) or (security.auth != "none" and not only_default):
        return None
    if gateway.ready_tools is None:
        home = gateway.settings.home
        loaded = ready_index.load(home) if inline else await anyio.to_thread.run_sync(ready_index.load, home)
        gateway.ready_tools = loaded or False
        if gateway.ready_tools:  # ranked with its vectors once the query encoder is up (once a process)
            settings = gateway.settings
            model = ready_index.configured_model(settings)
            learned = (settings.usage_weight, settings.fleet_map)
            ready_index.rank_in_background(settings.home, model, settings.retrieval, learned)
    return gateway.ready_tools or None if _loading(gateway) else None


async def _publish(gateway: Gateway, session: Session, text: str, ids: list[str]) -> bool:
    """A turn answered from the ready table: ``ids`` published into ``session`` (as a turn's are);
    whether its list changed."""
    change = session.published.select(ids, session.next_turn())
    session.add_turn(text)
    await gateway.sessions.commit(session)
    return change.changed


async def _from_ready_table(
    gateway: Gateway, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult | None:
    """A plain ``find_tools`` answered from the ready table and published, while the gateway's own search
    cannot run; None otherwise (no table, or it can)."""
    plain = ready_index.plain_find_query({"name": params.name, "arguments": params.arguments})
    # A request an early front answered, replayed at the hand-over, publishes before the client's next
    # request runs (the SDK runs each in a task of its own): the client was shown its tools already,
    # and a list answered in between would take them away. The table and its ranking (the front's
    # own, computed once more) are then read on the event loop, once per replayed answer.
    replayed = str(ctx.request_id).startswith(EARLY_ID_PREFIX)
    table = await _table(gateway, inline=replayed) if plain is not None else None
    if plain is None or table is None:
        return None
    query, k = plain
    started = time.perf_counter()
    k = k or gateway.settings.retrieval.final_k
    if replayed:
        doc, ids = table.answer(query, k)
    else:  # off the event loop: with its vectors, the table runs the query encoder
        doc, ids = await anyio.to_thread.run_sync(table.answer, query, k)
    session = await gateway.session_for(ctx)
    changed = await _publish(gateway, session, query, ids)
    gateway.provisional[session.key] = query
    if changed:  # held until the client re-listed (bounded), as every turn's answer is: Claude Code sends
        # its next model request as soon as it has the answer, with the tools it had listed by then
        await gateway.turns.notify_and_hold(session)
    doc["tool_list_changed"] = changed
    result = ready_index.call_result(doc)
    answer = types.CallToolResult(
        content=[types.TextContent(text=result["content"][0]["text"])], structured_content=doc
    )
    # an answer from the table is a turn like any other: its metrics and its audit line, in its session
    elapsed = time.perf_counter() - started
    observe_turn(
        gateway.metrics,
        gateway.audit,
        lambda _: True,
        session,
        FIND_TOOLS,
        params.arguments or {},
        answer,
        elapsed,
    )
    return answer


async def turn_from_ready_table(
    gateway: Gateway, text: str, session_key: str | None
) -> dict[str, Any] | None:
    """A host's turn (``server/fronts/host.py``) for every session, answered from the ready table while the
    gateway's own search cannot run: published, announced, and held until each client re-listed
    (bounded), as ``TurnEngine.hear_turn`` does. None to leave it to ``hear_turn``: the search can run,
    there is no table, the turn names a session, or no client session exists yet."""
    text = text.strip()
    sessions = list(gateway.sessions)
    table = await _table(gateway) if text and session_key is None and sessions else None
    if table is None:
        return None
    doc, ids = await anyio.to_thread.run_sync(
        table.answer, text[: ready_index.MAX_QUERY_CHARS], gateway.settings.retrieval.final_k
    )
    report: dict[str, Any] = {"sessions": []}
    for session in sessions:
        changed = await _publish(gateway, session, text, ids)
        gateway.provisional[session.key] = text
        if changed:
            await gateway.turns.notify_and_hold(session)
        found = [t["name"] for t in doc["tools"]]
        report["sessions"].append({"session": session.key, "tool_list_changed": changed, "found": found})
    return report


def ready_table(gateway: Gateway) -> list[ready_index.ReadyTool]:
    """What the gateway's sessions may be shown (the default identity's view, without stale sources) as
    a ready table: public names, compact entries, the texts the registry indexes."""
    return [row for row, _ in _ready_rows(gateway)]


def _ready_rows(gateway: Gateway) -> list[tuple[ready_index.ReadyTool, ToolRecord]]:
    from toolweave.registry.documents import tool_document  # with the registry: after the handshake

    registry, guard = gateway.served.registry, gateway.served.guard
    identity = gateway.settings.security.default_identity
    rows = []
    for record in registry.tools():
        if not gateway.sources.serves(record.source) or not guard.allows(identity, record):
            continue
        name = gateway.names.name(record.id)
        entry = {
            "name": name,
            "description": record.description,
            "input_schema": untitled_schema(record.input_schema),
        }
        # what tools/list shows of it beyond the entry, as the registry's own listing builds it
        listed = to_mcp_tool(record).model_dump(
            by_alias=True, exclude_none=True, include={"title", "output_schema", "annotations"}
        )
        row = ready_index.ReadyTool(
            record.id, name, entry, tool_summary(record), tool_document(record), listed
        )
        rows.append((row, record))
    return rows


def write_ready_table(gateway: Gateway) -> int | None:
    """Leave the ready table beside the gateway's local registry, with what its vector ranking needs
    (``ready_rank.search_files``); how many tools it holds, or None when it was already so (blocking:
    run it on a worker thread)."""
    from toolweave.server.turns import ready_rank

    rows = _ready_rows(gateway)
    records = [record for _, record in rows]
    files = ready_rank.search_files(gateway.served.registry, records)
    search, vectors = files if files is not None else (None, None)
    if ready_index.write(gateway.settings.home, [row for row, _ in rows], search, vectors):
        return len(rows)
    return None


_TABLE_CHECKED: weakref.WeakSet[Gateway] = weakref.WeakSet()
"""Gateways whose registry has a ready table with vectors (read once: a table on disk stays one)."""


async def leave_first_ready_table(gateway: Gateway) -> None:
    """The ready table of a local registry that has none, or one written before tables carried vectors,
    written as soon as the registry holds tools: when it opens (``Gateway.warm_up``) and after each
    ingest until it exists (``SourceSync``'s ``on_ingested``). ``keep_ready_table`` starts once the model
    is loaded and checks every few seconds, which a launch that ends soon after its first answer seldom
    lives to see: a per-call client's one call, or a short first session that built the registry (the
    next launch then waited for the start again)."""
    home = gateway.settings.home
    path = ready_index.ready_path(home)
    if path is None or gateway in _TABLE_CHECKED or not len(gateway.served.registry.content_hashes()):
        return
    if path.exists():
        table = await anyio.to_thread.run_sync(ready_index.load, home)
        if table is None or table.search_data is not None:
            _TABLE_CHECKED.add(gateway)
            return
    try:
        written = await anyio.to_thread.run_sync(write_ready_table, gateway)
        if written is not None:
            log.debug("first ready table written: %d tools", written)
        _TABLE_CHECKED.add(gateway)
    except Exception:  # a first answer then waits for the registry, as without a table
        log.warning("could not leave the ready table beside the registry", exc_info=True)


async def keep_ready_table(gateway: Gateway) -> None:
    """Leave the ready table beside a local registry once the gateway is warm, and again whenever the
    registry's tools changed (forever: run it in the gateway's task group)."""
    home = gateway.settings.home
    if ready_index.ready_path(home) is None:
        return
    seen: object = None
    written_at = float("-inf")
    while True:
        hashes = gateway.served.registry.content_hashes()  # replaced whole by every write or reload
        # an empty registry has nothing to answer with
        if hashes is not seen and len(hashes) and time.monotonic() - written_at >= READY_TABLE_GAP_S:
            seen, written_at = hashes, time.monotonic()
            try:
                written = await anyio.to_thread.run_sync(write_ready_table, gateway)
                if written is not None:
                    log.debug("ready table written: %d tools", written)
            except Exception:  # a first answer then waits for the registry, as without a table
                log.warning("could not leave the ready table beside the registry", exc_info=True)
        await anyio.sleep(READY_TABLE_CHECK_S)


def request_encoder(home: Path | str, model: str) -> RequestEncoder | None:
    """What embeds a warm gateway's requests without fastembed (blocking: call it from a worker thread):
    the encoder the ready table's ranking loaded already, if it runs ``model``, else a new one
    (``registry/query_encoder.py``: the same vectors bit for bit, for every shipped model); None for a
    model only fastembed runs. A start then imports fastembed and loads its model only if tools need
    embedding."""
    from toolweave.errors import EmbeddingError
    from toolweave.registry.query_encoder import QueryEncoder
    from toolweave.server.turns.ready_rank import ReadyRanker

    table = ready_index.load(home)  # None for an object store's registry: it has no table
    ranker = table.ranker if table is not None else None
    if isinstance(ranker, ReadyRanker) and ranker.index.encoder.model_name == model:
        return ranker.index.encoder
    try:
        return QueryEncoder(model)
    except EmbeddingError:
        return None


async def start_in_background(gateway: Gateway) -> None:
    """The gateway's background start. Serving begins on the last committed registry as soon as it is
    open: what the manifest writes (``_settle``) never holds it up, since it needs the writer lock (a
    fleet's, in Redis) and Redis may be down. Only a registry that cannot be opened, or one that lacks a
    catalog of the manifest when that first attempt fails, makes every later find_tools and call answer
    with the error."""
    started = time.perf_counter()
    from toolweave.server.sessions import replica  # builds backends: not before the handshake

    served, sources = gateway.served, gateway.sources
    try:
        await served.open()
        sources.refresh_stale_sources()  # which sources the registry holds (their tools serve at once)
    except Exception as exc:  # any start failure is reported, never fatal
        _start_failed(gateway, "the tool registry could not be opened", exc)
        return
    sources.on_ingested = partial(leave_first_ready_table, gateway)  # before any backend can report
    async with anyio.create_task_group() as tg:
        tried = anyio.Event()
        tg.start_soon(_settle, gateway, replica, tried)
        if sources.catalogs_missing():  # nothing to serve them from yet: wait for the first try
            await tried.wait()
            if sources.catalogs_missing() and gateway.settle_error is not None:
                _start_failed(gateway, "the manifest's catalogs could not be ingested", gateway.settle_error)
                tg.cancel_scope.cancel()
                return
        served.ready.set()
        log.info(
            "gateway ready in %.2f s: %d tools in registry, %d backends",
            time.perf_counter() - started,
            len(served.registry),
            len(sources.backends),
        )
        await sources.registry_opened()
        tg.start_soon(served.guard.watch, served.quarantine_changed)
        tg.start_soon(replica.follow_registry, sources)  # commits of other replicas on this registry
        await gateway.warm_up()
        gateway.warmed.set()
        ready_index.drop_ranker(gateway.settings.home)  # the gateway's own search answers from now on
        if gateway.ready_tools:
            gateway.ready_tools.ranker = None
        tg.start_soon(settle_provisional, gateway)
        tg.start_soon(keep_ready_table, gateway)


async def settle_provisional(gateway: Gateway) -> None:
    """Rank again, with the gateway's own search, each session's latest request that the ready table
    answered: its BM25 list is what the start allowed (0.63 against 0.85 mAP@10 on BFCL multi-turn,
    bench/RESULTS.md "Useful from the first request"), and the client is still acting on it. The turn
    publishes what the real ranking chose and announces it, as any turn does; a session that has sent
    a newer request since is left alone (that request was ranked by the gateway)."""

    async def settle(key: str, text: str) -> None:
        session = gateway.sessions.get(key)
        if session is None or list(session.queries)[-1:] != [text]:
            return
        try:
            await gateway.turns.retrieve_turn(session, text, gateway.settings.retrieval)
        except Exception:  # the provisional answer stands (a client that left, often); the next is ranked
            log.debug("could not rank %s's first request again", key, exc_info=True)

    # each session's announcement waits for its client's re-list (bounded): side by side; and a table
    # answer that was finishing while these ran is settled in the next round
    while gateway.provisional:
        pending, gateway.provisional = gateway.provisional, {}
        async with anyio.create_task_group() as tg:
            for key, text in pending.items():
                tg.start_soon(settle, key, text)


def _start_failed(gateway: Gateway, stage: str, exc: BaseException) -> None:
    gateway.served.error = f"{stage}: {type(exc).__name__}: {exc}"
    log.error("%s; find_tools and calls will answer with this error", gateway.served.error)
    log.debug("background start failed", exc_info=exc)
    gateway.served.ready.set()


async def _settle(gateway: Gateway, replica: ModuleType, tried: anyio.Event) -> None:
    """What the manifest writes into the registry at start: its catalogs, dependency overrides, private
    tools and the sources shared with other replicas, each a write only when something changed. Retried
    with backoff (``SETTLE_RETRY_S``) until it succeeds, without a restart: while the writer lock cannot
    be had (Redis down) the gateway serves the last committed registry."""
    sources = gateway.sources
    delay, failing = SETTLE_RETRY_S[0], False
    while True:
        stage = "the manifest's catalogs could not be ingested"
        try:
            await sources.ingest_catalogs()
            stage = "the manifest's dependency overrides could not be applied"
            await sources.apply_overrides()
            stage = "the manifest's sources could not be shared with other replicas"
            await replica.share_sources(sources)
        except Exception as exc:  # never fatal: serving goes on, and this is tried again
            gateway.settle_error = exc
            tried.set()
            if not failing:
                log.warning(
                    "%s: %s: %s; serving the last committed registry, retrying every %.0f s at most",
                    stage,
                    type(exc).__name__,
                    exc,
                    SETTLE_RETRY_S[1],
                )
                log.debug("start-up write failed", exc_info=True)
            failing = True
            await anyio.sleep(delay)
            delay = min(delay * 2, SETTLE_RETRY_S[1])
            continue
        gateway.settle_error = None
        tried.set()
        if failing:
            log.info("the manifest's catalogs, overrides and sources are in the registry now")
        gateway.find_cache.clear()  # what the catalogs or overrides changed is searched from now on
        sources.refresh_stale_sources()
        sources.warn_if_empty()
        return

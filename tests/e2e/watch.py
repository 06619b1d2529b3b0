"""Watching tools/list_changed in both protocol eras: counting it, or re-listing on it like Claude Code
(shared by the in-process and end-to-end tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import Client

__all__ = ["ListChanged", "Relister", "names", "relisting", "watching"]


class ListChanged:
    """Counts notifications/tools/list_changed, whichever era delivered it."""

    def __init__(self) -> None:
        self.count = 0
        self._event = anyio.Event()
        self.from_handler = True

    async def on_message(self, message: Any) -> None:
        if self.from_handler and isinstance(message, types.ToolListChangedNotification):
            self.hit()

    def hit(self) -> None:
        self.count += 1
        self._event.set()

    async def wait(self, timeout: float = 10) -> None:
        with anyio.fail_after(timeout):
            await self._event.wait()
        self._event = anyio.Event()

    async def flushed(self, client: Client) -> int:
        """The count once every notice the server sent before now was handled: the server's answer to a
        request sent now travels behind them, and the handlers they started have run once every task
        waits. The request is a ``tools/list`` (``ping`` is not in the 2026 era)."""
        await client.list_tools(cache_mode="bypass")
        await anyio.wait_all_tasks_blocked()
        return self.count


@asynccontextmanager
async def watching(client: Client, watch: ListChanged) -> AsyncIterator[None]:
    """Handshake era: notifications arrive through the message handler. 2026 era: only on a listen
    stream, which we open and count from (the SDK may tee frames to the handler as well, so the
    handler is not counted there)."""
    if client.protocol_version != "2026-07-28":
        yield
        return
    watch.from_handler = False
    async with anyio.create_task_group() as tg, client.listen(tools_list_changed=True) as sub:

        async def drain() -> None:
            async for _event in sub:
                watch.hit()

        tg.start_soon(drain)
        yield
        tg.cancel_scope.cancel()


def names(result: types.ListToolsResult) -> list[str]:
    return [t.name for t in result.tools]


class Relister:
    """A client like Claude Code: on every list_changed it fetches the tool list again, in the
    background (``run`` in a task); ``lists`` holds each list it received, in order. Feed it from a
    ``message_handler`` (handshake era) or ``notice()`` from a listen stream (2026 era). ``settled()``
    waits until every notice received so far has been answered by a re-list."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.lists: list[list[str]] = []
        self.pending = 0
        self.from_handler = True  # False when a 2026-era listen stream feeds notice() instead
        self._send, self._receive = anyio.create_memory_object_stream[None](100)

    async def on_message(self, message: Any) -> None:
        if self.from_handler and isinstance(message, types.ToolListChangedNotification):
            self.notice()

    def notice(self) -> None:
        try:
            self._send.send_nowait(None)
        except anyio.ClosedResourceError:  # a notice after the session's relisting ended: nobody re-lists
            return
        self.pending += 1

    async def run(self) -> None:
        async for _ in self._receive:
            assert self.client is not None
            try:
                self.lists.append(names(await self.client.list_tools(cache_mode="bypass")))
            finally:
                self.pending -= 1

    async def settled(self, timeout: float = 30) -> None:
        with anyio.fail_after(timeout):
            while self.pending:
                await anyio.sleep(0.005)


@asynccontextmanager
async def relisting(client: Client, relister: Relister) -> AsyncIterator[None]:
    """Run ``relister`` for ``client``; in the 2026 era it is fed from a listen stream."""
    relister.client = client
    with relister._send, relister._receive:  # closed with the client's session: one relister a session
        async with anyio.create_task_group() as tg:
            tg.start_soon(relister.run)
            if client.protocol_version == "2026-07-28":
                relister.from_handler = False
                async with client.listen(tools_list_changed=True) as sub:

                    async def drain() -> None:
                        async for _event in sub:
                            relister.notice()

                    tg.start_soon(drain)
                    yield
            else:
                yield
            tg.cancel_scope.cancel()

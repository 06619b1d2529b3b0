"""The stdio wire without a worker-thread round trip per message.

The SDK's ``stdio_server`` reads and writes the wire through ``anyio.wrap_file``: every line read is a
worker-thread job, and every message written is two (``write``, then ``flush``). Each job wakes a
worker, which wakes the event loop when it is done; a proxied call paid three of them on the way in
and out of the gateway, on top of the upstream's own. Here:

* ``read_ahead`` reads the client's lines on one thread of its own that hands each line to the event
  loop (one wake-up per line, none to ask for it), a few lines ahead at most;
* ``PipeWriter`` writes each message on the event loop itself, with a non-blocking write to the pipe or
  socket (asyncio's pipe transport): it waits only when the client does not read, by flow control.
  Where the wire is a terminal or a file, ``open_writer`` keeps the SDK's threaded writes.

Nothing else changes: the same bytes, in the same order, and a client that stops reading still holds
up only the writes to it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import stat
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import suppress
from io import TextIOWrapper
from typing import Any, BinaryIO

import anyio

__all__ = ["READ_AHEAD_LINES", "PipeWriter", "ThreadWriter", "open_writer", "read_ahead"]

READ_AHEAD_LINES = 4
"""Lines the reader thread may read before the server took them (each at most ``max_request_bytes``)."""

log = logging.getLogger(__name__)

_END = object()


async def read_ahead(lines: Iterator[str], take: Callable[[str], bool] | None = None) -> AsyncIterator[str]:
    """``lines`` (a blocking iterator, e.g. over stdin) as an async iterator, read on a thread of its
    own. The thread is a daemon: a server that stops while it waits for a line leaves it blocked,
    as ``to_thread.run_sync(..., abandon_on_cancel=True)`` did.

    ``take``: asked first about each line, on the event loop as the line arrives (in the context of the
    task that iterates); a line it took (True) is not yielded. The stdio relay serves its calls this way
    (``relay.py``): a line's hand-over wakes the loop once, instead of waking a reader task too."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    room = threading.Semaphore(READ_AHEAD_LINES)
    context = contextvars.copy_context()

    def deliver(item: Any) -> None:
        if take is not None and isinstance(item, str):
            try:
                taken = take(item)
            except Exception:  # a taker's bug must not cost the line: the reader gets it
                log.exception("stdin: a line's taker failed; the line goes the usual way")
                taken = False
            if taken:
                room.release()
                return
        queue.put_nowait(item)

    def hand_over(item: Any) -> bool:
        try:
            loop.call_soon_threadsafe(deliver, item, context=context)
        except RuntimeError:  # the loop is closed: nobody reads any more
            return False
        return True

    def run() -> None:
        try:
            for line in lines:
                room.acquire()
                if not hand_over(line):
                    return
        except BaseException as exc:  # the reader's error is raised where the lines are read
            hand_over(exc)
            return
        hand_over(_END)

    threading.Thread(target=run, name="toolweave-stdin", daemon=True).start()
    while True:
        item = await queue.get()
        if item is _END:
            return
        if isinstance(item, BaseException):
            raise item
        room.release()
        yield item


class _Flow(asyncio.Protocol):
    """Flow control of a write pipe: ``room`` is set while the transport's buffer may take more."""

    def __init__(self) -> None:
        self.room = asyncio.Event()
        self.room.set()
        self.lost: BaseException | None = None
        self.on_lost: Callable[[], None] | None = None

    def pause_writing(self) -> None:
        self.room.clear()

    def resume_writing(self) -> None:
        self.room.set()

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = exc or BrokenPipeError("the client closed its end of the stdio pipe")
        self.room.set()
        if self.on_lost is not None:
            self.on_lost()


class PipeWriter:
    """Text to a pipe or socket, written on the event loop (what the SDK's ``stdout_writer`` calls)."""

    def __init__(self, transport: asyncio.WriteTransport, flow: _Flow, fd: int) -> None:
        self._transport = transport
        self._flow = flow
        self._fd = fd
        self._wrote: Callable[[str], None] | None = None

    def watch(self, wrote: Callable[[str], None], lost: Callable[[], None]) -> None:
        """Tell ``wrote`` each line once it is written, and ``lost`` when the client stops reading."""
        self._wrote = wrote
        self._flow.on_lost = lost
        if self._flow.lost is not None:
            lost()

    async def write(self, text: str) -> None:
        if self._flow.lost is not None:
            raise self._flow.lost
        self._transport.write(text.encode("utf-8"))
        if not self._flow.room.is_set():  # the client is not reading: wait until the pipe drains
            await self._flow.room.wait()
            if self._flow.lost is not None:
                raise self._flow.lost
        if self._wrote is not None:
            self._wrote(text)

    async def flush(self) -> None:
        """Nothing to flush: each ``write`` went to the pipe, or is queued on the transport in order."""

    def close(self) -> None:
        self._transport.close()
        with suppress(OSError):  # the descriptor is shared with whoever writes the wire after us
            os.set_blocking(self._fd, True)


class _Unowned(TextIOWrapper):
    """A text layer whose close (or garbage collection) leaves the wire's buffer open."""

    def close(self) -> None:
        with suppress(ValueError):
            self.detach()


class ThreadWriter:
    """Text to a file, written on worker threads (the SDK's own way), for a wire that is no pipe."""

    def __init__(self, buffer: BinaryIO) -> None:
        self._file = anyio.wrap_file(_Unowned(buffer, encoding="utf-8"))
        self._wrote: Callable[[str], None] | None = None

    def watch(self, wrote: Callable[[str], None], lost: Callable[[], None]) -> None:
        """Tell ``wrote`` each line once it is written (``lost`` is never told: a file does not say)."""
        self._wrote = wrote

    async def write(self, text: str) -> None:
        await self._file.write(text)
        if self._wrote is not None:
            self._wrote(text)

    async def flush(self) -> None:
        await self._file.flush()

    def close(self) -> None:
        self._file.wrapped.close()


async def open_writer(buffer: BinaryIO, *, own_fd: bool) -> PipeWriter | ThreadWriter:
    """A writer of text lines to ``buffer``: on the event loop when it is a pipe or socket whose
    descriptor is this transport's alone (``own_fd``: a duplicate no other code writes through, so
    making it non-blocking changes nothing for anyone else), else on worker threads."""
    try:
        fd = buffer.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return ThreadWriter(buffer)
    if not own_fd or not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return ThreadWriter(buffer)
    loop = asyncio.get_running_loop()
    transport, flow = await loop.connect_write_pipe(_Flow, os.fdopen(fd, "wb", closefd=False))
    return PipeWriter(transport, flow, fd)

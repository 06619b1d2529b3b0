"""The stdio wire without worker-thread hops: lines read ahead in order, writes on the event loop."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from toolweave.server.fronts.stdio_pipes import (
    READ_AHEAD_LINES,
    PipeWriter,
    ThreadWriter,
    open_writer,
    read_ahead,
)

pytestmark = pytest.mark.anyio


async def test_lines_come_in_order_and_the_reader_stays_a_few_lines_ahead() -> None:
    produced: list[int] = []

    def lines() -> Iterator[str]:
        for n in range(50):
            produced.append(n)
            yield f"line {n}\n"

    got: list[str] = []
    async for line in read_ahead(lines()):
        got.append(line)
        if len(got) == 1:
            await anyio.sleep(0.2)  # the server is busy: the reader may not run away with the input
            assert len(produced) <= READ_AHEAD_LINES + 2
    assert got == [f"line {n}\n" for n in range(50)]


async def test_a_taker_gets_each_line_first_on_the_loop_and_what_it_leaves_comes_in_order() -> None:
    """``take`` (the stdio relay) sees every line as it arrives, on the event loop with the reader's
    context (anyio's own calls work there); taken lines are not yielded and free their read-ahead room
    (many more than ``READ_AHEAD_LINES`` are taken while nothing iterates); a taker that raises costs
    no line."""
    taken: list[str] = []
    all_taken = threading.Event()

    def take(line: str) -> bool:
        assert threading.current_thread() is threading.main_thread()
        anyio.CancelScope()  # asks which async library runs: the reader's context says
        if line.startswith("boom"):
            raise RuntimeError("a taker's bug")
        if line.startswith("call"):
            taken.append(line)
            if len(taken) == 3 * READ_AHEAD_LINES:
                all_taken.set()
            return True
        return False

    def lines() -> Iterator[str]:
        for n in range(3 * READ_AHEAD_LINES):
            yield f"call {n}\n"
        yield "other 1\n"
        yield "boom\n"
        yield "other 2\n"

    got: list[str] = []
    async for line in read_ahead(lines(), take):
        if not got:  # every call was taken before this line was yielded (they came first)
            assert all_taken.is_set()
        got.append(line)
    assert taken == [f"call {n}\n" for n in range(3 * READ_AHEAD_LINES)]
    assert got == ["other 1\n", "boom\n", "other 2\n"]


async def test_a_reader_error_is_raised_where_the_lines_are_read() -> None:
    def lines() -> Iterator[str]:
        yield "first\n"
        raise OSError("stdin broke")

    got: list[str] = []
    with pytest.raises(OSError, match="stdin broke"):
        async for line in read_ahead(lines()):
            got.append(line)
    assert got == ["first\n"]


async def test_a_pipe_is_written_on_the_event_loop_and_waits_for_a_slow_reader() -> None:
    read_fd, write_fd = os.pipe()
    try:
        writer = await open_writer(os.fdopen(write_fd, "wb", closefd=False), own_fd=True)
        assert isinstance(writer, PipeWriter)
        received = bytearray()

        def drain() -> None:
            while chunk := os.read(read_fd, 65536):
                received.extend(chunk)

        big = "x" * 100_000  # larger than a pipe's buffer: the write has to wait for the reader
        reader = threading.Thread(target=drain)
        reader.start()
        for n in range(20):
            await writer.write(f"{n} {big}\n")
            await writer.flush()
        writer.close()
        await anyio.sleep(0.1)  # the transport closes (its buffer written) on the next loop turns
        assert os.get_blocking(write_fd)  # handed back as it was found
        os.close(write_fd)
        reader.join(10)
        lines = received.decode().splitlines()
        assert [line.split()[0] for line in lines] == [str(n) for n in range(20)]
        assert all(line.endswith(big) for line in lines)
    finally:
        os.close(read_fd)


async def test_a_file_or_a_shared_descriptor_keeps_threaded_writes(tmp_path: Path) -> None:
    with (tmp_path / "wire").open("wb") as file:
        writer = await open_writer(file, own_fd=True)
        assert isinstance(writer, ThreadWriter)
        await writer.write("{}\n")
        await writer.flush()
        writer.close()
        assert not file.closed  # the wire's buffer is not the writer's to close
    assert (tmp_path / "wire").read_text() == "{}\n"
    read_fd, write_fd = os.pipe()
    try:
        shared = await open_writer(os.fdopen(write_fd, "wb", closefd=False), own_fd=False)
        assert isinstance(shared, ThreadWriter)  # a descriptor others write through stays blocking
        assert os.get_blocking(write_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert isinstance(await open_writer(io.BytesIO(), own_fd=True), ThreadWriter)

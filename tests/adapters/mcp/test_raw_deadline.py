"""A raw ``tools/call``'s deadline (``adapters/mcp/raw.py``): a timer on its answer, as a cancel scope
would end it. Over a real pipe; the upstream is the test, reading the lines the gateway wrote."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import anyio
import pytest

from toolweave.adapters.mcp.raw import RawCalls

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Stdin:
    """The upstream's stdin as anyio's process stream holds it (``_stream``: asyncio's writer)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._stream = writer

    async def send(self, data: bytes) -> None:  # the cancel notice is written this way
        self._stream.write(data)
        await self._stream.drain()


async def _link() -> tuple[RawCalls, int, Any]:
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb", buffering=0)
    )
    raw = RawCalls()
    raw.attach(_Stdin(asyncio.StreamWriter(transport, protocol, None, loop)))  # type: ignore[arg-type]
    return raw, read_fd, transport


def _written(read_fd: int) -> list[dict[str, Any]]:
    os.set_blocking(read_fd, False)
    try:
        data = os.read(read_fd, 1 << 16)
    except BlockingIOError:
        return []
    return [json.loads(line) for line in data.decode().splitlines()]


async def test_a_call_past_its_deadline_times_out_and_the_upstream_is_told() -> None:
    raw, read_fd, transport = await _link()
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        with pytest.raises(TimeoutError):
            await raw.call("slow", {"seconds": 30}, modern=False, deadline=started + 0.2)
        assert loop.time() - started < 5
        request, cancel = _written(read_fd)
        assert request["method"] == "tools/call" and request["params"]["name"] == "slow"
        assert cancel["method"] == "notifications/cancelled"
        assert cancel["params"]["requestId"] == request["id"]
        # a deadline already spent sends nothing
        with pytest.raises(TimeoutError):
            await raw.call("slow", {}, modern=False, deadline=loop.time() - 1)
        assert _written(read_fd) == []
    finally:
        transport.close()
        os.close(read_fd)


async def test_an_answer_in_time_is_returned_and_its_deadline_left_behind() -> None:
    raw, read_fd, transport = await _link()
    loop = asyncio.get_running_loop()
    try:

        async def answer() -> None:
            while not (lines := _written(read_fd)):
                await anyio.sleep(0.01)
            stamp = {"io.modelcontextprotocol/serverInfo": {"name": "up", "version": "1"}}
            result = {"content": [], "_meta": {**stamp, "kept": 1}}
            assert raw.took(json.dumps({"jsonrpc": "2.0", "id": lines[0]["id"], "result": result}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer)
            got = await raw.call("quick", {}, modern=False, deadline=loop.time() + 0.3)
        # the upstream's identity stamp is dropped here (finish_result would drop it): the rest stays
        assert got["result"] == {"content": [], "_meta": {"kept": 1}}
        await anyio.sleep(0.5)  # past the deadline: no late cancel notice, nothing expires
        assert _written(read_fd) == []
    finally:
        transport.close()
        os.close(read_fd)

"""What a stdio client that closed stdin is still owed: answers to the requests it sent.

Closing stdin is how a stdio client says it has nothing more to send, not that it stopped listening.
A client that pipes its requests (``printf '...' | toolweave serve``, a replay harness, a script that
writes a batch and closes its end) closes stdin right after its last request, and reads stdout until
the gateway exits. Ending the session at the end of input would cut those requests off: the SDK
answers what is still running with a "Connection closed" error, and a request the early front kept for
the SDK would get no answer at all.

So ``Owed`` keeps a multiset of the ids of requests read from stdin whose answer has not been written
yet, and the end of input is passed on only once it is empty (``settle``), or once the client stopped
reading stdout (``lost``: a pipe whose read end closed), or once ``bound`` passed (the longest call
budget of any source, plus ``DRAIN_MARGIN_S``). Left out of it:
requests the early front answered already (replayed under private ids), ``subscriptions/listen``
(answered only when its stream ends), requests the client cancelled, and lines too long to be read
whole (answered with an error by id, which the multiset ignores).

Lines are parsed on the reader's thread, once more than the SDK parses them; an answer's id is read
from its first characters (every writer puts ``jsonrpc`` then ``id`` first), so a large result costs
no second parse.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

from toolweave.server.fronts.handover import EARLY_ID_PREFIX

if TYPE_CHECKING:
    from toolweave.server.fronts.limits import LineSource

__all__ = ["DRAIN_MARGIN_S", "Owed", "OwingLines"]

log = logging.getLogger(__name__)

DRAIN_MARGIN_S = 2.0
"""How much longer than the longest call budget (``adapters.backend.call_budget``) the end of input
waits for answers: the call's result still has to be shaped and written."""

_ANSWER_HEAD = '{"jsonrpc":"2.0","id":'
_NOTICE_HEAD = '{"jsonrpc":"2.0","method":'
_LONG_LIVED = frozenset({"subscriptions/listen"})
_decode = json.JSONDecoder().raw_decode


class Owed:
    """Request ids read and not answered yet (thread-safe: read on one thread, written on another)."""

    def __init__(self) -> None:
        self._ids: Counter[str] = Counter()
        self._changed = threading.Condition()
        self._lost = False

    def __len__(self) -> int:
        with self._changed:
            return sum(self._ids.values())

    def asked(self, line: bytes) -> None:
        """A whole line the client sent: owe it an answer if it is a request, forget one it cancelled."""
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or not isinstance(method := message.get("method"), str):
            return
        if method == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict) and _is_id(request_id := params.get("requestId")):
                self._settled(request_id)
            return
        request_id = message.get("id")
        if not _is_id(request_id) or method in _LONG_LIVED:
            return
        if isinstance(request_id, str) and request_id.startswith(EARLY_ID_PREFIX):
            return  # answered by the early front already
        with self._changed:
            self._ids[_key(request_id)] += 1

    def answered(self, text: str) -> None:
        """A line written to the client: settle the request it answers, if it is an answer."""
        if text.startswith(_NOTICE_HEAD):
            return
        if text.startswith(_ANSWER_HEAD):
            try:
                request_id, end = _decode(text, len(_ANSWER_HEAD))
            except ValueError:
                return
            if text.startswith((',"result"', ',"error"'), end):
                self._settled(request_id)
            return
        try:  # another writer's key order: rare, and short lines (notices, small answers)
            message = json.loads(text)
        except ValueError:
            return
        if isinstance(message, dict) and "method" not in message and message.keys() & {"result", "error"}:
            self._settled(message.get("id"))

    def lost(self) -> None:
        """The client stopped reading: nothing written can reach it any more."""
        with self._changed:
            self._lost = True
            self._changed.notify_all()

    def settle(self, bound: float) -> bool:
        """Wait until every request was answered (True), the client stopped reading or ``bound`` seconds
        passed (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._lost or not self._ids, bound) and not self._lost

    def _settled(self, request_id: Any) -> None:
        if not _is_id(request_id):
            return
        key = _key(request_id)
        with self._changed:
            if self._ids[key] > 1:
                self._ids[key] -= 1
            else:
                self._ids.pop(key, None)
                if not self._ids:
                    self._changed.notify_all()


class OwingLines:
    """A line source that records what ``owed`` is asked, and ends only once it settled (or gave up
    after ``bound()`` seconds, asked at the end). ``on_input_end``: called (from the reader's thread)
    as the input ends; ``on_end``: called once the end is passed on, as the way out begins."""

    def __init__(
        self,
        lines: LineSource,
        owed: Owed,
        bound: Callable[[], float],
        on_end: Callable[[], None] | None = None,
        *,
        on_input_end: Callable[[], object] | None = None,
    ) -> None:
        self._lines = lines
        self._owed = owed
        self._bound = bound
        self._on_end = on_end
        self._on_input_end = on_input_end
        self._whole = True  # the last line read ended with a newline: the next one starts a line
        self._unended: bytes | None = None  # a line begun without its newline: the input's last?

    def readline(self, limit: int = -1) -> bytes:
        line: bytes = self._lines.readline(limit)
        if not line:
            if self._unended is not None:  # the client's last line, without a newline: still read
                self._owed.asked(self._unended)
            if self._on_input_end is not None:
                self._on_input_end()
            if owed := len(self._owed):
                log.info("stdin ended with %d request(s) to answer: answering them first", owed)
            self._owed.settle(self._bound())
            if self._on_end is not None:
                self._on_end()
            return line
        whole = line.endswith(b"\n")
        if whole and self._whole:
            self._owed.asked(line)
        self._unended = line if self._whole and not whole else None
        self._whole = whole
        return line


def _is_id(value: object) -> TypeGuard[str | int]:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _key(request_id: str | int) -> str:
    # 1 and "1" are different ids to JSON-RPC
    return f"s:{request_id}" if isinstance(request_id, str) else f"i:{request_id}"

"""``Owed`` and ``OwingLines`` (``server/fronts/owed.py``): which requests a client that closed stdin is
still owed an answer, and when the end of its input is passed on."""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any

from toolweave.server.fronts.handover import EARLY_ID_PREFIX
from toolweave.server.fronts.owed import Owed, OwingLines


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def request(request_id: Any, method: str = "tools/call", **params: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def answer(request_id: Any, key: str = "result") -> str:
    # as the SDK's writer and the relay write it: compact, jsonrpc then id first
    return json.dumps({"jsonrpc": "2.0", "id": request_id, key: {}}, separators=(",", ":")) + "\n"


def test_a_request_is_owed_until_its_answer_is_written() -> None:
    owed = Owed()
    owed.asked(request(1))
    owed.asked(request("a"))
    assert len(owed) == 2
    owed.answered(answer(1))
    assert len(owed) == 1
    owed.answered(answer("a", "error"))
    assert len(owed) == 0
    assert owed.settle(0.0)


def test_ids_of_both_types_stay_apart_and_repeats_are_counted() -> None:
    owed = Owed()
    owed.asked(request(1))
    owed.asked(request(1))
    owed.answered(answer("1"))  # a string "1" answers no request 1
    assert len(owed) == 2
    owed.answered(answer(1))
    assert len(owed) == 1


def test_what_is_never_answered_is_not_owed() -> None:
    owed = Owed()
    owed.asked(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    owed.asked(request("listen:0", "subscriptions/listen"))  # answered only when its stream ends
    owed.asked(request(f"{EARLY_ID_PREFIX}0"))  # the early front answered it
    owed.asked(line({"jsonrpc": "2.0", "id": 9, "result": {}}))  # the client's answer to our request
    owed.asked(b"not json\n")
    owed.asked(line({"jsonrpc": "2.0", "id": True, "method": "ping"}))  # no valid id
    assert len(owed) == 0


def test_a_cancelled_request_is_no_longer_owed() -> None:
    owed = Owed()
    owed.asked(request(7))
    owed.asked(line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}))
    assert len(owed) == 0


def test_only_answers_settle_a_request() -> None:
    owed = Owed()
    owed.asked(request(3))
    # our request to the client under the same id, and a notice, are no answers
    owed.answered('{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}\n')
    owed.answered('{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n')
    assert len(owed) == 1
    # another writer's key order is read whole
    owed.answered(json.dumps({"result": {}, "id": 3, "jsonrpc": "2.0"}) + "\n")
    assert len(owed) == 0


def test_settle_waits_for_the_last_answer_or_gives_up() -> None:
    owed = Owed()
    owed.asked(request(1))
    assert not owed.settle(0.05)  # the bound passed
    timer = threading.Timer(0.1, owed.answered, (answer(1),))
    timer.start()
    started = time.monotonic()
    assert owed.settle(30)
    assert time.monotonic() - started < 30
    timer.join()


def test_a_client_that_stopped_reading_is_not_waited_for() -> None:
    owed = Owed()
    owed.asked(request(1))
    threading.Timer(0.1, owed.lost).start()
    assert not owed.settle(30)


def test_owing_lines_pass_the_end_on_once_answered() -> None:
    owed = Owed()
    ended: list[bool] = []
    source = io.BytesIO(request(1) + request(2))
    lines = OwingLines(source, owed, lambda: 30, lambda: ended.append(True))
    assert lines.readline() == request(1)
    assert lines.readline() == request(2)
    assert len(owed) == 2
    reader_saw: list[bytes] = []
    reader = threading.Thread(target=lambda: reader_saw.append(lines.readline()))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive() and not ended  # the end is held while answers are owed
    owed.answered(answer(1))
    owed.answered(answer(2))
    reader.join(10)
    assert reader_saw == [b""] and ended == [True]


def test_owing_lines_skip_lines_read_in_pieces_and_count_an_unended_last_line() -> None:
    owed = Owed()
    long_request = request(1, text="x" * 100)
    last = request(2)[:-1]  # the last line has no newline
    limit = 80  # the server reads at most max_request_bytes + 1 at a time
    assert len(long_request) > limit > len(last)
    lines = OwingLines(io.BytesIO(long_request + last), owed, lambda: 0.01)
    pieces = []
    while piece := lines.readline(limit):
        pieces.append(piece)
    assert b"".join(pieces) == long_request + last
    # the long line was read in pieces (the server answers it as too large, by the id it finds): not
    # counted; the last line, read whole before the end, is
    assert len(owed) == 1
    owed.answered(answer(2))
    assert len(owed) == 0


def test_the_end_of_input_waits_as_long_as_the_longest_call_may_take() -> None:
    from types import SimpleNamespace

    from toolweave.server.fronts.owed import DRAIN_MARGIN_S
    from toolweave.server.fronts.transports import _drain_s
    from toolweave.settings import Settings

    settings = Settings(call_timeout_s=60)

    def gateway(*own_s: float | None) -> Any:
        backends = {f"b{n}": SimpleNamespace(call_timeout_s=s) for n, s in enumerate(own_s)}
        return SimpleNamespace(settings=settings, sources=SimpleNamespace(backends=backends))

    assert _drain_s(gateway()) == 60 + DRAIN_MARGIN_S
    assert _drain_s(gateway(None, 5)) == 60 + DRAIN_MARGIN_S
    assert _drain_s(gateway(None, 300)) == 300 + DRAIN_MARGIN_S  # a source's own timeout_s is longer

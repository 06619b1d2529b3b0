"""The traffic observer: notices values flowing from one tool's result into another tool's arguments.

Called from ``CallPath._succeeded`` for every successful proxied call. Per session it keeps a bounded
window (the last ``WINDOW_CALLS`` calls, at most ``WINDOW_VALUES`` values) of **keyed hashes** of the
scalar leaves of each result (structured content; else JSON parsed from the text content; else
nothing), each with the producing tool and the leaf's field path. A call's argument leaves are hashed
the same way and looked up: a hit is a sighting ``consumer.param ← producer``
(``toolweave.registry.evidence``), handed to the registry's buffer. Values themselves are never kept,
logged or written: the hashes are HMAC-SHA256 under a random key made when the process starts and
never stored, so even the window cannot be matched against guesses from outside the process.

What counts as evidence (``specific``): not None, not a boolean, not an integer below 10 in size,
not a string shorter than 3 characters or one of ``COMMON_WORDS``; the rest get a specificity from 0
to 1 by how much they say (digits of a number; length, digits and separators of a string). A value
that more than ``MAX_PRODUCERS`` tools of the window returned is dropped as ambiguous, and one that
two did is split between them. A tool echoing its own argument back does not produce it; a tool
feeding itself is ignored. Private tools (``Registry.set_private``) are never observed, neither as
producers nor as consumers. A call right after another in the same turn (no ``find_tools`` or host
turn between them) with nothing flowing between them is a sequence sighting, and every tool's first
call in a session is counted (``Sighting.producer`` empty).

Cost: a walk over at most ``MAX_LEAVES`` leaves per result and one HMAC per leaf (bench/HISTORY.md).
"""

from __future__ import annotations

import hmac
import json
import os
import re
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from toolweave.registry.evidence import Sighting, field_name, session_hash

__all__ = [
    "COMMON_WORDS",
    "MAX_LEAVES",
    "MAX_PRODUCERS",
    "WINDOW_CALLS",
    "WINDOW_VALUES",
    "TrafficObserver",
    "specificity",
]

WINDOW_CALLS = 64
"""Calls of one session whose results can still be matched."""
WINDOW_VALUES = 512
"""Hashed values held per session (the oldest go first). With ``MAX_SESSIONS`` windows full, about 45 MB
at worst; a BFCL dialogue's window holds at most 36."""
MAX_LEAVES = 256
"""Scalar leaves hashed per result or per call's arguments: a huge result costs no more than this."""
MAX_TEXT_CHARS = 65_536
"""Text content longer than this is not parsed for JSON."""
MAX_PRODUCERS = 2
"""A value more tools than this returned in the window is no evidence for any of them."""
MAX_SESSIONS = 256
"""Session windows kept (least recently used dropped), as many as the gateway keeps sessions: bounded
memory whatever the clients do."""
MAX_DEPTH = 8
STRUCTURED_FULL_AT = 5
"""Characters at which a string with digits or separators (an id, a date, a path) is fully specific."""
NAME_FULL_AT = 4.0
"""Characters at which a string with capitals and no separators (a code, a name) is fully specific:
``AAPL``, ``Rivermist`` (``SFO``: 0.75). Chosen with ``SESSION_DECAY`` (``bench/traffic_calibration.py``)."""
WORD_FULL_AT = 12.0
"""Characters at which a lowercase word or phrase is fully specific."""

COMMON_WORDS = frozenset(
    [
        "true",
        "false",
        "none",
        "null",
        "nil",
        "yes",
        "no",
        "ok",
        "okay",
        "success",
        "successful",
        "error",
        "failed",
        "failure",
        "done",
        "pending",
        "active",
        "inactive",
        "enabled",
        "disabled",
        "open",
        "closed",
        "on",
        "off",
        "all",
        "any",
        "default",
        "unknown",
        "empty",
        "valid",
        "invalid",
        "new",
        "old",
        "high",
        "low",
        "medium",
        "normal",
        "asc",
        "desc",
    ]
)
"""Strings that say nothing about where they came from, whatever their length."""

_STRUCTURE = re.compile(r"[0-9\-_./:@#]")


def specificity(value: Any) -> float:
    """How much ``value`` tells about where it came from: 0 (no evidence) to 1 (module docstring).

    Numbers by their significant digits (10-99: 0.25, 100-999: 0.5, 1000-9999: 0.75, more: 1; 2.5:
    0.25, 227.16: 1); strings by length, faster when they carry digits or separators (ids, dates,
    paths, emails: ``ORD-7`` is 1, ``report.txt`` 1) or capitals (codes and names: ``SFO`` 0.75,
    ``Paris`` 1) than plain lowercase words (``hello world`` 0.92, ``admin`` 0.42)."""
    if isinstance(value, str):
        return _string_specificity(value)
    if value is None or isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        if isinstance(value, float) and not value.is_integer():
            digits = len(repr(abs(value)).replace(".", "").lstrip("0").split("e")[0])
        elif abs(value) < 10:
            return 0.0
        else:
            digits = len(str(int(abs(value))))
        return max(0.0, min(1.0, (digits - 1) * 0.25))
    return 0.0


def _string_specificity(value: str) -> float:
    text = value.strip()
    if len(text) < 3 or text.lower() in COMMON_WORDS:
        return 0.0
    if _STRUCTURE.search(text):
        return min(1.0, len(text) / STRUCTURED_FULL_AT)
    if text.lower() != text:  # a code or a name: SFO, AAPL, Rivermist
        return min(1.0, len(text) / NAME_FULL_AT)
    return min(1.0, len(text) / WORD_FULL_AT)


def _canonical(value: Any) -> bytes:
    """What makes two values the same: numbers by value (5 == 5.0), strings exactly (trimmed)."""
    if isinstance(value, int | float):
        return b"n" + (str(int(value)) if float(value).is_integer() else repr(float(value))).encode()
    return b"s" + str(value).strip().encode("utf-8", "surrogatepass")


def leaves(value: Any, limit: int) -> list[tuple[str, Any]]:
    """The first ``limit`` ``(field path, scalar)`` pairs inside ``value`` (dict keys joined by dots,
    list items as ``[]``, a key that is a value, like an account id keying a map, as ``*``), depth
    first, at most ``MAX_DEPTH`` deep. JSON data: dicts and lists (an explicit stack and plain loops, no
    generator per level: this runs on every call)."""
    out: list[tuple[str, Any]] = []
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    push = stack.append
    while stack and len(out) < limit:
        path, item, depth = stack.pop()
        if isinstance(item, dict):
            if depth < MAX_DEPTH:
                prefix, depth = (f"{path}." if path else ""), depth + 1
                for key, v in reversed(item.items()):
                    push((prefix + (_FIELD_NAMES.get(key) or _key_name(key)), v, depth))
        elif isinstance(item, list | tuple):
            if depth < MAX_DEPTH:
                path, depth = f"{path}[]", depth + 1
                for v in reversed(item):
                    push((path, v, depth))
        else:
            out.append((path, item))
    return out


_FIELD_NAMES: dict[Any, str] = {}
"""Keys found to be field names (``field_name``), each to itself: looked up instead of matched again on
every call. Keys that are values (``*``) are matched every time and never kept here."""
_MAX_FIELD_NAMES = 4096


def _key_name(key: Any) -> str:
    name = field_name(str(key))
    if name == key and len(_FIELD_NAMES) < _MAX_FIELD_NAMES:
        _FIELD_NAMES[key] = name
    return name


def result_value(result: types.CallToolResult) -> Any:
    """What a result says as data: its structured content, else JSON in its text, else None."""
    if result.structured_content is not None:
        return result.structured_content
    for block in result.content:
        text = getattr(block, "text", None)
        if isinstance(text, str) and len(text) <= MAX_TEXT_CHARS and text.lstrip()[:1] in ("{", "["):
            try:
                return json.loads(text)
            except ValueError:
                continue
    return None


@dataclass(slots=True)
class _Held:
    producer: str
    path: str
    call: int


@dataclass
class _Window:
    """One session's recent results, as keyed hashes (module docstring)."""

    key: int
    values: OrderedDict[bytes, list[_Held]] = field(default_factory=OrderedDict)
    calls: int = 0
    last_tool: str = ""
    last_turn: int = -2
    counted: set[str] = field(default_factory=set)
    """Tools whose call in this session was counted already."""


class TrafficObserver:
    """Per-session windows of hashed result values, and the sightings each call makes (module docstring)."""

    def __init__(self) -> None:
        self._key = os.urandom(32)  # never stored: hashes from another process cannot be compared
        self._windows: OrderedDict[str, _Window] = OrderedDict()

    def _hash(self, value: Any) -> bytes:
        return hmac.digest(self._key, _canonical(value), "sha256")[:16]

    def _window(self, session_key: str) -> _Window:
        window = self._windows.get(session_key)
        if window is None:
            digest = hmac.digest(self._key, b"session\x00" + session_key.encode(), "sha256")
            window = self._windows[session_key] = _Window(session_hash(digest))
            while len(self._windows) > MAX_SESSIONS:
                self._windows.popitem(last=False)
        else:
            self._windows.move_to_end(session_key)
        return window

    def observe(
        self,
        session_key: str,
        tool: str,
        arguments: Mapping[str, Any],
        result: types.CallToolResult,
        turn: int,
        *,
        private: bool = False,
    ) -> list[Sighting]:
        """A successful call of ``tool`` (not ``private``): the sightings it makes, and its result's values
        into the session's window. ``turn`` is the session's turn counter at the call."""
        if private:
            return []
        window = self._window(session_key)
        window.calls += 1
        now = time.time_ns()
        adjacent_to = window.last_tool if turn == window.last_turn + 1 else ""
        sightings, argument_hashes = self._sightings(window, tool, arguments, adjacent_to, now)
        if adjacent_to and adjacent_to != tool and not any(s.producer == adjacent_to for s in sightings):
            sightings.append(Sighting(tool, "", adjacent_to, "", 0.0, window.key, True, now))
        if tool not in window.counted:
            window.counted.add(tool)
            sightings.append(Sighting(tool, "", "", "", 0.0, window.key, False, now))
        self._hold(window, tool, result, argument_hashes)
        window.last_tool, window.last_turn = tool, turn
        return sightings

    def _sightings(
        self, window: _Window, tool: str, arguments: Mapping[str, Any], adjacent_to: str, now: int
    ) -> tuple[list[Sighting], set[bytes]]:
        out: list[Sighting] = []
        hashes: set[bytes] = set()
        seen: set[tuple[str, str]] = set()  # (parameter, producer): one sighting each per call
        oldest = window.calls - WINDOW_CALLS
        budget = MAX_LEAVES
        for parameter, value in arguments.items():
            found = leaves(value, budget)
            budget -= len(found)
            for _path, leaf in found:
                weight = specificity(leaf)
                if weight <= 0:
                    continue
                digest = self._hash(leaf)
                hashes.add(digest)
                held = [h for h in window.values.get(digest, ()) if h.call > oldest and h.producer != tool]
                producers = {h.producer for h in held}
                if not producers or len(producers) > MAX_PRODUCERS:
                    continue
                for h in held[::-1]:  # newest first: its field path is the one reported
                    if (parameter, h.producer) in seen:
                        continue
                    seen.add((parameter, h.producer))
                    out.append(
                        Sighting(
                            tool,
                            field_name(str(parameter)),
                            h.producer,
                            h.path,
                            weight / len(producers),
                            window.key,
                            h.producer == adjacent_to,
                            now,
                        )
                    )
        return out, hashes

    def _hold(self, window: _Window, tool: str, result: types.CallToolResult, echoed: set[bytes]) -> None:
        """The result's specific values into the window (see the comment on echoed values)."""
        value = result_value(result)
        if value is None:
            return
        values = window.values
        for path, leaf in leaves(value, MAX_LEAVES):
            if specificity(leaf) <= 0:
                continue
            digest = self._hash(leaf)
            # A value this call was given and hands back passed through it: the tool is now where a
            # later call reads it from (the latest holder), not a second, independent producer.
            held = [] if digest in echoed else [h for h in values.pop(digest, ()) if h.producer != tool]
            values.pop(digest, None)
            held.append(_Held(tool, path, window.calls))
            values[digest] = held[-MAX_PRODUCERS - 1 :]
        while len(values) > WINDOW_VALUES:
            values.popitem(last=False)

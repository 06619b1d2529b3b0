"""Kinds of values: what a tool parameter takes (read from its schema), and which kinds a request holds
(the lab's "a parameter the request supplies is not walked", measured and not shipped: walk_lab.py).

A dependency edge says where a parameter's value comes from (``get_order_details.order_id`` ←
``place_order``). Whether the walk needs that producer depends on the request: "details of order
84-1193" already holds an order id, "details of my last order" does not. The kinds here are the ones a
user rarely types but tools pass around: ids, dates and times, tokens, file paths and URLs, emails,
coordinates. Anything else (a city, a message, an amount) is ``None``: no kind, nothing to look for.

Both sides are cheap and pure (no I/O): a parameter is classified from its name, JSON Schema ``format``
and description once per schema; a request is scanned with a few regular expressions once per turn
(27-56 µs CPU per request on the loaded 2-core machine).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

from toolweave.names import name_words

__all__ = ["VALUE_KINDS", "ValueKind", "parameter_kind", "request_kinds"]

ValueKind = Literal["id", "datetime", "token", "path", "url", "email", "coordinates"]
VALUE_KINDS: tuple[ValueKind, ...] = get_args(ValueKind)

_FORMATS: dict[str, ValueKind] = {
    "date": "datetime",
    "date-time": "datetime",
    "time": "datetime",
    "email": "email",
    "idn-email": "email",
    "uri": "url",
    "url": "url",
    "iri": "url",
    "uri-reference": "url",
    "uuid": "id",
}
# The last word of a parameter's name says what it holds (``start_date``, ``user_email_address``); these
# words are read after holder words like "address" or "string" are dropped.
_HEAD_WORDS: dict[str, ValueKind] = {
    **dict.fromkeys(("id", "ids", "uuid", "guid", "identifier", "uid", "pid"), "id"),
    **dict.fromkeys(("date", "datetime", "timestamp", "time", "deadline", "epoch"), "datetime"),
    **dict.fromkeys(("token", "jwt", "apikey", "session", "credential", "credentials"), "token"),
    **dict.fromkeys(("path", "filepath", "filename", "file", "dir", "directory", "folder"), "path"),
    **dict.fromkeys(("url", "uri", "link", "href", "endpoint"), "url"),
    **dict.fromkeys(("email", "mail"), "email"),
    **dict.fromkeys(
        ("latitude", "longitude", "lat", "lon", "lng", "coordinates", "coordinate"), "coordinates"
    ),
}
_HOLDERS = frozenset({"address", "string", "value", "str", "text", "name", "number", "no", "key"})
_KEY_WORDS = frozenset({"api", "access", "auth", "secret", "session", "bearer", "refresh"})
_DATE_HINT = re.compile(r"\b(?:yyyy|mm/dd|dd/mm|iso ?8601|hh:mm)\b", re.IGNORECASE)


def parameter_kind(name: str, schema: Mapping[str, Any] | None = None) -> ValueKind | None:
    """The kind of value parameter ``name`` (with its JSON Schema, when known) takes, or None."""
    schema = schema or {}
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt.lower() in _FORMATS:
        return _FORMATS[fmt.lower()]
    words = name_words(name).split()
    if not words:
        return None
    if len(words) > 1 and words[-1] == "at":  # created_at, remind_at
        return "datetime"
    if words[-1] in ("key", "id") and len(words) > 1 and words[-2] in _KEY_WORDS:
        return "token"  # api_key, session_id: a credential, not a thing's id
    while len(words) > 1 and words[-1] in _HOLDERS:
        words = words[:-1]  # user_email_address -> email; order_number -> order (no kind)
    head = words[-1]
    if head in _HEAD_WORDS:
        return _HEAD_WORDS[head]
    if head.endswith("id") and len(head) > 3 and name[-2:] in ("Id", "ID", "id"):
        return "id"  # userid, orderId written as one word
    description = schema.get("description")
    if isinstance(description, str) and _DATE_HINT.search(description):
        return "datetime"
    return None


_MONTHS = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_REQUEST_PATTERNS: dict[ValueKind, re.Pattern[str]] = {
    "email": re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+"),
    "url": re.compile(
        r"\bhttps?://\S+|\bwww\.[\w-]+\.\S+|\b[\w-]+\.(?:com|org|net|io|dev)/\S*", re.IGNORECASE
    ),
    "path": re.compile(
        r"(?:^|[\s'\"(])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]*)*"  # /var/log, ~/notes, ./src/app.py
        r"|\b[\w-]+\.(?:txt|pdf|csv|json|jsonl|ya?ml|xml|html?|md|py|js|ts|java|c|cpp|go|rs|rb|sh|log|docx?"
        r"|xlsx?|pptx?|png|jpe?g|gif|svg|mp[34]|wav|zip|tar|gz|db|sql|ini|cfg|conf|toml)\b",
        re.IGNORECASE,
    ),
    # a complete date (a year in it): "3 PM", "tomorrow", "next Monday" or "25th of December" need today's
    # date or the time zone to become a value, so a tool that gives those is still needed
    "datetime": re.compile(
        r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}[/.]\d{1,2}[/.]\d{4}\b"
        rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b"
        rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\.?,?\s+\d{{4}}\b",
        re.IGNORECASE,
    ),
    "coordinates": re.compile(
        r"-?\b\d{1,3}\.\d{2,}\s*[,;/]\s*-?\d{1,3}\.\d{2,}\b|\b(?:latitude|longitude)\b", re.I
    ),
    "token": re.compile(r"\b(?=[A-Za-z0-9_\-.]*\d)(?=[A-Za-z0-9_\-.]*[A-Za-z])[A-Za-z0-9_\-.]{24,}\b"),
}


_UUID_OR_NUMBERED = re.compile(
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|#\s?\d+\b", re.IGNORECASE
)
_CODE = re.compile(r"\b[A-Za-z0-9][A-Za-z0-9_-]{3,}\b")
_NOT_A_CODE = re.compile(
    r"(?:19|20)\d{2}s?|\d+(?:st|nd|rd|th|am|pm|s|k|m|gb|mb|kb|km|kg|mi|ms|h|hrs?|min|mins|px|x)"
    r"|\d+(?:[.,]\d+)+|\d+(?:-[a-z]+)+|\d{4}-\d{1,2}-\d{1,2}",  # a year, an ordinal, a measure
    # (30-minute), an amount, a date
    re.IGNORECASE,
)


def _holds_id(text: str) -> bool:
    """An id-like value: a UUID, a number after a hash sign, or a code that mixes digits with letters
    or is a long number (``ORD-1193``, ``A1B2``, ``84119``), not a year, an ordinal, an amount or a
    measure (``2020``, ``12th``, ``1,500``, ``10km``)."""
    if _UUID_OR_NUMBERED.search(text):
        return True
    for code in _CODE.findall(text):
        if not any(c.isdigit() for c in code) or _NOT_A_CODE.fullmatch(code):
            continue
        if any(c.isalpha() for c in code) or len(code) >= 5:  # a bare number: only a long one
            return True
    return False


def request_kinds(text: str) -> frozenset[ValueKind]:
    """The kinds of values ``text`` holds: a date or time, an email, an id-like code, a path..."""
    kinds = {kind for kind, pattern in _REQUEST_PATTERNS.items() if pattern.search(text)}
    if _holds_id(text):
        kinds.add("id")
    return frozenset(kinds)

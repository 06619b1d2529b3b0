"""Whether a request already holds the value a tool parameter takes: the walk's request-value rule, a
lab variant measured and not shipped (bench/HISTORY.md, "The request supplies it").

A dependency edge says where a parameter's value *can* come from (``get_order_details.order_id`` ←
``place_order``). Whether a turn needs that producer depends on the request: "details of order
ORD-1193" holds an order id, "details of my last order" does not. Two sides, both pure and cheap:

- ``parameter_shape(name, schema)`` reads what a parameter takes from its JSON Schema and its name: a
  kind of value (a number, a date, a clock time, an email, a URL, a path, an id, coordinates, a token),
  the members of its ``enum``, its ``pattern``;
- ``request_values(text)`` scans a request once for the literal values it holds: numbers, complete dates,
  clock times, emails, URLs, paths, id-like codes, coordinates, tokens, quoted strings.

``supplies(values, shape)`` then says whether the request holds a value of the parameter's shape: a
literal of its kind, an ``enum`` member named as words ("Italian" for ``cuisine_type``), a literal its
``pattern`` matches in full. A number counts only where the request names the quantity
(``numbers="named"``: "a principal of 5000", "150 square meters" for ``property_size_m2``) or, looser,
anywhere (``numbers="any"``). A date counts only when it is complete (a year in it): "tomorrow" or "next
Monday" need today's date to become one. A parser, not a list of datasets' parameters.

``Supplied`` puts the two together for one turn of the walk: which producers the request spares.
``walk_variants.LabChooser`` applies it through the product walk's public seam (``WalkPolicy.chooser``);
the product never walked with it on (it lifted NESTFUL's gold graph in sample, cost ToolLinkOS's declared
graph, and held out of sample nowhere), so it left the product for this lab.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from toolweave.names import name_words
from toolweave.records import DependencyEdge

__all__ = [
    "NumberRule",
    "ParameterShape",
    "RequestValues",
    "SchemaLookup",
    "Supplied",
    "ValueKind",
    "parameter_shape",
    "request_values",
    "supplies",
    "takes_value",
]

ValueKind = Literal["number", "date", "time", "email", "url", "path", "id", "coordinates", "token"]
NumberRule = Literal["off", "named", "any"]
"""When a request's number supplies a number parameter: never, when the request names the quantity
next to the number, or whenever it holds a number."""
SchemaLookup = Callable[[str], Mapping[str, Any] | None]
"""``schema_of(tool_id)`` → the tool's input JSON Schema (None when unknown)."""

_FORMATS: dict[str, ValueKind] = {
    **dict.fromkeys(("date", "date-time", "datetime"), "date"),
    "time": "time",
    **dict.fromkeys(("email", "idn-email"), "email"),
    **dict.fromkeys(("uri", "url", "iri", "uri-reference", "iri-reference"), "url"),
    "uuid": "id",
}
_NUMBER_TYPES = frozenset({"number", "integer", "int", "float", "double", "long"})
# The last word of a parameter's name says what it holds (``start_date``, ``user_email_address``); read
# after holder words like "address" or "string" are dropped.
_HEAD_WORDS: dict[str, ValueKind] = {
    **dict.fromkeys(("id", "ids", "uuid", "guid", "identifier", "uid", "pid"), "id"),
    # a parameter named for a time without a ``format: time`` is a point in time ("remind me at 3 PM
    # tomorrow" needs today's date to become one): read as a date, which only a complete date supplies
    **dict.fromkeys(("date", "datetime", "timestamp", "deadline", "epoch", "time"), "date"),
    **dict.fromkeys(("token", "jwt", "apikey", "credential", "credentials"), "token"),
    **dict.fromkeys(("path", "filepath", "filename", "file", "dir", "directory", "folder"), "path"),
    **dict.fromkeys(("url", "uri", "link", "href", "endpoint", "website"), "url"),
    **dict.fromkeys(("email", "mail"), "email"),
    **dict.fromkeys(
        ("latitude", "longitude", "lat", "lon", "lng", "coordinates", "coordinate"), "coordinates"
    ),
}
_HOLDERS = frozenset({"address", "string", "value", "str", "text", "name", "number", "no", "key", "code"})
_KEY_WORDS = frozenset({"api", "access", "auth", "secret", "session", "bearer", "refresh"})
_DATE_HINT = re.compile(r"\b(?:yyyy|mm/dd|dd/mm|iso ?8601)\b", re.IGNORECASE)
_STOP = frozenset({"of", "the", "a", "an", "in", "to", "for", "per", "by", "and", "or", "is", "my"})


@dataclass(frozen=True)
class ParameterShape:
    """What a parameter takes, as far as a request's literals can show it."""

    kind: ValueKind | None = None
    enum: tuple[str, ...] = ()
    """Its members as lowercase words (``premium_economy`` → ``premium economy``)."""
    pattern: str | None = None
    words: tuple[str, ...] = ()
    """The name's words that say what the quantity is (``property_size_m2`` → property, size, m2)."""


def parameter_shape(name: str, schema: Mapping[str, Any] | None = None) -> ParameterShape:
    """The shape of parameter ``name`` with its JSON Schema (when known)."""
    schema = schema or {}
    members = schema.get("enum")
    if not isinstance(members, list):
        items = schema.get("items")
        members = items.get("enum") if isinstance(items, Mapping) else None
    enum = tuple(w for m in members or () if isinstance(m, str) and (w := name_words(m))) if members else ()
    pattern = schema.get("pattern")
    words = tuple(w for w in name_words(name).split() if w not in _STOP)
    return ParameterShape(
        _kind(name, schema),
        enum,
        pattern if isinstance(pattern, str) and _usable(pattern) else None,
        words,
    )


def _kind(name: str, schema: Mapping[str, Any]) -> ValueKind | None:
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt.lower() in _FORMATS:
        return _FORMATS[fmt.lower()]
    words = name_words(name).split()
    if words:
        if len(words) > 1 and words[-1] == "at":  # created_at, remind_at
            return "date"
        if words[-1] in ("key", "id") and len(words) > 1 and words[-2] in _KEY_WORDS:
            return "token"  # api_key, session_id: a credential, not a thing's id
        while len(words) > 1 and words[-1] in _HOLDERS:
            words = words[:-1]  # user_email_address -> email; order_number -> order
        head = words[-1]
        if head in _HEAD_WORDS:
            return _HEAD_WORDS[head]
        if head.endswith("id") and len(head) > 3 and name[-2:] in ("Id", "ID", "id"):
            return "id"  # userid, orderId written as one word
    description = schema.get("description")
    if isinstance(description, str) and _DATE_HINT.search(description):
        return "date"
    kind = schema.get("type")
    if isinstance(kind, str) and kind.lower() in _NUMBER_TYPES:
        return "number"
    return None


def _compiled(pattern: str) -> re.Pattern[str] | None:
    # ``re`` keeps the patterns it compiled last: a schema's pattern is compiled once in practice
    try:
        return re.compile(pattern)
    except (re.error, RecursionError):
        return None


def _usable(pattern: str) -> bool:
    """A pattern that tells values apart: it compiles and refuses an empty string and a plain word."""
    compiled = _compiled(pattern)
    return compiled is not None and not any(compiled.fullmatch(s) for s in ("", "word", "the"))


_MONTHS = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_PATTERNS: dict[ValueKind, re.Pattern[str]] = {
    "email": re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+"),
    "url": re.compile(
        r"\bhttps?://\S+|\bwww\.[\w-]+\.\S+|\b[\w-]+\.(?:com|org|net|io|dev)/\S*", re.IGNORECASE
    ),
    "path": re.compile(
        r"(?:^|(?<=[\s'\"(]))(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]*)*"  # /var/log, ~/notes, ./src/app.py
        r"|\b[\w-]+\.(?:txt|pdf|csv|json|jsonl|ya?ml|xml|html?|md|py|js|ts|java|go|rs|rb|sh|log|docx?"
        r"|xlsx?|pptx?|png|jpe?g|gif|svg|mp[34]|wav|zip|tar|gz|db|sql|ini|cfg|conf|toml)\b",
        re.IGNORECASE,
    ),
    # a complete date (a year in it): "tomorrow", "next Monday" or "25th of December" need today's date to
    # become a value, so a tool that gives it is still needed
    "date": re.compile(
        r"\b\d{4}-\d{1,2}-\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}[/.]\d{1,2}[/.]\d{4}\b"
        rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b"
        rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\.?,?\s+\d{{4}}\b",
        re.IGNORECASE,
    ),
    "time": re.compile(
        r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?)?|\b\d{1,2}\s*[ap]\.?m\b", re.IGNORECASE
    ),
    "coordinates": re.compile(r"-?\b\d{1,3}\.\d{2,}\s*[,;/]\s*-?\d{1,3}\.\d{2,}\b"),
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
_NUMBER = re.compile(r"(?<![\w.\-/])[-+]?[$€£]?\d+(?:,\d{3})*(?:\.\d+)?%?(?![\w@])")
_QUOTED = re.compile(r"\"([^\"]{1,200})\"|“([^”]{1,200})”|(?<!\w)'([^']{1,200})'(?!\w)")
_TOKEN = re.compile(r"[^\s,;()\[\]{}<>!?]+")
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class RequestValues:
    """The literal values one request holds (``request_values``)."""

    text: str
    kinds: frozenset[ValueKind]
    words: tuple[str, ...]
    """The request's words, lowercase, in order (what enum members and quantity names are read in)."""
    placed: tuple[tuple[ValueKind, int], ...]
    """Each number (not part of a date, time or URL) and each id-like code the request holds, with the
    index in ``words`` of the word right after it: whose value it is shows in the words around it."""
    literals: tuple[str, ...]
    """Candidates for a ``pattern``: quoted strings and the request's tokens, edge punctuation cut."""


def request_values(text: str) -> RequestValues:
    """The values ``text`` holds: the kinds of its literals, and where its numbers and ids stand."""
    kinds = {kind for kind, pattern in _PATTERNS.items() if pattern.search(text)}
    spans: list[tuple[int, int, ValueKind]] = [(start, end, "id") for start, end in _id_spans(text)]
    # a number inside a date, a time, a URL or a code is no quantity: blank those out first
    rest = text
    for kind in ("email", "url", "path", "date", "time", "coordinates", "token"):
        rest = _PATTERNS[kind].sub(lambda m: " " * len(m.group(0)), rest)
    spans += [(m.start(), m.end(), "number") for m in _NUMBER.finditer(rest) if not _is_year(m.group(0))]
    kinds.update(kind for _, _, kind in spans)
    words: list[str] = []
    placed: list[tuple[ValueKind, int]] = []
    last = 0
    for start, end, kind in sorted(spans):
        if start >= last:  # a long bare number is an id and a number: its words are read once
            words.extend(_words(text[last:start]))
            last = end
        placed.append((kind, len(words)))
    words.extend(_words(text[last:]))
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]
    literals = [*quoted, *(t.strip(".:'\"") for t in _TOKEN.findall(text))]
    return RequestValues(text, frozenset(kinds), tuple(words), tuple(placed), tuple(literals))


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _is_year(number: str) -> bool:
    return len(number) == 4 and number.isdigit() and number[:2] in ("19", "20")


def _id_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds an id-like value: a UUID, a number after a hash sign, or a code that mixes
    digits with letters or is a long number (``ORD-1193``, ``A1B2``, ``84119``), not a year, an ordinal,
    an amount or a measure (``2020``, ``12th``, ``1,500``, ``10km``)."""
    spans = [m.span() for m in _UUID_OR_NUMBERED.finditer(text)]
    for m in _CODE.finditer(text):
        code = m.group(0)
        if not any(c.isdigit() for c in code) or _NOT_A_CODE.fullmatch(code):
            continue
        if any(c.isalpha() for c in code) or len(code) >= 5:  # a bare number: only a long one
            spans.append(m.span())
    return spans


def supplies(values: RequestValues, shape: ParameterShape, numbers: NumberRule = "named") -> bool:
    """Whether the request holds a value of ``shape``: an enum member named, a literal its pattern
    matches, a literal of its kind (a number: as ``numbers`` says)."""
    if shape.enum and any(_says(values.words, member.split()) for member in shape.enum):
        return True
    if shape.pattern is not None:
        compiled = _compiled(shape.pattern)
        if compiled is not None and any(compiled.fullmatch(lit) for lit in values.literals):
            return True
    kind = shape.kind
    if kind is None or kind not in values.kinds:
        return False
    if kind == "id":  # whose id it is shows in the words around it ("order ORD-1193", "user USR001")
        return _named(values, "id", shape.words)
    if kind != "number" or numbers == "any":
        return True
    return numbers == "named" and _named(values, "number", shape.words)


def _says(words: tuple[str, ...], phrase: list[str]) -> bool:
    """Whether ``phrase`` occurs in ``words`` as consecutive words."""
    n = len(phrase)
    if not n or len(" ".join(phrase)) < 3:
        return False
    return any(list(words[i : i + n]) == phrase for i in range(len(words) - n + 1))


_BEFORE, _AFTER = 3, 2
"""A value is named by one of the parameter's words this close before or after it (in words): "a
principal of 5000", "order with id 12446", "10,000 steps", "150 square meters" (``size_meters``)."""


_GENERIC = frozenset({"id", "ids", "identifier", "uuid", "guid", "uid", "number", "no", "code", "value"})
"""Words that say a value is an id or a number, not whose: "order" in ``order_id`` names it."""


def _named(values: RequestValues, kind: ValueKind, name: tuple[str, ...]) -> bool:
    """Whether a value of ``kind`` stands next to a word of the parameter's name (``_BEFORE``,
    ``_AFTER``); a parameter whose name says nothing more than "id" takes any."""
    stems = {_stem(w) for w in name if len(w) > 1 and w not in _GENERIC}
    places = [at for k, at in values.placed if k == kind]
    if not stems:
        return bool(places)
    for at in places:
        near = values.words[max(0, at - _BEFORE) : at + _AFTER]
        if any(_stem(w) in stems for w in near):
            return True
    return False


def _stem(word: str) -> str:
    for suffix in ("es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def takes_value(schema: Mapping[str, Any] | None, param: str, shape: ParameterShape) -> bool:
    """Whether a tool whose input schema is ``schema`` takes the value of parameter ``param`` (of
    ``shape``) itself: a parameter of the same kind, or named by the same last word (``file_name`` and a
    file search's ``name``). It converts or checks such a value (a unit converter, an email validator, a
    search that makes sure the file exists) rather than only produces one."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return False
    last = name_words(param).split()[-1:]
    for name, spec in props.items():
        if last and name_words(str(name)).split()[-1:] == last:
            return True
        kind = parameter_shape(str(name), spec if isinstance(spec, Mapping) else None).kind
        if shape.kind is not None and kind == shape.kind:
            return True
    return False


class Supplied:
    """Which parameters one request already gives a value of, and which producers that spares.

    ``numbers``: when a number counts (``NumberRule``); ``converters``: a producer that takes the value
    itself (a unit converter, an email validator: ``takes_value``) is not spared; ``learned``: the rule
    applies to learned edges too (traffic saw the value come from the producer in other sessions; this
    request may hold it).
    """

    def __init__(
        self,
        request: str,
        schema_of: SchemaLookup,
        *,
        numbers: NumberRule = "named",
        converters: bool = True,
        learned: bool = True,
    ) -> None:
        self.values, self.schema_of = request_values(request), schema_of
        self.numbers, self.converters, self.learned = numbers, converters, learned
        self._answers: dict[tuple[str, str, str], bool] = {}

    def spares(self, edge: DependencyEdge) -> bool:
        """Whether the request holds the value ``edge`` would produce, so its producer is not needed."""
        param = edge.parameter_name
        if param is None or (edge.origin == "learned" and not self.learned):
            return False
        key = (edge.tool, param, edge.depends_on)
        if key not in self._answers:
            self._answers[key] = self._spares(edge.tool, param, edge.depends_on)
        return self._answers[key]

    def _spares(self, tool: str, param: str, producer: str) -> bool:
        props = (self.schema_of(tool) or {}).get("properties")
        spec = props.get(param) if isinstance(props, Mapping) else None
        shape = parameter_shape(param, spec if isinstance(spec, Mapping) else None)
        if not supplies(self.values, shape, self.numbers):
            return False
        if self.converters:
            return not takes_value(self.schema_of(producer), param, shape)
        return True

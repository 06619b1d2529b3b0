"""What a tool is about and what it produces, read from its own name, description and schemas.

A ``ToolProfile`` is computed once per tool and is all the rules look at. It never sees declared
edges, ``depends_on`` fields or queries: ``ToolRecord`` carries none of those.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from toolweave.inference.fields import Field, input_fields, output_fields
from toolweave.inference.text import AMBIENT_QUALIFIERS, singular, split_verb, words, wordset
from toolweave.records import ToolRecord

__all__ = [
    "AUTH_WORDS",
    "GENERIC_NAME_WORDS",
    "VALUE_FAMILIES",
    "ToolProfile",
    "param_family",
    "profile",
]

# Families of values that ambient "current state" tools supply as defaults. Generic API vocabulary.
VALUE_FAMILIES: dict[str, frozenset[str]] = {
    "date": wordset("date day year month week today birthday datetime"),
    "time": wordset("time hour timestamp datetime clock"),
    "location": wordset(
        "location address coordinates latitude longitude lat lon lng position geolocation whereabouts"
    ),
    "language": wordset("language lang locale"),
    "timezone": wordset("timezone tz"),
}

AUTH_WORDS = wordset("login logon signin authenticate authentication authorize auth")
"""Words that make a tool an authentication step (``sign in`` is joined to ``signin`` first)."""

GENERIC_NAME_WORDS = wordset(
    "a an the to in on of for by with from and or via into at as is user users account accounts "
    "api app application data info information details item items status new my current system "
    "service services tool tools v1 v2 v3 id ids token session request response"
)
"""Words that do not name a service: what two tools of one service share is what is left."""

_T = TypeVar("_T")

_ID_SUFFIXES = {"identifier": "id", "ids": "id", "uuid": "id", "guid": "id"}


def _norm(ws: Iterable[str]) -> list[str]:
    return [_ID_SUFFIXES.get(w, singular(w)) for w in ws]


def _join_auth(ws: list[str]) -> list[str]:
    out: list[str] = []
    for w in ws:
        if out and out[-1] in ("sign", "log") and w in ("in", "on"):
            out[-1] = out[-1] + w  # "sign in" → "signin", "log in" → "login"
        else:
            out.append(w)
    return out


def param_family(param_words: Sequence[str]) -> str | None:
    """The value family of a parameter from its head word: ``start_year`` → ``date``."""
    if not param_words:
        return None
    head = param_words[-1]
    for family, vocab in VALUE_FAMILIES.items():
        if head in vocab:
            return family
    return None


_NAMESPACE = re.compile(r"[:/.]+")
# "... to obtain a request_uri": an identifier-shaped word (with an underscore) a tool says it hands back
_DESC_PRODUCES = re.compile(
    r"\b(?:returns?|obtains?|generates?|creates?|issues?|provides?|yields?)\s+(?:a|an|the)?\s*"
    r"([a-z][a-z0-9]*_[a-z0-9_]+)"
)
_RETURNS_CURRENT = re.compile(
    r"\b(?:returns?|gets?|retrieves?|fetch(?:es)?|provides?|reports?)\s+(?:the\s+)?(?:current|today'?s?|"
    r"system'?s?|present)\s+([a-z\-]+)"
)


@dataclass(frozen=True)
class ToolProfile:
    """The inference rules' view of one tool."""

    id: str
    source: str
    kind: str
    name_words: tuple[str, ...]
    verb: str
    object_words: tuple[str, ...]
    subject_words: tuple[str, ...]
    """``object_words`` without ambient qualifiers: ``get_current_location`` → ``("location",)``."""
    params: tuple[str, ...]
    required: tuple[str, ...]
    outputs: frozenset[str]
    """Output field names (top level) and identifiers the description says it returns."""
    description: str
    service_words: frozenset[str] = field(default_factory=frozenset)
    families: frozenset[str] = field(default_factory=frozenset)
    """Value families this tool supplies as ambient state (``date`` for a current-date tool)."""
    formats: tuple[tuple[str, str], ...] = ()
    """``(parameter, JSON Schema format)`` of the inputs that declare one (``date-time``, ``email``)."""
    output_formats: frozenset[str] = field(default_factory=frozenset)
    """JSON Schema formats of the output fields (a ``date-time`` field makes this a timestamp source)."""
    inputs: tuple[Field, ...] = ()
    """The input fields, typed (an OpenAPI request body's fields too: ``body.petId``)."""
    returns: tuple[Field, ...] = ()
    """The output fields, typed, nested ones with the record they sit in (``fields.output_fields``)."""
    said: frozenset[str] = field(default_factory=frozenset)
    """Identifiers the description says the tool returns ("... to obtain a request_uri")."""
    _memo: dict[Hashable, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def memo(self, key: Hashable, compute: Callable[[ToolProfile], _T]) -> _T:
        """``compute(self)`` once per profile and ``key``: what a rule reads off this tool alone is kept
        as long as the profile is (an ingest into a large registry reuses unchanged tools' profiles)."""
        try:
            value: _T = self._memo[key]
        except KeyError:
            value = self._memo[key] = compute(self)
        return value

    @property
    def is_ambient(self) -> bool:
        """Reads state of the world or device and needs no input: a source of defaults."""
        return _is_ambient(self.verb, self.required)

    @property
    def is_auth(self) -> bool:
        """Logs in (``login_to_acme``, ``authenticate``); a reader of the login *status* does not."""
        reads_status = bool(self.subject_words) and self.subject_words[-1] in ("status", "state")
        return bool(AUTH_WORDS.intersection(self.name_words)) and not reads_status

    @property
    def is_validator(self) -> bool:
        return self.verb in ("validate", "verify") or (self.verb == "check" and "valid" in self.description)

    @property
    def is_converter(self) -> bool:
        return self.verb == "convert" and "unit" in self.description

    @property
    def is_setter(self) -> bool:
        return self.verb in ("set", "enable", "disable", "toggle", "turn", "update") and bool(self.params)

    @cached_property
    def status_capability(self) -> tuple[str, ...]:
        """For a status reader (``get_wifi_status``): the capability it reports on (``("wifi",)``)."""
        if self.verb not in ("get", "check", "read", "fetch", "") or self.required:
            return ()
        ws = list(self.subject_words)
        if ws and ws[-1] in ("status", "state"):
            cap = [w for w in ws[:-1] if w not in ("service", "mode")]
            return tuple(cap)
        return ()

    @cached_property
    def product_phrases(self) -> set[str]:
        """Names of what the tool hands back by its name and its description: its object, its object
        minus qualifiers, identifiers it says it returns. Output schema fields are the data-flow rule's
        (typed, nested, checked against the input)."""
        out = set(self.said)
        if self.object_words and self.verb:
            out.add("_".join(self.object_words))
            if self.subject_words:
                out.add("_".join(self.subject_words))
        return out


def _format(schema: object) -> bool:
    return isinstance(schema, dict) and isinstance(schema.get("format"), str)


def profile(tool: ToolRecord) -> ToolProfile:
    # namespaced names ("petstore:getPetById", "github.create_issue"): the last segment says what the
    # tool does, the namespace only which service it belongs to
    segments = [seg for seg in _NAMESPACE.split(tool.name) if seg]
    name_ws = _join_auth(_norm(words(tool.name)))
    verb, obj = split_verb(_join_auth(_norm(words(segments[-1] if segments else tool.name))))
    subject = [w for w in obj if w not in AMBIENT_QUALIFIERS and w not in ("for", "by", "of", "the")]
    props = tool.input_schema.get("properties") if isinstance(tool.input_schema, dict) else None
    params = tuple(props) if isinstance(props, dict) else ()
    req = tool.input_schema.get("required") if isinstance(tool.input_schema, dict) else None
    required = tuple(r for r in req if isinstance(r, str)) if isinstance(req, list) else ()
    out_props = (tool.output_schema or {}).get("properties") if isinstance(tool.output_schema, dict) else None
    outputs = (
        frozenset("_".join(_norm(words(k))) for k in out_props)
        if isinstance(out_props, dict)
        else frozenset()
    )
    in_fields = props if isinstance(props, dict) else {}
    out_fields = out_props if isinstance(out_props, dict) else {}
    formats = tuple((k, v["format"]) for k, v in in_fields.items() if _format(v))
    out_formats = frozenset(v["format"] for v in out_fields.values() if _format(v))
    desc = " ".join(tool.description.lower().replace("wi-fi", "wifi").split())
    said = {"_".join(_norm(words(m.group(1)))) for m in _DESC_PRODUCES.finditer(desc)}
    said = {x for x in said if x and not set(x.split("_")) & set(params)}
    outputs = outputs | said
    service = frozenset(
        w for w in name_ws if w not in GENERIC_NAME_WORDS and w not in AUTH_WORDS and w != verb and len(w) > 1
    )
    return ToolProfile(
        id=tool.id,
        source=tool.source,
        kind=tool.kind,
        name_words=tuple(name_ws),
        verb=verb,
        object_words=tuple(obj),
        subject_words=tuple(subject),
        params=params,
        required=required,
        outputs=outputs,
        said=frozenset(said),
        description=desc,
        service_words=service,
        formats=formats,
        output_formats=out_formats,
        inputs=input_fields(tool.input_schema),
        returns=output_fields(tool.output_schema),
        families=_families(subject, desc) if _is_ambient(verb, required) else frozenset(),
    )


def _is_ambient(verb: str, required: tuple[str, ...]) -> bool:
    return not required and verb in ("get", "fetch", "retrieve", "read", "", "check", "show")


def _families(subject: Sequence[str], desc: str) -> frozenset[str]:
    """The value families an ambient tool supplies: its subject's, or the current thing it returns."""
    families: set[str] = set()
    heads = [subject[-1]] if subject else []
    heads += [m.group(1) for m in _RETURNS_CURRENT.finditer(desc)][:1]
    for h in heads:
        fam = param_family([singular(h)])
        if fam:
            families.add(fam)
    if "datetime" in heads:
        families.update(("date", "time"))
    return frozenset(families)

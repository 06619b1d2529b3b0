"""Dependency edges between the operations of one spec.

Declared edges (``origin="declared"``, confidence 1) come from what spec authors wrote down:

* OpenAPI Link Objects: a link on operation A's response to operation B means B's parameter is fed by
  A's response, so B ``PARAMETER_DIRECTLY_DEPENDS_ON`` A (``TOOL_DIRECTLY_DEPENDS_ON`` if the link
  names no parameter).
* Arazzo workflows: a step whose parameters, request body or criteria reference ``$steps.X.*`` depends
  on step X's operation. Steps that run a nested workflow stand for that workflow's operations.

Inferred edges (``origin="inferred"``, with a confidence) come from two narrow heuristics, tuned to
add few edges rather than many:

* response field -> parameter: an id-like parameter (``petId``, ``pet_id``, or ``id`` under
  ``/pets/{id}``) is fed by the list / search / create operations of that resource whose response
  carries the id; failing that, by such operations returning a field of exactly that name.
* token: an operation with a security requirement depends on the operation that issues the token
  (the path of an oauth2 ``tokenUrl``, or a login/token endpoint without security of its own whose
  response has a ``token`` / ``access_token`` field).
"""

from __future__ import annotations

import logging
import re
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import Any

from toolweave.adapters.openapi.loader import SpecLoader
from toolweave.adapters.openapi.parser import Operation, ParsedSpec
from toolweave.errors import OpenAPISpecError
from toolweave.records import DependencyEdge, EdgeKind

__all__ = ["arazzo_edges", "infer_edges", "link_edges", "spec_edges"]

logger = logging.getLogger(__name__)

_STEP_REF = re.compile(r"\$steps\.([A-Za-z0-9_\-]+)")
_ID_PARAM = re.compile(
    r"^(?P<res>[A-Za-z][A-Za-z0-9]*?)[_-]?(?:id|Id|ID|uuid|Uuid|UUID|slug|Slug|number|Number)$"
)
_BARE_ID = frozenset({"id", "uuid", "slug"})
_TOKEN_FIELDS = frozenset(
    {
        "token",
        "access_token",
        "accessToken",
        "id_token",
        "idToken",
        "jwt",
        "auth_token",
        "authToken",
        "session_token",
        "sessionToken",
        "bearer_token",
    }
)
_AUTHISH = re.compile(r"(?i)(login|log-in|signin|sign-in|sign_in|token|oauth|auth|session)")
_SEARCHISH = re.compile(r"(?i)(find|search|list|query|all)")
_ACTION_SEGMENT = re.compile(r"(?i)^(find|search|list|query|by)([A-Z_-].*)?$")
_MAX_PRODUCERS = 2
_MAX_TOKEN_PRODUCERS = 2


def spec_edges(
    parsed: ParsedSpec, *, arazzo: Iterable[str] = (), loader: SpecLoader | None = None, infer: bool = True
) -> list[DependencyEdge]:
    """All edges of a parsed spec: links, Arazzo steps (files given by path) and, if asked, inferred ones."""
    edges = link_edges(parsed)
    for location in arazzo:
        doc, _ = (loader or parsed.loader).load(location)
        edges += arazzo_edges(parsed, doc, name=(loader or parsed.loader).display_name(location))
    if infer:
        edges += infer_edges(parsed)
    return _dedupe(edges)


def _dedupe(edges: Iterable[DependencyEdge]) -> list[DependencyEdge]:
    """One edge per key; a declared edge wins over an inferred one for the same key."""
    out: dict[tuple[Any, ...], DependencyEdge] = {}
    for edge in edges:
        if edge.tool == edge.depends_on:
            continue
        current = out.get(edge.key)
        if current is None or (current.origin == "inferred" and edge.origin == "declared"):
            out[edge.key] = edge
    return list(out.values())


def _edge(
    consumer: Operation,
    producer: Operation,
    reason: str,
    evidence: str,
    parameter_name: str | None = None,
    *,
    confidence: float | None = None,
) -> DependencyEdge:
    """``consumer`` needs ``producer``: through ``parameter_name`` if given, else as a whole tool. Edges
    with a ``confidence`` are inferred; those without are declared by the spec or an Arazzo document."""
    whole_tool = parameter_name is None
    return DependencyEdge(
        tool=consumer.tool.id,
        depends_on=producer.tool.id,
        kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON if whole_tool else EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON,
        parameter_name=parameter_name,
        reason=reason,
        origin="declared" if confidence is None else "inferred",
        confidence=1.0 if confidence is None else confidence,
        evidence=evidence,
    )


def _body_property(op: Operation) -> str:
    """The input property that carries ``op``'s request body."""
    return str((op.tool.backend.get("body") or {}).get("property", "body"))


# -- Link Objects ----------------------------------------------------------------------------------


def link_edges(parsed: ParsedSpec) -> list[DependencyEdge]:
    by_operation_id = {op.operation_id: op for op in parsed.operations if op.operation_id}
    by_route = {(op.path, op.method): op for op in parsed.operations}
    edges: list[DependencyEdge] = []
    for source in parsed.operations:
        for link_name, link, _ in source.links:
            target = _link_target(link, by_operation_id, by_route)
            if target is None:
                logger.info(
                    "openapi %s: link %r of %s points to no known operation",
                    parsed.source,
                    link_name,
                    source.tool.name,
                )
                continue
            where = f"{source.tool.backend.get('spec')}#{source.pointer}/responses/…/links/{link_name}"
            raw_params = link.get("parameters")
            params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
            made = False
            for raw_name, expression in params.items():
                reason = f"OpenAPI link {link_name!r}: {raw_name} = {expression}"
                edges.append(_edge(target, source, reason, where, _property_for(target, str(raw_name))))
                made = True
            if "requestBody" in link:
                reason = f"OpenAPI link {link_name!r}: request body = {link['requestBody']}"
                edges.append(_edge(target, source, reason, where, _body_property(target)))
                made = True
            if not made:
                edges.append(
                    _edge(target, source, f"OpenAPI link {link_name!r} from {source.tool.name}", where)
                )
    return edges


def _link_target(
    link: dict[str, Any], by_operation_id: dict[str, Operation], by_route: dict[tuple[str, str], Operation]
) -> Operation | None:
    operation_id = link.get("operationId")
    if isinstance(operation_id, str):
        return by_operation_id.get(operation_id)
    ref = link.get("operationRef")
    if isinstance(ref, str):
        return _route_from_pointer(ref, by_route)
    return None


def _route_from_pointer(ref: str, by_route: dict[tuple[str, str], Operation]) -> Operation | None:
    fragment = urllib.parse.unquote(ref.partition("#")[2])
    parts = [p.replace("~1", "/").replace("~0", "~") for p in fragment.strip("/").split("/")]
    if len(parts) == 3 and parts[0] == "paths":
        return by_route.get((parts[1], parts[2].lower()))
    return None


def _property_for(op: Operation, raw_name: str) -> str:
    """Input property of a link / Arazzo parameter name (``petId`` or ``path.petId``)."""
    location, _, name = raw_name.partition(".") if "." in raw_name else ("", "", raw_name)
    for param in op.parameters:
        if param["name"] == name and (not location or param["in"] == location):
            return str(param["property"])
    loose = re.sub(r"[^a-z0-9]", "", name.lower())  # Arazzo `pet_id` for the path parameter `petId`
    for param in op.parameters:
        if re.sub(r"[^a-z0-9]", "", str(param["name"]).lower()) == loose:
            return str(param["property"])
    return raw_name


# -- Arazzo ----------------------------------------------------------------------------------------


def arazzo_edges(parsed: ParsedSpec, doc: Any, *, name: str = "arazzo") -> list[DependencyEdge]:
    """Edges from the step order of an Arazzo 1.x document (steps of other sources are ignored)."""
    if not isinstance(doc, dict) or "arazzo" not in doc:
        raise OpenAPISpecError(f"{name}: not an Arazzo document (no 'arazzo' field)")
    workflows = {
        str(w.get("workflowId")): w
        for w in doc.get("workflows") or []
        if isinstance(w, dict) and w.get("workflowId")
    }
    by_id = {op.operation_id: op for op in parsed.operations if op.operation_id}
    by_id_lower = {k.lower(): v for k, v in by_id.items()}
    by_route = {(op.path, op.method): op for op in parsed.operations}

    def step_operations(step: dict[str, Any], seen: frozenset[str]) -> list[Operation]:
        if isinstance(step.get("operationId"), str):
            ref = step["operationId"]
            # `$sourceDescriptions.<source>.<operationId>` names the source explicitly.
            short = ref.rsplit(".", 1)[-1] if ref.startswith("$sourceDescriptions.") else ref
            # Case-insensitive fallback: FAPI-PAR's workflow says `PAR` for operationId `Par`.
            op = by_id.get(short) or by_id_lower.get(short.lower())
            return [op] if op else []
        if isinstance(step.get("operationPath"), str):
            op = _route_from_pointer(step["operationPath"], by_route)
            return [op] if op else []
        if isinstance(step.get("workflowId"), str):
            wid = step["workflowId"].rsplit(".", 1)[-1]
            if wid in seen or wid not in workflows:
                return []
            ops: list[Operation] = []
            for inner in workflows[wid].get("steps") or []:
                if isinstance(inner, dict):
                    ops += [o for o in step_operations(inner, seen | {wid}) if o not in ops]
            return ops
        return []

    edges: list[DependencyEdge] = []
    for wid, workflow in workflows.items():
        steps = {str(s.get("stepId")): s for s in workflow.get("steps") or [] if isinstance(s, dict)}
        for step_id, step in steps.items():
            consumers = step_operations(step, frozenset({wid}))
            if not consumers:
                continue
            direct_operation = "workflowId" not in step
            for producer_step, where in _step_references(step):
                if producer_step == step_id or producer_step not in steps:
                    continue
                producers = step_operations(steps[producer_step], frozenset({wid}))
                for consumer in consumers:
                    for producer in producers:
                        if producer is consumer:
                            continue
                        param = None
                        if direct_operation and where.startswith("parameter:"):
                            param = _property_for(consumer, where.split(":", 1)[1])
                        elif direct_operation and where == "requestBody":
                            param = _body_property(consumer)
                        reason = (
                            f"Arazzo workflow {wid!r}: step {step_id!r} uses outputs of "
                            f"step {producer_step!r}"
                        )
                        evidence = f"{name}#/workflows/{wid}/steps/{step_id}"
                        edges.append(_edge(consumer, producer, reason, evidence, param))
    return edges


def _step_references(step: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``(referenced step id, where)``; ``where`` is ``parameter:<name>``, ``requestBody`` or ``other``."""
    for key, value in step.items():
        if key == "outputs":
            continue  # a step's outputs describe its own response
        if key == "parameters" and isinstance(value, list):
            for param in value:
                if isinstance(param, dict):
                    where = f"parameter:{param.get('name')}" if param.get("name") else "other"
                    for match in _STEP_REF.finditer(_text(param.get("value"))):
                        yield match.group(1), where
            continue
        where = "requestBody" if key == "requestBody" else "other"
        for match in _STEP_REF.finditer(_text(value)):
            yield match.group(1), where


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return " ".join(f"{k} {_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return " ".join(_text(v) for v in value)
    return ""


# -- inferred edges --------------------------------------------------------------------------------


def infer_edges(parsed: ParsedSpec) -> list[DependencyEdge]:
    return _field_edges(parsed) + _token_edges(parsed)


def _norm(word: str) -> str:
    """Resource word -> comparable singular: ``Pets`` -> ``pet``, ``categories`` -> ``category``."""
    word = re.sub(r"[^a-z0-9]", "", word.lower())
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _resource(path: str) -> tuple[str, bool]:
    """(resource word, path ends in a literal segment = collection) of a path."""
    segments = [s for s in path.split("/") if s]
    collection = bool(segments) and not segments[-1].startswith("{")
    # Action segments (`/pet/findByStatus`, `/users/search`) name what is done, not the resource.
    literals = [s for s in segments if not s.startswith("{") and not _ACTION_SEGMENT.match(s)]
    return (_norm(literals[-1]) if literals else "", collection)


def _resource_before(path: str, param: str) -> str:
    segments = [s for s in path.split("/") if s]
    for i, segment in enumerate(segments):
        if segment == "{" + param + "}" and i > 0 and not segments[i - 1].startswith("{"):
            return _norm(segments[i - 1])
    return ""


def _fields(parsed: ParsedSpec, schema: Any, depth: int = 0) -> set[str]:
    """Field names a response carries: object properties, array item properties, one wrapper deep."""
    bundler = parsed.bundler
    schema = bundler.deref(schema)
    if not isinstance(schema, dict) or depth > 2:
        return set()
    names: set[str] = set()
    for key in ("allOf", "oneOf", "anyOf"):
        for part in schema.get(key) or []:
            names |= _fields(parsed, part, depth + 1)
    if isinstance(schema.get("items"), dict | bool):
        names |= _fields(parsed, schema["items"], depth + 1)
    props = schema.get("properties")
    if isinstance(props, dict):
        names |= set(props)
        if depth == 0:
            # `{"data": [...]}`-style wrappers: look one level in.
            for value in props.values():
                inner = bundler.deref(value)
                if isinstance(inner, dict) and inner.get("type") == "array":
                    names |= _fields(parsed, inner.get("items"), depth + 1)
    return names


def _producer_kind(op: Operation) -> int | None:
    """0 = list / search, 1 = create; None = not a producer of new ids."""
    _, collection = _resource(op.path)
    label = f"{op.operation_id or ''} {op.path}"
    if op.method == "get" and collection:  # `GET /pets/{id}` needs the id, it does not hand out new ones
        return 0
    if op.method == "post" and _SEARCHISH.search(label) and collection:
        return 0
    if op.method == "post" and collection:
        return 1
    return None


def _field_edges(parsed: ParsedSpec) -> list[DependencyEdge]:
    producers: list[tuple[Operation, int, str, set[str]]] = []
    for op in parsed.operations:
        kind = _producer_kind(op)
        if kind is None or op.response_schema is None:
            continue
        fields = _fields(parsed, op.response_schema)
        if fields:
            producers.append((op, kind, _resource(op.path)[0], fields))
    if not producers:
        return []
    edges: list[DependencyEdge] = []
    for consumer in parsed.operations:
        for param_name, prop in _consumer_parameters(parsed, consumer):
            match = _ID_PARAM.match(param_name)
            if param_name in _BARE_ID:
                resource = _resource_before(consumer.path, param_name) or _resource(consumer.path)[0]
                wanted = {param_name}
            elif match:
                resource = _norm(match.group("res"))
                wanted = {"id", param_name}
            else:
                continue
            found = [
                (kind, p)
                for p, kind, res, fields in producers
                if p is not consumer
                and res
                and (res == resource or res.endswith(resource))
                and fields & wanted
                and not _takes(p, param_name)
            ]
            confidence, rule = 0.8, f"lists, finds or creates {resource} resources, whose id feeds"
            if not found and "." not in prop:
                # Name equality only for parameters: bodies echo their resource's own fields (an event body
                # has `iCalUID` because events have one), which says nothing about where values come from.
                found = [
                    (kind, p)
                    for p, kind, _, fields in producers
                    if p is not consumer and param_name in fields and not _takes(p, param_name)
                ]
                confidence, rule = 0.6, "returns a field that feeds"
            if any(kind == 0 for kind, _ in found):
                found = [kp for kp in found if kp[0] == 0]  # list/search beat create when both exist
            # Closest first: `/orgs/{org}/hooks/{hook_id}` is fed by `/orgs/{org}/hooks`, not `/repos/…`.
            found.sort(key=lambda kp: (-_shared_prefix(kp[1].path, consumer.path), len(kp[1].parameters)))
            for _, producer in found[:_MAX_PRODUCERS]:
                evidence = (
                    f"{producer.method.upper()} {producer.path} -> {consumer.method.upper()} {consumer.path} "
                    f"({param_name})"
                )
                reason = f"{producer.tool.name} {rule} {param_name!r}"
                edges.append(_edge(consumer, producer, reason, evidence, prop, confidence=confidence))
    return edges


def _shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split("/"), b.split("/"), strict=False):
        if x != y:
            break
        n += 1
    return n


def _takes(op: Operation, name: str) -> bool:
    return any(p["name"] == name and p["required"] for p in op.parameters)


def _consumer_parameters(parsed: ParsedSpec, op: Operation) -> Iterator[tuple[str, str]]:
    """(name, edge parameter_name): path params, required query params, top-level body fields."""
    for param in op.parameters:
        if param["in"] == "path" or (param["in"] == "query" and param["required"]):
            yield param["name"], param["property"]
    body = op.tool.backend.get("body")
    if body and op.body_schema is not None:
        schema = parsed.bundler.deref(op.body_schema)
        if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
            for field in schema["properties"]:
                if field not in _BARE_ID:  # a body `id` is the new object's own id, not an input
                    yield field, f"{body.get('property', 'body')}.{field}"


def _token_edges(parsed: ParsedSpec) -> list[DependencyEdge]:
    schemes = parsed.security_schemes
    token_paths: dict[str, set[str]] = {}  # oauth2 token endpoint path -> schemes it serves
    for scheme_name, scheme in schemes.items():
        for url in scheme.get("token_urls", []):
            path = urllib.parse.urlparse(url).path.rstrip("/")
            if path:
                token_paths.setdefault(path, set()).add(scheme_name)
    producers: list[tuple[Operation, set[str] | None, str]] = []  # (op, schemes served or None = any, why)
    for op in parsed.operations:
        served: set[str] = set()
        for path, names in token_paths.items():
            server_path = urllib.parse.urlparse(str(op.tool.backend.get("server_url") or "")).path.rstrip("/")
            if op.method == "post" and (
                op.path.rstrip("/") == path or server_path + op.path.rstrip("/") == path
            ):
                served |= names
        if served:
            producers.append((op, served, "is the oauth2 token endpoint"))
            continue
        if not _AUTHISH.search(f"{op.operation_id or ''} {op.path}") or op.response_schema is None:
            continue
        if op.method != "post" or "{" in op.path:
            continue  # logins create a session: a POST to a fixed path (not `GET /webhooks/{id}/{token}`)
        if _needs_token(op, schemes):
            continue
        fields = _fields(parsed, op.response_schema) & _TOKEN_FIELDS
        if fields:
            producers.append((op, None, f"returns {sorted(fields)[0]!r}"))
    if not producers:
        return []
    edges: list[DependencyEdge] = []
    for consumer in parsed.operations:
        if not _needs_token(consumer, schemes):
            continue
        used = {name for requirement in consumer.security for name in requirement}
        chosen = [
            (p, served, why)
            for p, served, why in producers
            if p is not consumer and (served is None or served & used)
        ][:_MAX_TOKEN_PRODUCERS]
        for producer, schemes_served, why in chosen:
            reason = f"needs a token ({', '.join(sorted(used))}) and {producer.tool.name} {why}"
            evidence = f"security of {consumer.method.upper()} {consumer.path}"
            confidence = 0.7 if schemes_served is None else 0.9
            edges.append(_edge(consumer, producer, reason, evidence, confidence=confidence))
    return edges


def _needs_token(op: Operation, schemes: dict[str, dict[str, Any]]) -> bool:
    """Every alternative requirement needs a token-like credential (not basic auth, not nothing)."""
    if not op.security:
        return False
    for requirement in op.security:
        if not requirement:
            return False  # `{}` alternative: anonymous access allowed
        if all(schemes.get(n, {}).get("scheme", "").lower() == "basic" for n in requirement):
            return False
    return True

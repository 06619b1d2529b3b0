"""One OpenAPI operation -> one ``ToolRecord`` (and the ``Operation`` inference reads). Pure: no network.

``OperationBuilder`` does the per-operation work of ``parser.parse_spec``: parameters of every location
and Swagger 2.0 collection style become top-level properties, the request body becomes ``body``, the
first 2xx response its output schema, links and security requirements are kept for dependency
inference, and one malformed operation becomes a ``SpecProblem`` instead of failing the spec.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from toolweave.adapters.openapi.bundler import SchemaBundler
from toolweave.adapters.openapi.loader import SpecLoader, is_url
from toolweave.errors import OpenAPISpecError
from toolweave.records import MAX_TOOL_ID_LENGTH, ToolRecord, make_tool_id, sanitize_name

__all__ = ["Operation", "OperationBuilder", "SpecProblem", "as_dict", "matches_filter"]

# MCP tool annotations implied by HTTP semantics (RFC 9110 safe / idempotent methods).
_METHOD_HINTS: dict[str, dict[str, bool]] = {
    "get": {"read_only_hint": True},
    "head": {"read_only_hint": True},
    "options": {"read_only_hint": True},
    "put": {"read_only_hint": False, "idempotent_hint": True},
    "delete": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": True},
}

_PARAM_LOCATIONS = ("path", "query", "header", "cookie")
_PROPERTY_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# Swagger 2.0 parameter keywords that are JSON Schema keywords too.
_V2_SCHEMA_KEYS = (
    "type",
    "format",
    "items",
    "enum",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
    "x-nullable",
)
_V2_COLLECTION_STYLES = {
    "csv": ("form", False),
    "ssv": ("spaceDelimited", False),
    "tsv": ("tabDelimited", False),
    "pipes": ("pipeDelimited", False),
    "multi": ("form", True),
}
_MAX_DESCRIPTION = 4000


@dataclass(frozen=True)
class SpecProblem:
    """Something in the spec we had to skip; ``where`` is ``<spec file>#<JSON pointer>``."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class Operation:
    """Parser-side view of one operation (what dependency inference needs besides the record)."""

    tool: ToolRecord
    pointer: str
    method: str
    path: str
    operation_id: str | None
    parameters: list[dict[str, Any]]
    body_schema: Any = None
    response_schema: Any = None
    links: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)  # (name, link, base uri)
    security: list[list[str]] = field(default_factory=list)
    doc_uri: str = ""


def matches_filter(
    patterns: list[str], *, method: str, path: str, operation_id: str | None, tags: list[str]
) -> bool:
    """A pattern is a tag, an operationId, or a path glob optionally prefixed by the method."""
    for pattern in patterns:
        if pattern in tags or (operation_id is not None and pattern == operation_id):
            return True
        want_method, _, glob = pattern.partition(" ") if " " in pattern else ("", "", pattern)
        if want_method and want_method.lower() != method:
            continue
        if glob.startswith("/") and fnmatch.fnmatchcase(path, glob):
            return True
    return False


class OperationBuilder:
    def __init__(
        self,
        *,
        doc: dict[str, Any],
        uri: str,
        spec_name: str,
        source: str,
        loader: SpecLoader,
        bundler: SchemaBundler,
        v2: bool,
        include: list[str],
        exclude: list[str],
    ) -> None:
        self.doc, self.uri, self.spec_name, self.source = doc, uri, spec_name, source
        self.loader, self.bundler, self.v2 = loader, bundler, v2
        self.include, self.exclude = include, exclude
        self.operations: list[Operation] = []
        self.problems: list[SpecProblem] = []
        self._names: set[str] = set()
        self._ids: set[str] = set()

    def problem(self, pointer: str, message: str) -> None:
        self.problems.append(SpecProblem(f"{self.spec_name}#{pointer}", message))

    # -- one operation -----------------------------------------------------------------------------

    def add(self, path: str, method: str, op: Any, item: dict[str, Any], item_uri: str, pointer: str) -> None:
        if not isinstance(op, dict):
            raise OpenAPISpecError("operation must be a mapping")
        operation_id = op.get("operationId") if isinstance(op.get("operationId"), str) else None
        tags = [str(t) for t in op.get("tags") or [] if isinstance(t, str | int)]
        if self.include and not matches_filter(
            self.include, method=method, path=path, operation_id=operation_id, tags=tags
        ):
            return
        if self.exclude and matches_filter(
            self.exclude, method=method, path=path, operation_id=operation_id, tags=tags
        ):
            return
        responses = op.get("responses")
        if not isinstance(responses, dict) or not responses:
            # Required in 2.0 and 3.0; optional in 3.1, where "no responses" means "not described".
            if not (self.doc.get("openapi", "").startswith("3.1") and responses is None):
                raise OpenAPISpecError("operation has no 'responses'")
            responses = {}

        params = self._merged_parameters(item, op, item_uri)
        properties: dict[str, Any] = {}
        required: list[str] = []
        backend_params: list[dict[str, Any]] = []
        body_info: dict[str, Any] | None = None
        body_schema: Any = None
        form_fields: list[tuple[dict[str, Any], str]] = []

        for param, param_uri in params:
            location = param.get("in")
            if location == "body" and self.v2:
                body_schema = self.bundler.convert(param.get("schema") or {}, param_uri)
                body_info = {
                    "content_type": _pick_content_type(self._consumes(op)) or "application/json",
                    "content_types": self._consumes(op) or ["application/json"],
                    "required": bool(param.get("required")),
                }
                if param.get("description"):
                    body_info["description"] = str(param["description"])
                continue
            if location == "formData" and self.v2:
                form_fields.append((param, param_uri))
                continue
            if location not in _PARAM_LOCATIONS:
                self.problem(
                    pointer, f"parameter {param.get('name')!r}: unknown location {location!r}; skipped"
                )
                continue
            name = str(param.get("name", ""))
            if not name:
                self.problem(pointer, "parameter without a name; skipped")
                continue
            if location == "header" and name.lower() in ("accept", "content-type", "authorization"):
                continue  # OpenAPI says these are ignored: content negotiation and auth are ours
            prop = _property_name(name, location, properties)
            schema = self._parameter_schema(param, param_uri)
            properties[prop] = schema
            is_required = bool(param.get("required")) or location == "path"
            if is_required:
                required.append(prop)
            backend_params.append(self._param_backend(param, prop, name, location, is_required))

        if form_fields:
            body_schema, body_info = self._form_body(op, form_fields)
        elif not self.v2 and op.get("requestBody") is not None:
            body_schema, body_info = self._request_body(op["requestBody"], item_uri)

        body_property = None
        if body_info is not None:
            body_property = "body"  # parameters never take this name (see _property_name)
            schema = body_schema if body_schema is not None else {}
            if body_info.get("description") and isinstance(schema, dict) and "description" not in schema:
                schema = {**schema, "description": body_info["description"]}
            properties[body_property] = schema
            if body_info.get("required"):
                required.append(body_property)
            body_info["property"] = body_property

        input_schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            input_schema["required"] = required
        input_schema = self.bundler.finish(input_schema)

        response_schema, response_type = self._response(responses, item_uri, op)
        output_schema = None
        wrapped = False
        if response_schema is not None:
            target = self.bundler.deref(response_schema)
            is_object = isinstance(target, dict) and target.get("type") == "object"
            if is_object:
                output_schema = self.bundler.finish(response_schema)
            else:
                # MCP output schemas must describe an object: other shapes go under "result".
                wrapped = True
                output_schema = self.bundler.finish(
                    {"type": "object", "properties": {"result": response_schema}, "required": ["result"]}
                )

        name = self._tool_name(operation_id, method, path)
        tool_id = make_tool_id(self.source, name, self._ids)
        self._ids.add(tool_id)
        security = self._security(op)
        backend = {
            "kind": "openapi",
            "method": method.upper(),
            "path": path,
            "operation_id": operation_id,
            "server_url": self._server_url(op, item),
            "parameters": backend_params,
            "body": body_info,
            "response_content_type": response_type,
            "output_wrapped": wrapped,
            "security": security,
            # `security: []` on the operation (or globally) = explicitly anonymous: send no credentials.
            "anonymous": op.get("security", self.doc.get("security")) == [],
            "spec": self.spec_name,
            "pointer": pointer,
        }
        hints = _METHOD_HINTS.get(method.lower())
        if hints:
            backend["annotations"] = dict(hints)
        summary = _as_str(op.get("summary"))
        tool = ToolRecord(
            id=tool_id,
            source=self.source,
            name=name,
            title=summary.strip(),
            description=_description(op, method, path, tags),
            input_schema=input_schema,
            output_schema=output_schema,
            tags=tuple(tags),
            backend=backend,
        )
        links = self._links(responses, item_uri)
        self.operations.append(
            Operation(
                tool=tool,
                pointer=pointer,
                method=method,
                path=path,
                operation_id=operation_id,
                parameters=backend_params,
                body_schema=body_schema,
                response_schema=response_schema,
                links=links,
                security=security,
                doc_uri=item_uri,
            )
        )

    # -- parameters --------------------------------------------------------------------------------

    def _merged_parameters(
        self, item: dict[str, Any], op: dict[str, Any], item_uri: str
    ) -> list[tuple[dict[str, Any], str]]:
        """Path-level parameters overridden by operation-level ones with the same (name, in)."""
        merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        for raw_list in (item.get("parameters"), op.get("parameters")):
            if not isinstance(raw_list, list):
                continue
            for raw in raw_list:
                param, param_uri = self.loader.deref(raw, item_uri)
                if not isinstance(param, dict):
                    continue
                merged[(str(param.get("name")), str(param.get("in")))] = (param, param_uri)
        return list(merged.values())

    def _parameter_schema(self, param: dict[str, Any], uri: str) -> Any:
        if self.v2:
            raw = {k: param[k] for k in _V2_SCHEMA_KEYS if k in param}
            schema = self.bundler.convert(raw, uri)
        elif isinstance(param.get("schema"), dict | bool):
            schema = self.bundler.convert(param["schema"], uri)
        elif isinstance(param.get("content"), dict) and param["content"]:
            media = next(iter(param["content"].values()))
            schema = self.bundler.convert((media or {}).get("schema") or {}, uri)
        else:
            schema = {}
        extra: dict[str, Any] = {}
        if isinstance(param.get("description"), str) and param["description"].strip():
            extra["description"] = param["description"].strip()
        if param.get("deprecated") is True:
            extra["deprecated"] = True
        if "example" in param and not isinstance(schema, bool):
            extra["examples"] = [param["example"]]
        if not extra:
            return schema
        if isinstance(schema, bool):
            return {**extra} if schema else {"not": {}, **extra}
        return {**schema, **extra}

    def _param_backend(
        self, param: dict[str, Any], prop: str, name: str, location: str, required: bool
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {"property": prop, "name": name, "in": location, "required": required}
        if self.v2:
            style, explode = _V2_COLLECTION_STYLES.get(
                str(param.get("collectionFormat", "csv")), ("form", False)
            )
            entry["style"] = "simple" if location in ("path", "header") else style
            entry["explode"] = explode
        else:
            default_style = {"path": "simple", "query": "form", "header": "simple", "cookie": "form"}[
                location
            ]
            entry["style"] = str(param.get("style") or default_style)
            entry["explode"] = bool(param.get("explode", entry["style"] == "form"))
            if param.get("allowReserved") is True:
                entry["allow_reserved"] = True
            if isinstance(param.get("content"), dict) and param["content"]:
                entry["content_type"] = str(next(iter(param["content"])))
        return entry

    # -- bodies ------------------------------------------------------------------------------------

    def _consumes(self, op: dict[str, Any]) -> list[str]:
        raw = op.get("consumes", self.doc.get("consumes"))
        return [str(c) for c in raw] if isinstance(raw, list) else []

    def _form_body(
        self, op: dict[str, Any], fields: list[tuple[dict[str, Any], str]]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        props: dict[str, Any] = {}
        required: list[str] = []
        files: list[str] = []
        for param, uri in fields:
            name = str(param.get("name", ""))
            props[name] = self._parameter_schema(param, uri)
            if param.get("required"):
                required.append(name)
            if param.get("type") == "file":
                files.append(name)
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            schema["required"] = required
        consumes = self._consumes(op)
        multipart = bool(files) or any("multipart/" in c for c in consumes)
        content_type = "multipart/form-data" if multipart else "application/x-www-form-urlencoded"
        info = {
            "content_type": content_type,
            "content_types": consumes or [content_type],
            "required": bool(required),
            "file_fields": files,
        }
        return schema, info

    def _request_body(self, raw: Any, uri: str) -> tuple[Any, dict[str, Any] | None]:
        body, body_uri = self.loader.deref(raw, uri)
        if not isinstance(body, dict):
            return None, None
        content = body.get("content")
        if not isinstance(content, dict) or not content:
            return None, None
        content_type = _pick_content_type(list(content))
        media = content.get(content_type) or {}
        schema = self.bundler.convert(media.get("schema") or {}, body_uri) if isinstance(media, dict) else {}
        info: dict[str, Any] = {
            "content_type": content_type,
            "content_types": [str(c) for c in content],
            "required": bool(body.get("required")),
        }
        if isinstance(body.get("description"), str) and body["description"].strip():
            info["description"] = body["description"].strip()
        if content_type and content_type.startswith("multipart/"):
            target = self.bundler.deref(schema)
            if isinstance(target, dict) and isinstance(target.get("properties"), dict):
                info["file_fields"] = [
                    k
                    for k, v in target["properties"].items()
                    if isinstance(v, dict) and v.get("format") in ("binary", "base64")
                ]
        return schema, info

    # -- responses ---------------------------------------------------------------------------------

    def _success_responses(self, responses: dict[str, Any]) -> list[str]:
        codes = sorted(c for c in responses if re.fullmatch(r"2\d\d", c))
        codes += [c for c in responses if c.upper() == "2XX"]
        return codes

    def _response(self, responses: dict[str, Any], uri: str, op: dict[str, Any]) -> tuple[Any, str | None]:
        for code in self._success_responses(responses):
            response, response_uri = self.loader.deref(responses[code], uri)
            if not isinstance(response, dict):
                continue
            if self.v2:
                if "schema" in response:
                    produces = op.get("produces", self.doc.get("produces")) or ["application/json"]
                    kind = (
                        _pick_content_type([str(p) for p in produces]) if isinstance(produces, list) else None
                    )
                    return self.bundler.convert(response["schema"], response_uri), kind
                continue
            content = response.get("content")
            if isinstance(content, dict) and content:
                kind = _pick_content_type(list(content))
                media = content.get(kind)
                if isinstance(media, dict) and "schema" in media:
                    return self.bundler.convert(media["schema"], response_uri), kind
                return None, kind
        return None, None

    def _links(self, responses: dict[str, Any], uri: str) -> list[tuple[str, dict[str, Any], str]]:
        if self.v2:
            return []
        out = []
        for code in self._success_responses(responses):
            try:
                response, response_uri = self.loader.deref(responses[code], uri)
            except OpenAPISpecError:
                continue
            links = response.get("links") if isinstance(response, dict) else None
            if not isinstance(links, dict):
                continue
            for link_name, raw in links.items():
                try:
                    link, link_uri = self.loader.deref(raw, response_uri)
                except OpenAPISpecError as exc:
                    self.problems.append(SpecProblem(self.spec_name, f"link {link_name!r}: {exc}"))
                    continue
                if isinstance(link, dict):
                    out.append((str(link_name), link, link_uri))
        return out

    # -- naming, servers, security ----------------------------------------------------------------

    def _tool_name(self, operation_id: str | None, method: str, path: str) -> str:
        raw = operation_id or f"{method} {path}"
        name = sanitize_name(raw)
        if len(name) > MAX_TOOL_ID_LENGTH:
            digest = hashlib.sha1(raw.encode()).hexdigest()[:8]
            name = f"{name[: MAX_TOOL_ID_LENGTH - 9].rstrip('_')}_{digest}"
        unique, n = name, 1
        while unique in self._names:
            n += 1
            suffix = f"_{n}"
            unique = name[: MAX_TOOL_ID_LENGTH - len(suffix)] + suffix
        self._names.add(unique)
        return unique

    def _server_url(self, op: dict[str, Any], item: dict[str, Any]) -> str | None:
        if self.v2:
            host = self.doc.get("host")
            base_path = str(self.doc.get("basePath") or "")
            if not host:
                url = base_path or None
            else:
                schemes = op.get("schemes") or self.doc.get("schemes") or ["https"]
                scheme = "https" if "https" in schemes else str(schemes[0])
                url = f"{scheme}://{host}{base_path}"
        else:
            url = None
            for holder in (op, item, self.doc):
                servers = holder.get("servers")
                if isinstance(servers, list) and servers and isinstance(servers[0], dict):
                    url = _expand_server(servers[0])
                    break
        if url and not is_url(url) and is_url(self.uri):
            url = urllib.parse.urljoin(self.uri, url)
        return url

    def _security(self, op: dict[str, Any]) -> list[list[str]]:
        raw = op.get("security", self.doc.get("security"))
        if not isinstance(raw, list):
            return []
        return [[str(k) for k in req] for req in raw if isinstance(req, dict)]


def _expand_server(server: dict[str, Any]) -> str:
    url = str(server.get("url") or "")
    variables = as_dict(server.get("variables"))
    for name, var in variables.items():
        default = var.get("default") if isinstance(var, dict) else None
        if default is not None:
            url = url.replace("{" + str(name) + "}", str(default))
    return url


def _pick_content_type(types: list[str]) -> str | None:
    """JSON first (what models produce best), then forms, then whatever comes first."""
    if not types:
        return None
    lowered = [(t, t.split(";")[0].strip().lower()) for t in types]
    for t, base in lowered:
        if base == "application/json":
            return t
    for t, base in lowered:
        if base.endswith("+json") or base.endswith("/json"):
            return t
    for wanted in ("application/x-www-form-urlencoded", "multipart/form-data"):
        for t, base in lowered:
            if base == wanted:
                return t
    for t, base in lowered:
        if base.startswith("text/"):
            return t
    return types[0]


def _property_name(name: str, location: str, taken: dict[str, Any]) -> str:
    """The input-schema property for a parameter: its name, unless unusable or already taken."""
    candidate = name if _PROPERTY_NAME.match(name) else re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:64] or "param"
    if candidate in taken or candidate == "body":
        candidate = f"{location}_{candidate}"[:64]
    unique, n = candidate, 1
    while unique in taken:
        n += 1
        unique = f"{candidate[:60]}_{n}"
    return unique


def _description(op: dict[str, Any], method: str, path: str, tags: list[str]) -> str:
    summary = _as_str(op.get("summary"))
    details = op.get("description") if isinstance(op.get("description"), str) else ""
    parts = [p.strip() for p in (summary, details) if p and p.strip()]
    if len(parts) == 2 and parts[1].startswith(parts[0]):
        parts = [parts[1]]  # many specs repeat the summary as the description's first sentence
    if not parts:
        parts = [f"{method.upper()} {path}"]
    text = "\n\n".join(parts)
    if len(text) > _MAX_DESCRIPTION:
        text = text[: _MAX_DESCRIPTION - 1].rstrip() + "…"
    if op.get("deprecated") is True:
        text = "(Deprecated) " + text
    if tags:
        text += f"\n\nTags: {', '.join(tags)}"
    return text


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if the document has an object there, else empty (specs in the wild are loose)."""
    return value if isinstance(value, dict) else {}


def _as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""

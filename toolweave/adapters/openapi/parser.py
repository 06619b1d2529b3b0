"""OpenAPI 2.0 / 3.0 / 3.1 document -> one ``ToolRecord`` per operation. Pure: no network, no httpx.

Input schema layout (documented in docs/openapi.md): path, query, header and cookie parameters are
top-level properties (named after the parameter; a name clash between locations, or a name that is not
``[A-Za-z0-9_.-]{1,64}``, gets a location-prefixed / sanitised property and ``backend`` keeps the
mapping). The request body, whatever its shape, is the single property ``body`` (a parameter called
``body`` becomes ``<location>_body``); its content type is in ``backend["body"]``. Swagger 2.0 ``in: body``
becomes that property and ``in: formData`` fields become the properties of an object ``body``.

Problems in one operation (a missing ``$ref``, no ``responses``) skip that operation only and are
reported as ``SpecProblem``s naming the spec and JSON pointer; problems with the whole document
(invalid YAML, unsupported version) raise ``OpenAPISpecError``.
"""

from __future__ import annotations

import gc
import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from toolweave.adapters.openapi.bundler import SchemaBundler
from toolweave.adapters.openapi.loader import SpecLoader, pointer_join
from toolweave.adapters.openapi.operations import (
    Operation,
    OperationBuilder,
    SpecProblem,
    as_dict,
    matches_filter,
)
from toolweave.errors import OpenAPISpecError
from toolweave.records import ToolRecord

__all__ = [
    "HTTP_METHODS",
    "Operation",
    "ParsedSpec",
    "SpecProblem",
    "gc_paused",
    "matches_filter",
    "parse_spec",
    "parse_spec_file",
]

logger = logging.getLogger(__name__)

HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


@dataclass
class ParsedSpec:
    """Everything parsed from one spec."""

    source: str
    location: str
    version: str
    title: str
    tools: list[ToolRecord]
    operations: list[Operation]
    problems: list[SpecProblem]
    security_schemes: dict[str, dict[str, Any]]
    bundler: SchemaBundler
    loader: SpecLoader


def parse_spec_file(
    location: str,
    *,
    source: str,
    loader: SpecLoader | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
) -> ParsedSpec:
    """Load ``location`` (path or URL) and parse it; see ``parse_spec``."""
    loader = loader or SpecLoader()
    with gc_paused():
        doc, uri = loader.load(location)
        return parse_spec(doc, uri, source=source, loader=loader, include=include, exclude=exclude)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building big acyclic trees: on GitHub's spec, collections triggered by
    millions of new dicts cost ~40 % of the time, and found nothing (our output has no cycles)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_spec(
    doc: Any,
    uri: str,
    *,
    source: str,
    loader: SpecLoader,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
) -> ParsedSpec:
    """Turn a loaded document into tools. ``uri`` is its absolute location (relative refs and servers)."""
    spec_name = loader.display_name(uri)
    if not isinstance(doc, dict):
        raise OpenAPISpecError(f"{spec_name}: not an OpenAPI document (top level is {type(doc).__name__})")
    version = _version(doc, spec_name)
    v2 = version.startswith("2.")
    bundler = SchemaBundler(loader, openapi_version=version)
    paths = doc.get("paths") or {}
    if not isinstance(paths, dict):
        raise OpenAPISpecError(f"{spec_name}#/paths: must be a mapping")
    info = as_dict(doc.get("info"))
    schemes = _security_schemes(doc, v2)
    builder = OperationBuilder(
        doc=doc,
        uri=uri,
        spec_name=spec_name,
        source=source,
        loader=loader,
        bundler=bundler,
        v2=v2,
        include=list(include),
        exclude=list(exclude),
    )
    for path, raw_item in paths.items():
        item_pointer = pointer_join("paths", path)
        if not isinstance(raw_item, dict):
            builder.problem(item_pointer, "path item must be a mapping")
            continue
        try:
            item, item_uri = loader.deref(raw_item, uri)
        except OpenAPISpecError as exc:
            builder.problem(item_pointer, str(exc))
            continue
        if not isinstance(item, dict):
            builder.problem(item_pointer, "path item must be a mapping")
            continue
        for method in HTTP_METHODS:
            op = item.get(method)
            if op is None:
                continue
            op_pointer = pointer_join("paths", path, method)
            try:
                builder.add(path, method, op, item, item_uri, op_pointer)
            except OpenAPISpecError as exc:
                builder.problem(op_pointer, str(exc))
            except (TypeError, AttributeError, ValueError, KeyError, RecursionError) as exc:
                # A malformed corner of one operation must not cost the other operations.
                builder.problem(op_pointer, f"malformed operation ({type(exc).__name__}: {exc})")
    for problem in builder.problems:
        logger.warning("openapi %s: %s", source, problem)
    return ParsedSpec(
        source=source,
        location=uri,
        version=version,
        title=str(info.get("title") or spec_name),
        tools=[op.tool for op in builder.operations],
        operations=builder.operations,
        problems=builder.problems,
        security_schemes=schemes,
        bundler=bundler,
        loader=loader,
    )


def _version(doc: dict[str, Any], spec_name: str) -> str:
    if "swagger" in doc:
        version = str(doc["swagger"])
        if version != "2.0":
            raise OpenAPISpecError(
                f"{spec_name}#/swagger: unsupported Swagger version {version!r} (need 2.0)"
            )
        return version
    if "openapi" in doc:
        version = str(doc["openapi"])
        if not re.match(r"^3\.[01](\.\d+)?(-.*)?$", version):
            raise OpenAPISpecError(
                f"{spec_name}#/openapi: unsupported OpenAPI version {version!r} (need 2.0, 3.0.x or 3.1.x)"
            )
        return version
    raise OpenAPISpecError(f"{spec_name}: not an OpenAPI document (no 'openapi' or 'swagger' field)")


def _security_schemes(doc: dict[str, Any], v2: bool) -> dict[str, dict[str, Any]]:
    """Names and shapes of the security schemes: never values, which specs do not hold anyway."""
    raw = doc.get("securityDefinitions") if v2 else (doc.get("components") or {}).get("securitySchemes")
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(raw, dict):
        return out
    for name, scheme in raw.items():
        if not isinstance(scheme, dict):
            continue
        entry = {k: scheme[k] for k in ("type", "in", "name", "scheme", "bearerFormat") if k in scheme}
        token_urls = []
        if v2 and scheme.get("tokenUrl"):
            token_urls.append(scheme["tokenUrl"])
        flows = scheme.get("flows")
        if isinstance(flows, dict):
            token_urls += [f["tokenUrl"] for f in flows.values() if isinstance(f, dict) and f.get("tokenUrl")]
        if token_urls:
            entry["token_urls"] = [str(u) for u in token_urls]
        granted = (
            scheme.get("tokenUrl")
            if v2 and scheme.get("flow") == "application"
            else (flows.get("clientCredentials") or {}).get("tokenUrl")
            if isinstance(flows, dict) and isinstance(flows.get("clientCredentials"), dict)
            else None
        )
        if granted:  # where a gateway with `auth: {type: oauth2}` and no token_url asks for its token
            entry["client_credentials_url"] = str(granted)
        out[str(name)] = entry
    return out

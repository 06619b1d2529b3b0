"""Reading OpenAPI / Arazzo documents from files or URLs, and resolving ``$ref`` targets between them.

YAML goes through libyaml when available (GitHub's 4 MB spec: ~25 s with the pure-Python loader,
a few seconds with the C one). Timestamps stay strings and mapping keys become strings (``200:`` is a
valid YAML int key) so every document is plain JSON data.
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from toolweave.errors import OpenAPISpecError
from toolweave.yaml_limits import expansion_problem, size_problem

__all__ = ["Fetcher", "SpecLoader", "is_url", "parse_document", "pointer_get", "pointer_join"]

logger = logging.getLogger(__name__)

Fetcher = Callable[[str], str]
"""Returns the text behind an http(s) URL; raises on failure."""

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

_BaseLoader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _JsonishLoader(_BaseLoader):  # type: ignore[misc]  # the base is chosen at run time (C or Python)
    """SafeLoader whose timestamps stay strings (dates in examples must stay JSON-serialisable)."""


def _construct_str(loader: Any, node: Any) -> Any:
    return loader.construct_scalar(node)


_JsonishLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_str)


def is_url(location: str) -> bool:
    return bool(_URL.match(location))


def _stringify_keys(node: Any) -> Any:
    """YAML allows int/bool keys (``200:``, ``on:``); JSON and the parser want strings."""
    if isinstance(node, dict):
        if all(isinstance(k, str) for k in node):
            for k, v in node.items():
                if isinstance(v, dict | list):
                    node[k] = _stringify_keys(v)
            return node
        return {_key(k): _stringify_keys(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_stringify_keys(v) for v in node]
    return node


def _key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def parse_document(text: str, location: str) -> Any:
    """Parse YAML or JSON text (JSON first when it looks like JSON: it is ~10x faster)."""
    if too_big := size_problem(text):
        raise OpenAPISpecError(f"{location}: {too_big}")
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass  # JSON-looking YAML (flow style) is still valid YAML
    try:
        loader = _JsonishLoader(text)
        try:
            root = loader.get_single_node()
            if unsafe := expansion_problem(root):
                raise OpenAPISpecError(f"{location}: {unsafe}")
            doc = None if root is None else loader.construct_document(root)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise OpenAPISpecError(f"{location}: invalid YAML/JSON{where}: {problem}") from exc
    try:
        return _stringify_keys(doc)
    except RecursionError:
        # `a: &x [*x]` is legal YAML but a cycle: it could never become JSON.
        raise OpenAPISpecError(
            f"{location}: recursive YAML aliases (or absurd nesting) are not supported"
        ) from None


def _unescape(part: str) -> str:
    return urllib.parse.unquote(part).replace("~1", "/").replace("~0", "~")


def pointer_join(*parts: str) -> str:
    """``pointer_join("paths", "/pets", "get")`` -> ``/paths/~1pets/get`` (RFC 6901 escaping)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def pointer_get(doc: Any, fragment: str) -> Any:
    """Follow a JSON pointer (``/components/schemas/Pet``); raises ``KeyError`` naming the missing part."""
    node = doc
    if fragment in ("", "/"):
        return node
    for raw in fragment.lstrip("/").split("/"):
        part = _unescape(raw)
        if isinstance(node, list):
            try:
                node = node[int(part)]
            except (ValueError, IndexError):
                raise KeyError(part) from None
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(part)
    return node


def _default_fetch(url: str) -> str:
    import httpx  # only when a URL is actually fetched

    response = httpx.get(url, follow_redirects=True, timeout=30.0)
    response.raise_for_status()
    return response.text


class SpecLoader:
    """Loads a root document and the documents its ``$ref``s point to, each once.

    ``allow_remote_refs=False`` refuses ``$ref``s written as absolute http(s) URLs; refs *relative* to a
    spec that was itself loaded from a URL are same-origin parts of that spec and are fetched.
    """

    def __init__(self, *, allow_remote_refs: bool = False, fetch: Fetcher | None = None) -> None:
        self.allow_remote_refs = allow_remote_refs
        self._fetch = fetch or _default_fetch
        self._docs: dict[str, Any] = {}

    def load(self, location: str) -> tuple[Any, str]:
        """Load a document; returns ``(document, absolute location)``."""
        uri = location if is_url(location) else str(Path(location).expanduser().resolve())
        return self._get(uri), uri

    def display_name(self, uri: str) -> str:
        """The document's file name, for messages and records: never a URL's query (``?token=...``)."""
        return urllib.parse.urlsplit(uri).path.rsplit("/", 1)[-1] if is_url(uri) else os.path.basename(uri)

    def _get(self, uri: str) -> Any:
        if uri in self._docs:
            return self._docs[uri]
        if is_url(uri):
            try:
                text = self._fetch(uri)
            except Exception as exc:  # any fetch failure is a spec we cannot read
                raise OpenAPISpecError(f"{uri}: cannot fetch: {exc}") from exc
        else:
            try:
                text = Path(uri).read_text(encoding="utf-8")
            except OSError as exc:
                raise OpenAPISpecError(f"{uri}: cannot read: {exc.strerror or exc}") from exc
        doc = parse_document(text, uri)
        self._docs[uri] = doc
        return doc

    def target_uri(self, ref: str, base_uri: str) -> tuple[str, str]:
        """Split ``ref`` (relative to ``base_uri``) into (absolute document uri, fragment)."""
        file_part, _, fragment = ref.partition("#")
        if not file_part:
            return base_uri, fragment
        if is_url(file_part):
            if not file_part.startswith(("http://", "https://")):
                raise OpenAPISpecError(f"unsupported $ref scheme: {ref!r}")
            if not self.allow_remote_refs:
                raise OpenAPISpecError(f"remote $ref {ref!r} refused (set allow_remote_refs to fetch it)")
            return file_part, fragment
        if is_url(base_uri):
            return urllib.parse.urljoin(base_uri, file_part), fragment
        target = os.path.normpath(os.path.join(os.path.dirname(base_uri), urllib.parse.unquote(file_part)))
        return target, fragment

    def resolve(self, ref: str, base_uri: str) -> tuple[Any, str, str]:
        """Return ``(target node, uri of its document, canonical key "uri#fragment")``."""
        uri, fragment = self.target_uri(ref, base_uri)
        doc = self._get(uri)
        try:
            node = pointer_get(doc, fragment)
        except KeyError as exc:
            raise OpenAPISpecError(
                f"unresolvable $ref {ref!r}: no {exc.args[0]!r} in {self.display_name(uri)}"
            ) from None
        return node, uri, f"{uri}#{fragment}"

    def deref(self, node: Any, base_uri: str, *, limit: int = 32) -> tuple[Any, str]:
        """Follow a chain of ``$ref``s on a non-schema object (parameter, response, path item...)."""
        seen = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            seen += 1
            if seen > limit:
                raise OpenAPISpecError(f"$ref chain too long or circular at {node['$ref']!r}")
            node, base_uri, _ = self.resolve(node["$ref"], base_uri)
        return node, base_uri

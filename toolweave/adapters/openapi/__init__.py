"""OpenAPI adapter: an OpenAPI 2.0 / 3.0 / 3.1 spec -> tools, dependency edges and real HTTP calls.

    from toolweave.adapters.openapi import OpenAPIBackend, OpenAPISourceConfig

    backend = OpenAPIBackend(OpenAPISourceConfig(name="petstore", spec="petstore.yaml"))
    tools, edges = backend.load()
    result = await backend.call(tools[0], {...})

Modules: ``loader`` (files/URLs, YAML/JSON, ``$ref`` targets), ``bundler`` (schemas -> JSON Schema with
shared ``$defs``), ``parser`` (pure spec -> ``ToolRecord``), ``links`` (dependency edges), ``calls``
(request building, sending, results), ``backend`` (``OpenAPIBackend``), ``config``.
"""

from __future__ import annotations

from toolweave.adapters.openapi.backend import OpenAPIBackend
from toolweave.adapters.openapi.config import AuthConfig, OpenAPISourceConfig
from toolweave.adapters.openapi.links import arazzo_edges, infer_edges, link_edges, spec_edges
from toolweave.adapters.openapi.parser import ParsedSpec, SpecProblem, parse_spec, parse_spec_file

__all__ = [
    "AuthConfig",
    "OpenAPIBackend",
    "OpenAPISourceConfig",
    "ParsedSpec",
    "SpecProblem",
    "arazzo_edges",
    "infer_edges",
    "link_edges",
    "parse_spec",
    "parse_spec_file",
    "spec_edges",
]

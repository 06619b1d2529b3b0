"""OpenAPI adapter: an OpenAPI 2.0 / 3.0 / 3.1 spec -> tools, dependency edges and real HTTP calls.

    from toolweave.adapters.openapi import OpenAPIBackend, OpenAPISourceConfig

    backend = OpenAPIBackend(OpenAPISourceConfig(name="petstore", spec="petstore.yaml"))
    tools, edges = backend.load()
    result = await backend.call(tools[0], {...})

Modules: ``loader`` (files/URLs, YAML/JSON, ``$ref`` targets), ``bundler`` (schemas -> JSON Schema with
shared ``$defs``), ``parser`` (pure spec -> ``ToolRecord``), ``links`` (dependency edges), ``calls``
(request building, sending, results), ``backend`` (``OpenAPIBackend``), ``config``. Names load on first
use (``toolweave._lazy``): the manifest imports ``config`` without paying for httpx and the parser.
"""

from typing import TYPE_CHECKING

from toolweave._lazy import lazy_exports

if TYPE_CHECKING:
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

__getattr__ = lazy_exports(
    __name__,
    {
        "OpenAPIBackend": "toolweave.adapters.openapi.backend",
        "AuthConfig": "toolweave.adapters.openapi.config",
        "OpenAPISourceConfig": "toolweave.adapters.openapi.config",
        "arazzo_edges": "toolweave.adapters.openapi.links",
        "infer_edges": "toolweave.adapters.openapi.links",
        "link_edges": "toolweave.adapters.openapi.links",
        "spec_edges": "toolweave.adapters.openapi.links",
        "ParsedSpec": "toolweave.adapters.openapi.parser",
        "SpecProblem": "toolweave.adapters.openapi.parser",
        "parse_spec": "toolweave.adapters.openapi.parser",
        "parse_spec_file": "toolweave.adapters.openapi.parser",
    },
)

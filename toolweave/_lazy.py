"""Lazy package exports: a package's names load on first use, so importing one light module of the
package (``toolweave.registry.overrides`` for the manifest, ``toolweave.retrieval.results`` for the
server) does not pay for its heavy siblings (LanceDB, numpy, networkx, httpx).

``toolweave serve`` answers ``initialize`` before any of those are imported (docs/gateway.md, Startup).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``name`` from ``where[name]`` on first access."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module), name)

    return __getattr__

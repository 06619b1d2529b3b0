"""Optional OpenTelemetry traces: ``find_tools`` → retrieve → search, and call → upstream.

toolweave only uses the OpenTelemetry *API*. Without it installed, or without an SDK configured by the
deployment (``opentelemetry-sdk`` + an exporter, e.g. through ``opentelemetry-instrument``), every
span is a no-op costing well under a microsecond, so tracing needs no setting of its own. Span
attributes carry names, counts and outcomes, never queries or call arguments (they may hold secrets).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import cache
from types import ModuleType
from typing import Any

__all__ = ["TRACER_NAME", "span"]

TRACER_NAME = "toolweave"

_trace: ModuleType | None
try:
    from opentelemetry import trace as _trace
except ImportError:  # tracing is optional: the API is not a dependency
    _trace = None

Attribute = str | int | float | bool

_NAMED_BY_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
"""Whether the deployment names a provider in the environment (the API loads it on its first look-up)."""
_provider: Any = None
"""The tracer provider once one is set: the API lets a process set it once, so it never changes."""


def span(name: str, **attributes: Attribute | None) -> AbstractContextManager[Any]:
    """A span named ``toolweave.<name>`` around the block (a no-op without OpenTelemetry, and while no
    tracer provider is set: the API's no-op span still costs a context switch-in and out per span,
    several per proxied call)."""
    if _provider is None and not _provider_set():
        return nullcontext()
    return _span(name, {k: v for k, v in attributes.items() if v is not None})


def _provider_set() -> bool:
    """Whether a tracer provider is set now. The API's ``get_tracer_provider`` reads ``os.environ`` on
    every look-up while none is (a third of a proxied call's two spans, in profiler events): its global
    is read first, and the API asked only once one is set or the environment names one."""
    global _provider
    if _trace is None:
        return False
    if getattr(_trace, "_TRACER_PROVIDER", _trace) is None and not _NAMED_BY_ENVIRONMENT:
        return False  # the API's own "nothing set" (an API without that global is always asked)
    provider = _trace.get_tracer_provider()
    if isinstance(provider, _trace.ProxyTracerProvider):
        return False
    _provider = provider
    return True


@cache
def _tracer() -> Any:
    """Looked up once (the usual module-level tracer): ``get_tracer`` reads the environment on every
    call, which cost a find_tools ~0.2 ms. Before a provider is set it is a proxy that follows the
    provider set later, so caching it changes nothing."""
    assert _trace is not None
    return _trace.get_tracer(TRACER_NAME)


@contextmanager
def _span(name: str, attributes: dict[str, Attribute]) -> Iterator[Any]:
    with _tracer().start_as_current_span(f"toolweave.{name}", attributes=attributes) as current:
        yield current

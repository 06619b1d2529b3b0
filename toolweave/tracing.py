"""Optional OpenTelemetry traces: ``find_tools`` → retrieve → search, and call → upstream.

toolweave only uses the OpenTelemetry *API*. Without it installed, or without an SDK configured by the
deployment (``opentelemetry-sdk`` + an exporter, e.g. through ``opentelemetry-instrument``), every
span is a no-op costing well under a microsecond, so tracing needs no setting of its own. Span
attributes carry names, counts and outcomes, never queries or call arguments (they may hold secrets).
"""

from __future__ import annotations

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


def span(name: str, **attributes: Attribute | None) -> AbstractContextManager[Any]:
    """A span named ``toolweave.<name>`` around the block (a no-op without OpenTelemetry, and while no
    tracer provider is set: the API's no-op span still costs a context switch-in and out per span,
    several per proxied call)."""
    if _trace is None or isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider):
        return nullcontext()
    return _span(name, {k: v for k, v in attributes.items() if v is not None})


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

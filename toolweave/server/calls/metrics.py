"""Prometheus metrics of one gateway, in a registry of its own (several gateways may share a process).

Served at ``/metrics`` on the HTTP and SSE apps (behind their authentication), and for stdio
deployments on ``metrics_port`` of 127.0.0.1. Tool-labelled series only use registry tool ids
and meta-tool names: an unknown name a client sends is counted as ``(unknown)``, so a client cannot
grow the label set without bound.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, start_http_server
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["GatewayMetrics"]

log = logging.getLogger(__name__)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_SIZE_BUCKETS = (0, 1, 2, 5, 10, 20, 40, 80, 128)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.turn_latency = Histogram(
            "toolweave_turn_seconds",
            "Latency of one turn (find_tools or a proxied call), seconds.",
            ["kind"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.published_size = Histogram(
            "toolweave_published_tools",
            "Size of a session's published set after a find_tools turn (meta-tools excluded).",
            buckets=_SIZE_BUCKETS,
            registry=self.registry,
        )
        self.calls = Counter(
            "toolweave_calls",
            "Tool calls by tool and outcome (ok or an error code).",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.upstream_up = Gauge(
            "toolweave_upstream_up",
            "1 when the upstream is connected, else 0.",
            ["source"],
            registry=self.registry,
        )
        self.quarantined = Gauge(
            "toolweave_quarantined_tools", "Tool definitions held in quarantine.", registry=self.registry
        )
        self.auth_failures = Counter(
            "toolweave_auth_failures",
            "Requests refused for lack of a valid credential.",
            registry=self.registry,
        )
        # each labelled series' child, kept: ``labels()`` checks its labels and takes a lock on every
        # call, a tenth of a proxied call's bookkeeping; the children live as long as their metric
        self._latency_of: dict[str, Any] = {}
        self._calls_of: dict[tuple[str, str], Any] = {}

    def turn(self, kind: str, tool: str, outcome: str, elapsed_s: float) -> None:
        """Count one ``tools/call`` turn: its latency by ``kind``, the call by ``tool`` and ``outcome``."""
        latency = self._latency_of.get(kind)
        if latency is None:
            latency = self._latency_of[kind] = self.turn_latency.labels(kind)
        latency.observe(elapsed_s)
        counted = self._calls_of.get((tool, outcome))
        if counted is None:
            counted = self._calls_of[(tool, outcome)] = self.calls.labels(tool, outcome)
        counted.inc()

    def scrape(self) -> bytes:
        return generate_latest(self.registry)

    async def endpoint(self, _request: Request) -> Response:
        return Response(self.scrape(), media_type=CONTENT_TYPE_LATEST)

    def serve_port(self, port: int | None) -> None:
        """Serve ``/metrics`` on 127.0.0.1:``port`` from a daemon thread (stdio has no HTTP server)."""
        if port is None:
            return
        start_http_server(port, addr="127.0.0.1", registry=self.registry)
        log.info("Prometheus metrics on http://127.0.0.1:%d/metrics", port)

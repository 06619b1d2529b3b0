"""`toolweave serve`: run the gateway on a manifest."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import signal
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from toolweave.commands.options import RegistryOption, settings_for, setup_logging, user_errors
from toolweave.server.fronts.front_answers import DEFAULT_HOST, DEFAULT_PORT
from toolweave.settings import REGISTRY_DIR_VAR, Settings

if TYPE_CHECKING:
    from toolweave.registry import Registry
    from toolweave.server.fronts.early import EarlyFront
    from toolweave.server.fronts.http_front import HttpFront
    from toolweave.server.fronts.transports import Transport

__all__ = ["REGISTRY_DIR_VAR", "SIGNAL_EXIT", "STDIO_EXIT", "register"]

log = logging.getLogger(__name__)

STDIO_EXIT = (0.3, 0.7)
"""Once a stdio client closed stdin: upstreams still running after 0.3 s are stopped, and the process
is gone within 0.7 s (``server/fronts/shutdown.py``)."""
SIGNAL_EXIT = (3.0, 4.5)
"""After SIGTERM or Ctrl-C (HTTP, SSE): open requests get 1 s, upstreams still running after 3 s are
stopped, and the process is gone within 4.5 s, however many sessions were open."""


def serve_command(
    manifest: Annotated[
        Path, typer.Option("--manifest", "-m", help="Manifest YAML: upstream servers, catalogs, settings.")
    ],
    transport: Annotated[
        str,
        typer.Option("--transport", "-t", help="stdio (default, for desktop clients), http (/mcp) or sse."),
    ] = "stdio",
    host: Annotated[
        str,
        typer.Option(
            "--host", help="HTTP/SSE bind address; loopback by default so only this machine connects."
        ),
    ] = DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", help="HTTP/SSE port.")] = DEFAULT_PORT,
    insecure_no_auth: Annotated[
        bool, typer.Option("--insecure-no-auth", help="Labs only: serve a non-loopback address without auth.")
    ] = False,
    registry: RegistryOption = None,
) -> None:
    """Serve the manifest's tools to one MCP client (stdio) or many (http, sse).

    Logs go to stderr; with stdio, stdout carries the MCP protocol and nothing else.
    """
    with user_errors():
        from toolweave.errors import ConfigError
        from toolweave.manifest import load_manifest

        if transport not in ("stdio", "http", "sse"):
            raise ConfigError(f"--transport: unknown transport {transport!r}; expected stdio, http or sse")
        loaded = load_manifest(manifest)  # a bad manifest still fails here, before the server starts
        settings = loaded.settings_for(settings_for(None), registry=registry)
        if insecure_no_auth:
            security = settings.security.model_copy(update={"insecure_no_auth": True})
            settings = settings.model_copy(update={"security": security})
        setup_logging(settings.log_level)
        _name_registry_dir(settings)
        early = _early_front(transport, settings)
        from toolweave.server.fronts import http_front

        settings, shared_home = _share(transport, settings, http_front.started())
        front = _http_front(transport, host, settings)
        from toolweave.server.fronts.shutdown import ExitDeadline, exit_now

        if early is not None:  # the manifest is fine; until the gateway serves, a client gone ends it all
            early.left.arm(partial(_nobody_to_serve, early))
        # The MCP SDK comes with these: imported once the early front can answer tools/list too.
        from toolweave.adapters.factory import build_backends
        from toolweave.server.fronts.transports import serve
        from toolweave.server.gateway import Gateway

        gateways: list[Gateway] = []

        async def on_status(source: str, available: bool) -> None:
            for gateway in gateways:  # the gateway is built after its backends
                await gateway.sources.backend_status(source, available)

        backends = build_backends(loaded.backends(), settings, on_status=on_status)
        # The registry opens in the background once the server runs (instant start, docs/gateway.md).
        gateway = Gateway(partial(_open_registry, settings), backends, settings, manifest=loaded)
        gateways.append(gateway)
        if early is not None:  # no upstream was started yet; from here on the SDK sees the input end
            early.left.arm(None)
        deadline = ExitDeadline(*(STDIO_EXIT if transport == "stdio" else SIGNAL_EXIT))
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way to stop HTTP serving
            serve(
                gateway,
                cast("Transport", transport),  # checked above
                host=host,
                port=port,
                early=early,
                front=front,
                on_stop=deadline.start,
            )
        if shared_home is not None:
            from toolweave.server.fronts import sharing

            sharing.withdraw(shared_home)
        exit_now()  # upstreams are stopped, the registry closed: the interpreter's teardown helps no one


def _share(transport: str, settings: Settings, front: HttpFront | None) -> tuple[Settings, str | None]:
    """The shared gateway's part (``server/fronts/sharing.py``; ``toolweave.__main__`` took its lock and
    announced it): only its own token is accepted, whatever the manifest's ``security`` says, and it
    stops once idle for ``share_idle_s`` after its app has taken over. Returns the settings to serve with
    and the registry directory whose discovery file is removed on the way out (None: not shared)."""
    from toolweave.server.fronts import sharing

    if transport != "http" or sharing.SERVING is None or front is None or "://" in str(settings.home):
        return settings, None
    _, token = sharing.SERVING
    digest = hashlib.sha256(token.encode()).hexdigest()
    # named as the identity a stdio client has: a bridged client is that identity, policies included
    tokens = {settings.security.default_identity: f"sha256:{digest}"}
    security = settings.security.model_copy(update={"auth": "tokens", "tokens": tokens})
    settings = settings.model_copy(update={"security": security})
    idle_s = settings.share_idle_s or 60.0  # a shared gateway always stops by itself

    def watch() -> None:
        front.serving.wait()
        stop = partial(os.kill, os.getpid(), signal.SIGTERM)  # the way out SIGTERM takes, one log line
        sharing.watch_idle(idle_s, front.idle_for, stop)

    threading.Thread(target=watch, name="toolweave-shared-idle-start", daemon=True).start()
    return settings, str(settings.home)


def _name_registry_dir(settings: Settings) -> None:
    home = str(settings.home)
    if "://" not in home:
        os.environ[REGISTRY_DIR_VAR] = str(Path(home).expanduser().resolve())


def _nobody_to_serve(early: EarlyFront) -> None:
    """The client left before the gateway served: end the process (from the front's thread, at once),
    unless it sent requests the front left for the gateway (a piped client closes stdin after its last
    request, and still reads the answers: the launch goes on, and ends once they are answered)."""
    from toolweave.server.fronts.shutdown import exit_now  # imported already: no wait on an import lock

    if owed := early.owed():
        log.info("the client closed stdin with %d request(s) to answer: answering them first", owed)
        return
    early.close_host_socket()
    exit_now()


def _early_front(transport: str, settings: Settings) -> EarlyFront | None:
    """The front ``toolweave.__main__`` started, told how to answer ``tools/list`` (meta-tools, by the
    settings) until the gateway takes over; None when there is none (in-process runs, other transports)."""
    from toolweave.server.fronts import early

    front = early.claim()
    if front is None:
        return None
    if transport != "stdio":  # not reached: __main__ starts a front for stdio only
        front.hand_over()
        return None
    front.offer_ready_tools(str(settings.home), settings.retrieval.final_k)
    _rank_ready_table(settings)
    front.offer_tools_list(settings.publish.always_load)
    front.offer_starting_wait(settings.startup_call_wait_s)
    front.offer_relist_bounds(settings.publish.relist_wait_ms / 1000, settings.publish.relist_probe_ms / 1000)
    return front


def _http_front(transport: str, host: str, settings: Settings) -> HttpFront | None:
    """The HTTP front ``toolweave.__main__`` started (the port listens already), told what it may
    answer now that the settings are loaded; None when there is none (in-process runs, other
    transports, a port that could not be bound: ``serve`` then reports that)."""
    from toolweave.server.fronts import front_answers, http_front
    from toolweave.server.turns import ready_index

    front = http_front.claim()
    if front is None:
        return None
    front_answers.check_exposure(host, settings.security)
    security = settings.security
    hosts, origins = front_answers.allowed_names(host, security.allowed_hosts, security.allowed_origins)
    policy = front_answers.FrontPolicy(
        settings.publish.always_load,
        hosts,
        origins,
        settings.max_request_bytes,
        starting_wait_s=settings.startup_call_wait_s,
        relist_wait_s=settings.publish.relist_wait_ms / 1000,
    )
    # with credentials to check, every request waits for the full app (and its authentication)
    front.offer(policy if security.auth == "none" else None)
    if security.auth == "none":  # find_tools answered from the registry's ready table from here on
        ready = ready_index.load(settings.home)
        if ready is not None:
            front.offer(dataclasses.replace(policy, ready=ready, ready_k=settings.retrieval.final_k))
            _rank_ready_table(settings)
    return front


def _rank_ready_table(settings: Settings) -> None:
    """From now on, in the background, load the query encoder (unless ``toolweave.__main__`` began it):
    once it is up, the ready table's answers rank with its vectors as the gateway's search does
    (``server/turns/ready_rank.py``), seconds before LanceDB is even imported."""
    from toolweave.server.turns import ready_index

    model = ready_index.configured_model(settings)
    ready_index.rank_in_background(settings.home, model, settings.retrieval)


def _open_registry(settings: Settings) -> Registry:
    from toolweave.registry import Registry

    return Registry.open(settings.home, settings=settings)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.command("serve")(serve_command)

"""What the HTTP front (``server/fronts/http_front.py``) may answer, decided from one request: standard
library only, pure (no I/O), so it runs before the MCP SDK is imported.

A request gets an answer here only when the full app would give the same one without any credential:
a POST to ``/mcp`` with a ``Host`` (and ``Origin``, if any) that DNS-rebinding protection accepts, JSON
content, an ``Accept`` of both JSON and SSE, a well-formed JSON-RPC body, and in the 2026-07-28 era
routing headers that agree with the envelope. Anything else is None: the full app answers it, whatever
that answer is. The answers themselves are ``server/fronts/handshake.py``'s, the values the SDK server is
built from.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Container, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from toolweave.errors import ConfigError
from toolweave.server.fronts import handshake
from toolweave.server.fronts.address import DEFAULT_HOST, DEFAULT_PORT, bind_now
from toolweave.server.fronts.early import STILL_STARTING
from toolweave.server.turns import ready_index

if TYPE_CHECKING:
    from toolweave.settings import SecuritySettings

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_STARTING_WAIT_S",
    "MCP_PATH",
    "MODERN_NOT_FOUND_STATUS",
    "SESSION_HEADER",
    "WILDCARD_HOSTS",
    "Decision",
    "FrontPolicy",
    "Offered",
    "allowed_names",
    "bind_now",
    "check_exposure",
    "decide",
    "header_lists",
    "is_loopback",
    "one_header",
    "provisional_policy",
    "starting_wait",
    "still_starting",
]

log = logging.getLogger(__name__)

MODERN_NOT_FOUND_STATUS = 404
"""The HTTP status the SDK gives a 2026-era "method not found" (a test keeps it equal to the SDK's)."""


MCP_PATH = "/mcp"
SESSION_HEADER = b"mcp-session-id"
_VERSION = b"mcp-protocol-version"
_METHOD = b"mcp-method"
_ROUTING = (_VERSION, _METHOD, b"mcp-name")
_LOOPBACK = ("localhost", "::1")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    return host in _LOOPBACK or host.startswith("127.")


def allowed_names(
    host: str, allowed_hosts: Iterable[str], allowed_origins: Iterable[str]
) -> tuple[list[str], list[str]]:
    """The ``Host`` and ``Origin`` headers accepted on a server bound to ``host`` (DNS-rebinding
    protection): loopback names, the bind address, and the settings' extras. ``name:*`` admits any
    port; the bare name is accepted too (an HTTPS client on 443 sends no port)."""
    names = ["127.0.0.1", "localhost", "[::1]"]
    if host not in WILDCARD_HOSTS and not is_loopback(host):
        names.append(f"[{host}]" if ":" in host else host)
    hosts = [f"{n}:*" for n in names] + list(allowed_hosts)
    hosts += [h.removesuffix(":*") for h in hosts if h.endswith(":*")]
    origins = [f"{s}://{n}:*" for n in names for s in ("http", "https")] + list(allowed_origins)
    return hosts, origins


def check_exposure(host: str, security: SecuritySettings) -> None:
    """Refuse to serve a non-loopback address without authentication, unless explicitly insecure."""
    if is_loopback(host):
        return
    if security.auth == "none":
        if not security.insecure_no_auth:
            raise ConfigError(
                f"refusing to listen on {host} without authentication: anyone who reaches the port could "
                "run every tool. Set security.auth to `tokens` or `oauth` in the manifest, bind 127.0.0.1, "
                "or pass --insecure-no-auth for a lab."
            )
        log.warning("!!! INSECURE: serving %s WITHOUT AUTHENTICATION (--insecure-no-auth) !!!", host)
    if host in WILDCARD_HOSTS and not security.allowed_hosts:
        log.warning(
            "bound to %s: only loopback Host headers are accepted; list this server's names in "
            "security.allowed_hosts",
            host,
        )


def _matches(value: str, allowed: list[str]) -> bool:
    """The SDK's rule (``TransportSecurityMiddleware``): exact, or ``base:*`` with any port."""
    return value in allowed or any(a.endswith(":*") and value.startswith(a[:-2] + ":") for a in allowed)


DEFAULT_STARTING_WAIT_S = 3.0
"""``Settings.startup_call_wait_s``'s default (a test keeps them equal): the settings model is not loaded
when the front first answers."""


class Answers(Protocol):
    """What answers a plain ``find_tools`` here: the ready table (``ready_index.ReadyIndex``)."""

    def answer(self, query: str, k: int) -> tuple[dict[str, Any], list[str]]: ...

    def position(self, tool_id: str) -> int: ...

    def listed(self, tool_id: str) -> dict[str, Any]: ...


class _Starting:
    """The answer to a ``find_tools`` the gateway could not take within its start-up bound: no tools, and
    the note to call again (what ``server/turns/starting.py`` answers once the gateway runs)."""

    def answer(self, query: str, k: int) -> tuple[dict[str, Any], list[str]]:
        return {"tools": [], "tool_list_changed": False, "note": STILL_STARTING}, []

    def position(self, tool_id: str) -> int:
        return 0

    def listed(self, tool_id: str) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class FrontPolicy:
    """What the loaded settings let the front answer (none of it while authentication is configured)."""

    always_load: bool
    hosts: list[str]
    origins: list[str]
    max_body: int
    ready: Answers | None = None
    """The registry's ready table: ``find_tools`` is answered from it (``server/turns/ready_index.py``)."""
    ready_k: int = 10
    """How many tools such an answer names at most (``retrieval.final_k``), unless the call says."""
    starting_wait_s: float = 0.0
    """``startup_call_wait_s``: a plain ``find_tools`` the gateway has not taken over this long after it
    came is answered here as still starting (``still_starting``); 0: it waits for the gateway."""
    relist_wait_s: float = 5.0
    """``publish.relist_wait_ms`` in seconds: how long an answer that offered tools to a 2026-era client
    listening here waits for its re-list (``front_offers.Offers.awaiting_list``); 0: never held."""


@dataclass(frozen=True)
class Offered:
    """A tool a ``find_tools`` answer here offers: the gateway publishes it as it takes the request over."""

    id: str
    position: int
    """Its place in the ready table: the gateway lists published tools in that order."""
    entry: dict[str, Any]
    """Its ``find_tools`` entry."""
    listed: dict[str, Any]
    """What ``tools/list`` shows of it beyond that entry (``ReadyTool.listed``)."""


@dataclass(frozen=True)
class Decision:
    """The front's answer to one request."""

    message: dict[str, Any]
    """The request (JSON-RPC)."""
    status: int = 200
    reply: dict[str, Any] | None = None
    """``{"result": ...}`` or ``{"error": ...}``; None for a notification (202, no body)."""
    session: str | None = None
    """The handshake-era session it belongs to (a new one for ``initialize``)."""
    replay: bool = True
    """Whether the full app must see it too, so its sessions are what they would have been."""
    listen: dict[str, Any] | None = None
    """For a ``subscriptions/listen``: the acknowledgement that opens the stream (served by the full
    app from the hand-over on)."""
    offered: tuple[Offered, ...] = ()
    """For a ``find_tools`` answered from the ready table: the tools it offers (``front_offers.py``)."""

    def payload(self) -> dict[str, Any] | None:
        """The JSON-RPC response the client gets (None for a notification)."""
        return None if self.reply is None else {"jsonrpc": "2.0", "id": self.message["id"], **self.reply}


PROVISIONAL_MAX_BODY = 64 * 1024
"""The smallest ``max_request_bytes`` the settings allow: a body the front answers before the settings
are loaded is never one the gateway would refuse for its size."""
_SETTING_SECTIONS = re.compile(r"security|always_load|relist_wait")
"""Anywhere in the manifest (a flow mapping or an anchor could carry a section too): conservative, a
false alarm only makes the front wait for the settings."""


def provisional_policy(
    host: str, manifest_text: str, environ: Mapping[str, str], ready: ready_index.ReadyIndex | None
) -> FrontPolicy | None:
    """What the front may answer before typer and the settings model are loaded (seconds on a busy
    machine), when that is certainly what the loaded settings will say: a loopback address, nothing in
    the environment about security or ``always_load``, and a manifest that does not even mention
    ``security`` or ``always_load`` (what the front answers depends on nothing else); then the defaults
    hold (no authentication, loopback names only). None otherwise: the front waits for the settings."""
    if not is_loopback(host) or _SETTING_SECTIONS.search(manifest_text):
        return None
    if any(k.startswith(("TOOLWEAVE_SECURITY", "TOOLWEAVE_PUBLISH")) for k in environ):
        return None
    hosts, origins = allowed_names(host, (), ())
    return FrontPolicy(
        True,
        hosts,
        origins,
        PROVISIONAL_MAX_BODY,
        ready=ready,
        starting_wait_s=starting_wait(manifest_text, environ),
    )


def starting_wait(manifest_text: str, environ: Mapping[str, str]) -> float:
    """``startup_call_wait_s`` as the loaded settings will say, when that is certain; else 0 (the
    gateway's app answers)."""
    if "startup_call_wait" in manifest_text:
        return 0.0
    value = environ.get("TOOLWEAVE_STARTUP_CALL_WAIT_S")
    if value is None:
        return DEFAULT_STARTING_WAIT_S
    try:
        return max(0.0, float(value))
    except ValueError:
        return 0.0


def still_starting(
    scope: MutableMapping[str, Any], body: bytes, policy: FrontPolicy, sessions: Container[str]
) -> Decision | None:
    """The "still starting" answer to a plain ``find_tools`` that ``decide`` left to the gateway (no
    ready table), for when the gateway has not taken it within ``policy.starting_wait_s``: on a machine
    whose cores are busy, importing the SDK alone can outlast a client's timeout (the OpenAI Agents SDK's
    5 s), and the gateway's own bound only counts once it runs. None for anything else. Not replayed:
    nothing was searched or published, and the model calls again."""
    if not policy.starting_wait_s:
        return None
    decision = decide(scope, body, replace(policy, ready=_Starting()), sessions)
    if decision is None or decision.message.get("method") != "tools/call":
        return None
    return replace(decision, replay=False)


def header_lists(scope: MutableMapping[str, Any]) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = {}
    for key, value in scope.get("headers", ()):
        out.setdefault(key.lower(), []).append(value)
    return out


def one_header(headers: dict[bytes, list[bytes]], name: bytes) -> str | None:
    values = headers.get(name, [])
    return values[0].decode("latin-1") if len(values) == 1 else None


def decide(
    scope: MutableMapping[str, Any], body: bytes, policy: FrontPolicy, sessions: Container[str]
) -> Decision | None:
    """The answer to this request, or None: the full app answers it. ``sessions``: the handshake-era
    sessions the front began."""
    if len(body) > policy.max_body or scope.get("method") != "POST" or scope.get("path") != MCP_PATH:
        return None
    headers = header_lists(scope)
    host, origin = one_header(headers, b"host"), headers.get(b"origin")
    if host is None or not _matches(host, policy.hosts):
        return None
    if origin is not None and not (
        len(origin) == 1 and _matches(origin[0].decode("latin-1"), policy.origins)
    ):
        return None
    kind, accept = one_header(headers, b"content-type") or "", b",".join(headers.get(b"accept", []))
    if not kind.lower().startswith("application/json"):
        return None
    if b"application/json" not in accept or b"text/event-stream" not in accept:
        return None
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if any(len(headers.get(name, [])) > 1 for name in _ROUTING):
        return None
    version = one_header(headers, _VERSION)
    if version is not None and version not in handshake.HANDSHAKE_PROTOCOL_VERSIONS:
        return _modern(headers, message, policy)
    return _handshake(headers, message, policy, sessions)


def _handshake(
    headers: dict[bytes, list[bytes]], message: dict[str, Any], policy: FrontPolicy, sessions: Container[str]
) -> Decision | None:
    method, params, request_id = message.get("method"), message.get("params"), message.get("id")
    session = one_header(headers, SESSION_HEADER)
    if session is None:
        if method != "initialize" or not handshake.is_request_id(request_id):
            return None
        if not handshake.initialize_params_ok(params):
            return None
        assert isinstance(params, dict)
        result = handshake.initialize_result(params["protocolVersion"], handshake.server_version())
        return Decision(message, reply={"result": result}, session=uuid.uuid4().hex)
    if session not in sessions or handshake.envelope_version(params) is not None:
        return None
    if "id" not in message:
        if method != "notifications/initialized":
            return None
        return Decision(message, status=202, session=session)
    if not handshake.is_request_id(request_id):
        return None
    if method == "tools/list" and handshake.without_cursor(params):
        result = handshake.tools_list_result(policy.always_load)
        return Decision(message, reply={"result": result}, session=session)
    if method == "ping" and (params is None or isinstance(params, dict)):
        return Decision(message, reply={"result": {}}, session=session, replay=False)
    if method == "tools/call" and (found := _find_tools(params, policy)) is not None:
        return Decision(message, reply={"result": found[0]}, session=session, offered=found[1])
    return None


def _find_tools(params: object, policy: FrontPolicy) -> tuple[dict[str, Any], tuple[Offered, ...]] | None:
    """A plain ``find_tools`` answered from the ready table (replayed: the gateway publishes what it
    found) and the tools it offers; None without a table, or for any other call."""
    plain = ready_index.plain_find_query(params)
    if plain is None or policy.ready is None:
        return None
    doc, ids = policy.ready.answer(plain[0], plain[1] or policy.ready_k)
    offered = tuple(
        Offered(tool_id, policy.ready.position(tool_id), entry, policy.ready.listed(tool_id))
        for tool_id, entry in zip(ids, doc["tools"], strict=True)
    )
    return ready_index.call_result(doc), offered


def _modern(
    headers: dict[bytes, list[bytes]], message: dict[str, Any], policy: FrontPolicy
) -> Decision | None:
    method, params, request_id = message.get("method"), message.get("params"), message.get("id")
    version = handshake.envelope_version(params)
    if version is None or version != one_header(headers, _VERSION) or one_header(headers, _METHOD) != method:
        return None
    if not handshake.is_request_id(request_id) or SESSION_HEADER in headers:
        return None
    name = one_header(headers, b"mcp-name")
    if b"mcp-name" in headers and (method != "tools/call" or name != handshake.FIND_TOOLS):
        return None
    current = handshake.server_version()
    if method == "server/discover":
        return Decision(message, reply={"result": handshake.discover_result(current)})
    if method == "tools/list" and handshake.without_cursor(params):
        return Decision(
            message, reply={"result": handshake.modern_tools_list_result(policy.always_load, current)}
        )
    if method == "ping":
        error = {"error": handshake.modern_ping_error()}
        return Decision(message, status=MODERN_NOT_FOUND_STATUS, reply=error, replay=False)
    if method == "subscriptions/listen" and isinstance(request_id, str | int):
        ack = handshake.listen_acknowledgement(request_id, params)
        return None if ack is None else Decision(message, replay=False, listen=ack)
    if method == "tools/call" and (found := _find_tools(params, policy)) is not None:
        result = handshake.modern_result(found[0], current)
        return Decision(message, reply={"result": result}, offered=found[1])
    return None

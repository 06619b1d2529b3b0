"""Who is calling: bearer tokens or OAuth 2.1 access tokens (JWT) on the HTTP and SSE transports.

One pure ASGI middleware (``AuthMiddleware``) sits in front of every route of both HTTP apps, so
``/mcp``, ``/sse``, ``/messages/`` and ``/metrics`` all need a credential; only the Protected Resource
Metadata document (RFC 9728) is public. A request without a valid credential gets 401 with
``WWW-Authenticate: Bearer ...`` (plus ``resource_metadata=`` in OAuth mode, as the MCP authorization
spec asks) and never reaches the MCP server.

An accepted request carries its ``Identity`` in the ASGI scope and, as the SDK's ``AuthenticatedUser``,
in ``scope["user"]``: the SDK then refuses to let one identity use another's session (streamable HTTP
and SSE both compare the session's creator with the requester).

Modes (``settings.security.auth``):

* ``tokens``: named tokens, stored as sha256 digests (``sha256:<hex>``) or read from ``env:VAR`` /
  ``file:PATH`` and hashed at startup; the presented token's digest is compared with every stored one
  in constant time.
* ``oauth``: a resource server. JWTs are checked for signature (the issuer's JWKS, fetched with httpx
  and cached; an unknown ``kid`` triggers one re-fetch, rate-limited, which is how key rotation works),
  issuer, audience (the resource URL unless configured), expiry and not-before.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

from toolweave.errors import ConfigError, ServerError
from toolweave.server.fronts.front_answers import is_loopback
from toolweave.settings import SecuritySettings

__all__ = [
    "IDENTITY_SCOPE_KEY",
    "PRM_PATH",
    "AuthError",
    "AuthMiddleware",
    "Authenticator",
    "Identity",
    "JwtAuthenticator",
    "TokenAuthenticator",
    "authenticator_for",
    "identity_of_request",
    "is_loopback",
]

log = logging.getLogger(__name__)

IDENTITY_SCOPE_KEY = "toolweave.identity"
PRM_PATH = "/.well-known/oauth-protected-resource"
_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_JWKS_REFETCH_MIN_S = 10.0
"""An unknown ``kid`` re-fetches the JWKS at most this often: garbage tokens must not hammer the issuer."""


class AuthError(ServerError):
    """A credential was presented but is not acceptable (the message says why; never the token)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """An authenticated caller. ``name`` keys sessions, policy and the audit log."""

    name: str
    method: str
    """``token``, ``oauth`` or ``default`` (stdio / no authentication)."""
    claims: dict[str, Any] = field(default_factory=dict)


class Authenticator(Protocol):
    async def authenticate(self, token: str) -> Identity:
        """The identity ``token`` proves; raises ``AuthError`` otherwise."""
        ...


# -- bearer tokens ----------------------------------------------------------------------------------------
def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _stored_digest(name: str, spec: str) -> bytes:
    kind, _, value = spec.partition(":")
    where = f"security.tokens.{name}"
    if kind == "sha256":
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = b""
        if len(raw) != 32:
            raise ConfigError(f"{where}: `sha256:` needs 64 hex digits (sha256 of the token)")
        return raw
    if kind == "env":
        secret = os.environ.get(value, "")
        if not secret:
            raise ConfigError(f"{where}: environment variable {value!r} is not set or empty")
        return _digest(secret)
    if kind == "file":
        try:
            secret = Path(value).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read token file {value}: {exc.strerror or exc}") from exc
        if not secret:
            raise ConfigError(f"{where}: token file {value} is empty")
        return _digest(secret)
    raise ConfigError(
        f"{where}: expected `sha256:<hex>`, `env:VAR` or `file:PATH` (plain tokens are not stored)"
    )


class TokenAuthenticator:
    """Named bearer tokens, compared as sha256 digests in constant time."""

    def __init__(self, tokens: dict[str, str]) -> None:
        if not tokens:
            raise ConfigError("security.auth is `tokens` but security.tokens is empty")
        self._digests = [(name, _stored_digest(name, spec)) for name, spec in tokens.items()]

    async def authenticate(self, token: str) -> Identity:
        presented = _digest(token)
        found: str | None = None
        for name, digest in self._digests:  # no early exit: timing does not tell which entry matched
            if hmac.compare_digest(presented, digest) and found is None:
                found = name
        if found is None:
            raise AuthError("unknown bearer token")
        return Identity(found, "token")


# -- OAuth 2.1 resource server (JWT access tokens) --------------------------------------------------------
class JwtAuthenticator:
    """Validate JWT access tokens against an issuer's JWKS (cached, re-fetched on an unknown ``kid``)."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_url: str,
        identity_claim: str = "sub",
        cache_s: float = 300.0,
        leeway_s: float = 30.0,
    ) -> None:
        if not issuer or not audience or not jwks_url:
            raise ConfigError("security.auth is `oauth`: set security.oauth_issuer (and a resource URL)")
        self.issuer = issuer
        self.audience = audience
        self.jwks_url = jwks_url
        self.identity_claim = identity_claim
        self.cache_s = cache_s
        self.leeway_s = leeway_s
        """Clock skew allowed between the issuer and this gateway (``exp``, ``nbf``, ``iat``)."""
        self._keys: dict[str, Any] = {}
        self._fetched_at = -1e9
        self._lock = anyio.Lock()

    async def _fetch(self) -> None:
        import httpx
        import jwt

        try:
            async with httpx.AsyncClient(timeout=10.0, follow_redirects=False) as client:
                response = await client.get(self.jwks_url)
                response.raise_for_status()
                jwks = jwt.PyJWKSet.from_dict(response.json())
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
            raise AuthError(f"cannot fetch the issuer's keys from {self.jwks_url}: {exc}") from exc
        self._keys = {k.key_id or "": k for k in jwks.keys}
        self._fetched_at = time.monotonic()
        log.info("JWKS from %s: %d keys", self.jwks_url, len(self._keys))

    async def _key(self, kid: str) -> Any:
        async with self._lock:
            age = time.monotonic() - self._fetched_at
            if age > self.cache_s or (kid not in self._keys and age > _JWKS_REFETCH_MIN_S):
                await self._fetch()
        key = self._keys.get(kid)
        if key is None and not kid and len(self._keys) == 1:
            key = next(iter(self._keys.values()))  # a one-key JWKS may leave out kid
        if key is None:
            raise AuthError(f"token signed with an unknown key (kid {kid!r})")
        return key

    async def authenticate(self, token: str) -> Identity:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise AuthError(f"malformed token: {exc}") from exc
        alg = header.get("alg")
        if alg not in _ALGORITHMS:
            raise AuthError(f"token algorithm {alg!r} is not accepted")
        key = await self._key(str(header.get("kid") or ""))
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise AuthError(f"token rejected: {exc}") from exc
        name = claims.get(self.identity_claim)
        if not isinstance(name, str) or not name:
            raise AuthError(f"token has no {self.identity_claim!r} claim")
        return Identity(name, "oauth", claims)


def authenticator_for(security: SecuritySettings, resource_url: str) -> Authenticator | None:
    """The configured authenticator, or None when authentication is off."""
    if security.auth == "tokens":
        return TokenAuthenticator(security.tokens)
    if security.auth == "oauth":
        issuer = security.oauth_issuer.rstrip("/")
        return JwtAuthenticator(
            issuer=security.oauth_issuer,
            audience=security.oauth_audience or resource_url,
            jwks_url=security.oauth_jwks_url or f"{issuer}/.well-known/jwks.json",
            identity_claim=security.oauth_identity_claim,
            cache_s=security.oauth_jwks_cache_s,
            leeway_s=security.oauth_leeway_s,
        )
    return None


def identity_of_request(request: Any) -> Identity | None:
    """The identity ``AuthMiddleware`` attached to an HTTP request (None: stdio or no authentication)."""
    scope = getattr(request, "scope", None)
    identity = scope.get(IDENTITY_SCOPE_KEY) if isinstance(scope, dict) else None
    return identity if isinstance(identity, Identity) else None


# -- ASGI -------------------------------------------------------------------------------------------------
def _bearer(scope: Scope) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == b"authorization":
            text = bytes(value).decode("latin-1")
            if text[:7].lower() == "bearer " and text[7:].strip():
                return text[7:].strip()
            return None
    return None


class AuthMiddleware:
    """401 for requests without an acceptable credential; the identity into the scope otherwise."""

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        *,
        resource_url: str,
        issuer: str | None = None,
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.resource_url = resource_url
        self.issuer = issuer
        self.metadata_url = _metadata_url(resource_url) if issuer else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if self.issuer and scope.get("path", "").startswith(PRM_PATH):
            await self._metadata(send)
            return
        token = _bearer(scope)
        if token is None:
            await self._refuse(send, "invalid_request", "authentication required: send a bearer token")
            return
        try:
            identity = await self.authenticator.authenticate(token)
        except AuthError as exc:
            log.warning("refused %s %s: %s", scope.get("method"), scope.get("path"), exc)
            await self._refuse(send, "invalid_token", str(exc))
            return
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        scope[IDENTITY_SCOPE_KEY] = identity
        # The raw token stays out of the scope: only who it proved.
        access = AccessToken(
            token="", client_id=identity.name, scopes=[], subject=identity.name, claims={"iss": self.issuer}
        )
        scope["user"] = AuthenticatedUser(access)
        await self.app(scope, receive, send)

    async def _metadata(self, send: Send) -> None:
        doc = {
            "resource": self.resource_url,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
        }
        await _send_json(send, 200, doc, [])

    async def _refuse(self, send: Send, error: str, description: str) -> None:
        description = description.replace('"', "'")
        parts = [f'error="{error}"', f'error_description="{description}"']
        if self.metadata_url:
            parts.append(f'resource_metadata="{self.metadata_url}"')
        header = ("www-authenticate", "Bearer " + ", ".join(parts))
        await _send_json(send, 401, {"error": error, "error_description": description}, [header])


def _metadata_url(resource_url: str) -> str:
    """RFC 9728 §3.1: the well-known suffix goes between the origin and the resource's path."""
    from urllib.parse import urlsplit

    parts = urlsplit(resource_url)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{PRM_PATH}{path}"


async def _send_json(send: Send, status: int, doc: dict[str, Any], headers: list[tuple[str, str]]) -> None:
    body = json.dumps(doc).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode("latin-1", "replace")) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})

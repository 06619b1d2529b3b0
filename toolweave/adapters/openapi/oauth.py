"""Access tokens of the OAuth 2.0 client-credentials grant (RFC 6749 §4.4), for OpenAPI sources whose
calls need one: most corporate APIs give a service its own client id and secret, not a fixed token.

``TokenSource`` asks the token endpoint on the first call that needs a token, keeps the token until
shortly before it expires, and is asked again when the API answers 401 (the token was revoked or
rotated early). Concurrent calls that find no valid token wait for one request to the endpoint, not one
each. Each gateway process keeps its own token: replicas need no coordination, as the endpoint issues
as many as it is asked for.

The client secret and the tokens stay out of logs, errors and records: messages name the endpoint
(without its query) and what it answered (its ``error`` and ``error_description`` fields).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from toolweave.adapters.openapi.calls import env_secret
from toolweave.adapters.openapi.config import AuthConfig
from toolweave.config_values import interpolate
from toolweave.errors import AdapterError
from toolweave.redaction import display_url

__all__ = ["TokenSource"]

log = logging.getLogger(__name__)

EARLY_S = 30.0
"""A token is renewed this long before the endpoint said it expires (never sooner than half its life)."""
_MAX_ANSWER_BYTES = 64_000


class TokenSource:
    """The current access token of one source's client credentials."""

    def __init__(self, source: str, auth: AuthConfig, token_url: str, environ: Mapping[str, str]) -> None:
        self._source = source
        self._token_url = token_url
        self._auth = auth
        self._environ = environ
        self._token: str | None = None
        self._renew_at = 0.0
        self._lock: asyncio.Lock | None = None

    async def token(self, client: httpx.AsyncClient) -> str:
        """A token that has not expired: the kept one, or a new one from the endpoint."""
        if self._token is not None and time.monotonic() < self._renew_at:
            return self._token
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one request to the endpoint however many calls wait for it
            if self._token is None or time.monotonic() >= self._renew_at:
                self._token, self._renew_at = await self._fetch(client)
            return self._token

    def forget(self, token: str) -> None:
        """The API refused ``token`` (401): the next call asks the endpoint again. A token already
        replaced by another call's request is kept."""
        if self._token == token:
            self._token = None

    async def _fetch(self, client: httpx.AsyncClient) -> tuple[str, float]:
        auth = self._auth
        url = interpolate(self._token_url, self._environ, where=f"{self._source} auth.token_url")
        where = f"the token endpoint {display_url(url)}"
        client_id, secret = (
            env_secret(self._environ, auth.client_id_env),
            env_secret(self._environ, auth.client_secret_env),
        )
        form = {"grant_type": "client_credentials", **auth.token_params}
        if auth.scopes:
            form["scope"] = " ".join(auth.scopes)
        headers = {"Accept": "application/json"}
        if auth.client_auth == "basic":
            # RFC 6749 §2.3.1: the id and the secret are form-encoded before they are joined
            pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form |= {"client_id": client_id, "client_secret": secret}
        try:
            answer = await client.post(url, data=form, headers=headers)
        except httpx.HTTPError as exc:
            raise AdapterError(f"{where} could not be reached: {type(exc).__name__}") from None
        body = _json(answer.content[:_MAX_ANSWER_BYTES])
        if answer.status_code >= 400:
            said = ", ".join(str(body[k])[:200] for k in ("error", "error_description") if k in body)
            raise AdapterError(f"{where} answered HTTP {answer.status_code}: {said or 'no reason given'}")
        token, kind = body.get("access_token"), str(body.get("token_type") or "bearer")
        if not isinstance(token, str) or not token:
            raise AdapterError(f"{where} answered without an access_token")
        if kind.lower() != "bearer":
            raise AdapterError(f"{where} issued a {kind!r} token; only bearer tokens are sent")
        lifetime = body.get("expires_in")
        now = time.monotonic()
        if isinstance(lifetime, int | float) and not isinstance(lifetime, bool) and lifetime > 0:
            renew_at = now + max(lifetime - EARLY_S, lifetime / 2)
        else:
            renew_at = float("inf")  # no lifetime said: kept until the API refuses it
        log.info(
            "openapi source %s: a new access token from %s (expires in %s s)", self._source, where, lifetime
        )
        return token, renew_at


def _json(raw: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}

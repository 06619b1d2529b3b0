"""How one OpenAPI source is configured: where the spec lives, where calls go, how they authenticate.

Secrets never appear here: auth names the *environment variables* that hold them, and they are read at
call time only (so records, manifests and logs never carry a token).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "AuthConfig", "OpenAPISourceConfig"]

DEFAULT_MAX_RESPONSE_BYTES = 100_000
"""Response bodies above this are truncated before they reach the model (with a note giving the size)."""


class AuthConfig(BaseModel):
    """Credentials for calls, by environment-variable name.

    * ``bearer``: ``Authorization: Bearer $<token_env>``
    * ``basic``: ``Authorization: Basic base64($<username_env>:$<password_env>)``
    * ``api_key``: ``$<key_env>`` in the header, query parameter or cookie called ``name``
    * ``oauth2``: ``Authorization: Bearer <token>``, the token asked of ``token_url`` (default: the
      spec's client-credentials flow) with the client
      credentials grant (``$<client_id_env>``, ``$<client_secret_env>``, ``scopes``), kept until it
      expires, asked again when the API answers 401 (``oauth.TokenSource``)
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Literal["bearer", "basic", "api_key", "oauth2"]
    token_env: str | None = Field(None, description="Env var holding the bearer token.")
    username_env: str | None = Field(None, description="Env var holding the basic-auth user name.")
    password_env: str | None = Field(None, description="Env var holding the basic-auth password.")
    key_env: str | None = Field(None, description="Env var holding the API key.")
    location: Literal["header", "query", "cookie"] = Field(
        "header", alias="in", description="Where the API key goes."
    )
    name: str | None = Field(None, description="Header / query parameter / cookie name of the API key.")
    token_url: str | None = Field(
        None,
        description="oauth2: the token endpoint (`${VAR}`s expanded); default: the spec's one "
        "client-credentials flow's `tokenUrl`.",
    )
    client_id_env: str | None = Field(None, description="oauth2: env var holding the client id.")
    client_secret_env: str | None = Field(None, description="oauth2: env var holding the client secret.")
    scopes: list[str] = Field(default_factory=list, description="oauth2: the scopes asked for.")
    client_auth: Literal["basic", "post"] = Field(
        "basic", description="oauth2: the client's credentials in an Authorization header, or in the form."
    )
    token_params: dict[str, str] = Field(
        default_factory=dict, description="oauth2: more form fields of the token request (`audience`)."
    )

    @model_validator(mode="after")
    def _check_fields(self) -> AuthConfig:
        needed = {
            "bearer": ("token_env",),
            "basic": ("username_env", "password_env"),
            "api_key": ("key_env", "name"),
            "oauth2": ("client_id_env", "client_secret_env"),
        }[self.type]
        missing = [field for field in needed if not getattr(self, field)]
        if missing:
            raise ValueError(f"auth type {self.type!r} needs {', '.join(missing)}")
        return self


class OpenAPISourceConfig(BaseModel):
    """One ``openapi:`` source of a manifest."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Source name: tool ids are `<name>__<operation>`.")
    spec: str = Field(
        description="Path or http(s) URL of the OpenAPI 2.0 / 3.0 / 3.1 document (YAML or JSON)."
    )
    base_url: str | None = Field(None, description="Overrides the spec's `servers` / `host` + `basePath`.")
    auth: AuthConfig | None = None
    include: list[str] = Field(
        default_factory=list,
        description="Keep only operations matching one of these: a tag, an operationId, or a path glob "
        "(`/pets/*`, optionally prefixed by a method: `GET /pets/*`). Empty = everything.",
    )
    exclude: list[str] = Field(default_factory=list, description="Drop operations matching one of these.")
    arazzo: list[str] = Field(default_factory=list, description="Arazzo workflow files adding step order.")
    timeout_s: float | None = Field(
        None,
        gt=0,
        description="One call's budget in seconds, retries included (default: the gateway's call_timeout_s).",
    )
    allow_remote_refs: bool = Field(False, description="Fetch `$ref`s that point to http(s) URLs.")
    max_response_bytes: int = Field(
        DEFAULT_MAX_RESPONSE_BYTES,
        gt=0,
        description="Truncate larger response bodies (a note gives the size).",
    )
    retries: int = Field(2, ge=0, le=5, description="Retries of idempotent calls on connect errors / 5xx.")
    infer_edges: bool = Field(
        True, description="Add heuristic (inferred) dependency edges besides declared ones."
    )

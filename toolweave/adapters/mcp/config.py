"""How one upstream MCP server is configured (the ``servers:`` entries of a manifest).

The models keep the *raw* text of every field (``Bearer ${API_TOKEN}``), so secrets never reach logs,
reprs or the registry; the MCP backend calls ``interpolated()`` only when it builds a transport.
Relative paths (a stdio server's ``cwd`` and a ``./``-relative ``command``) resolve against the
manifest's folder, passed as validation context by the manifest loader.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from toolweave.config_values import base_dir, interpolate_tree, resolve_path

__all__ = ["HttpServer", "ServerConfig", "SseServer", "StdioServer", "stdio_environment"]


class _ServerBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="False keeps the entry but never starts it.")
    timeout_s: float | None = Field(None, gt=0, description="Call timeout override, seconds.")
    connect_timeout_s: float | None = Field(None, gt=0, description="Connect/initialise timeout override.")
    protocol: Literal["auto", "legacy"] = Field(
        "auto", description="`auto` tries the 2026 protocol and falls back; `legacy` forces the handshake."
    )
    elicitation: bool = Field(
        True,
        description="Tell the upstream it may ask the user for input (elicitation), passed on to the "
        "client of the call; false: it is told the client cannot, as a client without elicitation is.",
    )

    def interpolated(self, environ: Mapping[str, str] | None = None) -> Self:
        """A copy with ``${VAR}`` resolved. Holds secrets: build the transport with it, never log it."""
        env = os.environ if environ is None else environ
        data = self.model_dump()
        for key in self._interpolated_fields:
            data[key] = interpolate_tree(data[key], env, f"server field {key!r}")
        return type(self).model_validate(data)

    _interpolated_fields: ClassVar[tuple[str, ...]] = ()

    def describe(self) -> str:
        """One line for logs; shows the raw (uninterpolated) values only."""
        raise NotImplementedError


def _masked(headers: Mapping[str, str]) -> dict[str, str]:
    """Header values for logs: `${VAR}` references as written, literal values hidden (may be secrets)."""
    return {k: v if "${" in v else "***" for k, v in headers.items()}


class StdioServer(_ServerBase):
    """An upstream started as a subprocess, speaking MCP over its stdin/stdout."""

    transport: Literal["stdio"]
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="Added to the gateway's environment.")
    cwd: Path | None = None

    _interpolated_fields: ClassVar[tuple[str, ...]] = ("command", "args", "env")

    @field_validator("command")
    @classmethod
    def _command_path(cls, v: str, info: ValidationInfo) -> str:
        # Only explicit ./ or ../ paths are relative to the manifest; bare names go through PATH.
        base = base_dir(info)
        if base is not None and (v.startswith("./") or v.startswith("../")):
            return str((base / v).resolve())
        return v

    @field_validator("cwd")
    @classmethod
    def _cwd_path(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        return None if v is None else resolve_path(v, info)

    def describe(self) -> str:
        return f"stdio: {' '.join([self.command, *self.args])}"


class HttpServer(_ServerBase):
    """An upstream reached over streamable HTTP."""

    transport: Literal["http", "streamable-http", "streamable_http", "streamableHttp"]
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)

    _interpolated_fields: ClassVar[tuple[str, ...]] = ("url", "headers")

    @field_validator("transport")
    @classmethod
    def _one_spelling(cls, v: str) -> str:
        return "http"  # claude/VS Code configs spell it several ways; code downstream sees one

    def describe(self) -> str:
        return f"http: {self.url} headers={_masked(self.headers)}"


class SseServer(_ServerBase):
    """An upstream reached over the legacy HTTP+SSE transport."""

    transport: Literal["sse"]
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)

    _interpolated_fields: ClassVar[tuple[str, ...]] = ("url", "headers")

    def describe(self) -> str:
        return f"sse: {self.url} headers={_masked(self.headers)}"


ServerConfig = Annotated[StdioServer | HttpServer | SseServer, Field(discriminator="transport")]


def stdio_environment(env: Mapping[str, str], path: str) -> dict[str, str]:
    """The extra environment of a stdio upstream: its entry's ``env`` over a PATH (``path``, ours) that
    starts with this interpreter's bin directory.

    A manifest says ``command: python`` or ``command: mcp-server-time``; without an activated venv those
    would resolve to the system's, which lacks the servers installed next to toolweave. The spawn looks
    the command up on the child's PATH, so only the child's environment changes, never the gateway's.
    """
    bin_dir = str(Path(sys.executable).parent)
    if path.split(os.pathsep)[0] != bin_dir:
        path = os.pathsep.join([bin_dir, path]) if path else bin_dir
    return {"PATH": path, **env}

"""`toolweave import-claude-config FILE`: turn a Claude Desktop / Claude Code MCP config into a manifest.

Reads the ``mcpServers`` block of ``claude_desktop_config.json`` or ``.mcp.json`` (VS Code's
``servers`` block too) and writes manifest YAML. Values that look like secrets (by variable/header
name or by shape) are replaced with ``${NAME}`` references, so the manifest can be committed; the
variables to export are listed on stderr, never their values.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from toolweave.commands.options import user_errors
from toolweave.errors import ConfigError

__all__ = ["claude_config_to_manifest", "register"]

_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|PASS|KEY|PRIVATE|CREDENTIAL|AUTH|PAT\b)", re.I)
_SECRET_SHAPE = re.compile(
    r"^(sk-|sk_|pk_|rk_|ghp_|gho_|ghs_|github_pat_|glpat-|xox[abpr]-|AKIA|AIza|eyJ)"  # well-known prefixes
    r"|^[A-Za-z0-9+/_\-]{32,}={0,2}$"  # long opaque strings
)
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")
_TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http", "sse": "sse"}


def _looks_secret(name: str, value: str) -> bool:
    if not value or _REFERENCE.search(value):
        return False
    return bool(_SECRET_NAME.search(name)) or bool(_SECRET_SHAPE.search(value))


def _var_name(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_").upper() or "SECRET"


def _source_name(raw: str, taken: set[str]) -> str:
    name = re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9_-]+", "_", raw)).strip("_-")[:40] or "server"
    candidate, n = name, 2
    while candidate in taken:
        candidate = f"{name[:37]}_{n}"
        n += 1
    return candidate


def claude_config_to_manifest(
    config: dict[str, Any], *, origin: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """Convert a parsed Claude config. Returns ``(manifest data, {VAR: why})`` where the second lists the
    environment variables the manifest now references. Raises ``ConfigError`` naming ``origin`` and the
    server for anything it cannot convert."""
    block = config.get("mcpServers", config.get("servers"))
    if not isinstance(block, dict):
        raise ConfigError(
            f"{origin}: no `mcpServers` object found (is this a claude_desktop_config.json / .mcp.json?)"
        )
    servers: dict[str, Any] = {}
    needed: dict[str, str] = {}

    def note_refs(value: str, server: str) -> None:
        for m in _REFERENCE.finditer(value):
            needed.setdefault(m.group(1), f"referenced by server {server!r}")

    def reference(var: str, why: str) -> str:
        """``${var}`` in place of a secret; ``var`` joins the variables the user must set."""
        needed[var] = why
        return f"${{{var}}}"

    for raw_name, entry in block.items():
        where = f"{origin}: mcpServers.{raw_name}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected an object, got {type(entry).__name__}")
        name = _source_name(str(raw_name), set(servers))
        if not any(k in entry for k in ("type", "transport", "command", "url")):
            raise ConfigError(f"{where}: needs `command` (stdio) or `url` (http / sse)")
        kind = str(entry.get("type") or entry.get("transport") or ("stdio" if "command" in entry else "http"))
        if kind not in _TYPES:
            raise ConfigError(f"{where}: unknown type {kind!r}; expected stdio, http, streamable-http or sse")
        out: dict[str, Any] = {"transport": _TYPES[kind]}
        if out["transport"] == "stdio":
            if not isinstance(entry.get("command"), str):
                raise ConfigError(f"{where}: a stdio server needs a `command` string")
            out["command"] = entry["command"]
            args = entry.get("args") or []
            if not isinstance(args, list):
                raise ConfigError(f"{where}: `args` must be a list")
            out["args"] = [str(a) for a in args]
            env: dict[str, str] = {}
            for key, value in (entry.get("env") or {}).items():
                value = str(value)
                if _looks_secret(str(key), value):
                    env[str(key)] = reference(_var_name(str(key)), f"secret env {key} of server {name!r}")
                else:
                    env[str(key)] = value
                    note_refs(value, name)
            if env:
                out["env"] = env
            if entry.get("cwd"):
                out["cwd"] = str(entry["cwd"])
            for a in out["args"]:
                note_refs(a, name)
        else:
            if not isinstance(entry.get("url"), str):
                raise ConfigError(f"{where}: a {kind} server needs a `url` string")
            out["url"] = entry["url"]
            note_refs(out["url"], name)
            headers: dict[str, str] = {}
            for key, value in (entry.get("headers") or {}).items():
                value = str(value)
                scheme, _, credential = value.partition(" ")
                if (
                    credential
                    and scheme.lower() in {"bearer", "basic", "token"}
                    and not _REFERENCE.search(value)
                ):
                    var = _var_name(name, "token" if scheme.lower() != "basic" else "basic_auth")
                    headers[str(key)] = f"{scheme} {reference(var, f'{key} header of server {name!r}')}"
                elif _looks_secret(str(key), value):
                    headers[str(key)] = reference(
                        _var_name(name, str(key)), f"{key} header of server {name!r}"
                    )
                else:
                    headers[str(key)] = value
                    note_refs(value, name)
            if headers:
                out["headers"] = headers
        if entry.get("disabled") is True:
            out["enabled"] = False
        servers[name] = out
    return {"servers": servers}, needed


def import_claude_config(
    file: Annotated[Path, typer.Argument(help="claude_desktop_config.json or .mcp.json to convert.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the manifest here instead of stdout.")
    ] = None,
) -> None:
    """Turn the `mcpServers` of a Claude config into a toolweave manifest (secrets become ${VARS})."""
    with user_errors():
        import yaml

        from toolweave.manifest import load_manifest

        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{file}: cannot read: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{file}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{file}: expected a JSON object at the top level")
        manifest, needed = claude_config_to_manifest(data, origin=str(file))
        text = f"# toolweave manifest imported from {file.name}\n" + yaml.safe_dump(
            manifest, sort_keys=False, allow_unicode=True, width=1000
        )
        if output is not None:
            output.write_text(text, encoding="utf-8")
            # Self-check: what we wrote must load (with placeholder values for the variables).
            load_manifest(output, environ=dict.fromkeys(needed, "x"))
            typer.echo(f"wrote {output} ({len(manifest['servers'])} servers)", err=True)
        else:
            typer.echo(text, nl=False)
        if needed:
            typer.echo("export these environment variables before `toolweave serve`:", err=True)
            for var, why in needed.items():
                typer.echo(f"  export {var}=...   # {why}", err=True)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the ``toolweave`` app (called by ``toolweave.cli``)."""
    app.command("import-claude-config")(import_claude_config)

"""Values in configuration files: ``${VAR}`` interpolation and paths relative to the file.

Shared by the manifest loader and the adapters' own config models (which validate the same YAML), so it
sits at the package root. No I/O but resolving paths; the environment is passed in or read from os.environ.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationInfo

from toolweave.errors import ConfigError

__all__ = [
    "base_dir",
    "interpolate",
    "interpolate_tree",
    "is_uri",
    "local_path",
    "missing_vars",
    "references",
    "resolve_path",
]

_VAR = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def missing_vars(value: str, environ: Mapping[str, str]) -> list[str]:
    missing = []
    for m in _VAR.finditer(value):
        name, default = m.group(1), m.group(2)
        if name is not None and default is None and name not in environ:
            missing.append(name)
    return missing


MIN_REFERENCED_CHARS = 4
"""A value expanded from ``${VAR}`` shorter than this is not looked for in records (``1``, ``on``,
``443`` occur everywhere; a secret or a host is longer)."""


def references(value: Any, environ: Mapping[str, str]) -> dict[str, str]:
    """The values ``${VAR}`` references in ``value`` (a string, or dicts and lists of them) expand to
    from ``environ``, each mapped back to its reference (``"s3cr3t" -> "${TOKEN}"``): what must not be
    stored where the entry's expansion could end up (tool records, the registry). Defaults written in
    the entry are not included (they are in the manifest already), nor values shorter than
    ``MIN_REFERENCED_CHARS``."""
    out: dict[str, str] = {}
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, str) and "${" in item:
            for m in _VAR.finditer(item):
                name = m.group(1)
                got = environ.get(name) if name is not None else None
                if got and len(got) >= MIN_REFERENCED_CHARS:
                    out.setdefault(got, "${" + name + "}")
    return out


def interpolate(value: str, environ: Mapping[str, str] | None = None, *, where: str = "") -> str:
    """Replace ``${VAR}`` / ``${VAR:-default}`` (default also when VAR is empty); ``$${`` → ``${``.

    Raises ``ConfigError`` naming ``where`` and the variable when one is not set and has no default.
    """
    env = os.environ if environ is None else environ

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name is None:
            return "${"
        got = env.get(name)
        if default is not None:
            return got if got else default
        if got is None:
            raise ConfigError(f"{where}: environment variable {name!r} is not set (use ${{{name}:-default}})")
        return got

    return _VAR.sub(sub, value)


def interpolate_tree(value: Any, environ: Mapping[str, str], where: str) -> Any:
    if isinstance(value, str):
        return interpolate(value, environ, where=where)
    if isinstance(value, dict):
        return {k: interpolate_tree(v, environ, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate_tree(v, environ, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def base_dir(info: ValidationInfo) -> Path | None:
    ctx = info.context
    return ctx.get("base_dir") if isinstance(ctx, dict) else None


def resolve_path(path: Path, info: ValidationInfo) -> Path:
    base = base_dir(info)
    path = path.expanduser()
    return path if path.is_absolute() or base is None else (base / path).resolve()


_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_uri(value: str) -> bool:
    """Whether ``value`` is a URI (``s3://bucket/prefix``, ``https://...``), not a file path."""
    return _URI.match(value) is not None


def local_path(value: str, base: Path) -> str:
    """Resolve a relative file path against ``base``; URLs and absolute paths are kept."""
    if is_uri(value):
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())

"""What every command shares: the common options, logging to stderr, settings from the environment and
``--registry``, and the one place our errors become a message and exit code 1."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from toolweave.errors import ConfigError, ToolweaveError
from toolweave.settings import Settings

__all__ = ["JsonOption", "RegistryOption", "settings_for", "setup_logging", "user_errors"]

RegistryOption = Annotated[
    str | None,
    typer.Option(
        "--registry",
        help="Registry directory or object-store URI, e.g. s3://bucket/prefix "
        "(default: $TOOLWEAVE_HOME, else ~/.toolweave).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def setup_logging(level: str = "INFO") -> None:
    """Logs go to stderr: stdout belongs to command output and to the stdio transport."""
    from toolweave import redaction

    logging.basicConfig(
        level=level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    redaction.install()  # secrets in URLs never reach a log, whoever logs them (SDK and httpx included)


def settings_for(registry: Path | str | None) -> Settings:
    """The settings from the environment, with ``--registry`` applied; a bad variable is a ConfigError."""
    from pydantic import ValidationError

    try:
        settings = Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        var = "TOOLWEAVE_" + "__".join(str(p) for p in first["loc"]).upper()
        raise ConfigError(f"{var}: {first['msg']}") from exc
    if registry is not None:
        settings.home = registry  # validated: a URI stays a string, anything else becomes a Path
    return settings


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn our errors into a clear message and exit code 1 (no traceback for bad input)."""
    try:
        yield
    except ToolweaveError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    except BaseExceptionGroup as group:  # raised inside a task group (the server's lifespan)
        ours = group.subgroup(ToolweaveError)
        if ours is None:
            raise
        first: BaseException = ours
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        typer.echo(f"error: {first}", err=True)
        raise typer.Exit(1) from group

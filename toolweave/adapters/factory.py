"""Build the gateway's backends from configured entries.

``build_backends`` returns one ``Backend`` per entry, built by the entry's kind (``adapters/kinds.py``).
The server starts each one's ``run(on_tools)`` as its own task and listens to ``on_status`` to
stop/start publishing a source's tools. Adapters know their own config models only, never the manifest
that holds them: the caller passes the entries in (``Manifest.backends()``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from toolweave.adapters.backend import Backend, StatusCallback
from toolweave.adapters.kinds import BuildOptions, Configured
from toolweave.settings import Settings

__all__ = ["build_backends"]


def build_backends(
    entries: Iterable[Configured],
    settings: Settings,
    *,
    on_status: StatusCallback | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Backend]:
    """One backend per entry (pass only the enabled ones).

    Timeouts and the result size limit come from ``settings`` (an entry's own ``timeout_s`` /
    ``connect_timeout_s`` win). Nothing connects until the caller runs each backend's ``run``.
    Catalogs are static: ingest them with ``load_catalog`` (they need no backend).
    """
    options = BuildOptions(settings, on_status=on_status, environ=environ)
    return [entry.build(options) for entry in entries]

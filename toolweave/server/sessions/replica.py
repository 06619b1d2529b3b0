"""A gateway as one of many replicas on a shared registry (docs/registry.md, "Replicas").

Two duties, both cheap when nothing changes:

- **Share how to reach this manifest's upstreams.** At start, each MCP server and OpenAPI source of the
  manifest is recorded in the registry's committed ``sources`` table exactly as written (``${VARS}``
  unexpanded). A spec holding a literal header or environment value is not shared: it may be a secret,
  and a secret must never reach the registry.
- **Follow other replicas.** Every ``Settings.registry_poll_s`` the committed generation is read (one
  small row). When another process committed, the registry reloads its snapshot, sources this manifest
  lacks get a backend built from their shared spec (with this process's environment), and sessions
  whose published tools changed hear ``list_changed``; ``find_tools`` sees the new tools at once. A
  write of this replica that loaded another's commits first (every write catches up) is followed the same
  way: the poll counts the registry's foreign loads, not only its own reloads.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from pydantic import ValidationError

from toolweave.adapters.factory import build_backends
from toolweave.adapters.kinds import Configured, kind_named
from toolweave.errors import ConfigError

if TYPE_CHECKING:
    from toolweave.registry.sources import SourceSpec
    from toolweave.server.sources import SourceSync

__all__ = ["follow_registry", "share_sources"]

log = logging.getLogger(__name__)

POLL_DEADLINE_S = 10.0
"""How long a poll (one small read, and loading what changed) may take before it counts as an outage."""
CATALOG_KIND = "catalog"
"""``toolweave.registry.sources.CATALOG_KIND``, not imported: the registry loads after the handshake."""


def _literal_values(entry: Configured) -> list[str]:
    """Keys of header / env values written literally (not as ``${VAR}``): possibly secrets."""
    return sorted(k for k, v in entry.kind.literal_values(entry.config).items() if "${" not in v)


def manifest_specs(sources: SourceSync) -> list[SourceSpec]:
    """The shareable specs of the gateway's manifest (those without literal header/env values)."""
    from toolweave.registry.sources import SourceSpec  # with the registry: after the handshake

    manifest = sources.manifest
    if manifest is None:
        return []
    specs = [SourceSpec(c.source, CATALOG_KIND, "{}") for c in manifest.catalogs]
    for entry in manifest.backends():
        literal = _literal_values(entry)
        if literal:
            log.warning(
                "source %s is not shared with other replicas: %s written literally (may be secrets; "
                "use ${VARS})",
                entry.name,
                ", ".join(literal),
            )
            continue
        specs.append(SourceSpec(entry.name, entry.kind.name, entry.shared_spec()))
    return specs


async def share_sources(sources: SourceSync) -> None:
    """Record this manifest's sources in the registry for other replicas (a write only if new), and
    serve those other replicas shared."""
    specs = manifest_specs(sources)
    if specs:
        await anyio.to_thread.run_sync(sources.registry.set_source_specs, specs)
    adopt_shared_sources(sources)


async def follow_registry(sources: SourceSync) -> None:
    """Poll the registry for commits of other processes, forever (run it in the gateway's task group).

    A poll that fails (object store refusing) or does not answer within ``POLL_DEADLINE_S`` (a hung
    store) keeps the last snapshot serving: one warning per outage, without a traceback, and one when
    the registry can be checked again. A poll still waiting on a hung store is not joined by another."""
    from toolweave.errors import ToolweaveError
    from toolweave.registry.outage import Outage

    outage = Outage(
        log,
        "could not check the registry for newer versions; serving the last one loaded until it can: %s",
        "the registry can be checked again",
    )
    followed = _Followed(sources.registry.foreign_loads, sources.registry.content_hashes())
    done = anyio.Event()
    done.set()

    async def poll() -> None:
        try:
            await poll_once(sources, followed)
        except ToolweaveError as exc:
            outage.failed(exc)
        except Exception as exc:  # not an outage we know: its traceback at debug level, once per outage
            log.debug("registry poll failed", exc_info=True)
            outage.failed(exc)
        else:
            outage.succeeded()
        finally:
            done.set()

    async with anyio.create_task_group() as group:
        while True:
            await anyio.sleep(sources.settings.registry_poll_s)
            if not done.is_set():  # the last poll still waits for the store
                continue
            done = anyio.Event()
            group.start_soon(poll)
            with anyio.move_on_after(POLL_DEADLINE_S):
                await done.wait()
            if not done.is_set():
                outage.failed(f"no answer within {POLL_DEADLINE_S:.0f} s")


@dataclass
class _Followed:
    """What the follower announced last: the registry's ``foreign_loads`` then, and its tools' hashes."""

    loads: int
    hashes: Mapping[str, str]


async def poll_once(sources: SourceSync, followed: _Followed) -> bool:
    """Reload when another process committed; re-publish what changed. False when nothing did.

    Another process's commits may also have been loaded by a write of this one (it catches up first):
    they are announced here all the same, against what was announced last."""
    registry = sources.registry
    await anyio.to_thread.run_sync(
        registry.refresh, abandon_on_cancel=True
    )  # a hung store: shutdown leaves it
    before, after = followed.hashes, registry.content_hashes()
    followed.hashes = after  # this process's own writes were announced by the writes themselves
    if registry.foreign_loads == followed.loads:
        return False
    followed.loads = registry.foreign_loads
    sources.find_cache.clear()
    adopt_shared_sources(sources)
    await sources.republish(
        removed=set(before) - set(after),
        changed={i for i, h in after.items() if before.get(i) not in (None, h)},
        added=set(after) - set(before),
    )
    return True


def adopt_shared_sources(sources: SourceSync) -> None:
    """Serve what other replicas shared: their catalogs' tools, and (``registry_follow_sources``) a
    backend for each upstream this gateway has none for."""
    specs = sources.registry.source_specs()
    sources.add_shared_catalogs({s.name for s in specs if s.kind == CATALOG_KIND})
    if sources.settings.registry_follow_sources:
        connect_shared_sources(sources, specs)
    sources.refresh_stale_sources()


def connect_shared_sources(sources: SourceSync, specs: tuple[SourceSpec, ...]) -> None:
    """Start a backend for each shared upstream this gateway has none for."""
    entries: list[Configured] = []
    for spec in specs:
        if spec.name in sources.backends or spec.kind == CATALOG_KIND:
            continue
        kind = kind_named(spec.kind)
        if kind is None:
            log.warning("shared source %s has an unknown kind %r; skipped", spec.name, spec.kind)
            continue
        try:
            entries.append(Configured(spec.name, kind, kind.parse_shared(spec.spec, os.environ)))
        except (ValidationError, ValueError, ConfigError) as exc:  # another version's, damaged, a missing var
            log.warning("shared source %s has an unusable spec; skipped: %s", spec.name, exc)
    if not entries:
        return
    for backend in build_backends(entries, sources.settings, on_status=sources.backend_status):
        log.info("connecting to %s, shared by another replica", backend.name)
        sources.add_backend(backend)

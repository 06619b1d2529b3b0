"""What an identity may reach: its policy (``toolweave/policy.py``) minus the quarantined tools.

The gateway asks the guard at every exposure point: retrieval (hidden tools are excluded, so
``find_tools`` never returns them), the published list, and both call paths (a direct call and
``call_tool``). Quarantine state lives in the registry's LanceDB database
(``registry/quarantine.py``); ``watch`` re-reads it so ``toolweave tools approve`` in another process
takes effect in a running gateway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

import anyio

from toolweave.errors import ToolweaveError
from toolweave.policy import IdentityPolicy, Policy
from toolweave.records import ToolRecord
from toolweave.settings import SecuritySettings

if TYPE_CHECKING:  # LanceDB, pyarrow, networkx: imported with the registry, after the handshake
    from toolweave.registry import Registry

__all__ = ["Guard"]

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 1.0
WATCH_DEADLINE_S = 10.0
"""A re-read of the quarantine table that takes longer counts as an outage of the store."""


class Guard:
    def __init__(self, registry: Registry, security: SecuritySettings, policy: Policy) -> None:
        self.registry = registry
        self.security = security
        self.policy = policy
        from toolweave.registry.quarantine import QuarantineStore

        self.quarantine = QuarantineStore(registry.path, registry.settings.registry_storage_options)
        self.held: frozenset[str] = self.quarantine.held_ids()
        from toolweave.registry.outage import Outage

        self._outage = Outage(
            log,
            "could not re-read the quarantine table (approvals made elsewhere wait until it can): %s",
            "the quarantine table can be read again",
        )

    def rules(self, identity: str) -> IdentityPolicy:
        return self.policy.for_identity(identity)

    def allows(self, identity: str, record: ToolRecord) -> bool:
        return record.id not in self.held and self.rules(identity).permits(record)

    def hides_any(self, identity: str) -> bool:
        return bool(self.held) or self.rules(identity).restricts

    def denied_sources(self, identity: str, sources: Collection[str]) -> set[str]:
        return self.rules(identity).denied_sources(set(sources))

    def review(self, source: str, tools: Sequence[ToolRecord]) -> frozenset[str]:
        """Quarantine check of a source's complete tool list (blocking: run it in a worker thread)."""
        hold = self.security.hold_new_tools
        others = {r.name for r in self.registry.tools() if r.source != source}
        held = self.quarantine.review(
            source,
            tools,
            hold_new=source in hold or "*" in hold,
            other_tools=others,
            max_description_chars=self.security.max_description_chars,
        )
        self.held = self.quarantine.held_ids()
        return held

    async def watch(self, on_change: Callable[[], None] | None = None) -> None:
        """Follow approvals made by other processes."""
        while True:
            await anyio.sleep(WATCH_INTERVAL_S)
            try:
                with anyio.fail_after(WATCH_DEADLINE_S):
                    changed = await anyio.to_thread.run_sync(self.quarantine.refresh, abandon_on_cancel=True)
            except (ToolweaveError, TimeoutError) as exc:  # the store is down or hung: once per outage
                self._outage.failed(exc if str(exc) else f"no answer within {WATCH_DEADLINE_S:.0f} s")
                continue
            self._outage.succeeded()
            if changed:
                self.held = self.quarantine.held_ids()
                if on_change is not None:
                    on_change()

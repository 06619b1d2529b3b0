"""Policy per identity: which tools an identity may find, see and call. Pure: no I/O.

A manifest's ``policy:`` maps identity names (bearer-token names, OAuth subjects, the stdio default
identity) to rules; ``"*"`` applies to identities not listed. A rule pattern is ``SOURCE`` or
``SOURCE/TOOL`` with shell globs on both parts (``git/*_status``, ``github``, ``*/get_*``); ``TOOL``
matches the tool's own name or its published id. ``deny`` beats ``allow``; an empty ``allow`` allows
every tool. ``read_only`` admits only tools whose backend declared ``readOnlyHint: true``.

Without a ``policy:`` section every identity may use every tool (today's behaviour).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field

from toolweave.records import ToolRecord

__all__ = ["ANY_IDENTITY", "IdentityPolicy", "Policy"]

ANY_IDENTITY = "*"


def _matches(pattern: str, record: ToolRecord) -> bool:
    source, _, tool = pattern.partition("/")
    if not fnmatchcase(record.source, source):
        return False
    return not tool or fnmatchcase(record.name, tool) or fnmatchcase(record.id, tool)


class IdentityPolicy(BaseModel):
    """What one identity may use."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow: tuple[str, ...] = Field((), description="`SOURCE` or `SOURCE/TOOL` globs; empty = everything.")
    deny: tuple[str, ...] = Field((), description="`SOURCE` or `SOURCE/TOOL` globs; wins over allow.")
    read_only: bool = Field(False, description="Only tools annotated `readOnlyHint: true`.")

    @property
    def restricts(self) -> bool:
        return bool(self.allow or self.deny or self.read_only)

    def permits(self, record: ToolRecord) -> bool:
        if self.read_only and not record.read_only:
            return False
        if any(_matches(p, record) for p in self.deny):
            return False
        return not self.allow or any(_matches(p, record) for p in self.allow)

    def denied_sources(self, sources: set[str]) -> set[str]:
        """Sources none of whose tools this policy can admit (excluded from retrieval wholesale)."""
        return {s for s in sources if any(fnmatchcase(s, p) for p in self.deny if "/" not in p)} | {
            s
            for s in sources
            if self.allow and not any(fnmatchcase(s, p.partition("/")[0]) for p in self.allow)
        }


_OPEN = IdentityPolicy()


class Policy(BaseModel):
    """Rules by identity name (``"*"`` for everyone else)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    identities: dict[str, IdentityPolicy] = Field(default_factory=dict)

    def for_identity(self, identity: str) -> IdentityPolicy:
        rule = self.identities.get(identity)
        if rule is None:
            rule = self.identities.get(ANY_IDENTITY, _OPEN)
        return rule

"""What one ingest changed (``Registry.ingest`` returns it)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["IngestSummary"]


@dataclass
class IngestSummary:
    """What one ingest changed."""

    source: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    embedded: int = 0
    edges: int = 0
    seconds: float = 0.0
    skipped_edges: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{self.source}: {self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.removed} removed; {self.embedded} embedded; {self.edges} edges ({self.seconds:.2f} s)"
        )

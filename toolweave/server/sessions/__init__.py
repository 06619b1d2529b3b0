"""Sessions: per-client state, shared across replicas through Redis."""

__all__: list[str] = []

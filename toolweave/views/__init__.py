"""Views for people: registry data rendered as pages. Reads the registry; only the CLI imports views."""

__all__: list[str] = []

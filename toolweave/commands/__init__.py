"""CLI commands, one module per area. Importing a module registers its commands on ``toolweave.cli.app``.

Heavy libraries (lancedb, fastembed, mcp) are imported inside command bodies so `toolweave --help`
stays fast.
"""

__all__: list[str] = []

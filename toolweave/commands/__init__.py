"""CLI commands, one module per area, each with a ``register(app)`` that ``toolweave.cli`` calls (listed in
its ``COMMANDS``); shared options and error handling live in ``commands.options``.

Heavy libraries (lancedb, fastembed, mcp) are imported inside command bodies so `toolweave --help`
stays fast.
"""

__all__: list[str] = []

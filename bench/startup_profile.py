"""Where a gateway's start-up goes, stage by stage, in one process (wall seconds, in the order
`toolweave serve` pays them): typer + settings + manifest, the MCP SDK and the gateway's modules, LanceDB,
opening the registry, loading the embedding model with its first query, then a second query.

With ``--ready-first`` the ready table's vector ranking (``server/turns/ready_rank.py``: its modules,
the table's vectors, the query encoder without fastembed, a first ranked answer) is profiled right after
the settings, where a start pays it (on a thread, before the MCP SDK and LanceDB): the later stages
then find numpy and onnxruntime imported already.

Usage: .venv/bin/python bench/startup_profile.py [REGISTRY] [--ready-first]
       (default: the demo registry of bench/startup.py)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
_t0 = time.perf_counter()


def lap(what: str) -> None:
    global _t0
    now = time.perf_counter()
    print(f"{what}: {now - _t0:.2f} s", flush=True)
    _t0 = now


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--ready-first"]
    registry = Path(args[0]) if args else HERE / "out" / "startup" / "registry-demo"
    lap("interpreter and this script")
    import typer  # noqa: F401

    from toolweave.manifest import load_manifest  # noqa: F401
    from toolweave.settings import Settings

    lap("typer + settings + manifest")
    if "--ready-first" in sys.argv:
        from toolweave.server.turns import ready_index, ready_rank

        lap("ready ranking: its modules (numpy, retrieval)")
        settings = Settings(home=registry)
        model = ready_index.configured_model(settings)
        if ready_rank.attach(str(registry), model, settings.retrieval):
            lap("ready ranking: vectors + query encoder load + first query")
            table = ready_index.load(registry)
            assert table is not None
            table.answer("which hour is it in Japan right now", 10)
            lap("ready ranking: a ranked answer")
        else:
            lap("ready ranking: none (no vectors for this model)")
    import mcp  # noqa: F401

    from toolweave.server.gateway import Gateway  # noqa: F401

    lap("MCP SDK + gateway")
    import lancedb  # noqa: F401

    lap("LanceDB import")
    from toolweave.registry import Registry

    opened = Registry.open(registry, settings=Settings(home=registry))
    lap("Registry.open")
    opened.embedder.embed_query("warm up")
    lap("embedding model load + first query")
    opened.embedder.embed_query("what time is it in Tokyo")
    lap("second query")
    from toolweave.server.turns import ready_index

    table = ready_index.load(registry)
    lap(f"ready table load ({len(table) if table else 0} tools)")
    if table is not None:
        table.answer("what time is it in Tokyo", 10)
        lap("ready table answer")
    opened.close()


if __name__ == "__main__":
    main()

"""What counting the fleet's name vocabulary (``toolweave.names.NameVocabulary``) costs a registry: at
open (every name) and after a write (the names it added), with and without the tools' own names beside
their ids (the registry passes them, so that an id cut or sanitised by ``make_tool_id`` does not stand
for the name). CPU seconds, median of ``--repeat`` runs, one JSON line.

    .venv/bin/python bench/name_vocabulary.py --size 100000 --added 1000

The fleet is synthetic and deterministic: ``src<n % 97>__<three of 20 words>_<n>``, every name equal
to its id's name part (the common case: no name needs its own terms).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable

from toolweave.names import NameVocabulary, name_of

WORDS = (
    "get", "list", "create", "update", "delete", "user", "order", "invoice", "weather", "stock", "price",
    "report", "webhook", "repo", "file", "search", "payment", "customer", "ticket", "event",
)  # fmt: skip


def cpu_s(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return round(statistics.median(times), 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--added", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    rng = random.Random(0)
    ids = [f"src{n % 97}__{'_'.join(rng.sample(WORDS, 3))}_{n}" for n in range(args.size)]
    names = {tool_id: name_of(tool_id) for tool_id in ids}
    before = ids[: args.size - args.added]
    last = NameVocabulary.of(before, names)
    print(
        json.dumps(
            {
                "size": args.size,
                "added": args.added,
                "open_ids_s": cpu_s(lambda: NameVocabulary.of(ids), args.repeat),
                "open_names_s": cpu_s(lambda: NameVocabulary.of(ids, names), args.repeat),
                "write_ids_s": cpu_s(lambda: last.following(before, ids), args.repeat),
                "write_names_s": cpu_s(lambda: last.following(before, ids, names), args.repeat),
            }
        )
    )


if __name__ == "__main__":
    main()

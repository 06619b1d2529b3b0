"""A stdio wire tap: runs a command, relays stdin/stdout, logs each JSON-RPC line with its wall-clock time.

What a client and a stdio server say to each other, in the order the pipe carried it
(``bench/claude_code_turns.py --trace``). The command's stderr goes to GATEWAY_LOG.

Usage: python bench/wire_tap.py LOG GATEWAY_LOG CMD [ARGS...]
"""

import json
import subprocess
import sys
import threading
import time
from typing import Any

log = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115 - open for the process's life
errors = open(sys.argv[2], "ab")  # noqa: SIM115
child = subprocess.Popen(sys.argv[3:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
assert child.stdin is not None and child.stdout is not None
to_child, from_child = child.stdin, child.stdout


def summary(line: bytes) -> str:
    try:
        m: dict[str, Any] = json.loads(line)
    except ValueError:
        return "?"
    if "method" in m:
        extra = ""
        if m["method"] == "tools/call":
            extra = m.get("params", {}).get("name", "")
        return f"{m['method']} id={m.get('id')} {extra}"
    r = m.get("result") or {}
    if isinstance(r, dict) and "tools" in r:
        return (
            f"reply id={m.get('id')} tools={len(r['tools'])} "
            + ",".join(t["name"] for t in r["tools"] if "__" in t["name"])[:300]
        )
    return f"reply id={m.get('id')} len={len(line)} {line[:160].decode(errors='replace')}"


def up() -> None:
    for line in sys.stdin.buffer:
        log.write(f"{time.time():.3f} C->S {summary(line)}\n")
        to_child.write(line)
        to_child.flush()
    to_child.close()


threading.Thread(target=up, daemon=True).start()
for line in from_child:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
    log.write(f"{time.time():.3f} S->C {summary(line)}\n")
sys.exit(child.wait())

"""An "MCP server" that starts, reads its stdin and never answers: initialize must time out."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    for _line in sys.stdin:
        pass

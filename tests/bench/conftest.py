"""The bench's scripts import each other by module name (each runs from ``bench/``): so do their tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

"""stdout carries the MCP protocol over stdio: server code never prints."""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "toolweave" / "server"


def prints_in(path: Path) -> list[int]:
    """Lines of ``path`` that call ``print``."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    ]


def test_server_code_never_prints() -> None:
    """Anything else written to stdout breaks a stdio client; logs go to stderr."""
    modules = sorted(SERVER.rglob("*.py"))
    assert len(modules) > 10
    printing = [f"{path.name}:{line}" for path in modules for line in prints_in(path)]
    assert not printing, f"print() in server code: {printing}"


def test_the_print_check_sees_a_print(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text('import sys\nprint("hi", file=sys.stderr)\nlog = print\n')
    assert prints_in(source) == [2]

"""The server stays in parts a reader can hold in mind: small modules, classes with one job, and
nothing but the MCP protocol on stdout."""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "toolweave" / "server"
MAX_LINES = 600
MAX_GATEWAY_LINES = 400
MAX_METHODS = 25


def methods_per_class(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name: sum(isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in node.body)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }


def test_server_modules_and_classes_stay_small() -> None:
    modules = sorted(SERVER.glob("*.py"))
    assert len(modules) > 10
    too_long = {p.name: n for p in modules if (n := p.read_text(encoding="utf-8").count("\n")) > MAX_LINES}
    assert not too_long, f"over {MAX_LINES} lines: {too_long}"
    gateway = (SERVER / "gateway.py").read_text(encoding="utf-8").count("\n")
    assert gateway <= MAX_GATEWAY_LINES, f"gateway.py has {gateway} lines: move a job into its own part"
    crowded = {
        f"{p.name}:{name}": n for p in modules for name, n in methods_per_class(p).items() if n > MAX_METHODS
    }
    assert not crowded, f"classes with more than {MAX_METHODS} methods: {crowded}"


def test_the_method_count_sees_sync_and_async_methods(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("class A:\n    def a(self): ...\n    async def b(self): ...\n    x = 1\n")
    assert methods_per_class(source) == {"A": 2}


def test_server_code_never_prints() -> None:
    """stdout carries the MCP protocol over stdio: anything else written there breaks the client."""
    printing = []
    for path in sorted(SERVER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                printing.append(f"{path.name}:{node.lineno}")
    assert not printing, f"print() in server code: {printing}"

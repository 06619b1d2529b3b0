"""The layering the brief asks for, checked: imports follow the data flow, one exception root."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import toolweave.errors as errors

PACKAGE = Path(__file__).resolve().parents[1] / "toolweave"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def modules_under(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def test_lower_layers_never_import_the_server() -> None:
    for folder in ("adapters", "registry", "retrieval"):
        for path in modules_under(folder):
            bad = {
                m
                for m in imported_modules(path)
                if m == "toolweave.server" or m.startswith("toolweave.server.")
            }
            assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_only_server_and_adapters_speak_mcp() -> None:
    for folder in ("registry", "retrieval", "benchmark"):
        for path in modules_under(folder):
            bad = {m for m in imported_modules(path) if m.split(".")[0] in ("mcp", "mcp_types")}
            assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_retrieval_imports_no_io_library() -> None:
    """Import every retrieval module with I/O libraries and the other layers blocked."""
    blocked = [
        "lancedb", "pyarrow", "httpx", "httpx2", "mcp", "mcp_types", "anyio", "fastembed", "onnxruntime",
        "uvicorn", "starlette", "toolweave.registry", "toolweave.adapters", "toolweave.server",
    ]  # fmt: skip
    modules = [
        "toolweave.retrieval."
        + p.relative_to(PACKAGE / "retrieval").with_suffix("").as_posix().replace("/", ".")
        for p in modules_under("retrieval")
    ]
    script = f"""
import sys, importlib.abc
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError("retrieval must not import " + name)
for name in BLOCKED:
    sys.modules.pop(name, None)
sys.meta_path.insert(0, Block())
import importlib
for m in {modules!r}:
    importlib.import_module(m.removesuffix(".__init__"))
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


RETRIEVAL_MAY_IMPORT = {
    "__future__", "collections.abc", "dataclasses", "typing", "math", "statistics", "re", "numpy",
    "toolweave.records", "toolweave.errors", "toolweave.settings",
    "toolweave._lazy",  # the package's lazy exports (importlib only)
}  # fmt: skip


def test_retrieval_imports_only_pure_modules_directly() -> None:
    for path in modules_under("retrieval"):
        for module in imported_modules(path):
            ok = module in RETRIEVAL_MAY_IMPORT or module.startswith("toolweave.retrieval")
            assert ok, f"{path.relative_to(PACKAGE)} imports {module}: retrieval stays free of I/O"


def test_every_error_is_a_toolweave_error() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert inspect.isclass(cls) and issubclass(cls, errors.ToolweaveError), name
        assert name in (errors.__doc__ or ""), f"{name} missing from the tree in errors.py's docstring"


def test_every_module_declares_an_all_that_exists() -> None:
    """Each module states its public surface (ruff's RUF022 keeps it sorted) and it is not stale."""
    import importlib

    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("").as_posix().replace("/", ".")
        module = importlib.import_module(rel.removesuffix(".__init__"))
        assert hasattr(module, "__all__"), f"{rel} has no __all__"
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert not missing, f"{rel}.__all__ names what it does not define: {missing}"


def test_modules_stay_small() -> None:
    for path in PACKAGE.rglob("*.py"):
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines <= 1000, f"{path.relative_to(PACKAGE)} has {lines} lines"

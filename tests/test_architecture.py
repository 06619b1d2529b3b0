"""The layering the brief asks for, checked: imports follow the data flow, one exception root."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import tomllib
from collections.abc import Sequence
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


SHARED = {
    "records", "errors", "settings", "config_values", "call_errors", "yaml_limits", "policy", "scanner",
    "redaction", "_lazy", "tracing", "names", "wire_meta",
}  # fmt: skip
"""Root modules every layer may import: the records, errors, settings and config values they all speak
(``call_errors``: the one error result of a failed call and the one finishing step of every result;
``wire_meta``: ``_meta`` keys of the MCP wire; ``yaml_limits``: bounds for YAML we read), and the
pure security rules (access policy, tool-definition scanner, log redaction); ``_lazy``: the lazy-exports
helper of the package ``__init__``s (importlib only); ``tracing``: optional OpenTelemetry spans (API only,
a no-op without it); ``names``: tool names as words, cut the same way by the registry (which counts
them) and retrieval (which matches requests against them)."""

MAY_IMPORT: dict[str, set[str]] = {
    # The data flow: manifests -> adapters (discover) -> registry -> retrieval -> server -> adapters (call).
    "shared": set(),
    "adapters": set(),
    "registry": {"inference"},
    "inference": set(),  # pure: rules over tool records
    "retrieval": set(),
    "server": {"adapters", "registry", "retrieval", "manifest"},
    "manifest": {"adapters", "registry"},  # it validates the adapters' config models
    "benchmark": {"adapters", "inference", "registry", "retrieval"},  # it measures what the adapters convert
    "views": {"registry"},
}
"""Which other toolweave parts each part may import (shared modules always). The CLI (``cli.py``,
``commands/``) and the package facade (``__init__.py``) sit on top and may import anything."""


def part_of(module: str) -> str | None:
    """The architectural part a ``toolweave.*`` module belongs to (None: top level or not ours)."""
    parts = module.split(".")
    if parts[0] != "toolweave" or len(parts) == 1:
        return None
    name = parts[1]
    if name in SHARED:
        return "shared"
    if name in ("cli", "commands", "__init__", "__main__"):
        return None
    return name


def flow_violations(source_module: str, imported: set[str]) -> list[str]:
    """Imports of ``source_module`` that go against ``MAY_IMPORT``."""
    here = part_of(source_module)
    if here is None:
        return []
    allowed = MAY_IMPORT.get(here)
    assert allowed is not None, f"{source_module}: part {here!r} has no row in MAY_IMPORT"
    bad = []
    for module in sorted(imported):
        there = part_of(module)
        if there in (None, here, "shared") or there in allowed:
            continue
        bad.append(f"{source_module} imports {module} ({here} -> {there})")
    return bad


def test_imports_follow_the_data_flow() -> None:
    problems: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE.parent).with_suffix("").as_posix().replace("/", ".")
        problems += flow_violations(module.removesuffix(".__init__"), imported_modules(path))
    assert not problems, "\n".join(problems)


def test_the_flow_check_catches_imports_against_the_flow() -> None:
    """The negative case: the checker above must flag each kind of backwards import."""
    assert flow_violations("toolweave.registry.store", {"toolweave.server.gateway"})
    assert flow_violations("toolweave.adapters.mcp.backend", {"toolweave.manifest"})
    assert flow_violations("toolweave.retrieval.walk", {"toolweave.registry"})
    assert flow_violations("toolweave.registry.registry", {"toolweave.retrieval.pipeline"})
    assert flow_violations("toolweave.adapters.factory", {"toolweave.registry.registry"})
    assert flow_violations("toolweave.records", {"toolweave.registry"})
    assert not flow_violations("toolweave.server.gateway", {"toolweave.registry", "toolweave.records"})
    assert not flow_violations("toolweave.manifest", {"toolweave.adapters.mcp.config"})


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
    "toolweave.names",  # tool names as words (re, math, collections: no I/O)
    "toolweave._lazy",  # the package's lazy exports (importlib only)
    "bisect",  # the walk counts what already outweighs a later hit (no I/O)
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


MODULE_LINES = 600
FACADE_LINES = {"registry/registry.py": 400, "server/gateway.py": 400}
"""The doors a newcomer reads first stay thin: their parts hold the work."""
CLASS_METHODS = 25
STILL_LARGER: dict[str, int] = {}
"""Modules written before these limits, being split: they may shrink, never grow. Remove an entry once
its module is within the limit (the test says so)."""
CLASSES_STILL_LARGER: dict[str, int] = {}


def line_limit(rel: str) -> int:
    return STILL_LARGER.get(rel, FACADE_LINES.get(rel, MODULE_LINES))


def class_sizes(path: Path) -> dict[str, int]:
    """Class name → the functions defined in its body (methods, properties, dunders)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name: sum(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in node.body)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }


def test_modules_and_classes_stay_small() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > line_limit(rel):
            problems.append(f"{rel} has {lines} lines (at most {line_limit(rel)})")
        for name, methods in class_sizes(path).items():
            limit = CLASSES_STILL_LARGER.get(f"{rel}:{name}", CLASS_METHODS)
            if methods > limit:
                problems.append(f"{rel}: class {name} has {methods} methods (at most {limit})")
    assert not problems, "\n".join(problems)


def test_the_size_exceptions_are_still_needed() -> None:
    """An exception whose module or class shrank within the limit goes, so the list cannot go stale."""
    for rel in STILL_LARGER:
        lines = (PACKAGE / rel).read_text(encoding="utf-8").count("\n")
        limit = FACADE_LINES.get(rel, MODULE_LINES)
        assert lines > limit, f"{rel} has {lines} lines now: remove it from STILL_LARGER"
    for key in CLASSES_STILL_LARGER:
        rel, name = key.split(":")
        assert class_sizes(PACKAGE / rel).get(name, 0) > CLASS_METHODS, (
            f"remove {key} from CLASSES_STILL_LARGER"
        )


def test_the_size_check_counts_what_a_class_defines(tmp_path: Path) -> None:
    """The negative case: a class over the limit is counted as such, properties and dunders included."""
    body = "".join(f"    def m{n}(self) -> None: ...\n" for n in range(CLASS_METHODS))
    sample = tmp_path / "sample.py"
    sample.write_text(f"class Big:\n    @property\n    def p(self) -> int: ...\n{body}", encoding="utf-8")
    assert class_sizes(sample) == {"Big": CLASS_METHODS + 1}


def test_cli_commands_are_registered_explicitly() -> None:
    """Every command module is listed in ``cli.COMMANDS`` and adds its commands only when asked: no
    module imports the app to register itself as an import side effect."""
    import typer

    from toolweave import cli
    from toolweave.commands import search

    modules = {p.stem for p in modules_under("commands")} - {"__init__", "options"}
    assert {m.__name__.rsplit(".", 1)[1] for m in cli.COMMANDS} == modules
    for path in modules_under("commands"):
        assert "toolweave.cli" not in imported_modules(path), f"{path.name} imports the CLI app"
    fresh = typer.Typer()
    assert not fresh.registered_commands
    search.register(fresh)
    assert [c.name for c in fresh.registered_commands] == ["search"]


def test_the_package_says_it_is_typed() -> None:
    """PEP 561: ``py.typed`` ships in the package (hatch includes package data), so users' type checkers
    read our annotations; ``make test`` and ``make lint`` keep them honest with ``mypy --strict``, which
    checks the tests and the bench beside the package (the tests under relaxed rules)."""
    assert (PACKAGE / "py.typed").is_file()
    makefile = (PACKAGE.parent / "Makefile").read_text(encoding="utf-8")
    for target in ("test", "lint"):
        assert "$(BIN)/mypy" in makefile.split(f"\n{target}:")[1].split("\n\n")[0], target
    mypy = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert mypy["strict"] and mypy["files"] == ["toolweave", "tests", "bench"]


def _package_imports(path: Path, module: str) -> set[str]:
    """The package's modules ``path`` (module ``module``) imports, at any depth of its code (lazy
    imports inside functions count), relative imports resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def unreached_modules(package: Path, roots: Sequence[str]) -> list[str]:
    """The modules of ``package`` that no import chain from ``roots`` reaches (lazy imports inside
    functions and ``TYPE_CHECKING`` blocks count: they are still the product's code paths)."""
    paths = {
        ".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in package.rglob("*.py")
    }

    def known(name: str) -> set[str]:
        """``name`` and the packages above it, those that are modules of ours."""
        parts = name.split(".")
        return {".".join(parts[:n]) for n in range(1, len(parts) + 1)} & paths.keys()

    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for name in _package_imports(paths[module], module):
            todo.extend(known(name) - seen)
    return sorted(paths.keys() - seen)


ENTRY_POINTS = ("toolweave", "toolweave.__main__")
"""The ``toolweave`` command (pyproject's ``[project.scripts]``: ``toolweave.__main__:main``, which reaches
the CLI, its commands and the server) and the package's public facade (``import toolweave``)."""


def test_every_module_is_reachable_from_the_command() -> None:
    """The product holds what it runs: every module of the package is imported, directly or through
    others, from the ``toolweave`` command. What only the bench or a lab test reads lives in bench/."""
    scripts = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert scripts["scripts"] == {"toolweave": "toolweave.__main__:main"}  # the roots below are these
    assert unreached_modules(PACKAGE, ENTRY_POINTS) == []


def test_the_reach_check_finds_a_module_only_a_lab_imports(tmp_path: Path) -> None:
    """The negative case: a module no entry point imports (a lab's helper left in the package) is
    reported; one imported lazily inside a function is not."""
    package = tmp_path / "toolweave"
    (package / "retrieval").mkdir(parents=True)
    (package / "__init__.py").write_text("from toolweave import cli\n", encoding="utf-8")
    (package / "__main__.py").write_text("", encoding="utf-8")
    (package / "cli.py").write_text(
        "def main() -> None:\n    from toolweave.retrieval.walk import walk\n", encoding="utf-8"
    )
    (package / "retrieval" / "__init__.py").write_text("", encoding="utf-8")
    (package / "retrieval" / "walk.py").write_text("def walk() -> None: ...\n", encoding="utf-8")
    (package / "retrieval" / "supplied.py").write_text(
        "from toolweave.retrieval import walk\n", encoding="utf-8"
    )
    assert unreached_modules(package, ENTRY_POINTS) == ["toolweave.retrieval.supplied"]


def test_the_bench_uses_no_private_name_of_the_product() -> None:
    """The lab measures the product through public names (a lab that needs more asks for a seam):
    no ``from toolweave... import _name``, no ``module._name`` on a module of the package."""
    bad = []
    for path in sorted((PACKAGE.parent / "bench").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules: set[str] = set()  # local names bound to modules of the package
        for node in ast.walk(tree):
            source = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            if isinstance(node, ast.ImportFrom) and source.startswith("toolweave"):
                for alias in node.names:
                    if alias.name.startswith("_"):
                        bad.append(f"{path.name}: imports {alias.name}")
                    elif (PACKAGE.parent / source.replace(".", "/") / f"{alias.name}.py").is_file():
                        modules.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                modules.update(a.asname for a in node.names if a.name.startswith("toolweave.") and a.asname)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
            ):
                bad.append(f"{path.name}: {node.value.id}.{node.attr}")
    assert bad == []


_WRITING_MODE = frozenset("wax+")


def writes_into_the_package(source: str) -> list[str]:
    """Writes in ``source`` to a path into the package: a name bound to an expression that holds a
    ``toolweave/...`` path string (or ``toolweave.__file__``), written with ``write_text``,
    ``write_bytes``, or opened in a writing mode."""
    tree = ast.parse(source)

    def names(node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    def into_package(node: ast.AST) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("toolweave/"):
                return True
            if isinstance(n, ast.Attribute) and n.attr == "__file__" and names(n.value) == {"toolweave"}:
                return True
        return False

    product = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and into_package(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def writing(call: ast.Call, mode_at: int) -> bool:
        modes = [*call.args[mode_at : mode_at + 1], *(k.value for k in call.keywords if k.arg == "mode")]
        return any(isinstance(m, ast.Constant) and _WRITING_MODE & set(str(m.value)) for m in modes)

    def written(call: ast.Call) -> ast.AST | None:
        """The path ``call`` writes to, if it writes."""
        func = call.func
        if isinstance(func, ast.Attribute):
            if func.attr in ("write_text", "write_bytes") or (func.attr == "open" and writing(call, 0)):
                return func.value
        elif isinstance(func, ast.Name) and func.id == "open" and call.args and writing(call, 1):
            return call.args[0]
        return None

    bad = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        target = written(call)
        if target is not None and (names(target) & product or into_package(target)):
            bad.append(f"line {call.lineno}: writes {ast.unparse(target)}")
    return bad


def test_the_bench_never_writes_the_packages_source() -> None:
    """A runner prints what to change (``bench/inference.py calibrate --table``); a person pastes it."""
    bad = {
        path.name: found
        for path in sorted((PACKAGE.parent / "bench").rglob("*.py"))
        if (found := writes_into_the_package(path.read_text(encoding="utf-8")))
    }
    assert bad == {}


def test_the_write_check_finds_a_runner_that_rewrites_a_module() -> None:
    """The negative case: what ``calibrate --write`` did (and the plain forms of it) is found; reading
    the module and writing under bench/out are not."""
    rewrites = """
CALIBRATION = Path(__file__).resolve().parents[1] / "toolweave/inference/calibration.py"
text = CALIBRATION.read_text(encoding="utf-8")
CALIBRATION.write_text(text.replace("a", "b"), encoding="utf-8")
with open(CALIBRATION, "w") as f:
    f.write(text)
with CALIBRATION.open(mode="a") as f:
    f.write(text)
"""
    assert len(writes_into_the_package(rewrites)) == 3
    reads = """
CALIBRATION = Path(__file__).resolve().parents[1] / "toolweave/inference/calibration.py"
OUT = Path(__file__).parent / "out"
text = CALIBRATION.read_text(encoding="utf-8")
with open(CALIBRATION) as f:
    f.read()
(OUT / "table.json").write_text(text)
"""
    assert writes_into_the_package(reads) == []

"""Real specs: the 8 vendor specs of ../shared/datasets and npm @readme/oas-examples (2.0/3.0/3.1)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from toolweave.adapters.openapi.links import spec_edges
from toolweave.adapters.openapi.parser import ParsedSpec, parse_spec_file

VENDOR_OPERATIONS = 1536  # counted from the specs' paths (see ../shared/datasets/openapi_specs/README.md)


@pytest.fixture(scope="module")
def vendor(vendor_specs_dir: Path) -> dict[str, ParsedSpec]:
    """Every vendor spec converted once for the module (GitHub v3 included: ~3 s)."""
    return {
        path.name: parse_spec_file(str(path), source=path.stem.split("_")[0])
        for path in sorted(vendor_specs_dir.glob("*.yaml"))
    }


def _count_operations(parsed: ParsedSpec) -> int:
    from toolweave.adapters.openapi.parser import HTTP_METHODS

    doc, _ = parsed.loader.load(parsed.location)  # cached by the loader: not parsed again
    return sum(1 for item in doc["paths"].values() for method in HTTP_METHODS if method in item)


def check_schemas(schemas: Iterable[dict[str, Any] | None]) -> int:
    """``check_schema`` on every schema, checking each distinct sub-schema once.

    Equivalent to checking each whole schema: the 2020-12 meta-schema checks a schema's own keywords and
    then each ``properties`` value and each ``$defs`` entry as a schema of its own. Tools share most of
    those (GitHub's `owner`, `repo`, `per_page`; the bundler's shared definitions), so checking each
    distinct one once takes seconds instead of minutes.
    """
    seen: set[str] = set()
    checked = 0

    def check(schema: Any) -> None:
        key = json.dumps(schema, sort_keys=True)
        if key not in seen:
            seen.add(key)
            jsonschema.Draft202012Validator.check_schema(schema)

    for schema in schemas:
        if schema is None:
            continue
        props = schema.get("properties") or {}
        check({k: v for k, v in schema.items() if k not in ("$defs", "properties")} | {"properties": {}})
        for sub in [*props.values(), *(schema.get("$defs") or {}).values()]:
            check(sub)
        checked += 1
    return checked


def test_all_vendor_operations_become_tools(vendor):
    assert len(vendor) == 8
    assert sum(len(p.tools) for p in vendor.values()) == VENDOR_OPERATIONS
    for name, parsed in vendor.items():
        assert len(parsed.tools) == _count_operations(parsed), name
        assert parsed.problems == [], name
    github = vendor["github_github_v3.yaml"]
    assert len(github.tools) == 903
    assert len({t.id for t in github.tools}) == 903 and all(len(t.id) <= 64 for t in github.tools)


def test_every_vendor_input_schema_is_valid_2020_12_and_serialisable(vendor):
    for parsed in vendor.values():
        assert json.dumps([t.model_dump(mode="json") for t in parsed.tools])
        assert check_schemas(t.input_schema for t in parsed.tools) == len(parsed.tools)
    # Output schemas of the mid-size specs too (the code path is the same as GitHub's).
    for name in ("slack_web_1.7.0.yaml", "google_calendar_v3.yaml", "google_gmail_v1.yaml"):
        assert check_schemas(t.output_schema for t in vendor[name].tools) > 0


def test_schema_check_helper_catches_errors_in_defs():
    bad = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "text"}}}
    with pytest.raises(jsonschema.SchemaError):
        check_schemas([bad])


def test_vendor_specs_stay_compact(vendor):
    """Shared refs are kept in $defs, not inlined per use (the prototype made Kubernetes 15 MB)."""
    github = vendor["github_github_v3.yaml"]
    size = len(json.dumps([t.model_dump(mode="json") for t in github.tools]))
    assert size < 12_000_000
    repos_get = next(t for t in github.tools if t.name == "repos_get")
    assert "$defs" in repos_get.output_schema  # `simple-user` etc. are shared inside the repository schema


def test_vendor_edges_are_few_and_well_formed(vendor):
    total = 0
    for parsed in vendor.values():
        edges = spec_edges(parsed)
        total += len(edges)
        ids = {t.id for t in parsed.tools}
        assert len(edges) <= 2 * len(parsed.tools)  # precise, not sprayed
        for edge in edges:
            assert edge.tool in ids and edge.depends_on in ids and edge.tool != edge.depends_on
            assert edge.reason and edge.origin == "inferred" and 0 < edge.confidence < 1
    assert total > 0  # otherwise the checks above ran on nothing


@pytest.fixture(scope="module")
def oas_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: cannot fetch @readme/oas-examples")
    target = tmp_path_factory.mktemp("oas-examples")
    try:
        done = subprocess.run(
            [npm, "pack", "@readme/oas-examples", "--pack-destination", str(target), "--silent"],
            cwd=target,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("npm pack @readme/oas-examples timed out (no network?)")
    tarballs = list(target.glob("*.tgz"))
    if done.returncode != 0 or not tarballs:
        pytest.skip(f"npm pack @readme/oas-examples failed (no network?): {done.stderr.strip()[:300]}")
    with tarfile.open(tarballs[0]) as archive:
        archive.extractall(target, filter="data")
    return target / "package"


def test_readme_oas_examples_all_convert(oas_examples):
    files = sorted(
        p
        for version in ("2.0", "3.0", "3.1")
        for p in (oas_examples / version).rglob("*")
        if p.suffix in (".json", ".yaml", ".yml")
    )
    assert len(files) > 100
    versions: set[str] = set()
    tools = 0
    with_defs = 0
    for path in files:
        parsed = parse_spec_file(str(path), source="ex")
        versions.add(parsed.version[:3])
        # The only operations these fixtures get wrong on purpose lack `responses` (required before 3.1).
        assert all("no 'responses'" in p.message for p in parsed.problems), (path, parsed.problems)
        json.dumps([t.model_dump(mode="json") for t in parsed.tools])
        assert check_schemas(t.input_schema for t in parsed.tools) == len(parsed.tools), path
        with_defs += sum("$defs" in t.input_schema for t in parsed.tools)
        tools += len(parsed.tools)
    assert versions == {"2.0", "3.0", "3.1"}
    assert tools > 1000
    assert with_defs > 0  # the circular fixtures keep their recursion as $defs


def test_readme_circular_schema_is_finite_and_validates(oas_examples):
    parsed = parse_spec_file(str(oas_examples / "3.0" / "json" / "circular.json"), source="ex")
    assert parsed.tools, "the circular fixture must yield tools, or this test checks nothing"
    for tool in parsed.tools:
        for schema in (tool.input_schema, tool.output_schema):
            if schema is not None:
                json.dumps(schema)
                jsonschema.Draft202012Validator.check_schema(schema)

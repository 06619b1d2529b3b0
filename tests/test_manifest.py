"""Manifest loading: validation with file/line/field errors, interpolation, secrets, paths, helpers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from toolweave.adapters.kinds import MCP, OPENAPI
from toolweave.errors import ConfigError
from toolweave.manifest import (
    HttpServer,
    SseServer,
    StdioServer,
    apply_tool_overrides,
    filter_removed_edges,
    interpolate,
    load_manifest,
    manifest_edges,
)
from toolweave.records import DependencyEdge, EdgeKind, ToolRecord
from toolweave.settings import Settings

FULL = """\
registry: ./.toolweave
servers:
  time:   {transport: stdio, command: python, args: ["-m", "mcp_server_time"], env: {TZ: UTC}, cwd: work}
  remote: {transport: http, url: "http://127.0.0.1:9000/mcp", headers: {Authorization: "Bearer ${API_TOKEN}"}}
  legacy: {transport: sse, url: "http://127.0.0.1:9001/sse", timeout_s: 5, enabled: false}
  local:  {command: ./bin/server}
catalogs:
  - {path: ../datasets/toollinkos, source: toollinkos}
retrieval: {method: hybrid, top_k: 5}
publish: {max_tools: 12, pinned: [time__get_current_time]}
dependencies:
  add:
    - {tool: time__convert_time, depends_on: time__get_current_time, kind: PARAMETER_DIRECTLY_DEPENDS_ON,
       parameter: time, reason: "needs the current time"}
    - {tool: a__x, depends_on: b__y}
  remove: [{tool: a__x, depends_on: c__z}]
  pin: [{tool: a__x, depends_on: c__z, kind: TOOL INDIRECTLY_DEPENDS_ON}]
core_tools: [time__get_current_time]
examples: {time__get_current_time: ["what time is it in Tokyo"]}
"""


def write(tmp_path: Path, text: str, name: str = "toolweave.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def error_of(path: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_manifest(path, environ=environ or {})
    return str(info.value)


def test_full_manifest_loads(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    m = load_manifest(path, environ={"API_TOKEN": "s3cret"})
    assert m.source_path == path.resolve()
    assert m.registry == (tmp_path / ".toolweave").resolve()
    time, remote, legacy, local = (m.section(MCP)[k] for k in ("time", "remote", "legacy", "local"))
    assert (
        isinstance(time, StdioServer) and time.args == ["-m", "mcp_server_time"] and time.env == {"TZ": "UTC"}
    )
    assert time.cwd == (tmp_path / "work").resolve()
    assert isinstance(remote, HttpServer) and remote.transport == "http"
    assert isinstance(legacy, SseServer) and legacy.timeout_s == 5 and not legacy.enabled
    # transport inferred from `command`; ./ commands are relative to the manifest, bare ones use PATH
    assert isinstance(local, StdioServer) and local.command == str((tmp_path / "bin/server").resolve())
    assert time.command == "python"
    assert [b.name for b in m.backends()] == ["time", "remote", "local"]
    assert m.catalogs[0].path == (tmp_path.parent / "datasets/toollinkos").resolve()
    assert m.sources == ["time", "remote", "legacy", "local", "toollinkos"]
    assert m.retrieval.method == "hybrid" and m.retrieval.top_k == 5
    assert m.publish.pinned == ("time__get_current_time",)
    assert m.dependencies.pin[0].kind is EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON


def test_settings_for_applies_only_what_the_manifest_sets(tmp_path: Path) -> None:
    m = load_manifest(write(tmp_path, FULL), environ={"API_TOKEN": "x"})
    base = Settings(home=tmp_path / "elsewhere")
    base.retrieval = base.retrieval.model_copy(update={"final_k": 17})
    merged = m.settings_for(base)
    assert merged.retrieval.method == "hybrid" and merged.retrieval.top_k == 5
    assert merged.retrieval.final_k == 17  # not in the manifest: kept from the settings
    assert merged.publish.max_tools == 12
    assert merged.home == m.registry
    assert m.settings_for(base, registry=tmp_path / "cli").home == tmp_path / "cli"


def test_secrets_stay_raw_until_interpolated(tmp_path: Path) -> None:
    m = load_manifest(write(tmp_path, FULL), environ={"API_TOKEN": "s3cret"})
    remote = m.section(MCP)["remote"]
    assert "s3cret" not in repr(m) and "s3cret" not in m.describe() and "s3cret" not in remote.describe()
    assert "Bearer ${API_TOKEN}" in m.describe()
    assert remote.interpolated({"API_TOKEN": "s3cret"}).headers["Authorization"] == "Bearer s3cret"
    with pytest.raises(ConfigError, match="API_TOKEN"):
        remote.interpolated({})


def test_interpolation_forms() -> None:
    env = {"A": "1", "EMPTY": ""}
    assert interpolate("x${A}y", env) == "x1y"
    assert interpolate("${B:-dflt}", env) == "dflt"
    assert interpolate("${EMPTY:-dflt}", env) == "dflt"
    assert interpolate("$${A} ${A}", env) == "${A} 1"
    with pytest.raises(ConfigError, match=r"here: environment variable 'B'"):
        interpolate("${B}", env, where="here")


def test_non_secret_sections_are_interpolated_at_load(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        registry: ${REG:-./reg}
        retrieval: {top_k: "${K}"}
        catalogs: [{path: "${DATA}/x", source: cat}]
        """,
    )
    m = load_manifest(path, environ={"K": "7", "DATA": "/data"})
    assert m.registry == (tmp_path / "reg").resolve()
    assert m.retrieval.top_k == 7
    assert m.catalogs[0].path == Path("/data/x")


@pytest.mark.parametrize("uri", ["s3://tools/prod", "gs://bucket/registry", "s3://tools/${ENV:-prod}"])
def test_a_registry_uri_stays_a_uri(tmp_path: Path, uri: str) -> None:
    """``registry: s3://tools/prod`` names an object store: it must not become the local folder
    ``<manifest dir>/s3:/tools/prod``; a relative local path still resolves against the manifest."""
    m = load_manifest(write(tmp_path, f"registry: {uri}\n"), environ={})
    expected = uri.replace("${ENV:-prod}", "prod")
    assert m.registry == expected
    assert Settings().home != expected  # the default is not the URI already
    assert m.settings_for(Settings()).home == expected
    local = load_manifest(write(tmp_path, "registry: reg/here\n", "local.yaml"), environ={})
    assert local.registry == (tmp_path / "reg" / "here").resolve()
    assert local.settings_for(Settings()).home == (tmp_path / "reg" / "here").resolve()


ERROR_CASES = {
    "a missing variable: file, line, field and variable": (
        """\
        servers:
          remote:
            url: http://127.0.0.1:1/mcp
            headers: {Authorization: "Bearer ${API_TOKEN}"}
        """,
        ["{path}:4:", "servers.remote.headers.Authorization", "'API_TOKEN'"],
    ),
    "unknown keys, each with its line": (
        """\
        servers:
          time:
            command: python
            timout_s: 3
        retrieval: {top_k: 3, topk: 4}
        serverz: {}
        """,
        [
            "3 problems",
            "{path}:4:5: servers.time.timout_s: unknown key",
            "{path}:5:",
            "retrieval.topk: unknown key",
            "{path}:6:1: serverz: unknown key",
        ],
    ),
    "a bad transport and missing fields": (
        """\
        servers:
          a: {transport: ftp, url: "ftp://x"}
          b: {transport: sse}
          c: {args: [x]}
          d: {transport: http, url: "not a url"}
        dependencies:
          add: [{tool: a__x, depends_on: b__y, kind: SOMETIMES_DEPENDS_ON}]
        """,
        [
            "{path}:2:3: servers.a: unknown transport 'ftp'",
            "{path}:3:",
            "servers.b.url: required field is missing",
            "{path}:4:3: servers.c: needs transport",
        ],
    ),
    "second-round errors: field and line": (
        """\
        servers:
          b: {transport: sse}
          d: {transport: http, url: "not a url"}
        dependencies:
          add: [{tool: a__x, depends_on: b__y, kind: SOMETIMES_DEPENDS_ON}]
        publish: {max_tools: 0}
        """,
        [
            "servers.b.url: required field is missing",
            "{path}:3:",
            "servers.d.url",
            "{path}:5:",
            "unknown edge kind 'SOMETIMES_DEPENDS_ON'",
            "{path}:6:",
            "publish.max_tools",
        ],
    ),
    "source names must be valid and unique": (
        """\
        servers:
          time: {command: python}
          "my server": {command: python}
          a__b: {command: python}
        catalogs:
          - {path: x, source: time}
        """,
        [
            "'my server' may only hold letters",
            "'my_server'",
            "'a__b' cannot contain '__'",
            "{path}:6:",
            "'time' is already used by servers.time (line 2)",
        ],
    ),
}


@pytest.mark.parametrize(("text", "expected"), ERROR_CASES.values(), ids=ERROR_CASES.keys())
def test_errors_name_the_file_line_and_field(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = write(tmp_path, text)
    msg = error_of(path)
    for fragment in expected:
        assert fragment.format(path=path) in msg


def test_yaml_syntax_and_duplicate_keys(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, "servers:\n  a: {command: [unclosed\n", "bad.yaml"))
    assert "bad.yaml:" in msg and "invalid YAML" in msg
    msg = error_of(write(tmp_path, "core_tools: []\ncore_tools: [x]\n", "dup.yaml"))
    assert "dup.yaml:2:1: core_tools: duplicate key" in msg
    msg = error_of(write(tmp_path, "- a\n- b\n", "list.yaml"))
    assert "must be a mapping" in msg
    assert "cannot read manifest" in error_of(tmp_path / "absent.yaml")


def test_empty_manifest_is_valid(tmp_path: Path) -> None:
    m = load_manifest(write(tmp_path, ""), environ={})
    assert m.section(MCP) == {} and m.catalogs == [] and m.registry is None


def test_edges_and_removals(tmp_path: Path) -> None:
    m = load_manifest(write(tmp_path, FULL), environ={"API_TOKEN": "x"})
    edges = {e.key: e for e in manifest_edges(m)}
    direct = edges[
        ("time__convert_time", "time__get_current_time", EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON, "time")
    ]
    assert direct.origin == "manifest" and direct.reason == "needs the current time"
    # no kind and no parameter: a direct tool dependency
    assert ("a__x", "b__y", EdgeKind.TOOL_DIRECTLY_DEPENDS_ON, None) in edges
    pinned = edges[("a__x", "c__z", EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON, None)]
    assert pinned.evidence == "manifest:pin"

    inferred = [
        DependencyEdge(
            tool="a__x", depends_on="c__z", kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON, origin="inferred"
        ),
        DependencyEdge(
            tool="a__x", depends_on="b__y", kind=EdgeKind.TOOL_DIRECTLY_DEPENDS_ON, origin="inferred"
        ),
        pinned,
    ]
    kept = filter_removed_edges(m, inferred)
    assert [(e.depends_on, e.kind) for e in kept] == [
        ("b__y", EdgeKind.TOOL_DIRECTLY_DEPENDS_ON),
        ("c__z", EdgeKind.TOOL_INDIRECTLY_DEPENDS_ON),  # the pin survives its removal
    ]


def test_apply_tool_overrides(tmp_path: Path) -> None:
    m = load_manifest(write(tmp_path, FULL), environ={"API_TOKEN": "x"})
    recs = [
        ToolRecord(id="time__get_current_time", source="time", name="get_current_time", examples=("now?",)),
        ToolRecord(id="time__convert_time", source="time", name="convert_time"),
    ]
    out = apply_tool_overrides(m, recs)
    assert out[0].kind == "core" and out[0].examples == ("now?", "what time is it in Tokyo")
    assert out[1] is recs[1]
    assert apply_tool_overrides(m, out)[0] is out[0]  # idempotent: nothing to change the second time


# -- import-claude-config ----------------------------------------------------------------------------------
CLAUDE = {
    "mcpServers": {
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {
                "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "LOG_LEVEL": "debug",
            },
        },
        "my.remote": {
            "type": "http",
            "url": "https://api.example.com/mcp",
            "headers": {"Authorization": "Bearer abc.def", "X-Team": "blue"},
        },
        "legacy": {"type": "sse", "url": "http://127.0.0.1:9001/sse", "disabled": True},
        "shaped": {"command": "srv", "env": {"OPENAI": "sk-proj-0123456789abcdef", "REF": "${MY_KEY}"}},
    }
}


def test_import_claude_config_writes_a_manifest_without_secrets(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from toolweave.cli import app

    src = tmp_path / "claude_desktop_config.json"
    src.write_text(json.dumps(CLAUDE))
    out = tmp_path / "toolweave.yaml"
    result = CliRunner().invoke(app, ["import-claude-config", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    written = out.read_text()
    for secret in ("ghp_abcdefghij", "abc.def", "sk-proj-0123"):
        assert secret not in written and secret not in result.output
    for var in ("GITHUB_PERSONAL_ACCESS_TOKEN", "MY_REMOTE_TOKEN", "OPENAI", "MY_KEY"):
        assert f"export {var}=" in result.stderr
    env = {"GITHUB_PERSONAL_ACCESS_TOKEN": "g", "MY_REMOTE_TOKEN": "t", "OPENAI": "o", "MY_KEY": "k"}
    m = load_manifest(out, environ=env)
    github, remote, legacy, shaped = (m.section(MCP)[k] for k in ("github", "my_remote", "legacy", "shaped"))
    assert isinstance(github, StdioServer) and github.command == "npx"
    assert github.args == ["-y", "@modelcontextprotocol/server-github"]
    assert github.env == {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_PERSONAL_ACCESS_TOKEN}",
        "LOG_LEVEL": "debug",
    }
    assert isinstance(remote, HttpServer) and remote.headers == {
        "Authorization": "Bearer ${MY_REMOTE_TOKEN}",
        "X-Team": "blue",
    }
    assert remote.interpolated(env).headers["Authorization"] == "Bearer t"
    assert isinstance(legacy, SseServer) and not legacy.enabled
    assert isinstance(shaped, StdioServer) and shaped.env == {"OPENAI": "${OPENAI}", "REF": "${MY_KEY}"}

    # Without -o the manifest goes to stdout, the export hints to stderr.
    result = CliRunner().invoke(app, ["import-claude-config", str(src)])
    assert result.exit_code == 0 and result.stdout.startswith("# toolweave manifest")
    assert "export" not in result.stdout and "servers:" in result.stdout


def test_import_claude_config_rejects_bad_input(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolweave.cli import app

    cases = {
        "broken.json": ('{"mcpServers": {', "broken.json:1:17: invalid JSON"),
        "empty.json": ('{"other": 1}', "no `mcpServers` object"),
        "nocmd.json": (
            '{"mcpServers": {"x": {"args": []}}}',
            "mcpServers.x: needs `command` (stdio) or `url`",
        ),
        "kind.json": ('{"mcpServers": {"x": {"type": "ws", "url": "ws://h"}}}', "unknown type 'ws'"),
    }
    for name, (body, expected) in cases.items():
        (tmp_path / name).write_text(body)
        result = CliRunner().invoke(app, ["import-claude-config", str(tmp_path / name)])
        assert result.exit_code == 1, name
        assert expected in result.stderr, (name, result.stderr)


def test_openapi_section(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        openapi:
          pets: {spec: ./pets.yaml, base_url: "http://127.0.0.1:${PORT:-8000}", arazzo: [flows/a.yaml],
                 auth: {type: bearer, token_env: PET_TOKEN}}
          remote: {spec: "https://example.com/openapi.json"}
        """,
    )
    m = load_manifest(path, environ={})
    pets = m.section(OPENAPI)["pets"]
    assert pets.name == "pets" and pets.spec == str((tmp_path / "pets.yaml").resolve())
    assert pets.arazzo == [str((tmp_path / "flows/a.yaml").resolve())]
    assert (
        pets.base_url == "http://127.0.0.1:8000"
        and pets.auth is not None
        and pets.auth.token_env == "PET_TOKEN"
    )
    assert m.section(OPENAPI)["remote"].spec == "https://example.com/openapi.json"
    assert m.sources == ["pets", "remote"]
    bad = write(tmp_path, "openapi:\n  pets: {spec: x.yaml, auth: {type: bearer}, bogus: 1}\n", "bad.yaml")
    msg = error_of(bad)
    assert "bad.yaml:2:" in msg and "openapi.pets.bogus: unknown key" in msg and "needs token_env" in msg

"""The table of backend kinds: what the manifest, the factory and replicas read from it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from toolweave.adapters.kinds import BACKEND_KINDS, kind_named
from toolweave.manifest import load_manifest


def test_each_kind_has_its_own_name_and_manifest_section() -> None:
    assert (
        len({k.name for k in BACKEND_KINDS}) == len({k.section for k in BACKEND_KINDS}) == len(BACKEND_KINDS)
    )
    assert all(kind_named(k.name) is k for k in BACKEND_KINDS)
    assert kind_named("catalog") is None  # catalogs are shared too, but have no backend


def test_a_manifest_entry_of_every_kind_round_trips_as_a_shared_spec(tmp_path: Path) -> None:
    """A replica rebuilds a source from the JSON another one shared: the same entry comes back."""
    path = tmp_path / "m.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            servers:
              time: {command: python, args: ["-m", "mcp_server_time"], env: {TZ: "${TZ:-UTC}"}}
              spare: {url: "http://127.0.0.1:9/mcp", enabled: false}
            openapi:
              pets: {spec: pets.yaml, base_url: "http://127.0.0.1:9"}
            """
        ),
        encoding="utf-8",
    )
    manifest = load_manifest(path, environ={})
    entries = manifest.backends()
    assert [(e.name, e.kind.name) for e in entries] == [("time", "mcp"), ("pets", "openapi")]
    assert [e.name for e in manifest.backends(enabled_only=False)] == ["time", "spare", "pets"]
    for entry in entries:
        assert entry.kind.parse_json(entry.config.model_dump_json()) == entry.config
    time, pets = (e.config for e in entries)
    assert time.env == {"TZ": "${TZ:-UTC}"}  # an MCP entry keeps its raw text (may hold secrets)
    assert pets.name == "pets" and pets.spec == str(tmp_path / "pets.yaml")  # named by its key
    assert dict(entries[0].kind.literal_values(time)) == {"TZ": "${TZ:-UTC}"}

"""Secrets stay out of logs and imported manifests; API credentials never follow a redirect."""

from __future__ import annotations

from toolweave.adapters.openapi import OpenAPIBackend, OpenAPISourceConfig
from toolweave.commands.manifest import _looks_secret
from toolweave.manifest import HttpServer, SseServer


def test_literal_header_values_are_hidden_in_log_lines() -> None:
    headers = {"Authorization": "Bearer sk-live-123", "X-Team": "${TEAM_TOKEN}"}
    for server in (
        HttpServer(transport="http", url="http://127.0.0.1:1/mcp", headers=headers),
        SseServer(transport="sse", url="http://127.0.0.1:1/sse", headers=headers),
    ):
        line = server.describe()
        assert "sk-live-123" not in line and "'Authorization': '***'" in line and "${TEAM_TOKEN}" in line


def test_key_like_names_count_as_secrets_when_importing_claude_configs() -> None:
    assert _looks_secret("OPENAI_KEY", "abc123") and _looks_secret("X-Api-Key", "v")
    assert not _looks_secret("HOME", "/home/me") and not _looks_secret("OPENAI_KEY", "${OPENAI_KEY}")


def test_api_calls_do_not_follow_redirects() -> None:
    backend = OpenAPIBackend(OpenAPISourceConfig(name="s", spec="unused.yaml"))
    assert backend._http().follow_redirects is False  # a custom auth header would go to any host

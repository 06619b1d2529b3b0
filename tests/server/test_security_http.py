"""Identity and policy over real HTTP: the gateway under uvicorn on 127.0.0.1, a real JWKS server on
127.0.0.1, real RS256/ES256 tokens signed with PyJWT, real MCP clients over streamable HTTP and SSE."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from mcp import Client

from tests.e2e.watch import ListChanged, watching
from tests.net import free_port, wait_port
from tests.results import text_part
from tests.server.helpers import NOTE_EDGE, FakeBackend, fake_backends, notes_tools, time_tools
from toolweave.errors import ConfigError
from toolweave.names import name_of
from toolweave.server.fronts.transports import check_exposure, http_app, sse_app
from toolweave.server.gateway import Gateway
from toolweave.settings import SecuritySettings, Settings

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


# -- a real JWKS endpoint ---------------------------------------------------------------------------------
class Issuer:
    """Keys and a JWKS document served over HTTP on 127.0.0.1 (keys can be added: rotation)."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.jwks: list[dict[str, Any]] = []
        self.fetches = 0
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.fetches += 1
                body = json.dumps({"keys": issuer.jwks}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add_key(self, kid: str, kind: str = "RS256", publish: bool = True) -> None:
        if kind == "RS256":
            key: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        else:
            key = ec.generate_private_key(ec.SECP256R1())
            jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
        self.keys[kid] = (key, kind)
        if publish:
            self.publish(kid, jwk)
        else:
            self._pending = (kid, jwk)

    def publish(self, kid: str, jwk: dict[str, Any] | None = None) -> None:
        if jwk is None:
            kid, jwk = self._pending
        self.jwks.append({**jwk, "kid": kid, "use": "sig", "alg": self.keys[kid][1]})

    def token(
        self, kid: str, *, sub: str = "alice", aud: str, iss: str | None = None, exp_in: int = 300
    ) -> str:
        key, alg = self.keys[kid]
        now = int(time.time())
        claims = {"sub": sub, "aud": aud, "iss": iss or self.url, "iat": now, "exp": now + exp_in}
        return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    issuer = Issuer()
    issuer.add_key("k1", "RS256")
    issuer.add_key("k2", "ES256")
    yield issuer
    issuer.close()


# -- the gateway under uvicorn ---------------------------------------------------------------------------
@contextmanager
def serving(app: Any, port: int, gateway: Gateway | None = None) -> Iterator[None]:
    """``app`` under uvicorn in a thread; with ``gateway``, until its backends reported their tools."""
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_port(port)
        deadline = time.monotonic() + 30
        backends = fake_backends(gateway) if gateway else []
        while not all(b.reported.is_set() for b in backends):
            assert time.monotonic() < deadline, "backends did not report their tools"
            time.sleep(0.02)
        yield
    finally:
        server.should_exit = True
        thread.join(20)


def read_only_notes() -> list[Any]:
    tools = notes_tools()
    search = tools[1]
    annotated = search.model_copy(update={"backend": {"annotations": {"read_only_hint": True}}})
    return [tools[0], annotated, tools[2]]


POLICY = {
    "alice": {"deny": ["notes/delete_*"]},
    "bob": {"read_only": True},
    "*": {"allow": ["clock"]},
}


def make_gateway(registry: Any, security: SecuritySettings) -> tuple[Gateway, FakeBackend]:
    from toolweave.manifest import Manifest

    notes = FakeBackend("notes", read_only_notes(), [NOTE_EDGE])
    clock = FakeBackend("clock", time_tools())
    manifest = Manifest.model_validate({"policy": POLICY})
    settings = Settings(home=registry.path, security=security, call_timeout_s=5)
    return Gateway(registry, [clock, notes], settings, manifest=manifest), notes


@asynccontextmanager
async def mcp_client(
    url: str, transport: str, token: str | None, mode: str = "auto"
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if transport == "http":
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as client,
        ):
            yield client
    else:
        from mcp.client.sse import sse_client

        async with Client(sse_client(url, headers=headers), mode=mode) as client:
            yield client


def doc(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return result.structured_content


async def check_policy(client: Client, notes: FakeBackend, identity: str) -> None:
    """What ``POLICY`` hides is neither found, nor published, nor callable (directly or via call_tool)."""
    found = doc(await client.call_tool("find_tools", {"query": "delete a note by its id", "k": 10}))
    names = [t["name"] for t in found["tools"]]
    listed = [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]
    hidden = {"alice": ["notes__delete_note"], "bob": ["notes__delete_note", "notes__create_note"]}[identity]
    for name in hidden:
        assert name not in names and name not in listed
        direct = await client.call_tool(name, {"note_id": 1, "title": "x"})
        via_meta = await client.call_tool(
            "call_tool", {"name": name, "arguments": {"note_id": 1, "title": "x"}}
        )
        # respelt (``notes.delete_note``) or without its source: still nothing, and never named
        respelt = await client.call_tool(name.replace("__", "."), {"note_id": 1, "title": "x"})
        own_name = await client.call_tool(name_of(name), {"note_id": 1, "title": "x"})
        for result in (direct, via_meta, respelt, own_name):
            assert result.is_error and doc(result)["error"]["code"] == "unknown_tool"
            assert "may mean" not in text_part(result)
            assert name not in text_part(result).split(";", 1)[1]  # not among the closest tools either
    assert "notes__search_notes" in names  # allowed for both (read-only, not denied)
    ok = await client.call_tool("call_tool", {"name": "notes__search_notes", "arguments": {"keyword": "x"}})
    assert not ok.is_error, ok
    assert [c[0] for c in notes.calls] == ["search_notes"]


# -- tests -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_oauth_jwt_identity_and_policy(
    registry: Any, issuer: Issuer, transport: str, monkeypatch: Any
) -> None:
    from toolweave.server.fronts import auth

    monkeypatch.setattr(auth, "_JWKS_REFETCH_MIN_S", 0.0)  # rotation below happens within seconds
    port = free_port()
    path = "/mcp" if transport == "http" else "/sse"
    resource = f"http://127.0.0.1:{port}{path}"
    security = SecuritySettings(auth="oauth", oauth_issuer=issuer.url, oauth_jwks_url=f"{issuer.url}/jwks")
    gateway, notes = make_gateway(registry, security)
    app = (http_app if transport == "http" else sse_app)(gateway, "127.0.0.1", port)
    base = f"http://127.0.0.1:{port}"
    with serving(app, port, gateway):
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            prm = await http.get(f"/.well-known/oauth-protected-resource{path}")
            assert prm.status_code == 200
            assert prm.json()["resource"] == resource
            assert prm.json()["authorization_servers"] == [issuer.url]

            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "notes__delete_note"},
            }
            hdrs = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            other = Issuer()
            other.add_key("k1")  # same kid, another key: bad signature
            bad_tokens = {
                "none": None,
                "garbage": "not-a-jwt",
                "bad signature": other.token("k1", aud=resource, iss=issuer.url),
                "expired": issuer.token("k1", aud=resource, exp_in=-600),
                "wrong audience": issuer.token("k1", aud="http://elsewhere/mcp"),
                "wrong issuer": issuer.token("k1", aud=resource, iss="http://evil.example"),
            }
            other.close()
            for why, token in bad_tokens.items():
                bearer = {"authorization": f"Bearer {token}"} if token else {}
                target = "/mcp" if transport == "http" else "/sse"
                method = http.post if transport == "http" else http.get
                kwargs: dict[str, Any] = {"json": call} if transport == "http" else {}
                response = await method(target, headers={**hdrs, **bearer}, **kwargs)
                assert response.status_code == 401, why
                challenge = response.headers["www-authenticate"]
                assert (
                    challenge.startswith("Bearer ") and f'resource_metadata="{base}/.well-known/' in challenge
                )
                metrics = await http.get("/metrics", headers=bearer)
                assert metrics.status_code == 401, why
            assert notes.calls == []  # nothing ran

        # valid tokens: RS256 (alice) and ES256 (bob), each with its own policy
        async with mcp_client(f"{base}{path}", transport, issuer.token("k1", aud=resource)) as client:
            await check_policy(client, notes, "alice")
        notes.calls.clear()
        async with mcp_client(
            f"{base}{path}", transport, issuer.token("k2", sub="bob", aud=resource), mode="legacy"
        ) as client:
            await check_policy(client, notes, "bob")

        # key rotation: a key published after the gateway cached the JWKS is fetched by its kid
        issuer.add_key("k3", "RS256")
        async with mcp_client(
            f"{base}{path}", transport, issuer.token("k3", sub="carol", aud=resource)
        ) as client:
            found = doc(await client.call_tool("find_tools", {"query": "delete a note", "detail": True}))
            # carol falls under "*": clock only
            assert found["tools"] and {t["source"] for t in found["tools"]} == {"clock"}


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_named_bearer_tokens(registry: Any, transport: str, tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("BOB_TOKEN", "bob-secret-token")
    (tmp_path / "carol.token").write_text("carol-secret-token\n")
    alice_digest = hashlib.sha256(b"alice-secret-token").hexdigest()
    security = SecuritySettings(
        auth="tokens",
        tokens={
            "alice": f"sha256:{alice_digest}",
            "bob": "env:BOB_TOKEN",
            "carol": f"file:{tmp_path}/carol.token",
        },
    )
    gateway, notes = make_gateway(registry, security)
    port = free_port()
    path = "/mcp" if transport == "http" else "/sse"
    app = (http_app if transport == "http" else sse_app)(gateway, "127.0.0.1", port)
    base = f"http://127.0.0.1:{port}"
    with serving(app, port, gateway):
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            for token in (None, "alice-secret-tokeN", alice_digest):
                auth = {"authorization": f"Bearer {token}"} if token else {}
                response = await http.get("/metrics", headers=auth)
                assert response.status_code == 401
                assert response.headers["www-authenticate"].startswith("Bearer ")
            ok = await http.get("/metrics", headers={"authorization": "Bearer carol-secret-token"})
            assert ok.status_code == 200
        async with mcp_client(f"{base}{path}", transport, "alice-secret-token") as client:
            await check_policy(client, notes, "alice")
        notes.calls.clear()
        async with mcp_client(f"{base}{path}", transport, "bob-secret-token", mode="legacy") as client:
            await check_policy(client, notes, "bob")
        with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 401 as its own error type
            async with mcp_client(f"{base}{path}", transport, "wrong") as client:
                await client.list_tools()


async def test_host_and_origin_are_checked_on_every_bind(registry: Any) -> None:
    security = SecuritySettings(auth="tokens", tokens={"a": "sha256:" + hashlib.sha256(b"t").hexdigest()})
    gateway, _ = make_gateway(registry, security.model_copy(update={"allowed_hosts": ("gw.example:*",)}))
    port = free_port()
    # bound on loopback here, but built as for 0.0.0.0 (the allow-list is what a public bind uses)
    app = http_app(gateway, "0.0.0.0", port)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    hdrs = {"accept": "application/json, text/event-stream", "authorization": "Bearer t"}
    with serving(app, port, gateway):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            foreign = await http.post("/mcp", json=body, headers={**hdrs, "host": "evil.example:80"})
            assert foreign.status_code in (400, 403, 421)
            origin = await http.post("/mcp", json=body, headers={**hdrs, "origin": "http://evil.example"})
            assert origin.status_code in (400, 403)
            listed = await http.post("/mcp", json=body, headers={**hdrs, "host": f"gw.example:{port}"})
            assert listed.status_code == 200
            # what an HTTPS client on 443 sends: the name without a port
            portless = await http.post("/mcp", json=body, headers={**hdrs, "host": "gw.example"})
            assert portless.status_code == 200
            other = await http.post("/mcp", json=body, headers={**hdrs, "host": "gw.example.evil"})
            assert other.status_code in (400, 403, 421)


def test_non_loopback_without_auth_is_refused(caplog: Any) -> None:
    with pytest.raises(ConfigError, match="without authentication"):
        check_exposure("0.0.0.0", SecuritySettings())
    with pytest.raises(ConfigError, match="--insecure-no-auth"):
        check_exposure("192.0.2.7", SecuritySettings())
    check_exposure("127.0.0.1", SecuritySettings())
    check_exposure("0.0.0.0", SecuritySettings(auth="tokens", tokens={"a": "sha256:" + "0" * 64}))
    check_exposure("0.0.0.0", SecuritySettings(insecure_no_auth=True))
    assert "INSECURE" in caplog.text


async def test_unknown_kid_does_not_hammer_the_issuer(issuer: Issuer) -> None:
    from toolweave.server.fronts.auth import AuthError, JwtAuthenticator

    auth = JwtAuthenticator(issuer=issuer.url, audience="http://r/mcp", jwks_url=f"{issuer.url}/jwks")
    assert (await auth.authenticate(issuer.token("k1", aud="http://r/mcp"))).name == "alice"
    issuer.add_key("unpublished", publish=False)
    fetches = issuer.fetches
    for _ in range(5):
        with pytest.raises(AuthError, match="unknown key"):
            await auth.authenticate(issuer.token("unpublished", aud="http://r/mcp"))
    assert issuer.fetches == fetches  # fetched within the last 10 s: no re-fetch per bad token


async def test_the_oauth_clock_leeway_is_a_setting(issuer: Issuer) -> None:
    from toolweave.server.fronts.auth import AuthError, authenticator_for

    expired = issuer.token("k1", aud="http://r/mcp", exp_in=-60)  # expired a minute ago
    strict = SecuritySettings(auth="oauth", oauth_issuer=issuer.url, oauth_jwks_url=f"{issuer.url}/jwks")
    leeway = strict.model_copy(update={"oauth_leeway_s": 120.0})
    checking, lenient = (authenticator_for(s, "http://r/mcp") for s in (strict, leeway))
    assert checking is not None and lenient is not None  # auth is on
    with pytest.raises(AuthError, match="expired"):
        await checking.authenticate(expired)
    assert (await lenient.authenticate(expired)).name == "alice"


async def test_stdio_clients_get_the_default_identity_policy(registry: Any) -> None:
    """In-process (no HTTP request, as over stdio): the manifest's default identity's rules apply."""
    from toolweave.manifest import Manifest

    notes = FakeBackend("notes", read_only_notes(), [NOTE_EDGE])
    manifest = Manifest.model_validate(
        {"security": {"default_identity": "desk"}, "policy": {"desk": {"deny": ["notes/delete_*"]}}}
    )
    settings = manifest.settings_for(Settings(home=registry.path, call_timeout_s=5))
    assert settings.security.default_identity == "desk"
    gateway = Gateway(registry, [notes], settings, manifest=manifest)
    async with Client(gateway.server, mode="legacy") as client:
        deadline = time.monotonic() + 30
        while not notes.reported.is_set():
            assert time.monotonic() < deadline
            await anyio.sleep(0.02)
        await check_policy(client, notes, "alice")  # alice's rules are the same as desk's
        huge = "search my notes for the keyword budget " * 50_000  # ~2 MB
        answer = doc(await client.call_tool("find_tools", {"query": huge, "detail": True}))
        # searched by its head, echoed as a short prefix (meta_tools.QUERY_ECHO_CHARS) with its length
        assert len(answer["query"]) <= 250 and answer["query"].startswith("search my notes")
        assert answer["query"].endswith(f"({len(huge.strip()):,} characters)")  # its real length
        assert "notes__search_notes" in [t["name"] for t in answer["tools"]]


def test_metrics_on_a_separate_port_for_stdio() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from toolweave.server.calls.metrics import GatewayMetrics

    metrics = GatewayMetrics()
    metrics.calls.labels("t", "ok").inc(3)
    port = free_port()
    metrics.serve_port(port)
    wait_port(port)
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    sample = next(s for s in families["toolweave_calls"].samples if s.name == "toolweave_calls_total")
    assert sample.labels == {"tool": "t", "outcome": "ok"} and sample.value == 3


async def test_an_authenticated_2026_client_hears_list_changed_on_its_listen_stream(registry: Any) -> None:
    """The listen stream and the session are keyed alike (identity included), so the notice reaches it."""
    digest = hashlib.sha256(b"alice-secret-token").hexdigest()
    gateway, _notes = make_gateway(
        registry, SecuritySettings(auth="tokens", tokens={"alice": f"sha256:{digest}"})
    )
    port = free_port()
    with serving(http_app(gateway, "127.0.0.1", port), port, gateway):
        async with mcp_client(f"http://127.0.0.1:{port}/mcp", "http", "alice-secret-token") as client:
            assert client.protocol_version == "2026-07-28"
            watch = ListChanged()
            async with watching(client, watch):
                found = doc(await client.call_tool("find_tools", {"query": "what time is it"}))
                assert found["tool_list_changed"]
                await watch.wait(timeout=10)

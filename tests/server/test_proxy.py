"""Argument validation messages and result post-processing (pure parts of the proxy)."""

from __future__ import annotations

from typing import Any, Unpack

import mcp_types as types
import pytest

from tests.results import text_part
from tests.server.helpers import FakeBackend
from toolweave.adapters.backend import CallOptions
from toolweave.call_errors import tool_error_result
from toolweave.records import ToolRecord
from toolweave.server.calls.proxy import argument_errors

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 2},
        "days": {"type": "integer", "minimum": 1},
        "units": {"enum": ["metric", "imperial"]},
        "stops": {"type": "array", "items": {"type": "object", "properties": {"lat": {"type": "number"}}}},
    },
    "required": ["city"],
    "additionalProperties": False,
}


def test_every_broken_field_is_named_with_why() -> None:
    errors = argument_errors(
        SCHEMA, {"days": 0, "units": "kelvin", "stops": [{"lat": 1}, {"lat": "north"}], "extra": 1}
    )
    by_field = {e["field"]: e for e in errors}
    assert by_field["days"]["keyword"] == "minimum"
    assert by_field["units"]["problem"] == "'kelvin' is not one of ['metric', 'imperial']"
    assert by_field["stops[1].lat"]["problem"] == "'north' is not of type 'number'"
    top = [e["problem"] for e in errors if e["field"] == "(arguments)"]
    assert "'city' is a required property" in top
    assert any("'extra' was unexpected" in p for p in top)


def test_valid_arguments_and_draft_2020_keywords() -> None:
    assert argument_errors(SCHEMA, {"city": "Oslo", "days": 3}) == []
    schema = {"type": "object", "properties": {"xs": {"type": "array", "prefixItems": [{"type": "string"}]}}}
    assert argument_errors(schema, {"xs": ["a", 1]}) == []
    assert argument_errors(schema, {"xs": [1]})[0]["field"] == "xs[0]"


def test_not_an_object_and_invalid_schema_are_reported() -> None:
    assert argument_errors(SCHEMA, ["city"])[0]["problem"] == "['city'] is not of type 'object'"
    broken = argument_errors({"type": "object", "properties": {"a": {"type": "bogus"}}}, {"a": 1})
    assert broken[0]["field"] == "(schema)"


def test_error_payload_shape() -> None:
    err = tool_error_result("timeout", "slow upstream", tool="t__x", details={"after_s": 2})
    assert err.is_error
    assert text_part(err) == "timeout: slow upstream"
    assert err.structured_content == {
        "error": {"code": "timeout", "message": "slow upstream", "tool": "t__x", "details": {"after_s": 2}}
    }


def test_a_tools_own_error_answer_carries_a_code_like_every_failed_call() -> None:
    from toolweave.call_errors import error_code_of
    from toolweave.server.calls.proxy import with_error_code

    own = types.CallToolResult(
        content=[types.TextContent(text="ticket 7 is\nclosed")],
        structured_content={"ticket": 7},
        is_error=True,
    )
    coded = with_error_code(own, "desk__close_ticket")
    assert error_code_of(coded) == "tool_error"
    assert coded.structured_content == {
        "ticket": 7,
        "error": {"code": "tool_error", "message": "ticket 7 is closed", "tool": "desk__close_ticket"},
    }
    assert text_part(coded, -1).startswith("tool_error: ")
    assert coded.content[:-1] == own.content  # the tool's own words come first
    ok = types.CallToolResult(content=[types.TextContent(text="done")])
    assert with_error_code(ok, "desk__close_ticket") is ok


class _Echo(FakeBackend):
    """A backend that answers every call with its arguments (connected: the proxy needs no ``run``)."""

    def __init__(self) -> None:
        super().__init__("svc", [])

    @property
    def available(self) -> bool:
        return True

    async def call(
        self, tool: ToolRecord, arguments: dict[str, Any], **options: Unpack[CallOptions]
    ) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=str(arguments))])


@pytest.mark.anyio
async def test_a_tool_whose_schema_changed_is_checked_against_the_new_one() -> None:
    """The proxy keeps each tool's compiled validator; a record replaced with another schema (a
    re-discovered upstream) is validated against that schema, not the cached one."""
    from tests.server.helpers import tool
    from toolweave.server.calls.proxy import Proxy

    before = tool("svc", "lookup", "Look a word up.", {"word": {"type": "string"}}, ["word"])
    after = tool("svc", "lookup", "Look a word up.", {"word": {"type": "integer"}}, ["word"])
    proxy = Proxy({"svc": _Echo()}, timeout_s=5, max_result_chars=10_000)
    assert not (await proxy.call(before, {"word": "tea"})).is_error
    assert (await proxy.call(before, {"word": 3})).is_error
    assert not (await proxy.call(after, {"word": 3})).is_error
    rejected = await proxy.call(after, {"word": "tea"})
    assert rejected.is_error and "'tea' is not of type 'integer'" in text_part(rejected)
    assert not (await proxy.call(before, {"word": "tea"})).is_error  # and back


class _Big(_Echo):
    """A backend whose answer is stamped by its server and larger than the gateway shows."""

    def __init__(self) -> None:
        super().__init__()
        self.budgets: list[float | None] = []

    async def call(
        self, tool: ToolRecord, arguments: dict[str, Any], **options: Unpack[CallOptions]
    ) -> types.CallToolResult:
        self.budgets.append(options.get("timeout_s"))
        return types.CallToolResult(
            content=[types.TextContent(text="x" * 5_000)],
            _meta={"io.modelcontextprotocol/serverInfo": {"name": "up"}},
        )


@pytest.mark.anyio
async def test_every_result_is_finished_once_and_every_call_gets_the_resolved_budget() -> None:
    from tests.server.helpers import tool
    from toolweave.server.calls.proxy import Proxy

    backend = _Big()
    proxy = Proxy({"svc": backend}, timeout_s=7, max_result_chars=1_000)
    result = await proxy.call(tool("svc", "dump", "Dump it.", {}, []), {})
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    assert texts[0] == "x" * 1_000 and len(texts) == 2  # one cut, one note
    assert texts[1] == "[toolweave: result truncated to 1,000 of 5,000 characters (max_result_chars)]"
    assert result.meta is None  # the upstream's stamp is gone
    assert backend.budgets == [7]  # no budget of its own: the gateway's, passed down


class _Asking(_Echo):
    """A backend whose upstream asks its client's user before it answers (and keeps no budget itself)."""

    async def call(
        self, tool: ToolRecord, arguments: dict[str, Any], **options: Unpack[CallOptions]
    ) -> types.CallToolResult:
        elicitor = options.get("elicitor")
        assert elicitor is not None
        asked = types.ElicitRequestFormParams(
            message="Sure?", requested_schema={"type": "object", "properties": {}}
        )
        answer = await elicitor(asked)
        assert isinstance(answer, types.ElicitResult)
        return types.CallToolResult(content=[types.TextContent(text=answer.action)])


@pytest.mark.anyio
async def test_the_time_the_user_takes_to_answer_is_not_the_upstreams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proxy's own deadline (the budget and its margin) stops while the client's user answers."""
    import anyio

    from tests.server.helpers import tool
    from toolweave.server.calls import proxy as proxy_module

    monkeypatch.setattr(proxy_module, "_TIMEOUT_MARGIN_S", 0.05)

    async def slow_user(params: types.ElicitRequestParams) -> types.ElicitResult:
        await anyio.sleep(0.5)  # far past the 0.1 s budget and its margin
        return types.ElicitResult(action="accept", content={})

    proxy = proxy_module.Proxy({"svc": _Asking()}, timeout_s=0.1, max_result_chars=1_000)
    result = await proxy.call(tool("svc", "drop", "Drop it.", {}, []), {}, elicitor=slow_user)
    assert not result.is_error and text_part(result) == "accept", text_part(result)
    assert len(proxy._overdue) == 0  # nothing left watched

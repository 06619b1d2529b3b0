"""Validate a call against the tool's input schema, then send it to the backend that owns the tool.

Every failure comes back as the gateway's error result (``toolweave/call_errors.py``); nothing raised by a
backend reaches the MCP layer, so one broken upstream never takes the gateway down.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types

from toolweave.adapters import plain_schema
from toolweave.adapters.backend import Backend, Elicitor, PausedBudget, Progress, Sampler, call_budget
from toolweave.call_errors import error_code_of, finish_result, tool_error_result
from toolweave.records import ToolRecord
from toolweave.server.calls.coerce import loosely_typed
from toolweave.server.calls.scopes import Overdue, loop_time
from toolweave.tracing import span

if TYPE_CHECKING:  # jsonschema loads on the first call, not before the handshake
    import jsonschema
    from jsonschema import Draft202012Validator

__all__ = ["Proxy", "argument_errors", "schema_key"]

log = logging.getLogger(__name__)

# Backends enforce the call timeout themselves; this margin only catches a backend that does not.
_TIMEOUT_MARGIN_S = 5.0


_Compiled = tuple[Mapping[str, Any], "Draft202012Validator | None", plain_schema.Check | None]


def _field_path(error: jsonschema.ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return path.lstrip(".") or "(arguments)"


@functools.lru_cache(maxsize=4096)
def _validator(schema_json: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    schema = json.loads(schema_json)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def argument_errors(
    schema: Mapping[str, Any], arguments: Any, validator: Draft202012Validator | None = None
) -> list[dict[str, str]]:
    """Every way ``arguments`` break ``schema`` (JSON Schema Draft 2020-12), one entry per problem.

    Each entry names the field (``a.b[2]``, or ``(arguments)`` for the object itself), says why, and
    gives the schema keyword that failed. A schema that is itself invalid is reported, not raised.
    ``validator``: the schema's compiled validator, when the caller holds it (``Proxy`` does, per tool).
    """
    import jsonschema

    try:
        # Compiled validators are cached by the schema's text: tools are called again and again.
        validator = validator or _validator(schema_key(schema))
        errors = sorted(validator.iter_errors(arguments), key=lambda e: (_field_path(e), str(e.validator)))
    except jsonschema.SchemaError as exc:
        return [_schema_problem(exc.message, str(exc.validator))]
    except (
        Exception
    ) as exc:  # unknown type, unresolvable $ref, bad regex: the schema's fault, not the caller's
        return [_schema_problem(f"{type(exc).__name__}: {exc}".splitlines()[0], "")]
    return [{"field": _field_path(e), "problem": e.message, "keyword": str(e.validator)} for e in errors]


def schema_key(schema: Mapping[str, Any]) -> str:
    """The text a schema's compiled validator is cached under (the same schema, the same text)."""
    return json.dumps(schema, sort_keys=True, default=str)


def _schema_problem(message: str, keyword: str) -> dict[str, str]:
    return {
        "field": "(schema)",
        "problem": f"the tool's input schema is invalid: {message}",
        "keyword": keyword,
    }


class Proxy:
    """Dispatches validated calls to backends by the tool's ``source``."""

    def __init__(
        self,
        backends: Mapping[str, Backend],
        *,
        timeout_s: float,
        max_result_chars: int,
    ) -> None:
        self._backends = backends
        self._timeout_s = timeout_s
        self._max_result_chars = max_result_chars
        # tool id -> (the input schema it was compiled from, its validator, its quick check): one dict
        # look-up per call instead of serialising the schema to find the validator (records are
        # replaced on change, so the same schema object means the same schema)
        self._validators: dict[str, _Compiled] = {}
        self._overdue = Overdue()
        """The margin's deadlines: one loop timer for every call in flight (``scopes.Overdue``)."""

    def _validator_of(self, tool: ToolRecord) -> _Compiled:
        """``tool``'s compiled validator (None when its schema is invalid: ``argument_errors`` says why)
        and its quick check (``adapters/plain_schema.py``; None unless the schema is valid and plain)."""
        cached = self._validators.get(tool.id)
        if cached is not None and cached[0] is tool.input_schema:
            return cached
        try:
            validator: Draft202012Validator | None = _validator(schema_key(tool.input_schema))
        except Exception:  # reported by argument_errors, which compiles it again and says why
            validator = None
        quick = plain_schema.quick_check(tool.input_schema) if validator is not None else None
        compiled = self._validators[tool.id] = (tool.input_schema, validator, quick)
        return compiled

    async def call(
        self,
        tool: ToolRecord,
        arguments: Any,
        *,
        sampler: Sampler | None = None,
        elicitor: Elicitor | None = None,
        progress: Progress | None = None,
    ) -> types.CallToolResult:
        """Check ``arguments``, then send them: ``checked`` and ``send`` in one."""
        sent, refused = self.checked(tool, arguments)
        return refused or await self.send(tool, sent, sampler=sampler, elicitor=elicitor, progress=progress)

    def checked(self, tool: ToolRecord, arguments: Any) -> tuple[dict[str, Any], types.CallToolResult | None]:
        """The arguments ``tool`` is to get (loosely written values read as its schema types them,
        ``coerce.loosely_typed``), or the ``invalid_arguments`` result that names every problem."""
        if arguments is None:
            arguments = {}
        _, validator, quick = self._validator_of(tool)
        # jsonschema is asked only when the quick check cannot say the arguments are valid
        problems = (
            []
            if quick is not None and quick(arguments)
            else argument_errors(tool.input_schema, arguments, validator)
        )
        if problems and problems[0]["field"] == "(schema)":
            # We cannot judge the arguments; the upstream still can. Don't lock the tool out.
            log.warning("%s: not validating arguments: %s", tool.id, problems[0]["problem"])
            problems = []
        loose = loosely_typed(tool.input_schema, arguments) if problems and type(arguments) is dict else None
        if loose is not None:
            # "5" for an integer, a JSON object as text: what a pydantic upstream would have accepted
            mended, changed = loose
            if not argument_errors(tool.input_schema, mended, validator):
                log.debug("%s: read loosely written arguments %s", tool.id, ", ".join(changed))
                arguments, problems = mended, []
        if problems:
            listed = "; ".join(f"{p['field']}: {p['problem']}" for p in problems[:5])
            more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
            return arguments, tool_error_result(
                "invalid_arguments",
                f"arguments for {tool.id} do not match its input schema: {listed}{more}",
                tool=tool.id,
                details={"errors": problems, "input_schema": tool.input_schema},
            )
        return arguments, None

    async def send(
        self,
        tool: ToolRecord,
        arguments: dict[str, Any],
        *,
        sampler: Sampler | None = None,
        elicitor: Elicitor | None = None,
        progress: Progress | None = None,
    ) -> types.CallToolResult:
        """Send checked ``arguments`` to the backend that owns ``tool``, within the call's budget."""
        backend = self._backends.get(tool.source)
        if backend is None:
            return tool_error_result(
                "no_backend",
                f"{tool.id} comes from {tool.source!r}, which is a catalog with no upstream to call",
                tool=tool.id,
            )
        if not backend.available:
            return tool_error_result(
                "unavailable",
                f"upstream {tool.source!r} is not connected right now (the gateway keeps retrying); "
                f"{tool.id} cannot be called until it is back",
                tool=tool.id,
            )
        started = time.perf_counter()
        # The backend enforces the budget itself (its error names the upstream); the margin only
        # catches one that does not
        budget = call_budget(backend.call_timeout_s, self._timeout_s)
        try:
            # not a cancel scope with a deadline: a timer-less asyncio block that one shared timer ends
            # if the margin passes (``scopes.Overdue``), a third of the scope's cost on every call
            with span("upstream", source=tool.source, tool=tool.name):
                async with asyncio.timeout(None) as block:
                    self._overdue.watch(block, loop_time() + budget + _TIMEOUT_MARGIN_S)
                    if sampler is not None or elicitor is not None:
                        # paused while the client answers the upstream (the backend pauses its own budget)
                        paused = PausedBudget(
                            functools.partial(self._overdue.deadline, block),
                            functools.partial(self._overdue.move, block),
                        )
                        sampler, elicitor = paused.pausing(sampler), paused.pausing(elicitor)
                    try:
                        result = await backend.call(
                            tool,
                            dict(arguments),
                            timeout_s=budget,
                            sampler=sampler,
                            elicitor=elicitor,
                            progress=progress,
                        )
                    finally:
                        self._overdue.forget(block)
        except TimeoutError:
            return tool_error_result(
                "timeout",
                f"upstream {tool.source!r} did not answer {tool.name} within {budget:g} s",
                tool=tool.id,
            )
        except Exception as exc:  # the Backend contract says it never raises; a broken one must not kill us
            log.exception("backend %s raised on %s", tool.source, tool.id)
            return tool_error_result(
                "upstream_error",
                f"calling {tool.name} on {tool.source!r} failed: {type(exc).__name__}: {exc}",
                tool=tool.id,
            )
        log.debug("%s answered in %.1f ms", tool.id, (time.perf_counter() - started) * 1000)
        return finish_result(with_error_code(result, tool.id), self._max_result_chars)


def with_error_code(result: types.CallToolResult, tool_id: str) -> types.CallToolResult:
    """Every failed call carries the gateway's error code: a tool's own error answer gets ``tool_error``
    (its content kept, the code's line after it; its structured content beside the ``error``); backends
    build their error results without the gateway's tool id, which is filled in."""
    if result.is_error and error_code_of(result) is None:
        said = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
        message = " ".join(said.split())[:300] or "the tool reported an error"
        structured = result.structured_content if isinstance(result.structured_content, dict) else {}
        return result.model_copy(
            update={
                "content": [
                    *result.content,
                    types.TextContent(text=f"tool_error: {tool_id} answered with an error"),
                ],
                "structured_content": {
                    **structured,
                    "error": {"code": "tool_error", "message": message, "tool": tool_id},
                },
            }
        )
    if error_code_of(result) is None:
        return result
    error = dict(result.structured_content["error"])
    if error.get("tool"):
        return result
    error["tool"] = tool_id
    return result.model_copy(update={"structured_content": {**result.structured_content, "error": error}})

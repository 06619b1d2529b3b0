"""The BFCL multi-turn backends as real MCP servers, for bench/bfcl_replay.py.

``../shared/datasets/bfcl_multi_turn/executable/`` holds the eight stateful backend classes of BFCL's
multi_turn_base (a file system, a trading bot, a travel agency, ...). Each becomes one low-level MCP
``Server`` (mcp 2.x) whose tools are named, described and typed as in ``tools.jsonl`` (``parameters`` →
input schema, ``output_schema`` → output schema) and whose calls run on one live instance of the class.
A result is a dict (or, for a few methods, ``None`` or a list, see ``structured``), returned as JSON
text and as structured content; a dict carrying ``error`` (BFCL's way of failing) is an ``isError``
result. ``serve_backends`` serves them over streamable HTTP on 127.0.0.1 from the caller's event loop,
so the caller resets each instance to a dialogue's ``initial_config`` between dialogues (``reset``):
nothing the gateway can see resets anything.

The four distractor families of the catalogue (memory_kv, memory_vector, memory_rec_sum, web_search),
which no gold call uses, are not served: ``write_distractor_catalogs`` writes them as static catalogs
for the manifest (searchable and publishable like any tool, not callable).

Needs ``mpmath`` for MathAPI (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import inspect
import json
import socket
import sys
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO.parent / "shared" / "datasets" / "bfcl_multi_turn"

# class name → (source name in the gateway, module of executable/)
BACKENDS = {
    "GorillaFileSystem": ("fs", "gorilla_file_system"),
    "MathAPI": ("math", "math_api"),
    "MessageAPI": ("message", "message_api"),
    "TwitterAPI": ("twitter", "posting_api"),
    "TicketAPI": ("ticket", "ticket_api"),
    "TradingBot": ("trading", "trading_bot"),
    "TravelAPI": ("travel", "travel_booking"),
    "VehicleControlAPI": ("vehicle", "vehicle_control"),
}
DISTRACTORS = {
    "MemoryAPI_kv": "memory_kv",
    "MemoryAPI_vector": "memory_vector",
    "MemoryAPI_rec_sum": "memory_rec_sum",
    "WebSearchAPI": "web_search",
}
STATELESS = {"MathAPI"}  # has no _load_scenario (the dataset README says so)

# tools.jsonl describes send_message's ``message_id`` as an integer; the backend returns
# {"new_id": <int>}. Served as declared, every send_message result would fail the client-side output
# check (the SDK validates structured content against outputSchema) and the replay would not be
# faithful; so the served schema says what the backend returns. Nothing else is changed.
OUTPUT_SCHEMA_FIXES: dict[str, dict[str, Any]] = {
    "send_message": {
        "message_id": {
            "type": "object",
            "description": "ID of the sent message, as {'new_id': <integer>}.",
            "properties": {"new_id": {"type": "integer"}},
        }
    }
}


def dataset_present() -> bool:
    return (DATASET / "dialogues.jsonl").is_file() and (DATASET / "executable").is_dir()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def catalogue() -> list[dict[str, Any]]:
    """``tools.jsonl``: every function of the catalogue (162), distractors included."""
    return read_jsonl(DATASET / "tools.jsonl")


def backend_classes() -> dict[str, type]:
    """The eight classes, imported from ``executable/`` as a private package (its modules import each
    other relatively, and the folder's name is too generic to put on ``sys.path``)."""
    package = "bfcl_executable"
    if package not in sys.modules:
        folder = DATASET / "executable"
        spec = importlib.util.spec_from_file_location(
            package, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        if spec is None or spec.loader is None:
            raise RuntimeError(f"cannot import {folder}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        spec.loader.exec_module(module)
    return {
        cls: getattr(importlib.import_module(f"{package}.{module}"), cls)
        for cls, (_, module) in BACKENDS.items()
    }


def new_instance(cls: type, class_name: str, config: Mapping[str, Any]) -> Any:
    """A fresh backend in the state ``config`` describes (a deep copy: the dialogue's file stays intact)."""
    instance = cls()
    if class_name not in STATELESS:
        instance._load_scenario(copy.deepcopy(dict(config)), long_context=False)
    return instance


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: MathAPI answers mpmath numbers, which become floats."""

    def convert(v: Any) -> Any:
        if type(v).__module__.startswith("mpmath"):
            return float(v)
        return str(v)

    return json.loads(json.dumps(value, default=convert))


def structured(value: Any, output_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """A backend's return value as an MCP structured result (always an object). ``touch``/``echo``
    return None (→ ``{}``); ``list_all_airports`` returns a bare list, put under the schema's one
    property (``airports``) when it has exactly one, else under ``result``."""
    data = jsonable(value)
    if isinstance(data, dict):
        return data
    if data is None:
        return {}
    props = list((output_schema or {}).get("properties") or {})
    return {props[0] if len(props) == 1 else "result": data}


def served_output_schema(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    schema: dict[str, Any] | None = tool.get("output_schema")
    fixes = OUTPUT_SCHEMA_FIXES.get(tool["name"])
    if not schema or not fixes:
        return schema
    fixed = copy.deepcopy(schema)
    fixed.setdefault("properties", {}).update(fixes)
    return fixed


# -- gold calls ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GoldCall:
    text: str
    """The call as the dataset writes it, e.g. ``cd(folder='document')``."""
    tool: str
    class_name: str
    arguments: dict[str, Any]


def parse_gold_call(text: str, involved: Iterable[str], classes: Mapping[str, type]) -> GoldCall:
    """A gold call string as a tool name and keyword arguments. Arguments are literals
    (``ast.literal_eval``); positional ones (``sort('final_report.pdf')``) are named from the method's
    signature. The owning class is the one of the dialogue's classes that has the method."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text!r}")
    name = node.func.id
    owners = [c for c in involved if c in classes and callable(getattr(classes[c], name, None))]
    if len(owners) != 1:
        raise ValueError(f"{text!r}: {len(owners)} of the classes {list(involved)} have {name}")
    params = [p for p in inspect.signature(getattr(classes[owners[0]], name)).parameters if p != "self"]
    arguments = {params[i]: ast.literal_eval(arg) for i, arg in enumerate(node.args)}
    for kw in node.keywords:
        if kw.arg is None:
            raise ValueError(f"{text!r}: **kwargs are not literals")
        arguments[kw.arg] = ast.literal_eval(kw.value)
    return GoldCall(text, name, owners[0], arguments)


def dialogue_calls(dialogue: Mapping[str, Any], classes: Mapping[str, type]) -> list[list[GoldCall]]:
    """The gold calls of each turn of ``dialogue``."""
    involved = dialogue["involved_classes"]
    return [[parse_gold_call(c, involved, classes) for c in turn] for turn in dialogue["ground_truth"]]


def direct_results(
    dialogue: Mapping[str, Any], calls: list[list[GoldCall]], classes: Mapping[str, type]
) -> list[list[dict[str, Any]]]:
    """Every gold call executed in order on fresh instances, as ``structured`` documents (what the
    gateway must hand back if the replay is faithful)."""
    outputs = {t["name"]: served_output_schema(t) for t in catalogue()}
    live = {
        c: new_instance(classes[c], c, dialogue["initial_config"].get(c, {}))
        for c in dialogue["involved_classes"]
    }
    # Copies: a backend may keep an argument and change it later (post_tweet stores its ``mentions``
    # list, a later ``mention`` extends it), which must not change the gold calls replayed afterwards.
    return [
        [
            structured(getattr(live[c.class_name], c.tool)(**copy.deepcopy(c.arguments)), outputs[c.tool])
            for c in turn
        ]
        for turn in calls
    ]


# -- the servers -------------------------------------------------------------------------------------------
class BackendServer:
    """One backend class as an MCP server over one live instance (replaced by ``reset``)."""

    def __init__(self, class_name: str, cls: type, tools: list[dict[str, Any]]) -> None:
        self.class_name = class_name
        self.source = BACKENDS[class_name][0]
        self._cls = cls
        self._tools = {t["name"]: t for t in tools}
        self._outputs = {t["name"]: served_output_schema(t) for t in tools}
        self.calls = 0
        self.instance: Any = None
        self.reset({})
        self.server: Server[Any] = Server(
            f"bfcl-{self.source}",
            version="1",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    def reset(self, config: Mapping[str, Any]) -> None:
        self.instance = new_instance(self._cls, self.class_name, config)

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=name,
                    description=tool["description"],
                    input_schema=tool["parameters"],
                    output_schema=self._outputs[name],
                )
                for name, tool in self._tools.items()
            ]
        )

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        self.calls += 1
        method = getattr(self.instance, params.name, None) if params.name in self._tools else None
        if method is None:
            return _error(f"unknown tool {params.name!r}")
        try:
            value = method(**(params.arguments or {}))
        except Exception as exc:  # a wrong argument: the model's problem, told as an error result
            return _error(f"{type(exc).__name__}: {exc}")
        doc = structured(value, self._outputs[params.name])
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(doc, ensure_ascii=False))],
            structured_content=doc,
            is_error=isinstance(value, dict) and "error" in value,
        )


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


class BackendFleet:
    """The eight servers; ``reset(dialogue)`` puts every class in that dialogue's initial state (the
    classes the dialogue does not involve in their default state)."""

    def __init__(self) -> None:
        classes = backend_classes()
        tools = catalogue()
        self.classes = classes
        self.servers = {
            name: BackendServer(name, cls, [t for t in tools if t["class"] == name])
            for name, cls in classes.items()
        }

    def reset(self, dialogue: Mapping[str, Any]) -> None:
        for name, server in self.servers.items():
            server.reset(dialogue["initial_config"].get(name, {}))

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.servers.values())


@asynccontextmanager
async def serve_backends(fleet: BackendFleet) -> AsyncIterator[dict[str, str]]:
    """Serve every backend over streamable HTTP on its own free 127.0.0.1 port, in this event loop;
    yields source name → URL. Each socket is bound before uvicorn starts, so no port can be lost."""
    import uvicorn

    urls: dict[str, str] = {}
    running: list[uvicorn.Server] = []
    async with anyio.create_task_group() as tg:
        for backend in fleet.servers.values():
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            config = uvicorn.Config(
                backend.server.streamable_http_app(), log_level="warning", lifespan="on", access_log=False
            )
            server = uvicorn.Server(config)
            running.append(server)
            tg.start_soon(server.serve, [sock])
            urls[backend.source] = f"http://127.0.0.1:{port}/mcp"
        with anyio.fail_after(60):
            while not all(s.started for s in running):
                await anyio.sleep(0.05)
        try:
            yield urls
        finally:
            for server in running:
                server.should_exit = True


def write_distractor_catalogs(folder: Path) -> dict[str, Path]:
    """The distractor families as ``tools.jsonl``-style catalogs in ``folder``: source → file."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    tools = catalogue()
    for class_name, source in DISTRACTORS.items():
        path = folder / f"{source}.jsonl"
        rows = [t for t in tools if t["class"] == class_name]
        path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in rows), encoding="utf-8")
        out[source] = path
    return out


def source_of_class(class_name: str) -> str:
    return BACKENDS[class_name][0] if class_name in BACKENDS else DISTRACTORS[class_name]

"""The host channel: a host that owns the conversation tells the gateway the user's turn.

A stdio gateway is spawned per host session (one per Claude Code window), so a host-side helper such as
the Claude Code ``UserPromptSubmit`` hook must find *its* gateway, not any gateway. Each stdio gateway
listens on a unix socket ``host-<host pid>-<gateway pid>.sock`` in a per-user runtime directory
(``$XDG_RUNTIME_DIR/toolweave``, else ``<tmp>/toolweave-<uid>``; mode 0700, owned by the user, or it is
not used). The host pid is the gateway's parent: the process that spawned it. The hook walks its own
ancestors (it is a descendant of the same host) and talks to the sockets of the nearest ancestor that
has any. Sockets and directory are checked to belong to the current user, so nobody reaches another
user's gateway. HTTP gateways take the same request at ``POST /toolweave/turn`` (loopback only).

Wire format, one JSON object per line each way: ``{"turn": TEXT, "session": KEY?}`` ->
``{"ok": true, "sessions": [...]}`` or ``{"ok": false, "error": MESSAGE}``.

A stdio gateway listens from its first moment: the early front (``server/fronts/early.py``) binds the socket
(``listen_now``) while the rest of the gateway is still being imported, and ``host_channel`` serves it
from there on. A host's turn sent meanwhile waits in the socket's backlog, so handing a prompt over
never waits for the gateway's start-up, and the turn is applied once the gateway can, whether or not
the host stayed to hear the answer.

The client half (``find_host_sockets``, ``send_turn``, ``run_claude_code_hook``) uses the standard
library only: Claude Code waits for its prompt hook, so ``toolweave.__main__`` runs
``toolweave hook claude-code`` straight from here, without typer or the settings model, and the hook
must never break the user's prompt.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolweave.errors import ServerError

if TYPE_CHECKING:
    from starlette.routing import Route

    from toolweave.server.gateway import Gateway

__all__ = [
    "CONNECT_RETRY_S",
    "HOOK_WAIT_S",
    "STARTING_WAIT_S",
    "TURN_PATH",
    "find_host_sockets",
    "host_channel",
    "listen_now",
    "parse_hook_wait",
    "run_claude_code_hook",
    "runtime_dir",
    "send_turn",
    "turn_route",
]

log = logging.getLogger(__name__)

TURN_PATH = "/toolweave/turn"
"""The HTTP transports' host endpoint (same request and answer as the socket)."""

MAX_REQUEST_BYTES = 256 * 1024
"""A turn is a user prompt; anything bigger is refused rather than buffered."""

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def runtime_dir(*, create: bool) -> Path | None:
    """This user's runtime directory for gateway sockets, checked (owner, 0700, not a link); None if it
    does not exist (``create=False``) or is not safe to use."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "toolweave" if base else Path(tempfile.gettempdir()) / f"toolweave-{os.getuid()}"
    if create:
        try:
            path.mkdir(mode=0o700, parents=False)
        except FileExistsError:
            pass
        except OSError as exc:  # e.g. XDG_RUNTIME_DIR names a directory that does not exist
            log.warning("no host channel: cannot create %s: %s", path, exc)
            return None
    try:
        info = path.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        log.warning("not using %s for the host channel: not a private directory of this user", path)
        return None
    return path


def _parent_pid(pid: int) -> int | None:
    if Path("/proc/self").exists():
        return _state_and_parent(pid)[1]
    try:  # macOS and other systems without procfs
        out = subprocess.run(["ps", "-o", "ppid=", "-p", str(pid)], capture_output=True, text=True, timeout=2)
        return int(out.stdout.strip())
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def ancestors(pid: int | None = None) -> Iterator[int]:
    """The parent, grandparent, ... of ``pid`` (default: this process), up to (excluding) pid 1."""
    current = os.getpid() if pid is None else pid
    for _ in range(64):  # a loop guard; real process trees are far shallower
        parent = _parent_pid(current)
        if parent is None or parent <= 1:
            return
        yield parent
        current = parent


def find_host_sockets(pids: Iterator[int] | None = None, *, wait_s: float = 0.0) -> list[Path]:
    """Sockets of the gateways spawned by the nearest ancestor that has any (this user's only).

    With ``wait_s``, when no ancestor has a socket yet but one has a stdio gateway child still starting
    (a host runs its prompt hook while its MCP servers start), wait up to ``wait_s`` for its socket.
    Nothing is waited for when no gateway is starting: the hook never slows a host without one.
    """
    chain = list(ancestors() if pids is None else pids)
    deadline = time.monotonic() + wait_s
    while True:
        found = _sockets_of_nearest(chain)
        if found or time.monotonic() >= deadline or not _parents_of_starting_gateways() & set(chain):
            return found
        time.sleep(0.05)


def _sockets_of_nearest(chain: list[int]) -> list[Path]:
    directory = runtime_dir(create=False)
    if directory is None:
        return []
    uid = os.getuid()
    for pid in chain:
        found = []
        for path in sorted(directory.glob(f"host-{pid}-*.sock")):
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISSOCK(info.st_mode) and info.st_uid == uid and _gateway_alive(path):
                found.append(path)
        if found:
            return found
    return []


def _gateway_alive(path: Path) -> bool:
    """Whether the gateway named by a socket (``host-<host>-<gateway>.sock``) still runs: one that was
    killed leaves its socket behind, and a hook must not wait on it."""
    try:
        os.kill(int(path.stem.rsplit("-", 1)[1]), 0)
    except (ValueError, IndexError):
        return True  # not a name this module made: let the connection decide
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's (the directory check keeps those out anyway)
    return True


def _parents_of_starting_gateways() -> set[int]:
    """Parents of running stdio ``toolweave serve`` processes, in one pass over /proc (procfs only;
    elsewhere none, so nothing is waited for).

    A process whose command line is still empty is mid-``exec`` (the kernel sets it up last), so it may
    be a gateway its host has just spawned: it counts too, for the few milliseconds that lasts. Zombies
    also have an empty command line and never become anything: they do not count.
    """
    parents: set[int] = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = {Path(a.decode(errors="replace")).name for a in argv if a}
        stdio_serve = "serve" in words and not {"http", "sse"} & words
        if (stdio_serve and any(w.startswith("toolweave") for w in words)) or not words:
            state, parent = _state_and_parent(int(entry.name))
            if parent is not None and (words or state not in ("Z", "X", None)):
                parents.add(parent)
    return parents


def _state_and_parent(pid: int) -> tuple[str | None, int | None]:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        state, ppid = text[text.rindex(")") + 2 :].split()[:2]  # after "(comm)", comm may hold spaces
        return state, int(ppid)
    except (OSError, ValueError, IndexError):
        return None, None


def send_turn(
    path: Path, text: str, *, session: str | None = None, timeout_s: float = 5.0, connect_s: float = 0.0
) -> dict[str, Any]:
    """Hand ``text`` to the gateway listening on ``path`` and return its answer (blocking; at most
    ``timeout_s``, then ``TimeoutError``: the turn was handed over and the gateway applies it anyway).
    A refused or missing socket is tried again for ``connect_s``."""
    request: dict[str, Any] = {"turn": text}
    if session:
        request["session"] = session
    deadline = time.monotonic() + timeout_s
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        _connect(conn, path, min(connect_s, timeout_s))
        conn.settimeout(max(0.001, deadline - time.monotonic()))
        conn.sendall(json.dumps(request).encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            reply += chunk
    try:
        answer = json.loads(reply)
    except json.JSONDecodeError as exc:
        raise ServerError(f"the gateway at {path} answered something that is not JSON") from exc
    if not isinstance(answer, dict):
        raise ServerError(f"the gateway at {path} answered something that is not a JSON object")
    return answer


def _connect(conn: socket.socket, path: Path, retry_s: float) -> None:
    """Connect, trying a refused or missing socket again for ``retry_s`` (a gateway binding it now)."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            conn.connect(str(path))
            return
        except (ConnectionRefusedError, FileNotFoundError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def listen_now(host_pid: int | None = None) -> socket.socket | None:
    """This process's host socket, bound and listening (standard library, blocking): what the early
    front does first, so a host can hand its turn over from the gateway's first moment. None when the
    runtime directory is not usable (the gateway then runs without a host channel)."""
    directory = runtime_dir(create=True)
    if directory is None:
        return None
    path = _socket_path(directory, host_pid)
    with suppress(FileNotFoundError):
        path.unlink()  # left over by a process that had this pid
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listening.bind(str(path))
        path.chmod(0o600)  # the directory is private already; the socket too
        listening.listen(64)
    except OSError as exc:
        listening.close()
        log.warning("no host channel at %s: %s", path, exc)
        return None
    return listening


def _socket_path(directory: Path, host_pid: int | None) -> Path:
    return directory / f"host-{host_pid or os.getppid()}-{os.getpid()}.sock"


async def answer_turn(gateway: Gateway, request: Any, *, own_host: bool = False) -> dict[str, Any]:
    """One host request (parsed JSON) answered: the shared core of the socket and the HTTP route.
    ``own_host``: the request comes from the host that spawned this (stdio) gateway, so a turn that
    arrives before its client session is meant for that session (see ``TurnEngine.hear_turn``)."""
    if not isinstance(request, dict) or not isinstance(request.get("turn"), str):
        return {"ok": False, "error": 'expected a JSON object with a string "turn"'}
    session = request.get("session")
    if session is not None and not isinstance(session, str):
        return {"ok": False, "error": '"session" must be a string'}
    from toolweave.server.turns.starting import turn_from_ready_table  # the gateway's side: SDK loaded

    try:
        report = await turn_from_ready_table(gateway, request["turn"], session)
        if report is None:
            report = await gateway.turns.hear_turn(request["turn"], session, first_session=own_host)
    except Exception as exc:  # a host's request never takes the gateway down
        log.warning("host turn failed: %s: %s", type(exc).__name__, exc)
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, **report}


@asynccontextmanager
async def host_channel(
    gateway: Gateway, host_pid: int | None = None, listening: socket.socket | None = None
) -> AsyncIterator[Path | None]:
    """Serve host turns on this process's socket (see the module docstring) while inside: ``listening``
    when the early front bound it already (turns may be waiting in its backlog), else a new one."""
    import anyio
    from anyio.abc import SocketListener

    if listening is None:
        listening = listen_now(host_pid)
    if listening is None:
        yield None
        return
    path = Path(listening.getsockname())
    listener = await SocketListener.from_socket(listening)

    async def handle(stream: Any) -> None:
        async with stream:
            try:
                with anyio.fail_after(60):  # a peer that sends nothing holds no task for long
                    line = await _read_line(stream)
                try:
                    request = json.loads(line)
                except json.JSONDecodeError:
                    answer: dict[str, Any] = {"ok": False, "error": "the request is not JSON"}
                else:
                    # not bounded here: the host may have left already, the turn is applied regardless
                    answer = await answer_turn(gateway, request, own_host=True)
                await stream.send(json.dumps(answer).encode() + b"\n")
            except Exception:  # a broken client connection: nothing to answer
                log.debug("host channel connection failed", exc_info=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        log.info("host channel: %s", path)
        try:
            yield path
        finally:
            tg.cancel_scope.cancel()
            with suppress(OSError):
                await listener.aclose()
            with suppress(FileNotFoundError):
                path.unlink()


async def _read_line(stream: Any) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        data += await stream.receive(65536)
        if len(data) > MAX_REQUEST_BYTES:
            raise ServerError("host request too large")
    return data


def turn_route(gateway: Gateway) -> Route:
    """``POST /toolweave/turn`` for HTTP gateways: loopback peers and Host headers only, JSON only
    (a browser cannot send ``application/json`` cross-site without a preflight nobody answers)."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def turn(request: Request) -> JSONResponse:
        peer = request.client.host if request.client else ""
        host = request.headers.get("host", "").rsplit(":", 1)[0].strip("[]")
        if peer not in _LOOPBACK or host not in _LOOPBACK:
            return JSONResponse({"ok": False, "error": "the host endpoint answers loopback only"}, 403)
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return JSONResponse({"ok": False, "error": "send Content-Type: application/json"}, 415)
        body = await request.body()
        if len(body) > MAX_REQUEST_BYTES:
            return JSONResponse({"ok": False, "error": "request too large"}, 413)
        try:
            parsed = json.loads(body)
        except json.JSONDecodeError:
            return JSONResponse({"ok": False, "error": "the request is not JSON"}, 400)
        answer = await answer_turn(gateway, parsed)
        return JSONResponse(answer, 200 if answer["ok"] else 400)

    return Route(TURN_PATH, turn, methods=["POST"])


# -- the Claude Code hook (client half: standard library only, runs without the CLI) -----------------
HOOK_WAIT_S = 2.0
"""The hook returns within this long (``--wait``), whatever the gateway is doing: Claude Code sends its
first model request only once the hook is done, so this is all the hook may ever cost a prompt. A
gateway on a registry it served before answers the turn from its ready table within its first second
or two, before its registry and embedding model are loaded (``server/turns/starting.py``): the first request
then already lists the tools. A gateway slower than that keeps the turn and publishes once it can (the
client hears ``list_changed``)."""

CONNECT_RETRY_S = 2.0
"""A refused connection (a gateway binding its socket this instant) is tried again for this long."""

STARTING_WAIT_S = 5.0
"""How long the hook looks for the socket of a gateway its host is starting (a stdio gateway binds it
within its first second, before anything heavy is imported)."""


def parse_hook_wait(args: list[str]) -> float | None:
    """``--wait SECONDS`` from the hook's arguments (default ``HOOK_WAIT_S``); None when they are not
    simply that (the CLI then parses them and says what is wrong)."""
    if not args:
        return HOOK_WAIT_S
    value = args[1] if len(args) == 2 and args[0] == "--wait" else None
    if len(args) == 1 and args[0].startswith("--wait="):
        value = args[0].split("=", 1)[1]
    try:
        wait = float(value) if value is not None else -1.0
    except ValueError:
        return None
    return wait if wait >= 0 else None


def run_claude_code_hook(wait: float) -> int:
    """Read the hook event on stdin, hand its prompt to this Claude Code session's gateway and return
    within ``wait`` seconds. Always 0, and nothing on stdout: the prompt goes on regardless."""
    deadline = time.monotonic() + wait
    try:
        event = json.loads(sys.stdin.read() or "{}")
        prompt = event.get("prompt") if isinstance(event, dict) else None
        if isinstance(prompt, str) and prompt.strip():
            # the host runs this hook while it still starts its MCP servers: look for ours (bounded)
            for path in find_host_sockets(wait_s=min(STARTING_WAIT_S, wait)):
                left = deadline - time.monotonic()
                # Silent whatever happens (docs/clients.md): Claude Code shows a hook's stderr to the
                # user, and a gateway still starting or one that is down is no news for them.
                with suppress(Exception):  # TimeoutError: handed over, applied once it can
                    send_turn(path, prompt, timeout_s=max(0.1, left), connect_s=min(CONNECT_RETRY_S, left))
    except Exception:  # never break the user's prompt
        log.debug("the hook gave up", exc_info=True)
    return 0

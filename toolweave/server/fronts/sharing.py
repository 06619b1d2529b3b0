"""One warm gateway for clients that start one per call: stdio launches on the same registry share a
background gateway (``share_idle_s``, off by default; docs/clients.md, "Clients that start a gateway per
call").

langchain-mcp-adapters' ``get_tools()`` and llama-index start ``toolweave serve`` for every tool call, so
each call pays a cold start (upstreams spawned, the registry opened). With sharing on, a stdio launch
that finds no shared gateway starts one: the same command over streamable HTTP on a free loopback port,
in a session of its own (it outlives the launch), accepting only a bearer token made for it. As soon as
its port listens (``toolweave.__main__``, before its heavy imports) it takes ``shared-gateway.lock`` in
the registry's directory (an OS lock, ``flock``: a second shared gateway that cannot take it exits at
once) and writes ``shared-gateway.json`` there (mode 0600: port, token, pid, launch key). The launch,
and every later one whose key matches while the lock is held, bridges its stdio to it
(``server/fronts/bridge.py``): one gateway starts, once. After ``share_idle_s`` without a request the shared
gateway stops and removes the file.

The launch key is a digest of the command line, the working directory, the manifest's bytes and the
environment: a launch attaches only to a gateway started exactly as it would start itself (same
settings, same secrets), so sharing never gives a client another's configuration. A launch whose
registry is held by a gateway of another key starts as without sharing. Standard library only:
``toolweave.__main__`` looks for a shared gateway before anything else is imported.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DISCOVERY",
    "IDLE_VAR",
    "KEY_VAR",
    "LOCK",
    "SERVING",
    "SPAWN_WAIT_S",
    "TOKEN_VAR",
    "Shared",
    "announce",
    "busy",
    "claim_shared",
    "discover",
    "enabled",
    "hold",
    "launch_key",
    "spawn",
    "wait_for",
    "watch_idle",
    "withdraw",
]

DISCOVERY = "shared-gateway.json"
LOCK = "shared-gateway.lock"
LOG = "shared-gateway.log"
KEY_VAR = "TOOLWEAVE_SHARED_KEY"
"""Set in the shared gateway's environment: the launch key it serves (and that it is the shared one)."""
IDLE_VAR = "TOOLWEAVE_SHARE_IDLE_S"
"""``share_idle_s`` as the environment sets it: read here before the settings model is even imported."""
SPAWN_WAIT_S = 10.0
"""How long a launch that started the shared gateway waits for it to announce itself (it does so right
after binding its port, before its heavy imports) before it serves its client itself."""
TOKEN_VAR = "TOOLWEAVE_SHARED_TOKEN"
"""The shared gateway's bearer token, read once and removed (its upstreams never see it)."""
SERVING: tuple[str, str] | None = None
"""In a shared gateway: (launch key, token), taken out of the environment by ``claim_shared``."""

# Names a shell or a client sets differently on every launch of the same command: not part of the key.
_VOLATILE = frozenset({"_", "PWD", "OLDPWD", "SHLVL", KEY_VAR, TOKEN_VAR, "LISTEN_PID", "LISTEN_FDS"})


@dataclass(frozen=True)
class Shared:
    """A live shared gateway, as its discovery file names it."""

    port: int
    token: str
    pid: int


def enabled(environ: Mapping[str, str]) -> bool:
    """Whether the environment turns sharing on (``share_idle_s`` > 0)."""
    try:
        return float(environ.get(IDLE_VAR, "0")) > 0
    except ValueError:
        return False  # the settings model reports the bad value


def claim_shared() -> tuple[str, str] | None:
    """In a shared gateway, first thing: take the key and token out of the environment (the settings
    warn about unknown ``TOOLWEAVE_`` names, and upstreams must not see the token)."""
    global SERVING
    key, token = os.environ.pop(KEY_VAR, ""), os.environ.pop(TOKEN_VAR, "")
    if key and token:
        SERVING = (key, token)
    return SERVING


def busy(registry: str) -> bool:
    """Whether some shared gateway holds ``registry``'s lock (whatever launches it serves)."""
    try:
        fd = os.open(Path(registry) / LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def wait_for(registry: str, key: str, timeout: float) -> Shared | None:
    """``discover`` until it finds the gateway, or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while True:
        shared = discover(registry, key)
        if shared is not None or time.monotonic() > deadline:
            return shared
        time.sleep(0.02)


def launch_key(args: Sequence[str], manifest: str | None, environ: Mapping[str, str]) -> str:
    """The digest two launches must share to share a gateway (see the module docstring)."""
    digest = hashlib.sha256()
    digest.update(json.dumps([list(args), os.getcwd()]).encode())
    if manifest is not None:
        with contextlib.suppress(OSError), open(manifest, "rb") as text:
            digest.update(text.read())
    kept = sorted((k, v) for k, v in environ.items() if k not in _VOLATILE)
    digest.update(json.dumps(kept).encode())
    return digest.hexdigest()


def discover(registry: str, key: str) -> Shared | None:
    """The shared gateway serving ``registry`` for launches with ``key``, or None (none, another key,
    or its process is gone: nobody holds its lock)."""
    try:
        found = json.loads((Path(registry) / DISCOVERY).read_text(encoding="utf-8"))
        if found.get("key") != key:
            return None
        shared = Shared(int(found["port"]), str(found["token"]), int(found["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return shared if busy(registry) else None


def hold(registry: str) -> int | None:
    """Take ``registry``'s shared-gateway lock for this process's lifetime: its descriptor, or None when
    another shared gateway holds it."""
    Path(registry).mkdir(parents=True, exist_ok=True)
    fd = os.open(Path(registry) / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def announce(registry: str, key: str, port: int, token: str) -> None:
    """Write the discovery file (mode 0600 from its creation: it holds the token), atomically."""
    target = Path(registry) / DISCOVERY
    temporary = target.with_name(f".{DISCOVERY}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"port": port, "token": token, "pid": os.getpid(), "key": key}, out)
    os.replace(temporary, target)


def withdraw(registry: str) -> None:
    """Remove the discovery file if it is this process's."""
    target = Path(registry) / DISCOVERY
    with contextlib.suppress(OSError, ValueError):
        if json.loads(target.read_text(encoding="utf-8")).get("pid") == os.getpid():
            target.unlink()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spawn(args: Sequence[str], registry: str, key: str) -> None:
    """Start the shared gateway for stdio launches of ``args`` (``serve ...``): the same command over
    HTTP on a free loopback port, accepting only a token made here. Started through a shell that
    backgrounds it and exits, in a session of its own: it is not this launch's child, so the launch's
    way out (which stops every child, ``server/fronts/shutdown.py``) leaves it running."""
    import secrets  # here, not at the top: every stdio launch imports this module before its handshake
    import subprocess

    token = secrets.token_urlsafe(32)
    digest = hashlib.sha256(token.encode()).hexdigest()
    env = {k: v for k, v in os.environ.items() if k != "TOOLWEAVE_REGISTRY_DIR"}  # serve sets it again
    env.update(
        {
            KEY_VAR: key,
            TOKEN_VAR: token,
            "TOOLWEAVE_SECURITY__AUTH": "tokens",
            "TOOLWEAVE_SECURITY__TOKENS": json.dumps({"local": f"sha256:{digest}"}),  # serve renames it
        }
    )
    command = [sys.executable, "-m", "toolweave", *args, "--transport", "http", "--host", "127.0.0.1"]
    command += ["--port", str(_free_port())]
    Path(registry).mkdir(parents=True, exist_ok=True)
    with open(Path(registry) / LOG, "ab") as log:
        subprocess.Popen(
            ["/bin/sh", "-c", '"$@" &', "sh", *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
            start_new_session=True,  # nor are its client's signals its own
        ).wait()


def watch_idle(idle_s: float, idle_for: Callable[[], float | None], stop: Callable[[], None]) -> None:
    """Call ``stop`` once ``idle_for()`` (seconds since the last request; None while one is open) has
    reached ``idle_s``; from a daemon thread."""

    def run() -> None:
        while True:
            time.sleep(min(1.0, idle_s / 4))
            idle = idle_for()
            if idle is not None and idle >= idle_s:
                stop()
                return

    threading.Thread(target=run, name="toolweave-shared-idle", daemon=True).start()

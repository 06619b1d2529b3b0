"""Which client process a 2026-era streamable-HTTP request comes from, when the client does not say.

The 2026-07-28 era has no session on HTTP: every POST is self-contained, and two copies of one client
app on one host send identical envelopes (same ``clientInfo``, same address, no id of their own). So a
process is recognised by what the gateway sees of it:

* **a process begins with ``server/discover``**: the era's first request (SDK clients and Claude Code
  send it once, when they connect), as ``initialize`` is the handshake era's. Each one begins a new
  process of that client app on that host, and later requests go to the newest one;
* **a TCP connection belongs to one process**: a request on a connection stays with the process that
  connection was first used by. A connection is known by the peer's address and port while it is
  open: in use, or idle for less than the server's keep-alive timeout (``KEEP_ALIVE_S``, after which
  uvicorn closes it, so the port names no connection of ours any more);
* **when another process is demonstrably running, nothing is guessed**: a request on a new connection
  goes to the newest process only while no older process of that app on that host has a request in
  progress (a ``subscriptions/listen`` stream is one, for as long as it is open: Claude Code keeps one
  for its whole life). Otherwise it could come from either, and it gets a process of its own: a set
  nobody else has, rather than another process's.

What follows: two processes one after the other never share a published set (the second one's
``server/discover`` begins a new one); two at once never share while the older one listens or has a
call in flight (requests on connections that cannot be placed start empty instead); a process that
reconnects without a new ``server/discover`` (new TCP connections once its old ones timed out) keeps
its set while no other process of its app runs on its host. A client that must keep its set across
anything (its own restarts, replicas) sends ``_meta["io.toolweave/session"]`` (``sessions.py``).

A client that never listens, and whose older copy is idle between calls, is seen only through its
connections: its requests on a new connection go to the newest copy. Such clients should send
``io.toolweave/session``.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KEEP_ALIVE_S", "ClientProcesses", "Process"]

log = logging.getLogger(__name__)

KEEP_ALIVE_S = 5.0
"""How long uvicorn keeps an idle HTTP connection open (its ``timeout_keep_alive``; the transport sets it
from this): past it, a peer's port no longer names a connection of ours."""
MAX_TRACKED = 4096
"""At most this many connections and client apps remembered (least recently seen dropped first)."""

Domain = tuple[Hashable, ...]
"""Whose processes these are: (caller identity, client app, host) as the session key has them."""
Peer = tuple[str, int | None]


@dataclass(eq=False)
class Process:
    """One client process: a label for the session key, and how many of its requests are in progress."""

    label: str
    running: int = 0


@dataclass(eq=False)
class _Connection:
    process: Process
    domain: Domain
    active: int = 0
    last_used: float = 0.0


@dataclass
class ClientProcesses:
    """The processes behind 2026-era HTTP requests without a session id (see the module docstring)."""

    keep_alive_s: float = KEEP_ALIVE_S
    clock: Callable[[], float] = time.monotonic
    _newest: OrderedDict[Domain, Process] = field(default_factory=OrderedDict)
    _running: dict[Domain, set[Process]] = field(default_factory=dict)
    _connections: OrderedDict[Peer, _Connection] = field(default_factory=OrderedDict)
    _labels: Any = field(default_factory=lambda: itertools.count(1))

    def _new(self) -> Process:
        return Process(f"p{next(self._labels)}")

    def discovered(self, domain: Domain, peer: Peer) -> Process:
        """A ``server/discover`` came on ``peer``: a new process of ``domain`` begins there."""
        process = self._newest[domain] = self._new()
        self._newest.move_to_end(domain)
        self._bind(peer, domain, process)
        self._trim()
        return process

    def process_for(self, domain: Domain, peer: Peer) -> Process:
        """The process a request of ``domain`` on ``peer`` comes from."""
        known = self._open(peer)
        if known is not None and known.domain == domain:
            known.last_used = self.clock()
            self._connections.move_to_end(peer)
            return known.process
        newest = self._newest.get(domain)
        if newest is None:  # no server/discover seen: the first request begins the process
            process = self._newest[domain] = self._new()
        elif any(other is not newest for other in self._running.get(domain, ())):
            process = self._new()  # another process runs: this one cannot be told; a set of its own
            log.info(
                "%s: a request on a new connection while %d copies of this client run here: it gets a "
                "session of its own (a client that sends _meta io.toolweave/session keeps one)",
                domain[1],
                len(self._running.get(domain, ())),
            )
        else:
            process = newest
            self._newest.move_to_end(domain)
        self._bind(peer, domain, process)
        self._trim()
        return process

    def started(self, domain: Domain, peer: Peer, process: Process) -> None:
        """A request of ``process`` on ``peer`` is in progress (until ``finished``)."""
        connection = self._connections.get(peer)
        if connection is None or connection.process is not process:
            connection = self._bind(peer, domain, process)
        connection.active += 1
        process.running += 1
        self._running.setdefault(domain, set()).add(process)

    def finished(self, domain: Domain, peer: Peer, process: Process) -> None:
        connection = self._connections.get(peer)
        if connection is not None and connection.process is process:
            connection.active = max(0, connection.active - 1)
            connection.last_used = self.clock()
        process.running = max(0, process.running - 1)
        if process.running == 0:
            running = self._running.get(domain)
            if running is not None:
                running.discard(process)
                if not running:
                    del self._running[domain]

    def _open(self, peer: Peer) -> _Connection | None:
        connection = self._connections.get(peer)
        if connection is None:
            return None
        if connection.active == 0 and self.clock() - connection.last_used > self.keep_alive_s:
            del self._connections[peer]  # closed by now: the port may name another client's connection
            return None
        return connection

    def _bind(self, peer: Peer, domain: Domain, process: Process) -> _Connection:
        previous = self._connections.pop(peer, None)
        connection = _Connection(process, domain, last_used=self.clock())
        if previous is not None and previous.process is process:
            connection.active = previous.active
        self._connections[peer] = connection
        return connection

    def _trim(self) -> None:
        while len(self._connections) > MAX_TRACKED:
            self._connections.popitem(last=False)
        while len(self._newest) > MAX_TRACKED:
            self._newest.popitem(last=False)

"""Connection bounds of an aiohttp server: the admin RPC's (issue #33, item 7).

A local process holding 1,100 half-sent requests (slowloris) took every descriptor of a daemon:
aiohttp takes every connection and, while headers trickle in, waits as long as its keep-alive
timeout. What holds here:

- A header deadline: `keepalive_timeout=HEADER_TIMEOUT` for the server (`runner_options`).
  aiohttp's keep-alive timer starts when a connection opens and again after each response, and
  closes the connection if no complete request head has arrived by then, however many bytes of
  one have; a request being served is never cut by it (a long `/events` stream included). So a
  request's headers get HEADER_TIMEOUT seconds, and so does an idle keep-alive connection. The
  body then has `api.server.BODY_TIMEOUT`.
- Caps (`ConnectionGate`): MAX_PER_CLIENT connections of one client address, MAX_CONNECTIONS in
  all. A connection over either cap closes the oldest connection (of that address, or of any)
  that has not sent a complete request head yet; when there is none it is refused. On loopback
  every local process is 127.0.0.1: eviction rather than refusal is what keeps a process holding
  half-sent requests from locking out `snode-cli`, whose request head comes at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final, cast

from aiohttp import web

from snode.common.logs import LIMITED

log = logging.getLogger(__name__)

HEADER_TIMEOUT: Final = 5.0
"""Seconds a connection has for a complete request head, from its opening or its last response."""
MAX_CONNECTIONS: Final = 128
MAX_PER_CLIENT: Final = 32


def runner_options() -> dict[str, Any]:
    """The AppRunner options the bounds need (the header deadline)."""
    return {"keepalive_timeout": HEADER_TIMEOUT}


class ConnectionGate:
    """Counts a server's connections per client address and applies the caps (see the module)."""

    def __init__(self, make: Callable[[], asyncio.Protocol], *, per_client: int = MAX_PER_CLIENT,
                 total: int = MAX_CONNECTIONS) -> None:
        self.make, self.per_client, self.total = make, per_client, total
        self.open: list[_Gated] = []
        """Every connection let in, oldest first."""
        self.refused = 0

    def __call__(self) -> asyncio.Protocol:
        return _Gated(self)

    def admit(self, conn: _Gated) -> bool:
        mine = [c for c in self.open if c.address == conn.address]
        if len(mine) >= self.per_client:
            if not self._evict(mine, f"{self.per_client} connections from {conn.address}"):
                return False
        elif len(self.open) >= self.total and not self._evict(self.open, f"{self.total} connections"):
            return False
        self.open.append(conn)
        return True

    def _evict(self, among: list[_Gated], full: str) -> bool:
        idle = next((c for c in among if not c.headed), None)
        if idle is None:
            self.refused += 1
            log.info("admin RPC: refused a connection: %s already, each serving a request", full,
                     extra=LIMITED)
            return False
        log.info("admin RPC: %s: closed the oldest that has sent no complete request", full,
                 extra=LIMITED)
        self.forget(idle)
        idle.close()
        return True

    def forget(self, conn: _Gated) -> None:
        if conn in self.open:
            self.open.remove(conn)


class _Gated(asyncio.Protocol):
    """aiohttp's protocol for one connection, behind the gate: it notes whether a complete
    request head (a blank line) has arrived, and passes everything on."""

    def __init__(self, gate: ConnectionGate) -> None:
        self.gate = gate
        self.inner: asyncio.Protocol | None = None
        self.transport: asyncio.BaseTransport | None = None
        self.address = "?"
        self.headed = False
        self._tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if not self.gate.admit(self):
            cast(asyncio.Transport, transport).abort()  # uvloop's transports are no subclass
            return
        self.inner = self.gate.make()
        self.inner.connection_made(transport)

    def close(self) -> None:
        if self.transport is not None:
            cast(asyncio.Transport, self.transport).abort()

    def data_received(self, data: bytes) -> None:
        if not self.headed:
            self.headed = b"\r\n\r\n" in self._tail + data
            self._tail = (self._tail + data)[-3:]
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self.gate.forget(self)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()


class GatedSite(web.SockSite):
    """`web.SockSite` whose connections pass a ConnectionGate."""

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        self.gate = ConnectionGate(server)
        self._server = await asyncio.get_running_loop().create_server(
            self.gate, sock=self._sock, backlog=self._backlog)

"""`GET /events` on the admin port: server-sent events, one JSON object per `data:` line.

The daemon's event feed gives each client a bounded queue and drops a client that falls
behind; this handler also gives up on a client whose socket stops taking bytes, so a stuck
reader holds nothing but its own connection. A comment line every KEEPALIVE seconds keeps
proxies from closing an idle stream.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final, Protocol

import msgspec
from aiohttp import web

KEEPALIVE: Final = 15.0
WRITE_TIMEOUT: Final = 10.0
MAX_CLIENTS: Final = 16
"""Event streams open at once; more are answered 503."""

_encode = msgspec.json.Encoder().encode


async def _write(response: web.StreamResponse, data: bytes) -> None:
    """Write to a client; TimeoutError when it has not taken the data within WRITE_TIMEOUT."""
    async with asyncio.timeout(WRITE_TIMEOUT):
        await response.write(data)


class Subscription(Protocol):
    async def next(self) -> dict[str, Any] | None: ...


class EventSource(Protocol):
    """What the daemon's event feed offers (`services.event_feed.EventFeed`)."""

    def subscribe(self) -> Any: ...

    def unsubscribe(self, client: Any) -> None: ...


class EventStreams:
    """The handler of `/events`, counting its open streams."""

    def __init__(self, source: EventSource) -> None:
        self.source = source
        self.open = 0

    async def serve(self, request: web.Request) -> web.StreamResponse:
        if self.open >= MAX_CLIENTS:
            return web.json_response(
                {"error": f"too many event streams open (at most {MAX_CLIENTS}); close one"},
                status=503)
        response = web.StreamResponse(headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        client = self.source.subscribe()
        self.open += 1
        try:
            await self._stream(response, client)
        except (ConnectionError, asyncio.TimeoutError):
            pass  # the client went away or stopped reading: its stream ends here
        finally:
            self.open -= 1
            self.source.unsubscribe(client)
        return response

    async def _stream(self, response: web.StreamResponse, client: Subscription) -> None:
        await _write(response, b": snode events\n\n")
        while True:
            try:
                async with asyncio.timeout(KEEPALIVE):
                    event = await client.next()
            except TimeoutError:
                await _write(response, b": keep-alive\n\n")
                continue
            if event is None:
                await _write(response,
                             b'event: dropped\ndata: {"event":"dropped","reason":"this client fell behind"}\n\n')
                return
            await _write(response, b"data: " + _encode(event) + b"\n\n")

"""`GET /events` on the admin port: server-sent events as the HTML standard has them. Each event
is `id: <n>`, `event: <kind>` (so a browser's `addEventListener('block', ...)` fires) and one JSON
object on its `data:` line; the stream opens with `retry:` once. A client that reconnects with
`Last-Event-ID: <n>` (as EventSource does by itself) first gets the events after n again.

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
RETRY_MS: Final = 3000
"""How long a browser waits before it reconnects (SSE's `retry:`)."""
MAX_CLIENTS: Final = 16
"""Event streams open at once; more are answered 503."""

_encode = msgspec.json.Encoder().encode
DROPPED: Final = (b'event: dropped\ndata: {"event":"dropped","reason":'
                  b'"this client fell behind; reconnect with Last-Event-ID to resume"}\n\n')


async def _write(response: web.StreamResponse, data: bytes) -> None:
    """Write to a client; TimeoutError when it has not taken the data within WRITE_TIMEOUT."""
    async with asyncio.timeout(WRITE_TIMEOUT):
        await response.write(data)


class Subscription(Protocol):
    async def next(self) -> tuple[int, dict[str, Any]] | None: ...


class EventSource(Protocol):
    """What the daemon's event feed offers (`services.event_feed.EventFeed`)."""

    def subscribe(self, last_seen: int | None = None) -> Any: ...

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
        client = self.source.subscribe(_last_event_id(request.headers.get("Last-Event-ID")))
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
        await _write(response, b": snode events\nretry: %d\n\n" % RETRY_MS)
        while True:
            try:
                async with asyncio.timeout(KEEPALIVE):
                    event = await client.next()
            except TimeoutError:
                await _write(response, b": keep-alive\n\n")
                continue
            if event is None:
                await _write(response, DROPPED)
                return
            number, body = event
            await _write(response, b"id: %d\nevent: %s\ndata: %s\n\n" % (
                number, str(body["event"]).encode(), _encode(body)))


def _last_event_id(text: str | None) -> int | None:
    """The number a reconnecting client sends; None when there is none or it is not ours."""
    text = (text or "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 20:
        return None
    return int(text)

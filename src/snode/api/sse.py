"""`GET /events` on the admin port: server-sent events as the HTML standard has them. Each event
is `id: <n>`, `event: <kind>` (so a browser's `addEventListener('block', ...)` fires) and one JSON
object on its `data:` line; the stream opens with `retry:` once. A client that reconnects with
`Last-Event-ID: <n>` (as EventSource does by itself) first gets the events after n again.

The daemon's event feed gives each client a bounded queue and drops a client that falls
behind; this handler also gives up on a client whose socket stops taking bytes, so a stuck
reader holds nothing but its own connection. A comment line every KEEPALIVE seconds keeps
proxies from closing an idle stream.

Who may hold a stream (issue #33, item 7): whoever may call the admin RPC, since the stream tells
what the RPC can see; the server's Host, Origin and credential checks run first. A web page must
not hold one for its visitor's browser: a cross-site `new EventSource(...)` sends an Origin
(refused), and what sends none (an `<img>`, `<script>` or `<iframe>` tag, a no-cors fetch) is
refused here for its `Sec-Fetch-Site` (anything but same-origin or none) or, from a browser too
old to send that, for its Accept header, which such a tag cannot set to text/event-stream.

At most MAX_CLIENTS streams are open, MAX_PER_CLIENT of one client address. A new stream over
either cap displaces the oldest stream of its own address (over MAX_PER_CLIENT) or of the
address holding the most (over MAX_CLIENTS), which gets a `displaced` event and its end, rather
than being refused: idle streams a process forgot cannot lock `snode-cli watch` out.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final, Protocol

import msgspec
from aiohttp import web

KEEPALIVE: Final = 15.0
WRITE_TIMEOUT: Final = 10.0
RETRY_MS: Final = 3000
"""How long a browser waits before it reconnects (SSE's `retry:`)."""
MAX_CLIENTS: Final = 16
"""Event streams open at once; a new one over it displaces the oldest of the busiest address."""
MAX_PER_CLIENT: Final = 8
"""Event streams of one client address; a new one over it displaces that address's oldest."""
BROWSER_SITES: Final = frozenset({"same-origin", "none"})
"""Sec-Fetch-Site values a stream may come with: the web view's own page, or no page at all."""

_encode = msgspec.json.Encoder().encode
DISPLACED: Final = (b'event: displaced\ndata: {"event":"displaced","reason":'
                    b'"a newer stream took this one\'s place (too many streams open)"}\n\n')
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


@dataclass(eq=False)
class _Open:
    address: str
    task: asyncio.Task[object] | None
    displaced: bool = False


class EventStreams:
    """The handler of `/events`, with its open streams, oldest first."""

    def __init__(self, source: EventSource) -> None:
        self.source = source
        self.streams: list[_Open] = []

    @property
    def open(self) -> int:
        return len(self.streams)

    async def serve(self, request: web.Request) -> web.StreamResponse:
        refused = browser_refusal(request)
        if refused is not None:
            return refused
        stream = _Open(request.remote or "?", asyncio.current_task())
        self._make_room(stream.address)
        self.streams.append(stream)
        response = web.StreamResponse(headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        client = None
        try:
            await response.prepare(request)
            client = self.source.subscribe(_last_event_id(request.headers.get("Last-Event-ID")))
            await self._stream(response, client)
        except (ConnectionError, asyncio.TimeoutError):
            pass  # the client went away or stopped reading: its stream ends here
        except asyncio.CancelledError:
            if not stream.displaced or stream.task is None:
                raise
            stream.task.uncancel()
            await _ending(response, DISPLACED)
        finally:
            self.streams.remove(stream)
            if client is not None:
                self.source.unsubscribe(client)
        return response

    def _make_room(self, address: str) -> None:
        """Displace a stream if a new one from `address` would pass a cap (see the module)."""
        mine = [s for s in self.streams if s.address == address and not s.displaced]
        live = [s for s in self.streams if not s.displaced]
        if len(mine) >= MAX_PER_CLIENT:
            _displace(mine[0])
        elif len(live) >= MAX_CLIENTS:
            busiest = Counter(s.address for s in live).most_common(1)[0][0]
            _displace(next(s for s in live if s.address == busiest))

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


def browser_refusal(request: web.Request) -> web.Response | None:
    """403 for a stream a web page would open for its visitor's browser, 406 for a request that
    does not ask for an event stream (see the module); None: it may have one."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in BROWSER_SITES:
        return web.Response(status=403, content_type="text/plain",
                            text=f"Forbidden: an event stream for another site's page (Sec-Fetch-Site: {site[:20]})\n")
    if "text/event-stream" not in request.headers.get("Accept", ""):
        return web.Response(status=406, content_type="text/plain",
                            text="Not Acceptable: /events is an event stream; send 'Accept: text/event-stream'\n")
    return None


def _displace(stream: _Open) -> None:
    stream.displaced = True
    if stream.task is not None:
        stream.task.cancel()


async def _ending(response: web.StreamResponse, last: bytes) -> None:
    """Write a stream's last event if the client still takes it."""
    try:
        await _write(response, last)
    except (ConnectionError, asyncio.TimeoutError, RuntimeError):
        pass


def _last_event_id(text: str | None) -> int | None:
    """The number a reconnecting client sends; None when there is none or it is not ours."""
    text = (text or "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 20:
        return None
    return int(text)

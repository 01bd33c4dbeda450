"""One typed event hub for a daemon (or for one simulated node).

Publishers say what happened (`hub.publish(BlocksAdopted(...))`); subscribers register for one
event type (`hub.subscribe(BlocksAdopted, relay.on_blocks)`). The publisher knows none of them:
the node does not know that P2P relays its blocks, nor that the RPC keeps caches.

Delivery is synchronous and in order, but never nested: an event published while another is
being delivered (a subscriber that publishes) waits in a queue until the current delivery has
reached every subscriber. A subscriber that raises is logged and the others still get the
event; whoever published never sees the error.

Event types are frozen records defined beside their publisher (`node.events`, `net.events`);
this module knows none of them.
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

E = TypeVar("E")
Handler = Callable[[Any], None]


class EventHub:
    """Subscriptions by event type, and in-order delivery."""

    def __init__(self) -> None:
        self._handlers: defaultdict[type, tuple[Handler, ...]] = defaultdict(tuple)
        """A tuple per type, replaced (never changed) by (un)subscribe: a delivery under way
        goes on with the handlers it started with, with no copy per event."""
        self._queue: deque[Any] = deque()
        self._delivering = False

    def subscribe(self, kind: type[E], handler: Callable[[E], None]) -> None:
        """Call `handler(event)` for every event of exactly type `kind`, in subscription order."""
        self._handlers[kind] = (*self._handlers.get(kind, ()), handler)

    def unsubscribe(self, kind: type[E], handler: Callable[[E], None]) -> None:
        """Stop calling `handler` for `kind` (nothing if it was not subscribed)."""
        handlers = list(self._handlers.get(kind, ()))
        if handler in handlers:
            handlers.remove(handler)
            self._handlers[kind] = tuple(handlers)

    def publish(self, event: object) -> None:
        """Deliver `event` to its subscribers (after any delivery under way has finished)."""
        self._queue.append(event)
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._queue:
                current = self._queue.popleft()
                for handler in self._handlers.get(type(current), ()):
                    try:
                        handler(current)
                    except Exception:
                        log.exception("%s failed on %s", getattr(handler, "__qualname__", handler),
                                      type(current).__name__)
        finally:
            self._delivering = False

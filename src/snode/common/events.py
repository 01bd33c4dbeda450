"""One typed event hub for a daemon (or for one simulated node).

Publishers say what happened (`hub.publish(BlocksAdopted(...))`); subscribers register for one
event type (`hub.subscribe(BlocksAdopted, relay.on_blocks)`). The publisher knows none of them:
the node does not know that P2P relays its blocks, nor that the RPC keeps caches.

Delivery is synchronous and in order, but never nested: an event published while another is
being delivered (a subscriber that publishes) waits in a queue until the current delivery has
reached every subscriber. A subscriber that raises is logged and the others still get the
event; whoever published never sees the error.

An event type may name one of its fields as its topic (a class attribute `TOPIC`, e.g. a
quorumnet message's `message`): a subscriber may then take only the events whose topic is of
given types (`topics=`), and an event reaches only the subscribers of its topic's type and
those that take every topic, in subscription order. So a quorum message is delivered to the
one or two services that handle its kind, not to the four that listen on quorumnet (issue #37
item 3: about half the hub's deliveries a block were a subscriber returning at once). The
routes are made once per (type, topic type), and topic types are those of a decoded union:
a bounded set, whatever a peer sends.

Event types are frozen records defined beside their publisher (`node.events`, `net.events`);
this module knows none of them.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

E = TypeVar("E")
Handler = Callable[[Any], None]


class EventHub:
    """Subscriptions by event type (and topic), and in-order delivery."""

    def __init__(self) -> None:
        self._handlers: dict[object, tuple[Handler, ...]] = {}
        """A tuple per type, or per (type, topic type) for a type with a topic, replaced (never
        changed) by (un)subscribe: a delivery under way goes on with the handlers it started
        with, with no copy per event."""
        self._subscribed: dict[type, list[tuple[Handler, tuple[type, ...]]]] = {}
        """Each type's subscribers in order, with the topic types each takes (none: all)."""
        self._topic: dict[type, str] = {}
        """The topic field of each subscribed type that has one."""
        self._queue: deque[Any] = deque()
        self._delivering = False
        self.published = 0
        """Events published so far (issue #37: counts, which a machine's load does not move)."""
        self.deliveries = 0
        """Calls of subscribers so far."""

    def subscribe(self, kind: type[E], handler: Callable[[E], None], *, topics: tuple[type, ...] = ()) -> None:
        """Call `handler(event)` for every event of exactly type `kind`, in subscription order;
        with `topics`, only for those whose topic field (`kind.TOPIC`) holds one of those types."""
        field = getattr(kind, "TOPIC", None)
        if topics and not isinstance(field, str):
            raise TypeError(f"{kind.__name__} has no TOPIC field to subscribe by")
        self._subscribed.setdefault(kind, []).append((handler, topics))
        self._changed(kind, field)

    def unsubscribe(self, kind: type[E], handler: Callable[[E], None]) -> None:
        """Stop calling `handler` for `kind` (nothing if it was not subscribed)."""
        subscribed = self._subscribed.get(kind, [])
        for i, (each, _) in enumerate(subscribed):
            if each == handler:
                del subscribed[i]
                self._changed(kind, getattr(kind, "TOPIC", None))
                return

    def _changed(self, kind: type, field: object) -> None:
        """`kind`'s subscriptions changed: its handlers anew (a type with a topic: its routes,
        made again as events come)."""
        if isinstance(field, str):
            self._topic[kind] = field
            for key in [k for k in self._handlers if isinstance(k, tuple) and k[0] is kind]:
                del self._handlers[key]
        else:
            self._handlers[kind] = tuple(handler for handler, _ in self._subscribed[kind])

    def _route(self, kind: type, topic: type) -> tuple[Handler, ...]:
        handlers = tuple(handler for handler, topics in self._subscribed.get(kind, ())
                         if not topics or issubclass(topic, topics))
        self._handlers[(kind, topic)] = handlers
        return handlers

    def publish(self, event: object) -> None:
        """Deliver `event` to its subscribers (after any delivery under way has finished)."""
        self._queue.append(event)
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._queue:
                current = self._queue.popleft()
                kind = type(current)
                field = self._topic.get(kind)
                if field is None:
                    handlers = self._handlers.get(kind, ())
                else:
                    topic = type(getattr(current, field))
                    routed = self._handlers.get((kind, topic))
                    handlers = routed if routed is not None else self._route(kind, topic)
                self.published += 1
                self.deliveries += len(handlers)
                for handler in handlers:
                    try:
                        handler(current)
                    except Exception:
                        log.exception("%s failed on %s", getattr(handler, "__qualname__", handler),
                                      type(current).__name__)
        finally:
            self._delivering = False

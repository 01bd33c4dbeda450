"""`GET /events` as the server-sent events standard has it (issue #24, item 8), read by a
third-party client (sseclient-py) from a real daemon: every event names its kind (`event:`) and
has a rising number (`id:`), the stream opens with `retry:` once, and a client that reconnects
with `Last-Event-ID` gets every event it missed meanwhile, or a `missed` event when they are gone
(a restart of the daemon). The browser's EventSource is tested in test_web_view.py."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import sseclient

from tests.functional.framework import TestNode, assert_equal, narrator, scaled

log = narrator(__name__)


class Stream:
    """One connection to /events, its events read by sseclient-py; `raw` is every byte read."""

    def __init__(self, node: TestNode, last_event_id: str | None = None) -> None:
        self.conn = http.client.HTTPConnection(node.ip, node.rpc_port, timeout=scaled(30))
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        self.conn.request("GET", "/events", headers=headers)
        self.response = self.conn.getresponse()
        assert_equal(self.response.status, 200)
        assert_equal(self.response.headers["Content-Type"], "text/event-stream")
        self.raw = bytearray()
        self.events = sseclient.SSEClient(self._chunks()).events()

    def _chunks(self) -> Iterator[bytes]:
        while chunk := self.response.read1(4096):  # a socket timeout bounds each read
            self.raw.extend(chunk)
            yield chunk

    def take(self, count: int) -> list[Any]:
        """The next `count` events (sseclient's Event: .event, .id, .data)."""
        return [next(self.events) for _ in range(count)]

    def until_block(self, height: int) -> list[Any]:
        """Events up to and including the block at `height` (at most 50)."""
        got = []
        for _ in range(50):
            event = next(self.events)
            got.append(event)
            if event.event == "block" and json.loads(event.data)["height"] == height:
                return got
        raise AssertionError(f"no block {height} in 50 events: {[e.event for e in got]}")

    def close(self) -> None:
        self.conn.close()


def _blocks(events: list[Any]) -> list[int]:
    return [json.loads(e.data)["height"] for e in events if e.event == "block"]


def test_events_are_standard_sse_and_a_reconnect_with_last_event_id_loses_nothing(nodes):
    node = nodes.add()
    log.info("A client reads three blocks: each event has its kind, a rising id and its JSON")
    first = Stream(node)
    node.generate_blocks(blocks=3)
    seen = first.until_block(3)
    assert_equal(_blocks(seen), [1, 2, 3])
    for event in seen:
        body = json.loads(event.data)
        assert_equal(event.event, body["event"], "the SSE event name is the JSON's kind")
        assert event.id.isdigit(), event.id
    ids = [int(e.id) for e in seen]
    assert ids == sorted(set(ids)), ids
    assert_equal(first.raw.count(b"retry: 3000\n"), 1, "retry: once, at the start")
    assert first.raw.startswith(b": snode events\nretry: 3000\n\n"), bytes(first.raw[:60])

    log.info("It goes away after block 2's event; four blocks come while it is gone")
    after_two = next(e.id for e in seen if e.event == "block" and json.loads(e.data)["height"] == 2)
    first.close()
    node.generate_blocks(blocks=4)
    log.info("It reconnects with Last-Event-ID: %s and gets blocks 3 to 7, none twice", after_two)
    again = Stream(node, last_event_id=after_two)
    resumed = again.until_block(7)
    assert_equal(_blocks(resumed), [3, 4, 5, 6, 7])
    assert_equal(int(resumed[0].id), int(after_two) + 1, "the next number, nothing skipped")
    again.close()

    log.info("A Last-Event-ID that is not a number is a new client: the stream starts now")
    fresh = Stream(node, last_event_id="yesterday")
    node.generate_blocks(blocks=1)
    assert_equal(_blocks(fresh.until_block(8)), [8])
    fresh.close()

    log.info("After a restart the events of the earlier run are gone: the client is told so")
    last = resumed[-1].id
    node.stop()
    node.start()
    after_restart = Stream(node, last_event_id=last)
    missed = after_restart.take(1)[0]
    assert_equal((missed.event, json.loads(missed.data)["after"]), ("missed", int(last)))
    assert int(missed.id) > int(last), "numbers keep rising across a restart"
    node.generate_blocks(blocks=1)
    assert_equal(_blocks(after_restart.until_block(9)), [9])
    after_restart.close()

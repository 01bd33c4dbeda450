"""The event feed and the notify command (issue #14, items 7 and 8): a web client that stops
reading is dropped at its bound without slowing anyone; the notify command runs one at a time,
gets the SNODE_* variables, is killed by its pid past its time-out, and its failures are logged,
never raised."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from snode.net.events import PeerBanned
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.services.event_feed import MAX_QUEUED, RECENT, EventFeed, Numbered, Subscription
from snode.services.notify import Notifier, NotifyConfigError, event_environment, parse_command
from snode.store.memory import MemoryStore
from tests.unit.conftest import new_chain


def _node() -> Node:
    chain = new_chain()
    genesis = chain.blocks[0]
    return Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(genesis, chain.state),
                state=chain.state, identity=None, producer_key=None, verifier=InlineVerifier())


def test_a_client_that_stops_reading_is_dropped_at_its_bound_and_others_keep_theirs():
    async def run() -> None:
        node = _node()
        feed = EventFeed(node)
        slow, reader = feed.subscribe(), feed.subscribe()
        got = []
        for i in range(MAX_QUEUED + 10):
            node.hub.publish(PeerBanned(f"127.0.0.{i % 250}", "bad block", 60))
            got.append(await _next(reader))
        assert slow.dropped and not reader.dropped
        drained = [await slow.next() for _ in range(MAX_QUEUED)]
        assert drained == got[:MAX_QUEUED]
        assert await slow.next() is None  # the stream ends once it has read what was queued
        assert got[-1][1]["event"] == "peer_banned" and got[-1][1]["reason"] == "bad block"
        numbers = [n for n, _ in got]
        assert numbers == sorted(set(numbers)), "every event has its own number, rising"
    asyncio.run(run())


async def _next(subscription: Subscription) -> Numbered:
    """The subscriber's next event, which must come (it was not dropped)."""
    item = await subscription.next()
    assert item is not None, "the subscriber was dropped"
    return item


async def _finished(notifier: Notifier) -> None:
    """Wait until the notifier has run every command queued so far."""
    assert notifier._running is not None, "no command was started"
    await notifier._running


def _ban(node: Node, i: int) -> None:
    node.hub.publish(PeerBanned(f"127.0.0.{i}", "bad block", 60))


def test_a_client_that_reconnects_with_the_last_number_it_saw_gets_what_followed():
    async def run() -> None:
        node = _node()
        feed = EventFeed(node)
        first = feed.subscribe()
        for i in range(5):
            _ban(node, i)
        seen = [await _next(first) for _ in range(5)]
        feed.unsubscribe(first)
        last_seen = seen[2][0]  # it had read three when it went away
        again = feed.subscribe(last_seen)
        _ban(node, 9)
        resumed = [await _next(again) for _ in range(3)]
        assert [e[1]["ip"] for e in resumed] == ["127.0.0.3", "127.0.0.4", "127.0.0.9"]
        assert feed.subscribe(resumed[-1][0]).queue.empty(), "one that saw the newest gets nothing twice"
    asyncio.run(run())


def test_a_client_whose_events_are_gone_is_told_it_missed_some():
    async def run() -> None:
        node = _node()
        feed = EventFeed(node)
        watcher = feed.subscribe()
        _ban(node, 1)
        item = await watcher.next()
        assert item is not None
        for i in range(RECENT + 5):
            _ban(node, i % 250)
        late = feed.subscribe(item[0])
        missed = await late.next()
        assert missed is not None and missed[1]["event"] == "missed" and missed[1]["after"] == item[0]
        replayed = [late.queue.get_nowait() for _ in range(late.queue.qsize())]
        assert replayed and replayed[0][0] == missed[0] + 1 and replayed[-1][0] == item[0] + RECENT + 5
        # An id from an earlier run of the daemon is lower than every number of this one.
        restarted = EventFeed(node)
        assert restarted._last > replayed[-1][0]
        assert (await _next(restarted.subscribe(replayed[-1][0])))[1]["event"] == "missed"
    asyncio.run(run())


def test_the_notify_command_gets_the_event_and_runs_one_at_a_time(tmp_path: Path):
    out = tmp_path / "out"
    argv = parse_command(f"sh -c 'sleep 0.1; echo $SNODE_EVENT $SNODE_STATE $SNODE_HEIGHT >> {out}'")

    async def run() -> None:
        notifier = Notifier(argv)
        for height in (5, 6, 7):
            notifier.on_event({"event": "state", "state": "decommissioned", "height": height})
        await _finished(notifier)  # the queue drains in order, one by one
    asyncio.run(run())
    assert out.read_text().splitlines() == [f"state decommissioned {h}" for h in (5, 6, 7)]


def test_a_hung_command_is_killed_and_a_failing_one_logged(caplog):
    caplog.set_level(logging.INFO, logger="snode.services.notify")

    async def run() -> None:
        hung = Notifier(parse_command("sleep 30"), timeout=0.3)
        hung.on_event({"event": "reward", "height": 9})
        await _finished(hung)
        failing = Notifier(parse_command("sh -c 'echo broken >&2; exit 3'"))
        failing.on_event({"event": "proof_refused", "reason": "clock"})
        await _finished(failing)
    asyncio.run(run())
    text = caplog.text
    assert "notify: sleep ran over 0.3 s for a reward event; killed" in text
    assert "exited with 3 for a proof_refused event: broken" in text


def test_notify_command_errors_name_what_to_fix():
    with pytest.raises(NotifyConfigError, match="the command is empty"):
        parse_command("   ")
    with pytest.raises(NotifyConfigError, match="cannot split the command"):
        parse_command("echo 'open")
    with pytest.raises(NotifyConfigError, match="'no-such-program-here' is not an executable"):
        parse_command("no-such-program-here --flag")
    assert event_environment({"event": "state", "state": "left", "reason": "unlock", "height": 3,
                              "pubkey": "ab"}) == {
        "SNODE_EVENT": "state", "SNODE_STATE": "left", "SNODE_REASON": "unlock", "SNODE_HEIGHT": "3",
        "SNODE_PUBKEY": "ab", "SNODE_AMOUNT": "", "SNODE_CREDIT": ""}
    reward = event_environment({"event": "reward", "height": 9, "amount": 16_500_000_000})
    assert reward["SNODE_AMOUNT"] == "16500000000"


def test_a_command_that_writes_without_end_costs_its_last_bytes_only(caplog):
    """Its stderr is read to the end and only STDERR_KEPT bytes kept (50 MB written here)."""
    caplog.set_level(logging.WARNING, logger="snode.services.notify")

    async def run() -> None:
        loud = Notifier(parse_command("sh -c 'head -c 50000000 /dev/zero | tr \"\\0\" x >&2; echo end >&2; exit 3'"))
        loud.on_event({"event": "reward", "height": 9})
        await _finished(loud)
    asyncio.run(run())
    (line,) = [r.getMessage() for r in caplog.records]
    assert "exited with 3 for a reward event" in line and "end" in line[-10:], line[-80:]
    assert len(line) < 1_000, "the line shows the tail of what it wrote, not all of it"

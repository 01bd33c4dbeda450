"""The event hub delivers in order, never nested, and isolates a failing subscriber; the
ChainWriter keeps store commits off the event loop.

The writer test makes the store's commit wait until the event loop has run a timer: if the
commit ran on the loop, the timer could never fire and the test would time out. It also checks
that adoption (state swap, events) happens back on the loop's thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from typing import ClassVar

import pytest

from snode.common.clock import MockableClock
from snode.common.events import EventHub
from snode.core.blocks import Block
from snode.core.transactions import OutPoint, Stake, Transfer, TxOut, outpoint_key, txid
from snode.core.txbuilder import build_spend
from snode.devchain import key_from_label
from snode.node.events import BlocksAdopted
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.node.writer import ChainWriter, store_thread
from snode.params import COIN
from snode.store.memory import MemoryStore
from tests.unit.conftest import POOL_MINIMUM, LabChain, node_on


@dataclass(frozen=True)
class Ping:
    n: int


@dataclass(frozen=True)
class Pong:
    n: int


def test_events_reach_subscribers_in_order_and_never_nested() -> None:
    hub = EventHub()
    seen: list[str] = []

    def on_ping(event: Ping) -> None:
        seen.append(f"ping {event.n} start")
        if event.n == 1:
            hub.publish(Pong(1))  # delivered after every subscriber has had Ping 1
        seen.append(f"ping {event.n} end")

    hub.subscribe(Ping, on_ping)
    hub.subscribe(Ping, lambda e: seen.append(f"second subscriber ping {e.n}"))
    hub.subscribe(Pong, lambda e: seen.append(f"pong {e.n}"))
    hub.publish(Ping(1))
    assert seen == ["ping 1 start", "ping 1 end", "second subscriber ping 1", "pong 1"]


def test_a_failing_subscriber_is_logged_and_the_others_still_hear(caplog: pytest.LogCaptureFixture) -> None:
    hub = EventHub()
    heard: list[int] = []

    def broken(event: Ping) -> None:
        raise RuntimeError("bug")

    hub.subscribe(Ping, broken)
    hub.subscribe(Ping, lambda e: heard.append(e.n))
    with caplog.at_level(logging.ERROR):
        hub.publish(Ping(7))  # the publisher never sees the error
    assert heard == [7]
    assert "failed on Ping" in caplog.text
    hub.unsubscribe(Ping, broken)
    hub.publish(Ping(8))
    assert heard == [7, 8]


@dataclass(frozen=True)
class Said:
    """An event with a topic: subscribers may take only some kinds of `what`."""

    TOPIC: ClassVar[str] = "what"
    what: object


def test_an_event_with_a_topic_reaches_only_the_subscribers_of_its_kind_in_order() -> None:
    hub = EventHub()
    seen: list[str] = []
    hub.subscribe(Said, lambda e: seen.append(f"ints {e.what}"), topics=(int,))
    hub.subscribe(Said, lambda e: seen.append(f"all {e.what}"))
    hub.subscribe(Said, lambda e: seen.append(f"texts {e.what}"), topics=(str, bytes))
    hub.publish(Said(1))
    hub.publish(Said("a"))
    hub.publish(Said(2.5))  # a kind nobody takes but the one that takes all
    assert seen == ["ints 1", "all 1", "all a", "texts a", "all 2.5"]
    assert (hub.published, hub.deliveries) == (3, 5)  # not 9: nobody is called for what it does not take
    late: list[object] = []
    hub.subscribe(Said, lambda e: late.append(e.what), topics=(int,))  # routes made again
    hub.publish(Said(3))
    assert seen[-2:] == ["ints 3", "all 3"] and late == [3]
    handler = hub._subscribed[Said][0][0]
    hub.unsubscribe(Said, handler)
    hub.publish(Said(4))
    assert seen[-1] == "all 4" and "ints 4" not in seen and late == [3, 4]


def test_topics_need_a_type_that_names_its_topic() -> None:
    with pytest.raises(TypeError, match="Ping has no TOPIC"):
        EventHub().subscribe(Ping, lambda e: None, topics=(int,))


def test_the_mockable_clock_is_real_until_set_and_refuses_negative_times() -> None:
    clock = MockableClock()
    assert not clock.mocked and clock.time() > 1_700_000_000
    clock.set_mock(1_800_000_000)
    assert clock.mocked and clock.time() == 1_800_000_000
    with pytest.raises(ValueError, match="0 restores"):
        clock.set_mock(-1)
    clock.set_mock(0)
    assert not clock.mocked


def _node_at_genesis(chain: LabChain) -> tuple[MemoryStore, Node, list[Block]]:
    """A node on an in-memory store at `chain`'s genesis, and 3 blocks mined after it for it."""
    genesis_state = chain.fork(at=0).state
    blocks = chain.mine(3)
    store = MemoryStore(chain.blocks[0], genesis_state)
    node = Node(params=chain.params, consensus=chain.consensus, store=store, state=genesis_state,
                identity=None, producer_key=None, verifier=InlineVerifier())
    return store, node, blocks


async def test_store_commits_run_off_the_event_loop(chain: LabChain, monkeypatch: pytest.MonkeyPatch) -> None:
    store, node, blocks = _node_at_genesis(chain)
    loop_thread = threading.get_ident()
    ticked = threading.Event()
    threads: dict[str, int] = {}
    real_write = store.write

    def slow_write(*args, **kwargs):
        threads["write"] = threading.get_ident()
        # Waits for a timer on the event loop: it can fire only if this is not the loop.
        if not ticked.wait(timeout=10):
            raise AssertionError("the event loop was blocked while the store wrote")
        return real_write(*args, **kwargs)

    def adopted(event: BlocksAdopted) -> None:
        threads.setdefault("adopt", threading.get_ident())

    monkeypatch.setattr(store, "write", slow_write)
    node.hub.subscribe(BlocksAdopted, adopted)
    writer = ChainWriter(node, store_thread())
    asyncio.get_running_loop().call_later(0.01, ticked.set)
    try:
        await writer.accept_block(blocks[0])
    finally:
        writer.close()
    assert node.height == 1
    assert threads["write"] != loop_thread
    assert threads["adopt"] == loop_thread


async def test_without_an_executor_the_writer_runs_inline(chain: LabChain) -> None:
    genesis_state = chain.fork(at=0).state
    blocks = chain.mine(2)
    node = Node(params=chain.params, consensus=chain.consensus,
                store=MemoryStore(chain.blocks[0], genesis_state), state=genesis_state,
                identity=None, producer_key=None)
    writer = ChainWriter(node)
    staged = await writer.stage_batch(blocks)
    assert await writer.finish_batch(staged) == 2
    assert await writer.call(node.block_at, 2) == blocks[1]


async def test_a_batch_cancelled_while_the_store_commits_it_is_adopted_all_the_same(
    chain: LabChain, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue #24 item 3: a SIGTERM cancels the sync's task while the store thread commits its
    batch; the commit goes on, so the node must adopt it, else the state written at the stop is
    a batch behind the stored blocks ('flush_state got the state at height N, not the tip's')."""
    store, node, blocks = _node_at_genesis(chain)
    writing, release = threading.Event(), threading.Event()
    real_write = store.write

    def held_write(*args, **kwargs):
        writing.set()
        if not release.wait(timeout=10):
            raise AssertionError("the test never released the write")
        return real_write(*args, **kwargs)

    monkeypatch.setattr(store, "write", held_write)
    writer = ChainWriter(node, store_thread())
    try:
        staged = await writer.stage_batch(blocks)
        task = asyncio.ensure_future(writer.finish_batch(staged, defer_state=True))
        await asyncio.get_running_loop().run_in_executor(None, writing.wait, 10)
        task.cancel()
        await asyncio.sleep(0)  # the cancellation is delivered while the write is held
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await writer.flush_state()  # as the sync's clean-up does at the stop
    finally:
        writer.close()  # waits for the store thread
    assert (node.height, node.state.tip_hash) == store.tip()[:2] and node.height == 3
    assert store.state_height() == 3  # the state written at the tip


async def test_pool_rechecks_after_a_block_run_in_slices_between_turns_of_the_loop(
    chain: LabChain,
) -> None:
    """Issue #33 item 4: a block that changes a node makes every pooled transaction naming it
    need the rules again; a daemon's writer checks them RECHECK_PER_TURN at a time, each slice
    on its own turn of the loop, never all on the block's."""
    sn = key_from_label("sn-1").public
    alice, dave = key_from_label("alice"), key_from_label("dave")
    chain.new_node(amount=POOL_MINIMUM)
    split = chain.spend(alice, Transfer(), [TxOut(alice.public, 10_001 * COIN)] * 40)
    chain.mine_with([split])
    chain.mine(chain.params.unlock_confirmations)
    node = node_on(chain)
    coins = [(OutPoint(txid(split), i), chain.state.utxos[outpoint_key(txid(split), i)]) for i in range(40)]
    stakes = [node.submit_transaction(build_spend([c], alice, [], Stake(sn, 10_000 * COIN), chain.params), chain.now)
              for c in coins]  # each valid on its own: together they over-fill the node
    filler = chain.block_with([chain.stake_tx(dave, sn, 100_000 * COIN)])
    writer = ChainWriter(node, store_thread(), recheck_per_turn=10)
    try:
        await writer.accept_block(filler)
        assert all(s in node.pool for s in stakes), "nothing is rechecked on the block's own turn"
        sizes = []
        for _ in range(100):
            sizes.append(len(node.pool))
            if not node.pool:
                break
            await asyncio.sleep(0)  # one loop turn: the test counts what each turn rechecks, it waits for nothing
    finally:
        writer.close()
    assert sizes[-1] == 0, f"the stale stakes stayed: {sizes}"
    assert sizes.count(40) >= 1 and {30, 20, 10} <= set(sizes), f"not in slices of 10: {sizes}"

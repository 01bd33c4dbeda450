"""A block our own store cannot write is our problem, not the peer's: the relay logs it and bans
nobody (before, any SnodeError from storing a block was 'sent an invalid block' and a ban)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from snode.common.clock import MockableClock
from snode.core.blocks import Block
from snode.core.encoding import encode
from snode.core.errors import SnodeError
from snode.net import protocol as P
from snode.net.limits import MAX_PARKED
from snode.net.relay import Relay
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.node.writer import ChainWriter
from snode.store.errors import DatabaseDamaged, StoreError
from snode.store.memory import MemoryStore
from tests.unit.conftest import new_chain, wait_async


class RefusingWriter(ChainWriter):
    """The store refuses the block's write, as a full disk or a damaged file would."""

    def __init__(self, node: Node, error: StoreError) -> None:
        super().__init__(node)
        self.error = error

    async def accept_block(self, block: Block) -> None:
        raise self.error


@pytest.mark.parametrize("error", [StoreError("cannot write to database chain.sqlite3: database or disk is full"),
                                   DatabaseDamaged("database chain.sqlite3 is damaged (disk image is malformed)")])
def test_a_block_the_store_cannot_write_is_not_blamed_on_the_peer(error: StoreError, caplog: Any) -> None:
    chain = new_chain()
    clock = MockableClock()
    clock.set_mock(chain.now + 60)
    node = Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], chain.state),
                state=chain.state, identity=None, producer_key=None, verifier=InlineVerifier(), clock=clock)
    block = chain.mine()[0]  # the next block on the node's tip
    # Stand-ins with only what the relay reads here: any blame on the peer (a ban, a score) fails
    # the test with an AttributeError.
    peers = SimpleNamespace(on=lambda kind, handler: None)
    relay = Relay(peers, RefusingWriter(node, error))  # type: ignore[arg-type]
    peer = SimpleNamespace(name="127.0.0.9:9230", key="127.0.0.9", height=0, known_blocks=[])
    asyncio.run(relay._on_new_block(peer, P.NewBlock(block=encode(block))))  # type: ignore[arg-type]
    assert f"could not store block {block.header.height} from 127.0.0.9:9230: {error.reason}" in caplog.text
    assert node.height == 0


def sender(i: int, port: int = 9230) -> Any:
    """What the relay reads of a peer that sends it a block."""
    return SimpleNamespace(name=f"127.0.0.{i}:{port}", key=f"127.0.0.{i}", height=0, proven=0, last_block_at=0.0,
                           known_blocks=[])


class SlowWriter(ChainWriter):
    """Accepts a block only when told to, counting the blocks it was handed."""

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        self.handed: list[Block] = []
        self.go = asyncio.Event()

    async def accept_block(self, block: Block) -> None:
        self.handed.append(block)
        await self.go.wait()


def relay_node() -> tuple[Node, Block]:
    """A node at genesis of a new chain, and that chain's next block."""
    chain = new_chain()
    node = Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], chain.state),
                state=chain.state, identity=None, producer_key=None, verifier=InlineVerifier(), clock=MockableClock())
    return node, chain.mine()[0]


def test_copies_of_a_block_being_accepted_are_not_decoded_or_handed_on_again() -> None:
    node, block = relay_node()
    writer = SlowWriter(node)
    relay = Relay(SimpleNamespace(on=lambda kind, handler: None), writer)  # type: ignore[arg-type]
    peers = [sender(i) for i in (8, 9)]

    async def both() -> None:
        copies = [asyncio.create_task(relay._on_new_block(peers[0], P.NewBlock(block=encode(block))))]
        await wait_async(lambda: writer.handed == [block], what="the first copy at the writer")
        copies.append(asyncio.create_task(relay._on_new_block(peers[1], P.NewBlock(block=encode(block)))))
        await wait_async(lambda: copies[1].done(), what="the second copy dealt with")
        writer.go.set()
        await asyncio.wait_for(asyncio.gather(*copies, return_exceptions=True), timeout=10)

    asyncio.run(both())
    assert writer.handed == [block], "the second copy reached the writer"
    assert all(p.known_blocks for p in peers), "both senders are known to have it"
    assert relay._accepting == {}


class PickyWriter(SlowWriter):
    """Refuses any block but `good` as invalid, once told to go on."""

    def __init__(self, node: Node, good: Block) -> None:
        super().__init__(node)
        self.good = good

    async def accept_block(self, block: Block) -> None:
        await super().accept_block(block)
        if block != self.good:
            raise SnodeError("its transactions do not match its header's root")


def test_a_copy_forged_under_the_real_header_does_not_cost_the_honest_copies() -> None:
    node, block = relay_node()
    forged = msgspec.structs.replace(block, transactions=())
    writer = PickyWriter(node, block)
    relay = Relay(SimpleNamespace(on=lambda kind, handler: None), writer)  # type: ignore[arg-type]
    forger, honest = sender(8), sender(9)

    async def both() -> BaseException | None:
        first = asyncio.create_task(relay._on_new_block(forger, P.NewBlock(block=encode(forged))))
        await wait_async(lambda: writer.handed == [forged], what="the forged copy at the writer")
        await relay._on_new_block(honest, P.NewBlock(block=encode(block)))
        writer.go.set()
        results = await asyncio.wait_for(asyncio.gather(first, return_exceptions=True), timeout=10)
        return results[0]

    raised = asyncio.run(both())
    assert isinstance(raised, P.ProtocolViolation) and "invalid block" in str(raised), raised
    assert writer.handed == [forged, block], "the honest copy was dropped with the forged one"
    assert honest.height == block.header.height


def test_one_peers_forged_copies_do_not_crowd_out_an_honest_copy() -> None:
    """Copies parked behind a forged first copy: one per address, none from the forger's, so
    its many forged copies (over several connections) leave room for the honest one."""
    node, block = relay_node()
    forged = msgspec.structs.replace(block, transactions=())
    writer = PickyWriter(node, block)
    scored: list[str] = []
    peers = SimpleNamespace(on=lambda kind, handler: None,
                            misbehaving=lambda peer, points, reason: scored.append(peer.name))
    relay = Relay(peers, writer)  # type: ignore[arg-type]
    forger, honest = sender(8), sender(9)
    accomplice = sender(7)

    async def flood() -> None:
        first = asyncio.create_task(relay._on_new_block(forger, P.NewBlock(block=encode(forged))))
        await wait_async(lambda: writer.handed == [forged], what="the forged copy at the writer")
        for i in range(2 * MAX_PARKED):  # the forger again, on more connections of its address
            await relay._on_new_block(sender(8, 9300 + i), P.NewBlock(block=encode(forged)))
        await relay._on_new_block(accomplice, P.NewBlock(block=encode(forged)))
        await relay._on_new_block(honest, P.NewBlock(block=encode(block)))
        writer.go.set()
        await asyncio.wait_for(asyncio.gather(first, return_exceptions=True), timeout=10)

    asyncio.run(flood())
    assert writer.handed == [forged, forged, block], "one copy per address is taken up, the honest one too"
    assert scored == [accomplice.name], "the other address's forged copy is scored to it"
    assert honest.height == block.header.height
    assert relay._accepting == {}

"""A block our own store cannot write is our problem, not the peer's: the relay logs it and bans
nobody (before, any SnodeError from storing a block was 'sent an invalid block' and a ban)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from snode.common.clock import MockableClock
from snode.core.blocks import Block
from snode.core.encoding import encode
from snode.net import protocol as P
from snode.net.relay import Relay
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.node.writer import ChainWriter
from snode.store.errors import DatabaseDamaged, StoreError
from snode.store.memory import MemoryStore
from tests.unit.conftest import new_chain


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
    peer = SimpleNamespace(name="127.0.0.9:9230", height=0)
    asyncio.run(relay._on_new_block(peer, P.NewBlock(block=encode(block))))  # type: ignore[arg-type]
    assert f"could not store block {block.header.height} from 127.0.0.9:9230: {error.reason}" in caplog.text
    assert node.height == 0

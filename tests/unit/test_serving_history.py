"""Serving from a node whose history starts at a snapshot (issue #36 review): a range below
`history_start` is answered empty at height 0 (a range it cannot serve, not a lie about its tip)
and the syncing side neither bans nor scores that; a GetHeaders is charged the block bytes it
read; a NewBlock (and the orphans) wait while a snapshot download is under way."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from snode.core.blocks import block_hash
from snode.core.encoding import encode
from snode.net import protocol as P
from snode.net.relay import Relay
from snode.node.node import Node
from snode.node.writer import ChainWriter
from snode.services import sync_machine as S
from tests.unit.conftest import LabChain, new_chain, node_on


def _served(chain: LabChain, start: int) -> Node:
    """A node with `chain`'s blocks whose history starts at `start` (as after a snapshot)."""
    node = node_on(chain)
    node.history_start = start
    return node


class _Peer(SimpleNamespace):
    """What the relay reads of a peer that asks it for blocks or headers."""

    def __init__(self) -> None:
        async def drain() -> None:
            return None
        upload = SimpleNamespace(charged=0, wait=lambda now, amount: 0.0)
        upload.charge = lambda amount: setattr(upload, "charged", upload.charged + amount)
        super().__init__(name="127.0.0.9:9230", key="127.0.0.9", height=0, proven=0, last_block_at=0.0,
                         known_blocks=[], writer=SimpleNamespace(drain=drain), upload=upload, clock=lambda: 0.0,
                         sent=[])
        self.send = self.sent.append


def _relay(node: Node) -> tuple[Relay, list[bytes]]:
    frames: list[bytes] = []
    peers = SimpleNamespace(on=lambda kind, handler: None, send_frame=lambda peer, frame: frames.append(frame))
    return Relay(peers, ChainWriter(node)), frames  # type: ignore[arg-type]


def test_a_range_below_the_snapshot_start_is_answered_empty_at_height_0() -> None:
    chain = new_chain()
    chain.mine(8)
    node = _served(chain, 5)
    genesis = [block_hash(chain.blocks[0].header)]
    assert node.blocks_after(genesis, 500, P.MAX_BATCH_BYTES) is None
    assert node.headers_after(genesis, 2_000, P.MAX_HEADERS_BYTES) is None
    after_4 = [block_hash(chain.blocks[4].header)]
    assert node.blocks_after(after_4, 500, P.MAX_BATCH_BYTES) == [encode(b) for b in chain.blocks[5:]]
    relay, frames = _relay(node)
    peer = _Peer()
    asyncio.run(relay._on_get_blocks(peer, P.GetBlocks(genesis, 500)))  # type: ignore[arg-type]
    assert peer.sent == [P.Blocks(blocks=[], height=0)]
    asyncio.run(relay._on_get_headers(peer, P.GetHeaders(genesis, 2_000)))  # type: ignore[arg-type]
    assert frames == [P.frame(P.Headers(headers=[], height=0))]
    asyncio.run(relay._on_get_blocks(peer, P.GetBlocks(after_4, 500)))  # type: ignore[arg-type]
    assert peer.sent[-1].height == 8 and len(peer.sent[-1].blocks) == 4


def test_a_node_from_genesis_still_serves_from_height_1() -> None:
    chain = new_chain()
    chain.mine(3)
    node = node_on(chain)
    genesis = [block_hash(chain.blocks[0].header)]
    assert node.blocks_after(genesis, 500, P.MAX_BATCH_BYTES) == [encode(b) for b in chain.blocks[1:]]


def test_the_syncing_side_neither_bans_nor_scores_an_empty_answer_at_height_0() -> None:
    chain = new_chain()
    machine = S.SyncMachine(peer_height=20, node_height=0, node_tip=block_hash(chain.blocks[0].header),
                            store_blocks=20, batch_blocks=10, could_produce=lambda producer: True,
                            check_signed=lambda block: "", clock=lambda: 1_000.0, whole_bytes=1_000_000)
    assert [type(a) for a in machine.start()] == [S.Request]
    actions = machine.on_blocks(0, [], 0, 1_000.0)  # the peer proved 20, then answered "none: height 0"
    assert not any(isinstance(a, (S.Ban, S.Score, S.Backoff)) for a in actions), actions
    assert machine.done and actions[-1] == S.Done(0)


def test_a_get_headers_is_charged_the_block_bytes_it_read() -> None:
    chain = new_chain()
    chain.mine(6)
    node = node_on(chain)
    genesis = [block_hash(chain.blocks[0].header)]
    found = node.headers_after(genesis, 2_000, P.MAX_HEADERS_BYTES)
    assert found is not None
    heads, read = found
    assert len(heads) == 6 and read == sum(len(encode(b)) for b in chain.blocks[1:])
    relay, frames = _relay(node)
    peer = _Peer()
    asyncio.run(relay._on_get_headers(peer, P.GetHeaders(genesis, 2_000)))  # type: ignore[arg-type]
    assert peer.upload.charged == max(read, len(frames[0]))


def test_a_new_block_and_the_orphans_wait_while_a_snapshot_downloads() -> None:
    chain = new_chain()
    node = node_on(chain)
    block = chain.mine()[0]
    node.snapshot_download = SimpleNamespace(done=False)
    relay, _ = _relay(node)
    peer: Any = _Peer()  # any blame (a ban, a score) fails with an AttributeError on the stand-ins
    asyncio.run(relay._on_new_block(peer, P.NewBlock(block=encode(block))))
    assert node.height == 0
    relay.orphans.add(block, len(encode(block)), "127.0.0.9")
    asyncio.run(relay.apply_orphans())
    assert node.height == 0
    node.snapshot_download.done = True
    asyncio.run(relay._on_new_block(peer, P.NewBlock(block=encode(block))))
    assert node.height == 1

"""The history walks of a node that started from a snapshot (issue #36 review): the front page,
a node's /sn/ page and get_service_node_rewards stop at `history_start` (the snapshot block has
no undo record, the blocks below are not there) and say the history is incomplete, instead of a
StoreError or "the chain changed during the call: ask again" forever."""

from __future__ import annotations

import asyncio

from snode.api.types import ServiceNodeRewardsParams
from snode.core.blocks import block_hash
from snode.core.service_nodes import StateChangeKind
from snode.core.state import Undo
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.node.writer import ChainWriter
from snode.rpc.methods import MethodTable
from snode.rpc.web_node import node_history, node_page
from snode.rpc.web_view import last_blocks, render_page
from snode.store.errors import StoreError
from snode.store.memory import MemoryStore
from tests.unit.conftest import LabChain, new_chain

START = 20
"""The height of the snapshot the node started from."""


class SnapshotStore(MemoryStore):
    """A store as after a snapshot start: no undo record at or below the snapshot's block."""

    def __init__(self, chain: LabChain) -> None:
        super().__init__(chain.blocks[0], chain.fork(at=0).state)
        self.missing = {block_hash(b.header) for b in chain.blocks[:START + 1]}

    def get_undo(self, hash_: bytes) -> Undo:
        if hash_ in self.missing:
            raise StoreError(f"no undo record is stored for block {hash_.hex()[:16]}")
        return super().get_undo(hash_)


def _started_from_snapshot() -> tuple[Node, bytes]:
    chain = new_chain()
    mine = chain.new_node(operator="operator", sn_label="history a")
    chain.change_state(mine, StateChangeKind.ACTIVATE)
    chain.mine(START + 4 - chain.state.height)
    start = chain.fork(at=0)
    node = Node(params=chain.params, consensus=chain.consensus, store=SnapshotStore(chain),
                state=start.state, identity=None, producer_key=None, verifier=InlineVerifier())
    node.accept_blocks(chain.blocks[1:], now=chain.blocks[-1].header.timestamp + 1)
    node.history_start = START
    return node, mine


def test_the_walks_stop_at_the_snapshot_and_say_so() -> None:
    node, mine = _started_from_snapshot()
    assert node.undo_start == START + 1 and node.block_and_undo(START) is None
    assert node.block_and_undo(START + 1) is not None
    assert [b.height for b in last_blocks(node, 12)] == [24, 23, 22, 21]
    page = render_page(node, peer_count=0, now=0, query={}, blocks=last_blocks(node, 12))
    assert f"started from the snapshot of height {START}" in page
    history = node_history(node, mine)
    assert history.since == START + 1
    status, sn_page = asyncio.run(node_page(node, ChainWriter(node), mine.hex(), now=0))
    assert status == 200 and f"started from the snapshot of height {START}" in sn_page


def test_rewards_stop_at_the_snapshot_and_are_incomplete() -> None:
    node, mine = _started_from_snapshot()
    table = MethodTable(node, request_stop=lambda: None)
    result = asyncio.run(table.get_service_node_rewards(ServiceNodeRewardsParams(service_node_pubkey=mine.hex())))
    assert result.complete is False
    assert result.rewards and all(r.height > START for r in result.rewards)


def test_a_node_from_genesis_shows_no_note() -> None:
    node, mine = _started_from_snapshot()
    node.history_start = 1
    node.store.missing = set()  # type: ignore[attr-defined]
    assert len(last_blocks(node, 12)) == 12
    assert "started from the snapshot" not in render_page(node, peer_count=0, now=0, query={},
                                                          blocks=last_blocks(node, 12))

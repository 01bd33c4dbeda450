"""The store and node side of the backfill below a snapshot (issue #36 item 4): batches stored
in one transaction with the backfilled height, none twice, only the blocks that follow; what a
node holds and serves while the history fills."""

from __future__ import annotations

import pytest

from snode.core.blocks import block_hash
from snode.core.encoding import encode
from snode.core.state import undo_block
from snode.core.transactions import txid
from snode.net import protocol as P
from snode.store.chain_store import HISTORY_START_KEY, ChainStore
from tests.unit.conftest import LabChain, new_chain, node_on


def _genesis_state(chain: LabChain):
    state = chain.state
    for undo in reversed(chain.undos):
        state = undo_block(state, undo)
    return state


def test_backfilled_batches_are_stored_once_in_order_and_survive_a_reopen(tmp_path) -> None:
    chain = new_chain()
    chain.mine(10)
    path = tmp_path / "chain.sqlite3"
    with ChainStore.open(path, genesis_block=chain.blocks[0], genesis_state=_genesis_state(chain)) as store:
        store.set_meta(HISTORY_START_KEY, encode(8))  # as after a snapshot at 8
        assert store.backfilled() == 0
        assert store.store_backfill(chain.blocks[1:4]) == 3
        assert store.store_backfill(chain.blocks[1:6]) == 5, "blocks 1 to 3 again are skipped"
        with pytest.raises(ValueError, match="backfilled block 7 does not follow block 5"):
            store.store_backfill(chain.blocks[7:8])
        assert store.store_backfill(chain.blocks[6:10]) == 7, "the snapshot's block and above are skipped"
    with ChainStore.open(path, genesis_block=chain.blocks[0], genesis_state=_genesis_state(chain)) as store:
        assert store.backfilled() == 7
        assert store.get_block_by_height(4) == chain.blocks[4]
        assert store.block_hash_at(7) == block_hash(chain.blocks[7].header)
        coinbase = chain.blocks[2].transactions[0]
        assert store.get_transaction(txid(coinbase)) == (2, coinbase)


def test_a_node_holds_the_backfilled_blocks_and_the_snapshot_on_and_serves_none_between() -> None:
    chain = new_chain()
    chain.mine(8)
    node = node_on(chain)
    node.history_start, node.backfilled = 6, 2
    assert [h for h in range(9) if node.holds(h)] == [0, 1, 2, 6, 7, 8]
    assert node.history_percent == 40
    after_3 = [block_hash(chain.blocks[3].header)]
    assert node.blocks_after(after_3, 500, P.MAX_BATCH_BYTES) is None
    assert node.headers_after(after_3, 2_000, P.MAX_HEADERS_BYTES) is None
    genesis = [block_hash(chain.blocks[0].header)]
    assert node.blocks_after(genesis, 1, P.MAX_BATCH_BYTES) == [encode(chain.blocks[1])]
    node.backfilled = 5
    assert node.history_percent == 100 and all(node.holds(h) for h in range(9))

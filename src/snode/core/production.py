"""Block templates: what a producer puts in the next block."""

from __future__ import annotations

from snode.core.blocks import Block, Checkpoint, make_block
from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.core.genesis import Consensus
from snode.core.mempool import Mempool, select
from snode.core.state import ChainState
from snode.core.transition import after_stake_returns, make_coinbase
from snode.params import MAX_BLOCK_BYTES

COINBASE_ALLOWANCE = 4_096
"""Bytes kept free in a template for the coinbase and the header."""


def build_block(
    state: ChainState, pool: Mempool, consensus: Consensus, key: SigningKey, *, timestamp: int,
    round: int = 0, checkpoint: Checkpoint | None = None,
) -> tuple[Block, list[bytes]]:
    """The next block on `state` signed by `key` (the authority's, or the leader of `round`),
    carrying `checkpoint` if given, and the pool ids found stale on the way.

    The timestamp never goes below the parent's, whatever the producer's clock says.
    """
    timestamp = max(timestamp, state.timestamp)
    after, returns = after_stake_returns(state, consensus)
    returned_bytes = sum(len(encode(tx)) for tx in returns)
    txs, fees, stale = select(
        pool, after, consensus, block_time=timestamp,
        max_bytes=MAX_BLOCK_BYTES - COINBASE_ALLOWANCE - returned_bytes,
    )
    coinbase = make_coinbase(state, key.public, fees, consensus)
    block = make_block(
        version=consensus.params.rules_at(state.height + 1).block_version,
        height=state.height + 1, prev_hash=state.tip_hash, timestamp=timestamp,
        transactions=(coinbase, *returns, *txs), producer_key=key,
        network_id=consensus.params.network_id, round=round, checkpoint=checkpoint,
    )
    return block, stale

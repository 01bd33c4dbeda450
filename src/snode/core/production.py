"""Block templates: what a producer puts in the next block."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from snode.core.blocks import Block, BlockHeaderV2, Checkpoint, header_fields, make_block, sign_block
from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.core.genesis import Consensus
from snode.core.mempool import Mempool, select
from snode.core.sigchecks import SigCheck
from snode.core.state import ChainState
from snode.core.state_root import header_root
from snode.core.transition import after_stake_returns, apply_block_parts, make_coinbase
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
        state_root=bytes(32) if consensus.params.rules_at(state.height + 1).state_root else None,
    )
    return with_state_root(state, block, consensus, key), stale


def with_state_root(state: ChainState, block: Block, consensus: Consensus, key: SigningKey) -> Block:
    """`block` (on `state`, signed by `key`) with the state root its header must carry, signed
    again: the block applied once without its signatures checked or its root compared, and
    the root of the state it makes. A block of a fork without state roots comes back as it is."""
    if not isinstance(block.header, BlockHeaderV2):
        return block
    applied = apply_block_parts(state, block, consensus, _unchecked, None, True, check_root=False)[0]
    root = header_root(consensus.params.network_id, applied.state, applied.state.summed.checksum)
    header = BlockHeaderV2(**header_fields(block.header), state_root=root)
    signed = sign_block(header, block.transactions, key, consensus.params.network_id)
    return msgspec.structs.replace(signed, validator_bitset=block.validator_bitset,
                                   validator_signatures=block.validator_signatures)


def _unchecked(checks: Sequence[SigCheck]) -> int:
    return -1

"""Hypothesis strategies for the consensus records, shared by the unit tests that need them.

Small integers are drawn often because msgpack's one-byte forms are where a wider or signed
encoding of the same value has the most to find; records hold tuples, so collections are tuples.
Kept here, not in a test module, so that no test module imports another.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from snode.core.blocks import Block, BlockHeader, BlockHeaderV2, Checkpoint
from snode.core.state import Contribution, Quorum, ServiceNode, Undo, UtxoEntry
from snode.core.transactions import (
    Coinbase,
    OutPoint,
    Registration,
    Reservation,
    Stake,
    StateChange,
    Transaction,
    Transfer,
    TxOut,
    Vote,
)

U63 = st.integers(min_value=0, max_value=2**63 - 1)
ANY_INT = st.integers(min_value=-(2**63), max_value=2**64 - 1)
SMALL = st.integers(min_value=0, max_value=300)
"""Small integers hit msgpack's one-byte forms, where widening has the most to find."""
AMOUNTS = st.one_of(SMALL, U63)
HASH = st.binary(min_size=32, max_size=32)
SIGNATURE = st.binary(min_size=64, max_size=64)


def tuples(element: st.SearchStrategy[Any], max_size: int = 3, min_size: int = 0) -> st.SearchStrategy[tuple]:
    """Tuples of element (the records hold tuples, not lists)."""
    return st.lists(element, min_size=min_size, max_size=max_size).map(tuple)


VOTES = st.builds(Vote, HASH, SIGNATURE)
PAYLOADS = {
    "transfer": st.just(Transfer()),
    "coinbase": st.builds(Coinbase, AMOUNTS),
    "registration": st.builds(
        Registration, st.integers(0, 1_000_000), tuples(st.builds(Reservation, HASH, AMOUNTS)),
        AMOUNTS, HASH, SIGNATURE,
    ),
    "stake": st.builds(Stake, HASH, AMOUNTS),
    "state_change": st.builds(
        StateChange, HASH, st.integers(0, 255), st.integers(0, 255), AMOUNTS, tuples(VOTES),
    ),
}


def transactions(payload: st.SearchStrategy[Any]) -> st.SearchStrategy[Transaction]:
    """Transactions carrying payloads drawn from `payload`."""
    return st.builds(
        Transaction, st.one_of(SMALL, ANY_INT),
        tuples(st.builds(OutPoint, HASH, st.integers(0, 65_535))),
        tuples(st.builds(TxOut, HASH, AMOUNTS)), payload, tuples(SIGNATURE),
    )


CHECKPOINTS = st.builds(Checkpoint, AMOUNTS, HASH, st.integers(0, 2**20), tuples(SIGNATURE, max_size=3))
V1_HEADERS = st.builds(BlockHeader, AMOUNTS, HASH, AMOUNTS, HASH, HASH, ANY_INT, st.none() | CHECKPOINTS)
V2_HEADERS = st.builds(BlockHeaderV2, AMOUNTS, HASH, AMOUNTS, HASH, HASH, ANY_INT, st.none() | CHECKPOINTS, HASH)
HEADERS = V1_HEADERS | V2_HEADERS
BLOCKS = st.builds(
    Block, HEADERS, tuples(transactions(st.one_of(*PAYLOADS.values())), max_size=2), SIGNATURE,
    st.integers(0, 2**11), tuples(SIGNATURE, max_size=2),
)
UTXOS = st.builds(UtxoEntry, HASH, AMOUNTS, AMOUNTS)
SERVICE_NODES = st.builds(
    ServiceNode, HASH, st.integers(0, 1_000_000), AMOUNTS, AMOUNTS,
    tuples(st.builds(Contribution, HASH, AMOUNTS, AMOUNTS), min_size=1),
    st.one_of(st.just(-1), AMOUNTS), st.booleans(), st.one_of(st.just(-1), AMOUNTS), SMALL, AMOUNTS,
    AMOUNTS, st.integers(0, 3), st.integers(0, 3),
)
QUORUMS = st.builds(Quorum, AMOUNTS, tuples(HASH), SMALL)
UNDOS = st.builds(
    Undo, AMOUNTS, HASH, AMOUNTS, AMOUNTS,
    tuples(st.tuples(st.binary(min_size=34, max_size=34), st.none() | UTXOS)),
    tuples(st.tuples(HASH, st.none() | SERVICE_NODES), max_size=2),
    tuples(st.tuples(AMOUNTS, st.none() | QUORUMS)),
)

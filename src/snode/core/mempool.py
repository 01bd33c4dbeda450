"""The mempool: admission and block-template selection, as pure functions on an immutable pool.

Admission runs the block rules against the tip (`tx_rules.check_transaction`) and refuses a
transaction that spends an output another pool transaction already spends. Selection replays the
pool in fee-rate order on a working copy of the state and keeps what still applies, so two stakes
that together over-fill a node cannot both enter a block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import immutables

from snode.core.encoding import encode
from snode.core.errors import InvalidTransaction, MempoolRejection, SnodeError
from snode.core.genesis import Consensus
from snode.core.state import ChainState
from snode.core.sigchecks import BatchVerifier, verify_serially
from snode.core.transactions import StateChange, Transaction, TxKind, UnlockRequest, payload_kind, txid
from snode.core.tx_rules import apply_transaction, check_transaction

MAX_POOL_BYTES: Final = 32_000_000


@dataclass(frozen=True, slots=True)
class PoolEntry:
    """A transaction waiting for a block."""

    tx: Transaction
    txid: bytes
    size: int
    fee: int
    arrival: int
    """Admission order, for stable selection."""


@dataclass(frozen=True, slots=True)
class Mempool:
    """Transactions waiting for a block, by id, and which outputs they spend."""

    entries: immutables.Map[bytes, PoolEntry] = field(default_factory=immutables.Map)
    spent: immutables.Map[bytes, bytes] = field(default_factory=immutables.Map)
    """Output key -> id of the pool transaction spending it."""
    total_bytes: int = 0
    counter: int = 0

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, tx_id: object) -> bool:
        return tx_id in self.entries


def admit(
    pool: Mempool, tx: Transaction, state: ChainState, consensus: Consensus, *, now: int,
    verifier: BatchVerifier = verify_serially,
) -> tuple[Mempool, PoolEntry]:
    """Add tx to the pool; InvalidTransaction or MempoolRejection says why not."""
    tx_id = txid(tx)
    if tx_id in pool.entries:
        raise MempoolRejection(f"transaction {tx_id.hex()[:16]} is already in the mempool")
    kind = payload_kind(tx.payload)
    if kind is TxKind.COINBASE:
        raise InvalidTransaction("a coinbase cannot be sent on its own")
    for op in tx.inputs:
        other = pool.spent.get(op.key())
        if other is not None:
            raise MempoolRejection(
                f"transaction spends output {op.txid.hex()[:16]}:{op.index}, which mempool "
                f"transaction {other.hex()[:16]} already spends"
            )
    if isinstance(tx.payload, StateChange):  # the check needs the payload's fields
        for entry in pool.entries.values():
            p = entry.tx.payload
            if isinstance(p, StateChange) and p.sn_pubkey == tx.payload.sn_pubkey and p.kind == tx.payload.kind:
                raise MempoolRejection("a state change for this node is already in the mempool")
    elif isinstance(tx.payload, UnlockRequest):  # a node takes one: a second would vanish unmined
        for entry in pool.entries.values():
            p = entry.tx.payload
            if isinstance(p, UnlockRequest) and p.sn_pubkey == tx.payload.sn_pubkey:
                raise MempoolRejection(
                    f"an unlock request for this service node is already in the mempool (transaction "
                    f"{entry.txid.hex()[:16]}); once it is mined every stake on the node comes back"
                )
    fee = check_transaction(state, tx, consensus, block_time=now, verifier=verifier)
    size = len(encode(tx))
    # State changes pay no fee and keep the network honest: a full pool never holds them back.
    if pool.total_bytes + size > MAX_POOL_BYTES and kind is not TxKind.STATE_CHANGE:
        raise MempoolRejection("mempool is full")
    entry = PoolEntry(tx=tx, txid=tx_id, size=size, fee=fee, arrival=pool.counter)
    spent = pool.spent.mutate()
    for op in tx.inputs:
        spent[op.key()] = tx_id
    return Mempool(
        entries=pool.entries.set(tx_id, entry), spent=spent.finish(),
        total_bytes=pool.total_bytes + size, counter=pool.counter + 1,
    ), entry


def remove(pool: Mempool, tx_ids: set[bytes] | list[bytes]) -> Mempool:
    """The pool without the given transactions (mined or no longer valid)."""
    entries = pool.entries.mutate()
    spent = pool.spent.mutate()
    total = pool.total_bytes
    for tx_id in tx_ids:
        entry = entries.get(tx_id)
        if entry is None:
            continue
        del entries[tx_id]
        total -= entry.size
        for op in entry.tx.inputs:
            spent.pop(op.key(), None)
    return Mempool(entries=entries.finish(), spent=spent.finish(), total_bytes=total, counter=pool.counter)


def _priority(entry: PoolEntry) -> tuple[int, float, int]:
    # State changes first: they keep the network honest and pay no fee.
    is_state_change = payload_kind(entry.tx.payload) is TxKind.STATE_CHANGE
    return (0 if is_state_change else 1, -entry.fee / entry.size, entry.arrival)


def select(
    pool: Mempool, state: ChainState, consensus: Consensus, *, block_time: int, max_bytes: int,
) -> tuple[list[Transaction], int, list[bytes]]:
    """Transactions for the next block: (transactions, total fees, ids that no longer apply).

    Signatures were checked at admission and are not checked again here.
    """
    working = state
    chosen: list[Transaction] = []
    stale: list[bytes] = []
    fees = used = 0
    for entry in sorted(pool.entries.values(), key=_priority):
        if used + entry.size > max_bytes:
            continue
        try:
            working, fee, _ = apply_transaction(
                working, entry.tx, consensus, block_time=block_time, tx_id=entry.txid
            )
        except InvalidTransaction:
            stale.append(entry.txid)
            continue
        chosen.append(entry.tx)
        fees += fee
        used += entry.size
    return chosen, fees, stale


def revalidate(
    pool: Mempool, state: ChainState, consensus: Consensus, *, now: int
) -> Mempool:
    """The pool with every transaction that no longer applies on `state` removed."""
    _, _, stale = select(pool, state, consensus, block_time=now, max_bytes=MAX_POOL_BYTES * 2)
    return remove(pool, stale) if stale else pool


def recheck(
    pool: Mempool, state: ChainState, consensus: Consensus, *, now: int,
    verifier: BatchVerifier = verify_serially,
) -> tuple[Mempool, dict[TxKind, list[str]]]:
    """Every pool transaction admitted again on `state`, signatures included (`revalidate`
    skips them): at a fork's activation, where the new rules and branch id refuse what the old
    ones took. The new pool, and the refusals' reasons by kind."""
    fresh = Mempool()
    refused: dict[TxKind, list[str]] = {}
    for entry in sorted(pool.entries.values(), key=lambda e: e.arrival):
        try:
            fresh, _ = admit(fresh, entry.tx, state, consensus, now=now, verifier=verifier)
        except SnodeError as err:
            refused.setdefault(payload_kind(entry.tx.payload), []).append(err.reason)
    return fresh, refused

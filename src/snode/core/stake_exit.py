"""How stakes come back: unlock requests, the exit of a node, pool expiry and deregistration.

- A contributor (the operator or another) asks to unlock a fully funded node it has a stake on
  (`UnlockRequest`). The node keeps working and earning until `requested_unlock_height`
  (request height + `unlock_duration`); the first block above it removes the node.
- A pool node still unfilled `pool_fill_window` blocks after its registration is removed the
  same way.
- Either removal is a `StakeReturn` transaction that the block rules require right after the
  coinbase, one per node due, in exit order: its outputs give each contributor its contribution,
  spendable after the usual `unlock_confirmations`.
- A deregistration (a quorum's `StateChange`, `core.credit`) removes the node at once; the
  outputs of that state change return the stakes, locked for `deregistration_lock` blocks.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator

import msgspec

from snode.core.errors import InvalidTransaction
from snode.core.service_nodes import Stakeable
from snode.core.state import ChainState, ServiceNode, registry_index
from snode.core.transactions import TX_VERSION, StakeReturn, Transaction, TxOut
from snode.params import NetworkParams


class ReturnReason(enum.IntEnum):
    """Why a node's stakes came back; shown to stakers by its `label`."""

    UNLOCK = 1
    POOL_EXPIRED = 2
    DEREGISTRATION = 3

    @property
    def label(self) -> str:
        """`unlock`, `pool expired` or `deregistration`."""
        return self.name.lower().replace("_", " ")


def check_unlock_request(
    sn: ServiceNode | None, sn_pubkey: bytes, contributor: bytes, height: int, params: NetworkParams
) -> ServiceNode:
    """The record after a valid unlock request in block `height`; InvalidTransaction says why
    a request is refused."""
    check_unlock_allowed(sn, sn_pubkey, contributor)
    assert sn is not None  # refused above
    unlock = height + params.unlock_duration
    return msgspec.structs.replace(
        sn, requested_unlock_height=unlock, leaves_at=unlock + 1, last_state_change_height=height,
    )


def check_unlock_allowed(sn: Stakeable | None, sn_pubkey: bytes, contributor: bytes) -> None:
    """Refuse (InvalidTransaction, saying why) an unlock request of `contributor` on the node
    `sn` of key `sn_pubkey` (None: not registered); the wallet asks before it signs one."""
    short = sn_pubkey.hex()
    if sn is None:
        raise InvalidTransaction(f"service node {short} is not registered")
    if not any(c.owner == contributor and c.amount > 0 for c in sn.contributors):
        raise InvalidTransaction(f"this address has no stake on service node {short}")
    if not sn.funded:
        raise InvalidTransaction(
            f"service node {short} is not fully funded: an open pool node cannot be unlocked; its "
            f"stakes come back if it is still unfilled at height {sn.leaves_at}"
        )
    if sn.requested_unlock_height:
        raise InvalidTransaction(
            f"service node {short} already has an unlock request: it unlocks at height "
            f"{sn.requested_unlock_height}"
        )


def returned_outputs(sn: ServiceNode) -> tuple[TxOut, ...]:
    """What the node's contributors get back: one output each, in contributor order."""
    return tuple(TxOut(c.owner, c.amount) for c in sn.contributors if c.amount > 0)


def return_reason(sn: ServiceNode) -> ReturnReason:
    """Why a node due to leave leaves: its unlock request, else its unfilled pool."""
    return ReturnReason.UNLOCK if sn.requested_unlock_height else ReturnReason.POOL_EXPIRED


def nodes_leaving(state: ChainState, height: int) -> Iterator[ServiceNode]:
    """The nodes that block `height` on `state` removes, in exit order (the front of the
    registry index's exit schedule: no scan of the registry)."""
    for leaves_at, pubkey in registry_index(state).leaving:
        if leaves_at > height:
            return
        yield state.service_nodes[pubkey]


def stake_return_tx(sn: ServiceNode) -> Transaction:
    """The `StakeReturn` transaction that removes `sn`."""
    return Transaction(
        TX_VERSION, (), returned_outputs(sn), StakeReturn(sn.pubkey, return_reason(sn)), ()
    )


def stake_returns(state: ChainState, height: int) -> list[Transaction]:
    """The stake returns block `height` on `state` must carry right after its coinbase."""
    return [stake_return_tx(sn) for sn in nodes_leaving(state, height)]

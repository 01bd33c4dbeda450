"""ChainState: the unspent outputs, the service-node registry and the recent quorums at one tip.

Built on persistent HAMT maps (immutables.Map): a block makes a new state that shares all
untouched entries with its parent, so a new state costs O(changes x log n), and any state a
caller still holds stays valid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

import immutables
import msgspec

from snode.core.types import Amount, Hash32, Height, Ppm, PubKey, Timestamp

NO_HEIGHT: Final = -1
"""Height fields use -1 for 'never'."""


class UtxoEntry(msgspec.Struct, frozen=True, array_like=True):
    """An unspent output."""

    owner: PubKey
    amount: Amount
    unlock_height: Height
    """First height at which it may be spent."""


class Contribution(msgspec.Struct, frozen=True, array_like=True):
    """One contributor of a service node (the operator is the first)."""

    owner: PubKey
    amount: Amount
    """Atomic units contributed so far."""
    reserved: Amount
    """Atomic units reserved for this contributor by the registration (0: none)."""


class ServiceNode(msgspec.Struct, frozen=True, array_like=True):
    """A registered service node as the chain sees it."""

    pubkey: PubKey
    fee_ppm: Ppm
    """Operator fee in ppm; tools show `fee_ppm / 10000` percent."""
    registration_height: Height
    staking_requirement: Amount
    contributors: tuple[Contribution, ...]
    funded_height: int
    """Height at which total contributions reached the requirement, or -1."""
    active: bool
    active_since: int
    """Height of the last activation or recommission, or -1."""
    decommission_count: int
    last_reward_height: Height
    """Height of the last block that paid it (registration height before the first)."""
    last_state_change_height: Height
    """Height of the last registration, contribution or quorum state change."""
    last_state_change_reason: int
    """The `service_nodes.Reason` of the last quorum state change (0: none yet)."""
    last_decommission_reason: int
    """The `service_nodes.Reason` of the last decommission (0: never decommissioned)."""

    @property
    def operator(self) -> bytes:
        """The operator's public key (the first contributor)."""
        return self.contributors[0].owner

    @property
    def total_contributed(self) -> int:
        """Sum of contributions so far."""
        return sum(c.amount for c in self.contributors)

    @property
    def total_reserved_unfilled(self) -> int:
        """Atomic units reserved for contributors who have not paid yet."""
        return sum(max(c.reserved - c.amount, 0) for c in self.contributors)

    @property
    def funded(self) -> bool:
        """True when contributions reach the staking requirement."""
        return self.total_contributed >= self.staking_requirement


class Quorum(msgspec.Struct, frozen=True, array_like=True):
    """The obligations quorum of one height."""

    height: Height
    members: tuple[PubKey, ...]
    needed: int
    """Votes needed for a state change."""


K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class ChainState:
    """Everything consensus needs to validate the next block."""

    height: Height
    tip_hash: Hash32
    timestamp: Timestamp
    """Timestamp of the tip block."""
    issued: Amount
    """Coins created by genesis and block rewards so far."""
    utxos: immutables.Map[bytes, UtxoEntry] = field(default_factory=immutables.Map)
    """Unspent outputs by `transactions.outpoint_key`."""
    service_nodes: immutables.Map[bytes, ServiceNode] = field(default_factory=immutables.Map)
    """Registered service nodes by public key."""
    quorums: immutables.Map[int, Quorum] = field(default_factory=immutables.Map)
    """Obligations quorums of the most recent heights."""

    def total_unspent(self) -> int:
        """Sum of all unspent outputs."""
        return sum(u.amount for u in self.utxos.values())

    def total_staked(self) -> int:
        """Sum of all contributions to service nodes."""
        return sum(sn.total_contributed for sn in self.service_nodes.values())


MAP_NAMES: Final = ("utxos", "service_nodes", "quorums")


class Undo(msgspec.Struct, frozen=True, array_like=True):
    """What undoing one block needs: the parent's scalars and the old value of every key the
    block touched (None where the key did not exist)."""

    height: Height
    """Height of the block this undoes."""
    prev_tip_hash: Hash32
    prev_timestamp: Timestamp
    prev_issued: Amount
    utxos: tuple[tuple[bytes, UtxoEntry | None], ...]
    service_nodes: tuple[tuple[bytes, ServiceNode | None], ...]
    quorums: tuple[tuple[int, Quorum | None], ...]


_MISSING: Any = object()


class TrackedMap(Generic[K, V]):
    """A mutation of a persistent map that remembers the first old value of each key it sets."""

    __slots__ = ("_mutation", "old")

    def __init__(self, base: immutables.Map[K, V]) -> None:
        self._mutation = base.mutate()
        self.old: dict[K, V | None] = {}

    def get(self, key: K) -> V | None:
        """The current value, or None."""
        return self._mutation.get(key)

    def set(self, key: K, value: V) -> None:
        """Set key, remembering its value before this block."""
        if key not in self.old:
            self.old[key] = self._mutation.get(key)
        self._mutation[key] = value

    def delete(self, key: K) -> None:
        """Delete key, remembering its value before this block."""
        if key not in self.old:
            self.old[key] = self._mutation.get(key)
        del self._mutation[key]

    def finish(self) -> immutables.Map[K, V]:
        """The new persistent map."""
        return self._mutation.finish()

    def changes(self) -> tuple[tuple[K, V | None], ...]:
        """(key, old value) for every key touched, in a deterministic order."""
        return tuple(sorted(self.old.items(), key=lambda kv: kv[0]))  # type: ignore[arg-type,return-value]


def undo_block(state: ChainState, undo: Undo) -> ChainState:
    """The parent state of `state`, given the undo record of its tip block."""
    if undo.height != state.height:
        raise ValueError(f"undo record is for height {undo.height}, state is at {state.height}")
    maps = {}
    for name in MAP_NAMES:
        mutation = getattr(state, name).mutate()
        for key, old in getattr(undo, name):
            if old is None:
                mutation.pop(key, None)
            else:
                mutation[key] = old
        maps[name] = mutation.finish()
    return ChainState(
        height=state.height - 1, tip_hash=undo.prev_tip_hash, timestamp=undo.prev_timestamp,
        issued=undo.prev_issued, **maps,
    )

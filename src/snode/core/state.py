"""ChainState: the unspent outputs, the service-node registry and the recent quorums at one tip.

Built on persistent maps (HAMTs, immutables.Map; the outputs a packed `core.utxo_set.UtxoSet`
with a HAMT of recent changes): a block makes a new state that shares all
untouched entries with its parent, so a new state costs O(changes x log n), and any state a
caller still holds stays valid.

A state also carries a RegistryIndex (the sorted active keys and the reward queue) derived from
its registry, so that each block finds its reward winner and draws its quorum without scanning
or sorting every node. It is neither stored nor compared: a state loaded from disk or made by
hand has none, and the first block applied on it builds one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Generic, TypeVar

import immutables
import msgspec

from snode.core.reward_queue import RewardEntry as RewardEntry  # re-exported with the index
from snode.core.reward_queue import RewardQueue, sorted_edited
from snode.core.types import Amount, Hash32, Height, Ppm, PubKey, Timestamp
from snode.core.utxo_base import UtxoEntry as UtxoEntry  # re-exported: the state's record types
from snode.core.utxo_base import new_utxo as new_utxo
from snode.core.utxo_base import shared_owner as shared_owner
from snode.core.utxo_set import TrackedUtxos as TrackedUtxos
from snode.core.utxo_set import UtxoSet

NO_HEIGHT: Final = -1
"""Height fields use -1 for 'never'."""


class Contribution(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One contributor of a service node (the operator is the first)."""

    owner: PubKey
    amount: Amount
    """Atomic units contributed so far."""
    reserved: Amount
    """Atomic units reserved for this contributor by the registration (0: none)."""


class ServiceNode(msgspec.Struct, frozen=True, array_like=True, gc=False):
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
    credit: int = 0
    """Blocks of downtime credit the node had at `credit_height` (`core.credit`)."""
    credit_height: Height = 0
    """Height from which `credit` grows (active) or runs down (funded, not active)."""
    requested_unlock_height: Height = 0
    """Height until which a node whose contributor asked to unlock keeps working (0: none)."""
    leaves_at: Height = 0
    """Height of the block that removes the node and returns its stakes: the block after its
    unlock height, or after its pool fill window while unfilled (0: none scheduled)."""

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


class Quorum(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The obligations quorum of one height."""

    height: Height
    members: tuple[PubKey, ...]
    needed: int
    """Votes needed for a state change."""


class CheckpointSlot(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A checkpoint height of the chain: its block, the quorum that signs it, and whether a
    block has carried its checkpoint (`core.finality`)."""

    height: Height
    block_hash: Hash32
    members: tuple[PubKey, ...]
    needed: int
    """Votes that make the checkpoint."""
    carried: bool
    """A later block on this chain carries the checkpoint: the block is checkpointed."""


LeaveEntry = tuple[Height, PubKey]
"""A node's place in the exit schedule: (leaves_at, pubkey)."""

_Sorted = TypeVar("_Sorted", PubKey, LeaveEntry)


def reward_order_key(sn: ServiceNode) -> RewardEntry:
    """Round robin: least recently paid first, then earliest registered, then by key."""
    return (sn.last_reward_height, sn.registration_height, sn.pubkey)


@dataclass(frozen=True, slots=True)
class RegistryIndex:
    """What each block reads of the registry, kept sorted so that no block has to sort it."""

    registry: immutables.Map[bytes, ServiceNode] = field(compare=False, repr=False)
    """The registry it was derived from. A state uses its index only while it holds this very
    map (an identity check), so a state whose registry was swapped never reads a stale index."""
    active_keys: tuple[PubKey, ...]
    """Public keys of the active nodes, sorted: the pool from which quorums and validators are
    drawn."""
    reward_queue: RewardQueue
    """`reward_order_key` of every active node, sorted: the next winner is the first entry
    whose node is past its payable grace period. Persistent: a block's usual edit (its winner
    from the front to the back) costs O(1) (`core.reward_queue`)."""
    leaving: tuple[LeaveEntry, ...] = ()
    """(leaves_at, pubkey) of every node with an exit scheduled, sorted: a block finds the
    nodes it removes at the front."""


def build_index(registry: immutables.Map[bytes, ServiceNode]) -> RegistryIndex:
    """The index of a registry, from scratch: O(n log n)."""
    active = [sn for sn in registry.values() if sn.active]
    return RegistryIndex(
        registry=registry,
        active_keys=tuple(sorted(sn.pubkey for sn in active)),
        reward_queue=RewardQueue(reward_order_key(sn) for sn in active),
        leaving=tuple(sorted((sn.leaves_at, sn.pubkey) for sn in registry.values() if sn.leaves_at)),
    )


def updated_index(
    index: RegistryIndex, registry: immutables.Map[bytes, ServiceNode],
    before: Mapping[bytes, ServiceNode | None],
) -> RegistryIndex:
    """The index of `registry`, given `index` of a registry that differs from it only in the
    keys of `before` (their old records; None where a key did not exist).

    The reward queue's usual edit of a block (its winner from the front to the back) appends to
    the queue's shared list (`core.reward_queue`); any other edit rebuilds the sorted queue, and
    places are found by bisection.
    """
    keys_out: list[PubKey] = []
    keys_in: list[PubKey] = []
    entries_out: list[RewardEntry] = []
    entries_in: list[RewardEntry] = []
    leave_out: list[LeaveEntry] = []
    leave_in: list[LeaveEntry] = []
    for key, old in before.items():
        new = registry.get(key)
        old_leave = old.leaves_at if old is not None else 0
        new_leave = new.leaves_at if new is not None else 0
        if old_leave != new_leave:
            if old_leave:
                leave_out.append((old_leave, key))
            if new_leave:
                leave_in.append((new_leave, key))
        old_entry = reward_order_key(old) if old is not None and old.active else None
        new_entry = reward_order_key(new) if new is not None and new.active else None
        if old_entry == new_entry:
            continue
        if old_entry is None:
            keys_in.append(key)
        else:
            entries_out.append(old_entry)
        if new_entry is None:
            keys_out.append(key)
        else:
            entries_in.append(new_entry)
    return RegistryIndex(
        registry=registry,
        active_keys=_edited(index.active_keys, keys_out, keys_in),
        reward_queue=index.reward_queue.edited(entries_out, entries_in),
        leaving=_edited(index.leaving, leave_out, leave_in),
    )


def _edited(
    items: tuple[_Sorted, ...], remove: list[_Sorted], add: list[_Sorted]
) -> tuple[_Sorted, ...]:
    """Sorted `items` without `remove` (each must be there) and with `add`."""
    if not remove and not add:
        return items
    return tuple(sorted_edited(items, remove, add))


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
    utxos: UtxoSet = field(default_factory=UtxoSet)
    """Unspent outputs by `transactions.outpoint_key` (mostly packed: `core.utxo_set`)."""
    service_nodes: immutables.Map[bytes, ServiceNode] = field(default_factory=immutables.Map)
    """Registered service nodes by public key."""
    quorums: immutables.Map[int, Quorum] = field(default_factory=immutables.Map)
    """Obligations quorums of the most recent heights."""
    checkpoints: immutables.Map[int, CheckpointSlot] = field(default_factory=immutables.Map)
    """Recent checkpoint heights (waiting to be carried), and the two highest carried ones."""
    index: RegistryIndex | None = field(default=None, compare=False, repr=False)
    """Derived from service_nodes, never stored; None until built (`with_index`). Read it
    through `current_index` or `registry_index`."""
    summed: Any = field(default=None, compare=False, repr=False)
    """The checksum of the maps (`core.state_root.StateSum`), kept with the state from the
    first block that needs it on; None until then. Read it through `state_root.current_checksum`,
    which uses it only while the state holds the very maps it was made of."""

    def total_unspent(self) -> int:
        """Sum of all unspent outputs."""
        return sum(u.amount for u in self.utxos.values())

    def total_staked(self) -> int:
        """Sum of all contributions to service nodes."""
        return sum(sn.total_contributed for sn in self.service_nodes.values())


def current_index(state: ChainState) -> RegistryIndex | None:
    """The index state carries, if it was derived from state's registry; else None."""
    index = state.index
    return index if index is not None and index.registry is state.service_nodes else None


def registry_index(state: ChainState) -> RegistryIndex:
    """The index of state's registry: its own, or one built from scratch."""
    return current_index(state) or build_index(state.service_nodes)


def with_index(state: ChainState) -> ChainState:
    """`state` with the index of its registry (`state` itself when it has it)."""
    index = registry_index(state)
    return state if index is state.index else replace(state, index=index)


MAP_NAMES: Final = ("utxos", "service_nodes", "quorums", "checkpoints")


class Undo(msgspec.Struct, frozen=True, array_like=True, gc=False):
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
    checkpoints: tuple[tuple[int, CheckpointSlot | None], ...] = ()
    round_validators: tuple[PubKey, ...] = ()
    """The validators of the round that made a service-node block (the block's signer bitset
    names them by position); kept with the block so that tools can show who signed."""


_MISSING: Any = object()


class TrackedMap(Generic[K, V]):
    """A mutation of a persistent map that remembers the first old value of each key it sets."""

    __slots__ = ("_mutation", "old")

    def __init__(self, base: immutables.Map[K, V] | UtxoSet) -> None:
        self._mutation: Any = base.mutate()
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
        """Delete key, remembering its value before this block. KeyError if it has none."""
        old = self._mutation.pop(key)
        if key not in self.old:
            self.old[key] = old

    def finish(self) -> Any:
        """The new persistent map (of the base's kind)."""
        return self._mutation.finish()

    def changes(self) -> tuple[tuple[K, V | None], ...]:
        """(key, old value) for every key touched, in a deterministic order."""
        # Keys are unique, so sorting the pairs orders them by key alone and never compares
        # two values (no key function to call per item).
        return tuple(sorted(self.old.items()))


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
    index = current_index(state)
    if index is not None:
        restored = {key: state.service_nodes.get(key) for key, _ in undo.service_nodes}
        index = updated_index(index, maps["service_nodes"], restored)
    return ChainState(
        height=state.height - 1, tip_hash=undo.prev_tip_hash, timestamp=undo.prev_timestamp,
        issued=undo.prev_issued, index=index, **maps,
    )


def last_checkpoint(state: ChainState) -> int:
    """The highest checkpoint height a block of this chain carries (0 for none)."""
    return max((h for h, slot in state.checkpoints.items() if slot.carried), default=0)


def immutable_height(state: ChainState) -> int:
    """The highest final height: a block with two carried checkpoints at or above it (the
    second-highest carried checkpoint height; 0 before two exist)."""
    carried = sorted((h for h, slot in state.checkpoints.items() if slot.carried), reverse=True)
    return carried[1] if len(carried) >= 2 else 0

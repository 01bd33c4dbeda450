"""The state root: one hash of everything consensus reads, updated from each block's changes.

A lattice hash (LtHash16, as Solana's accounts hash): each entry of the state (an unspent
output, a service node, a quorum, a checkpoint slot) is expanded by SHAKE256 into 1,024 lanes of
16 bits, and the state's checksum is the lane-wise sum, modulo 2^16, of its entries. Adding or
removing an entry costs the same whatever the state's size, so a block's update costs its
changes: for each key it touched, remove the old entry and add the new one (`Undo` holds the old
values; the new state the new ones). The root hashes the checksum with the chain's scalars.

Why not a Merkle tree: a tree costs about twenty hashes and stored inner nodes per change, and
its one gain, proofs of membership, serves light clients we do not have. Why not MuHash: a
multiplication modulo a 3,072-bit prime per entry (38 us here against LtHash16's 13-17) and an
inverse at the end. The security rests on the entries being unique (adding one entry 2^16 times
would cancel it): each is keyed by its table and its key, and a state holds a key once.

Lanes are kept as two Python integers, the even lanes and the odd ones, each lane in a 32-bit
slot: a sum of lanes carries into the gap above it, and one mask clears every carry at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Final

from snode.core.encoding import domain_hash, encode
from snode.core.state import MAP_NAMES, ChainState, Undo, undo_block
from snode.core.types import Hash32

LANES: Final = 1024
CHECKSUM_BYTES: Final = LANES * 2
ENTRY_DOMAIN: Final = b"snode/state-entry/1"
ROOT_DOMAIN: Final = b"snode/state-root/1"
TABLE_TAGS: Final = {name: bytes([i + 1]) for i, name in enumerate(MAP_NAMES)}
"""The byte that names each table in an entry's hash: a key of one table is never another's."""

_EVEN: Final = int.from_bytes(b"\xff\xff\x00\x00" * (LANES // 2), "little")
"""The bits of the even lanes of a 2,048-byte checksum read as one little-endian integer."""
_BORROW: Final = int.from_bytes(b"\x00\x00\x01\x00" * (LANES // 2), "little")
"""2^16 in every 32-bit slot: one above any lane, so subtracting a lane from it never borrows
across slots."""


@dataclass(frozen=True, slots=True)
class Checksum:
    """The lane-wise sum of a state's entries: even and odd lanes, each in a 32-bit slot."""

    even: int = 0
    odd: int = 0

    def to_bytes(self) -> bytes:
        """The 2,048 bytes of the checksum (lane i at bytes 2i and 2i+1, little-endian)."""
        return (self.even | (self.odd << 16)).to_bytes(CHECKSUM_BYTES, "little")

    @classmethod
    def from_bytes(cls, data: bytes) -> Checksum:
        """The checksum `to_bytes` gave; ValueError for another length."""
        if len(data) != CHECKSUM_BYTES:
            raise ValueError(f"a state checksum is {CHECKSUM_BYTES} bytes, not {len(data)}")
        whole = int.from_bytes(data, "little")
        return cls(whole & _EVEN, (whole >> 16) & _EVEN)


EMPTY: Final = Checksum()


def _key_bytes(key: Any) -> bytes:
    """A table's key as bytes: outputs and nodes are keyed by bytes, quorums and checkpoints by
    height."""
    return key if isinstance(key, bytes) else int(key).to_bytes(8, "big", signed=True)


def entry_lanes(table: str, key: Any, value: Any) -> tuple[int, int]:
    """(even, odd) lanes of one entry: SHAKE256 of its table, key and canonical value."""
    key_bytes = _key_bytes(key)
    data = b"".join((ENTRY_DOMAIN, TABLE_TAGS[table], len(key_bytes).to_bytes(2, "big"), key_bytes, encode(value)))
    whole = int.from_bytes(hashlib.shake_256(data).digest(CHECKSUM_BYTES), "little")
    return whole & _EVEN, (whole >> 16) & _EVEN


_CHUNK: Final = 1 << 14
"""Entries summed between two masks: a 32-bit slot holds a lane and up to 2^16 - 1 more, so a
chunk's sum (and its removals' borrow) never carries into the next slot."""


def with_entries(checksum: Checksum, added: Iterable[tuple[str, Any, Any]],
                 removed: Iterable[tuple[str, Any, Any]] = ()) -> Checksum:
    """`checksum` with each (table, key, value) of `added` added and of `removed` taken out.
    The lanes of a chunk of entries are summed unmasked and folded in with one mask."""
    even, odd = checksum.even, checksum.odd
    for sign, items in ((1, added), (-1, removed)):
        sum_even = sum_odd = count = 0
        for table, key, value in items:
            e, o = entry_lanes(table, key, value)
            sum_even += e
            sum_odd += o
            count += 1
            if count == _CHUNK:
                even, odd = _fold(even, odd, sum_even, sum_odd, count, sign)
                sum_even = sum_odd = count = 0
        if count:
            even, odd = _fold(even, odd, sum_even, sum_odd, count, sign)
    return Checksum(even, odd)


def _fold(even: int, odd: int, sum_even: int, sum_odd: int, count: int, sign: int) -> tuple[int, int]:
    """(even, odd) with the summed lanes of `count` entries added (sign 1) or taken out (-1):
    `count` borrows of 2^16 in every slot keep each slot of the difference from going below 0."""
    if sign > 0:
        return (even + sum_even) & _EVEN, (odd + sum_odd) & _EVEN
    borrow = _BORROW * count
    return (even + borrow - sum_even) & _EVEN, (odd + borrow - sum_odd) & _EVEN


def entries(state: ChainState) -> Iterator[tuple[str, Any, Any]]:
    """Every entry of the state's tables, as (table, key, value)."""
    for name in MAP_NAMES:
        for key, value in getattr(state, name).items():
            yield name, key, value


def state_checksum(state: ChainState) -> Checksum:
    """The checksum of a whole state, from scratch: O(entries), about 15 us each."""
    return with_entries(EMPTY, entries(state))


def _changes(state: ChainState, undo: Undo) -> tuple[list[tuple[str, Any, Any]], list[tuple[str, Any, Any]]]:
    """(entries the block added, entries it removed): the new and old value of each key it
    touched, where there is one (a replaced entry is both removed and added)."""
    added, removed = [], []
    for name in MAP_NAMES:
        table = getattr(state, name)
        for key, old in getattr(undo, name):
            new = table.get(key)
            if old == new:
                continue
            if old is not None:
                removed.append((name, key, old))
            if new is not None:
                added.append((name, key, new))
    return added, removed


def after_block(parent: Checksum, state: ChainState, undo: Undo) -> Checksum:
    """The checksum of `state`, the state a block made, from its parent's checksum and the
    block's undo record: O(keys the block touched)."""
    added, removed = _changes(state, undo)
    return with_entries(parent, added, removed)


def before_block(checksum: Checksum, state: ChainState, undo: Undo) -> Checksum:
    """The parent's checksum, from the checksum of `state` (the state the block made) and the
    block's undo record: what a reorganisation takes back."""
    added, removed = _changes(state, undo)
    return with_entries(checksum, removed, added)


def caught_up(checksum: Checksum, old: ChainState, new: ChainState, undos: Iterable[Undo]) -> Checksum:
    """The checksum of `new` from `checksum`, that of `old`, an ancestor of it, and the undo
    records of the blocks between them (any order): each key one of them touched is taken out
    at its value in `old` and put back at its value in `new`. O(keys touched), whatever the size
    of the state: what a checksum summed off the event loop needs to reach the tip."""
    touched = {(name, key) for undo in undos for name in MAP_NAMES for key, _ in getattr(undo, name)}
    added, removed = [], []
    for name, key in touched:
        before, after = getattr(old, name).get(key), getattr(new, name).get(key)
        if before == after:
            continue
        if before is not None:
            removed.append((name, key, before))
        if after is not None:
            added.append((name, key, after))
    return with_entries(checksum, added, removed)


def state_root(network_id: int, state: ChainState, checksum: Checksum) -> Hash32:
    """The root of `state` whose entries' checksum is `checksum`: BLAKE2b-256 of the domain,
    the network, the height, timestamp and coins issued, and the checksum. The tip's own hash
    is left out: a header cannot commit to itself, and it commits to its parent already."""
    scalars = b"".join(v.to_bytes(8, "big", signed=True) for v in (state.height, state.timestamp, state.issued))
    return domain_hash(ROOT_DOMAIN, network_id, scalars + checksum.to_bytes())


# --- the checksum a state carries, and the root a header commits to ---------------------------

@dataclass(frozen=True, slots=True)
class StateSum:
    """A state's checksum and the maps it sums (`ChainState.summed`): it holds for a state only
    while that state holds these very maps (an identity check, as `state.current_index`), so a
    state whose maps were swapped never reads a stale checksum."""

    maps: tuple[object, ...]
    checksum: Checksum


def _maps(state: ChainState) -> tuple[object, ...]:
    return tuple(getattr(state, name) for name in MAP_NAMES)


def current_checksum(state: ChainState) -> Checksum | None:
    """The checksum `state` carries, if it was made of the state's own maps; else None."""
    summed = state.summed
    if summed is None or any(a is not b for a, b in zip(summed.maps, _maps(state))):
        return None
    return summed.checksum  # a StateSum


def checksum_of(state: ChainState) -> Checksum:
    """The checksum of `state`: the one it carries, or one computed from scratch (O(entries))."""
    checksum = current_checksum(state)
    return checksum if checksum is not None else state_checksum(state)


def with_checksum(state: ChainState, checksum: Checksum) -> ChainState:
    """`state` carrying `checksum` (which must be its maps' checksum)."""
    return replace(state, summed=StateSum(_maps(state), checksum))


def keep_in(state: ChainState, checksum: Checksum) -> None:
    """Give `state` itself `checksum` (its maps' checksum), keeping its identity: `summed` is a
    cache outside the state's value (compare=False), and the node's batches are staged and stored
    on its tip *object*, so a checksum that comes later (summed off the loop) must not replace it."""
    object.__setattr__(state, "summed", StateSum(_maps(state), checksum))


def undo_summed(state: ChainState, undo: Undo) -> ChainState:
    """`state.undo_block`, keeping the checksum when `state` carries one (a reorganisation
    costs the keys it undoes, not a recomputation at the next block)."""
    checksum = current_checksum(state)
    parent = undo_block(state, undo)
    if checksum is None:
        return parent
    return with_checksum(parent, before_block(checksum, state, undo))


def own_entries(state: ChainState) -> list[tuple[str, Any, Any]]:
    """The entries of `state` that its tip block's own hash chose: the obligations quorum and
    the checkpoint slot of its height. A header cannot commit to them (they depend on its
    hash); they are a function of that hash and of the registry the root does commit to, and
    the next block's root covers them."""
    height = state.height
    own = []
    for table in ("quorums", "checkpoints"):
        value = getattr(state, table).get(height)
        if value is not None:
            own.append((table, height, value))
    return own


def after_block_with_root(network_id: int, parent: Checksum, state: ChainState, undo: Undo) -> tuple[Checksum, Hash32]:
    """`after_block` and `header_root` of the state a block made, summing each changed entry
    once: the root's checksum first (the block's changes but its own entries), then those."""
    added, removed = _changes(state, undo)
    own = own_entries(state)
    rooted = with_entries(parent, [entry for entry in added if entry not in own], removed)
    return with_entries(rooted, own), state_root(network_id, state, rooted)


def header_root(network_id: int, state: ChainState, checksum: Checksum) -> Hash32:
    """The root the header of `state`'s tip block carries (fork v2 on): `state_root` of the
    state without `own_entries`, from `checksum`, the checksum of the whole state."""
    return state_root(network_id, state, with_entries(checksum, (), own_entries(state)))


def tip_root(network_id: int, state: ChainState) -> str:
    """The root of `state` as its tip's header carries it (hex), from the checksum the state
    carries; empty for a state without one (before fork v2)."""
    checksum = current_checksum(state)
    return header_root(network_id, state, checksum).hex() if checksum is not None else ""

"""What the node needs of a store, and the records it hands over.

Two stores follow it: `ChainStore` (SQLite, a daemon's data dir) and `MemoryStore` (the same
behaviour in memory: unit tests, and a simulation that runs thousands of nodes in one process).
A property test drives both with the same random sequences of blocks, reorganisations and
restarts and checks that they agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from snode.core.blocks import Block
from snode.core.state import ChainState, Undo
from snode.core.transactions import Transaction


class Encoded(NamedTuple):
    """A block's canonical bytes and its transaction ids, in block order (what
    `transition.apply_block_encoded` computed, so that the store encodes and hashes nothing
    again)."""

    data: bytes
    txids: Sequence[bytes]


class Commit(NamedTuple):
    """One block to append: the block, the state after it and its undo record, as
    `transition.apply_block` returns them.

    The store writes only the state after the last block of a call, so the others may carry
    None instead of theirs (a syncing node does not keep 1,000 intermediate states alive until
    their batch is stored)."""

    block: Block
    state: ChainState | None
    undo: Undo
    encoded: Encoded | None = None


class Undone(NamedTuple):
    """One block to take off the tip: the state of its parent and its undo record
    (`state.undo_block`)."""

    parent_state: ChainState
    undo: Undo


class PendingWrite(Protocol):
    """A write whose rows are written but not yet durable (`Store.write`)."""

    def commit(self) -> None:
        """Make it durable and current."""
        ...

    def rollback(self) -> None:
        """Forget it."""
        ...


class Store(Protocol):
    """A chain on some medium: blocks, undo records, the transaction index, the state at the
    tip (possibly behind it after a sync's deferred writes and a crash), peers, node records.

    One caller at a time: the node calls from one thread (a daemon's store thread)."""

    def tip(self) -> tuple[int, bytes]:
        """(height, block hash) of the stored tip."""
        ...

    def state_height(self) -> int:
        """Height of the stored state (the tip's, unless state writes were deferred)."""
        ...

    def load_state(self) -> ChainState:
        """The stored state (at `state_height()`)."""
        ...

    def flush_state(self, state: ChainState) -> None:
        """Write what deferred commits left in memory; `state` is the state at the tip."""
        ...

    def write_replayed_state(
        self, state: ChainState, replayed: Sequence[tuple[Undo, Sequence[bytes]]]
    ) -> None:
        """Bring the stored state up to the tip after a crash left it behind."""
        ...

    def write(
        self, undone: Sequence[Undone], commits: Sequence[Commit], *, defer_state: bool = False,
    ) -> PendingWrite:
        """Undo blocks off the tip, append others, as one pending write."""
        ...

    def commit_blocks(self, batch: Sequence[Commit], *, defer_state: bool = False) -> None:
        """Append blocks in one durable write."""
        ...

    def reorganize(
        self, undone: Sequence[Undone], commits: Sequence[Commit], *, defer_state: bool = False,
    ) -> None:
        """Undo and append in one durable write."""
        ...

    def block_hash_at(self, height: int) -> bytes | None:
        """Hash of the main-chain block at `height`, None above the tip."""
        ...

    def main_chain_height(self, hash_: bytes) -> int | None:
        """Height of a main-chain block, None if unknown or not on the main chain."""
        ...

    def get_block_bytes(self, height: int) -> bytes | None:
        """Canonical bytes of the main-chain block at `height`."""
        ...

    def get_block_by_height(self, height: int) -> Block | None:
        """The main-chain block at `height`."""
        ...

    def get_block(self, hash_: bytes) -> Block | None:
        """Any stored block by hash."""
        ...

    def get_undo(self, hash_: bytes) -> Undo:
        """The undo record of a stored block (StoreError for genesis or an unknown block)."""
        ...

    def get_transaction(self, tx_id: bytes) -> tuple[int, Transaction] | None:
        """(height, transaction) of a main-chain transaction."""
        ...

    def save_peers(self, addresses: Sequence[str]) -> None:
        """Replace the saved peer addresses."""
        ...

    def load_peers(self) -> list[str]:
        """The saved peer addresses."""
        ...

    def get_meta(self, key: str) -> bytes | None:
        """A value the node stored."""
        ...

    def set_meta(self, key: str, value: bytes) -> None:
        """Store a value for the node."""
        ...

    def close(self) -> None:
        """Release the medium."""
        ...

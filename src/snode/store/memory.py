"""MemoryStore: the store's behaviour (`store.protocol.Store`) without a disk.

For unit tests and for the simulation that runs thousands of nodes in one process. It follows
`ChainStore` rule for rule: the same refusals (a block that does not extend the tip, an undo that
is not the tip's, a batch whose last block has no state), the same two-step writes, the same
deferred state: blocks committed with `defer_state` leave the stored state behind until a flush,
and `reopen()` (a restart after a crash) loses what was deferred, so the node applies the stored
blocks again exactly as it does after a crash with SQLite. A property test
(tests/unit/test_store_agreement.py) checks that the two agree.

Blocks and undo records are kept as the records they are, not as bytes: a simulated node pays
no encoding for what it stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from snode.core.blocks import Block, block_hash
from snode.core.encoding import encode
from snode.core.state import ChainState, Undo
from snode.core.transactions import Transaction, txid
from snode.store.errors import StoreError
from snode.store.protocol import Commit, Undone


@dataclass
class _Medium:
    """What survives a restart: the 'disk'."""

    blocks: dict[bytes, tuple[Block, Undo | None]]
    main_chain: list[bytes]
    """Block hash per height."""
    txs: dict[bytes, tuple[int, int]]
    """(height, position) per transaction id on the main chain."""
    state: ChainState
    """The stored state (behind the tip while state writes are deferred)."""
    peers: list[str] = field(default_factory=list)
    meta: dict[str, bytes] = field(default_factory=dict)


class MemoryWrite:
    """A write computed but not applied yet (`MemoryStore.write`)."""

    def __init__(self, store: MemoryStore, apply: _Apply) -> None:
        self._store = store
        self._apply: _Apply | None = apply

    def commit(self) -> None:
        """Apply the write."""
        if self._apply is None:
            raise ValueError("this write was already committed or rolled back")
        apply, self._apply = self._apply, None
        self._store._commit(apply)

    def rollback(self) -> None:
        """Forget the write."""
        if self._apply is None:
            raise ValueError("this write was already committed or rolled back")
        self._apply = None


@dataclass
class _Apply:
    undone_heights: list[int]
    commits: list[tuple[bytes, Commit]]
    final_state: ChainState
    defer: bool


class MemoryStore:
    """A chain in memory with `ChainStore`'s behaviour."""

    def __init__(self, genesis_block: Block, genesis_state: ChainState) -> None:
        genesis_hash = block_hash(genesis_block.header)
        if genesis_state.height != 0 or genesis_state.tip_hash != genesis_hash:
            raise ValueError("genesis_state is not the state after genesis_block")
        self._disk = _Medium(
            blocks={genesis_hash: (genesis_block, None)}, main_chain=[genesis_hash],
            txs={txid(tx): (0, i) for i, tx in enumerate(genesis_block.transactions)},
            state=genesis_state,
        )
        self._deferred_to: ChainState | None = None
        """Set while state writes are deferred: marks that the stored state is behind."""

    def reopen(self) -> MemoryStore:
        """The store as a restart finds it (after a crash: deferred state is lost)."""
        other = MemoryStore.__new__(MemoryStore)
        other._disk = self._disk
        other._deferred_to = None
        return other

    def close(self) -> None:
        """Nothing to release (the node flushes deferred state before it closes)."""

    # --- the chain ----------------------------------------------------------------------------

    def tip(self) -> tuple[int, bytes]:
        """(height, block hash) of the stored tip."""
        chain = self._disk.main_chain
        return len(chain) - 1, chain[-1]

    def state_height(self) -> int:
        """Height of the stored state."""
        return self._disk.state.height

    def load_state(self) -> ChainState:
        """The stored state; refused while state writes are deferred (as ChainStore)."""
        if self._deferred_to is not None:
            raise ValueError("the state of the last blocks is deferred; flush_state first")
        return self._disk.state

    def flush_state(self, state: ChainState) -> None:
        """Store `state` (the tip's) if state writes were deferred."""
        if self._deferred_to is None:
            return
        if (state.height, state.tip_hash) != self.tip():
            raise ValueError(f"flush_state got the state at height {state.height}, not the tip's")
        self._disk.state = state
        self._deferred_to = None

    def write_replayed_state(
        self, state: ChainState, replayed: Sequence[tuple[Undo, Sequence[bytes]]]
    ) -> None:
        """Store the state at the tip after a restart applied the blocks after the stored state."""
        if (state.height, state.tip_hash) != self.tip() or self._deferred_to is not None:
            raise ValueError("write_replayed_state takes the state at the stored tip")
        self._disk.state = state

    def commit_block(self, block: Block, new_state: ChainState, undo: Undo) -> None:
        """Append one block."""
        self.write([], [Commit(block, new_state, undo)]).commit()

    def commit_blocks(self, batch: Sequence[Commit], *, defer_state: bool = False) -> None:
        """Append blocks in one write."""
        self.write([], batch, defer_state=defer_state).commit()

    def reorganize(
        self, undone: Sequence[Undone], commits: Sequence[Commit], *, defer_state: bool = False,
    ) -> None:
        """Undo and append in one write."""
        self.write(undone, commits, defer_state=defer_state).commit()

    def write(
        self, undone: Sequence[Undone], commits: Sequence[Commit], *, defer_state: bool = False,
    ) -> MemoryWrite:
        """Check a write as ChainStore does; apply it at `commit()`."""
        if not undone and not commits:
            raise ValueError("nothing to write")
        height, tip_hash = self.tip()
        undone_heights = []
        for parent_state, undo in undone:
            self._check_undoes_tip(height, parent_state, undo)
            undone_heights.append(height)
            height, tip_hash = height - 1, parent_state.tip_hash
        hashed = []
        for commit in commits:
            header = commit.block.header
            this_hash = block_hash(header)
            if header.height != height + 1 or header.prev_hash != tip_hash:
                raise ValueError(f"block {header.height} ({this_hash.hex()[:16]}) does not extend "
                                 f"the stored tip at height {height}")
            if ((commit.state is not None and commit.state.tip_hash != this_hash)
                    or commit.undo.height != header.height):
                raise ValueError(f"the state or undo record given with block {header.height} is not its own")
            hashed.append((this_hash, commit))
            height, tip_hash = header.height, this_hash
        final_state = commits[-1].state if commits else undone[-1].parent_state
        if final_state is None:
            raise ValueError("the last block given has no state after it")
        return MemoryWrite(self, _Apply(undone_heights, hashed, final_state, defer_state and not undone))

    def _check_undoes_tip(self, height: int, parent_state: ChainState, undo: Undo) -> None:
        if height == 0:
            raise ValueError("the genesis block cannot be undone")
        if undo.height != height:
            raise ValueError(f"undo record is for height {undo.height}; the tip is at {height}")
        if parent_state.height != height - 1 or parent_state.tip_hash != self._disk.main_chain[height - 1]:
            raise ValueError(f"parent_state is not the state of block {height}'s parent")

    def _commit(self, apply: _Apply) -> None:
        disk = self._disk
        for height in apply.undone_heights:
            block, _ = disk.blocks[disk.main_chain.pop()]
            for tx in block.transactions:
                found = disk.txs.get(txid(tx))
                if found is not None and found[0] == height:
                    del disk.txs[txid(tx)]
        for this_hash, commit in apply.commits:
            disk.blocks[this_hash] = (commit.block, commit.undo)
            disk.main_chain.append(this_hash)
            ids = commit.encoded.txids if commit.encoded is not None else [txid(tx) for tx in commit.block.transactions]
            for position, tx_id in enumerate(ids):
                disk.txs[tx_id] = (commit.block.header.height, position)
        if apply.defer:
            self._deferred_to = apply.final_state
        else:
            disk.state = apply.final_state
            self._deferred_to = None

    # --- lookups ------------------------------------------------------------------------------

    def block_hash_at(self, height: int) -> bytes | None:
        """Hash of the main-chain block at `height`, None above the tip."""
        chain = self._disk.main_chain
        return chain[height] if 0 <= height < len(chain) else None

    def main_chain_height(self, hash_: bytes) -> int | None:
        """Height of a main-chain block, None if unknown or undone."""
        found = self._disk.blocks.get(hash_)
        if found is None:
            return None
        height = found[0].header.height
        return height if self.block_hash_at(height) == hash_ else None

    def get_block_bytes(self, height: int) -> bytes | None:
        """Canonical bytes of the main-chain block at `height`."""
        block = self.get_block_by_height(height)
        return encode(block) if block is not None else None

    def get_block_by_height(self, height: int) -> Block | None:
        """The main-chain block at `height`, None above the tip."""
        hash_ = self.block_hash_at(height)
        return self._disk.blocks[hash_][0] if hash_ is not None else None

    def get_block(self, hash_: bytes) -> Block | None:
        """Any stored block by hash."""
        found = self._disk.blocks.get(hash_)
        return found[0] if found is not None else None

    def get_undo(self, hash_: bytes) -> Undo:
        """The undo record of a stored block; StoreError for genesis or an unknown block."""
        found = self._disk.blocks.get(hash_)
        if found is None or found[1] is None:
            raise StoreError(f"no undo record is stored for block {hash_.hex()[:16]}")
        return found[1]

    def get_transaction(self, tx_id: bytes) -> tuple[int, Transaction] | None:
        """(height, transaction) of a main-chain transaction."""
        found = self._disk.txs.get(tx_id)
        if found is None:
            return None
        block = self.get_block_by_height(found[0])
        assert block is not None
        return found[0], block.transactions[found[1]]

    # --- the node's own records ---------------------------------------------------------------

    def save_peers(self, addresses: Sequence[str]) -> None:
        """Replace the saved peer addresses."""
        self._disk.peers = list(addresses)

    def load_peers(self) -> list[str]:
        """The saved peer addresses."""
        return list(self._disk.peers)

    def get_meta(self, key: str) -> bytes | None:
        """A value the node stored."""
        return self._disk.meta.get(key)

    def set_meta(self, key: str, value: bytes) -> None:
        """Store a value for the node."""
        self._disk.meta[key] = value

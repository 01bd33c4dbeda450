"""ChainStore: the node's chain on disk, in one SQLite database.

Each block is committed in one SQL transaction (a batch of blocks in one, during sync) holding the
block, its undo record, its transaction index entries and the state rows it changed, so a crash
at any moment leaves exactly the state of the last committed block, and a restart reads that
state back without replaying the chain.

Threading rule: one caller at a time. The node calls from its event-loop thread or from a single
executor thread (the connection is opened with check_same_thread=False for that case), never from
two threads at once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from snode.core.blocks import Block, block_hash
from snode.core.encoding import decode_trusted, encode
from snode.core.errors import DecodeError
from snode.core.state import MAP_NAMES, ChainState, Undo
from snode.core.transactions import Transaction, txid
from snode.core.utxo_set import DEFAULT_UTXO_LIMITS, UtxoLimits
from snode.store import rows, schema, state_tables
from snode.store.errors import StoreError, damaged, read_error, write_error
from snode.store.protocol import Commit, Undone

DATABASE_FILE: Final = "chain.sqlite3"
HISTORY_START_KEY: Final = "history_start"
"""The `node_meta` row of the height a store started from a snapshot holds blocks from."""
BACKFILLED_KEY: Final = "backfilled"
"""The `node_meta` row of the height up to which a store started from a snapshot holds every
block from genesis (`store_backfill`; absent: 0)."""
HISTORY_VERIFIED_KEY: Final = "history_verified"
"""The `node_meta` row of the snapshot height whose history the replay from genesis verified
(`services.history_check`; absent: none)."""


class PendingWrite:
    """A write whose rows are in an open SQL transaction (`ChainStore.write`)."""

    def __init__(self, store: ChainStore, plan: rows.WritePlan) -> None:
        self._store = store
        self._plan: rows.WritePlan | None = plan

    def commit(self) -> None:
        """Make the write durable; StoreError if the database refuses (nothing is written)."""
        plan, self._plan = self._take()
        store = self._store
        try:
            store._conn.execute("COMMIT")
        except sqlite3.Error as err:
            rows.rollback(store._conn)
            raise write_error(store._path, err) from err
        store._finish_write(plan)

    def rollback(self) -> None:
        """Forget the write: the store is as it was before `write`."""
        _, self._plan = self._take()
        rows.rollback(self._store._conn)

    def _take(self) -> tuple[rows.WritePlan, None]:
        if self._plan is None:
            raise ValueError("this write was already committed or rolled back")
        return self._plan, None


class ChainStore:
    """Blocks, undo records, the transaction index and the state at the tip of one chain.

    The state tables normally hold the state at the tip. A syncing node may commit blocks with
    `defer_state` (Bitcoin Core's dbcache, in short): their blocks are durable at once, their
    state rows and transaction index rows are written later, all at once, by a commit without
    it or by `flush_state`. Between sync commits most pages of the state tables are rewritten
    whatever the number of blocks, so this divides their writes by the number of batches
    deferred. After a crash the stored state is behind the stored tip (`state_height`), and the
    node applies the blocks after it again (`Node.replay_stored_blocks`).
    """

    def __init__(
        self, conn: sqlite3.Connection, path: Path, tip: tuple[int, bytes], state_height: int,
        utxo_limits: UtxoLimits = DEFAULT_UTXO_LIMITS,
    ) -> None:
        """Wrap an open, checked connection; use `ChainStore.open`."""
        self._conn = conn
        self._utxo_limits = utxo_limits
        self._path = path
        self._tip = tip
        self._state_height = state_height
        self._deferred: rows.Deferred | None = None

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    def limit_growth(self, pages: int) -> None:
        """Let the database grow by at most `pages` pages from its size now (SQLite's
        `max_page_count`, for this connection): a write past it is refused as on a full disk
        (SQLITE_FULL), which a test can make happen without privileges (`SNODE_DB_GROWTH_PAGES`)."""
        (count,) = self._conn.execute("PRAGMA page_count").fetchone()
        self._conn.execute(f"PRAGMA max_page_count = {int(count) + int(pages)}")

    @classmethod
    def open(
        cls, path: Path, *, genesis_block: Block, genesis_state: ChainState,
        utxo_limits: UtxoLimits = DEFAULT_UTXO_LIMITS,
    ) -> ChainStore:
        """Open the database file `path` (usually `data_dir / DATABASE_FILE`), creating it with
        the genesis block and state on first use. A loaded state's outputs fold at `utxo_limits`
        (the node's: the defaults; a test passes small ones).

        StoreError when the file belongs to another genesis, has an unsupported schema version,
        is not an snode database or is in use by another process; such a file is not written.
        DatabaseDamaged when SQLite finds it damaged, or its tip record is not one of ours.
        """
        genesis_hash = block_hash(genesis_block.header)
        if genesis_state.height != 0 or genesis_state.tip_hash != genesis_hash:
            raise ValueError("genesis_state is not the state after genesis_block")
        stored = schema.stored_genesis(path)
        if stored is not None and stored != genesis_hash:
            raise StoreError(
                f"data dir belongs to a different network/genesis: its database {path} starts "
                f"with block {stored.hex()[:16]}, this node's genesis is "
                f"{genesis_hash.hex()[:16]}; use the matching genesis document or a new data dir"
            )
        conn = schema.connect(path)
        try:
            if stored is None:
                rows.create(conn, path, genesis_block, genesis_state)
            else:
                schema.migrate(conn)
            if missing := schema.missing_tables(conn):
                raise damaged(path, f"its table{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                                    f"{'are' if len(missing) > 1 else 'is'} gone")
            state_tip = state_tables.read_tip(conn)
            last = conn.execute("SELECT height, hash FROM main_chain ORDER BY height DESC LIMIT 1").fetchone()
            if last is None:
                raise damaged(path, "its chain's rows are gone")
            height, tip_hash = last
            if conn.execute("SELECT 1 FROM blocks WHERE hash = ?", (tip_hash,)).fetchone() is None:
                raise damaged(path, f"the tip block {bytes(tip_hash).hex()[:16]} at height {height} is gone")
            if height < state_tip.height or (height == state_tip.height and tip_hash != state_tip.tip_hash):
                raise StoreError(
                    f"database {path} is inconsistent: its state is at height {state_tip.height} "
                    f"but its chain ends at {height}; start with a new data dir"
                )
        except sqlite3.DatabaseError as err:
            conn.close()
            raise read_error(path, err) from err
        except DecodeError as err:  # a tip record SQLite reads back, but not one we wrote
            conn.close()
            raise damaged(path, err.reason) from None
        except BaseException:
            conn.close()
            raise
        return cls(conn, path, (height, tip_hash), state_tip.height, utxo_limits)

    def close(self) -> None:
        """Close the database (SQLite checkpoints the WAL into the main file)."""
        self._conn.close()

    def __enter__(self) -> ChainStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- the chain ----------------------------------------------------------------------------

    def tip(self) -> tuple[int, bytes]:
        """(height, block hash) of the stored tip."""
        return self._tip

    def state_height(self) -> int:
        """Height of the state in the state tables: the tip's, unless blocks were committed with
        `defer_state` since (or were, before a crash)."""
        return self._state_height

    def load_state(self) -> ChainState:
        """The state stored in the state tables (no block is read): the state at the tip when
        `state_height() == tip()[0]`. Refused while committed state is deferred in memory.
        DatabaseDamaged when SQLite finds a state table damaged; DecodeError for a row that
        SQLite reads but that is no record of ours."""
        if self._deferred is not None:
            raise ValueError("the state of the last blocks is deferred; flush_state first")
        try:
            return state_tables.read_state(self._conn, self._utxo_limits)
        except sqlite3.DatabaseError as err:
            raise read_error(self._path, err) from err

    def flush_state(self, state: ChainState) -> None:
        """Write the state and transaction index rows that commits with `defer_state` left in
        memory; `state` is the state at the stored tip. Nothing to do when nothing is deferred."""
        deferred = self._deferred
        if deferred is None:
            return
        if (state.height, state.tip_hash) != self._tip:
            raise ValueError(f"flush_state got the state at height {state.height}, not the tip's")
        with rows.transaction(self._conn, self._path):
            rows.insert_txs(self._conn, deferred.txs)
            state_tables.write_state(self._conn, state, deferred.touched, deferred.absent)
        self._deferred = None
        self._state_height = state.height

    def write_replayed_state(
        self, state: ChainState, replayed: Sequence[tuple[Undo, Sequence[bytes]]]
    ) -> None:
        """Bring the state tables up to the stored tip after a crash left them behind
        (`state_height() < tip()[0]`): `replayed` holds, for each block after the stored state,
        lowest first, the undo record and transaction ids that applying it again gave; `state`
        is the state after them."""
        if (state.height, state.tip_hash) != self._tip or self._deferred is not None:
            raise ValueError("write_replayed_state takes the state at the stored tip")
        undos = [undo for undo, _ in replayed]
        txs = [(tx_id, undo.height, position)
               for undo, ids in replayed for position, tx_id in enumerate(ids)]
        with rows.transaction(self._conn, self._path):
            rows.insert_txs(self._conn, txs)
            state_tables.write_state(self._conn, state, *state_tables.changed_keys(undos))
        self._state_height = state.height

    def adopt_snapshot(self, block: Block, state: ChainState,
                       given_rows: Callable[[], Iterable[tuple[str, Any, bytes]]] | None = None) -> None:
        """Make `state`, loaded from a checked snapshot (`core.snapshot`), the stored state, and
        `block`, whose state it is, the tip, in one transaction: a store holding genesis only.
        The blocks between are not stored (`history_start` says where the history starts); the
        next block is applied on this one like any other. `given_rows`: the state's rows as the
        snapshot's chunks hold them ((table, key, the record's canonical encoding), in (table,
        key) order: `core.snapshot.stored_rows`), written as they come instead of each key of
        `state` looked up, listed, sorted and encoded again (a million outputs: a set of their
        keys alone is about 100 MB)."""
        if self._tip[0] != 0 or self._deferred is not None:
            raise ValueError("a snapshot is loaded into a store holding genesis only")
        block_row, main_row, tx_rows = rows.block_rows(block, state.tip_hash, None)
        with rows.transaction(self._conn, self._path):
            for name in MAP_NAMES:
                self._conn.execute(f"DELETE FROM {name}")
            rows.insert_blocks(self._conn, [block_row], [main_row])
            rows.insert_txs(self._conn, tx_rows)
            if given_rows is None:
                keys = state_tables.all_keys(state)
                state_tables.write_state(self._conn, state, keys, keys)
            else:
                state_tables.write_rows(self._conn, given_rows())
                state_tables.write_scalars(self._conn, state)
            self._conn.execute("INSERT OR REPLACE INTO node_meta (key, value) VALUES (?, ?)",
                               (HISTORY_START_KEY, encode(state.height)))
        self._tip = (state.height, state.tip_hash)
        self._state_height = state.height

    def history_start(self) -> int:
        """The lowest height above genesis whose block this store holds: 1, or the height of the
        snapshot it was started from (the blocks below it were never downloaded)."""
        value = self.get_meta(HISTORY_START_KEY)
        return decode_trusted(value, int) if value is not None else 1

    def backfilled(self) -> int:
        """The height up to which this store holds every block from genesis below its
        `history_start` (the backfill's progress; 0: none yet)."""
        value = self.get_meta(BACKFILLED_KEY)
        return decode_trusted(value, int) if value is not None else 0

    def history_verified(self) -> bool:
        """Whether the replay of the history below `history_start` reached its snapshot's state
        root (`services.history_check`; kept: a node checks its history once)."""
        value = self.get_meta(HISTORY_VERIFIED_KEY)
        return value is not None and decode_trusted(value, int) == self.history_start()

    def store_history_verified(self) -> None:
        """Keep that the history below `history_start` is verified."""
        self.set_meta(HISTORY_VERIFIED_KEY, encode(self.history_start()))

    def store_backfill(self, blocks: Sequence[Block]) -> int:
        """Store `blocks` (consecutive, checked against the trusted point's hash chain by the
        caller: `services.backfill`) below `history_start`, in one transaction with the new
        backfilled height: their block, main-chain and transaction index rows, no state and no
        undo record (the state below a snapshot is never rebuilt into the live state). Blocks at
        or below the backfilled height, or at or above `history_start`, are skipped (never stored
        twice); the first one kept must follow the backfilled block. Returns the new height."""
        done, start = self.backfilled(), self.history_start()
        fresh = [b for b in blocks if done < b.header.height < start]
        if not fresh:
            return done
        parent = self.block_hash_at(done)
        rows_: list[tuple[rows.BlockRow, rows.MainChainRow, list[rows.TxRow]]] = []
        for block in fresh:
            if block.header.height != done + 1 + len(rows_) or block.header.prev_hash != parent:
                raise ValueError(f"backfilled block {block.header.height} does not follow block {done + len(rows_)}")
            parent = block_hash(block.header)
            rows_.append(rows.block_rows(block, parent, None))
        with rows.transaction(self._conn, self._path):
            rows.insert_blocks(self._conn, [r[0] for r in rows_], [r[1] for r in rows_])
            rows.insert_txs(self._conn, [tx for r in rows_ for tx in r[2]])
            self._conn.execute("INSERT OR REPLACE INTO node_meta (key, value) VALUES (?, ?)",
                               (BACKFILLED_KEY, encode(done + len(rows_))))
        return done + len(rows_)

    def commit_block(self, block: Block, new_state: ChainState, undo: Undo) -> None:
        """Append one block to the main chain, in one transaction."""
        self.write([], [Commit(block, new_state, undo)]).commit()

    def commit_blocks(self, batch: Sequence[Commit], *, defer_state: bool = False) -> None:
        """Append blocks to the main chain, lowest first, in one transaction (sync commits a
        batch per transaction: a crash loses at most the batch, which is downloaded again).

        `defer_state`: write the blocks only, and keep what their state rows and transaction
        index rows need in memory (see the class); a commit without it writes all that is
        deferred, with its own.
        """
        self.write([], batch, defer_state=defer_state).commit()

    def undo_tip(self, parent_state: ChainState, undo: Undo) -> None:
        """Take the tip block off the main chain, in one transaction. The block and its undo
        record stay stored, so the block can be committed again."""
        self.write([Undone(parent_state, undo)], []).commit()

    def reorganize(
        self, undone: Sequence[Undone], commits: Sequence[Commit], *, defer_state: bool = False,
    ) -> None:
        """Undo blocks off the tip (tip first), then append `commits` (lowest first), in one
        transaction, so that a crash never leaves the chain between two branches."""
        self.write(undone, commits, defer_state=defer_state).commit()

    def write(
        self, undone: Sequence[Undone], commits: Sequence[Commit], *, defer_state: bool = False,
    ) -> PendingWrite:
        """Write the rows of undoing `undone` (tip first) and appending `commits` (lowest
        first) inside one open SQL transaction, and return it: `commit()` makes it durable,
        `rollback()` forgets it. Nothing else may use the store until one of them is called.

        Two steps, so that a caller can do other work while the rows are written and decide
        afterwards: the node waits for a sync batch's signature checks between them.

        Each state row the blocks touched is written once, with its value in the final state.
        ValueError when an undo is not the tip's, a parent state not its parent's, or a block
        does not extend the tip at that point (a caller's bug); nothing is written then.
        `defer_state`: as for `commit_blocks` (a write that undoes blocks never defers).
        """
        plan = self._plan(undone, commits, defer_state)
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            # Stale rows go first: a transaction in both branches is indexed at its new height.
            conn.executemany("DELETE FROM main_chain WHERE height = ?", plan.stale_heights)
            conn.executemany("DELETE FROM txs WHERE txid = ? AND height = ?", plan.stale_txs)
            rows.insert_blocks(conn, plan.blocks, plan.main_chain)
            if not plan.defer:
                rows.insert_txs(conn, plan.txs)
                state_tables.write_state(conn, plan.final_state, plan.touched, plan.absent)
        except sqlite3.Error as err:
            rows.rollback(conn)
            raise write_error(self._path, err) from err
        except BaseException:
            rows.rollback(conn)
            raise
        return PendingWrite(self, plan)

    def _plan(self, undone: Sequence[Undone], commits: Sequence[Commit], defer_state: bool) -> rows.WritePlan:
        """The rows of a write, checked against the stored tip (`write`)."""
        if not undone and not commits:
            raise ValueError("nothing to write")
        height, tip_hash = self._tip
        stale_heights: list[tuple[int]] = []
        stale_txs: list[tuple[bytes, int]] = []
        for parent_state, undo in undone:
            tip_block = self._check_undoes_tip(height, tip_hash, parent_state, undo)
            stale_heights.append((height,))
            stale_txs.extend((txid(tx), height) for tx in tip_block.transactions)
            height, tip_hash = height - 1, parent_state.tip_hash
        final_state = commits[-1].state if commits else undone[-1].parent_state
        if final_state is None:
            raise ValueError("the last block given has no state after it")
        blocks, main_chain, txs = [], [], []
        for commit in commits:
            this_hash = block_hash(commit.block.header)
            rows.check_extends(height, tip_hash, commit.block, this_hash, commit.state, commit.undo)
            block_row, main_row, tx_rows = rows.block_rows(commit.block, this_hash, commit.undo, commit.encoded)
            blocks.append(block_row)
            main_chain.append(main_row)
            txs.extend(tx_rows)
            height, tip_hash = commit.block.header.height, this_hash
        undos = [u.undo for u in undone] + [c.undo for c in commits]
        touched, absent_keys = state_tables.changed_keys(undos)
        # Keys that did not exist at the stored tip (their first old value is None) and do not
        # exist at the end have no row to delete: outputs made and spent within one batch.
        # Only without undone blocks: an undone block's old values are not the stored ones.
        absent = absent_keys if not undone else None
        defer = defer_state and not undone
        deferred = self._deferred
        if deferred is not None and not defer:
            # Everything deferred is written now, with this call's rows.
            if absent is not None:
                absent = rows.absent_after(deferred, absent)
            touched = {name: deferred.touched[name] | keys for name, keys in touched.items()}
            undone_heights = {h for (h,) in stale_heights}
            txs = [row for row in deferred.txs if row[1] not in undone_heights] + txs
        return rows.WritePlan((height, tip_hash), final_state, stale_heights, stale_txs, blocks,
                     main_chain, txs, touched, absent, defer)

    def _finish_write(self, plan: rows.WritePlan) -> None:
        """After a commit: the new tip, and what is deferred now."""
        self._tip = plan.tip
        deferred = self._deferred
        if plan.defer:
            assert plan.absent is not None
            if deferred is None:
                self._deferred = rows.Deferred(plan.touched, plan.absent, plan.txs)
            else:  # grown in place: no copy of what is already deferred per batch
                new_absent = rows.absent_after(deferred, plan.absent)
                for name, keys in plan.touched.items():
                    deferred.touched[name] |= keys
                deferred.absent = new_absent
                deferred.txs.extend(plan.txs)
        else:
            self._deferred = None
            self._state_height = plan.tip[0]

    def _check_undoes_tip(
        self, height: int, tip_hash: bytes, parent_state: ChainState, undo: Undo
    ) -> Block:
        """The stored block at (height, tip_hash), after checking that undo and parent_state
        are its own."""
        if height == 0:
            raise ValueError("the genesis block cannot be undone")
        if undo.height != height:
            raise ValueError(f"undo record is for height {undo.height}; the tip is at {height}")
        parent_hash = self.block_hash_at(height - 1)
        if parent_state.height != height - 1 or parent_state.tip_hash != parent_hash:
            raise ValueError(f"parent_state is not the state of block {height}'s parent")
        tip_block = self.get_block(tip_hash)
        assert tip_block is not None, "every main-chain block is stored"
        return tip_block

    # --- lookups ------------------------------------------------------------------------------

    def check(self) -> None:
        """SQLite's quick_check of the whole file (`schema.quick_check`); DatabaseDamaged names
        what it found. For a start after an unclean stop: a bad page is found before the node
        serves, not at the first read of it."""
        try:
            problem = schema.quick_check(self._conn)
        except sqlite3.Error as err:
            raise read_error(self._path, err) from err
        if problem is not None:
            raise damaged(self._path, f"quick_check after an unclean stop: {problem}")

    def _read(self, sql: str, args: tuple[Any, ...] = (), *, every: bool = False) -> Any:
        """The first row of a query (None if it has none), or `every` row. A read the database
        refuses is a StoreError: DatabaseDamaged when SQLite finds the file damaged (a lookup
        may reach pages no start-up read)."""
        try:
            with schema.query(self._conn, sql, args) as cursor:
                return cursor.fetchall() if every else cursor.fetchone()
        except sqlite3.DatabaseError as err:
            raise read_error(self._path, err) from err

    def block_hash_at(self, height: int) -> bytes | None:
        """Hash of the main-chain block at `height`, or None above the tip."""
        row = self._read("SELECT hash FROM main_chain WHERE height = ?", (height,))
        return row[0] if row else None

    def main_chain_height(self, hash_: bytes) -> int | None:
        """Height of a block on the main chain, or None (unknown or undone by a reorg)."""
        # Two primary-key lookups: blocks knows every block's height, main_chain says which
        # block is on the main chain at that height.
        row = self._read(
            "SELECT b.height FROM blocks b JOIN main_chain m ON m.height = b.height AND m.hash = b.hash"
            " WHERE b.hash = ?", (hash_,),
        )
        return row[0] if row else None

    def get_block_bytes(self, height: int) -> bytes | None:
        """Canonical bytes of the main-chain block at `height` (to serve peers without
        decoding), or None above the tip."""
        row = self._read(
            "SELECT b.data FROM main_chain m JOIN blocks b ON b.hash = m.hash WHERE m.height = ?", (height,)
        )
        return row[0] if row else None

    def get_block_by_height(self, height: int) -> Block | None:
        """The main-chain block at `height`, or None above the tip."""
        data = self.get_block_bytes(height)
        return decode_trusted(data, Block) if data is not None else None

    def get_block(self, hash_: bytes) -> Block | None:
        """Any stored block by hash (on the main chain or undone by a reorg), or None."""
        row = self._read("SELECT data FROM blocks WHERE hash = ?", (hash_,))
        return decode_trusted(row[0], Block) if row else None

    def get_undo(self, hash_: bytes) -> Undo:
        """The undo record of a stored block; StoreError for genesis or an unknown block."""
        row = self._read("SELECT undo FROM blocks WHERE hash = ?", (hash_,))
        if row is None or row[0] is None:
            raise StoreError(f"no undo record is stored for block {hash_.hex()[:16]}")
        return decode_trusted(row[0], Undo)

    def get_transaction(self, tx_id: bytes) -> tuple[int, Transaction] | None:
        """(height, transaction) of a main-chain transaction, or None."""
        # A deferred row is looked for by a scan: such lookups are rare (an RPC call during a
        # sync), and an index beside the rows would grow the syncing node's memory.
        deferred = next((row for row in self._deferred.txs if row[0] == tx_id), None) if self._deferred else None
        if deferred is not None:
            block = self.get_block_by_height(deferred[1])
            assert block is not None
            return deferred[1], block.transactions[deferred[2]]
        row = self._read(
            "SELECT t.height, t.position, b.data FROM txs t"
            " JOIN main_chain m ON m.height = t.height JOIN blocks b ON b.hash = m.hash"
            " WHERE t.txid = ?", (tx_id,),
        )
        if row is None:
            return None
        height, position, data = row
        return height, decode_trusted(data, Block).transactions[position]

    # --- the node's own records ---------------------------------------------------------------

    def save_peers(self, addresses: Sequence[str]) -> None:
        """Replace the saved peer addresses (kept in this order)."""
        with rows.transaction(self._conn, self._path):
            self._conn.execute("DELETE FROM peers")
            self._conn.executemany(
                "INSERT INTO peers (address) VALUES (?)", [(a,) for a in addresses]
            )

    def load_peers(self) -> list[str]:
        """The saved peer addresses, in the order they were saved."""
        return [address for (address,) in self._read("SELECT address FROM peers ORDER BY position", every=True)]

    def get_meta(self, key: str) -> bytes | None:
        """The node's value stored under `key`, or None."""
        row = self._read("SELECT value FROM node_meta WHERE key = ?", (key,))
        return row[0] if row else None

    def set_meta(self, key: str, value: bytes) -> None:
        """Store a value for the node under `key` (durably, in its own transaction)."""
        with rows.transaction(self._conn, self._path):
            self._conn.execute(
                "INSERT OR REPLACE INTO node_meta (key, value) VALUES (?, ?)", (key, value)
            )

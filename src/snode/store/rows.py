"""The rows of the blocks, main_chain and txs tables, the plan of a write, and the SQL
transaction helper.

Kept apart from `ChainStore` so that the store reads as its rules (what a write checks, what is
deferred), with the row shapes and inserts here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from snode.core.blocks import Block
from snode.core.encoding import encode
from snode.core.state import ChainState, Undo
from snode.core.transactions import txid
from snode.store import schema, state_tables
from snode.store.errors import write_error
from snode.store.protocol import Encoded

BlockRow = tuple[bytes, int, bytes, bytes | None]
"""(hash, height, data, undo) of the blocks table."""
MainChainRow = tuple[int, bytes]
TxRow = tuple[bytes, int, int]
"""(txid, height, position) of the txs table."""


@dataclass
class Deferred:
    """What blocks committed with `defer_state` left unwritten: the state keys they touched,
    those of them that have no row (made after the stored state), and their transaction index
    rows."""

    touched: state_tables.Touched
    absent: state_tables.Touched
    txs: list[TxRow]


@dataclass
class WritePlan:
    """The rows of one write and what the store knows after it (`ChainStore.write`)."""

    tip: tuple[int, bytes]
    final_state: ChainState
    stale_heights: list[tuple[int]]
    stale_txs: list[tuple[bytes, int]]
    blocks: list[BlockRow]
    main_chain: list[MainChainRow]
    txs: list[TxRow]
    touched: state_tables.Touched
    absent: state_tables.Touched | None
    defer: bool


def absent_after(deferred: Deferred, absent: state_tables.Touched) -> state_tables.Touched:
    """Keys without a row after the deferred blocks and then blocks whose own `absent_before`
    is `absent`: those the deferred blocks made, and those these blocks made that the deferred
    ones did not touch (a key the deferred blocks touched first has a row exactly when it had
    one at the stored state)."""
    return {name: deferred.absent[name] | (keys - deferred.touched[name]) for name, keys in absent.items()}


@contextmanager
def transaction(conn: sqlite3.Connection, path: Path) -> Iterator[None]:
    """One SQL transaction, committed whole or rolled back whole; a write the database refuses
    (disk full, I/O error) becomes a StoreError (DatabaseDamaged for a damaged file)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("COMMIT")
    except sqlite3.Error as err:
        rollback(conn)
        raise write_error(path, err) from err
    except BaseException:
        rollback(conn)
        raise


def rollback(conn: sqlite3.Connection) -> None:
    # A failed COMMIT may already have rolled back.
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def create(conn: sqlite3.Connection, path: Path, block: Block, state: ChainState) -> None:
    """Tables, genesis block and genesis state, in one transaction."""
    block_row, main_row, tx_rows = block_rows(block, state.tip_hash, None)
    with transaction(conn, path):
        schema.create_tables(conn)
        insert_blocks(conn, [block_row], [main_row])
        insert_txs(conn, tx_rows)
        state_tables.write_state(conn, state, state_tables.all_keys(state))


def check_extends(
    height: int, tip_hash: bytes, block: Block, this_hash: bytes, new_state: ChainState | None,
    undo: Undo,
) -> None:
    header = block.header
    if header.height != height + 1 or header.prev_hash != tip_hash:
        raise ValueError(
            f"block {header.height} ({this_hash.hex()[:16]}) does not extend the stored tip at "
            f"height {height}"
        )
    if (new_state is not None and new_state.tip_hash != this_hash) or undo.height != header.height:
        raise ValueError(
            f"the state or undo record given with block {header.height} is not its own"
        )


def block_rows(
    block: Block, this_hash: bytes, undo: Undo | None, encoded: Encoded | None = None,
) -> tuple[BlockRow, MainChainRow, list[TxRow]]:
    """The rows of the blocks, main_chain and txs tables for one block (`encoded`: its bytes
    and transaction ids, when the caller has them)."""
    height = block.header.height
    ids: Sequence[bytes]
    if encoded is None:
        data, ids = encode(block), [txid(tx) for tx in block.transactions]
    else:
        data, ids = encoded
        if len(ids) != len(block.transactions):
            raise ValueError(f"block {height} is given {len(ids)} transaction ids")
    block_row = (this_hash, height, data, encode(undo) if undo is not None else None)
    tx_rows = [(tx_id, height, position) for position, tx_id in enumerate(ids)]
    return block_row, (height, this_hash), tx_rows


def insert_blocks(
    conn: sqlite3.Connection, blocks: list[BlockRow], main_chain: list[MainChainRow]
) -> None:
    # REPLACE: a block undone by a reorg may come back; its stored row is rewritten.
    conn.executemany(
        "INSERT OR REPLACE INTO blocks (hash, height, data, undo) VALUES (?, ?, ?, ?)", blocks
    )
    conn.executemany("INSERT INTO main_chain (height, hash) VALUES (?, ?)", main_chain)


def insert_txs(conn: sqlite3.Connection, txs: list[TxRow]) -> None:
    # In key order: many rows (a deferred sync's) go into the B-tree fastest that way.
    conn.executemany(
        "INSERT OR REPLACE INTO txs (txid, height, position) VALUES (?, ?, ?)", sorted(txs)
    )

"""The chain state at the tip, kept in tables: one per state map, and the tip's scalars in `meta`.

A block rewrites only the keys its undo record lists (every key it touched), so a commit costs
O(changes) however large the state is; a restart reads each table with one query instead of
replaying the chain.
"""

from __future__ import annotations

import gc
import sqlite3
import struct
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import immutables
import msgspec

from snode.core.encoding import decode_trusted, decoding_trusted, encode
from snode.core.errors import DecodeError
from snode.core.state import (
    MAP_NAMES, ChainState, CheckpointSlot, Quorum, ServiceNode, Undo, UtxoEntry,
)
from snode.core.utxo_set import UtxoSet
from snode.core.types import Amount, Hash32, Height, Timestamp
from snode.store.schema import query

VALUE_TYPES: Final[dict[str, type]] = {
    "service_nodes": ServiceNode, "quorums": Quorum, "checkpoints": CheckpointSlot,
}
"""The record type of each HAMT state map's values (the tables are named after the maps; the
outputs, a packed UtxoSet, are read by `_read_utxos`)."""

_TIP_KEY: Final = "tip"


class TipRecord(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The state's scalars, stored as one `meta` row so a block updates one row for them."""

    height: Height
    tip_hash: Hash32
    timestamp: Timestamp
    issued: Amount


Touched = dict[str, set[Any]]
"""Keys touched per state map name."""


def touched_keys(undos: Iterable[Undo]) -> Touched:
    """Every key the blocks of these undo records touched, per state map."""
    touched: Touched = {name: set() for name in MAP_NAMES}
    for undo in undos:
        for name in MAP_NAMES:
            touched[name].update(key for key, _ in getattr(undo, name))
    return touched


def absent_before(undos: Iterable[Undo]) -> Touched:
    """Keys that did not exist before the first of these blocks (consecutive blocks, lowest
    first): those whose first recorded old value is None."""
    absent: Touched = {name: set() for name in MAP_NAMES}
    for name in MAP_NAMES:
        seen: set[Any] = set()
        keys = absent[name]
        for undo in undos:
            for key, old in getattr(undo, name):
                if key not in seen:
                    seen.add(key)
                    if old is None:
                        keys.add(key)
    return absent


def all_keys(state: ChainState) -> Touched:
    """Every key of every state map (what writing a whole state touches)."""
    return {name: set(getattr(state, name).keys()) for name in MAP_NAMES}


def write_state(
    conn: sqlite3.Connection, state: ChainState, touched: Touched, absent: Touched | None = None
) -> None:
    """Make the tables hold `state`: its value of each touched key (deleted where `state` has
    none) and its scalars. Call inside a transaction. `absent` names keys known to have no row
    (`absent_before`): those that `state` has none of are skipped instead of deleted."""
    for name in MAP_NAMES:
        values = getattr(state, name)
        no_row = absent[name] if absent is not None else ()
        # In key order: SQLite inserts into its B-trees fastest that way (genesis, large batches).
        # Rows are made as SQLite takes them, not listed first (a deferred sync's flush writes
        # tens of thousands).
        keys = sorted(touched[name])
        conn.executemany(
            f"INSERT OR REPLACE INTO {name} (key, value) VALUES (?, ?)",
            ((key, encode(value)) for key in keys if (value := values.get(key)) is not None),
        )
        conn.executemany(
            f"DELETE FROM {name} WHERE key = ?",
            ((key,) for key in keys if key not in no_row and values.get(key) is None),
        )
    tip = TipRecord(state.height, state.tip_hash, state.timestamp, state.issued)
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_TIP_KEY, encode(tip))
    )


def read_tip(conn: sqlite3.Connection) -> TipRecord:
    """The stored state's scalars."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_TIP_KEY,)).fetchone()
    return decode_trusted(row[0], TipRecord)


def read_state(conn: sqlite3.Connection) -> ChainState:
    """The stored state: one query per table, decoded in one pass each."""
    tip = read_tip(conn)
    with _collector_paused():
        utxos = _read_utxos(conn)
        maps = {name: _read_map(conn, name) for name in VALUE_TYPES}
    return ChainState(
        height=tip.height, tip_hash=tip.tip_hash, timestamp=tip.timestamp, issued=tip.issued,
        utxos=utxos, service_nodes=maps["service_nodes"], quorums=maps["quorums"],
        checkpoints=maps["checkpoints"],
    )


def _read_utxos(conn: sqlite3.Connection) -> UtxoSet:
    with query(conn, "SELECT key, value FROM utxos") as rows, decoding_trusted(UtxoEntry) as decode:
        try:
            return UtxoSet.from_rows(rows, decode)
        except (struct.error, TypeError) as err:  # a key that is not bytes (edited by hand)
            raise DecodeError(f"not a valid UtxoEntry row: {err}") from None


def _read_map(conn: sqlite3.Connection, name: str) -> immutables.Map[Any, Any]:
    kind = VALUE_TYPES[name]
    with query(conn, f"SELECT key, value FROM {name}") as rows:
        return immutables.Map((key, decode_trusted(value, kind)) for key, value in rows)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cycle collector: a load makes hundreds of thousands of objects without cycles,
    and the collector would rescan the growing heap many times over (a 40 % slower restart)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

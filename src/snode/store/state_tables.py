"""The chain state at the tip, kept in tables: one per state map, and the tip's scalars in `meta`.

A block rewrites only the keys its undo record lists (every key it touched), so a commit costs
O(changes) however large the state is; a restart reads each table with one query instead of
replaying the chain.
"""

from __future__ import annotations

import gc
import itertools
import sqlite3
import struct
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import Any, Final

import immutables
import msgspec

from snode.core.encoding import decode_trusted, decoding_trusted, encode
from snode.core.errors import DecodeError
from snode.core.state import (
    MAP_NAMES,
    ChainState,
    CheckpointSlot,
    Quorum,
    ServiceNode,
    Undo,
    UtxoEntry,
)
from snode.core.state_root import Checksum, current_checksum, with_checksum
from snode.core.types import Amount, Hash32, Height, Timestamp
from snode.core.utxo_set import DEFAULT_UTXO_LIMITS, UtxoLimits, UtxoSet
from snode.store.schema import query

VALUE_TYPES: Final[dict[str, type]] = {
    "service_nodes": ServiceNode, "quorums": Quorum, "checkpoints": CheckpointSlot,
}
"""The record type of each HAMT state map's values (the tables are named after the maps; the
outputs, a packed UtxoSet, are read by `_read_utxos`)."""

_TIP_KEY: Final = "tip"
_CHECKSUM_KEY: Final = "state_checksum"
"""The `meta` row of the state's checksum (`core.state_root`), from the first block that
needed one: a restart reads it instead of summing every entry again."""


class TipRecord(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The state's scalars, stored as one `meta` row so a block updates one row for them."""

    height: Height
    tip_hash: Hash32
    timestamp: Timestamp
    issued: Amount


class ChecksumRecord(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The state's checksum and the tip it is the checksum at: a row an older snoded left
    behind a later tip (it writes the tables, not this row) names another tip, and is unused."""

    tip_hash: Hash32
    checksum: bytes


Touched = dict[str, set[Any]]
"""Keys touched per state map name."""


def changed_keys(undos: Sequence[Undo]) -> tuple[Touched, Touched]:
    """Every key the blocks of these undo records touched, per state map, and those of them
    that did not exist before the first of the blocks (consecutive blocks, lowest first): those
    whose first recorded old value is None. One pass over the records."""
    touched: Touched = {name: set() for name in MAP_NAMES}
    absent: Touched = {name: set() for name in MAP_NAMES}
    for name in MAP_NAMES:
        seen, keys = touched[name], absent[name]
        add_seen, add_absent = seen.add, keys.add
        for undo in undos:
            for key, old in getattr(undo, name):
                if key not in seen:
                    add_seen(key)
                    if old is None:
                        add_absent(key)
    return touched, absent


def absent_before(undos: Sequence[Undo]) -> Touched:
    """The keys of `changed_keys` that did not exist before the first of these blocks."""
    return changed_keys(undos)[1]


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
        gone: list[tuple[Any]] = []
        conn.executemany(f"INSERT OR REPLACE INTO {name} (key, value) VALUES (?, ?)",
                         _rows(touched[name], values, no_row, gone))
        conn.executemany(f"DELETE FROM {name} WHERE key = ?", gone)
    write_scalars(conn, state)


def write_rows(conn: sqlite3.Connection, rows: Iterable[tuple[str, Any, bytes]]) -> None:
    """Insert (table, key, encoded value) rows, a table's rows together (a snapshot's chunks in
    order: `ChainStore.adopt_snapshot`), as they come. Call inside a transaction."""
    for name, group in itertools.groupby(rows, key=itemgetter(0)):
        if name not in MAP_NAMES:
            raise ValueError(f"no state table {name!r}")
        conn.executemany(f"INSERT OR REPLACE INTO {name} (key, value) VALUES (?, ?)",
                         ((key, value) for _, key, value in group))


def write_scalars(conn: sqlite3.Connection, state: ChainState) -> None:
    """The stored state's tip record and checksum: `state`'s. Call inside a transaction."""
    tip = TipRecord(state.height, state.tip_hash, state.timestamp, state.issued)
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_TIP_KEY, encode(tip))
    )
    checksum = current_checksum(state)
    if checksum is None:
        conn.execute("DELETE FROM meta WHERE key = ?", (_CHECKSUM_KEY,))
    else:
        record = ChecksumRecord(state.tip_hash, checksum.to_bytes())
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_CHECKSUM_KEY, encode(record)))


def _rows(keys: set[Any], values: Any, no_row: Any, gone: list[tuple[Any]]) -> Iterator[tuple[Any, bytes]]:
    """(key, encoded value) of each key that `values` holds, in key order (SQLite inserts into
    its B-trees fastest that way); the others, unless in `no_row`, go to `gone`. Rows are made as
    SQLite takes them, not listed first (a deferred sync's flush writes tens of thousands), and
    each key's value is looked up once."""
    for key in sorted(keys):
        value = values.get(key)
        if value is not None:
            yield key, encode(value)
        elif key not in no_row:
            gone.append((key,))


def read_tip(conn: sqlite3.Connection) -> TipRecord:
    """The stored state's scalars."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_TIP_KEY,)).fetchone()
    if row is None or not isinstance(row[0], bytes):
        raise DecodeError("the state's tip record is gone")
    return decode_trusted(row[0], TipRecord)


def read_state(conn: sqlite3.Connection, utxo_limits: UtxoLimits = DEFAULT_UTXO_LIMITS) -> ChainState:
    """The stored state: one query per table, decoded in one pass each (its outputs a set
    folding at `utxo_limits`)."""
    tip = read_tip(conn)
    with _collector_paused():
        utxos = _read_utxos(conn, utxo_limits)
        maps = {name: _read_map(conn, name) for name in VALUE_TYPES}
    state = ChainState(
        height=tip.height, tip_hash=tip.tip_hash, timestamp=tip.timestamp, issued=tip.issued,
        utxos=utxos, service_nodes=maps["service_nodes"], quorums=maps["quorums"],
        checkpoints=maps["checkpoints"],
    )
    checksum = read_checksum(conn, tip.tip_hash)
    return state if checksum is None else with_checksum(state, checksum)


def read_checksum(conn: sqlite3.Connection, tip_hash: bytes) -> Checksum | None:
    """The stored checksum of the state at `tip_hash`, if one is stored for that tip."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_CHECKSUM_KEY,)).fetchone()
    if row is None:
        return None
    record = decode_trusted(row[0], ChecksumRecord)
    if record.tip_hash != tip_hash:
        return None
    try:
        return Checksum.from_bytes(record.checksum)
    except ValueError as err:
        raise DecodeError(f"not a valid state checksum: {err}") from None


def _read_utxos(conn: sqlite3.Connection, limits: UtxoLimits) -> UtxoSet:
    with query(conn, "SELECT key, value FROM utxos") as rows, decoding_trusted(UtxoEntry) as decode:
        try:
            return UtxoSet.from_rows(rows, decode, limits)
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

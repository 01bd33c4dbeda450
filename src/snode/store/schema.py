"""The database file: its tables, its schema version, and how a connection to it is opened.

The schema version lives in SQLite's `user_version` header field. An existing file is checked
through a read-only connection before anything writes to it, so a database this snode must not
use (another release's, another program's, another network's) is refused and left byte for byte
as it was.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from snode.store.errors import StoreError, damaged, is_damage

log = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 4
"""Bump with every change to the tables below or to what their rows mean. 2: the state tables
may be behind the stored blocks (a sync's deferred state, `ChainStore`), which a version-1 snode
would misread. 3: blocks carry a validator signer bitset and a checkpoint (service-node block
production); older blocks do not decode as such, so older files are refused (they belong to a
network that no longer exists). 4: the first released schema (v0.1.0).

From 4 on, data dirs of released versions are upgraded in place, never refused: a bump adds the
old version to MIGRATES_FROM and its rewrite to `migrate`, and tests/fixtures/datadir-*.tar.gz
(made by each release; tests/functional/test_upgrade.py) must keep opening. A file of a newer
version than this one is refused, untouched: a downgrade cannot know what the newer rows mean."""
MIGRATES_FROM: Final[tuple[int, ...]] = ()

TABLES: Final = (
    # The block and the record that undoes it share a row: one insert per block. Blocks leave
    # this table never, so a block undone by a reorg can be applied again.
    "CREATE TABLE blocks (hash BLOB PRIMARY KEY, height INTEGER NOT NULL, data BLOB NOT NULL,"
    " undo BLOB)",
    "CREATE TABLE main_chain (height INTEGER PRIMARY KEY, hash BLOB NOT NULL)",
    "CREATE TABLE txs (txid BLOB PRIMARY KEY, height INTEGER NOT NULL,"
    " position INTEGER NOT NULL) WITHOUT ROWID",
    # The state at the tip, one table per `state.MAP_NAMES` entry, with the same name.
    "CREATE TABLE utxos (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE service_nodes (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE quorums (key INTEGER PRIMARY KEY, value BLOB NOT NULL)",
    "CREATE TABLE checkpoints (key INTEGER PRIMARY KEY, value BLOB NOT NULL)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL)",
    "CREATE TABLE node_meta (key TEXT PRIMARY KEY, value BLOB NOT NULL)",
    "CREATE TABLE peers (position INTEGER PRIMARY KEY, address TEXT NOT NULL)",
)

PRAGMAS: Final = (
    # Held from the first read until close: a second daemon on the same data dir is refused
    # instead of interleaving its blocks with ours. Set before WAL is entered, so the WAL index
    # lives in our heap rather than in a shared-memory file.
    "PRAGMA locking_mode = EXCLUSIVE",
    "PRAGMA journal_mode = WAL",
    # FULL syncs the WAL on every commit: a committed block survives a power cut, not only a
    # killed process.
    "PRAGMA synchronous = FULL",
    # The state and transaction-index tables take writes at random keys. SQLite's default 2 MB
    # page cache made every sync batch re-read pages and spill dirty ones. 16 MiB halved the
    # CPU of a batch's writes when each batch wrote the state; since a sync writes the state
    # at most every 3,000 blocks (`ChainStore`'s defer_state), 8 MiB syncs as fast with less
    # memory (docs/PERFORMANCE.md, appendix). Only pages actually read count against it.
    "PRAGMA cache_size = -8192",
    # Such a batch writes about 3,000 pages to the WAL. Checkpointing after every batch (the
    # default threshold is 1,000 pages) copies the same pages into the database again and again;
    # at 10,000 a page rewritten by several batches is copied once. The WAL file grows to about
    # 50 MB (reused, not regrown) and a restart after a crash reads it back.
    "PRAGMA wal_autocheckpoint = 10000",
)

_LOCK_WAIT: Final = 1.0
"""Seconds to wait for a lock: with EXCLUSIVE locking another holder keeps it until it stops."""


def stored_genesis(path: Path) -> bytes | None:
    """The genesis block hash of the snode database at `path`, or None when there is none yet.

    Raises StoreError when the file is not an snode database, has a schema version this snode
    does not support, or is held by another process. Opens the file read-only, so a database
    that is refused here has not been written to.
    """
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a database: move it away")
    if not path.exists():
        return None
    if path.stat().st_size == 0:
        log.warning("%s is empty: a new chain starts from genesis in it", path)
        return None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=_LOCK_WAIT)
        try:
            return _read_genesis(conn, path)
        finally:
            conn.close()
    except sqlite3.Error as err:
        raise _open_error(path, err) from None


def _read_genesis(conn: sqlite3.Connection, path: Path) -> bytes | None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if tables == 0:
            return None
        raise StoreError(f"{path} is not an snode database: use a new data dir")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"database {path} has schema version {version}, written by a newer snode; this snode "
            f"reads schema version {SCHEMA_VERSION} and older: run the newer release (a downgrade "
            "cannot read its data dir) or use a new data dir"
        )
    if version != SCHEMA_VERSION and version not in MIGRATES_FROM:
        raise StoreError(
            f"database schema version {version} is not supported by this snode (expects "
            f"{SCHEMA_VERSION}): use a matching snode release or a new data dir"
        )
    row = conn.execute("SELECT hash FROM main_chain WHERE height = 0").fetchone()
    if row is None or not isinstance(row[0], bytes):
        raise damaged(path, "its genesis block's row is gone")
    return row[0]


def missing_tables(conn: sqlite3.Connection) -> list[str]:
    """The tables of TABLES an open database lacks (a file edited by hand, or a tool's mistake)."""
    have = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    wanted = [match[1] for statement in TABLES if (match := re.match(r"CREATE TABLE (\w+)", statement))]
    return [name for name in wanted if name not in have]


def quick_check(conn: sqlite3.Connection) -> str | None:
    """SQLite's `PRAGMA quick_check` of an open database (its WAL recovered): None when it finds
    the file sound, else the first problem it names. It reads every page once (docs/RELIABILITY.md
    for its cost) without checking that indexes match their tables, as `integrity_check` would."""
    try:
        (first,) = conn.execute("PRAGMA quick_check(1)").fetchone()
    except sqlite3.DatabaseError as err:
        if not is_damage(err):
            raise
        return str(err)
    return None if first == "ok" else " ".join(str(first).split())  # its report spans lines; a reason is one


def connect(path: Path) -> sqlite3.Connection:
    """A read-write connection with the store's pragmas, in autocommit mode (the store opens
    its own transactions).

    check_same_thread is off because the node may call from one executor thread rather than the
    thread that opened the store; calls must still come from one thread at a time.
    """
    try:
        conn = sqlite3.connect(
            path, timeout=_LOCK_WAIT, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as err:
        raise _open_error(path, err) from None
    try:
        for pragma in PRAGMAS:
            conn.execute(pragma)
        # The first read takes the exclusive lock, so a busy file is refused here, at open.
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as err:
        conn.close()
        raise _open_error(path, err) from None
    return conn


@contextmanager
def query(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()) -> Iterator[sqlite3.Cursor]:
    """A query's cursor, closed however the block ends. A cursor not read to its end holds its
    SQLite statement and with it a read transaction; one an exception leaves alive (its frame kept
    by the traceback) outlives the connection's close() on Python 3.12 and later, whose close no
    longer resets the statements of live cursors: SQLite then defers the close, and with
    EXCLUSIVE locking the data dir stays locked against the next open."""
    cursor = conn.execute(sql, args)
    try:
        yield cursor
    finally:
        cursor.close()


def migrate(conn: sqlite3.Connection) -> None:
    """Bring a database of an older supported version (checked by `stored_genesis`) to
    SCHEMA_VERSION; nothing to do for one that is already there."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version in MIGRATES_FROM:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def create_tables(conn: sqlite3.Connection) -> None:
    """Create the tables and stamp the schema version; call inside the creating transaction so
    that a crash leaves either no tables or all of them."""
    for statement in TABLES:
        conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _open_error(path: Path, err: sqlite3.Error) -> StoreError:
    text = str(err)
    if "locked" in text or "busy" in text:
        return StoreError(
            f"database {path} is in use by another process (is another snoded running on "
            "this data dir?)"
        )
    if "not a database" in text:
        return StoreError(f"{path} is not an snode database: use a new data dir")
    if is_damage(err):
        return damaged(path, text)
    return StoreError(f"cannot open database {path}: {text}")

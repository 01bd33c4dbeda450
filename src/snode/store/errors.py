"""The store's expected failures: a database this node cannot use, or a write the disk refused;
and how SQLite's errors are told apart (a damaged file, a refused write, anything else)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from snode.core.errors import SnodeError


class StoreError(SnodeError):
    """The data dir's database cannot be opened, read or written; the reason says what to do."""


class DatabaseDamaged(StoreError):
    """The database file is damaged or the disk cannot read it back. Nothing the node does
    makes it usable again, so a daemon stops (`ChainWriter`) rather than go on with holes in
    its chain; the reason says how to recover."""


class WriteRefused(StoreError):
    """A write SQLite refused and rolled back, the file as the last commit left it: a full disk
    (`full`: SQLITE_FULL, also a database at its `max_page_count`), a quota, a file-size limit, a
    lock. The writer says so (`node.disk_watch.DiskWatch`) and the node goes on."""

    def __init__(self, reason: str, *, full: bool) -> None:
        super().__init__(reason)
        self.full = full


RECOVER: Final = ("restore the data dir from a backup, or start with a new data dir (copy the "
                "key file `key` into it, if there is one) and let it sync")
"""What an operator does about a damaged database: the same advice as for a database of an
older snode (docs/OPERATOR.md, Upgrades), with the service-node key kept."""

_DAMAGE: Final = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_FORMAT")
"""Result codes (and their extended forms, which start alike) that say the file is damaged;
SQLite's other errors (a full disk, a lock) leave it as it was."""
_UNREADABLE: Final = ("SQLITE_IOERR_READ", "SQLITE_IOERR_SHORT_READ")
"""I/O errors that say the disk cannot give the file back: damage when met on a read. Every other
I/O error (a failed write: a quota, a file-size limit, a network file system) leaves the file as
the last commit left it, so it is a refused write, not a damaged database."""


def damaged(path: Path, detail: str) -> DatabaseDamaged:
    """The one-line reason for a damaged database file `path` (`detail`: what was found)."""
    return DatabaseDamaged(f"database {path} is damaged ({detail}); {RECOVER}")


def is_damage(err: sqlite3.Error) -> bool:
    """Whether SQLite's error says the file is damaged or unreadable. A DatabaseError without
    a result code (the module's own) counts: it is raised for bytes that are not a database."""
    name = getattr(err, "sqlite_errorname", None)
    if name is None:
        return type(err) is sqlite3.DatabaseError
    return name.startswith(_DAMAGE) or name in _UNREADABLE


def read_error(path: Path, err: sqlite3.Error) -> StoreError:
    """The StoreError for a read the database refused: DatabaseDamaged for a damaged file."""
    if is_damage(err):
        return damaged(path, str(err))
    return StoreError(f"cannot read database {path}: {err}")


def write_error(path: Path, err: sqlite3.Error) -> StoreError:
    """The StoreError for a write the database refused (nothing is written): DatabaseDamaged
    for a damaged file, WriteRefused for a full disk or a lock."""
    if is_damage(err):
        return damaged(path, str(err))
    full = str(getattr(err, "sqlite_errorname", "")).startswith("SQLITE_FULL")
    return WriteRefused(f"cannot write to database {path}: {err}", full=full)

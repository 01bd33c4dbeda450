"""Which of SQLite's errors say the database file is damaged (the daemon stops and the operator is
told to restore or resync) and which are a refused write (the file is as the last commit left it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from snode.store.errors import DatabaseDamaged, StoreError, is_damage, read_error, write_error


def sqlite_error(name: str | None, kind: type[sqlite3.Error] = sqlite3.OperationalError) -> sqlite3.Error:
    err = kind("as SQLite says it")
    if name is not None:
        err.sqlite_errorname = name
    return err


@pytest.mark.parametrize("name", ["SQLITE_CORRUPT", "SQLITE_CORRUPT_INDEX", "SQLITE_NOTADB", "SQLITE_FORMAT",
                                  "SQLITE_IOERR_READ", "SQLITE_IOERR_SHORT_READ"])
def test_a_damaged_or_unreadable_file_is_damage(name: str) -> None:
    assert is_damage(sqlite_error(name, sqlite3.DatabaseError))
    assert isinstance(write_error(Path("chain.sqlite3"), sqlite_error(name)), DatabaseDamaged)


@pytest.mark.parametrize("name", ["SQLITE_FULL", "SQLITE_BUSY", "SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC",
                                  "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN"])
def test_a_refused_write_is_not_damage(name: str) -> None:
    # A quota or a file-size limit fails a write() as SQLITE_IOERR_WRITE: telling the operator to
    # throw the data dir away for it would lose a good chain.
    err = write_error(Path("chain.sqlite3"), sqlite_error(name))
    assert not isinstance(err, DatabaseDamaged) and isinstance(err, StoreError)
    assert str(err).startswith("cannot write to database chain.sqlite3")
    assert not isinstance(read_error(Path("chain.sqlite3"), sqlite_error(name)), DatabaseDamaged)


def test_the_modules_own_database_error_without_a_code_is_damage() -> None:
    assert is_damage(sqlite3.DatabaseError("file is not a database"))

"""The parts of a data dir that tools read and write beside the daemon: its lock, its
service-node key file and the record of that key's public half, and how those files are written.

snoded (`snode.app.datadir.DataDir`) and snode-cli's `key` commands both use these, so the two
agree on the file names, the key's format, the lock a running daemon holds, and that a key file
is never half-written.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import IO, Final

KEY_FILE: Final = "key"
KEY_PUB_FILE: Final = "key.pub"
"""The public key of the service-node key this data dir made or ran (hex), written beside `key`:
with it, a start whose key file has gone (a failed restore, a slip of `rm`) is refused instead of
quietly making a new node while the chain still holds the old one."""
GENESIS_FILE: Final = "genesis.json"
"""The chain's genesis document, which names its network."""
LOCK_FILE: Final = "snoded.lock"
"""Held (flock) by the daemon that runs the data dir, with its pid as its content."""
SEED_BYTES: Final = 32


class DirLocked(Exception):
    """Another process holds the data dir's lock; `holder`: the pid it wrote, or 'unknown'."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def take_lock(path: Path) -> IO[str]:
    """The data dir's lock, taken (the open file: closing it, or the process ending, releases
    it) with this process's pid written in it; DirLocked when another process holds it."""
    return lock_file(path / LOCK_FILE)


def lock_file(path: Path) -> IO[str]:
    """The lock `path` is (created if need be), as `take_lock`."""
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()[:20] or "unknown"
        handle.close()
        raise DirLocked(holder) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def seed_of(raw: bytes) -> bytes:
    """The 32-byte seed a key file holds (64 hex characters, whitespace around them allowed);
    ValueError when it holds anything else."""
    seed = bytes.fromhex(raw.strip().decode("ascii", errors="strict"))
    if len(seed) != SEED_BYTES:
        raise ValueError(f"{len(seed)} bytes, not {SEED_BYTES}")
    return seed


def key_file_text(seed: bytes) -> bytes:
    """What a key file holding `seed` contains."""
    return seed.hex().encode() + b"\n"


def write_atomically(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write a file so that a crash leaves either the old or the new content, never half; the
    file has `mode` from its creation."""
    os.replace(_written_beside(path, data, mode), path)
    sync_dir(path.parent)


def create_file(path: Path, data: bytes, mode: int) -> bool:
    """Write a new file whole (as `write_atomically`), but never over an existing one: False
    when `path` exists."""
    tmp = _written_beside(path, data, mode)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: the check and the rename are two steps
        if path.exists():
            return False
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    sync_dir(path.parent)
    return True


def write_all(fd: int, data: bytes) -> None:
    """Every byte of `data` to `fd`: a write to a nearly full disk may take only part and say so by
    its count, not by an error (OSError comes with the next one)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _written_beside(path: Path, data: bytes, mode: int) -> Path:
    """`data` in a new file beside `path`, synced to disk; its path. On any error the new file is
    removed and the error raised: nothing half-written is ever renamed over `path`."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # a file a crash left keeps its own mode through O_CREAT
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def remove_entry(path: Path) -> None:
    """Remove what sits at `path`: a file, a link, or a directory and all in it (something a crash
    or a hand put where a file of ours belongs); OSError if it cannot be removed."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def sync_dir(path: Path) -> None:
    """Sync a directory, so that the renames and creations in it survive a power cut."""
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)

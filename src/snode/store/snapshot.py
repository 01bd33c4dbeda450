"""Snapshots on disk: `<data dir>/snapshots/<height>-<hash>/`, a manifest and its chunk files.

A snapshot is written into a hidden directory beside the others, every file synced, and renamed
into place in one step (then the parent synced): a crash leaves a whole snapshot or a hidden
directory that the next start deletes, never a half-written one that is served or loaded. The
newest KEEP are kept. A download in progress (`Download`) keeps its manifest and each checked
chunk the same way (a file renamed into place once whole), so that a node killed mid-download
resumes with what it stored and fetches none of it twice.

What is read back is checked again (`core.snapshot`): a directory edited by hand is reported
in one line and neither served nor loaded.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from snode.common.data_dir import remove_entry, sync_dir, write_atomically
from snode.common.files import read_bounded
from snode.core.crypto import hash32
from snode.core.encoding import decode, encode
from snode.core.errors import DecodeError
from snode.core.snapshot import CHUNK_FRAME, MANIFEST_BYTES, Manifest, SnapshotError
from snode.params import MAX_BLOCK_BYTES

log = logging.getLogger(__name__)

DIR_NAME: Final = "snapshots"
KEEP: Final = 2
"""Snapshots kept: the newest two (a peer downloading the older one finishes it)."""
MANIFEST: Final = "manifest"
BLOCK: Final = "block"
DOWNLOAD: Final = "download"


def _chunk_name(number: int) -> str:
    return f"chunk-{number:04d}"


def _write_file(path: Path, data: bytes) -> None:
    """`data` at `path`, whole or not at all (written beside it, synced, renamed)."""
    write_atomically(path, data, 0o644)


def _snapshot_name(manifest: Manifest) -> str:
    return f"{manifest.height:010d}-{manifest.block_hash.hex()[:16]}"


def read_manifest(path: Path) -> Manifest:
    """The manifest in snapshot directory `path`; SnapshotError when it is not one."""
    try:
        return decode(read_bounded(path / MANIFEST, MANIFEST_BYTES), Manifest)
    except OSError as err:
        raise SnapshotError(f"{path / MANIFEST} cannot be read: {err}") from None
    except DecodeError as err:
        raise SnapshotError(f"{path / MANIFEST} is {err.reason}") from None


def read_chunk(path: Path, number: int) -> bytes:
    """The bytes of chunk file `number` of directory `path` (at most CHUNK_FRAME); OSError when missing."""
    return read_bounded(path / _chunk_name(number), CHUNK_FRAME)


class Snapshots:
    """The snapshots this node wrote, newest last."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / DIR_NAME

    def clear_unfinished(self) -> None:
        """Delete the hidden directories a crash left behind (never served, never loaded)."""
        if not self.root.is_dir():
            return
        for entry in self.root.iterdir():
            if entry.name.startswith(".") and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)

    def paths(self) -> list[Path]:
        """The snapshot directories, oldest first (by height; the names start with it)."""
        if not self.root.is_dir():
            return []
        return sorted((p for p in self.root.iterdir() if p.is_dir() and p.name[:1].isdigit()), key=lambda p: p.name)

    def write(self, manifest: Manifest, chunks: Iterable[bytes]) -> Path:
        """Write a snapshot of these chunks atomically and keep the newest KEEP; its directory."""
        def build(put: Callable[[bytes], None]) -> Manifest:
            for data in chunks:
                put(data)
            return manifest
        return self.write_built(build)[1]

    def write_built(self, build: Callable[[Callable[[bytes], None]], Manifest]) -> tuple[Manifest, Path]:
        """Write the snapshot that `build` makes (it hands each chunk, in order, to the function
        it is given, and returns the manifest: `core.snapshot.build_into`), each chunk to its
        file as it comes, atomically, and keep the newest KEEP; its manifest and directory. An exception
        (OSError of a full disk, the build stopped) leaves no part of it behind."""
        self.root.mkdir(parents=True, exist_ok=True)
        # A name of its own (two builds never share one), hidden: never listed, and deleted by
        # `clear_unfinished` at the next start if a crash leaves it.
        tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=self.root))
        count = itertools.count()
        try:
            tmp.chmod(0o755)  # as the directories made before
            manifest = build(lambda data: _write_file(tmp / _chunk_name(next(count)), data))
            _write_file(tmp / MANIFEST, encode(manifest))
            sync_dir(tmp)
            final = self.root / _snapshot_name(manifest)
            if final.exists():
                shutil.rmtree(final)
            os.rename(tmp, final)
            sync_dir(self.root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._prune()
        return manifest, final

    def adopt(self, download: Download, manifest: Manifest) -> Path:
        """Move a finished download of `manifest` (every chunk checked on arrival and loaded)
        into place as a snapshot, in one rename, and keep the newest KEEP; its directory. A node
        started from a snapshot serves it at once, and never writes it again from its state."""
        final = self.root / _snapshot_name(manifest)
        (download.path / BLOCK).unlink(missing_ok=True)
        sync_dir(download.path)
        if final.exists():
            shutil.rmtree(final)
        os.rename(download.path, final)
        sync_dir(self.root)
        self._prune()
        return final

    def _prune(self) -> None:
        for old in self.paths()[:-KEEP]:
            shutil.rmtree(old, ignore_errors=True)

    def verified(self, path: Path) -> Manifest:
        """The manifest of `path` after every chunk file was checked against it (size and hash);
        SnapshotError naming the first that is not (the directory was edited)."""
        manifest = read_manifest(path)
        for number, info in enumerate(manifest.chunks):
            try:
                data = read_chunk(path, number)
            except OSError as err:
                raise SnapshotError(f"{path}: chunk {number} cannot be read ({err})") from None
            if len(data) != info.size or hash32(data) != info.hash:
                raise SnapshotError(f"{path}: chunk {number} is not the one its manifest lists")
        return manifest


class Download:
    """A snapshot being fetched: `<data dir>/snapshots/download/`, its manifest and each checked
    chunk as it came, each file whole or absent (so a restart resumes it)."""

    def __init__(self, data_dir: Path, cap: int | None = None) -> None:
        self.path = data_dir / DIR_NAME / DOWNLOAD
        self.cap = cap
        """Bytes of chunks it may store (a test's full disk, `SNODE_SNAPSHOT_DOWNLOAD_BYTES`); None: no cap."""
        self.stored_bytes = 0

    def manifest(self) -> Manifest | None:
        """The manifest of the download under way, or None (none, or one that cannot be read)."""
        if not (self.path / MANIFEST).exists():
            return None
        try:
            return read_manifest(self.path)
        except SnapshotError as err:
            log.warning("the snapshot download's manifest is unusable (%s): starting the download again", err)
            self.discard()
            return None

    def start(self, manifest: Manifest, block: bytes) -> None:
        """Begin a download of `manifest` (a checked one) of the block `block` (its encoding),
        dropping any other under way. The block goes first: a manifest stored means both are."""
        self.discard()
        self.path.mkdir(parents=True)
        _write_file(self.path / BLOCK, block)
        _write_file(self.path / MANIFEST, encode(manifest))

    def block(self) -> bytes | None:
        """The encoded block of the download under way, or None."""
        try:
            return read_bounded(self.path / BLOCK, MAX_BLOCK_BYTES)
        except OSError:
            return None

    def stored(self, manifest: Manifest) -> set[int]:
        """The chunks of `manifest` already stored whole and matching it; a stored file that does
        not match (edited, or damaged) is deleted, and fetched again."""
        have = set()
        for number, info in enumerate(manifest.chunks):
            path = self.path / _chunk_name(number)
            if not path.exists():
                continue
            try:
                data = read_chunk(self.path, number)
            except OSError:
                data = b""
            if len(data) == info.size and hash32(data) == info.hash:
                have.add(number)
                self.stored_bytes += len(data)
            else:
                log.warning("stored snapshot chunk %d does not match its manifest: fetching it again", number)
                with contextlib.suppress(OSError):  # a directory there is never ours: it once stopped every start
                    remove_entry(path)
        return have

    def put(self, number: int, data: bytes) -> None:
        """Store checked chunk `number` (whole, or not at all: OSError on a full disk)."""
        if self.cap is not None and self.stored_bytes + len(data) > self.cap:
            raise OSError(errno.ENOSPC, f"No space left on device (the test's cap of {self.cap} bytes)")
        _write_file(self.path / _chunk_name(number), data)
        self.stored_bytes += len(data)

    def chunk(self, number: int) -> bytes:
        return read_chunk(self.path, number)

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

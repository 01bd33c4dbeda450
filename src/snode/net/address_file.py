"""The address book on disk: `peers.dat` in the data dir, as Bitcoin Core keeps its addrman.

A restarted node dials the peers it knew, each with its record (tried or new, attempts, last
success), and the book's secret key, so that every entry finds its own slot again and nobody
who learned the old placement can aim at a new one. Written atomically (a temporary file beside
it, fsync, rename, the directory synced), with a magic, a version and a SHA-256 of the payload
in front. A file that is missing is a fresh book; one that is truncated, damaged, too large or
of another version is one WARNING line and a fresh book, never a failed start. Bounded: the
book holds at most (NEW_BUCKETS + TRIED_BUCKETS) x ADDRESS_BUCKET_SIZE entries (20,480, about
1.5 MB here), and a file over MAX_FILE_BYTES is not read.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Annotated, Final

import msgspec

from snode.common import decode_reasons
from snode.common.data_dir import write_atomically
from snode.net.addrman import AddressBook, AddressInfo

log = logging.getLogger(__name__)

FILE_NAME: Final = "peers.dat"
MAGIC: Final = b"SNPEERS\x01"
"""The file's first bytes: what it is and its format's version."""
MAX_FILE_BYTES: Final = 8 << 20
"""A file larger than this is not read (the largest book writes about 1.5 MB)."""
_DIGEST = 32


class _Entry(msgspec.Struct, array_like=True, frozen=True):
    address: Annotated[str, msgspec.Meta(max_length=64)]
    source_group: Annotated[str, msgspec.Meta(max_length=64)]
    seen: float
    tried: bool
    attempts: int
    last_try: float
    last_success: float


class _Book(msgspec.Struct, array_like=True, frozen=True):
    key: Annotated[bytes, msgspec.Meta(min_length=16, max_length=16)]
    entries: Annotated[list[_Entry], msgspec.Meta(max_length=100_000)]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Book)


def encode(book: AddressBook, now: float) -> bytes:
    """The file's bytes for `book` (on the event loop, which owns the book; `write` can then
    run on another thread)."""
    key, infos = book.records(now)
    payload = _encoder.encode(_Book(key, [
        _Entry(i.address, i.source_group, i.seen, i.tried, i.attempts, i.last_try, i.last_success) for i in infos]))
    return MAGIC + hashlib.sha256(payload).digest() + payload


def write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically (OSError if the disk refuses)."""
    write_atomically(path, data)


def load(path: Path, book: AddressBook, now: float) -> int:
    """Fill the empty `book` from `path`; how many entries it took (0 for a missing file, and
    for an unusable one after its WARNING line)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return 0
    except OSError as err:
        return _unusable(path, f"cannot be read: {err.strerror}")
    if len(data) > MAX_FILE_BYTES:
        return _unusable(path, f"is larger than {MAX_FILE_BYTES} bytes")
    if not data.startswith(MAGIC):
        return _unusable(path, "is not an snode address book of this version")
    digest, payload = data[len(MAGIC):len(MAGIC) + _DIGEST], data[len(MAGIC) + _DIGEST:]
    if len(digest) < _DIGEST or hashlib.sha256(payload).digest() != digest:
        return _unusable(path, "is truncated or damaged (its checksum does not match)")
    try:
        saved = _decoder.decode(payload)
    except decode_reasons.DECODE_FAILURES as err:
        return _unusable(path, f"does not decode ({decode_reasons.reason(err)})")
    entries = [AddressInfo(e.address, "", e.source_group, e.seen, tried=e.tried, attempts=e.attempts,
                           last_try=e.last_try, last_success=e.last_success) for e in saved.entries]
    return book.restore(saved.key, entries, now)


def _unusable(path: Path, why: str) -> int:
    log.warning("the saved address book %s %s; starting with a fresh one (it is written again "
                "within a minute)", path, why)
    return 0

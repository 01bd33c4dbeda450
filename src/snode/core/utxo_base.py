"""The packed layer of a `core.utxo_set.UtxoSet`: unspent outputs as 50-byte records in 2**16
immutable buckets, their owners by number (`OwnerTable`), and the folds that make a new base
from an old one and a set of changes. `core.utxo_set` has the whole design."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

import msgspec

from snode.core.types import Amount, Height, PubKey

KEY_BYTES: Final = 34
"""An outpoint key: the transaction id and the output's 2-byte index."""
RECORD: Final = struct.Struct(">34sIQI")
"""key, owner number (`OwnerTable`), amount, unlock height: 50 bytes."""
RECORD_BYTES: Final = RECORD.size
BUCKET_BITS: Final = 16
_MASK: Final = (1 << BUCKET_BITS) - 1
_EMPTY: Final = b""
_U64: Final = 1 << 64
_U32: Final = 1 << 32


class UtxoEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """An unspent output. Make them with `new_utxo`, which shares the owner's bytes."""

    owner: PubKey
    amount: Amount
    unlock_height: Height
    """First height at which it may be spent."""


MAX_SHARED_OWNERS: Final = 100_000
_owners: dict[bytes, bytes] = {}


def shared_owner(owner: bytes) -> bytes:
    """One bytes object per owner for all the unspent outputs in this process: an address
    (a service node operator's, a pool's) often holds thousands, and each would otherwise keep
    its own 32-byte copy (about 70 bytes of memory; 27 MiB of 390,000 outputs). Only sharing
    changes: equal keys are interchangeable. The table is bounded: past MAX_SHARED_OWNERS
    addresses it starts again (outputs keep the objects they have)."""
    found = _owners.get(owner)
    if found is not None:
        return found
    if len(_owners) >= MAX_SHARED_OWNERS:
        _owners.clear()
    _owners[owner] = owner
    return owner


_last_unlock = [0]


def new_utxo(owner: bytes, amount: int, unlock_height: int) -> UtxoEntry:
    """An unspent output whose owner bytes are shared (`shared_owner`), and whose unlock height
    is the object of the output made before it when they are equal: a block's outputs all
    unlock at one height, and each int above 256 is an object of 28 bytes (10 MiB of 390,000
    outputs). Only sharing changes: equal ints are interchangeable."""
    if unlock_height == _last_unlock[0]:
        unlock_height = _last_unlock[0]
    else:
        _last_unlock[0] = unlock_height
    return UtxoEntry(shared_owner(owner), amount, unlock_height)


RENUMBER_SLACK = 65_536
"""Owner numbers a base's table may hold beyond twice its records before a fold numbers the
owners afresh (dropping those whose outputs are all spent). Tests pass a lower one
(`utxo_set.UtxoLimits`)."""


class OwnerTable:
    """The numbers packed records name their owners by (4 bytes instead of 32): owners hold
    many outputs each (an operator's rewards, a pool's stakes). One table serves a lineage of
    bases (each fold's base shares its parent's and may add to it; numbers never change), and a
    fold that finds it over twice its records (plus RENUMBER_SLACK) starts a new one with only
    the live owners, so spent owners do not pile up for the process's life. Adding is safe from
    any thread: a number is published with setdefault after its owner is filed under it, so
    two threads numbering one owner agree on the first (the other number is left unused)."""

    __slots__ = ("numbers", "owners", "_next")

    def __init__(self) -> None:
        self.numbers: dict[bytes, int] = {}
        self.owners: dict[int, bytes] = {}
        self._next = itertools.count()

    def number(self, owner: bytes) -> int:
        """The owner's number, given one if it has none."""
        number = self.numbers.get(owner)
        if number is None:
            fresh = next(self._next)
            if fresh >= _U32:
                raise OverflowError("owner numbers exhausted")  # 4 billion owners: not reachable
            self.owners[fresh] = owner
            number = self.numbers.setdefault(owner, fresh)
        return number


class Base:
    """The packed, immutable layer of a UtxoSet: its buckets, its owner table, its records."""

    __slots__ = ("buckets", "owners", "records")

    def __init__(self, buckets: tuple[bytes, ...], owners: OwnerTable, records: int) -> None:
        self.buckets = buckets
        self.owners = owners
        self.records = records


EMPTY_BASE: Final = Base((_EMPTY,) * (1 << BUCKET_BITS), OwnerTable(), 0)


def find_record(blob: bytes | bytearray, key: bytes) -> int:
    """Offset of key's record in a bucket, or -1. A record starts every RECORD_BYTES; a match
    elsewhere (inside another record's fields) is skipped."""
    pos = blob.find(key)
    while pos >= 0 and pos % RECORD_BYTES:
        pos = blob.find(key, pos + 1)
    return pos


def base_get(base: Base, key: bytes) -> UtxoEntry | None:
    if len(key) != KEY_BYTES:
        return None
    blob = base.buckets[hash(key) & _MASK]
    if not blob:
        return None
    pos = blob.find(key)  # `find_record`, inlined: every input and new output comes here
    while pos > 0 and pos % RECORD_BYTES:
        pos = blob.find(key, pos + 1)
    if pos < 0:
        return None
    _, owner, amount, unlock = RECORD.unpack_from(blob, pos)
    return UtxoEntry(base.owners.owners[owner], amount, unlock)


def packable(key: bytes, entry: UtxoEntry) -> bool:
    return (
        len(key) == KEY_BYTES and len(entry.owner) == 32
        and 0 <= entry.amount < _U64 and 0 <= entry.unlock_height < _U32
    )


def base_records(base: Base) -> Iterator[tuple[bytes, UtxoEntry]]:
    unpack, owners = RECORD.unpack_from, base.owners.owners
    for blob in filter(None, base.buckets):  # most buckets of a small set are empty: skipped in C
        for pos in range(0, len(blob), RECORD_BYTES):
            key, owner, amount, unlock = unpack(blob, pos)
            yield key, UtxoEntry(owners[owner], amount, unlock)


def folded(base: Base, overlay: Iterable[tuple[bytes, UtxoEntry | None]],
           renumber_slack: int = RENUMBER_SLACK) -> tuple[Base, dict[bytes, UtxoEntry]]:
    """A new base with these changes made to it (None: delete the key), and the entries that
    cannot be packed (for the new overlay). Only the buckets the changes touch are rebuilt; the
    owners are numbered afresh past `renumber_slack` dead ones (RENUMBER_SLACK)."""
    groups: dict[int, list[tuple[bytes, UtxoEntry | None]]] = {}
    kept: dict[bytes, UtxoEntry] = {}
    for key, entry in overlay:
        if entry is not None and not packable(key, entry):
            kept[key] = entry
            if len(key) != KEY_BYTES:
                continue
            entry = None  # a packed record of this key, if any, gives way to the kept one
        groups.setdefault(hash(key) & _MASK, []).append((key, entry))
    buckets = list(base.buckets)
    owners = base.owners if base.records else OwnerTable()
    pack, number = RECORD.pack, owners.number
    records = base.records
    for index, changes in groups.items():
        blob = bytearray(buckets[index])
        for key, entry in changes:
            pos = find_record(blob, key)
            if pos >= 0:
                del blob[pos:pos + RECORD_BYTES]
                records -= 1
            if entry is not None:
                blob += pack(key, number(entry.owner), entry.amount, entry.unlock_height)
                records += 1
        buckets[index] = bytes(blob) if blob else _EMPTY
    if len(owners.numbers) > 2 * records + renumber_slack:
        return _renumbered(buckets, owners, records), kept
    return Base(tuple(buckets), owners, records), kept


def _renumbered(buckets: list[bytes], old: OwnerTable, records: int) -> Base:
    """These buckets with their owners numbered in a new table of only the live ones."""
    owners = OwnerTable()
    unpack, pack, number, of = RECORD.unpack_from, RECORD.pack, owners.number, old.owners
    for index, blob in enumerate(buckets):
        if blob:
            buckets[index] = b"".join(
                pack(key, number(of[n]), amount, unlock)
                for key, n, amount, unlock in (unpack(blob, pos) for pos in range(0, len(blob), RECORD_BYTES))
            )
    return Base(tuple(buckets), owners, records)


def packed(
    pairs: Iterable[tuple[bytes, Any]], decode: Callable[[Any], UtxoEntry] | None = None,
) -> tuple[Base, dict[bytes, UtxoEntry], int]:
    """A base of these (distinct) keys' entries (each made by `decode` from the pair's value if
    given), those that cannot be packed, and the count. (`packable` and the owner table's
    known case inlined: a restart packs every output.)"""
    # Each record goes straight into its bucket's bytearray: 50 bytes an output while packing.
    # A list of each bucket's records joined at the end was as fast, but held a bytes object an
    # output (about 90 bytes) beside the joined buckets: 78 MiB more at the peak of a snapshot
    # load of a million outputs, which pymalloc then kept.
    buckets: list[bytearray] = [bytearray() for _ in range(1 << BUCKET_BITS)]
    kept: dict[bytes, UtxoEntry] = {}
    owners = OwnerTable()
    pack, numbers, number_of = RECORD.pack, owners.numbers, owners.number
    count = 0
    for key, entry in pairs:
        count += 1
        if decode is not None:
            entry = decode(entry)
        owner, amount, unlock = entry.owner, entry.amount, entry.unlock_height
        if (len(key) == KEY_BYTES and len(owner) == 32 and 0 <= amount < _U64
                and 0 <= unlock < _U32):
            number = numbers.get(owner)
            if number is None:
                number = number_of(owner)
            buckets[hash(key) & _MASK] += pack(key, number, amount, unlock)
        else:
            kept[key] = entry
    if count == len(kept):
        return EMPTY_BASE, kept, count
    joined = []
    buckets.reverse()
    while buckets:  # each bucket's bytearray goes as its bytes are made
        records = buckets.pop()
        joined.append(bytes(records) if records else _EMPTY)
    return Base(tuple(joined), owners, count - len(kept)), kept, count

"""The unspent outputs of a state: a persistent map from outpoint key to `UtxoEntry`, most of it
packed into bytes.

An output held as Python objects costs about 222 bytes (its 34-byte key, the entry, its amount,
its share of a HAMT's nodes): 83 MiB for the 390,000 outputs of a 100,000-block chain. Packed as
one 50-byte record (key, owner's number, amount, unlock height) it costs about 58.

A `UtxoSet` is two layers:
- the *base*: 2**16 immutable buckets of packed records (about 6 each at 390,000 outputs); a
  key's bucket is picked by the process's salted hash of the key, so nobody can aim many
  outputs at one bucket. Bases are never changed; states share them, and a new base copies
  only the bucket pointers and the buckets it changes (an eighth of them at most, so that the
  two bases alive around a fold share most of their buckets).
- the *overlay*: a persistent map (immutables.Map) of what changed since the base was made: a
  key's new entry, or None for a base key that was spent (a tombstone).

Blocks change only the overlay (O(changes x log n), as before). Once it holds COMPACT_AT keys,
the next block applied folds it into a new base (about 2 us a key; `UtxoMutation.finish`).
Outputs made and spent between two folds never reach a base. Entries that cannot be packed (a key that is not 34
bytes, an owner that is not 32; the consensus rules make none, tests and tools may) stay in the
overlay for good.

Iteration order is unspecified (it depends on the hash salt, as a HAMT's does): sort if order
matters.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import immutables
import msgspec

from snode.core.types import Amount, Height, PubKey

KEY_BYTES: Final = 34
"""An outpoint key: the transaction id and the output's 2-byte index."""
_RECORD: Final = struct.Struct(">34sIQI")
"""key, owner number (`OwnerTable`), amount, unlock height: 50 bytes."""
RECORD_BYTES: Final = _RECORD.size
BUCKET_BITS: Final = 16
_MASK: Final = (1 << BUCKET_BITS) - 1
_EMPTY: Final = b""
_NO_RECORDS: Final[list[bytes]] = []
_U64: Final = 1 << 64
_U32: Final = 1 << 32

COMPACT_AT = 8_192
"""Overlay keys at which a block's `finish(fold=True)` folds the overlay into a new base: the
overlay then costs about 2 MiB, and a fold about 20 ms. Tests lower it to make folds happen."""


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


_MISSING: Any = object()

RENUMBER_SLACK = 65_536
"""Owner numbers a base's table may hold beyond twice its records before a fold numbers the
owners afresh (dropping those whose outputs are all spent). Tests lower it."""


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


_EMPTY_BASE: Final = Base((_EMPTY,) * (1 << BUCKET_BITS), OwnerTable(), 0)


def _find(blob: bytes | bytearray, key: bytes) -> int:
    """Offset of key's record in a bucket, or -1. A record starts every RECORD_BYTES; a match
    elsewhere (inside another record's fields) is skipped."""
    pos = blob.find(key)
    while pos >= 0 and pos % RECORD_BYTES:
        pos = blob.find(key, pos + 1)
    return pos


def _base_get(base: Base, key: bytes) -> UtxoEntry | None:
    if len(key) != KEY_BYTES:
        return None
    blob = base.buckets[hash(key) & _MASK]
    if not blob:
        return None
    pos = blob.find(key)  # `_find`, inlined: every input and new output comes here
    while pos > 0 and pos % RECORD_BYTES:
        pos = blob.find(key, pos + 1)
    if pos < 0:
        return None
    _, owner, amount, unlock = _RECORD.unpack_from(blob, pos)
    return UtxoEntry(base.owners.owners[owner], amount, unlock)


def _base_has(base: Base, key: bytes) -> bool:
    if len(key) != KEY_BYTES:
        return False
    blob = base.buckets[hash(key) & _MASK]
    return bool(blob) and _find(blob, key) >= 0


def _packable(key: bytes, entry: UtxoEntry) -> bool:
    return (
        len(key) == KEY_BYTES and len(entry.owner) == 32
        and 0 <= entry.amount < _U64 and 0 <= entry.unlock_height < _U32
    )


def _records(base: Base) -> Iterator[tuple[bytes, UtxoEntry]]:
    unpack, owners = _RECORD.unpack_from, base.owners.owners
    for blob in base.buckets:
        for pos in range(0, len(blob), RECORD_BYTES):
            key, owner, amount, unlock = unpack(blob, pos)
            yield key, UtxoEntry(owners[owner], amount, unlock)


def _folded(base: Base, overlay: Iterable[tuple[bytes, UtxoEntry | None]]) -> tuple[Base, dict[bytes, UtxoEntry]]:
    """A new base with these changes made to it (None: delete the key), and the entries that
    cannot be packed (for the new overlay). Only the buckets the changes touch are rebuilt."""
    groups: dict[int, list[tuple[bytes, UtxoEntry | None]]] = {}
    kept: dict[bytes, UtxoEntry] = {}
    for key, entry in overlay:
        if entry is not None and not _packable(key, entry):
            kept[key] = entry
            if len(key) != KEY_BYTES:
                continue
            entry = None  # a packed record of this key, if any, gives way to the kept one
        groups.setdefault(hash(key) & _MASK, []).append((key, entry))
    buckets = list(base.buckets)
    owners = base.owners if base.records else OwnerTable()
    pack, number = _RECORD.pack, owners.number
    records = base.records
    for index, changes in groups.items():
        blob = bytearray(buckets[index])
        for key, entry in changes:
            pos = _find(blob, key)
            if pos >= 0:
                del blob[pos:pos + RECORD_BYTES]
                records -= 1
            if entry is not None:
                blob += pack(key, number(entry.owner), entry.amount, entry.unlock_height)
                records += 1
        buckets[index] = bytes(blob) if blob else _EMPTY
    if len(owners.numbers) > 2 * records + RENUMBER_SLACK:
        return _renumbered(buckets, owners, records), kept
    return Base(tuple(buckets), owners, records), kept


def _renumbered(buckets: list[bytes], old: OwnerTable, records: int) -> Base:
    """These buckets with their owners numbered in a new table of only the live ones."""
    owners = OwnerTable()
    unpack, pack, number, of = _RECORD.unpack_from, _RECORD.pack, owners.number, old.owners
    for index, blob in enumerate(buckets):
        if blob:
            buckets[index] = b"".join(
                pack(key, number(of[n]), amount, unlock)
                for key, n, amount, unlock in (unpack(blob, pos) for pos in range(0, len(blob), RECORD_BYTES))
            )
    return Base(tuple(buckets), owners, records)


def _packed(
    pairs: Iterable[tuple[bytes, Any]], decode: Callable[[Any], UtxoEntry] | None = None,
) -> tuple[Base, dict[bytes, UtxoEntry], int]:
    """A base of these (distinct) keys' entries (each made by `decode` from the pair's value if
    given), those that cannot be packed, and the count. (`_packable` and the owner table's
    known case inlined: a restart packs every output.)"""
    # Records are listed per bucket and joined at the end: faster than growing 65,536
    # bytearrays in random order, for a transient list of the records.
    buckets: list[list[bytes]] = [[] for _ in range(1 << BUCKET_BITS)]
    kept: dict[bytes, UtxoEntry] = {}
    owners = OwnerTable()
    pack, numbers, number_of = _RECORD.pack, owners.numbers, owners.number
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
            buckets[hash(key) & _MASK].append(pack(key, number, amount, unlock))
        else:
            kept[key] = entry
    if count == len(kept):
        return _EMPTY_BASE, kept, count
    joined = []
    for i, records in enumerate(buckets):
        joined.append(b"".join(records) if records else _EMPTY)
        buckets[i] = _NO_RECORDS  # each bucket's records go as its bytes are made
    return Base(tuple(joined), owners, count - len(kept)), kept, count


class UtxoSet:
    """A persistent map of outpoint key -> UtxoEntry (see the module's text). Read it like a
    Mapping; change it through `mutate()` or `update()`, which return a new set."""

    __slots__ = ("_base", "_overlay", "_len")

    def __init__(self, items: Mapping[bytes, UtxoEntry] | Iterable[tuple[bytes, UtxoEntry]] = ()) -> None:
        """A set of these entries; an iterable must not repeat a key (a Mapping's or a table's
        rows). Fewer than COMPACT_AT go into the overlay, as a mutation would leave them; more
        are packed as they come, without a map of them all first."""
        pairs = iter(items.items() if isinstance(items, Mapping) else items)
        first = list(itertools.islice(pairs, COMPACT_AT))
        if len(first) < COMPACT_AT:
            self._base, self._len = _EMPTY_BASE, len(first)
            self._overlay: immutables.Map[bytes, UtxoEntry | None] = immutables.Map(first)
            return
        self._base, kept, self._len = _packed(itertools.chain(first, pairs))
        self._overlay = immutables.Map(kept)

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[bytes, bytes]], decode: Callable[[bytes], UtxoEntry]) -> UtxoSet:
        """A set of stored rows (distinct keys, each value decoded by `decode`): a restart's
        load, packed as the rows come (never a map of them all first)."""
        rows = iter(rows)
        first = list(itertools.islice(rows, COMPACT_AT))
        if len(first) < COMPACT_AT:
            return cls((key, decode(value)) for key, value in first)
        base, kept, length = _packed(itertools.chain(first, rows), decode)
        return cls._made(base, immutables.Map(kept), length)

    @classmethod
    def _made(cls, base: Base, overlay: immutables.Map[bytes, UtxoEntry | None], length: int) -> UtxoSet:
        made = cls.__new__(cls)
        made._base, made._overlay, made._len = base, overlay, length
        return made

    def get(self, key: bytes, default: Any = None) -> Any:
        """The entry of key, or default."""
        entry = self._overlay.get(key, _MISSING)
        if entry is _MISSING:
            entry = _base_get(self._base, key)
        return default if entry is None else entry

    def __getitem__(self, key: bytes) -> UtxoEntry:
        entry = self.get(key)
        if entry is None:
            raise KeyError(key)
        return entry

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, bytes):
            return False
        entry = self._overlay.get(key, _MISSING)
        return _base_has(self._base, key) if entry is _MISSING else entry is not None

    def __len__(self) -> int:
        return self._len

    def items(self) -> Iterator[tuple[bytes, UtxoEntry]]:
        """Every (key, entry), in no particular order."""
        overlay = self._overlay
        for key, entry in overlay.items():
            if entry is not None:
                yield key, entry
        for key, entry in _records(self._base):
            if key not in overlay:
                yield key, entry

    def keys(self) -> Iterator[bytes]:
        """Every key, in no particular order."""
        return (key for key, _ in self.items())

    __iter__ = keys

    def values(self) -> Iterator[UtxoEntry]:
        """Every entry, in no particular order."""
        return (entry for _, entry in self.items())

    def mutate(self) -> UtxoMutation:
        """A mutation whose `finish` makes the changed set; this one stays as it is."""
        return UtxoMutation(self._base, self._overlay, self._len)

    def update(self, changes: Mapping[bytes, UtxoEntry]) -> UtxoSet:
        """This set with these keys set."""
        mutation = self.mutate()
        for key, entry in changes.items():
            mutation[key] = entry
        return mutation.finish()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UtxoSet):
            return NotImplemented
        if len(self) != len(other):
            return False
        return all(other.get(key) == entry for key, entry in self.items())

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        raise TypeError(
            "a UtxoSet is bound to its process (salted buckets, owner numbers): send its items"
        )

    def __repr__(self) -> str:
        return f"UtxoSet({len(self)} outputs, {len(self._overlay)} in the overlay)"


class UtxoMutation:
    """Changes to a UtxoSet; `finish` makes the new set (and folds the overlay if asked).

    The base does not change under a mutation, so the last base lookup is remembered: a block
    reads an input and then spends it, and each would otherwise search and decode the same
    record. A set without a base (every small one) never looks there."""

    __slots__ = ("_base", "_packed", "_changes", "_len", "_seen_key", "_seen")

    def __init__(self, base: Base, overlay: immutables.Map[bytes, UtxoEntry | None], length: int) -> None:
        self._base = base
        self._packed = base.records > 0
        self._changes = overlay.mutate()
        self._len = length
        self._seen_key: bytes | None = None
        self._seen: UtxoEntry | None = None

    def _in_base(self, key: bytes) -> UtxoEntry | None:
        if not self._packed:
            return None
        if key is not self._seen_key:
            self._seen = _base_get(self._base, key)
            self._seen_key = key
        return self._seen

    def get(self, key: bytes, default: Any = None) -> Any:
        """The entry of key, or default."""
        entry = self._changes.get(key, _MISSING)
        if entry is _MISSING:
            entry = self._in_base(key)
        return default if entry is None else entry

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self.get(key) is not None

    def __setitem__(self, key: bytes, entry: UtxoEntry) -> None:
        changes = self._changes
        old = changes.get(key, _MISSING)
        if old is None or (old is _MISSING and self._in_base(key) is None):
            self._len += 1
        changes[key] = entry

    def __delitem__(self, key: bytes) -> None:
        self.pop(key)

    def pop(self, key: bytes, default: Any = _MISSING) -> Any:
        """Remove key and return its entry; default (or KeyError) if it has none."""
        changes = self._changes
        old = changes.get(key, _MISSING)
        packed = self._in_base(key)
        if old is _MISSING:
            old = packed
        if old is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        if packed is not None:
            changes[key] = None
        else:
            del changes[key]
        self._len -= 1
        return old

    def finish(self, *, fold: bool = False) -> UtxoSet:
        """The changed set. The mutation cannot be used after this. With `fold`, an overlay of
        COMPACT_AT keys or more goes into a new base: only a block's new state asks for it
        (`transition.apply_block`, after its signatures were handed to the verifier), never a
        result that may be thrown away (a transaction's admission check, a producer's pick), so
        that nobody can make a node fold, or number owners, for a transaction it refuses."""
        overlay = self._changes.finish()
        if not fold or len(overlay) < COMPACT_AT:
            return UtxoSet._made(self._base, overlay, self._len)
        base, kept = _folded(self._base, overlay.items())
        return UtxoSet._made(base, immutables.Map(kept), self._len)


class TrackedUtxos(UtxoMutation):
    """A mutation that remembers the first old value of each key it changes (for the block's
    undo record): `core.state.TrackedMap`'s interface, one lookup a change."""

    __slots__ = ("old",)

    def __init__(self, utxos: UtxoSet) -> None:
        super().__init__(utxos._base, utxos._overlay, utxos._len)
        self.old: dict[bytes, UtxoEntry | None] = {}

    def set(self, key: bytes, entry: UtxoEntry) -> None:
        """Set key, remembering its value before this block."""
        changes = self._changes
        old = changes.get(key, _MISSING)
        if old is _MISSING and self._packed:
            old = _base_get(self._base, key)  # not remembered: a new output is not read next
        if old is None or old is _MISSING:
            old = None
            self._len += 1
        changes[key] = entry
        if key not in self.old:
            self.old[key] = old

    def delete(self, key: bytes) -> None:
        """Delete key, remembering its value before this block. KeyError if it has none."""
        old = self.pop(key)
        if key not in self.old:
            self.old[key] = old

    def changes(self) -> tuple[tuple[bytes, UtxoEntry | None], ...]:
        """(key, old value) for every key touched, in key order."""
        return tuple(sorted(self.old.items()))

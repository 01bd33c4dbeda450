"""The unspent outputs of a state: a persistent map from outpoint key to `UtxoEntry`, most of it
packed into bytes.

An output held as Python objects costs about 222 bytes (its 34-byte key, the entry, its amount,
its share of a HAMT's nodes): 83 MiB for the 390,000 outputs of a 100,000-block chain. Packed as
one 50-byte record (key, owner's number, amount, unlock height) it costs about 58.

A `UtxoSet` is two layers:
- the *base*: 2**16 immutable buckets of packed records (about 6 each at 390,000 outputs); a
  key's bucket is picked by the process's salted hash of the key, so nobody can aim many
  outputs at one bucket (a node run with a fixed PYTHONHASHSEED gives that up, as it does for
  every dict and HAMT in the process). Bases are never changed; states share them, and a new base copies
  only the bucket pointers and the buckets it changes (an eighth of them at most, so that the
  two bases alive around a fold share most of their buckets).
- the *overlay*: a persistent map (immutables.Map) of what changed since the base was made: a
  key's new entry, or None for a base key that was spent (a tombstone).

Blocks change only the overlay (O(changes x log n), as before). Once it holds COMPACT_AT keys,
the next block applied folds it into a new base (about 2 us a key; `UtxoMutation.finish`).
Outputs made and spent between two folds never reach a base. Entries that cannot be packed (a
key that is not 34 bytes, an owner that is not 32; the consensus rules make none, tests and
tools may) stay in the overlay for good. The packed layer (records, buckets, owner numbers,
folds) is `core.utxo_base`.

Iteration order is unspecified (it depends on the hash salt, as a HAMT's does): sort if order
matters.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import immutables

from snode.core.utxo_base import (
    EMPTY_BASE,
    RENUMBER_SLACK,
    Base,
    UtxoEntry,
    base_get,
    base_records,
    folded,
    packed,
)

COMPACT_AT = 8_192
"""Overlay keys at which a block's `finish(fold=True)` folds the overlay into a new base: the
overlay then costs about 2 MiB, and a fold about 20 ms. Tests pass a lower one (`UtxoLimits`)
to make folds happen."""


@dataclass(frozen=True, slots=True)
class UtxoLimits:
    """When a set folds its overlay and numbers its owners afresh, as one record a set carries
    and hands to every set made from it (`mutate`, `update`): the node's are the defaults, the
    constants; a test makes a set with small ones so that folds happen every few keys."""

    compact_at: int = COMPACT_AT
    renumber_slack: int = RENUMBER_SLACK


DEFAULT_UTXO_LIMITS: Final = UtxoLimits()


_MISSING: Any = object()


def _built(
    pairs: Iterable[tuple[bytes, Any]], decode: Callable[[Any], UtxoEntry] | None = None,
    compact_at: int = COMPACT_AT,
) -> tuple[Base, immutables.Map[bytes, UtxoEntry | None], int]:
    """(base, overlay, length) of these distinct keys' entries (made by `decode` from each
    pair's value if given): all in the overlay below `compact_at`, else packed."""
    pairs = iter(pairs)
    first = list(itertools.islice(pairs, compact_at))
    if len(first) < compact_at:
        if decode is not None:
            first = [(key, decode(value)) for key, value in first]
        return EMPTY_BASE, immutables.Map(first), len(first)
    base, kept, length = packed(itertools.chain(first, pairs), decode)
    return base, immutables.Map(kept), length


class UtxoSet:
    """A persistent map of outpoint key -> UtxoEntry (see the module's text). Read it like a
    Mapping; change it through `mutate()` or `update()`, which return a new set."""

    __slots__ = ("_base", "_overlay", "_len", "_limits")

    def __init__(self, items: Mapping[bytes, UtxoEntry] | Iterable[tuple[bytes, UtxoEntry]] = (),
                 limits: UtxoLimits = DEFAULT_UTXO_LIMITS) -> None:
        """A set of these entries; an iterable must not repeat a key (a Mapping's or a table's
        rows). Fewer than COMPACT_AT (`limits.compact_at`) go into the overlay, as a mutation
        would leave them; more are packed as they come, without a map of them all first."""
        pairs = items.items() if isinstance(items, Mapping) else items
        self._base, self._overlay, self._len = _built(pairs, None, limits.compact_at)
        self._limits = limits

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[bytes, bytes]], decode: Callable[[bytes], UtxoEntry],
                  limits: UtxoLimits = DEFAULT_UTXO_LIMITS) -> UtxoSet:
        """A set of stored rows (distinct keys, each value decoded by `decode`): a restart's
        load, packed as the rows come (never a map of them all first)."""
        return cls._made(*_built(rows, decode, limits.compact_at), limits)

    @classmethod
    def _made(cls, base: Base, overlay: immutables.Map[bytes, UtxoEntry | None], length: int,
              limits: UtxoLimits) -> UtxoSet:
        made = cls.__new__(cls)
        made._base, made._overlay, made._len, made._limits = base, overlay, length, limits
        return made

    @property
    def limits(self) -> UtxoLimits:
        """When this set, and every set made from it, folds (`UtxoLimits`)."""
        return self._limits

    def get(self, key: bytes, default: Any = None) -> Any:
        """The entry of key, or default."""
        entry = self._overlay.get(key, _MISSING)
        if entry is _MISSING:
            entry = base_get(self._base, key)
        return default if entry is None else entry

    def __getitem__(self, key: bytes) -> UtxoEntry:
        entry = self.get(key)
        if entry is None:
            raise KeyError(key)
        return entry

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self.get(key) is not None

    def __len__(self) -> int:
        return self._len

    def items(self) -> Iterator[tuple[bytes, UtxoEntry]]:
        """Every (key, entry), in no particular order."""
        overlay = self._overlay
        for key, entry in overlay.items():
            if entry is not None:
                yield key, entry
        for key, entry in base_records(self._base):
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
        return UtxoMutation(self._base, self._overlay, self._len, self._limits)

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

    __slots__ = ("_base", "_packed", "_changes", "_len", "_seen_key", "_seen", "_limits")

    def __init__(self, base: Base, overlay: immutables.Map[bytes, UtxoEntry | None], length: int,
                 limits: UtxoLimits = DEFAULT_UTXO_LIMITS) -> None:
        self._base = base
        self._limits = limits
        self._packed = base.records > 0
        self._changes = overlay.mutate()
        self._len = length
        self._seen_key: bytes | None = None
        self._seen: UtxoEntry | None = None

    def _in_base(self, key: bytes) -> UtxoEntry | None:
        if not self._packed:
            return None
        if key is not self._seen_key:
            self._seen = base_get(self._base, key)
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
        self._swap(key, entry)

    def _swap(self, key: bytes, entry: UtxoEntry) -> UtxoEntry | None:
        """Set key and return its entry before (None: it had none)."""
        changes = self._changes
        old = changes.get(key, _MISSING)
        if old is _MISSING:  # the base, not remembered: a new output is not read next
            old = base_get(self._base, key) if self._packed else None
        if old is None:
            self._len += 1
        changes[key] = entry
        return old

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
        overlay, limits = self._changes.finish(), self._limits
        if not fold or len(overlay) < limits.compact_at:
            return UtxoSet._made(self._base, overlay, self._len, limits)
        base, kept = folded(self._base, overlay.items(), limits.renumber_slack)
        return UtxoSet._made(base, immutables.Map(kept), self._len, limits)


class TrackedUtxos(UtxoMutation):
    """A mutation that remembers the first old value of each key it changes (for the block's
    undo record): `core.state.TrackedMap`'s interface, one lookup a change."""

    __slots__ = ("old",)

    def __init__(self, utxos: UtxoSet) -> None:
        super().__init__(utxos._base, utxos._overlay, utxos._len, utxos._limits)
        self.old: dict[bytes, UtxoEntry | None] = {}

    def set(self, key: bytes, entry: UtxoEntry) -> None:
        """Set key, remembering its value before this block. (`_swap`, inlined: every output
        of every block comes here, and a call per output costs about 6 % of a 500-transfer
        block's apply.)"""
        changes = self._changes
        old = changes.get(key, _MISSING)
        if old is _MISSING:
            old = base_get(self._base, key) if self._packed else None
        if old is None:
            self._len += 1
        changes[key] = entry
        if key not in self.old:
            self.old[key] = old

    def delete(self, key: bytes) -> None:
        """Delete key, remembering its value before this block. KeyError if it has none."""
        old = self.pop(key)
        if key not in self.old:
            self.old[key] = old

    def spend(self, key: bytes) -> UtxoEntry | None:
        """Delete key and return its entry, remembering it; None (and nothing changed) if it
        has none. `delete` after a `get`, in one lookup of the overlay: every input of every
        block comes here, and a rule that refuses the entry discards the whole mutation."""
        entry: UtxoEntry | None = self.pop(key, None)
        if entry is not None and key not in self.old:
            self.old[key] = entry
        return entry

    def changes(self) -> tuple[tuple[bytes, UtxoEntry | None], ...]:
        """(key, old value) for every key touched, in key order."""
        return tuple(sorted(self.old.items()))

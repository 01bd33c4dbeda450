"""The reward queue of a registry index (`state.RegistryIndex.reward_queue`): every active node's
`reward_order_key`, sorted, as a persistent sequence whose usual edit costs O(1).

Every block pays the node at the front of the queue, which then goes to the back (its
last_reward_height is the new height, above every other entry's). A sorted tuple would copy the
whole queue twice for that edit (a list to edit and a tuple again): O(n) a block, about 13 us at
2,000 nodes. So a queue is a window [start, end) of a list that only ever grows at its end and
is shared by the versions made from one another: taking entries off the front moves `start`,
and entries that sort after the last one are appended to the list when this version's window
ends where the list does (else another version appended there first, and a new list is made).
Every other edit (an activation in the middle, an undone block putting the winner back in
front) makes a new list, as a tuple would; so does the usual edit once the entries before
`start` are over half of the list, so that a long sync keeps at most about twice the queue.
Entries before `end` never change, so a version reads the same entries whatever other versions
do, from any thread; a version keeps what it appended only if its own entries (the very
objects) are what the list holds at its end, so two versions that append at once never share
an end.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, TypeVar, overload

from snode.core.types import Height, PubKey

RewardEntry = tuple[Height, Height, PubKey]
"""A node's place in the reward queue: (last_reward_height, registration_height, pubkey)."""

MIN_COMPACT: Final = 64
"""Entries before `start` tolerated whatever the queue's length (a small queue is not copied
at every edit)."""


class RewardQueue(Sequence[RewardEntry]):
    """Sorted reward entries (see the module's text). Read it like a tuple; `edited` makes a
    changed one, this one stays as it is."""

    __slots__ = ("_items", "_start", "_end")

    def __init__(self, entries: Iterable[RewardEntry] = ()) -> None:
        """A queue of `entries`, sorted here."""
        self._items: list[RewardEntry] = sorted(entries)
        self._start = 0
        self._end = len(self._items)

    @classmethod
    def _window(cls, items: list[RewardEntry], start: int, end: int) -> RewardQueue:
        made = cls.__new__(cls)
        made._items, made._start, made._end = items, start, end
        return made

    def __len__(self) -> int:
        return self._end - self._start

    def __iter__(self) -> Iterator[RewardEntry]:
        # By index: islice would step through every entry before `start` first, and a block
        # reads only the front of the queue (its winner, its round's leader).
        return map(self._items.__getitem__, range(self._start, self._end))

    @overload
    def __getitem__(self, i: int) -> RewardEntry: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[RewardEntry, ...]: ...

    def __getitem__(self, i: int | slice) -> RewardEntry | tuple[RewardEntry, ...]:
        if isinstance(i, slice):
            return tuple(self._items[self._start:self._end][i])
        n = self._end - self._start
        if not -n <= i < n:
            raise IndexError("reward queue index out of range")
        return self._items[self._start + (i if i >= 0 else n + i)]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RewardQueue):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"RewardQueue({len(self)} entries)"

    def edited(self, remove: Sequence[RewardEntry], add: Sequence[RewardEntry]) -> RewardQueue:
        """This queue without `remove` (each must be in it; ValueError if one is not) and with
        `add`."""
        if not remove and not add:
            return self
        gone, new = sorted(remove), sorted(add)
        items, start, end = self._items, self._start, self._end
        after = start + len(gone)
        fits = (
            after <= end and items[start:after] == gone
            and (not new or after == end or new[0] > items[end - 1])
            and after <= MIN_COMPACT + (end + len(new)) // 2
        )
        if fits and (not new or end == len(items)):
            items.extend(new)  # one call: another thread's extend lands wholly before or after
            if all(ours is theirs for ours, theirs in zip(new, items[end:end + len(new)])):
                return RewardQueue._window(items, after, end + len(new))
            # Another version appended at this end first: its entries stay, unread by this one.
        return RewardQueue._window(sorted_edited(self, gone, new), 0, len(self) - len(gone) + len(new))

    def __reduce__(self) -> Any:
        return RewardQueue, (tuple(self),)


Sorted = TypeVar("Sorted", PubKey, RewardEntry, tuple[Height, PubKey])
"""What the registry index keeps sorted: keys, reward entries, exit entries."""


def sorted_edited(items: Iterable[Sorted], remove: Iterable[Sorted], add: Iterable[Sorted]) -> list[Sorted]:
    """A new sorted list of sorted `items` without `remove` (ValueError if one is not there)
    and with `add`."""
    edited = list(items)
    for item in remove:
        i = bisect_left(edited, item)
        if i == len(edited) or edited[i] != item:
            raise ValueError("registry index does not match the registry")
        del edited[i]
    for item in add:
        insort(edited, item)
    return edited

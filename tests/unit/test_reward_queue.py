"""The persistent reward queue (`core.reward_queue.RewardQueue`): every version reads exactly
what a sorted tuple edited the same way would hold, whichever versions are edited after it and in
what order; a block's usual edit (the front entry to the back) shares the list instead of copying
it, and the list stays bounded over a long run of such edits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snode.core.reward_queue import MIN_COMPACT, RewardEntry, RewardQueue


def entry(height: int, key: int) -> RewardEntry:
    return (height, 0, key.to_bytes(32, "big"))


def usual_edit(queue: RewardQueue, height: int) -> RewardQueue:
    """What a block does: its winner, the front entry, is paid at `height` and goes to the back."""
    winner = queue[0]
    return queue.edited([winner], [(height, winner[1], winner[2])])


def test_the_usual_edit_shares_the_list_and_keeps_the_parent_as_it_was():
    parent = RewardQueue(entry(0, k) for k in range(1_000))
    child = usual_edit(parent, 1)
    assert child._items is parent._items  # no copy of the 1,000 entries
    assert tuple(parent) == tuple(sorted(entry(0, k) for k in range(1_000)))
    assert tuple(child) == tuple(sorted(entry(0, k) for k in range(1, 1_000))) + (entry(1, 0),)
    assert child[0] == entry(0, 1) and child[-1] == entry(1, 0) and len(child) == 1_000


def test_two_children_of_one_parent_do_not_see_each_other():
    parent = RewardQueue(entry(0, k) for k in range(10))
    first = usual_edit(parent, 1)
    second = parent.edited([parent[0]], [entry(2, 99)])  # the other branch's block
    assert second._items is not first._items
    assert first[-1] == entry(1, 0) and second[-1] == entry(2, 99)
    assert tuple(usual_edit(first, 2))[-2:] == (entry(1, 0), entry(2, 1))
    assert tuple(parent) == tuple(entry(0, k) for k in range(10))


def test_a_long_run_of_usual_edits_keeps_the_list_within_about_twice_the_queue():
    queue = RewardQueue(entry(0, k) for k in range(100))
    for height in range(1, 5_000):
        queue = usual_edit(queue, height)
        assert len(queue._items) <= 2 * (len(queue) + MIN_COMPACT)
    assert len(queue) == 100
    assert list(queue) == sorted(queue)


def test_taking_entries_off_the_front_shares_the_list_even_behind_a_later_version():
    parent = RewardQueue(entry(0, k) for k in range(10))
    usual_edit(parent, 1)  # appends: the parent's window no longer ends where the list does
    shorter = parent.edited([parent[0], parent[1]], [])
    assert shorter._items is parent._items
    assert tuple(shorter) == tuple(entry(0, k) for k in range(2, 10))


def test_an_entry_that_is_not_there_cannot_be_removed():
    queue = RewardQueue(entry(0, k) for k in range(5))
    with pytest.raises(ValueError, match="registry index does not match the registry"):
        queue.edited([entry(0, 99)], [])


edits = st.lists(
    st.tuples(
        st.integers(0, 30),  # which version to edit (modulo the versions made so far)
        st.lists(st.integers(0, 7), max_size=3, unique=True),  # positions to remove
        st.lists(st.tuples(st.integers(0, 40), st.integers(0, 50)), max_size=3),  # (height, key) to add
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(start=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 50)), max_size=12), edits=edits)
def test_every_version_holds_what_an_edited_sorted_tuple_holds(start, edits):
    first = tuple(sorted({entry(h, k) for h, k in start}))
    versions = [(RewardQueue(first), first)]
    for which, positions, added in edits:
        queue, model = versions[which % len(versions)]
        gone = [model[p] for p in positions if p < len(model)]
        new = [e for e in {entry(h, k) for h, k in added} if e not in model]
        edited = queue.edited(gone, new)
        versions.append((edited, tuple(sorted(set(model) - set(gone) | set(new)))))
        for queue, model in versions:  # no later edit changes an earlier version
            assert tuple(queue) == model and queue == model and len(queue) == len(model)
            assert (queue[0], queue[-1]) == (model[0], model[-1]) if model else len(queue) == 0

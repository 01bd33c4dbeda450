"""The block tree (core/chain.py): fork choice and the undo/apply path between two tips."""

from __future__ import annotations

import pytest

from snode.core.blocks import block_hash
from snode.core.chain import IndexEntry, ReorgPath, is_better_tip, reorg_path
from snode.core.state import undo_block
from snode.core.transition import apply_block
from snode.devchain import key_from_label
from snode.params import COIN


def _tree(*branches: str) -> dict[bytes, IndexEntry]:
    """An index from branch specs `parent>child>child...`; `g` is genesis at height 0."""
    index = {b"g": IndexEntry(parent=b"\x00", height=0)}
    for branch in branches:
        names = branch.split(">")
        for parent, child in zip(names, names[1:]):
            index[child.encode()] = IndexEntry(parent.encode(), index[parent.encode()].height + 1)
    return index


# g - a1 - a2 - a3 - a4
#        \- b2 - b3
#   \- c1
TREE = _tree("g>a1>a2>a3>a4", "a1>b2>b3", "g>c1")


def _path(undo: str, apply: str, fork: str) -> ReorgPath:
    return ReorgPath(
        undo=[x.encode() for x in undo.split()], apply=[x.encode() for x in apply.split()],
        fork_point=fork.encode(),
    )


@pytest.mark.parametrize(
    ("tip", "target", "expected"),
    [
        ("a4", "a4", _path("", "", "a4")),
        ("a2", "a4", _path("", "a3 a4", "a2")),
        ("a4", "a2", _path("a4 a3", "", "a2")),
        ("a4", "b3", _path("a4 a3 a2", "b2 b3", "a1")),
        ("b3", "a4", _path("b3 b2", "a2 a3 a4", "a1")),
        ("a3", "b3", _path("a3 a2", "b2 b3", "a1")),
        ("b3", "c1", _path("b3 b2 a1", "c1", "g")),
        ("c1", "a4", _path("c1", "a1 a2 a3 a4", "g")),
        ("g", "b3", _path("", "a1 b2 b3", "g")),
    ],
)
def test_reorg_path(tip, target, expected):
    assert reorg_path(TREE, tip.encode(), target.encode()) == expected


def test_reorg_path_undo_then_apply_reaches_the_target():
    path = reorg_path(TREE, b"a4", b"b3")
    # Undoing walks parent links from the tip down to the fork point...
    here = b"a4"
    for block in path.undo:
        assert block == here
        here = TREE[block].parent
    assert here == path.fork_point
    # ...and applying walks child by child up to the target.
    for block in path.apply:
        assert TREE[block].parent == here
        here = block
    assert here == b"b3"


@pytest.mark.parametrize(("tip", "target"), [(b"zz", b"a1"), (b"a1", b"zz")])
def test_reorg_path_to_an_unknown_block_raises_key_error(tip, target):
    with pytest.raises(KeyError):
        reorg_path(TREE, tip, target)


@pytest.mark.parametrize(
    ("current", "candidate", "better"), [(5, 6, True), (5, 5, False), (5, 4, False), (0, 1, True)]
)
def test_greatest_height_wins_and_the_first_seen_stays_at_equal_height(current, candidate, better):
    assert is_better_tip(current, candidate) is better


def test_reorg_on_real_chains_undoes_and_applies_to_the_other_tip(chain):
    alice, bob = key_from_label("alice"), key_from_label("bob")
    chain.mine(2)
    other = chain.copy()
    chain.transfer(alice, bob.public, COIN)
    chain.mine(3)
    other.transfer(bob, alice.public, 2 * COIN)
    other.mine(4)

    index, undos, blocks = {}, {}, {}
    for c in (chain, other):
        for block, undo in zip(c.blocks[1:], c.undos):
            h = block_hash(block.header)
            index[h] = IndexEntry(block.header.prev_hash, block.header.height)
            undos[h], blocks[h] = undo, block
    genesis = block_hash(chain.blocks[0].header)
    index[genesis] = IndexEntry(b"\x00" * 32, 0)

    path = reorg_path(index, chain.state.tip_hash, other.state.tip_hash)
    assert len(path.undo) == 3 and len(path.apply) == 4
    assert path.fork_point == block_hash(chain.blocks[2].header)
    state = chain.state
    for h in path.undo:
        state = undo_block(state, undos[h])
    assert state.tip_hash == path.fork_point
    for h in path.apply:
        state, _ = apply_block(state, blocks[h], chain.consensus)
    assert state == other.state

"""Fork choice (core/chain.py), and a switch between two branches by the core's undo and apply."""

from __future__ import annotations

import pytest

from snode.core.blocks import block_hash
from snode.core.chain import is_better_tip
from snode.core.state import undo_block
from snode.core.transition import apply_block
from snode.devchain import key_from_label
from snode.params import COIN


@pytest.mark.parametrize(
    ("current", "candidate", "better"), [(5, 6, True), (5, 5, False), (5, 4, False), (0, 1, True)]
)
def test_greatest_height_wins_and_the_first_seen_stays_at_equal_height(current, candidate, better):
    assert is_better_tip(current, candidate) is better


def test_undoing_to_the_fork_and_applying_the_other_branch_gives_the_other_state(chain):
    """A switch of branches as `node.batches.reorganization` makes it: the tip's blocks undone
    down to the fork point, then the other branch's applied, give the other branch's state."""
    alice, bob = key_from_label("alice"), key_from_label("bob")
    chain.mine(2)
    other = chain.copy()
    chain.transfer(alice, bob.public, COIN)
    chain.mine(3)
    other.transfer(bob, alice.public, 2 * COIN)
    other.mine(4)

    state = chain.state
    for undo in reversed(chain.undos[2:]):
        state = undo_block(state, undo)
    assert state.tip_hash == block_hash(chain.blocks[2].header)
    for block in other.blocks[3:]:
        state, _ = apply_block(state, block, chain.consensus)
    assert state == other.state

"""Checkpoints and finality (`core.finality`, issue #12): which heights are checkpointed and by
whom, votes and their assembly into a checkpoint, the guard clauses a block carrying a checkpoint
meets, and the immutable height that stops reorganisations."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snode.core.crypto import hash32
from snode.core.encoding import decode, encode
from snode.core.errors import InvalidBlock
from snode.core.finality import (
    Checkpoint,
    CheckpointVote,
    accepts_vote,
    assemble_checkpoint,
    check_checkpoint_height,
    checkpoint_checks,
    checkpoint_message,
    checkpoint_quorum,
    immutable_height,
    is_checkpoint_height,
    reorg_allowed,
)
from snode.core.pulse import validator_message
from snode.core.quorums import obligations_quorum_from_active
from snode.core.state import Quorum
from snode.core.transition import verify_serially
from snode.devchain import key_from_label
from snode.params import DEVNET, MAINNET

KEYS = {k.public: k for k in (key_from_label(f"finality sn {i}") for i in range(30))}
ACTIVE = sorted(KEYS)
BLOCK = hash32(b"the block at height 8")
NID = DEVNET.network_id


def votes_of(quorum: Quorum, count: int, block_hash: bytes = BLOCK) -> dict[bytes, bytes]:
    """Signatures of the first `count` members, by member."""
    message = checkpoint_message(NID, quorum.height, block_hash)
    return {m: KEYS[m].sign(message) for m in quorum.members[:count]}


def quorum8(active: int = 6) -> Quorum:
    quorum = checkpoint_quorum(ACTIVE[:active], BLOCK, 8, DEVNET)
    assert quorum is not None
    return quorum


# --- who checkpoints what ---------------------------------------------------------------------

def test_every_fourth_height_is_checkpointed_but_genesis():
    assert [h for h in range(0, 17) if is_checkpoint_height(h, DEVNET)] == [4, 8, 12, 16]


def test_the_checkpoint_quorum_is_drawn_from_the_active_set_by_the_blocks_hash():
    quorum = quorum8(active=25)
    assert quorum.height == 8 and quorum.needed == 14
    assert len(quorum.members) == 20 == len(set(quorum.members))
    assert set(quorum.members) <= set(ACTIVE[:25])
    assert quorum == checkpoint_quorum(ACTIVE[:25], BLOCK, 8, DEVNET)  # deterministic
    other = checkpoint_quorum(ACTIVE[:25], hash32(b"another block"), 8, DEVNET)
    assert other is not None and other.members != quorum.members
    # Not the obligations quorum of the same block.
    assert quorum.members[:10] != obligations_quorum_from_active(ACTIVE[:25], BLOCK, 8, (), DEVNET).members


def test_a_small_devnet_checkpoints_with_every_active_node():
    quorum = quorum8(active=5)
    assert sorted(quorum.members) == ACTIVE[:5] and quorum.needed == 4


def test_no_checkpoint_quorum_off_the_interval_or_with_too_few_active_nodes():
    assert checkpoint_quorum(ACTIVE[:6], BLOCK, 9, DEVNET) is None
    assert checkpoint_quorum(ACTIVE[:3], BLOCK, 8, DEVNET) is None  # authority mode
    assert checkpoint_quorum(ACTIVE[:19], BLOCK, 8, MAINNET) is None  # no full quorum
    mainnet = checkpoint_quorum(ACTIVE[:20], BLOCK, 8, MAINNET)
    assert mainnet is not None and mainnet.needed == 14


# --- votes and checkpoints --------------------------------------------------------------------

def test_a_members_vote_for_this_chains_block_is_accepted():
    quorum = quorum8()
    member = quorum.members[2]
    signed = KEYS[member].sign(checkpoint_message(NID, 8, BLOCK))
    assert accepts_vote(CheckpointVote(8, BLOCK, member, signed), quorum, BLOCK, NID)
    outsider = next(k for k in ACTIVE if k not in quorum.members)
    refused = [
        CheckpointVote(8, BLOCK, outsider, KEYS[outsider].sign(checkpoint_message(NID, 8, BLOCK))),
        CheckpointVote(8, BLOCK, member, KEYS[outsider].sign(checkpoint_message(NID, 8, BLOCK))),
        CheckpointVote(12, BLOCK, member, KEYS[member].sign(checkpoint_message(NID, 12, BLOCK))),
        CheckpointVote(8, BLOCK, member, KEYS[member].sign(validator_message(NID, BLOCK))),
        CheckpointVote(8, BLOCK, member, KEYS[member].sign(checkpoint_message(MAINNET.network_id, 8, BLOCK))),
    ]
    for vote in refused:
        assert not accepts_vote(vote, quorum, BLOCK, NID), vote
    other_block = hash32(b"a fork's block at 8")
    fork_vote = CheckpointVote(8, other_block, member, KEYS[member].sign(checkpoint_message(NID, 8, other_block)))
    assert not accepts_vote(fork_vote, quorum, BLOCK, NID)


def test_votes_make_a_checkpoint_once_two_thirds_of_the_quorum_signed():
    quorum = quorum8()
    assert quorum.needed == 4
    assert assemble_checkpoint(quorum, BLOCK, votes_of(quorum, 3)) is None
    checkpoint = assemble_checkpoint(quorum, BLOCK, votes_of(quorum, 4))
    assert checkpoint is not None
    assert (checkpoint.height, checkpoint.block_hash, checkpoint.signers) == (8, BLOCK, 0b1111)
    checks = checkpoint_checks(checkpoint, quorum, BLOCK, NID)
    assert [c.public for c in checks] == list(quorum.members[:4])
    assert verify_serially(checks) == -1


def test_a_checkpoint_travels_in_canonical_bytes():
    quorum = quorum8()
    checkpoint = assemble_checkpoint(quorum, BLOCK, votes_of(quorum, 5))
    assert decode(encode(checkpoint), Checkpoint) == checkpoint
    vote = CheckpointVote(8, BLOCK, quorum.members[0], bytes(64))
    assert decode(encode(vote), CheckpointVote) == vote


def test_a_checkpoint_of_another_block_or_height_is_refused():
    quorum = quorum8()
    checkpoint = assemble_checkpoint(quorum, BLOCK, votes_of(quorum, 4))
    assert checkpoint is not None
    other = hash32(b"this chain's block at 8")
    with pytest.raises(InvalidBlock, match=f"checkpoint of height 8 is for block {BLOCK.hex()[:16]}, "
                       f"not this chain's {other.hex()[:16]}"):
        checkpoint_checks(checkpoint, quorum, other, NID)
    with pytest.raises(InvalidBlock, match="checked against the quorum of height 12"):
        checkpoint_checks(checkpoint, Quorum(12, quorum.members, quorum.needed), BLOCK, NID)


def test_a_checkpoint_with_an_outsider_a_wrong_count_or_too_few_votes_is_refused():
    quorum = quorum8()
    good = assemble_checkpoint(quorum, BLOCK, votes_of(quorum, 4))
    assert good is not None
    cases = [
        (Checkpoint(8, BLOCK, 0b1000111, good.signatures), "names signer 6, but its quorum has 6 members"),
        (Checkpoint(8, BLOCK, 0b11111, good.signatures), "names 5 signers in its bitset but carries 4"),
        (Checkpoint(8, BLOCK, 0b111, good.signatures[:3]), "has 3 signatures; 4 are needed"),
    ]
    for checkpoint, reason in cases:
        with pytest.raises(InvalidBlock, match=f"checkpoint of height 8 {reason}"):
            checkpoint_checks(checkpoint, quorum, BLOCK, NID)


def test_a_forged_vote_is_caught_by_the_verifier_with_the_member_named():
    quorum = quorum8()
    votes = votes_of(quorum, 4)
    forger = quorum.members[1]
    votes[forger] = KEYS[quorum.members[5]].sign(checkpoint_message(NID, 8, BLOCK))
    checkpoint = assemble_checkpoint(quorum, BLOCK, votes)
    assert checkpoint is not None
    checks = checkpoint_checks(checkpoint, quorum, BLOCK, NID)
    assert checks[verify_serially(checks)].what == f"checkpoint of height 8 vote by {forger.hex()[:16]}"


@pytest.mark.parametrize("checkpoint, block, last, reason", [
    (8, 10, 4, None), (4, 10, 0, None), (8, 9, 0, None),
    (6, 10, 4, "carries a checkpoint of height 6, not a multiple of 4"),
    (0, 10, 0, "carries a checkpoint of height 0, not a multiple of 4"),
    (12, 12, 8, "carries a checkpoint of height 12, not below it"),
    (16, 12, 8, "carries a checkpoint of height 16, not below it"),
    (8, 13, 8, "carries a checkpoint of height 8; the chain already carries one of height 8"),
    (4, 13, 8, "carries a checkpoint of height 4; the chain already carries one of height 8"),
])
def test_a_block_carries_each_checkpoint_once_in_order_and_after_its_height(checkpoint, block, last, reason):
    if reason is None:
        check_checkpoint_height(checkpoint, block, last, DEVNET)
        return
    with pytest.raises(InvalidBlock, match=f"block {block} {reason}"):
        check_checkpoint_height(checkpoint, block, last, DEVNET)


# --- finality ---------------------------------------------------------------------------------

@pytest.mark.parametrize("heights, expected", [
    ([], 0), ([4], 0), ([4, 8], 4), ([4, 8, 12], 8), ([12, 4, 8], 8), ([8, 8], 0), ([4, 16], 4),
])
def test_the_immutable_height_is_the_second_highest_checkpoint(heights, expected):
    assert immutable_height(heights) == expected


def test_a_reorganisation_may_not_undo_a_final_block():
    assert reorg_allowed(fork_height=0, immutable_height=0)
    assert reorg_allowed(fork_height=8, immutable_height=8)  # block 8 stays
    assert reorg_allowed(fork_height=11, immutable_height=8)
    assert not reorg_allowed(fork_height=7, immutable_height=8)  # would replace block 8


@given(st.sets(st.integers(1, 100).map(lambda i: 4 * i), max_size=12), st.integers(0, 420))
def test_a_block_with_two_checkpoints_at_or_above_it_is_final(heights, height):
    final = immutable_height(heights)
    two_above = len([h for h in heights if h >= height]) >= 2
    assert (0 < height <= final) == (0 < height and two_above)

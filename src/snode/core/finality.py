"""Checkpoints and finality: blocks no reorganisation may undo (DESIGN.md section 6).

Every `checkpoint_interval` blocks (4) a checkpoint quorum signs the hash of the block at that
height: `checkpoint_quorum(active)` members (20; at most the active count on devnet and
regtest), drawn from the active set at that height by that block's hash, so that every node
draws the same quorum from the chain it has. `checkpoint_votes_needed` (ceil(2/3)) votes make a
checkpoint. Members gossip their `CheckpointVote`s over quorumnet; a block with two checkpoints
at or above it is final: the immutable height is the second-highest checkpoint height, and no
reorganisation may undo a block at or below it (`reorg_allowed`).

On-chain checkpoints (the design proposed for integration). A checkpoint travels in a later
block: a block may carry the `Checkpoint` of one earlier checkpoint height above the last one its
chain carries (`check_checkpoint_height`), inside what the block hash covers (a `checkpoint`
field of the block committed to by the header, as `tx_root` commits to the transactions), and
its signatures are checked against that height's quorum like the block's own validators
(`checkpoint_checks`). The leader puts in the checkpoint it has collected votes for, so
validators sign it with the block and it cannot be stripped in relay.

Why on-chain rather than Oxen's checkpoints beside the chain: in Oxen each node stores the
checkpoints it happened to receive as gossiped votes, so nodes that missed votes, restarted or
synced later disagree on which blocks are immutable; checkpoints on alternative chains were lost
or not counted (oxen-core #716, #829) and reorganisations driven by checkpoints arriving out of
band looped (#742). Here the checkpoints are part of the chain: a node that has the chain has
exactly its checkpoints, a syncing node receives them with the blocks, a competing chain carries
its own, and finality is a function of the chain alone, the same on every node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from snode.core.blocks import Checkpoint
from snode.core.crypto import verify
from snode.core.encoding import domain_hash
from snode.core.errors import InvalidBlock
from snode.core.pulse import signer_set, signers
from snode.core.quorums import _shuffled
from snode.core.sigchecks import SigCheck
from snode.core.state import Quorum
from snode.core.types import Hash32, Height, PubKey, Signature
from snode.params import NetworkParams


class CheckpointVote(msgspec.Struct, frozen=True, array_like=True, tag=4, gc=False):
    """Quorumnet: one checkpoint-quorum member's signature of the block hash at a height."""

    height: Height
    block_hash: Hash32
    voter: PubKey
    signature: Signature
    """Over `checkpoint_message(network_id, height, block_hash)`."""


def is_checkpoint_height(height: int, params: NetworkParams) -> bool:
    """True when the block at `height` is to be checkpointed (never genesis)."""
    return height > 0 and height % params.checkpoint_interval == 0


def checkpoint_quorum(
    active: Sequence[bytes], block_hash: bytes, height: int, params: NetworkParams
) -> Quorum | None:
    """The quorum that checkpoints the block at `height` (`block_hash` is its hash, `active` the
    sorted active keys after it), or None: not a checkpoint height, a network where service
    nodes never produce blocks (regtest), or too few active nodes for service nodes to produce
    blocks or for a full quorum."""
    if (not params.sn_blocks or not is_checkpoint_height(height, params)
            or len(active) < params.min_active_sns):
        return None
    size = params.checkpoint_quorum(len(active))
    if size == 0:
        return None
    # The same deterministic shuffle as every other quorum, in a domain of its own.
    members = _shuffled(active, block_hash + b"checkpoint", size)
    return Quorum(height=height, members=members, needed=params.checkpoint_votes_needed(size))


def checkpoint_message(network_id: int, height: int, block_hash: bytes) -> bytes:
    """What a checkpoint-quorum member signs."""
    return domain_hash(b"checkpoint", network_id, height.to_bytes(8, "big") + block_hash)


def accepts_vote(
    vote: CheckpointVote, quorum: Quorum, block_hash: bytes, network_id: int
) -> bool:
    """True when `vote` is a good vote of `quorum` for this chain's block (`block_hash`) at the
    quorum's height: what a node keeps of the votes gossiped to it."""
    return (
        vote.height == quorum.height and vote.block_hash == block_hash
        and vote.voter in quorum.members
        and verify(vote.voter, checkpoint_message(network_id, vote.height, block_hash),
                   vote.signature)
    )


def assemble_checkpoint(
    quorum: Quorum, block_hash: bytes, votes: Mapping[bytes, bytes]
) -> Checkpoint | None:
    """The checkpoint of the accepted `votes` (voter -> signature), or None while fewer than
    the quorum needs."""
    bitset, signatures = signer_set(quorum.members, votes)
    if len(signatures) < quorum.needed:
        return None
    return Checkpoint(quorum.height, block_hash, bitset, signatures)


def check_checkpoint_height(
    checkpoint_height: int, block_height: int, last_checkpoint: int, params: NetworkParams
) -> None:
    """A block at `block_height` may carry the checkpoint of `checkpoint_height` (the chain
    below it last carried the checkpoint of `last_checkpoint`, 0 for none): an earlier
    checkpoint height, above the last one, so that each is carried once and in order."""
    if not is_checkpoint_height(checkpoint_height, params):
        raise InvalidBlock(
            f"block {block_height} carries a checkpoint of height {checkpoint_height}, not a "
            f"multiple of {params.checkpoint_interval}"
        )
    if checkpoint_height >= block_height:
        raise InvalidBlock(
            f"block {block_height} carries a checkpoint of height {checkpoint_height}, not "
            "below it"
        )
    if checkpoint_height <= last_checkpoint:
        raise InvalidBlock(
            f"block {block_height} carries a checkpoint of height {checkpoint_height}; the "
            f"chain already carries one of height {last_checkpoint}"
        )


def checkpoint_checks(
    checkpoint: Checkpoint, quorum: Quorum, block_hash: bytes, network_id: int
) -> list[SigCheck]:
    """The signature checks of a checkpoint against its quorum, after InvalidBlock for a
    checkpoint of another block than this chain's (`block_hash`, at the quorum's height), an
    outsider, a count that does not match the bitset, or too few signers."""
    what = f"checkpoint of height {checkpoint.height}"
    if checkpoint.height != quorum.height:
        raise InvalidBlock(f"{what} is checked against the quorum of height {quorum.height}")
    if checkpoint.block_hash != block_hash:
        raise InvalidBlock(
            f"{what} is for block {checkpoint.block_hash.hex()[:16]}, not this chain's "
            f"{block_hash.hex()[:16]}"
        )
    message = checkpoint_message(network_id, checkpoint.height, block_hash)
    return [
        SigCheck(member, message, signature, f"{what} vote by {member.hex()[:16]}")
        for member, signature in signers(
            quorum.members, checkpoint.signers, checkpoint.signatures, quorum.needed, what
        )
    ]


def immutable_height(checkpoint_heights: Iterable[int]) -> int:
    """The highest final height: a block with two checkpoints at or above it is final, so this
    is the second-highest checkpoint height (0 before two exist)."""
    top = sorted(set(checkpoint_heights), reverse=True)
    return top[1] if len(top) >= 2 else 0


def reorg_allowed(fork_height: int, immutable_height: int) -> bool:
    """May the chain switch to a branch that shares its blocks up to `fork_height` (the last
    common block) and replaces those above? Only if no final block is among them."""
    return fork_height >= immutable_height


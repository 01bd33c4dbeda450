"""Checkpoint duties: vote for the blocks this node's checkpoint quorums sign, collect the votes,
and share the checkpoints they make (`core.finality`).

At every checkpoint height the chain records the block's checkpoint quorum (`ChainState.
checkpoints`). Each member signs the block hash and sends its `CheckpointVote` to the other
members over quorumnet; a member that holds `needed` votes assembles the `Checkpoint` and
gossips it over P2P (`NewCheckpoint`, relayed once by every node that finds it valid against
its own chain), so that whoever leads a coming round has it and puts it into its block. Once a
block carries it, the checkpoint is part of the chain: every node agrees on what is final.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from snode.core.blocks import Checkpoint
from snode.core.encoding import encode
from snode.core.equivocation import verified, vote_proof
from snode.core.errors import SnodeError
from snode.core.finality import (
    CheckpointVote,
    accepts_vote,
    assemble_checkpoint,
    checkpoint_checks,
    checkpoint_message,
)
from snode.core.state import ChainState, CheckpointSlot, Quorum
from snode.net import protocol as P
from snode.net.events import CheckpointMessage, QuorumMessageReceived
from snode.net.peers import PeerManager
from snode.net.quorum_guard import SCORE_FORGED, SCORE_NOT_OURS
from snode.node.events import BlocksAdopted
from snode.node.node import Node

if TYPE_CHECKING:
    from snode.net.quorumnet import QuorumNet
    from snode.services.equivocation import EquivocationWatch

log = logging.getLogger(__name__)

MAX_SIGNED = 64
"""Heights whose vote this daemon remembers (the chain waits on at most four at a time)."""
MAX_FOREIGN = 256
"""Votes for other blocks kept for a proof (each member can send only its own: quorumnet ties a
vote to its sender)."""


def _quorum(slot: CheckpointSlot) -> Quorum:
    return Quorum(height=slot.height, members=slot.members, needed=slot.needed)


class CheckpointDuties:
    """Votes, collected votes and complete checkpoints of the recent checkpoint heights."""

    def __init__(self, node: Node, peers: PeerManager, quorumnet: QuorumNet | None,
                 equivocations: EquivocationWatch | None = None) -> None:
        self.node = node
        self.peers = peers
        self.quorumnet = quorumnet
        self.equivocations = equivocations
        """Where a proof that a member voted for two blocks at one height goes."""
        self.signed: dict[int, bytes | None] = {h: None for h in _pending(node.state)}
        """Height -> the block hash this daemon voted for there (None: one it may have voted on
        before it started, which it leaves alone): it never signs a second hash for one height."""
        self.foreign: dict[tuple[int, bytes], CheckpointVote] = {}
        """(height, voter) -> a vote of that member for another block than ours, kept for a proof
        should its vote for ours come too (`MAX_FOREIGN`)."""
        self.votes: dict[tuple[int, bytes], dict[bytes, bytes]] = {}
        """(height, block hash) -> voter -> signature, for the chain's pending slots."""
        self.complete: dict[int, Checkpoint] = {}
        """Checkpoints ready to be carried, by height."""
        node.subscribe(BlocksAdopted, self._on_blocks)
        node.subscribe(QuorumMessageReceived, self._on_vote, topics=(CheckpointVote,))
        node.subscribe(CheckpointMessage, self._on_checkpoint)

    def best(self, state: ChainState) -> Checkpoint | None:
        """The checkpoint a block after `state` should carry: the lowest complete one the chain
        has not carried yet (carried in order, each once)."""
        pending = _pending(state)
        for height in sorted(self.complete):
            slot = pending.get(height)
            if slot is not None and self.complete[height].block_hash == slot.block_hash:
                return self.complete[height]
        return None

    # --- events -------------------------------------------------------------------------------

    def _on_blocks(self, event: BlocksAdopted) -> None:
        state = self.node.state
        pending = _pending(state)
        # Forget what the chain no longer waits for.
        self.votes = {k: v for k, v in self.votes.items() if k[0] in pending}
        self.foreign = {k: v for k, v in self.foreign.items() if k[0] in pending}
        self.complete = {h: c for h, c in self.complete.items() if h in pending}
        identity = self.node.identity
        if identity is None or self.quorumnet is None:
            return
        me = identity.key
        for slot in pending.values():
            collected = self.votes.setdefault((slot.height, slot.block_hash), {})
            if me.public not in slot.members or me.public in collected:
                continue
            if self.signed.setdefault(slot.height, slot.block_hash) != slot.block_hash:
                continue  # voted on this height already (or may have, before a restart)
            if len(self.signed) > MAX_SIGNED:
                del self.signed[min(self.signed)]
            message = checkpoint_message(self.node.params.network_id, slot.height, slot.block_hash)
            vote = CheckpointVote(slot.height, slot.block_hash, me.public, me.sign(message))
            self._add(slot, vote)
            for member in slot.members:
                self.quorumnet.send(member, vote)

    def _on_vote(self, event: QuorumMessageReceived) -> None:
        """A member's vote: kept if it is good; one for a block not ours, from outside the
        quorum, or with a bad signature costs the member (`QuorumNet.junk`)."""
        vote = event.message
        if not isinstance(vote, CheckpointVote):
            return
        slot = _pending(self.node.state).get(vote.height)
        if slot is None:
            return  # a height we no longer, or do not yet, wait for: late or early, not junk
        if vote.block_hash == slot.block_hash and vote.voter in self.votes.get((slot.height, slot.block_hash), {}):
            return  # a vote we hold, whatever its signature (its signer can make any number): not checked again
        if vote.block_hash != slot.block_hash or vote.voter not in slot.members:
            self._foreign(slot, vote)
            self._junk(event.sender, SCORE_NOT_OURS,
                       "sent checkpoint votes for a block that is not ours, or from outside its quorum")
            return
        if not accepts_vote(vote, _quorum(slot), slot.block_hash, self.node.params.network_id):
            self._junk(event.sender, SCORE_FORGED, "sent a checkpoint vote whose signature does not verify")
            return
        self._add(slot, vote)
        other = self.foreign.pop((vote.height, vote.voter), None)
        if other is not None:
            self._prove(vote, other)

    def _foreign(self, slot: CheckpointSlot, vote: CheckpointVote) -> None:
        """A vote for another block at a pending height: the proof of an equivocation if we hold
        the same member's vote for ours, else kept a while in case that one comes."""
        signature = self.votes.get((slot.height, slot.block_hash), {}).get(vote.voter)
        if signature is not None:
            self._prove(CheckpointVote(slot.height, slot.block_hash, vote.voter, signature), vote)
            return
        if vote.block_hash == slot.block_hash:
            return  # ours, from outside its quorum: no equivocation
        if len(self.foreign) >= MAX_FOREIGN:
            del self.foreign[next(iter(self.foreign))]
        self.foreign[(vote.height, vote.voter)] = vote

    def _prove(self, ours: CheckpointVote, other: CheckpointVote) -> None:
        """Two votes of one member for one height: a proof, once the other's signature verifies."""
        if self.equivocations is None or ours.block_hash == other.block_hash:
            return
        proof = vote_proof(ours, other)
        if verified(proof, self.node.params.network_id) is None:
            self.equivocations.found(proof)

    def _junk(self, member: bytes, points: int, reason: str) -> None:
        if self.quorumnet is not None:
            self.quorumnet.junk(member, points, reason)

    def _add(self, slot: CheckpointSlot, vote: CheckpointVote) -> None:
        collected = self.votes.setdefault((slot.height, slot.block_hash), {})
        collected[vote.voter] = vote.signature
        if slot.height in self.complete:
            return
        checkpoint = assemble_checkpoint(_quorum(slot), slot.block_hash, collected)
        if checkpoint is not None:
            self.complete[slot.height] = checkpoint
            log.info("checkpoint of block %d %s: %d of %d votes", slot.height,
                     slot.block_hash.hex()[:16], len(checkpoint.signatures), len(slot.members))
            self.peers.broadcast(P.NewCheckpoint(encode(checkpoint)))

    def _on_checkpoint(self, event: CheckpointMessage) -> None:
        """A checkpoint from a peer: kept and passed on if it is valid for our chain (a wrong
        one is the sender's fault: banned)."""
        checkpoint = event.checkpoint
        slot = _pending(self.node.state).get(checkpoint.height)
        if slot is None or checkpoint.height in self.complete:
            return
        try:
            checks = checkpoint_checks(checkpoint, _quorum(slot), slot.block_hash, self.node.params.network_id)
        except SnodeError as err:
            if checkpoint.block_hash == slot.block_hash:
                self.peers.ban_peer(event.peer, f"sent an invalid checkpoint: {err.reason}")
            return  # a checkpoint of another chain's block: not ours to judge
        bad = self.node.verifier(checks)
        if bad >= 0:
            self.peers.ban_peer(event.peer, f"sent a checkpoint with a forged vote: {checks[bad].what}")
            return
        self.complete[checkpoint.height] = checkpoint
        self.peers.broadcast(P.NewCheckpoint(encode(checkpoint)), skip=event.peer)


def _pending(state: ChainState) -> dict[int, CheckpointSlot]:
    """The chain's checkpoint heights whose checkpoint no block carries yet, above the last one
    carried."""
    carried = max((h for h, s in state.checkpoints.items() if s.carried), default=0)
    return {h: s for h, s in state.checkpoints.items() if not s.carried and h > carried}

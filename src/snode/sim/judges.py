"""The quorums' work in the simulation: uptime proofs, obligations votes and checkpoint votes.

Proofs. Every node sends a real signed first proof, which the observer checks
(`Node.accept_proof`). After that a running node proves every `proof_interval` at its own phase;
the observer's proof book gets, for each node it judges, the last proof that node sent (written
when the judge reads it, not 2N times a block: the verdict is the same, and a 10,000-node run
would otherwise spend its time writing a dictionary). A sample of real signed proofs per block
goes through `Node.accept_proof` to measure what a proof costs a node.

Obligations. The tip's quorum judges the nodes it has reason to (down, cut off, back, waiting
for activation, or a validator that did not sign the last block) with the real
`core.obligations.judge`; each member still running signs its vote, which reaches the collecting
member unless lost or cut off; `needed` votes make the state change, which goes into the mempool
and from there into a block. A daemon judges every node every block; this judges only those
whose verdict can be other than "nothing" (a running, active node with a clean record gets
none), which is what keeps a 10,000-node run fast.

Checkpoints. When a checkpoint height is adopted, the running members of its quorum sign it; the
votes that arrive are checked (`finality.accepts_vote`) and the next leader carries the earliest
checkpoint that has enough.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from snode.core.blocks import Block, Checkpoint
from snode.core.finality import (
    CheckpointVote,
    accepts_vote,
    assemble_checkpoint,
    checkpoint_message,
    is_checkpoint_height,
)
from snode.core.obligations import judge
from snode.core.proofs import UptimeProof, make_proof
from snode.core.pulse import signer_indexes
from snode.core.service_nodes import StateChangeKind
from snode.core.state import ChainState, Quorum, last_checkpoint, registry_index
from snode.core.state_change import state_change_tx
from snode.core.transactions import StateChange, Transaction, Vote, state_change_hash
from snode.params import STATE_CHANGE_WINDOW
from snode.sim.config import SimConfig
from snode.sim.stage import Stage

ACTIVATIONS_PER_BLOCK: Final = 1_000
"""Verdicts the quorum sends per block while nodes wait for activation (a 2 MB block holds
about 2,600 state changes of 7 votes)."""
SIM_IP: Final = "44.0.0.1"
"""The public IP every simulated node's proof declares."""


@dataclass
class JudgeCounts:
    """What the quorums' work cost, counted by `Judges` and reported by `sim.report.Tally`."""

    vote_messages: int = 0
    """Obligations votes sent, one per member and receiver."""
    checkpoint_messages: int = 0
    """Checkpoint votes sent, one per member and receiver."""
    verdicts_short: int = 0
    """Verdicts that got fewer votes than the quorum needs (lost on the way)."""
    proofs_checked: int = 0
    """Real signed proofs the observer checked to time them."""
    proof_check_s: float = 0.0
    """The CPU time of those checks."""


class Judges:
    """The obligations and checkpoint quorums of the simulated network, acting on `stage`; a
    state change goes to `submit` (the world's, which counts a refusal)."""

    def __init__(self, stage: Stage, config: SimConfig, submit: Callable[[Transaction], bool]) -> None:
        self.stage = stage
        self.config = config
        self.submit = submit
        self.counts = JudgeCounts()
        self.watched: set[bytes] = set()
        self.pending: dict[bytes, int] = {}
        """Node -> height of the quorum whose state change is in the mempool."""
        self.phase: dict[bytes, float] = {}
        self.checkpoint_votes: dict[int, dict[bytes, bytes]] = {}

    def watch(self, pubkey: bytes) -> None:
        self.watched.add(pubkey)

    def forget(self, pubkey: bytes) -> None:
        self.watched.discard(pubkey)
        self.pending.pop(pubkey, None)
        self.phase.pop(pubkey, None)

    # --- proofs -------------------------------------------------------------------------------

    def first_proofs(self, pubkeys: list[bytes]) -> None:
        """Every node's first proof, signed and checked."""
        stage = self.stage
        now = int(stage.net.now)
        interval = stage.params.proof_interval
        for pubkey in pubkeys:
            self.phase[pubkey] = now - stage.rng.uniform(0, interval)
            stage.node.accept_proof(self._proof(pubkey, now), now)
            self.watched.add(pubkey)

    def _proof(self, pubkey: bytes, now: int) -> UptimeProof:
        # One endpoint for every node, the one `_refresh` records: an endpoint that moved at each
        # proof would be refused (`ProofBook.check_endpoint`), and the simulation probes nothing.
        return make_proof(self.stage.keys[pubkey], self.stage.params, timestamp=now, public_ip=SIM_IP,
                          p2p_port=self.stage.params.p2p_port, quorumnet_port=self.stage.params.quorumnet_port,
                          version="sim")

    def _last_sent(self, pubkey: bytes, now: float) -> int:
        """When the node last proved: the last tick of its phase before now, or before it went
        down or was cut off."""
        until = self.stage.down_since.get(pubkey, now)
        interval = self.stage.params.proof_interval
        return int(until - (until - self.phase.get(pubkey, 0.0)) % interval)

    def _refresh(self, pubkey: bytes, now: float) -> None:
        node = self.stage.node
        last = self._last_sent(pubkey, now)
        if last > node.proofs.last_accepted(pubkey):
            node.record_proof(pubkey, last, (SIM_IP, self.stage.params.quorumnet_port))

    def sample_proofs(self) -> None:
        """Real proofs of a few running nodes, checked by the observer (timed)."""
        stage = self.stage
        now = int(stage.net.now)
        active = registry_index(stage.node.state).active_keys
        counts = self.counts
        for _ in range(min(self.config.proof_sample, len(active))):
            pubkey = stage.rng.choice(active)
            if not stage.is_up(pubkey) or stage.node.proofs.last_accepted(pubkey) > now - stage.params.proof_interval:
                continue
            proof = self._proof(pubkey, now)
            started = time.process_time()
            stage.node.accept_proof(proof, now)
            counts.proof_check_s += time.process_time() - started
            counts.proofs_checked += 1

    # --- obligations --------------------------------------------------------------------------

    def judge(self) -> None:
        """The tip's quorum judges the watched nodes and submits what it agrees on."""
        stage = self.stage
        state = stage.node.state
        quorum = state.quorums.get(state.height)
        if quorum is None:
            return
        by_authority = quorum.members == stage.node.consensus.authorities
        voters = [m for m in quorum.members if m in stage.keys and (by_authority or stage.is_up(m))]
        budget = stage.params.min_active_sns if by_authority else ACTIVATIONS_PER_BLOCK
        now = stage.net.now
        for pubkey in sorted(self.watched):  # not the set's order: that differs from one process to the next
            if budget <= 0:
                break
            sn = state.service_nodes.get(pubkey)
            if sn is None:
                self.forget(pubkey)
                continue
            if state.height - self.pending.get(pubkey, -STATE_CHANGE_WINDOW) < STATE_CHANGE_WINDOW:
                continue
            self._refresh(pubkey, now)
            verdict = judge(sn, last_proof=stage.node.proofs.last_accepted(pubkey), now=int(now),
                            params=stage.params, may_decommission=True,
                            participation=stage.node.participation.of(pubkey), height=state.height + 1)
            if verdict is None:
                if sn.active and stage.is_up(pubkey):
                    self.watched.discard(pubkey)
                continue
            budget -= 1
            self._vote(state, quorum, voters, pubkey, verdict.kind, verdict.reason)

    def _vote(self, state: ChainState, quorum: Quorum, voters: list[bytes], pubkey: bytes,
              kind: StateChangeKind, reason: int) -> None:
        """Each running member signs; the votes that reach the collector make the change."""
        stage = self.stage
        message = state_change_hash(stage.params.network_id, pubkey, kind, reason, state.height)
        arrived: list[Vote] = []
        for voter in voters:
            signature = stage.keys[voter].sign(message)
            self.counts.vote_messages += len(quorum.members) - 1
            if self.config.loss and stage.rng.random() < self.config.loss:
                continue
            arrived.append(Vote(voter, signature))
        if len(arrived) < quorum.needed:
            self.counts.verdicts_short += 1
            return
        tx = state_change_tx(arrived[:quorum.needed], state.service_nodes[pubkey], kind, reason, state.height)
        if self.submit(tx):
            self.pending[pubkey] = state.height

    # --- after each block ---------------------------------------------------------------------

    def after_block(self, block: Block) -> None:
        """Settle what the block did; sign its checkpoint if it is a checkpoint height."""
        stage = self.stage
        state = stage.node.state
        for tx in block.transactions:
            if isinstance(tx.payload, StateChange):
                self.pending.pop(tx.payload.sn_pubkey, None)
                self.watched.add(tx.payload.sn_pubkey)  # judged once more: settled or not
        undo_validators = stage.node.block_and_undo(block.header.height)
        if undo_validators is not None:
            validators = undo_validators[1].round_validators
            signed = set(signer_indexes(block.validator_bitset))
            self.watched.update(v for i, v in enumerate(validators) if i not in signed)
        if is_checkpoint_height(block.header.height, stage.params):
            self._checkpoint_votes(state, block.header.height)
        self.sample_proofs()

    def _checkpoint_votes(self, state: ChainState, height: int) -> None:
        slot = state.checkpoints.get(height)
        if slot is None:
            return
        stage = self.stage
        quorum = Quorum(height=height, members=slot.members, needed=slot.needed)
        message = checkpoint_message(stage.params.network_id, height, slot.block_hash)
        votes: dict[bytes, bytes] = {}
        for member in slot.members:
            if not stage.is_up(member):
                continue
            vote = CheckpointVote(height, slot.block_hash, member, stage.keys[member].sign(message))
            self.counts.checkpoint_messages += len(slot.members) - 1
            if self.config.loss and stage.rng.random() < self.config.loss:
                continue
            if accepts_vote(vote, quorum, slot.block_hash, stage.params.network_id):
                votes[member] = vote.signature
        self.checkpoint_votes[height] = votes
        for old in [h for h in self.checkpoint_votes if h < last_checkpoint(state)]:
            del self.checkpoint_votes[old]

    def checkpoint_to_carry(self) -> Checkpoint | None:
        """The earliest checkpoint the tip waits for that has enough votes."""
        state = self.stage.node.state
        after = last_checkpoint(state)
        for height in sorted(h for h, s in state.checkpoints.items() if not s.carried and h > after):
            slot = state.checkpoints[height]
            votes = self.checkpoint_votes.get(height, {})
            return assemble_checkpoint(Quorum(height=height, members=slot.members, needed=slot.needed),
                                       slot.block_hash, votes)
        return None

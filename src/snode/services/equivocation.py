"""Equivocation proofs in and out, and the validators' own word on what they signed (issue #33
item 8; docs/PARTICIPATION.md "Equivocation" and "Framing").

A proof (`core.equivocation`) is made where both messages meet: a validator that gets two
templates from one leader for one round (`services.producer`), a checkpoint member that gets
two votes of one member for one height (`services.checkpoints`). It is kept (one per offender,
`MAX_PROOFS` in all, only of registered nodes) and, once fork v2 is active, sent over quorumnet
to every registered service node with a known address. A node that receives one checks it
(both signatures, one signer, one slot, two contents) before it keeps it and passes it on to the
obligations quorum of its tip, once; one that proves nothing costs its sender a ban
(`SCORE_FORGED`, as a forged vote does). The obligations quorum's members vote to deregister the
offender (`Reason.EQUIVOCATION`, `core.obligations.judge`) and the state change carries the
proof (`ProvenStateChange`).

Validator signatures: each validator sends its `ValidatorSignature` to the round's leader and
to every other active service node; a node holds those of the next height (`Witnessed`) and,
when the block comes, counts a validator whose signature it holds for that very block as having
done its duty whatever the block's signer bitset says (`ParticipationBook.record_block`), so
that a leader cannot have the validators it dropped marked as missing their duty.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from snode.core.equivocation import (
    MAX_PROOF_BYTES,
    EquivocationEvidence,
    EquivocationProof,
    describe,
    encode_proof,
    offence_height,
    offender,
    verified,
)
from snode.core.round_messages import ValidatorSignature
from snode.net.events import QuorumMessageReceived
from snode.net.quorum_guard import SCORE_FORGED
from snode.node.events import BlocksAdopted
from snode.node.node import Node

if TYPE_CHECKING:
    from snode.net.quorumnet import QuorumNet

log = logging.getLogger(__name__)

MAX_PROOFS: Final = 64
"""Proofs kept, one per offender: a proof leaves once its offender is no longer registered (the
quorum deregistered it); past this many at once, the oldest goes."""
RESEND_BLOCKS: Final = 4
"""While its offender stays registered, a held proof goes again to the tip's obligations quorum
every this many blocks: a quorumnet message can be lost (a full queue, a link replaced when a
member's address changes, a member that restarted), and the judges change with every block."""
RESEND_MAX: Final = 4
"""Proofs sent again at once, the oldest first, turn by turn: with RESEND_BLOCKS, at most one
proof a block to each member, within its budget (`quorum_guard.EVIDENCE_RATE`, a second)."""


class EquivocationWatch:
    """This node's proofs of equivocation, by offender, oldest first."""

    def __init__(self, node: Node, quorumnet: QuorumNet | None) -> None:
        self.node = node
        self.quorumnet = quorumnet
        self.proofs: dict[bytes, EquivocationProof] = {}
        self._sent: set[bytes] = set()
        """Offenders whose proof this node has sent to every service node (once each)."""
        self._resend_at = 0
        """The tip height at or after which held proofs go again to the tip's quorum."""
        node.subscribe(QuorumMessageReceived, self._on_message,
                       topics=(ValidatorSignature, EquivocationEvidence))
        node.subscribe(BlocksAdopted, self._on_blocks)

    @property
    def judged(self) -> bool:
        """Whether the next block's fork judges equivocation (v2): before, proofs are kept and
        logged but not sent (an older node would score the sender for a message it cannot read)."""
        return self.node.params.rules_at(self.node.height + 1).equivocation_proofs

    def proof_of(self, pubkey: bytes) -> bytes | None:
        """The encoded proof against `pubkey`, if this node holds one (for its state change)."""
        proof = self.proofs.get(pubkey)
        return encode_proof(proof) if proof is not None else None

    def found(self, proof: EquivocationProof) -> None:
        """A proof this node made from two messages it verified itself."""
        if self._keep(proof):
            log.warning("equivocation: %s; %s", describe(proof), "the proof goes to every service node"
                        if self.judged else "the proof is kept until fork v2 judges it")
        self._send_new()

    def _send_new(self) -> None:
        """Send each proof this node holds and has not sent yet to every service node, once the
        fork judges equivocation."""
        if not self.judged:
            return
        for who in [k for k in self.proofs if k not in self._sent]:
            self._sent.add(who)
            self._send(EquivocationEvidence(self.proofs[who]), self.node.state.service_nodes.keys())

    def _keep(self, proof: EquivocationProof) -> bool:
        """Keep a proof of a registered node's current registration that is new to us."""
        who = offender(proof)
        sn = self.node.state.service_nodes.get(who)
        if who in self.proofs or sn is None or offence_height(proof) <= sn.registration_height:
            return False
        if len(encode_proof(proof)) > MAX_PROOF_BYTES:
            return False  # no StateChange could carry it: held, it would shut out one that can
        if len(self.proofs) >= MAX_PROOFS:
            del self.proofs[next(iter(self.proofs))]
        self.proofs[who] = proof
        self._resend_at = max(self._resend_at, self.node.height + RESEND_BLOCKS)  # sent now: again later
        return True

    def _send(self, message: EquivocationEvidence, members: Iterable[bytes]) -> None:
        if self.quorumnet is None:
            return
        for member in list(members):
            self.quorumnet.send(member, message)

    def _on_message(self, event: QuorumMessageReceived) -> None:
        message = event.message
        if isinstance(message, ValidatorSignature):
            self.node.participation.witness(message, self.node.height)
        elif isinstance(message, EquivocationEvidence):
            self._on_evidence(message, event.sender)

    def _on_evidence(self, message: EquivocationEvidence, sender: bytes) -> None:
        """A member's proof: checked, kept and passed on to the tip's quorum once; one that
        proves nothing bans its sender. One about a node no longer registered, or one we hold,
        is late, not junk."""
        proof = message.proof
        who = offender(proof)
        sn = self.node.state.service_nodes.get(who)
        if who in self.proofs or sn is None or offence_height(proof) <= sn.registration_height:
            return
        why = verified(proof, self.node.params.network_id)
        if why is not None:
            if self.quorumnet is not None:
                self.quorumnet.junk(sender, SCORE_FORGED, f"sent an equivocation proof that proves nothing: {why}")
            return
        self._keep(proof)
        self._sent.add(who)  # passed on to the quorum below, not to every node: that was the sender's part
        log.warning("equivocation proven by %s: %s", sender.hex()[:16], describe(proof))
        quorum = self.node.state.quorums.get(self.node.height)
        if quorum is not None and self.judged:
            self._send(message, [m for m in quorum.members if m != sender])

    def _on_blocks(self, event: BlocksAdopted) -> None:
        registry = self.node.state.service_nodes
        for who in [k for k in self.proofs if k not in registry]:
            del self.proofs[who]
        self._sent &= self.proofs.keys()
        self._send_new()
        self._resend()

    def _resend(self) -> None:
        """Every RESEND_BLOCKS blocks, RESEND_MAX of the proofs still held (their offenders still
        registered) go again to the tip's obligations quorum, the oldest first; the proofs sent
        move to the end, so that each is sent in its turn. A member that holds one already drops
        it unchecked (`_on_evidence`)."""
        height = self.node.height
        if not self.proofs or height < self._resend_at or not self.judged:
            return
        self._resend_at = height + RESEND_BLOCKS
        quorum = self.node.state.quorums.get(height)
        if quorum is None:
            return
        for who in list(self.proofs)[:RESEND_MAX]:
            proof = self.proofs.pop(who)
            self.proofs[who] = proof
            self._send(EquivocationEvidence(proof), [m for m in quorum.members if m != who])

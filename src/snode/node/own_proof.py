"""This daemon's own uptime proofs: signing and sending them, and the network's word on them.

A proof this node signs is not yet a proof the network has: it counts (in the ProofBook, and so
in `last_uptime_proof`, the status line and this node's own judging) only once a peer
acknowledges it (`ProofAck`) or relays it back, or at once when this daemon has no peer and is
itself the tip's obligations quorum (a lone regtest node). A peer's refusal is kept until a peer
accepts that proof or a later one, so the status line shows `refused: <why>` while the age of
the last accepted proof keeps growing. The words are ours, made from the refusal's code
(`core.proofs.refusal_words`): nothing a peer writes reaches the operator. Which peer may give a
verdict on which proof is the service-node duties' business (`services.sn_duties`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from snode import __version__
from snode.core.proofs import ProofRefusal, UptimeProof, check_proof, make_proof, refusal_words
from snode.node.events import OwnProofAccepted, OwnProofRefused, ProofAccepted

if TYPE_CHECKING:
    from snode.node.node import Node

log = logging.getLogger(__name__)

QUORUM_MEMBER = "this node, the quorum (no peers)"
KEEP_SENT = 8
"""Own proofs remembered, so that a copy a peer relays back counts only if it is one of them."""


class OwnProof:
    """The node's own proofs; it writes only the node's ProofBook and publishes on its hub."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self._sent: dict[int, UptimeProof] = {}

    def make(self, timestamp: int) -> UptimeProof:
        """A fresh uptime proof signed with this daemon's service-node key."""
        ident = self._node.identity
        assert ident is not None
        return make_proof(
            ident.key, self._node.params, timestamp=timestamp, public_ip=ident.public_ip,
            p2p_port=ident.p2p_port, quorumnet_port=ident.quorumnet_port, version=__version__,
        )

    def send(self, now: int, *, alone: bool = False) -> UptimeProof:
        """Sign a proof newer than the last one sent and hand it to the network (P2P sends it to
        every peer); InvalidProof says why it cannot be sent. `alone`: this daemon has no peer
        (then, if it is the quorum, its own word is all the network there is)."""
        node = self._node
        book = node.proofs
        last, previous = book.own_sent
        proof = self.make(max(now, last + 1))
        check_proof(proof, node.params, registered=proof.pubkey in node.state.service_nodes,
                    now=now, last_accepted=last, previous_accepted=previous)
        book.own_sent = (proof.timestamp, last)
        self._sent[proof.timestamp] = proof
        for old in sorted(self._sent)[:-KEEP_SENT]:
            del self._sent[old]
        node.hub.publish(ProofAccepted(proof, None, False))
        if alone and self._in_quorum():
            # With no peer, a daemon that is itself the quorum (a lone regtest node holds the
            # authority key) has the network's whole word. With peers, only their word counts:
            # a node must not vouch for itself while they refuse its proofs.
            self.accepted(proof.timestamp, QUORUM_MEMBER)
        return proof

    def _in_quorum(self) -> bool:
        node = self._node
        quorum = node.state.quorums.get(node.height)
        if quorum is None:
            return False
        keys = {k.public for k in (node.identity.key if node.identity else None, node.producer_key) if k}
        return not keys.isdisjoint(quorum.members)

    def relayed_back(self, proof: UptimeProof, by: str) -> None:
        """Peer `by` relayed a proof of our key: it accepted it, if it is one we signed (a copy
        that differs is another daemon's, or a forgery, and proves nothing about ours)."""
        if self._sent.get(proof.timestamp) == proof:
            self.accepted(proof.timestamp, by)

    def accepted(self, timestamp: int, by: str) -> None:
        """Peer `by` accepted our proof stamped `timestamp` (it said so, or relayed it back)."""
        node = self._node
        ident, book = node.identity, node.proofs
        if ident is None:
            return
        own = ident.key.public
        if timestamp > book.own_sent[0] or timestamp <= book.last_accepted(own):
            return  # not a proof we sent, or no newer than what the network already took
        book.record(own, timestamp, (ident.public_ip, ident.quorumnet_port))
        book.own_accepted_by = by
        if book.own_refused_reason and timestamp >= book.own_refused_sent:
            log.info("uptime proof accepted again, by %s", by)
            book.own_refused_reason = ""
        node.hub.publish(OwnProofAccepted(timestamp, by))

    def refused(self, by: str, timestamp: int, code: ProofRefusal, seen_ip: bytes = b"") -> None:
        """Peer `by`, which we sent our proof stamped `timestamp`, refused it for `code`
        (`seen_ip`: where it sees us connect from, packed, when that is why)."""
        node = self._node
        ident, book = node.identity, node.proofs
        if ident is None or timestamp <= book.last_accepted(ident.key.public):
            return  # the network took this proof or a later one: a refusal of it says nothing now
        words = refusal_words(code, declared_ip=ident.public_ip, params=node.params, seen_ip=seen_ip)
        book.own_refusal = f"uptime proof rejected by {by}: {words}"
        book.own_refused_reason = words
        book.own_refused_sent = timestamp
        log.warning("%s", book.own_refusal)
        node.hub.publish(OwnProofRefused(by, words))

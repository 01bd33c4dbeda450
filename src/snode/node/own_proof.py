"""This daemon's own uptime proofs: signing and sending them, and the network's word on them.

A proof this node signs is not yet a proof the network has: it counts (in the ProofBook, and so
in `last_uptime_proof`, the status line and this node's own judging) only once a peer
acknowledges it (`ProofAck`) or relays it back, or at once when this daemon has no peer and is
itself the tip's obligations quorum (a lone regtest node). A peer's refusal is kept until a peer
accepts that proof or a later one, so the status line shows `refused: <why>` while the age of
the last accepted proof keeps growing. The words are ours, made from the refusal's code
(`core.proofs.refusal_words`): nothing a peer writes reaches the operator. Which peer may give a
verdict on which proof is the service-node duties' business (`services.sn_duties`).

`OwnProof` owns all of this: the proofs sent, the refusal and who last accepted. It is built from
what it needs (the identity, our keys, a read view of the node's proof book, the node's writer of
it, hub and tip), not from the node. It never writes the book: it hands the node what to record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from snode import __version__
from snode.common.events import EventHub
from snode.core.crypto import SigningKey
from snode.core.obligations import quorum_signers
from snode.core.proofs import (
    ProofRefusal,
    ProofVersion,
    Semver,
    UptimeProof,
    make_proof,
    parse_semver,
    refusal_words,
    semver_text,
)
from snode.core.state import ChainState
from snode.node.events import OwnProofAccepted, OwnProofRefused, ProofAccepted
from snode.node.proofs import check_against
from snode.params import NetworkParams

log = logging.getLogger(__name__)

QUORUM_MEMBER = "this node, the quorum (no peers)"
KEEP_SENT = 8
"""Own proofs remembered, so that a copy a peer relays back counts only if it is one of them."""


class ProofTimes(Protocol):
    """What of the proof book this daemon's own proofs read."""

    def last_accepted(self, pubkey: bytes) -> int: ...


Record = Callable[[bytes, int, tuple[str, int]], None]
"""The proof book's writer (`Node.record_proof`): key, accepted proof's timestamp, endpoint."""


@dataclass(frozen=True, slots=True)
class Identity:
    """How this daemon presents itself as a service node."""

    key: SigningKey
    public_ip: str
    p2p_port: int
    quorumnet_port: int


class OwnProof:
    """The node's own proofs. It writes its own fields, hands `record` a proof of ours the network
    accepted (the node writes it in its ProofBook), and publishes on the node's hub."""

    def __init__(
        self, params: NetworkParams, identity: Identity | None, keys: tuple[SigningKey, ...], *,
        book: ProofTimes, hub: EventHub, tip: Callable[[], ChainState], record: Record | None = None,
    ) -> None:
        self._params = params
        self._identity = identity
        self._keys = keys
        """All of this daemon's keys (the quorum may hold its authority key rather than its SN key)."""
        self._book = book
        self._record: Record = record if record is not None else lambda *_: None
        """The node's writer of the book (None: a stand-alone OwnProof, whose acceptances no book keeps)."""
        self._hub = hub
        self._tip = tip
        self._sent: dict[int, UptimeProof] = {}
        self.sent = (0, 0)
        """(last, previous) timestamps of the proofs this node signed and sent."""
        self.refusal = ""
        """Why a peer last refused this node's own proof ('' if none has): kept after a later
        proof is accepted, as the last refusal; `refused_reason` says whether it still stands."""
        self.refused_reason = ""
        """Why, alone, for the status line (our words, made from the peer's refusal code)."""
        self.refused_sent = 0
        """The timestamp of the refused proof: a peer's acceptance of it or of a later one ends
        the refusal."""
        self.accepted_by = ""
        """The peer that acknowledged our last accepted proof."""
        self.advertised: Semver | None = None
        """The snoded version this node's proofs say instead of its own: devnet and regtest
        tests only (`--test-sn-version`), to play an outdated node."""
        self.version = 0
        """Counts the network's verdicts on our proofs (an acceptance, a refusal), so answers
        that show them (`Node.revision`) know when to refresh."""
        self.upgrade_to: Callable[[], str] = lambda: "a newer snoded"
        """What an `outdated` refusal tells the operator to install (`Node` sets it from
        `node.upgrade`)."""

    def make(self, timestamp: int) -> UptimeProof:
        """A fresh uptime proof signed with this daemon's service-node key."""
        ident = self._identity
        assert ident is not None
        return make_proof(
            ident.key, self._params, timestamp=timestamp, public_ip=ident.public_ip,
            p2p_port=ident.p2p_port, quorumnet_port=ident.quorumnet_port, version=self.version_text(),
        )

    def version_text(self) -> str:
        """What this node's proofs say in `version`: free text (its snoded's version, as ever)
        on a fork of `proof_version` 1; from one of 2 (the fork of the next block), its snoded
        and the newest fork its schedule knows (`core.proofs.ProofVersion`)."""
        snoded = self.advertised or parse_semver(__version__) or (0, 0, 0)
        if self._params.rules_at(self._tip().height + 1).proof_version < 2:
            return semver_text(snoded) if self.advertised else __version__
        newest = self._params.forks[-1]
        return ProofVersion(snoded, newest.rules.name, newest.height).text()

    def send(self, now: int, *, alone: bool = False) -> UptimeProof:
        """Sign a proof newer than the last one sent and hand it to the network (P2P sends it to
        every peer); InvalidProof says why it cannot be sent. `alone`: this daemon has no peer
        (then, if it is the quorum, its own word is all the network there is)."""
        last, _ = self.sent
        proof = self.make(max(now, last + 1))
        tip = self._tip()
        check_against(proof, self._params, tip, now, self.sent, version=False)
        self.sent = (proof.timestamp, last)
        self._sent[proof.timestamp] = proof
        for old in sorted(self._sent)[:-KEEP_SENT]:
            del self._sent[old]
        self._hub.publish(ProofAccepted(proof, None, False))
        if alone and quorum_signers(tip, self._keys):
            # With no peer, a daemon that is itself the quorum (a lone regtest node holds the
            # authority key) has the network's whole word. With peers, only their word counts:
            # a node must not vouch for itself while they refuse its proofs.
            self.accepted(proof.timestamp, QUORUM_MEMBER)
        return proof

    def relayed_back(self, proof: UptimeProof, by: str) -> None:
        """Peer `by` relayed a proof of our key: it accepted it, if it is one we signed (a copy
        that differs is another daemon's, or a forgery, and proves nothing about ours)."""
        if self._sent.get(proof.timestamp) == proof:
            self.accepted(proof.timestamp, by)

    def accepted(self, timestamp: int, by: str) -> None:
        """Peer `by` accepted our proof stamped `timestamp` (it said so, or relayed it back)."""
        ident, book = self._identity, self._book
        if ident is None:
            return
        own = ident.key.public
        if timestamp > self.sent[0] or timestamp <= book.last_accepted(own):
            return  # not a proof we sent, or no newer than what the network already took
        self._record(own, timestamp, (ident.public_ip, ident.quorumnet_port))
        self.accepted_by = by
        if self.refused_reason and timestamp >= self.refused_sent:
            log.info("uptime proof accepted again, by %s", by)
            self.refused_reason = ""
        self.version += 1
        self._hub.publish(OwnProofAccepted(timestamp, by))

    def refused(self, by: str, timestamp: int, code: ProofRefusal, seen_ip: bytes = b"") -> None:
        """Peer `by`, which we sent our proof stamped `timestamp`, refused it for `code`
        (`seen_ip`: where it sees us connect from, packed, when that is why)."""
        ident = self._identity
        if ident is None or timestamp <= self._book.last_accepted(ident.key.public):
            return  # the network took this proof or a later one: a refusal of it says nothing now
        words = refusal_words(code, declared_ip=ident.public_ip, params=self._params, seen_ip=seen_ip,
                              upgrade_to=self.upgrade_to())
        self.refusal = f"uptime proof rejected by {by}: {words}"
        self.refused_reason = words
        self.refused_sent = timestamp
        self.version += 1
        log.warning("%s", self.refusal)
        self._hub.publish(OwnProofRefused(by, words))

    def answered(self, timestamp: int) -> bool:
        """Whether the network gave its word on our proof stamped `timestamp`: a peer accepted
        it or a later one, or refused it or a later one."""
        if self._identity is None:
            return False
        return (self._book.last_accepted(self._identity.key.public) >= timestamp
                or bool(self.refused_reason and self.refused_sent >= timestamp))

    async def wait_answer(self, timestamp: int, timeout: float) -> bool:
        """Wait until the network gave its word on our proof stamped `timestamp` (`answered`),
        at most `timeout` seconds: woken by the hub's OwnProofAccepted / OwnProofRefused.
        Whether it did."""
        if self.answered(timestamp):
            return True
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def check(_: OwnProofAccepted | OwnProofRefused) -> None:
            if not answer.done() and self.answered(timestamp):
                answer.set_result(None)
        self._hub.subscribe(OwnProofAccepted, check)
        self._hub.subscribe(OwnProofRefused, check)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await answer
        finally:
            self._hub.unsubscribe(OwnProofAccepted, check)
            self._hub.unsubscribe(OwnProofRefused, check)
        return self.answered(timestamp)

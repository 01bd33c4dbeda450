"""Uptime proofs relayed by announcement (peer protocol 3), as Bitcoin Core relays transactions
with inv and getdata. Sans-IO: the relay (`net.relay`) moves the messages this decides.

A proof goes in full from its signer to each of its peers (so the receiver can check the declared
IP against the connection, and acknowledge it). A node that accepts another's proof announces it,
by id (signer key, timestamp), to each version-3 peer not known to have it, in one `ProofInv` per
peer every INV_INTERVAL; the receiver asks (`GetProofs`) for the ones it lacks, and the announcer
answers with one `Proofs`. In a dense mesh nearly every node has each proof from its signer
already, so a proof's copies shrink to a few bytes of announcement, batched.

Bounds, for a hostile peer (`limits`): at most MAX_PROOF_IDS ids a message (a longer one does
not decode); announced ids cost the peer's proof rate as proofs do (`peers`); only ids of
registered service nodes are remembered or asked for; at most MAX_PROOFS_ASKED_PER_PEER asked
of one peer at a time and MAX_WANTED_PROOFS wanted overall, each with MAX_ANNOUNCERS announcers
to fall back on; a peer that leaves a GetProofs unanswered for PROOF_REQUEST_TIMEOUT is dropped;
an answer without a question, or with a proof not asked for, is misbehaviour
(SCORE_UNASKED_PROOFS); a peer is sent only the proofs we announced to it, each once. What the
answer holds is judged like any relayed proof (a forged one bans its sender).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Final

from snode.core.proofs import UptimeProof
from snode.net import limits as L
from snode.net.protocol import MAX_PROOF_IDS, GetProofs, ProofId, ProofInv

INV_INTERVAL: Final = 1.0
"""Seconds between a node's announcements (each peer gets at most one ProofInv a round, holding
every proof accepted since, newest per signer): the batching that makes announcing cheap, at the
cost of up to a second a hop."""

Peer = Hashable


@dataclass(slots=True)
class PeerProofs:
    """What one peer is known to have, what we announced to it, what we asked of it."""

    known: dict[bytes, int] = field(default_factory=dict)
    """Signer key -> the newest proof timestamp the peer has (it sent or announced it to us, or
    we to it); bounded, oldest out."""
    announced: dict[bytes, int] = field(default_factory=dict)
    """Signer key -> the proof we announced to it and it has not fetched (what it may ask for)."""
    requests: deque[tuple[float, list[ProofId]]] = field(default_factory=deque)
    """Our GetProofs not answered yet, oldest first: (deadline, ids)."""
    asked: int = 0
    """Ids in `requests`."""

    def has(self, pubkey: bytes, timestamp: int) -> bool:
        return self.known.get(pubkey, -1) >= timestamp

    def learn(self, pubkey: bytes, timestamp: int) -> None:
        known = self.known
        if known.get(pubkey, -1) >= timestamp:
            return
        known.pop(pubkey, None)
        known[pubkey] = timestamp
        if len(known) > L.MAX_KNOWN_PROOFS_PER_PEER:
            del known[next(iter(known))]

    def announce(self, pubkey: bytes, timestamp: int) -> None:
        announced = self.announced
        announced.pop(pubkey, None)
        announced[pubkey] = timestamp
        if len(announced) > L.MAX_KNOWN_PROOFS_PER_PEER:
            del announced[next(iter(announced))]


@dataclass(frozen=True, slots=True)
class Answer:
    """What one Proofs answer brought: the proofs to judge, a misbehaviour (or ''), and the
    GetProofs to send other announcers for what it lacked."""

    proofs: list[UptimeProof]
    problem: str
    requests: list[tuple[Peer, GetProofs]]


class ProofGossip:
    """One node's proof announcements: pending, served, wanted, per peer."""

    def __init__(self, *, registered: Callable[[bytes], bool], accepted_at: Callable[[bytes], int]) -> None:
        self.registered = registered
        """Whether a key is a registered service node's (only those are remembered or asked)."""
        self.accepted_at = accepted_at
        """The timestamp of the node's last accepted proof of a key (0: none)."""
        self.pending: dict[bytes, UptimeProof] = {}
        """Proofs accepted since the last announcement, the newest per signer."""
        self.served: dict[bytes, UptimeProof] = {}
        """The newest accepted proof per signer, to answer GetProofs with."""
        self.wanted: dict[ProofId, list[Peer]] = {}
        """Announced proofs we lack: their announcers, the first one asked."""
        self.peers: dict[Peer, PeerProofs] = {}

    def state(self, peer: Peer) -> PeerProofs:
        state = self.peers.get(peer)
        if state is None:
            state = self.peers[peer] = PeerProofs()
        return state

    # --- out ----------------------------------------------------------------------------------

    def accepted(self, proof: UptimeProof, source: Peer | None) -> None:
        """The node accepted `proof` (from `source`, None for our own): to be announced."""
        self.served.pop(proof.pubkey, None)
        self.served[proof.pubkey] = proof
        if len(self.served) > L.MAX_WANTED_PROOFS:  # keys that left the registry long ago
            del self.served[next(iter(self.served))]
        self.pending[proof.pubkey] = proof
        self.wanted.pop((proof.pubkey, proof.timestamp), None)
        if source is not None:
            self.state(source).learn(proof.pubkey, proof.timestamp)

    def announcements(self, peers: Iterable[Peer]) -> list[tuple[Peer, list[ProofInv]]]:
        """Each peer's ProofInv messages for the proofs accepted since the last call that it is
        not known to have (`peers`: the version-3 ones)."""
        pending, self.pending = self.pending, {}
        if not pending:
            return []
        out = []
        for peer in peers:
            state = self.state(peer)
            ids = []
            for pubkey, proof in pending.items():
                if not state.has(pubkey, proof.timestamp):
                    state.learn(pubkey, proof.timestamp)
                    state.announce(pubkey, proof.timestamp)
                    ids.append((pubkey, proof.timestamp))
            if ids:
                out.append((peer, [ProofInv(ids[i:i + MAX_PROOF_IDS]) for i in range(0, len(ids), MAX_PROOF_IDS)]))
        return out

    def serve(self, peer: Peer, ids: list[ProofId]) -> list[UptimeProof]:
        """The proofs to answer `peer`'s GetProofs with: those asked that we announced to it
        and still have, each once."""
        announced, out = self.state(peer).announced, []
        for pubkey, timestamp in ids:
            proof = self.served.get(pubkey)
            if proof is not None and proof.timestamp == timestamp and announced.get(pubkey) == timestamp:
                del announced[pubkey]
                out.append(proof)
        return out

    # --- in -----------------------------------------------------------------------------------

    def announced(self, peer: Peer, ids: list[ProofId], now: float) -> GetProofs | None:
        """`peer` announced `ids`: the GetProofs to send it for those we lack, if any."""
        state, ask = self.state(peer), list[ProofId]()
        for pubkey, timestamp in ids:
            if not self.registered(pubkey):
                continue
            state.learn(pubkey, timestamp)
            if self.accepted_at(pubkey) >= timestamp or self._served_at(pubkey) >= timestamp:
                continue
            announcers = self.wanted.get((pubkey, timestamp))
            if announcers is not None:
                if peer not in announcers and len(announcers) < L.MAX_ANNOUNCERS:
                    announcers.append(peer)
            elif state.asked + len(ask) < L.MAX_PROOFS_ASKED_PER_PEER and len(self.wanted) < L.MAX_WANTED_PROOFS:
                self.wanted[(pubkey, timestamp)] = [peer]
                ask.append((pubkey, timestamp))
        return self._ask(state, ask, now)

    def answered(self, peer: Peer, proofs: list[UptimeProof], now: float) -> Answer:
        """`peer` sent Proofs: the answer to our oldest open GetProofs to it."""
        state = self.state(peer)
        if not state.requests:
            return Answer([], "sent uptime proofs it was not asked for", [])
        _, ids = state.requests.popleft()
        state.asked -= len(ids)
        open_ids = set(ids)
        taken = []
        for proof in proofs:
            key = (proof.pubkey, proof.timestamp)
            if key not in open_ids:
                break
            open_ids.discard(key)
            self.wanted.pop(key, None)
            state.learn(proof.pubkey, proof.timestamp)
            taken.append(proof)
        else:
            return Answer(taken, "", self._fall_back(peer, [k for k in ids if k in open_ids], now))
        return Answer([], "sent uptime proofs it was not asked for", self._fall_back(peer, ids, now))

    def overdue(self, now: float) -> list[Peer]:
        """Peers with a GetProofs open past its deadline (to be dropped)."""
        return [peer for peer, state in self.peers.items() if state.requests and state.requests[0][0] < now]

    def gone(self, peer: Peer, now: float) -> list[tuple[Peer, GetProofs]]:
        """`peer` disconnected: forget it, and ask the next announcers for what it owed us."""
        state = self.peers.pop(peer, None)
        if state is None:
            return []
        owed = [key for _, ids in state.requests for key in ids]
        return self._fall_back(peer, owed, now)

    # --- helpers ------------------------------------------------------------------------------

    def _served_at(self, pubkey: bytes) -> int:
        proof = self.served.get(pubkey)
        return proof.timestamp if proof is not None else 0

    def _ask(self, state: PeerProofs, ids: list[ProofId], now: float) -> GetProofs | None:
        if not ids:
            return None
        state.requests.append((now + L.PROOF_REQUEST_TIMEOUT, ids))
        state.asked += len(ids)
        return GetProofs(ids)

    def _fall_back(self, peer: Peer, ids: Iterable[ProofId], now: float) -> list[tuple[Peer, GetProofs]]:
        """`peer` did not send `ids`: ask each one's next announcer still connected (grouped)."""
        asks: dict[Peer, list[ProofId]] = {}
        for key in ids:
            announcers = self.wanted.get(key)
            if announcers is None:
                continue
            announcers[:] = [p for p in announcers if p is not peer and p in self.peers]
            if not announcers or self.accepted_at(key[0]) >= key[1]:
                del self.wanted[key]
                continue
            state, mine = self.peers[announcers[0]], asks.setdefault(announcers[0], [])
            if state.asked + len(mine) < L.MAX_PROOFS_ASKED_PER_PEER:
                mine.append(key)
            else:
                del self.wanted[key]
        out = []
        for other, keys in asks.items():
            for i in range(0, len(keys), MAX_PROOF_IDS):
                request = self._ask(self.peers[other], keys[i:i + MAX_PROOF_IDS], now)
                if request is not None:
                    out.append((other, request))
        return out

"""What proof gossip (`net.proof_gossip`) keeps per peer and per wanted proof. Sans-IO."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final

from snode.core.proofs import UptimeProof
from snode.net import limits as L
from snode.net.protocol import GetProofs, ProofId

Peer = Hashable
PARKED: Final = math.inf


@dataclass(slots=True)
class PeerProofs:
    """What one peer is known to have, what we announced to it, what we asked of it."""

    known: dict[bytes, int] = field(default_factory=dict)
    """Signer key -> the newest proof timestamp the peer has (it sent or announced it to us, or
    we to it); bounded, oldest out."""
    announced: dict[bytes, int] = field(default_factory=dict)
    """Signer key -> the proof we announced to it and it has not fetched (what it may ask for)."""
    superseded: dict[bytes, int] = field(default_factory=dict)
    """Signer key -> the proof we announced to it before the one in `announced`, not fetched: it
    may ask for it while our newer announcement is on its way (served while we hold it:
    `ProofGossip.replaced`); bounded as `announced` is."""
    requests: deque[tuple[float, list[ProofId]]] = field(default_factory=deque)
    """Our GetProofs not answered yet, oldest first: (deadline, ids)."""
    asked: int = 0
    """Ids in `requests`."""
    offered: dict[bytes, int] = field(default_factory=dict)
    """Signer key -> the wanted id it announced and was not yet asked for in vain: one a signer
    (it serves only a signer's newest proof: a newer announcement replaces the older);
    MAX_ANNOUNCED_PER_PEER, MAX_ANNOUNCED_PER_INBOUND for an inbound peer."""
    parked: set[ProofId] = field(default_factory=set)
    """Wanted ids it announced that wait for room in our requests to it (none of their
    announcers had any): asked when it answers, not looked at before."""
    outbound: bool = False
    address: Hashable = None
    """Its address key (`Peer.key`): what its failures are kept under, across reconnects."""
    order: int = 0
    """When it connected, among our connections (older ones are asked first)."""
    cap: int = L.MAX_KNOWN_PROOFS_PER_PEER
    """Entries at most in `known` and in `announced` (`PeerLimits.max_known_proofs_per_peer`)."""

    def has(self, pubkey: bytes, timestamp: int) -> bool:
        return self.known.get(pubkey, -1) >= timestamp

    def learn(self, pubkey: bytes, timestamp: int) -> None:
        known = self.known
        if known.get(pubkey, -1) >= timestamp:
            return
        known.pop(pubkey, None)
        known[pubkey] = timestamp
        if len(known) > self.cap:
            del known[next(iter(known))]

    def told(self, ids: list[ProofId]) -> None:
        """We announced `ids` to it, none of which it was known to have: `learn` and `announce`
        each, in one pass (the oldest out once, after)."""
        known, announced, superseded = self.known, self.announced, self.superseded
        for pubkey, timestamp in ids:
            known.pop(pubkey, None)
            known[pubkey] = timestamp
            older = announced.pop(pubkey, None)
            if older is not None:
                superseded.pop(pubkey, None)
                superseded[pubkey] = older
            announced[pubkey] = timestamp
        bound(known, self.cap)
        bound(announced, self.cap)
        bound(superseded, self.cap)

    def announce(self, pubkey: bytes, timestamp: int) -> None:
        announced = self.announced
        announced.pop(pubkey, None)
        announced[pubkey] = timestamp
        if len(announced) > self.cap:
            del announced[next(iter(announced))]


def bound(book: dict[bytes, int], cap: int = L.MAX_KNOWN_PROOFS_PER_PEER) -> None:
    """`cap` entries at most (MAX_KNOWN_PROOFS_PER_PEER), the oldest out."""
    while len(book) > cap:
        del book[next(iter(book))]


@dataclass(slots=True)
class Want:
    """An announced proof we lack: who else announced it, who was asked, what happens when."""

    announcers: list[Peer] = field(default_factory=list)
    """Peers that announced it and were not asked for it yet, in announcement order."""
    asked: Peer | None = None
    inbound: bool = False
    """An inbound peer announced it first (it counts in MAX_WANTED_PROOFS)."""
    due: float = 0.0
    """When it is asked (not asked yet), or asked of the next announcer (no copy accepted);
    PARKED while every announcer has its fill of our requests."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What one Proofs answer brought: the proofs to judge, a misbehaviour (or ''), and the
    GetProofs to send other announcers for what it lacked."""

    proofs: list[UptimeProof]
    problem: str
    requests: list[tuple[Peer, GetProofs]]

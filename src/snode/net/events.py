"""What the network layer tells the services above it, through the event hub."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from snode.core.blocks import Checkpoint
from snode.net import protocol as P


@dataclass(frozen=True, slots=True)
class ProofMessage:
    """A peer sent an uptime proof, or told us why it refused ours (the SN duties judge it)."""

    peer: object
    """The `Peer` it came from: reply with `PeerManager.send`, punish with `ban`."""
    peer_ip: str
    peer_name: str
    message: P.Proof | P.ProofRejected | P.ProofAck


@dataclass(frozen=True, slots=True)
class QuorumMessageReceived:
    """A registered service node sent a quorumnet message."""

    TOPIC: ClassVar[str] = "message"
    """Subscribers take the kinds they handle (`EventHub.subscribe(..., topics=...)`)."""
    message: P.QuorumMessage
    sender: bytes
    """The member whose connection brought it (its registered Ed25519 key, as ZAP admitted it):
    whom its junk costs (`QuorumNet.junk`), whatever key the message names."""


@dataclass(frozen=True, slots=True)
class PeerBanned:
    """A peer broke the protocol and is cut off for a while."""

    ip: str
    reason: str
    seconds: int


@dataclass(frozen=True, slots=True)
class PeerConnected:
    """A peer finished its handshake (the sync service looks at its height)."""

    peer: object
    height: int


@dataclass(frozen=True, slots=True)
class PeerDisconnected:
    """A handshaken peer is gone (the relay asks others for what it owed us)."""

    peer: object


@dataclass(frozen=True, slots=True)
class BlocksAhead:
    """A peer showed a block we cannot connect yet (the sync service fetches what is missing)."""

    peer: object
    height: int


@dataclass(frozen=True, slots=True)
class CheckpointMessage:
    """A peer sent a complete checkpoint (the checkpoint duties judge it)."""

    peer: object
    checkpoint: Checkpoint

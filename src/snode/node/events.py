"""What the node tells the rest of the daemon, through the event hub (`common.events`).

The node publishes; P2P relay, the service-node duties, the RPC caches and the metrics
subscribe. Each event is published after the change it reports is durable and current: a
subscriber that reads the node sees the new tip, the new mempool, the new proof.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from snode.core.blocks import Block
from snode.core.proofs import UptimeProof
from snode.core.transactions import Transaction


@dataclass(frozen=True, slots=True)
class BlocksAdopted:
    """New blocks are on the main chain (after a reorganisation: the blocks of the new branch)."""

    blocks: tuple[Block, ...]
    """Lowest first."""
    height: int
    """The new tip's height."""
    tip_hash: bytes


@dataclass(frozen=True, slots=True)
class ChainReorganized:
    """The main chain switched branches; published before the BlocksAdopted of the new branch."""

    fork_height: int
    """The last height both branches share."""
    undone: int
    """Blocks taken off the old branch."""
    applied: int
    """Blocks of the new branch."""


@dataclass(frozen=True, slots=True)
class TransactionAdmitted:
    """The mempool took a transaction."""

    tx: Transaction
    txid: bytes
    source: object | None
    """The peer it came from (relay skips it), or None (RPC, the node itself)."""


@dataclass(frozen=True, slots=True)
class ProofAccepted:
    """This node accepted an uptime proof (its own included)."""

    TOPIC: ClassVar[str] = "source"
    """A subscriber of only this node's own proofs takes `topics=(type(None),)` (`common.events`)."""
    proof: UptimeProof
    source: object | None
    """The peer it came from, or None when this node made it."""
    relayed: bool
    """False when it came straight from the node that signed it (or is our own)."""


@dataclass(frozen=True, slots=True)
class OwnProofAccepted:
    """A peer accepted this node's own uptime proof (acknowledged it or relayed it back)."""

    timestamp: int
    by: str
    """The peer's address."""


@dataclass(frozen=True, slots=True)
class OwnProofRefused:
    """A peer refused this node's own uptime proof and said why."""

    by: str
    """The peer's address."""
    reason: str


@dataclass(frozen=True, slots=True)
class SyncProgress:
    """The sync target moved, or the node moved towards it."""

    height: int
    target: int
    """Best height peers announce; 0 when synced."""

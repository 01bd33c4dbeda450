"""What `snode-sim` simulates (`SimConfig`): the network's size, its links and what happens to
its nodes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SimConfig:
    """What to simulate."""

    service_nodes: int
    contributors: int
    blocks: int
    """Service-node blocks to produce after every node is active."""
    seed: int = 1
    latency_ms: float = 50.0
    loss: float = 0.0
    outage_rate: float = 0.00002
    """Chance per active node per block of going down (0.00002: one outage a block at 50,000)."""
    outage_blocks: tuple[int, int] = (2, 40)
    """An outage lasts this many blocks (uniform): up to 15 blocks (30 minutes) the node keeps
    its place, longer and it is decommissioned, then recommissioned when it is back."""
    unlock_share: float = 0.01
    """Share of the nodes whose contributor asks for the stakes back in the first half of the run."""
    partition: tuple[float, int, int] | None = None
    """(share of nodes, from block, to block): cut that share off from the rest in that span."""
    stops: tuple[tuple[int, int, int], ...] = ()
    """(node index, from block, to block): that node's daemon is stopped in that span (an
    operator's restart, or a node that stays away), beside the random outages."""
    proof_sample: int = 16
    """Real signed uptime proofs checked by the observer per block, to measure a proof's cost."""

"""What the simulated nodes act on (`Stage`): the network parameters, the simulated network, the
observing node, every node's key, the run's one random source, and which nodes are down.

`sim.world.World` owns all of it and is the only one to change who is down or cut off; its
helpers (`sim.judges`, `sim.rounds`) get the stage, act through the network and the observing
node, and keep their own counts, which World reads.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from snode.core.crypto import SigningKey
from snode.node.views import SimNode
from snode.params import NetworkParams
from snode.sim.network import SimNetwork

OBSERVER: Final = b"observer"
"""The observing node's name on the simulated network."""


@dataclass(frozen=True, slots=True)
class Stage:
    """The simulated network as its nodes see it."""

    params: NetworkParams
    net: SimNetwork
    node: SimNode
    """The observer: it holds the chain every simulated node agrees on, its mempool and proofs."""
    keys: Mapping[bytes, SigningKey]
    """Every simulated node's key, and the genesis authority's."""
    rng: random.Random
    """Every random draw of the run, in one order, so that a seed gives one run."""
    down_until: Mapping[bytes, int]
    """Node -> the height at which its outage or stop ends (World's, read here)."""
    down_since: Mapping[bytes, float]
    """Node -> when it went down or was cut off (World's, read here)."""

    def is_up(self, pubkey: bytes) -> bool:
        """Running, and on the observer's side of any partition."""
        return pubkey not in self.down_until and self.net.reachable(pubkey, OBSERVER)

"""A silent peer is dropped by the peer manager's ping round (every 2 s), not by a timer around
each read: one connection's reads cost no timer, and silence still ends it after IDLE_TIMEOUT."""

from __future__ import annotations

import time
from typing import Any

from snode.common.events import EventHub
from snode.net.peers import IDLE_TIMEOUT, PeerManager


class Quiet:
    """What the ping round reads of a peer, and whether it was closed."""

    def __init__(self, silent_for: float) -> None:
        self.last_heard = time.monotonic() - silent_for
        self.name, self.outbound, self.hello, self.closed = "127.0.0.9:9230", True, None, False

    def close(self) -> None:
        self.closed = True


def manager() -> Any:
    node: Any = type("Node", (), {"hub": EventHub(), "params": type("P", (), {"private_public_ip_allowed": True})})
    return PeerManager(node, bind_ip="127.0.0.1", listen_port=0, priority=[])


def test_a_peer_silent_for_the_idle_timeout_is_dropped_and_a_talking_one_kept() -> None:
    peers = manager()
    silent, talking = Quiet(IDLE_TIMEOUT + 1), Quiet(IDLE_TIMEOUT - 5)
    peers.peers.update({silent, talking})
    peers._ping_or_drop()
    assert silent.closed and not talking.closed

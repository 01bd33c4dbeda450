"""The relay's side of proof gossip (`net.proof_gossip` is tested sans-IO in test_proof_gossip):
what it tells ProofGossip of its peers, and the wake-up timer's life."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from snode.net.events import PeerConnected, PeerDisconnected
from snode.net.peer import Peer
from snode.net.relay import Relay
from snode.node.writer import ChainWriter
from tests.unit.conftest import service_node_daemon


class Connected(Peer):
    """A handshaken peer as the relay reads it (no socket)."""

    def __init__(self, ip: str, outbound: bool) -> None:  # not Peer's: it needs a socket
        self.ip, self.port, self.key, self.outbound = ip, 9230, ip, outbound
        self.hello, self.waiting = None, True


def relay_for(live: set[Connected], spawn: Any = None) -> Relay:
    node = service_node_daemon("relay proofs")
    manager = SimpleNamespace(on=lambda kind, handler: None, peers=live, send=lambda peer, message: None,
                              spawn=spawn or (lambda coro, name: coro.close()))
    return Relay(manager, ChainWriter(node))  # type: ignore[arg-type]


def test_proof_gossip_sees_the_relays_live_peers_in_connection_order() -> None:
    dialled, inbound = Connected("127.0.0.5", outbound=True), Connected("127.0.0.6", outbound=False)
    live = {dialled}
    relay = relay_for(live)
    gossip = relay.gossip
    assert gossip.state(inbound) is None, "not connected: no state"
    live.add(inbound)
    relay._on_peer_connected(PeerConnected(inbound, 0))
    relay._on_peer_connected(PeerConnected(dialled, 0))
    first, second = gossip.peers[inbound], gossip.peers[dialled]
    assert (first.outbound, first.address) == (False, "127.0.0.6")
    assert (second.outbound, second.address) == (True, "127.0.0.5")
    assert first.order < second.order, "ranked by when they connected, not when first used"
    live.discard(inbound)
    relay._on_peer_gone(PeerDisconnected(inbound))
    assert inbound not in gossip.peers and gossip.state(inbound) is None, "gone: never made again"


def test_the_wake_up_timer_is_cancelled_when_the_peer_manager_stops() -> None:
    async def scenario() -> None:
        inbound = Connected("127.0.0.6", outbound=False)
        tasks: list[asyncio.Task[None]] = []
        relay = relay_for({inbound}, spawn=lambda coro, name: tasks.append(asyncio.create_task(coro)))
        relay._on_peer_connected(PeerConnected(inbound, 0))
        await asyncio.sleep(0)  # the announcements' task starts
        identity = relay.node.identity
        assert identity is not None
        await relay._on_proof_inv(inbound, SimpleNamespace(ids=[(identity.key.public, relay.node.now())]))  # type: ignore[arg-type]
        assert relay._wake is not None, "an inbound announcer is asked on a timer"
        handle = relay._wake[1]
        for task in tasks:  # what PeerManager.stop does
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert handle.cancelled() and relay._wake is None
        relay._wake_at_next_due()
        assert relay._wake is None, "no timer after stop"

    asyncio.run(scenario())

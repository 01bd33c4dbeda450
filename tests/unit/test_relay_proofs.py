"""The relay's side of proof gossip (`net.proof_gossip` is tested sans-IO in test_proof_gossip):
what it tells ProofGossip of its peers, and the wake-up timer's life."""

from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace
from typing import Any

from snode.core.proofs import UptimeProof
from snode.net import protocol as P
from snode.net.events import PeerConnected, PeerDisconnected
from snode.net.peer import Peer
from snode.net.relay import Relay
from snode.node.events import ProofAccepted
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


def test_anothers_proof_goes_in_full_only_to_older_peers_and_ours_to_every_peer() -> None:
    """Another's accepted proof is announced to version-3 peers (`_announce_proofs`), pushed in
    full now only to older ones (not framed at all when there are none: the relay keeps them
    apart as they connect and go); our own goes in full to every peer but none back to its source."""
    source, new, old = (Connected(f"127.0.0.{i}", outbound=True) for i in (5, 6, 7))
    for peer, version in ((source, 3), (new, 3), (old, 2)):
        peer.hello = SimpleNamespace(version=version)  # type: ignore[assignment]
    live = {source, new, old}
    relay = relay_for(live)
    for peer in live:
        relay._on_peer_connected(PeerConnected(peer, 0))
    sent: list[tuple[object, bytes]] = []
    relay.peers.send_frame = lambda peer, data: sent.append((peer, data))  # type: ignore[method-assign]
    identity = relay.node.identity
    assert identity is not None
    key = os.urandom(32)
    theirs = UptimeProof(key, 10, "1.2.3.4", 1, 2, "0.1.0", bytes(64))
    relay._relay_proof(ProofAccepted(theirs, source, True))
    assert [peer for peer, _ in sent] == [old]
    assert sent[0][1] == P.frame(P.Proof(theirs, relayed=True))
    live.discard(old)
    relay._on_peer_gone(PeerDisconnected(old))
    sent.clear()
    relay._relay_proof(ProofAccepted(UptimeProof(key, 12, "1.2.3.4", 1, 2, "0.1.0", bytes(64)), source, True))
    assert sent == [], "every peer is told by id"
    ours = UptimeProof(identity.key.public, 12, "1.2.3.4", 1, 2, "0.1.0", bytes(64))
    relay._relay_proof(ProofAccepted(ours, None, False))
    assert {peer for peer, _ in sent} == {source, new}
    assert all(data == P.frame(P.Proof(ours, relayed=False)) for _, data in sent)

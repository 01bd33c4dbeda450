"""A silent peer is pinged, then dropped, by the peer manager's ping round (every 2 s), not by a
timer around each read: one connection's reads cost no timer, and silence still ends it after
IDLE_TIMEOUT. The peer manager reads the clock it is given: these tests move a fake one instead
of waiting for real time to pass."""

from __future__ import annotations

import asyncio
import socket
import time
from types import SimpleNamespace
from typing import Any

from snode.common.clock import MockableClock
from snode.common.events import EventHub
from snode.net import protocol as P
from snode.net.limits import IDLE_TIMEOUT, PING_INTERVAL
from snode.net.peer import Peer
from snode.net.peers import PeerManager
from snode.net.relay import Relay
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.node.writer import ChainWriter
from snode.store.memory import MemoryStore
from tests.unit.conftest import new_chain, peer_manager, wait_async


class FakeClock:
    """A monotonic clock that stands still until a test moves it."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


NOW = FakeClock()


class Quiet(Peer):
    """What the ping round reads of a peer, and whether it was closed (a Peer, whose
    `silent_since` it uses, so that it is one to the compiled `net.peer` too: `make test-compiled`)."""

    def __init__(self, silent_for: float) -> None:
        self.last_heard = NOW() - silent_for
        self.ip, self.port, self.outbound, self.closed = "127.0.0.9", 9230, True, False
        self.hello = None
        self.waiting = True
        self.sent: list[P.Message] = []

    def send_frame(self, data: bytes) -> None:
        self.sent.append(P.parse(data[P.HEADER_BYTES:]))

    def close(self) -> None:
        self.closed = True


def manager() -> Any:
    node: Any = type("Node", (), {"hub": EventHub(), "params": type("P", (), {"private_public_ip_allowed": True})})
    return PeerManager(node, bind_ip="127.0.0.1", listen_port=0, priority=[], clock=NOW)


def test_a_peer_silent_for_the_idle_timeout_is_dropped_and_a_talking_one_kept() -> None:
    peers = manager()
    silent, talking = Quiet(IDLE_TIMEOUT + 1), Quiet(IDLE_TIMEOUT - 5)
    peers.peers.update({silent, talking})
    peers._ping_or_drop()
    assert silent.closed and not talking.closed


def test_only_a_peer_silent_for_the_ping_interval_is_pinged() -> None:
    peers = manager()
    talking, quiet, gone = Quiet(PING_INTERVAL - 5), Quiet(PING_INTERVAL + 1), Quiet(IDLE_TIMEOUT + 1)
    busy = Quiet(PING_INTERVAL + 1)
    busy.waiting = False  # its frames wait behind our handler: not silent
    for peer in (talking, quiet, gone, busy):
        peer.hello = object()  # type: ignore[assignment]  # (what the ping round reads: not None)
        peers.peers.add(peer)
    peers._ping_or_drop()
    sent = [(peer, type(message)) for peer in (talking, quiet, gone, busy) for message in peer.sent]
    assert sent == [(quiet, P.Ping)]
    assert gone.closed and not (talking.closed or quiet.closed or busy.closed)


def test_a_peer_whose_frames_wait_behind_our_slow_handler_is_not_silent() -> None:
    """Over a real socket: while our handler of its message runs long, the peer's next frames
    wait unread; it is not dropped as silent then, and once they are read and it sends nothing
    more while we wait for it, it is."""
    clock = FakeClock()
    manager, hello = peer_manager(7, clock=clock)
    release, handling = asyncio.Event(), asyncio.Event()

    async def slow(peer: Peer, message: P.NewCheckpoint) -> None:
        handling.set()
        await release.wait()

    manager.on(P.NewCheckpoint, slow)
    async def scenario() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await manager.start(sock)
        reader, writer = await asyncio.open_connection(*sock.getsockname())
        try:
            writer.write(P.frame(hello) + P.frame(P.NewCheckpoint(b"x")))
            await asyncio.wait_for(handling.wait(), timeout=10)
            writer.write(P.frame(P.Ping(1)) * 3)  # its next frames, unread behind our handler
            await wait_async(lambda: bool(manager.peers), what="the handshake")
            [peer] = manager.peers
            clock.now += IDLE_TIMEOUT + 1
            manager._ping_or_drop()
            assert not peer.writer.is_closing(), "dropped as silent while its frames waited on us"
            release.set()
            await wait_async(lambda: peer.waiting, what="its frames read and handled")
            assert peer.last_heard == clock.now, "its frames were counted when read"
            clock.now += IDLE_TIMEOUT + 1
            manager._ping_or_drop()
            assert peer.writer.is_closing(), "silent while we waited for it, and kept"
        finally:
            writer.close()
            await manager.stop()

    asyncio.run(scenario())


class Asked(Peer):
    """A peer the relay asked for proofs: what `_announce_proofs` reads of it (no socket)."""

    def __init__(self, waiting: bool) -> None:  # not Peer's: it needs a socket
        self.waiting, self.outbound, self.hello, self.closed = waiting, True, None, False
        self.ip, self.port = "127.0.0.9", 9230
        self.key = self.ip

    def close(self) -> None:
        self.closed = True



def test_an_unanswered_proof_request_drops_its_peer_only_if_nothing_of_it_waits_unread() -> None:
    chain = new_chain()
    node = Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], chain.state),
                state=chain.state, identity=None, producer_key=None, verifier=InlineVerifier(), clock=MockableClock())
    busy, idle = Asked(waiting=False), Asked(waiting=True)
    manager = SimpleNamespace(on=lambda kind, handler: None, peers={busy, idle}, send=lambda peer, message: None)
    relay = Relay(manager, ChainWriter(node))  # type: ignore[arg-type]
    for peer in (busy, idle):
        relay.gossip.announced(peer, [(bytes(32), 1)], now=0)  # not registered: nothing asked
        state = relay.gossip.state(peer)
        assert state is not None
        state.requests.append((time.monotonic() - 1, [(bytes(32), 1)]))  # a request past its deadline
    relay._announce_proofs()
    assert idle.closed, "a peer we wait for that never answered is dropped"
    assert not busy.closed, "a peer whose answer may wait behind our own handler was dropped"

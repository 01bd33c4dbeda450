"""The P2P reader (`peer.PeerProtocol` feeding `Peer`): frames are decoded where the bytes
arrive, queued on the peer, and its connection's task is woken once per batch; reading stops
while too many bytes of frames wait for the task, and a violation or the end of the connection
reaches the task after the frames queued before it. The writer's flow control
(`peer.PeerWriter`, ours on the public Protocol interface): a drain waits while the transport's
buffer is above its high-water mark, and the connection's loss wakes it with its error.

Each test that takes the `run` fixture runs a real loopback TCP connection (the far end a plain
socket) on asyncio's loop and on uvloop, the daemon's; those through the peer manager run on
asyncio's. Where a test needs reads cut at chosen places, it hands the bytes to the
protocol's `data_received` itself, as the transport would.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from snode.net import limits as L
from snode.net import protocol as P
from snode.net.limits import DEFAULT_LIMITS, PeerLimits
from snode.net.peer import Peer, PeerProtocol
from snode.net.peers import PeerManager
from tests.unit.conftest import peer_manager, wait_async

log = logging.getLogger(__name__)
Scenario = Callable[[PeerProtocol, Peer, socket.socket], Awaitable[None]]


def _loops() -> list[str]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return ["asyncio"]
    return ["asyncio", "uvloop"]


@pytest.fixture(params=_loops())
def run(request: Any) -> Iterator[Callable[[Scenario], None]]:
    """Run a scenario against a Peer over a fresh loopback connection, on the loop named."""

    def go(scenario: Scenario, *, receive_buffer: int = 0, send_buffer: int = 0,
           limits: PeerLimits = DEFAULT_LIMITS) -> None:
        async def main() -> None:
            with socket.socket() as listener:
                listener.bind(("127.0.0.1", 0))
                listener.listen(1)
                ours = socket.socket()
                if receive_buffer:
                    ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
                if send_buffer:
                    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
                ours.connect(listener.getsockname())
                far, _ = listener.accept()
            _, protocol = await asyncio.get_running_loop().create_connection(
                lambda: PeerProtocol(outbound=True, limits=limits), sock=ours)
            assert protocol.peer is not None
            try:
                await asyncio.wait_for(scenario(protocol, protocol.peer, far), timeout=60)
            finally:
                protocol.peer.close()
                far.close()

        if request.param == "uvloop":
            import uvloop
            uvloop.run(main())
        else:
            asyncio.run(main())

    yield go


FRAMES = [P.frame(P.Ping(1)), P.frame(P.ProofInv([(bytes(32), 5)])), P.frame(P.NewBlock(b"b" * 300)),
          P.frame(P.GetPeers())]
PAYLOADS = [f[P.HEADER_BYTES:] for f in FRAMES]


def take_all(peer: Peer) -> list[bytes]:
    return [peer.take() for _ in range(len(peer.inbox))]


async def next_frame(peer: Peer) -> bytes:
    """What the connection's task does for each frame (`PeerManager._next_message`)."""
    while not peer.inbox:
        await peer.readable()
    return peer.take()


def test_frames_split_across_reads_at_every_byte_boundary(run: Any) -> None:
    stream = b"".join(FRAMES)

    async def scenario(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        peer.open_up(P.MAX_FRAME)
        for cut in range(len(stream) + 1):
            protocol.data_received(stream[:cut])
            protocol.data_received(stream[cut:])
            assert take_all(peer) == PAYLOADS, f"cut at byte {cut}"
        for byte in range(len(stream)):  # every byte a read of its own
            protocol.data_received(stream[byte:byte + 1])
        assert take_all(peer) == PAYLOADS
        assert peer.inbox_bytes == 0

    run(scenario)


def test_several_frames_in_one_read_wake_the_task_once(run: Any) -> None:
    async def scenario(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        peer.open_up(P.MAX_FRAME)
        wakes = 0

        async def connection_task() -> list[bytes]:
            nonlocal wakes
            got: list[bytes] = []
            while len(got) < 100 * len(FRAMES):
                while not peer.inbox:
                    await peer.readable()
                    wakes += 1
                got.append(peer.take())
            return got

        task = asyncio.create_task(connection_task())
        await wait_async(lambda: peer.waiting, what="the task waiting for the peer's bytes")
        protocol.data_received(b"".join(FRAMES) * 100)
        assert not peer.waiting, "frames wait on us: the peer is not silent"
        assert await task == PAYLOADS * 100
        assert wakes == 1

    run(scenario)


def test_frames_over_their_limit_are_refused_on_their_tag_after_what_came_before(run: Any) -> None:
    async def scenario(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        big_hello = (4_097).to_bytes(P.HEADER_BYTES, "big")  # before the handshake: 4,096
        far.sendall(big_hello)
        with pytest.raises(P.ProtocolViolation, match="exceeds the 4096-byte limit"):
            await next_frame(peer)
        assert not peer.inbox

    run(scenario)

    async def after_handshake(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        peer.open_up(P.MAX_FRAME)
        big_ping = (100_000).to_bytes(P.HEADER_BYTES, "big") + b"\x91\x02"  # a Ping's head, 100 KB long
        protocol.data_received(FRAMES[0])  # two reads: a violation drops the rest of its read
        protocol.data_received(big_ping)
        assert peer.take() == PAYLOADS[0], "the frame before the violation is handled first"
        with pytest.raises(P.ProtocolViolation, match="sent a Ping frame of 100000 bytes"):
            await next_frame(peer)
        assert not peer.transport.is_reading(), "nothing more is read from it"
        protocol.data_received(FRAMES[0])
        assert not peer.inbox, "nor framed"

    run(after_handshake)


def test_what_follows_the_hello_waits_unread_for_the_handshake(run: Any) -> None:
    async def scenario(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        inv = P.frame(P.ProofInv([(bytes(32), 1)] * P.MAX_PROOF_IDS))
        assert len(inv) > 4_096
        protocol.data_received(FRAMES[0] + inv)  # in one read, as its first messages may come
        assert await next_frame(peer) == PAYLOADS[0]
        assert not peer.inbox
        assert not peer.transport.is_reading(), "nothing read until the handshake's verdict"
        peer.open_up(P.MAX_FRAME)
        assert take_all(peer) == [inv[P.HEADER_BYTES:]]
        assert peer.transport.is_reading()

    run(scenario)


def test_a_slow_task_stops_the_reading_over_the_bound_and_resumes_it_below_half(run: Any) -> None:
    bound, size, count = 256 * 1024, 16 * 1024, 256  # 4 MiB sent, 16 times the bound
    frames = [P.frame(P.NewBlock(i.to_bytes(4, "big") * (size // 4))) for i in range(count)]
    read_size = 256 * 1024  # what one read of the transport takes at most (asyncio's and uvloop's)
    most = bound + read_size + len(frames[0])

    async def scenario(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        peer.open_up(P.MAX_FRAME)
        far.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        sender = threading.Thread(target=far.sendall, args=(b"".join(frames),), daemon=True)
        sender.start()
        await wait_async(lambda: not peer.transport.is_reading(), what="reading paused over the bound")
        assert bound < peer.inbox_bytes <= most
        assert sender.is_alive(), "the sender is held back by TCP, not buffered by us"
        got = []
        while peer.inbox_bytes > bound // 2:
            assert not peer.transport.is_reading()
            got.append(peer.take())
        assert peer.transport.is_reading(), "resumed below half the bound"
        while len(got) < count:
            got.append(await next_frame(peer))
            assert peer.inbox_bytes <= most
        assert got == [f[P.HEADER_BYTES:] for f in frames], "every frame, in order"
        sender.join(timeout=10)
        assert not sender.is_alive()

    run(scenario, receive_buffer=64 * 1024, limits=PeerLimits(max_inbox_bytes=bound))


def test_the_end_of_the_connection_mid_frame_ends_the_task_after_the_frames_before_it(run: Any) -> None:
    async def scenario(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        peer.open_up(P.MAX_FRAME)
        far.sendall(FRAMES[0] + FRAMES[2][:50])
        far.shutdown(socket.SHUT_WR)
        assert await next_frame(peer) == PAYLOADS[0]
        with pytest.raises(ConnectionError):
            await next_frame(peer)
        with pytest.raises(ConnectionError):
            await next_frame(peer)  # and again: nothing waits for bytes that will not come

    run(scenario)


async def listening(manager: PeerManager) -> tuple[tuple[str, int], set[asyncio.Task[Any]]]:
    """Start `manager` on a loopback port: its address, and the tasks it runs before any peer."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await manager.start(sock)
    return sock.getsockname(), set(manager._tasks)


def test_a_peer_that_goes_mid_frame_ends_its_connection_s_task() -> None:
    """Through the peer manager's accept: the handshake done, a frame cut short by the peer's
    close wakes the connection's task, which ends and leaves nothing behind."""
    manager, hello = peer_manager(7)

    async def scenario() -> None:
        address, before = await listening(manager)
        try:
            with socket.create_connection(address) as far:
                far.sendall(P.frame(hello))
                await wait_async(lambda: bool(manager.peers), what="the handshake")
                assert len(manager._tasks - before) == 1, "one task for the connection"
                far.sendall(FRAMES[2][:50])
            await wait_async(lambda: not manager._connections and manager._tasks == before,
                             what="the connection's task to end")
            assert not manager.peers
        finally:
            await manager.stop()

    asyncio.run(scenario())


def test_small_and_empty_frames_are_bounded_by_what_they_cost(run: Any) -> None:
    """A queued frame counts INBOX_FRAME_COST beyond its payload: 4-byte empty frames or 6-byte
    GetPeers stop the reading as soon as their count, not their few bytes, reaches the bound."""
    read_size = 256 * 1024

    async def scenario(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        peer.open_up(P.MAX_FRAME)
        for frame in (P.HEADER_BYTES * b"\x00", P.frame(P.GetPeers())):
            read = frame * (read_size // len(frame))
            for _ in range(64):  # 16 MiB, twice the bound, handed over as the transport reads
                protocol.data_received(read)
                if not peer.transport.is_reading():
                    break
            assert not peer.transport.is_reading(), "reading paused"
            # at most the bound and the frames of the read that passed it (a read of 4-byte frames)
            most = L.MAX_INBOX_BYTES + read_size // P.HEADER_BYTES * L.INBOX_FRAME_COST
            assert len(peer.inbox) * L.INBOX_FRAME_COST <= peer.inbox_bytes <= most
            take_all(peer)
            assert peer.inbox_bytes == 0 and peer.transport.is_reading()

    run(scenario)


@pytest.mark.parametrize("flush_max, grace", [
    (L.CLOSE_FLUSH_MAX, 60.0),  # 8 MiB unsent, over the most a closed connection may flush: cut at once
    (16 * 1024 * 1024, 0.5),  # allowed to flush: cut after the grace
])
def test_a_closed_peer_that_does_not_read_is_ended_and_cut(flush_max: int, grace: float) -> None:
    """A ban (or an idle drop, a deny, an eviction) of a peer that reads nothing we send: its
    connection's task ends, its queued frames go, and the connection is cut instead of waiting
    forever to send what we queued for it."""
    manager, hello = peer_manager(5, limits=PeerLimits(close_grace_s=grace, close_flush_max=flush_max))

    async def scenario() -> None:
        address, before = await listening(manager)
        far = socket.socket()
        far.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            far.connect(address)
            far.sendall(P.frame(hello))
            await wait_async(lambda: bool(manager.peers), what="the handshake")
            [peer] = manager.peers
            peer.send_frame(b"\x00" * (8 << 20))  # a large answer it never reads
            await wait_async(lambda: peer.writer.transport.get_write_buffer_size() > 0,
                             what="our writes to back up")
            manager.ban(peer, "test ban")
            await wait_async(lambda: not manager.peers and manager._tasks == before,
                             what="the connection's task to end")
            assert not peer.inbox and peer.inbox_bytes == 0
            await asyncio.wait_for(peer.writer.wait_closed(), timeout=10)  # cut, not held for 60 s
        finally:
            far.close()
            await manager.stop()

    asyncio.run(scenario())


HIGH = 64 * 1024
"""The transport's high-water mark in the writer's tests (asyncio's default is also 64 KiB)."""


def small_buffers(peer: Peer, far: socket.socket) -> None:
    far.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    peer.transport.set_write_buffer_limits(high=HIGH)


async def turns(count: int = 20) -> None:
    """Let the loop run a few turns (what a drain that should not return is given)."""
    for _ in range(count):
        await asyncio.sleep(0)


def read_everything(far: socket.socket, size: int) -> threading.Thread:
    def reader() -> None:
        got = 0
        while got < size:
            got += len(far.recv(1 << 20))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    return thread


def test_a_drain_waits_while_the_buffer_is_over_its_high_water_mark(run: Any) -> None:
    size = 4 << 20

    async def scenario(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        small_buffers(peer, far)
        await asyncio.wait_for(peer.writer.drain(), timeout=1)  # nothing written: at once
        log.info("writing %d bytes the far end does not read", size)
        peer.writer.write(b"\x00" * size)
        assert peer.transport.get_write_buffer_size() > HIGH
        drain = asyncio.ensure_future(peer.writer.drain())
        await turns()
        assert not drain.done(), "a drain waits while the buffer is over the high-water mark"
        log.info("the far end reads: the drain returns once the buffer is at or below the mark")
        reader = read_everything(far, size)
        await asyncio.wait_for(drain, timeout=30)
        assert peer.transport.get_write_buffer_size() <= HIGH
        # Joined off the loop: what the buffer still holds (up to HIGH) is written by the loop.
        await asyncio.to_thread(reader.join, 30)
        assert not reader.is_alive()
        await asyncio.wait_for(peer.writer.drain(), timeout=1)

    run(scenario, send_buffer=16 * 1024)


def test_the_connection_s_loss_wakes_a_waiting_drain_and_fails_every_later_one(run: Any) -> None:
    async def scenario(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        small_buffers(peer, far)
        peer.writer.write(b"\x00" * (4 << 20))
        drains = [asyncio.ensure_future(peer.writer.drain()) for _ in range(2)]
        await turns()
        assert not any(d.done() for d in drains)
        log.info("the connection is cut: both waiting drains wake")
        peer.transport.abort()
        await asyncio.wait_for(peer.writer.wait_closed(), timeout=10)
        done, _ = await asyncio.wait(drains, timeout=10)
        assert len(done) == 2, "every waiting drain woken"
        assert all(d.exception() is None for d in drains), "a clean loss (ours) wakes them without an error"
        with pytest.raises(ConnectionResetError):
            await peer.writer.drain()

    run(scenario, send_buffer=16 * 1024)


def test_a_loss_with_an_error_reaches_the_waiting_drain(run: Any) -> None:
    """The error the transport reports (a reset, a broken pipe) is what the waiting drain raises;
    a drain the relay gave up on (cancelled) is passed over."""

    async def scenario(protocol: PeerProtocol, peer: Peer, far: socket.socket) -> None:
        small_buffers(peer, far)
        peer.writer.write(b"\x00" * (4 << 20))
        given_up = asyncio.ensure_future(peer.writer.drain())
        waiting = asyncio.ensure_future(peer.writer.drain())
        await turns()
        given_up.cancel()
        await turns()
        error = ConnectionResetError("reset by the far end")
        protocol.connection_lost(error)  # what the transport calls when its write fails
        with pytest.raises(ConnectionResetError, match="reset by the far end"):
            await asyncio.wait_for(waiting, timeout=10)
        assert given_up.cancelled()
        with pytest.raises(ConnectionResetError, match="Connection lost"):
            await peer.writer.drain()

    run(scenario, send_buffer=16 * 1024)

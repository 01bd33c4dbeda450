"""One P2P connection: its socket, its flood budget, its buffered writes, and the one
request that can be outstanding on it (GetBlocks, answered by Blocks).

The rules of what may be sent and when live in `protocol` (sans-IO); this module only moves
frames. A peer that sends more than it may, or reads less than we send, is cut off by the
peer manager (`peers.PeerManager`).

Reading is an `asyncio.Protocol` (`PeerProtocol`): the bytes of each read are framed where they
arrive, in `data_received`, and the complete frames queued on the Peer (`Peer.inbox`), so that
a read costs one copy of its bytes and the connection's task is woken once per batch of frames,
not once per read as a StreamReader's would be. Writing goes through a `PeerWriter` of ours over
the same transport: its buffering and `drain` are what the relay and our write bound rely on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from snode.net import protocol as P
from snode.net.bans import address_key
from snode.net.limits import DEFAULT_LIMITS, PeerLimits
from snode.net.protocol import FrameDecoder, ProtocolViolation

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class PeerGone(Exception):
    """The peer disconnected or did not answer in time."""


class RequestTimeout(PeerGone):
    """The peer did not answer in time (it may still be connected)."""


@dataclass
class TokenBucket:
    """Allows `rate` events per second with bursts up to `burst`."""

    rate: float
    burst: float
    tokens: float
    stamp: float

    def take(self, now: float, amount: float = 1) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < amount:
            return False
        self.tokens -= amount
        return True

    def take_up_to(self, now: float, amount: int) -> int:
        """Take as many whole tokens as there are, `amount` at most; how many."""
        self.take(now, 0)  # refilled to now
        taken = max(0, min(amount, int(self.tokens)))
        self.tokens -= taken
        return taken

    def grant(self, amount: float) -> None:
        """Add `amount` tokens beyond the burst (what a request of ours entitles the peer to send)."""
        self.tokens += amount

    def charge(self, amount: float) -> None:
        """Take `amount` whatever is left (the bucket may go into debt, repaid at `rate`)."""
        self.tokens -= amount

    def wait(self, now: float, amount: float) -> float:
        """Seconds until `amount` can be taken (0: now; an amount over the burst waits for a
        full bucket)."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return max(0.0, min(amount, self.burst) - self.tokens) / self.rate


class PeerWriter:
    """A connection's writing: its transport, and a `drain` that waits while the transport's
    buffer is above its high-water mark (the transport calls our protocol's `pause_writing` and
    `resume_writing`, passed here). Once the connection is lost a drain raises: those waiting
    then are woken with its error (none for a clean close), a later one gets ConnectionResetError.
    Ours, on the public Protocol interface only (uvicorn's flow control is the model): no private
    asyncio class holds it up, so a Python release cannot break it."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self._paused = False
        self._lost = asyncio.Event()
        self._waiters: list[asyncio.Future[None]] = []

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def close(self) -> None:
        self.transport.close()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost.set()
        if self._paused:  # (only a paused writer has drains waiting)
            self._wake(exc)

    def _wake(self, exc: Exception | None) -> None:
        for waiter in self._waiters:
            if waiter.done():
                continue  # (its drain was cancelled)
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(exc)

    async def drain(self) -> None:
        """Return once the transport's buffer is at or below its high-water mark; raise once the
        connection is lost."""
        if self.transport.is_closing():
            await asyncio.sleep(0)  # let a pending connection_lost run: a drain after a close raises
        if self._lost.is_set():
            raise ConnectionResetError("Connection lost")
        if not self._paused:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            self._waiters.remove(waiter)

    async def wait_closed(self) -> None:
        """Return once the connection is lost (closed, or cut)."""
        await self._lost.wait()


class Peer:
    """One connection."""

    def __init__(self, transport: asyncio.Transport, writer: PeerWriter, *, outbound: bool, dialled: str | None,
                 limits: PeerLimits = DEFAULT_LIMITS, clock: Callable[[], float] = time.monotonic) -> None:
        self.transport = transport
        self.limits, self.clock = limits, clock
        """Its bounds, and the monotonic clock its buckets and `last_heard` read."""
        self.writer, self.outbound, self.dialled = writer, outbound, dialled
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.ip, self.port = str(peer[0]), int(peer[1])
        self.key = address_key(self.ip)
        """What its score, its ban and MAX_PER_IP hold (`bans.address_key`)."""
        self.hello: P.Hello | None = None
        self.next_fork = 0
        """The next fork its first ForkStatus announced (0: none yet): the one height a
        connection may tell the upgrade watch (`PeerManager._check_fork`)."""
        self.height = 0
        """The height it announced (Hello, Tip): a hint, believed by nobody..."""
        self.proven = 0
        """...and the height something proved it has (`services.sync_peers`): a valid tip
        header, a block of its we adopted or kept, blocks it delivered in a sync."""
        self.proven_tip: tuple[int, bytes] | None = None
        """(height, hash) of the last tip header that proved its height: its header chain must hold it."""
        self.tip_header: P.TipHeader | None = None
        """Its last TipHeader that did not prove its height yet (checked again as we learn)."""
        self.blocks_owed = 0
        """Answers to GetBlocks requests a sync gave up waiting for: dropped when they come, so
        that a late one never passes for the answer to a later request."""
        self.decoder = FrameDecoder(max_frame=limits.hello_max_frame, one_frame=True)
        self.inbox: deque[bytes] = deque()
        """Frames read but not handled yet, framed as they arrived (`received`)..."""
        self.inbox_bytes = 0
        """...and their bytes: over MAX_INBOX_BYTES the socket is not read until the connection's
        task has taken half of them (`take`)."""
        self._paused = False
        self._ended: Exception | None = None
        """Why no more frames will come (ConnectionError, or the decoder's ProtocolViolation):
        raised to the connection's task once it has taken every frame queued before it."""
        self._wake: asyncio.Future[None] | None = None
        now = clock()
        self.bucket = TokenBucket(limits.flood_rate, limits.flood_burst, limits.flood_burst, now)
        self.proof_bucket = TokenBucket(limits.proof_rate, limits.proof_burst, limits.proof_burst, now)
        self.addr_bucket = TokenBucket(limits.addr_rate, limits.addr_burst, 0.0, now)  # limits.ADDR_RATE
        self.addresses_given = False  # our one answer to its GetPeers sent
        self.upload = TokenBucket(limits.upload_rate, limits.upload_burst, limits.upload_burst, now)
        """Bytes of blocks this peer may still pull (`relay`'s GetBlocks answers)."""
        self.last_heard = now
        """When its connection's task last took a complete frame of this peer's to handle."""
        self.waiting = False
        """True while its connection waits for its bytes, every frame read before handled: only
        then can it be silent (`PeerManager` drops it after IDLE_TIMEOUT, the relay after an
        unanswered request). A peer whose frames wait unread behind our own slow handler is not."""
        self.known_blocks: deque[bytes] = deque(maxlen=limits.known_blocks)
        """Hashes of the last blocks it sent us or we sent it (the relay sends a block once)."""
        self.last_block_at = 0.0
        """When this peer last sent us a block we adopted (eviction protects such peers)."""
        self.pending: asyncio.Future[P.Blocks] | None = None
        self.headers_pending: asyncio.Future[P.Headers] | None = None
        """Our GetHeaders it has not answered yet (one at a time: `services.sync_headers`)."""
        self.connected_at = time.time()
        self._out: list[bytes] = []
        self._out_bytes = 0

    # --- reading (`PeerProtocol` feeds it; the connection's task takes frames) ----------------

    def received(self, data: bytes) -> None:
        """Frame what arrived; wake the connection's task if a frame is complete."""
        if self._ended is not None:
            return
        try:
            frames = self.decoder.feed(data)
        except ProtocolViolation as err:
            self.end(err)
            return
        if frames:
            self._queue(frames)
            if self.decoder.holding or self.inbox_bytes > self.limits.max_inbox_bytes:
                self._pause(True)  # (holding: nothing more is read before the handshake's verdict)
            self._wake_up()  # its frames wait on us now: not silent

    def _queue(self, frames: list[bytes]) -> None:
        self.inbox.extend(frames)
        self.inbox_bytes += sum(map(len, frames)) + self.limits.inbox_frame_cost * len(frames)

    def end(self, why: Exception) -> None:
        """No more frames: `why` reaches the connection's task after those queued before it."""
        if self._ended is None:
            self._ended = why
            self._pause(True)
            self._wake_up()

    def readable(self) -> asyncio.Future[None]:
        """What to await until a frame is queued (call only with `inbox` empty: the connection's
        task, then looking again); raise why none will be once the connection has ended. A
        future, not a coroutine: one object fewer a wait."""
        if self._ended is not None:
            raise self._ended
        self._wake = asyncio.get_running_loop().create_future()
        self.waiting = True  # observable only while it waits: every frame read is handled
        return self._wake

    def _wake_up(self) -> None:
        self.waiting = False
        if self._wake is not None:
            if not self._wake.done():
                self._wake.set_result(None)
            self._wake = None

    def take(self) -> bytes:
        """The oldest queued frame (`last_heard` is now); reading resumes once half the bound
        is left."""
        payload = self.inbox.popleft()
        self.inbox_bytes -= len(payload) + self.limits.inbox_frame_cost
        self.last_heard = self.clock()
        if self._paused and self.inbox_bytes <= self.limits.max_inbox_bytes // 2 and not self.decoder.holding:
            self._pause(False)
        return payload

    def open_up(self, max_frame: int) -> None:
        """The handshake is done: frames of up to `max_frame` from now on, many a read (those that
        followed its Hello queued now); ProtocolViolation for one over it."""
        self._queue(self.decoder.open_up(max_frame))
        if self.inbox_bytes <= self.limits.max_inbox_bytes // 2:
            self._pause(False)

    def _pause(self, pause: bool) -> None:
        if pause == self._paused or self.transport.is_closing():
            return
        if not pause and self._ended is not None:
            return  # nothing more is read from a connection that ended or broke the rules
        self._paused = pause
        if pause:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    @property
    def name(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def listen_address(self) -> str | None:
        """Where this peer accepts connections, as it told us."""
        if self.hello is None or not self.hello.listen_port:
            return None
        return f"{self.ip}:{self.hello.listen_port}"

    def silent_since(self, since: float) -> bool:
        """Whether it has sent no complete frame since `since` while we waited for one (one whose
        frames wait behind our own slow handler is not silent: they are counted once read)."""
        return self.waiting and self.last_heard < since

    def send(self, message: P.Message) -> None:
        self.send_frame(P.frame(message))

    def send_frame(self, data: bytes) -> None:
        """Queue an encoded frame; the frames queued in one event-loop turn go out in one write."""
        if self.writer.is_closing():
            return
        most = self.limits.max_write_buffer
        if self.writer.transport.get_write_buffer_size() + self._out_bytes > most:
            raise ProtocolViolation(f"peer does not read what we send (write buffer over {most >> 20} MiB)")
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(data)
        self._out_bytes += len(data)

    def _flush(self) -> None:
        out, self._out, self._out_bytes = self._out, [], 0
        if out and not self.writer.is_closing():
            self.writer.write(b"".join(out))

    def ask_blocks(self, locator: list[bytes], max_count: int) -> asyncio.Future[P.Blocks]:
        """Send GetBlocks now (not at the end of this loop turn, so that the peer works while
        we do) and return the future its answer will resolve."""
        self.pending = self._ask(P.GetBlocks(locator=locator[:P.MAX_LOCATOR], max_count=max_count))
        return self.pending

    async def answer(self, request: asyncio.Future[P.Blocks]) -> P.Blocks:
        """Wait for the answer to `ask_blocks`; PeerGone on disconnect or timeout."""
        try:
            return await self._awaited(request, "blocks")
        finally:
            if self.pending is request:
                self.pending = None

    def ask_headers(self, locator: list[bytes], max_count: int) -> asyncio.Future[P.Headers]:
        """Send GetHeaders now and return the future its Headers answer will resolve."""
        self.headers_pending = self._ask(P.GetHeaders(locator=locator[:P.MAX_LOCATOR], max_count=max_count))
        return self.headers_pending

    async def answer_headers(self, request: asyncio.Future[P.Headers]) -> P.Headers:
        """Wait for the answer to `ask_headers`; RequestTimeout, or PeerGone on disconnect."""
        try:
            return await self._awaited(request, "headers")
        finally:
            if self.headers_pending is request:
                self.headers_pending = None

    def _ask(self, message: P.Message) -> asyncio.Future[Any]:
        """Send a request now; the future its answer will resolve (failed at once if closed)."""
        request: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.writer.is_closing():
            request.set_exception(ConnectionError("peer closed"))
            return request
        self.send(message)
        self._flush()
        return request

    async def _awaited(self, request: asyncio.Future[_T], what: str) -> _T:
        try:
            async with asyncio.timeout(self.limits.request_timeout):
                return await request
        except TimeoutError as err:
            raise RequestTimeout(f"{self.name} did not send the {what} it was asked for") from err
        except ConnectionError as err:
            raise PeerGone(f"{self.name} went away before it sent the {what} it was asked for") from err

    def close(self) -> None:
        """End the connection: its task is woken (its queued frames are dropped) and ends once
        out of any handler; what we queued for the peer goes out within CLOSE_GRACE_S if it is
        small (CLOSE_FLUSH_MAX), then the connection is cut."""
        for request in (self.pending, self.headers_pending):
            if request is not None and not request.done():
                request.set_exception(ConnectionError("peer closed"))
        self._flush()  # frames queued in this turn (a rejection, a ban's last words) still go out
        self.inbox.clear()
        self.inbox_bytes = 0
        self.end(ConnectionError("closed"))
        if self.transport.get_write_buffer_size() > self.limits.close_flush_max:
            self.transport.abort()  # a bulk answer it did not read: not worth holding
        elif not self.writer.is_closing():
            self.writer.close()
            asyncio.get_running_loop().call_later(self.limits.close_grace_s, self.transport.abort)


class PeerProtocol(asyncio.Protocol):
    """A P2P connection's transport events, passed to its `Peer` (made once it connects): reads
    to the Peer, flow control to its `PeerWriter` (whose `drain` waits while the transport's
    buffer is full); `connected` hears of each new Peer (the server's accept)."""

    def __init__(self, *, outbound: bool, dialled: str | None = None,
                 connected: Callable[[Peer], None] | None = None,
                 limits: PeerLimits = DEFAULT_LIMITS, clock: Callable[[], float] = time.monotonic) -> None:
        self.outbound, self.dialled, self._connected = outbound, dialled, connected
        self.limits, self.clock = limits, clock
        self.peer: Peer | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        stream = cast(asyncio.Transport, transport)  # a stream's (uvloop's is not a subclass)
        self.peer = Peer(stream, PeerWriter(stream), outbound=self.outbound, dialled=self.dialled,
                         limits=self.limits, clock=self.clock)
        if self._connected is not None:
            try:
                self._connected(self.peer)
            except Exception:  # a bug must cost this connection, not leave it open and unserved
                log.exception("serving a new connection from %s failed", self.peer.name)
                self.peer.end(ConnectionError("closed"))
                stream.abort()

    def data_received(self, data: bytes) -> None:
        assert self.peer is not None
        self.peer.received(data)

    def eof_received(self) -> bool:
        assert self.peer is not None
        self.peer.end(ConnectionError("closed"))
        return True  # keep the transport: what we queued for it (a ban's reason) still goes out

    def pause_writing(self) -> None:
        assert self.peer is not None
        self.peer.writer.pause_writing()

    def resume_writing(self) -> None:
        assert self.peer is not None
        self.peer.writer.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            self.peer.writer.connection_lost(exc)
            self.peer.end(exc or ConnectionError("closed"))

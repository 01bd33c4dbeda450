"""One P2P connection: its socket, its flood budget, its buffered writes, and the one
request that can be outstanding on it (GetBlocks, answered by Blocks).

The rules of what may be sent and when live in `protocol` (sans-IO); this module only moves
frames. A peer that sends more than it may, or reads less than we send, is cut off by the
peer manager (`peers.PeerManager`).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Final

from snode.net import limits as L
from snode.net import protocol as P
from snode.net.bans import address_key
from snode.net.protocol import FrameDecoder, ProtocolViolation

REQUEST_TIMEOUT: Final = 30.0
MAX_WRITE_BUFFER: Final = 32 * 1024 * 1024
FLOOD_RATE: Final = 500.0
"""Messages per second a peer may send on average..."""
FLOOD_BURST: Final = 2_000.0
"""...and in one burst."""
KNOWN_BLOCKS: Final = 8
HELLO_MAX_FRAME: Final = 4_096
"""Until the handshake is done a peer may send only small frames."""


class PeerGone(Exception):
    """The peer disconnected or did not answer in time."""


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

    def charge(self, amount: float) -> None:
        """Take `amount` whatever is left (the bucket may go into debt, repaid at `rate`)."""
        self.tokens -= amount

    def wait(self, now: float, amount: float) -> float:
        """Seconds until `amount` can be taken (0: now; an amount over the burst waits for a
        full bucket)."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return max(0.0, min(amount, self.burst) - self.tokens) / self.rate


class Peer:
    """One connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 outbound: bool, dialled: str | None) -> None:
        self.reader = reader
        self.writer = writer
        self.outbound = outbound
        self.dialled = dialled
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.ip, self.port = str(peer[0]), int(peer[1])
        self.key = address_key(self.ip)
        """What its score, its ban and MAX_PER_IP hold (`bans.address_key`)."""
        self.hello: P.Hello | None = None
        self.height = 0
        self.decoder = FrameDecoder(max_frame=HELLO_MAX_FRAME, one_frame=True)
        self.inbox: deque[bytes] = deque()
        """Frames read but not handled yet: at most one read's worth (bounded by MAX_FRAME)."""
        now = time.monotonic()
        self.bucket = TokenBucket(FLOOD_RATE, FLOOD_BURST, FLOOD_BURST, now)
        self.proof_bucket = TokenBucket(L.PROOF_RATE, L.PROOF_BURST, L.PROOF_BURST, now)
        self.upload = TokenBucket(L.UPLOAD_RATE, L.UPLOAD_BURST, L.UPLOAD_BURST, now)
        """Bytes of blocks this peer may still pull (`relay`'s GetBlocks answers)."""
        self.last_heard = now
        """When we last read a complete frame of this peer's from the socket."""
        self.waiting = False
        """True while its connection waits for its bytes, every frame read before handled: only
        then can it be silent (`PeerManager` drops it after IDLE_TIMEOUT, the relay after an
        unanswered request). A peer whose frames wait unread behind our own slow handler is not."""
        self.known_blocks: deque[bytes] = deque(maxlen=KNOWN_BLOCKS)
        """Hashes of the last blocks it sent us or we sent it (the relay sends a block once)."""
        self.last_block_at = 0.0
        """When this peer last sent us a block we adopted (eviction protects such peers)."""
        self.pending: asyncio.Future[P.Blocks] | None = None
        self.connected_at = time.time()
        self._out: list[bytes] = []
        self._out_bytes = 0

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
        if self.writer.transport.get_write_buffer_size() + self._out_bytes > MAX_WRITE_BUFFER:
            raise ProtocolViolation("peer does not read what we send (write buffer over 32 MiB)")
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
        self.pending = asyncio.get_running_loop().create_future()
        if self.writer.is_closing():
            self.pending.set_exception(ConnectionError("peer closed"))
            return self.pending
        self.send(P.GetBlocks(locator=locator[:P.MAX_LOCATOR], max_count=max_count))
        self._flush()
        return self.pending

    async def answer(self, request: asyncio.Future[P.Blocks]) -> P.Blocks:
        """Wait for the answer to `ask_blocks`; PeerGone on disconnect or timeout."""
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                return await request
        except (TimeoutError, ConnectionError) as err:
            raise PeerGone(f"{self.name} did not send the blocks it was asked for") from err
        finally:
            if self.pending is request:
                self.pending = None

    def close(self) -> None:
        if self.pending is not None and not self.pending.done():
            self.pending.set_exception(ConnectionError("peer closed"))
        self._flush()  # frames queued in this turn (a rejection, a ban's last words) still go out
        if not self.writer.is_closing():
            self.writer.close()

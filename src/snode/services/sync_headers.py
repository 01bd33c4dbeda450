"""Headers-first sync (peer protocol 5): the header chain a syncing node downloads before it
fetches blocks along it, memory-bounded against a peer that sends endless fake headers.

A sync from a peer of version 5 that proved HEADERS_FIRST_MIN blocks or more above ours (or any
sync while a `--trusted-checkpoint` lies above our height) first asks it for its headers
(GetHeaders after our locator, MAX_HEADERS an answer) up to the height it proved. Each header is
checked as far as no state is needed: its height and parent (a chain on the block it follows),
its version the block version of its height's fork (`params.rules_at`), a timestamp not before
its parent's, and the producer signature of the last header of each answer and of the anchors
(the assume-valid block, the trusted checkpoint); one from more than MAX_FUTURE_BLOCK_TIME ahead
ends the chain there. Whether its producer could have made it needs the state before it: the
blocks are checked in full when they come.

Memory (Bitcoin Core's headers presync, without its second download): nothing of a header is
kept but the hash of each HEADER_COMMIT_EVERY-th one (32 bytes per 50 headers), and the chain
may run at most MAX_HEADER_CHAIN headers ahead of the block it follows (3.2 MB kept at the
bound; a longer one bans its sender). A peer is asked only up to the tip header it sent (one
that proved its height, `sync_peers.check_tip`, or one kept unchecked because its producer is
not registered on our chain yet: a fresh node behind a network of service nodes), and a chain
that does not hold that tip is refused (scored as a staller, not banned: a reorganisation can
explain it). A peer that sent no tip header and proved nothing is asked for no header at all;
one that sent a lying tip header costs at most MAX_HEADER_CHAIN hashed headers and 3.2 MB.

What the chain is for:

- assume-valid: a block is an ancestor of the assume-valid block when the chain reached that
  block's hash and the block's download links it to a kept hash below it (`assumed`); those
  blocks skip their input signature checks and nothing else (`Node.stage_batch`). The blocks'
  source does not matter: a kept hash is a full hash;
- the trusted checkpoint: the chain must pass through its hash at its height before any block
  is fetched along it; a peer whose chain has another block there is refused (`Contradicts`):
  one WARNING line, never synced from again by this process, not banned nor scored (it may be
  an honest node of another fork, and a wrong checkpoint must not make a node ban every honest
  peer it meets);
- backfill (`blocks_named`): the blocks of heights [a, b) whose hashes the chain names, for a
  node that fills in history below a snapshot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from snode.core.blocks import Block, block_hash, producer_message
from snode.core.crypto import verify
from snode.core.encoding import encode
from snode.core.errors import InvalidBlock
from snode.core.genesis import Consensus
from snode.core.transition import check_block_stateless
from snode.net import protocol as P
from snode.net.limits import HEADER_COMMIT_EVERY, MAX_HEADER_CHAIN
from snode.net.peer import Peer
from snode.net.protocol import ProtocolViolation
from snode.net.relay import decode_block
from snode.node.writer import ChainWriter
from snode.params import MAX_FUTURE_BLOCK_TIME, NetworkParams

log = logging.getLogger(__name__)

HASH: Final = 32
WHOLE_HEADERS_BYTES: Final = P.MAX_HEADERS_BYTES - P.MAX_CONTROL_FRAME
"""An answer of fewer than MAX_HEADERS headers is whole only if the sender's next header could
not fit its byte bound (a header is far below MAX_CONTROL_FRAME)."""


class Contradicts(Exception):
    """The peer's header chain has another block at the trusted checkpoint's height."""


class Misled(Exception):
    """The peer's header chain does not hold the tip header it proved (scored, backed off)."""


@dataclass(slots=True)
class HeaderChain:
    """A header chain on the block (`base_height`, `base_hash`) of ours, as kept: its tip and the
    hashes of the heights that are multiples of `every`."""

    base_height: int
    base_hash: bytes
    base_time: int | None
    """The base block's timestamp, when known (its child may not be older)."""
    params: NetworkParams
    assume_valid: bytes | None = None
    checkpoint: tuple[int, bytes] | None = None
    proven: tuple[int, bytes] | None = None
    """The tip header its sender proved (height, hash): the chain must hold it."""
    cap: int = MAX_HEADER_CHAIN
    every: int = HEADER_COMMIT_EVERY
    tip_height: int = field(init=False)
    tip_hash: bytes = field(init=False)
    tip_time: int | None = field(init=False)
    kept: bytearray = field(default_factory=bytearray)
    assumed_height: int = 0
    """The height of the assume-valid block on this chain (0: not on it)."""
    ended: bool = False
    """A header from the future ended it: nothing after it is taken."""
    assumed_blocks: int = 0
    """Blocks `assumed` has shown to be ancestors of the assume-valid block (for the log)."""

    def __post_init__(self) -> None:
        self.tip_height, self.tip_hash, self.tip_time = self.base_height, self.base_hash, self.base_time

    @property
    def first_kept(self) -> int:
        return (self.base_height // self.every + 1) * self.every

    def kept_at(self, height: int) -> bytes | None:
        """The hash kept of the header at `height` (a multiple of `every`), or None."""
        if height < self.first_kept or height > self.tip_height or height % self.every:
            return None
        at = (height - self.first_kept) // self.every * HASH
        return bytes(self.kept[at:at + HASH])

    @property
    def passed_checkpoint(self) -> bool:
        """The trusted checkpoint is on this chain (or below its base, on ours), or there is none."""
        return self.checkpoint is None or self.checkpoint[0] <= self.tip_height

    def extend(self, headers: Sequence[P.SignedHeader], now: int) -> str:
        """Take the headers of one answer, in order: why the sender is to be banned for them ('':
        taken). Contradicts, Misled: see the classes."""
        for position, signed in enumerate(headers):
            if self.ended:
                return ""
            h = signed.header
            bad = self._wrong(signed, now)
            if bad or self.ended:
                return bad
            this = block_hash(h)
            anchor = this == self.assume_valid or (self.checkpoint is not None and h.height == self.checkpoint[0])
            if (anchor or position == len(headers) - 1) and not verify(
                    h.producer, producer_message(self.params.network_id, this), signed.producer_signature):
                return f"sent header {h.height} with a bad producer signature"
            self._anchors(h.height, this)
            if h.height % self.every == 0:
                self.kept += this
            self.tip_height, self.tip_hash, self.tip_time = h.height, this, h.timestamp
        return ""

    def _wrong(self, signed: P.SignedHeader, now: int) -> str:
        """Why one header cannot follow the tip, with no state ('' when it can); a header from
        the future ends the chain instead."""
        h = signed.header
        if h.height != self.tip_height + 1 or h.prev_hash != self.tip_hash:
            return "sent headers that do not form a chain on the ones before"
        if h.height - self.base_height > self.cap:
            return f"sent a header chain more than {self.cap:,} headers longer than ours"
        version = self.params.rules_at(h.height).block_version
        if h.version != version:
            return f"sent header {h.height} of version {h.version}; blocks of its height are version {version}"
        if self.tip_time is not None and h.timestamp < self.tip_time:
            return f"sent header {h.height} timestamped before its parent"
        if h.timestamp > now + MAX_FUTURE_BLOCK_TIME:
            self.ended = True
        return ""

    def _anchors(self, height: int, this: bytes) -> None:
        if self.checkpoint is not None and height == self.checkpoint[0] and this != self.checkpoint[1]:
            raise Contradicts(f"has block {this.hex()} at height {height}, not the trusted checkpoint "
                              f"{self.checkpoint[1].hex()} (--trusted-checkpoint)")
        if self.proven is not None and height == self.proven[0] and this != self.proven[1]:
            raise Misled(f"sent a header chain without the tip header {height} it sent before")
        if this == self.assume_valid:
            self.assumed_height = height

    def assumed(self, blocks: Sequence[Block]) -> int:
        """`ancestors`, counted in `assumed_blocks`."""
        count = self.ancestors(blocks)
        self.assumed_blocks += count
        return count

    def ancestors(self, blocks: Sequence[Block]) -> int:
        """How many of `blocks` (consecutive, each the child of the one before) are, from the
        first, ancestors of the assume-valid block on this chain: up to the block before it,
        when it is among them; else up to the highest of them at a kept height below it whose
        hash is the one kept. 0 when none is known to be."""
        top_assumed = self.assumed_height
        if not blocks or not top_assumed:
            return 0
        first = blocks[0].header.height
        top = min(blocks[-1].header.height, top_assumed)
        if top < first:
            return 0
        if top == top_assumed:
            if block_hash(blocks[top - first].header) == self.assume_valid:
                return top - first
            top -= 1
        point = top - top % self.every
        if point < first:
            return 0
        return point - first + 1 if self.kept_at(point) == block_hash(blocks[point - first].header) else 0

    def names(self, height: int, hash_: bytes) -> bool | None:
        """Whether this chain has the block `hash_` at `height`: None when it keeps no hash there."""
        kept = self.tip_hash if height == self.tip_height else self.kept_at(height)
        return None if kept is None else kept == hash_


def _whole(reply: P.Headers, chain: HeaderChain, asked: int) -> bool:
    """A short answer (fewer than asked while the sender claims more) is a staller's, unless
    its bytes show that the next header would not have fitted."""
    if len(reply.headers) >= asked or chain.tip_height >= reply.height or chain.ended:
        return True
    return sum(len(encode(s.header)) + 66 for s in reply.headers) >= WHOLE_HEADERS_BYTES


async def download(peer: Peer, writer: ChainWriter, limit: int, make: Callable[[int, bytes, int | None], HeaderChain],
                   now: Callable[[], int]) -> HeaderChain:
    """`peer`'s header chain after the first block of our locator it has on its main chain,
    up to `limit` (the height it proved) or its tip. ProtocolViolation for what bans it;
    Contradicts, Misled; RequestTimeout, PeerGone."""
    node = writer.node
    locator = await writer.call(node.locator)
    chain: HeaderChain | None = None
    while True:
        # A follow-up names the chain's tip first, then our locator: a peer whose chain moved
        # off that tip (a reorganisation under way) answers after a block we share, not from
        # genesis, and such an answer is a changed chain (Misled, scored), not a broken one.
        ask = [chain.tip_hash, *locator][:P.MAX_LOCATOR] if chain is not None else locator
        reply = await peer.answer_headers(peer.ask_headers(ask, P.MAX_HEADERS))
        if not reply.headers:
            if chain is None:
                return make(node.height, node.state.tip_hash, node.state.timestamp)
            return chain
        if chain is None:
            chain = await _started(writer, reply.headers[0], locator, make)
        elif await _moved(writer, reply.headers[0], chain):
            raise Misled(f"its header chain moved off {chain.tip_hash.hex()[:16]} (height {chain.tip_height}) "
                         "while we downloaded it")
        bad = chain.extend(reply.headers, now())
        if bad:
            raise ProtocolViolation(bad)
        if not _whole(reply, chain, P.MAX_HEADERS):
            raise ProtocolViolation(f"sent {len(reply.headers)} headers for a request of up to {P.MAX_HEADERS} "
                                    f"while claiming height {reply.height}")
        if chain.ended or chain.tip_height >= min(reply.height, limit):
            return chain


async def _moved(writer: ChainWriter, first: P.SignedHeader, chain: HeaderChain) -> bool:
    """Whether an answer to a follow-up starts after a block of our own main chain instead of
    the downloaded tip: the peer's chain moved (a reorganisation), which is no lie. One that
    follows neither is left to `HeaderChain.extend`, which bans it."""
    h = first.header
    if h.prev_hash == chain.tip_hash:
        return False
    return await writer.call(writer.node.main_chain_hash, h.height - 1) == h.prev_hash


async def _started(writer: ChainWriter, first: P.SignedHeader, locator: list[bytes],
                   make: Callable[[int, bytes, int | None], HeaderChain]) -> HeaderChain:
    """The chain of an answer to our locator: on the block of ours its first header follows."""
    parent, base = first.header.prev_hash, first.header.height - 1
    node = writer.node
    if parent not in locator or await writer.call(node.main_chain_hash, base) != parent:
        raise ProtocolViolation("sent headers that follow none of the blocks it was asked after")
    block = await writer.call(node.block_at, base) if base else None
    return make(base, parent, block.header.timestamp if block is not None else None)


async def blocks_named(peer: Peer, chain: HeaderChain, start: int, end: int, consensus: Consensus) -> list[Block]:
    """The blocks of heights [start, end) of `peer`'s main chain, asked after the hash `chain`
    keeps at `start - 1` (a kept height, or the chain's base), each checked to be the child of
    the one before and, where the chain keeps a hash (and at `end - 1`, which must be a kept
    height or its tip), to be the block the chain names: for a backfill below a snapshot, whose
    hash chain is thus checked back to the trusted point. A block's hash covers its header only,
    so each body is checked against its header too (`check_block_stateless`: the transaction
    root and the producer's signature, on a thread): a block stored with another body would be
    served to peers and fail the history check. ProtocolViolation for a block that is not;
    RequestTimeout, PeerGone."""
    after = chain.base_hash if start - 1 == chain.base_height else chain.kept_at(start - 1)
    if after is None or chain.names(end - 1, b"") is None:
        raise ValueError(f"the header chain keeps no hash at {start - 1} or {end - 1}")
    out: list[Block] = []
    while len(out) < end - start:
        reply = await peer.answer(peer.ask_blocks([after], min(P.MAX_BLOCKS_PER_BATCH, end - start - len(out))))
        if not reply.blocks:
            raise ProtocolViolation(f"has no blocks after {start + len(out) - 1}, which its header chain holds")
        batch: list[Block] = []
        for raw in reply.blocks[:end - start - len(out)]:
            block = _named(raw, after, start + len(out) + len(batch), chain)
            batch.append(block)
            after = block_hash(block.header)
        await asyncio.to_thread(_bodies_checked, batch, consensus)
        out += batch
    return out


def _bodies_checked(blocks: Sequence[Block], consensus: Consensus) -> None:
    for block in blocks:
        try:
            check_block_stateless(block, consensus)
        except InvalidBlock as err:
            raise ProtocolViolation(f"sent block {block.header.height} with a body that is not its header's: "
                                    f"{err.reason}") from None


def _named(raw: bytes, parent: bytes, height: int, chain: HeaderChain) -> Block:
    block = decode_block(raw)
    this = block_hash(block.header)
    if block.header.prev_hash != parent or block.header.height != height or chain.names(height, this) is False:
        raise ProtocolViolation(f"sent block {block.header.height}, not the block {height} its header chain names")
    return block

"""Backfill below a snapshot (issue #36 item 4): a node started from the snapshot at its trusted
point fills in the blocks from genesis to it once it is at the tip, at low priority.

1. the header chain genesis -> trusted point (`sync_headers.HeaderChain` with the trusted point
   as its checkpoint, cut at its height): its end must be the trusted hash; a peer whose chain
   has another block there is refused (`Contradicts`: one WARNING line, not asked again by this
   process, not banned, as the headers-first sync does). Nothing of it is kept but one hash
   every HEADER_COMMIT_EVERY headers, and it serves every later peer: a chain that ends at the
   trusted hash names the only blocks below it;
2. the blocks upward from genesis in batches of HEADER_COMMIT_EVERY (`sync_headers.blocks_named`:
   each the child of the one before and, at each kept height, the one the chain names), each
   batch stored in one transaction with the new backfilled height (`ChainStore.store_backfill`):
   a node killed meanwhile goes on from the stored height and stores no block twice; a peer that
   sends a block off the header chain is banned and the batch is asked of another;
3. one request out at a time, of a peer with none of ours out, only while the tip is not syncing
   (no sync run, no sync target), PAUSE_S between batches: the tip's work goes first.

No state below the snapshot is built (the live state is the snapshot's); blocks stored are
answered (get_block, get_transaction, GetBlocks and GetHeaders to peers), the others still say
they are not here (`Node.holds`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from snode.core.blocks import block_hash
from snode.net import protocol as P
from snode.net.peer import Peer, PeerGone
from snode.net.peers import PeerManager
from snode.net.protocol import ProtocolViolation
from snode.node.writer import ChainWriter
from snode.services.sync_headers import Contradicts, HeaderChain, blocks_named

log = logging.getLogger(__name__)

PAUSE_S: Final = 0.05
"""Seconds between two batches (the tip's work and other peers' requests go first)."""
IDLE_S: Final = 1.0
"""Seconds between looks while the tip syncs or no peer can serve the next batch."""
LEAVE_S: Final = 60.0
"""Seconds a peer that could not serve (no blocks there, a timeout) is not asked again."""


class Backfill:
    """Fill in the blocks below `history_start` (see the module's text)."""

    def __init__(self, writer: ChainWriter, peers: PeerManager, tip_busy: Callable[[], bool],
                 clock: Callable[[], float]) -> None:
        self.writer, self.peers, self.node = writer, peers, writer.node
        self.tip_busy, self.clock = tip_busy, clock
        self.chain: HeaderChain | None = None
        self._left: dict[str, float] = {}
        """Peers (by key) not to ask until a time: one that could not serve."""
        self._refused: set[str] = set()
        """Peers whose header chain contradicts the trusted point: never asked again."""

    async def run(self) -> None:
        """Until every block below `history_start` is stored."""
        node = self.node
        top = node.history_start
        if node.history_percent == 100:
            return
        log.info("backfill: downloading blocks %d to %d below the snapshot of height %d", node.backfilled + 1,
                 top - 1, top)
        while node.backfilled < top - 1:
            peer = self._peer() if not self.tip_busy() else None
            if peer is None:
                await asyncio.sleep(IDLE_S)
                continue
            await self._from(peer)
            await asyncio.sleep(PAUSE_S)
        log.info("backfill: done, every block below the snapshot of height %d is here (history complete)", top)

    def _peer(self) -> Peer | None:
        """A peer of version HEADERS_VERSION or later claiming the snapshot's height, with no
        request of ours out, not left or refused."""
        now, top = self.clock(), self.node.history_start
        for peer in self.peers.peers:
            free = peer.pending is None and peer.headers_pending is None and not peer.writer.is_closing()
            if (free and peer.hello is not None and peer.hello.version >= P.HEADERS_VERSION and peer.height >= top
                    and peer.key not in self._refused and self._left.get(peer.key, 0.0) <= now):
                return peer
        return None

    async def _from(self, peer: Peer) -> None:
        """One step from `peer`: the header chain when there is none yet, else one batch."""
        try:
            if self.chain is None:
                self.chain = await self._headers(peer)
            else:
                await self._batch(peer, self.chain)
        except Contradicts as err:
            self._refused.add(peer.key)
            log.warning("backfill: not asking %s again: its header chain %s", peer.name, err)
        except ProtocolViolation as err:
            log.warning("backfill: banned %s: %s", peer.name, err)
            self.peers.ban(peer, f"backfill: {err}")
        except (PeerGone, ConnectionError, TimeoutError):
            self._left[peer.key] = self.clock() + LEAVE_S

    async def _headers(self, peer: Peer) -> HeaderChain | None:
        """`peer`'s header chain from genesis up to the trusted point, or None (it left) when it
        has none there (a node that started from a snapshot itself)."""
        node, top = self.node, self.node.history_start
        genesis = await self.writer.call(node.block_at, 0)
        trusted = await self.writer.call(node.main_chain_hash, top)
        assert genesis is not None and trusted is not None
        chain = HeaderChain(0, block_hash(genesis.header), genesis.header.timestamp, node.params,
                            checkpoint=(top, trusted), cap=max(top, 1))
        while chain.tip_height < top:
            reply = await peer.answer_headers(peer.ask_headers([chain.tip_hash], P.MAX_HEADERS))
            headers = [h for h in reply.headers if h.header.height <= top]
            if not headers:
                self._left[peer.key] = self.clock() + LEAVE_S
                return None
            bad = chain.extend(headers, int(self.clock()))
            if bad:
                raise ProtocolViolation(bad)
            if chain.ended and chain.tip_height < top:
                raise ProtocolViolation(f"sent header {chain.tip_height + 1} from the future, below the snapshot")
        log.info("backfill: the header chain from genesis to the snapshot of height %d ends at its hash (from %s)",
                 top, peer.name)
        return chain

    async def _batch(self, peer: Peer, chain: HeaderChain) -> None:
        """The next batch from `peer`, checked against `chain`, stored with the new height."""
        node, top, every = self.node, self.node.history_start, chain.every
        start = node.backfilled - node.backfilled % every + 1
        end = min(start - 1 + every, top) + 1
        blocks = await blocks_named(peer, chain, start, end, node.consensus)
        done = await self.writer.call(node.store_backfill, blocks)
        log.debug("backfill: blocks %d to %d stored from %s (%d %%)", start, done, peer.name, node.history_percent)

"""The sync service: the asyncio adapter around `sync_machine.SyncMachine`.

It picks the peer with the highest chain, runs one machine against it, and does what the machine
says: send GetBlocks, stage and store batches through the node's ChainWriter (off the event
loop), switch to a longer fork, ban a peer that lies. It keeps the node's sync target current
(`Node.note_sync_target`) and logs progress (height / target, blocks per second, ETA).

It wakes when a peer connects or announces a higher tip (`Tip`), and when the relay saw a block
it cannot connect yet (`BlocksAhead`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final

from snode.core.blocks import Block
from snode.core.errors import BlockFromFuture, SnodeError
from snode.net import protocol as P
from snode.net.events import BlocksAhead, PeerConnected
from snode.net.limits import SCORE_PROTOCOL
from snode.net.peer import Peer, PeerGone
from snode.net.peers import PeerManager
from snode.net.protocol import ProtocolViolation
from snode.net.relay import Relay, decode_block
from snode.node.batches import StagedBatch, StaleBatch
from snode.node.writer import ChainWriter
from snode.store.errors import StoreError
from snode.services import sync_machine as S

log = logging.getLogger(__name__)

PROGRESS_EVERY: Final = 5.0
SYNC_STORE_BLOCKS: Final = 2 * P.MAX_BLOCKS_PER_BATCH
"""Blocks a syncing node stores per transaction: two downloads. A sync commit rewrites most
pages of the state and transaction tables whatever its size, so 1,000 blocks cost about a
fifth less CPU per block than 500; a crash loses at most that many to download again."""


class Syncer:
    """Keeps the node's chain up with the best peer's."""

    def __init__(self, peers: PeerManager, relay: Relay, writer: ChainWriter) -> None:
        self.peers = peers
        self.relay = relay
        self.writer = writer
        self.node = writer.node
        self._wanted = asyncio.Event()
        peers.on(P.Tip, self._on_tip)
        peers.on(P.Blocks, self._on_blocks)
        self.node.hub.subscribe(PeerConnected, self._on_peer)
        self.node.hub.subscribe(BlocksAhead, self._on_peer)

    def start(self) -> None:
        """Run the sync loop until the peer manager stops."""
        self.peers.spawn(self._loop(), "sync")

    # --- wake-ups -----------------------------------------------------------------------------

    async def _on_tip(self, peer: Peer, message: P.Tip) -> None:
        peer.height = message.height
        if message.height > self.node.height:
            self._wanted.set()

    async def _on_blocks(self, peer: Peer, message: P.Blocks) -> None:
        if peer.pending is not None and not peer.pending.done():
            peer.pending.set_result(message)

    def _on_peer(self, event: PeerConnected | BlocksAhead) -> None:
        if event.height > self.node.height:
            self._wanted.set()

    def _update_target(self) -> None:
        best = self.peers.best_peer()
        self.node.note_sync_target(best.height if best is not None else 0)

    # --- the loop -----------------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            while True:
                self._update_target()
                best = self.peers.best_peer()
                if best is None or best.height <= self.node.height:
                    break
                await self._sync_guarded(best)
            self._update_target()

    async def _sync_guarded(self, best: Peer) -> None:
        """One sync from `best`; what goes wrong costs that peer, never the loop."""
        try:
            await self.sync_from(best)
        except PeerGone as err:
            log.info("sync: %s; trying another peer", err)
            best.height = min(best.height, self.node.height)
            best.close()
        except BlockFromFuture as err:
            log.warning("sync from %s paused: %s (check both clocks)", best.name, err.reason)
            best.height = min(best.height, self.node.height)
        except ProtocolViolation as err:
            self.peers.misbehaving(best, SCORE_PROTOCOL, str(err))
        except StaleBatch as err:
            log.debug("sync from %s: %s; asking again from the new tip", best.name, err)
        except StoreError as err:  # our disk, not the peer (a damaged database stops the daemon)
            log.error("sync from %s: could not store the blocks: %s", best.name, err.reason)
            await asyncio.sleep(1)
        except Exception:  # a bug must not end syncing for the life of the process
            log.exception("sync from %s failed", best.name)
            best.height = min(best.height, self.node.height)
            await asyncio.sleep(1)

    async def sync_from(self, peer: Peer) -> None:
        """Sync from one peer until we have its chain (or it fails us)."""
        node = self.node
        if peer.height - node.height >= P.MAX_BLOCKS_PER_BATCH:
            node.verifier.start()  # a sync of whole downloads: its workers come up now
        run = _Run(self, peer)
        try:
            await run.drive()
        finally:
            await run.close()
            await self.writer.flush_state()  # whatever deferred state a sync that ended early left


class _Run:
    """One machine against one peer, and the batch it has staged."""

    def __init__(self, syncer: Syncer, peer: Peer) -> None:
        self.syncer = syncer
        self.peer = peer
        self.writer = syncer.writer
        node = syncer.node
        self.machine = S.SyncMachine(
            peer_height=peer.height, node_height=node.height, node_tip=node.state.tip_hash,
            store_blocks=SYNC_STORE_BLOCKS, batch_blocks=P.MAX_BLOCKS_PER_BATCH,
            could_produce=syncer.relay.could_produce,
        )
        self.held: StagedBatch | None = None
        self.requests: list[asyncio.Future[P.Blocks]] = []
        self.started, self.start_height = time.monotonic(), node.height
        self.last_report = self.started

    async def drive(self) -> None:
        machine, node = self.machine, self.syncer.node
        actions = machine.start()
        while True:
            await self.execute(actions)
            if machine.done:
                return
            machine.on_node(node.height, node.state.tip_hash)
            actions = machine.resume()
            if actions or machine.done:
                continue
            try:
                reply = await self.peer.answer(self.requests.pop(0))
            except PeerGone:
                await self.execute(machine.on_timeout())
                raise
            blocks = _decode(reply.blocks)
            actions = machine.on_blocks(reply.height, blocks, sum(len(b) for b in reply.blocks))
            self.peer.height = machine.peer_height
            self._progress()

    async def execute(self, actions: list[S.Action]) -> None:
        """Do what the machine says, in order (a Stage's answer may add actions)."""
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            match action:
                case S.Request():
                    await self._request(action)
                case S.Stage():
                    queue[:0] = await self._stage(action)
                case S.Finish():
                    await self._finish()
                case S.Reorganize():
                    await self._reorganize(action.branch)
                case S.ApplyOrphans():
                    await self.syncer.relay.apply_orphans()
                case S.Score():
                    self.syncer.peers.misbehaving(self.peer, action.points, action.reason)
                case S.Ban():
                    raise ProtocolViolation(action.reason)
                case S.Done():
                    self.peer.height = action.peer_height

    async def _request(self, action: S.Request) -> None:
        locator = [action.top] if action.top is not None else []
        if action.with_locator:
            locator += await self.writer.call(self.syncer.node.locator)
        self.requests.append(self.peer.ask_blocks(locator, P.MAX_BLOCKS_PER_BATCH))

    async def _stage(self, action: S.Stage) -> list[S.Action]:
        held = self.held
        if action.join:
            batch = await self.writer.stage_batch(action.blocks, extending=held)
        else:
            batch = await self.writer.stage_batch(action.blocks, after=held)
            if held is not None:
                self.held = None
                await self._store(held, more=batch.failure is None)
        self.held = batch
        more = self.machine.peer_height > action.blocks[-1].header.height
        staged = S.Staged(batch.height, batch.state.tip_hash, len(batch.commits), batch.failure is not None)
        return self.machine.on_staged(staged, more)

    async def _finish(self) -> None:
        batch, self.held = self.held, None
        if batch is not None:
            await self._store(batch, more=False)

    async def _store(self, batch: StagedBatch, *, more: bool) -> None:
        """Store and adopt a staged batch; an invalid block in it is the peer's fault. `more`:
        another batch is staged after it, so the store may defer its state rows."""
        try:
            await self.writer.finish_batch(batch, defer_state=more)
        except (BlockFromFuture, StaleBatch, StoreError):
            raise
        except SnodeError as err:
            raise ProtocolViolation(f"sent an invalid block during sync: {err.reason}") from None

    async def _reorganize(self, branch: list[Block]) -> None:
        try:
            await self.writer.reorganize(branch)
        except (BlockFromFuture, StoreError):
            raise
        except SnodeError as err:
            raise ProtocolViolation(f"sent an invalid fork: {err.reason}") from None

    def _progress(self) -> None:
        self.syncer._update_target()
        now = time.monotonic()
        if now - self.last_report < PROGRESS_EVERY:
            return
        self.last_report = now
        node = self.syncer.node
        target = node.target_height or node.height
        rate = (node.height - self.start_height) / max(now - self.started, 1e-9)
        eta = (target - node.height) / rate if rate > 0 else float("inf")
        log.info("sync: height %d / %d (%.1f%%), %.0f blocks/s, ETA %s", node.height, target,
                 100.0 * node.height / max(target, 1), rate,
                 f"{eta:.0f} s" if eta != float("inf") else "unknown")

    async def close(self) -> None:
        """Drop the requests still out; store the staged batch (its blocks are good once their
        signatures check out) unless the peer broke the rules."""
        for request in self.requests:
            if request.done() and not request.cancelled():
                request.exception()
            else:
                request.cancel()
        self.requests.clear()
        if self.held is None:
            return
        batch, self.held = self.held, None
        try:
            await self._store(batch, more=False)
            await self.syncer.relay.apply_orphans()
        except StaleBatch:
            pass
        except BlockFromFuture as err:
            log.warning("sync from %s paused: %s (check both clocks)", self.peer.name, err.reason)
        except ProtocolViolation as err:
            self.syncer.peers.misbehaving(self.peer, SCORE_PROTOCOL, str(err))


def _decode(raws: list[bytes]) -> list[Block]:
    """A download's blocks, decoded (ProtocolViolation for a block over MAX_BLOCK_BYTES or bytes
    that are not a block)."""
    return [decode_block(raw) for raw in raws]

"""Writing snapshots of the state at final heights, and what is served of them (issue #36 item 2).

A node with snapshots on (`--snapshots`, the default of a service node) writes one each time a
height that is a multiple of the network's `snapshot_interval` (and of fork v2 on, whose
headers carry the root) becomes final: checkpointed twice over (`immutable_height`), or on
regtest, whose authority chain has no checkpoints, `snapshot_depth` blocks below the tip.

The tip has moved on by then. The state at the snapshot height is made from the tip's state in
memory, taking back the blocks above it with their stored undo records (each names its parent,
so the walk follows the very chain of the state it started from, whatever the tip does
meanwhile), and keeps its checksum doing so (`state_root.undo_summed`). That state is immutable
(persistent maps), so it is read as one consistent state without holding a read transaction
open on the store's one connection (EXCLUSIVE locking: a second connection is refused, and a long
read on the one would hold off every commit for its length). Its root must be the one the
block's stored header carries, or nothing is written. Building the chunks (about 15 us an entry,
for their lanes) and writing them run on a thread of their own, never on the event loop or the
store thread; the files go in atomically (`store.snapshot`), the newest two kept.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from snode.common.logs import LIMITED
from snode.core import snapshot as core
from snode.core.blocks import Block, block_hash, header_state_root
from snode.core.crypto import hash32
from snode.core.encoding import decode_trusted, encode
from snode.core.snapshot import Manifest, SnapshotError
from snode.core.state import ChainState, Undo
from snode.core.state_root import current_checksum, header_root, undo_summed
from snode.net import protocol as P
from snode.net.addrman import network_group
from snode.net.limits import (
    MAX_SNAPSHOT_QUOTAS,
    SCORE_BAD_SNAPSHOT,
    SNAPSHOT_PULLS_PER_DAY,
    SNAPSHOT_QUOTA_WINDOW_S,
    SNAPSHOT_UPLOAD_BURST,
    SNAPSHOT_UPLOAD_RATE,
)
from snode.net.peer import Peer, PeerGone, TokenBucket
from snode.net.peers import PeerManager
from snode.node.events import BlocksAdopted, ChainReorganized
from snode.node.node import Node
from snode.node.writer import ChainWriter
from snode.store.errors import StoreError
from snode.store.snapshot import Download, Snapshots, read_chunk

log = logging.getLogger(__name__)

MAX_UNDO_DEPTH = 1_000
"""Blocks above a final height taken back to reach it at most (finality trails the tip by a few
checkpoint intervals; a node that fell further behind writes the next one instead)."""


def settled_height(node: Node) -> int:
    """The highest height a snapshot may be written at now: final, or on a network with a
    `snapshot_depth`, that many blocks below the tip."""
    depth = node.params.snapshot_depth
    return max(node.immutable_height, node.height - depth if depth else 0)


def due_height(node: Node, written: int) -> int | None:
    """The snapshot height to write now, above `written` (None: none is due). Never below the
    height a node started from a snapshot at (`history_start`): the blocks below have no undo
    records, so their states cannot be rebuilt."""
    interval = node.params.snapshot_interval
    height = settled_height(node) // interval * interval
    if height <= written or height < max(node.history_start, 1) or not node.params.rules_at(height).state_root:
        return None
    if node.height - height > MAX_UNDO_DEPTH:
        return None
    return height


class UndoRecords(Protocol):
    """What `state_at` reads of the store: a stored block's undo record by its hash."""

    def undo_of(self, hash_: bytes) -> Undo: ...


def state_at(store: UndoRecords, tip: ChainState, height: int) -> ChainState:
    """The state after the block at `height` of `tip`'s chain, from `tip` and the stored undo
    records of the blocks above it (each names its parent); its checksum kept. On the store thread."""
    state = tip
    while state.height > height:
        state = undo_summed(state, store.undo_of(state.tip_hash))
    return state


def checked_root(state: ChainState, network_id: int, carried: bytes | None) -> bytes:
    """The root of `state`, whose block's header carries root `carried`; SnapshotError when the
    state's root is not that one (never written: a bug, said in one line)."""
    checksum = current_checksum(state)
    if checksum is None or carried is None:
        raise SnapshotError(f"the state at height {state.height} has no state root to check it by")
    root = header_root(network_id, state, checksum)
    if root != carried:
        raise SnapshotError(f"the state at height {state.height} has root {root.hex()}, not its header's "
                            f"{carried.hex()}")
    return root


class SnapshotMaker:
    """A daemon's snapshots: written as heights become final, listed and read for peers."""

    def __init__(self, node: Node, writer: ChainWriter, data_dir: Path) -> None:
        self.node = node
        self.writer = writer
        self.snapshots = Snapshots(data_dir)
        self.served: list[tuple[Manifest, Path]] = []
        """The snapshots this node offers peers, oldest first (checked when listed)."""
        self.stop_every = core.STOP_EVERY
        """Entries a build makes between two looks at its stop flag (a test's is smaller)."""
        self._wake = asyncio.Event()
        node.hub.subscribe(BlocksAdopted, lambda _: self._wake.set())
        node.hub.subscribe(ChainReorganized, lambda _: self._wake.set())

    async def run(self) -> None:
        """List the snapshots on disk, then write each one that falls due, until cancelled."""
        await asyncio.to_thread(self._list)
        self._wake.set()
        while True:
            await self._wake.wait()
            self._wake.clear()
            download = self.node.snapshot_download
            if download is not None and not download.done:
                continue  # the snapshot this node starts from is served once loaded (`adopt`)
            written = self.served[-1][0].height if self.served else 0
            height = due_height(self.node, written)
            if height is not None:
                await self.write(height)

    def _list(self) -> None:
        try:
            self.snapshots.clear_unfinished()
            paths = self.snapshots.paths()
        except OSError as err:
            log.warning("snapshots: cannot read %s (%s); none is served until it can", err.filename, err.strerror)
            paths = []
        served = []
        for path in paths:
            try:
                served.append((self.snapshots.verified(path), path))
            except SnapshotError as err:
                log.warning("not serving snapshot %s: %s (the directory was changed outside snoded; delete it)",
                            path.name, err.reason)
        self.served = served

    async def adopt(self, download: Download, manifest: Manifest) -> None:
        """Serve the snapshot this node started from: its finished download moved into place
        (`Snapshots.adopt`), not written again from the state (a new node's CPU and memory);
        when it cannot be moved, one WARNING line, the download deleted, and it is written as
        any other when due."""
        try:
            path = await asyncio.to_thread(self.snapshots.adopt, download, manifest)
        except OSError as err:
            log.warning("the downloaded snapshot of height %d is not kept to serve (%s): it is written again when due",
                        manifest.height, err.strerror or err)
            await asyncio.to_thread(download.discard)
            return
        kept = {p.name for p in self.snapshots.paths()}
        self.served = [(m, p) for m, p in self.served if p.name in kept and p != path] + [(manifest, path)]
        self.served.sort(key=lambda served: served[0].height)
        log.info("serving the snapshot of height %d this node started from (%d chunks)", manifest.height,
                 len(manifest.chunks))

    async def write(self, height: int) -> Path | None:
        """Write the snapshot of the state at `height` of the tip's chain; its directory, or None
        when it could not be (one WARNING line, tried again at the next snapshot height)."""
        started = time.monotonic()
        network_id = self.node.params.network_id
        try:
            state = await self.writer.call(state_at, self.node, self.node.state, height)
            block = await self.writer.call(self.node.block_by_hash, state.tip_hash)
            carried = header_state_root(block.header) if block is not None else None
            stop = threading.Event()
            try:
                manifest, path = await asyncio.to_thread(self._build_and_write, state, network_id, carried, stop)
            except asyncio.CancelledError:
                stop.set()  # the daemon stopping: the build ends within STOP_EVERY entries, not the whole state
                raise
        except (SnapshotError, StoreError) as err:
            log.warning("no snapshot of height %d: %s", height, err.reason)
            return None
        except OSError as err:
            log.warning("no snapshot of height %d: cannot write it (%s); trying again at the next one",
                        height, err.strerror or err)
            return None
        kept = {p.name for p in self.snapshots.paths()}
        self.served = [(m, p) for m, p in self.served if p.name in kept and p != path] + [(manifest, path)]
        log.info("wrote the snapshot of height %d (%d chunks, %d bytes) in %.2f s", height, len(manifest.chunks),
                 sum(c.size for c in manifest.chunks), time.monotonic() - started)
        return path

    def _build_and_write(self, state: ChainState, network_id: int, carried: bytes | None,
                         stop: threading.Event) -> tuple[Manifest, Path]:
        """Each chunk written as it is made (one chunk in memory, not the whole state's)."""
        root = checked_root(state, network_id, carried)
        chunk_bytes = min(self.node.params.snapshot_chunk_bytes, core.CHUNK_BYTES)
        return self.snapshots.write_built(
            lambda put: core.build_into(state, network_id, root, put, chunk_bytes, stopped=stop.is_set,
                                        stop_every=self.stop_every))

    def offer(self, height: int) -> tuple[Manifest, Path] | None:
        """The served snapshot of `height` (0: the newest), or None."""
        if not self.served:
            return None
        if height == 0:
            return self.served[-1]
        return next(((m, p) for m, p in self.served if m.height == height), None)

    async def chunk(self, height: int, number: int) -> bytes | None:
        """Chunk `number` of the served snapshot of `height`, checked against its manifest
        (read on a thread); None when there is none, or its file is not the manifest's any more
        (then the snapshot is no longer served, in one WARNING line)."""
        offered = self.offer(height)
        if offered is None or not 0 <= number < len(offered[0].chunks):
            return None
        manifest, path = offered
        try:
            data = await asyncio.to_thread(read_chunk, path, number)
        except OSError as err:
            log.warning("not serving snapshot %s any more: chunk %d cannot be read (%s)", path.name, number, err)
            self.served = [(m, p) for m, p in self.served if p != path]
            return None
        info = manifest.chunks[number]
        if len(data) != info.size or hash32(data) != info.hash:
            log.warning("not serving snapshot %s any more: chunk %d is not the one its manifest lists (the "
                        "directory was changed outside snoded; delete it)", path.name, number)
            self.served = [(m, p) for m, p in self.served if p != path]
            return None
        return data


class SnapshotServer:
    """Answers peers' GetSnapshot and GetChunk (peer protocol 5) from a node's snapshots, or
    "none" (empty answers) for a node without them. A peer's requests are handled one at a
    time (its next message waits), each once the answer before has left our buffer, within its
    UPLOAD_RATE and the node's SNAPSHOT_UPLOAD_RATE, and its network group's chunks within
    SNAPSHOT_PULLS_PER_DAY whole snapshots a day (then "none")."""

    def __init__(self, peers: PeerManager, writer: ChainWriter, maker: SnapshotMaker | None,
                 clock: Callable[[], float] = time.monotonic, *, misbehave: str = "") -> None:
        self.writer = writer
        self.misbehave = misbehave
        """`SNODE_TEST_MISBEHAVE` (devnet and regtest tests): `alter-snapshot-chunk` serves each
        chunk with its last byte flipped (the asker bans it at the first); `slow-snapshot` answers
        each chunk 1 s late."""
        self.maker = maker
        self.clock = clock
        self.budget = TokenBucket(SNAPSHOT_UPLOAD_RATE, SNAPSHOT_UPLOAD_BURST, SNAPSHOT_UPLOAD_BURST, clock())
        """Bytes of snapshots all peers together may still pull."""
        self.pulled: OrderedDict[str, tuple[float, int]] = OrderedDict()
        """Network group -> (start of its quota window, bytes of chunks it pulled since), the
        last MAX_SNAPSHOT_QUOTAS groups that pulled."""
        self.peers = peers
        self.answers: Callable[[Peer, P.Snapshot | P.SnapshotChunk], Awaitable[None]] | None = None
        """Where the answers to our own snapshot requests go (a download's `on_answer`); None: no
        download, and an answer is one we never asked for."""
        peers.on(P.GetSnapshot, self._on_get_snapshot)
        peers.on(P.GetChunk, self._on_get_chunk)
        peers.on(P.Snapshot, self._on_answer)
        peers.on(P.SnapshotChunk, self._on_answer)

    async def _on_answer(self, peer: Peer, message: P.Snapshot | P.SnapshotChunk) -> None:
        if self.answers is not None:
            await self.answers(peer, message)
        else:
            self.peers.misbehaving(peer, SCORE_BAD_SNAPSHOT, f"sent a {type(message).__name__} it was not asked for")

    async def _paced(self, peer: Peer) -> None:
        """Wait until the last answer to `peer` left our buffer and both budgets allow another."""
        try:
            async with asyncio.timeout(peer.limits.upload_drain_timeout):
                await peer.writer.drain()
        except TimeoutError:
            raise PeerGone(f"{peer.name} did not read the snapshot it asked for") from None
        await asyncio.sleep(max(peer.upload.wait(peer.clock(), 1), self.budget.wait(self.clock(), 1)))

    def _charge(self, peer: Peer, size: int) -> None:
        peer.upload.charge(size)
        self.budget.charge(size)

    async def _on_get_snapshot(self, peer: Peer, message: P.GetSnapshot) -> None:
        await self._paced(peer)
        offered = self.maker.offer(message.height) if self.maker is not None else None
        answer = P.Snapshot(b"", b"")
        if offered is not None:
            manifest = offered[0]
            block = await self.writer.call(self.writer.node.block_bytes_at, manifest.height)
            if block is not None and block_hash(decode_trusted(block, Block).header) == manifest.block_hash:
                answer = P.Snapshot(block, encode(manifest))
        self._charge(peer, len(answer.block) + len(answer.manifest))
        peer.send(answer)

    def _within_quota(self, peer: Peer, height: int) -> bool:
        """Whether `peer`'s network group may pull another chunk of the snapshot of `height`
        (SNAPSHOT_PULLS_PER_DAY times its size in SNAPSHOT_QUOTA_WINDOW_S)."""
        offered = self.maker.offer(height) if self.maker is not None else None
        if offered is None:
            return True  # answered "none" anyway
        start, used = self.pulled.get(network_group(peer.ip), (0.0, 0))
        if self.clock() - start >= SNAPSHOT_QUOTA_WINDOW_S:
            return True
        return used < SNAPSHOT_PULLS_PER_DAY * sum(c.size for c in offered[0].chunks)

    def _count_pull(self, peer: Peer, size: int) -> None:
        group, now = network_group(peer.ip), self.clock()
        start, used = self.pulled.pop(group, (now, 0))
        if now - start >= SNAPSHOT_QUOTA_WINDOW_S:
            start, used = now, 0
        self.pulled[group] = (start, used + size)
        while len(self.pulled) > MAX_SNAPSHOT_QUOTAS:
            self.pulled.popitem(last=False)

    async def _on_get_chunk(self, peer: Peer, message: P.GetChunk) -> None:
        await self._paced(peer)
        if not self._within_quota(peer, message.height):
            log.info("snapshot chunks: %s's network group pulled %d snapshots of height %d today; answered none",
                     peer.name, SNAPSHOT_PULLS_PER_DAY, message.height, extra=LIMITED)
            peer.send(P.SnapshotChunk(message.height, message.number, b""))
            return
        data = await self.maker.chunk(message.height, message.number) if self.maker is not None else None
        if data and self.misbehave == "alter-snapshot-chunk":
            data = data[:-1] + bytes([data[-1] ^ 1])
        elif data and self.misbehave == "slow-snapshot":
            await asyncio.sleep(1.0)
        self._charge(peer, len(data or b""))
        if data:
            self._count_pull(peer, len(data))
        peer.send(P.SnapshotChunk(message.height, message.number, data or b""))

"""A new node's start from a snapshot at its trusted point (issue #36 items 2, 3, 6, 7).

A node whose data dir holds genesis only, given a trusted point (`--trusted-checkpoint
HEIGHT:HASH`, or its release's `NetworkParams.trusted_snapshot`), starts from the state at that
block instead of replaying every block before it, and trusts nothing it cannot check against it:

1. the block at the height, from a peer's Snapshot answer: its hash must be the trusted one (a
   block of another hash is refused however its signatures check: keys that have since unstaked
   can sign any history; its sender is left, in one WARNING line, not banned: the flag may be
   wrong), and its body its header's (`check_block_stateless`: the hash covers the header only,
   and the block is stored as the tip, served to peers and replayed by the history check); its
   header gives the state root;
2. the manifest, in the same answer: refused, its sender banned, unless its parts sum to that
   root (`core.snapshot.check_manifest`), before any chunk is asked for; one of another snapshot
   format (a newer or older release) is left alone, not scored;
3. the chunks, from every peer whose own Snapshot answer is the same manifest (one offering
   another is left alone, not scored), one request out per peer: each checked on arrival
   (`check_chunk`); a bad one bans its sender and is asked of another peer, one not answered
   within SNAPSHOT_REQUEST_TIMEOUT is asked of another and that peer is closed (a late answer
   must not pass for an unasked one);
4. each checked chunk is stored as it comes (`store.snapshot.Download`): a node killed during
   the download resumes with what it stored and fetches none of it twice; a full disk stops the
   download with one line and it goes on when space returns;
5. a manifest that no connected peer offers any more while another peer offers another manifest
   of the trusted block, for `stale_s` (its offerers were banned for chunks that did not check:
   parts that sum to the root can still be forged, one chunk's entries and another's part; or a
   restart resumed a stored one the network no longer serves) is dropped, the download
   discarded, and the other manifest fetched;
6. the manifest's own entries must be the quorum and checkpoint slot the block's hash draws from
   the loaded registry (`core.snapshot.check_own`): else the download is discarded, every peer
   that offered that manifest banned, and it starts over;
7. the state is loaded in one write transaction (`ChainStore.adopt_snapshot`), and the sync goes
   on from that height, validating every later block in full (the next block's root covers the
   block's own entries the manifest carried).

The download's progress (bytes, chunks, peers, ETA) is `SnapshotFetch.progress`, shown by the
status line, get_info and the log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from snode.common.logs import LIMITED
from snode.core import snapshot as core
from snode.core.blocks import Block, block_hash, header_state_root
from snode.core.crypto import hash32
from snode.core.encoding import decode, decode_trusted, encode
from snode.core.errors import DecodeError, InvalidBlock, SnodeError
from snode.core.snapshot import SNAPSHOT_FORMAT, Manifest, SnapshotError
from snode.core.transition import check_block_stateless
from snode.net import protocol as P
from snode.net.limits import SCORE_BAD_SNAPSHOT, SNAPSHOT_REQUEST_TIMEOUT
from snode.net.peer import Peer
from snode.net.peers import PeerManager
from snode.net.relay import peek_block
from snode.node.node import Node
from snode.node.writer import ChainWriter, NotOnTip
from snode.store.snapshot import Download

log = logging.getLogger(__name__)

MAX_CHUNK_PEERS = 4
"""Peers chunks are fetched from at once, one request out each."""
RETRY_S = 2.0
"""Seconds between looks for a peer that has the snapshot (or for space on a full disk)."""
LOG_EVERY_S = 5.0
MANIFEST_STALE_S = 60.0
"""Seconds a manifest that no connected peer offers, while another of the trusted block is
offered, is waited for before it is dropped (a peer that has it may be reconnecting)."""


class _Format(msgspec.Struct, array_like=True):
    """A manifest's first field alone: its format, read before the rest is decoded (a manifest
    of another format need not decode as this release's)."""

    format: int


@dataclass
class Progress:
    """What the download has done, for the operator (status line, get_info, the log)."""

    height: int
    chunks: int = 0
    total_chunks: int = 0
    bytes: int = 0
    total_bytes: int = 0
    peers: int = 0
    started: float = field(default_factory=time.monotonic)
    fetched: int = 0
    """Bytes fetched in this run (the ETA's rate; stored chunks of an earlier run not counted)..."""
    fetched_chunks: int = 0
    """...and chunks."""
    done: bool = False

    def eta(self) -> float | None:
        """Seconds until the download is done at its rate so far (None: no rate yet)."""
        elapsed = time.monotonic() - self.started
        if not self.fetched or elapsed <= 0:
            return None
        return (self.total_bytes - self.bytes) / (self.fetched / elapsed)

    def words(self) -> str:
        """`snapshot 1,234: 12/40 chunks, 3.1/10.0 MB from 3 peers, ETA 20 s`."""
        eta = self.eta()
        return (f"snapshot {self.height}: {self.chunks}/{self.total_chunks} chunks, {self.bytes / 1e6:.1f}/"
                f"{self.total_bytes / 1e6:.1f} MB from {self.peers} peer{'' if self.peers == 1 else 's'}"
                f"{f', ETA {eta:.0f} s' if eta is not None else ''}")

    def record(self) -> dict[str, Any]:
        return {"height": self.height, "chunks": self.chunks, "total_chunks": self.total_chunks,
                "bytes": self.bytes, "total_bytes": self.total_bytes, "peers": self.peers,
                "fetched_chunks": self.fetched_chunks, "eta": round(self.eta() or 0), "done": self.done}


class SnapshotFetch:
    """Fetch, check, store and load the snapshot at the trusted point (see the module's text)."""

    def __init__(self, node: Node, writer: ChainWriter, peers: PeerManager, data_dir: Path,
                 trusted: tuple[int, bytes], *, cap: int | None = None,
                 keep: Callable[[Download, Manifest], Awaitable[None]] | None = None,
                 request_timeout: float = SNAPSHOT_REQUEST_TIMEOUT, retry_s: float = RETRY_S,
                 stale_s: float = MANIFEST_STALE_S) -> None:
        self.node, self.writer, self.peers = node, writer, peers
        self.request_timeout, self.retry_s, self.stale_s = request_timeout, retry_s, stale_s
        """SNAPSHOT_REQUEST_TIMEOUT, RETRY_S and MANIFEST_STALE_S, smaller in tests."""
        self.keep = keep
        """Where the finished download goes to be served (`SnapshotMaker.adopt`); None: deleted."""
        self.height, self.hash = trusted
        self.download = Download(data_dir, cap)
        self.progress = Progress(self.height)
        self._asked: dict[Peer, tuple[type, int, asyncio.Future[Any]]] = {}
        """The one request out on each peer: the answer's kind, the chunk (-1: a snapshot), and its future."""
        self._left: set[Peer] = set()
        """Peers not to ask again in this download (no snapshot, a timeout, a bad answer)."""
        self._offers: dict[Peer, bytes] = {}
        """The hash of each peer's own manifest of the height (its Snapshot answer): chunks are
        asked only of peers that offered the manifest being fetched."""
        self._elsewhere: dict[Peer, bytes] = {}
        """Peers whose block at the height was another than the trusted one (each said once)."""
        self._trusted_offers: dict[Peer, bytes] = {}
        """The manifest hash of each peer whose Snapshot answer held the trusted block."""
        self._forged: set[bytes] = set()
        """Manifests whose own entries were found forged once their chunks loaded (`check_own`)."""

    # --- answers ------------------------------------------------------------------------------

    async def on_answer(self, peer: Peer, message: P.Snapshot | P.SnapshotChunk) -> None:
        """A peer's Snapshot or SnapshotChunk (`SnapshotServer.answers`): the answer to our one
        request out on it, or misbehaviour."""
        asked = self._asked.get(peer)
        number = message.number if isinstance(message, P.SnapshotChunk) else -1
        if asked is None or asked[0] is not type(message) or asked[1] != number or asked[2].done():
            self.peers.misbehaving(peer, SCORE_BAD_SNAPSHOT, f"sent a {type(message).__name__} it was not asked for")
            return
        asked[2].set_result(message)

    async def _ask(self, peer: Peer, message: P.GetSnapshot | P.GetChunk) -> Any:
        """Send one request to `peer` and wait for its answer; None on a timeout or a peer gone
        (then it is left)."""
        kind, number = (P.Snapshot, -1) if isinstance(message, P.GetSnapshot) else (P.SnapshotChunk, message.number)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._asked[peer] = (kind, number, future)
        try:
            peer.send(message)
            async with asyncio.timeout(self.request_timeout):
                while not future.done():
                    if peer not in self.peers.peers:
                        raise TimeoutError
                    await asyncio.wait({future}, timeout=0.5)
            return future.result()
        except (TimeoutError, ConnectionError):
            self._left.add(peer)
            peer.close()  # its late answer must not pass for an unasked one (and ban a slow honest peer)
            return None
        finally:
            self._asked.pop(peer, None)

    def _bad(self, peer: Peer, reason: str) -> None:
        self._left.add(peer)
        log.warning("refused the snapshot of height %d from %s: %s", self.height, peer.name, reason)
        self.peers.misbehaving(peer, SCORE_BAD_SNAPSHOT, f"sent a bad snapshot: {reason}")

    def _other_chain(self, peer: Peer, height: int, this: bytes) -> None:
        """A peer whose block at the height is not the trusted one: refused, and not asked again
        in this round, but not scored. It may be an honest node of another chain, or the flag may
        be wrong, and a mistyped --trusted-checkpoint must not make a node ban the network (as
        the header download treats a peer contradicting the checkpoint)."""
        self._left.add(peer)
        if self._elsewhere.get(peer) != this:
            self._elsewhere[peer] = this
            log.warning("refused the snapshot of height %d from %s: its block %d is %s, not the trusted point's %s "
                        "(if every peer says so, check --trusted-checkpoint)", self.height, peer.name, height,
                        this.hex(), self.hash.hex(), extra=LIMITED)  # a peer can reconnect and say it again

    def _forget_gone(self) -> None:
        """Drop what is kept of peers that are gone: a stranger reconnecting to offer another
        chain's block again and again leaves nothing behind (a peer of the same address that
        comes back is asked afresh)."""
        live = set(self.peers.peers)
        for kept in (self._offers, self._elsewhere, self._trusted_offers):
            for peer in [p for p in kept if p not in live]:
                del kept[peer]
        self._left &= live

    def _candidates(self) -> list[Peer]:
        return [p for p in self.peers.peers if p.hello is not None and p.hello.version >= P.SNAPSHOT_VERSION
                and p not in self._left and p not in self._asked]

    def _sources(self, digest: bytes) -> list[Peer]:
        """Candidates whose own Snapshot answer was the manifest of hash `digest`: the only peers
        its chunks are asked of (a peer cannot be held to another's manifest's chunks)."""
        return [p for p in self._candidates() if self._offers.get(p) == digest]

    # --- the manifest -------------------------------------------------------------------------

    def _checked_offer(self, peer: Peer, offer: P.Snapshot) -> tuple[Block, Manifest] | None:
        """The block and manifest of `offer` if both check against the trusted point; else the
        sender is banned (or, for "none", left) and None."""
        if not offer.block and not offer.manifest:
            self._left.add(peer)
            return None
        self._offers[peer] = digest = hash32(offer.manifest)
        try:
            header = peek_block(offer.block).header  # its hash is checked before the rest is decoded
        except (P.ProtocolViolation, SnodeError) as err:
            self._bad(peer, str(err))
            return None
        this = block_hash(header)
        if (header.height, this) != (self.height, self.hash):
            self._other_chain(peer, header.height, this)
            return None
        if digest in self._forged:
            self._bad(peer, "its manifest's quorum or checkpoint slot is not the one its block's hash draws")
            return None
        try:
            block = decode(offer.block, Block)
            check_block_stateless(block, self.node.consensus)
            form = decode_trusted(offer.manifest, _Format).format  # its shape only: decoded in full next
            if form != SNAPSHOT_FORMAT:  # another release's: honest, not ours to read
                self._left.add(peer)
                log.warning("left the snapshot of height %d from %s: its format is %d; this snoded reads snapshot "
                            "format %d", self.height, peer.name, form, SNAPSHOT_FORMAT, extra=LIMITED)
                return None
            manifest = decode(offer.manifest, Manifest)
        except (DecodeError, InvalidBlock) as err:
            self._bad(peer, err.reason)
            return None
        self._offers[peer] = self._trusted_offers[peer] = hash32(encode(manifest))  # as `_fetch_chunks` names it
        try:
            core.check_manifest(manifest, self.node.params.network_id, self.height, self.hash,
                                header_state_root(block.header))
        except SnapshotError as err:
            self._bad(peer, err.reason)
            return None
        return block, manifest

    async def _offer(self) -> tuple[Block, Manifest]:
        """The checked block and manifest: the stored ones of a download under way, else the
        first peer's offer that checks."""
        stored = await asyncio.to_thread(self.download.manifest)
        block_data = await asyncio.to_thread(self.download.block)
        if stored is not None and block_data is not None and stored.block_hash == self.hash:
            block = self._stored_block(block_data)
            if block is not None:
                return block, stored
            await asyncio.to_thread(self.download.discard)
        waited = 0.0
        while True:
            self._forget_gone()
            for peer in self._candidates():
                offer = await self._ask(peer, P.GetSnapshot(self.height))
                checked = self._checked_offer(peer, offer) if offer is not None else None
                if checked is not None:
                    await asyncio.to_thread(self.download.start, checked[1], encode(checked[0]))
                    return checked
            if waited % 30 == 0:
                log.info("waiting for a peer with the snapshot of height %d (trusted point %s; %d peers offered "
                         "another block there)", self.height, self.hash.hex(), len(self._elsewhere))
            await asyncio.sleep(self.retry_s)
            waited += self.retry_s
            if not self._candidates():
                self._left.clear()  # peers that had none may have one now; bad ones stay banned

    def _stored_block(self, data: bytes) -> Block | None:
        """The stored download's block if it is the trusted one, whole; else None, said in one
        WARNING line (a damaged or edited data dir: the caller discards the download)."""
        try:
            block = decode(data, Block)
            if block_hash(block.header) != self.hash:
                raise InvalidBlock(f"it is block {block.header.height} {block_hash(block.header).hex()}, "
                                   "not the trusted one")
            check_block_stateless(block, self.node.consensus)
        except (DecodeError, InvalidBlock) as err:
            log.warning("the stored snapshot download's block (%s) is not the trusted point's: %s; the download is "
                        "discarded and fetched again", self.download.path / "block", err.reason)
            return None
        return block

    # --- the chunks ---------------------------------------------------------------------------

    async def _fetch_chunks(self, manifest: Manifest) -> bool:
        """Fetch the chunks `manifest` lacks; False when it is dropped (step 5 of the module's text)."""
        have = await asyncio.to_thread(self.download.stored, manifest)
        p = self.progress
        p.total_chunks, p.total_bytes = len(manifest.chunks), sum(c.size for c in manifest.chunks)
        p.chunks, p.bytes = len(have), sum(manifest.chunks[n].size for n in have)
        if have:
            log.info("resuming the snapshot download of height %d: %d of %d chunks stored", self.height,
                     len(have), len(manifest.chunks))
        wanted = [n for n in range(len(manifest.chunks)) if n not in have]
        digest = hash32(encode(manifest))
        unoffered_since: float | None = None
        while wanted:
            self._forget_gone()
            sources = self._sources(digest)[:MAX_CHUNK_PEERS]
            unasked = [peer for peer in self._candidates() if peer not in self._offers]
            tasks = [asyncio.create_task(self._worker(peer, manifest, wanted)) for peer in sources]
            tasks += [asyncio.create_task(self._probe(peer, manifest, digest, wanted))
                      for peer in unasked[:MAX_CHUNK_PEERS - len(sources)]]
            if not tasks:
                if self._offered_elsewhere(digest):
                    unoffered_since = unoffered_since if unoffered_since is not None else time.monotonic()
                    if time.monotonic() - unoffered_since >= self.stale_s:
                        log.warning("snapshot of height %d: no peer offers the manifest being fetched any more, and "
                                    "%d offer another of the trusted block: the download is discarded and theirs "
                                    "fetched", self.height, self._offered_elsewhere(digest))
                        return False
                else:
                    unoffered_since = None
                await asyncio.sleep(self.retry_s)
                if not self._sources(digest):
                    self._left.clear()  # peers that had none may have it now; bad ones stay banned
                continue
            unoffered_since = None
            await asyncio.gather(*tasks)
        return True

    def _holds_trusted_block(self, offer: P.Snapshot) -> bool:
        """Whether `offer`'s block has the trusted height and hash (its header alone is read)."""
        try:
            header = peek_block(offer.block).header
        except (P.ProtocolViolation, SnodeError):
            return False
        return (header.height, block_hash(header)) == (self.height, self.hash)

    def _offered_elsewhere(self, digest: bytes) -> int:
        """Connected peers whose own Snapshot answer held the trusted block with another manifest
        than `digest`, when none offers `digest` (0: keep waiting for `digest`)."""
        live = set(self.peers.peers)
        offers = [d for p, d in self._trusted_offers.items() if p in live]
        return 0 if digest in offers else sum(1 for d in offers if d != digest)

    async def _probe(self, peer: Peer, manifest: Manifest, digest: bytes, wanted: list[int]) -> None:
        """Ask `peer` for its own Snapshot answer of the height; if its manifest is `digest`, fetch
        chunks from it. One of another manifest is left alone (not scored: it never offered ours)."""
        offer = await self._ask(peer, P.GetSnapshot(self.height))
        if offer is None:
            return
        if not offer.block and not offer.manifest:
            self._left.add(peer)
            return
        self._offers[peer] = offered = hash32(offer.manifest)
        if self._holds_trusted_block(offer):
            self._trusted_offers[peer] = offered
        if offered == digest:
            await self._worker(peer, manifest, wanted)

    async def _worker(self, peer: Peer, manifest: Manifest, wanted: list[int]) -> None:
        """Fetch chunks from `peer`, one request out, until none is wanted or the peer is left."""
        self.progress.peers += 1
        try:
            await self._chunks_from(peer, manifest, wanted)
        finally:
            self.progress.peers -= 1

    async def _chunks_from(self, peer: Peer, manifest: Manifest, wanted: list[int]) -> None:
        while wanted and peer not in self._left:
            number = wanted.pop(0)
            answer = await self._ask(peer, P.GetChunk(self.height, number))
            if answer is None or not answer.data:
                self._left.add(peer)
                wanted.append(number)
                return
            try:
                await asyncio.to_thread(core.check_chunk, manifest, number, answer.data)
            except SnapshotError as err:
                wanted.append(number)
                self._bad(peer, err.reason)
                return
            await self._store(number, answer.data, wanted)

    async def _store(self, number: int, data: bytes, wanted: list[int]) -> None:
        """Store a checked chunk; on a full disk, one WARNING line and it is tried again every
        RETRY_S (the download waits for space)."""
        warned = False
        while True:
            try:
                await asyncio.to_thread(self.download.put, number, data)
                break
            except OSError as err:
                if not warned:
                    log.warning("snapshot download stopped: cannot store chunk %d (%s); it goes on when space is "
                                "freed in the data dir", number, err.strerror or err)
                    warned = True
                await asyncio.sleep(self.retry_s)
        if warned:
            log.info("snapshot download goes on: chunk %d stored", number)
        p = self.progress
        p.chunks += 1
        p.bytes += len(data)
        p.fetched += len(data)
        p.fetched_chunks += 1

    # --- the whole ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Fetch, check, store and load the snapshot; the node's tip is then the trusted block.
        SnapshotError if the chain is past genesis before it starts or loads (a relayed block)."""
        while True:
            self._at_genesis()
            block, manifest = await self._offer()
            state = await self._fetched(manifest)
            if state is not None:
                break
        try:
            await self.writer.adopt_snapshot(block, state, lambda: self._rows(manifest))
        except NotOnTip as err:
            raise SnapshotError(f"{err}, so it is not loaded (a snapshot loads into a chain at genesis only)") from None
        log.info("loaded the snapshot of height %d (%d entries): syncing on from it", self.height,
                 len(state.utxos) + len(state.service_nodes) + len(state.quorums) + len(state.checkpoints))
        if self.keep is not None:
            await self.keep(self.download, manifest)
        else:
            await asyncio.to_thread(self.download.discard)
        self.progress.done = True

    def _at_genesis(self) -> None:
        if self.node.height != 0:
            raise SnapshotError(f"this node's chain is at block {self.node.height}, not at genesis, so no snapshot "
                                "is fetched (a snapshot loads into a chain at genesis only)")

    async def _fetched(self, manifest: Manifest) -> Any:
        """The state of `manifest`, its chunks fetched, checked and loaded; None (the download
        discarded, every peer that offered it banned) if its own entries are not the ones its
        block's hash draws from the loaded registry (`core.snapshot.check_own`)."""
        log.info("snapshot of height %d: %d chunks, %d bytes, checked against the trusted block's state root",
                 self.height, len(manifest.chunks), sum(c.size for c in manifest.chunks))
        reporter = asyncio.create_task(self._report())
        try:
            offered = await self._fetch_chunks(manifest)
        finally:
            reporter.cancel()
        if not offered:
            await self._start_over()
            return None
        try:
            state = await asyncio.to_thread(self._load, manifest)
        except (OSError, DecodeError, SnapshotError) as err:  # a stored chunk gone or damaged since it was checked
            log.warning("the stored snapshot download (%s) cannot be read back: %s; it is discarded and fetched again",
                        self.download.path, getattr(err, "reason", None) or err)
            await self._start_over()
            return None
        try:
            await asyncio.to_thread(core.check_own, manifest, state, self.node.consensus)
        except SnapshotError as err:
            digest = hash32(encode(manifest))
            self._forged.add(digest)
            await asyncio.to_thread(self.download.discard)
            for peer in [p for p, offered in self._offers.items() if offered == digest]:
                self._bad(peer, err.reason)
            return None
        return state

    async def _start_over(self) -> None:
        """Discard the download (a manifest dropped, or stored chunks that cannot be read back)."""
        await asyncio.to_thread(self.download.discard)
        self.progress = Progress(self.height)

    def _load(self, manifest: Manifest) -> Any:
        """The state of the stored chunks, read one after the other (never all their entries at once)."""
        return core.load(manifest, (entry for number in range(len(manifest.chunks))
                                    for entry in core.stored_entries(manifest, number, self.download.chunk(number))))

    def _rows(self, manifest: Manifest) -> Iterator[tuple[str, Any, bytes]]:
        """The stored chunks' rows as the store writes them (`ChainStore.adopt_snapshot`)."""
        for number in range(len(manifest.chunks)):
            yield from core.stored_rows(manifest, number, self.download.chunk(number))

    async def _report(self) -> None:
        while True:
            await asyncio.sleep(LOG_EVERY_S)
            log.info("%s", self.progress.words())

"""Relay: what travels between peers besides sync. New blocks, transactions and uptime proofs,
the caches that keep each from being handled twice, blocks that wait for their parent, and the
blocks we serve to peers that sync from us.

In: `NewBlock` -> the node (through the ChainWriter, off the event loop); `NewTransaction` -> the
mempool; `Proof` / `ProofRejected` -> a `ProofMessage` event for the service-node duties, which
judge proofs; `GetBlocks` -> the stored blocks. Out: the node's events: `BlocksAdopted` ->
`NewBlock` (or for a batch `TipHeader`, `Tip` to peers older than version 4),
`TransactionAdmitted` -> `NewTransaction`, each to every peer but the one it came from;
`ProofAccepted` -> our own `Proof` to every peer, another's announced (`ProofInv`, then
`GetProofs` / `Proofs`: `net.proof_gossip`) to peers of protocol 3, pushed to older ones.

A block over MAX_BLOCK_BYTES is refused on its length, before it is decoded, and its sender
banned. A block that does not connect to our tip is checked as far as it can be without its
parent (a forgery is refused at once); it is kept (`orphans`: bounded in bytes overall and per
peer) only if its producer could have made it (an authority or a registered service node) and
its height is near our tip, and announced as `BlocksAhead`, so that the sync service fetches
what is missing. A peer's block requests are answered one at a time, each once the answer
before it has left our buffer, within the peer's upload budget (`limits.UPLOAD_RATE`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Container, Hashable
from typing import Final, NoReturn

import msgspec

from snode.core.blocks import HEADER_CLASSES, Block, BlockHeader, Checkpoint, Header, block_hash, producer_message
from snode.core.crypto import verify
from snode.core.encoding import decode, encode
from snode.core.errors import BadSignature, BlockFromFuture, DecodeError, SnodeError
from snode.core.transactions import Transaction, txid
from snode.core.transition import check_block_stateless
from snode.core.types import Signature
from snode.net import limits as L
from snode.net import protocol as P
from snode.net.events import BlocksAhead, CheckpointMessage, PeerConnected, PeerDisconnected, ProofMessage
from snode.net.limits import DEFAULT_LIMITS, PeerLimits
from snode.net.orphans import OrphanPool
from snode.net.peer import Peer, PeerGone
from snode.net.peers import PeerManager
from snode.net.proof_gossip import INV_INTERVAL, ProofGossip
from snode.net.protocol import ProtocolViolation
from snode.node.events import BlocksAdopted, ProofAccepted, TransactionAdmitted
from snode.node.upgrade import CannotValidateYet
from snode.node.views import NetNode
from snode.node.writer import ChainWriter, NotOnTip
from snode.params import MAX_BLOCK_BYTES
from snode.store.errors import StoreError

log = logging.getLogger(__name__)


class _GossipSide:
    """The node and the peers as the proof gossip sees them (`proof_gossip.GossipSide`)."""

    def __init__(self, relay: Relay) -> None:
        self._node, self._peers = relay.node, relay.peers

    def registry(self) -> Container[bytes]:
        return self._node.state.service_nodes

    def accepted_at(self, pubkey: bytes) -> int:
        return self._node.proofs.last_accepted(pubkey)

    def connected(self, peer: Hashable) -> bool:
        return peer in self._peers.peers

    def outbound(self, peer: Hashable) -> bool:
        return isinstance(peer, Peer) and peer.outbound

    def address(self, peer: Hashable) -> Hashable:
        return peer.key if isinstance(peer, Peer) else peer


class Relay:
    """Gossip of blocks, transactions and proofs for one node."""

    misbehave: str = ""
    """`SNODE_TEST_MISBEHAVE` (devnet and regtest tests): see `misbehave_old_blocks`."""

    def __init__(self, peers: PeerManager, writer: ChainWriter, *, limits: PeerLimits = DEFAULT_LIMITS) -> None:
        self.peers = peers
        self.limits = limits
        self.writer = writer
        self.node: NetNode = writer.node
        self.orphans = OrphanPool()
        self._seen_txs: OrderedDict[bytes, None] = OrderedDict()
        self._accepting: dict[bytes, dict[str, tuple[Peer, P.NewBlock]]] = {}
        """The blocks from peers that the writer is accepting now, by hash, with the copies that
        other peers sent meanwhile, by address (`max_parked` at most; the first copy's address
        under its key too, holding nothing to take up)."""
        self.gossip = ProofGossip(_GossipSide(self), self.node.clock, limits=limits)
        peers.on(P.NewBlock, self._on_new_block)
        peers.on(P.NewTransaction, self._on_new_transaction)
        peers.on(P.Proof, self._on_proof)
        peers.on(P.ProofRejected, self._on_proof)
        peers.on(P.ProofAck, self._on_proof)
        peers.on(P.ProofInv, self._on_proof_inv)
        peers.on(P.GetProofs, self._on_get_proofs)
        peers.on(P.Proofs, self._on_proofs)
        peers.on(P.GetBlocks, self._on_get_blocks)
        peers.on(P.GetHeaders, self._on_get_headers)
        peers.on(P.NewCheckpoint, self._on_checkpoint)
        node = self.node
        node.subscribe(BlocksAdopted, self._relay_blocks)
        node.subscribe(TransactionAdmitted, self._relay_transaction)
        node.subscribe(ProofAccepted, self._relay_proof)
        node.subscribe(PeerDisconnected, self._on_peer_gone)
        node.subscribe(PeerConnected, self._on_peer_connected)
        self._announcing = False
        self._wake: tuple[float, asyncio.TimerHandle] | None = None
        """When `_ask_due` runs next, and its timer (cancelled at stop: `_announce_every`)."""
        self._stopped = False
        self._pushed_to: set[Peer] = set()
        """The handshaken peers of a version before PROOF_INV_VERSION: relayed proofs are pushed
        to them in full (the others get announcements), so a relayed proof looks at these only,
        not at every peer."""

    # --- in -----------------------------------------------------------------------------------

    async def _on_new_block(self, peer: Peer, message: P.NewBlock) -> None:
        """A relayed block; dropped while a snapshot download is under way (adopting one would
        keep the snapshot from loading; the peer is honest: no score)."""
        if not self._downloading_snapshot():
            await self._take_block(peer, message)

    async def _take_block(self, peer: Peer, message: P.NewBlock) -> None:
        node = self.node
        try:
            head = peek_block(message.block)
        except CannotValidateYet as err:  # a later fork's block: not the sender's fault
            log.debug("block from %s not read: %s", peer.name, err.reason)
            return
        h = head.header
        this = block_hash(h)
        peer.known_blocks.append(this)  # not sent back to it when we adopt it
        if h.height <= node.height and await self._on_main_chain(h, this):
            return
        parked = self._accepting.get(this)
        if parked is not None:
            # Another peer's copy is at the writer: judged once, not decoded again; this one is
            # taken up only if that one turns out to be a forgery of it (`_after_forgery`).
            if peer.key not in parked and len(parked) <= self.limits.max_parked:
                parked[peer.key] = (peer, message)
            return
        if h.prev_hash != node.state.tip_hash and not self.could_produce(h.producer):
            self._on_unknown_producer(peer, head)
            return
        if h.height <= node.height:
            # A rival of a block we have: it can never connect to our tip, so it is not kept
            # (nor decoded); a longer fork reaches us through sync's locator.
            return
        block = decode_block(message.block)
        if h.prev_hash != node.state.tip_hash:
            self._on_orphan(peer, block, len(message.block))
            return
        self._accepting[this] = {peer.key: (peer, message)}
        try:
            await self.writer.accept_block(block)
        except NotOnTip:
            # Another copy of it, or a rival of it, was adopted while it waited: a duplicate is
            # dropped, a rival waits like any block that does not build on our tip.
            if not await self._on_main_chain(h, this):
                self.orphans.add(block, len(message.block), peer.ip)
            return
        except BlockFromFuture as err:
            log.warning("ignored block %d from %s: %s (check both clocks)", h.height, peer.name, err.reason)
            return
        except StoreError as err:  # our disk, not the peer's block (a damaged database stops the daemon)
            log.error("could not store block %d from %s: %s", h.height, peer.name, err.reason)
            return
        except CannotValidateYet:
            # A block of a fork this node does not know: kept (`node.upgrade`), never the sender's fault.
            peer.height = max(peer.height, h.height)
            return
        except SnodeError as err:
            parked = self._accepting.pop(this, {})
            parked.pop(peer.key, None)
            await self._after_forgery(list(parked.values()))
            raise ProtocolViolation(f"sent an invalid block {h.height}: {err.reason}") from None
        finally:
            self._accepting.pop(this, None)
        peer.height = max(peer.height, h.height)
        peer.proven = max(peer.proven, h.height)  # a block of its that we adopted
        peer.last_block_at = time.monotonic()
        await self.apply_orphans()

    async def _after_forgery(self, parked: list[tuple[Peer, P.NewBlock]]) -> None:
        """The copy at the writer was invalid (a body forged under the real header): take up
        the copies other peers sent meanwhile, until one is adopted; each sender answers for
        its own copy."""
        for peer, message in parked:
            try:
                await self._on_new_block(peer, message)
            except ProtocolViolation as err:
                self.peers.misbehaving(peer, L.SCORE_PROTOCOL, str(err))
                continue
            return

    def _downloading_snapshot(self) -> bool:
        """A snapshot download is under way (`node.snapshot_download`): the tip must stay the
        block it started on until the snapshot is loaded."""
        download = self.node.snapshot_download
        return download is not None and not download.done

    def could_produce(self, producer: bytes) -> bool:
        """Whether `producer` is a key that could have made a block: an authority or a registered
        service node (orphans here, a sync's fork in `services.sync_machine`)."""
        node = self.node
        return producer in node.consensus.authorities or producer in node.state.service_nodes

    def _on_unknown_producer(self, peer: Peer, head: BlockHead) -> None:
        """A block off our tip signed by a key that is neither an authority nor a registered
        service node: refused on its header alone (its transactions are never decoded). Near
        our tip nobody honest relays one; far ahead we may just not know the producer yet."""
        h, node = head.header, self.node
        message = producer_message(node.params.network_id, block_hash(h))
        if not verify(h.producer, message, head.producer_signature):
            raise ProtocolViolation(f"sent an invalid block {h.height}: it has a bad producer signature")
        ahead = h.height > node.height + L.ORPHAN_AHEAD
        self.peers.misbehaving(peer, L.SCORE_UNKNOWN_AHEAD if ahead else L.SCORE_UNKNOWN_PRODUCER,
                               f"sent block {h.height} signed by a key that is neither an authority "
                               "nor a registered service node")

    def _on_orphan(self, peer: Peer, block: Block, size: int) -> None:
        """A block of a possible producer that does not build on our tip: refuse a forgery,
        then keep it (bounded) if it is near our tip. (A block on the tip gets every check, its
        signature once, when the node accepts it.)"""
        node, h = self.node, block.header
        try:
            check_block_stateless(block, node.consensus)
        except SnodeError as err:
            raise ProtocolViolation(f"sent an invalid block {h.height}: {err.reason}") from None
        peer.height = max(peer.height, h.height)
        peer.proven = max(peer.proven, h.height)  # signed by a key that could have made it
        if h.height <= node.height + L.ORPHAN_AHEAD:
            self.orphans.add(block, size, peer.ip)
        node.publish(BlocksAhead(peer, h.height))

    async def _on_main_chain(self, header: BlockHeader, this: bytes) -> bool:
        """Whether we have this block (hash `this`) on the main chain already (most copies of a
        new block are of the tip, answered without the store)."""
        node = self.node
        if header.height == node.height:
            return this == node.state.tip_hash
        return await self.writer.call(node.main_chain_hash, header.height) == this

    async def apply_orphans(self) -> None:
        """Accept the kept blocks that now connect to the tip, one after the other."""
        node = self.node
        while not self._downloading_snapshot():
            child = self.orphans.pop(node.state.tip_hash)
            if child is None:
                return
            try:
                await self.writer.accept_block(child)
            except NotOnTip:
                continue
            except CannotValidateYet:
                return  # kept by the node for a snoded that knows its fork
            except SnodeError as err:
                log.info("dropped a waiting block %d: %s", child.header.height, err)
                return

    async def resume_pending(self) -> None:
        """At start: the blocks an earlier run kept as "cannot validate yet" (`node.upgrade`),
        tried on the tip again in height order (this run may know their fork); those it still
        cannot validate stay kept. Sync then goes on from them."""
        node = self.node
        kept = node.upgrade.pending()
        if not kept:
            return
        log.info("trying the %d blocks kept for a fork an earlier run did not know", len(kept))
        for height, data in kept:
            if height != node.height + 1:
                continue
            try:
                block = decode(data, Block)
                await self.writer.accept_block(block)
            except (NotOnTip, DecodeError):
                continue
            except CannotValidateYet:
                return
            except SnodeError as err:
                log.info("a block kept for an unknown fork, %d, is not valid here: %s", height, err.reason)
        await self.apply_orphans()

    async def _on_new_transaction(self, peer: Peer, message: P.NewTransaction) -> None:
        try:
            tx = decode(message.tx, Transaction)
        except DecodeError as err:
            raise ProtocolViolation(f"sent a transaction that does not decode: {err.reason}") from None
        tid = txid(tx)
        if tid in self._seen_txs or tid in self.node.pool:
            return
        self._remember_tx(tid)
        try:
            self.node.submit_transaction(tx, self.node.now(), source=peer)
        except BadSignature as err:
            raise ProtocolViolation(f"sent a transaction with a bad signature: {err.reason}") from None
        except SnodeError as err:
            log.debug("transaction %s from %s not taken: %s", tid.hex()[:16], peer.name, err)

    def _remember_tx(self, tid: bytes) -> None:
        self._seen_txs[tid] = None
        while len(self._seen_txs) > self.limits.seen_tx_cache:
            self._seen_txs.popitem(last=False)

    async def _on_proof(self, peer: Peer, message: P.Proof | P.ProofRejected | P.ProofAck) -> None:
        """Uptime proofs are judged by the service-node duties (`services.sn_duties`)."""
        if isinstance(message, P.Proof) and self.gossip.registered(message.proof.pubkey):
            state = self.gossip.state(peer)
            if state is not None:
                state.learn(message.proof.pubkey, message.proof.timestamp)
        self.node.publish(ProofMessage(peer, peer.ip, peer.name, message))

    # --- proofs by announcement (`net.proof_gossip`) -------------------------------------------

    async def _on_proof_inv(self, peer: Peer, message: P.ProofInv) -> None:
        request = self.gossip.announced(peer, message.ids, time.monotonic())
        if request is not None:
            self.peers.send(peer, request)
        self._wake_at_next_due()

    async def _on_get_proofs(self, peer: Peer, message: P.GetProofs) -> None:
        self.peers.send(peer, P.Proofs(self.gossip.serve(peer, message.ids)))

    async def _on_proofs(self, peer: Peer, message: P.Proofs) -> None:
        answer = self.gossip.answered(peer, message.proofs, time.monotonic())
        self._ask(answer.requests)
        if answer.problem:
            self.peers.misbehaving(peer, L.SCORE_UNASKED_PROOFS, answer.problem)
            return
        publish = self.node.publish
        for proof in answer.proofs:
            publish(ProofMessage(peer, peer.ip, peer.name, P.Proof(proof, relayed=True)))

    def _on_peer_connected(self, event: PeerConnected) -> None:
        self.gossip.state(event.peer)  # made now: its connection's place among the announcers
        peer = event.peer
        if isinstance(peer, Peer) and peer.hello is not None and peer.hello.version < P.PROOF_INV_VERSION:
            self._pushed_to.add(peer)
        if not self._announcing:  # the first peer: the peer manager runs (`stop` ends the task)
            self._announcing = True
            self.peers.spawn(self._announce_every(), "proof announcements")

    async def _announce_every(self) -> None:
        try:
            while True:
                await asyncio.sleep(INV_INTERVAL)
                try:
                    self._announce_proofs()
                except Exception:  # a bug here must not end the announcements
                    log.exception("announcing uptime proofs failed")
        finally:  # the peer manager stops (it cancels this task): no timer outlives it
            self._stopped = True
            if self._wake is not None:
                self._wake[1].cancel()
                self._wake = None

    def _wake_at_next_due(self) -> None:
        """Ask for what is wanted at its time (an inbound announcer's delay is shorter than
        the announcements' round), not only at the next round."""
        when = self.gossip.next_due()
        if when is None or self._stopped or (self._wake is not None and self._wake[0] <= when):
            return
        if self._wake is not None:
            self._wake[1].cancel()
        handle = asyncio.get_running_loop().call_later(max(0.0, when - time.monotonic()), self._ask_due)
        self._wake = (when, handle)

    def _ask_due(self) -> None:
        self._wake = None
        self._ask(self.gossip.due(time.monotonic()))

    def _on_peer_gone(self, event: PeerDisconnected) -> None:
        self._pushed_to.discard(event.peer)
        self._ask(self.gossip.gone(event.peer, time.monotonic()))

    def _ask(self, requests: list[tuple[object, P.GetProofs]]) -> None:
        for peer, request in requests:
            self.peers.send(peer, request)
        self._wake_at_next_due()

    def _announce_proofs(self) -> None:
        """Every INV_INTERVAL: announce what was accepted since, and drop the peers that left a
        GetProofs of ours unanswered too long (not banned: they may only be slow)."""
        peers = [p for p in self.peers.peers if p.hello is not None and p.hello.version >= P.PROOF_INV_VERSION]
        for peer, messages in self.gossip.announcements(peers):
            for message in messages:
                self.peers.send(peer, message)
        now = time.monotonic()
        for peer in self.gossip.overdue(now):
            assert isinstance(peer, Peer)
            if not peer.waiting:
                continue  # its answer may wait unread behind our own handler: judged once read
            log.info("dropping peer %s: it did not send the uptime proofs it was asked for", peer.name)
            peer.close()

    async def _on_checkpoint(self, peer: Peer, message: P.NewCheckpoint) -> None:
        """Checkpoints are judged by the checkpoint duties (`services.checkpoints`)."""
        try:
            checkpoint = decode(message.checkpoint, Checkpoint)
        except DecodeError as err:
            raise ProtocolViolation(f"sent a checkpoint that does not decode: {err.reason}") from None
        self.node.publish(CheckpointMessage(peer, checkpoint))

    async def _on_get_blocks(self, peer: Peer, message: P.GetBlocks) -> None:
        """One request at a time (the peer's messages wait while this runs): answered once the
        answer before it has left our buffer, and once the peer's upload budget has paid off
        what it pulled before."""
        await self._upload_turn(peer)
        node = self.node
        height = node.height
        blocks = await self.writer.call(node.blocks_after, message.locator, message.max_count, P.MAX_BATCH_BYTES)
        if blocks is None:  # below the snapshot we started from: a range we cannot serve, not a claim of more
            peer.send(P.Blocks(blocks=[], height=0))
            return
        if self.misbehave:
            blocks = await misbehave_old_blocks(self.misbehave, blocks)
        peer.upload.charge(sum(len(b) for b in blocks))
        peer.send(P.Blocks(blocks=blocks, height=height))

    async def _on_get_headers(self, peer: Peer, message: P.GetHeaders) -> None:
        """As a GetBlocks (one at a time, the same upload budget, an empty answer at height 0
        below our history): the headers, bounded by MAX_HEADERS_BYTES; charged the bytes of the
        blocks read for them when that is more than the answer (up to 2,000 whole blocks)."""
        await self._upload_turn(peer)
        node = self.node
        height = node.height
        found = await self.writer.call(node.headers_after, message.locator, message.max_count, P.MAX_HEADERS_BYTES)
        heads, read = found if found is not None else ([], 0)
        reply = P.frame(P.Headers(headers=[P.SignedHeader(h, s) for h, s in heads],
                                  height=height if found is not None else 0))
        peer.upload.charge(max(len(reply), read))
        self.peers.send_frame(peer, reply)

    async def _upload_turn(self, peer: Peer) -> None:
        """Once our answer before has left our buffer and the peer's upload budget has paid off
        what it pulled before."""
        try:
            async with asyncio.timeout(self.limits.upload_drain_timeout):
                await peer.writer.drain()
        except TimeoutError:
            raise PeerGone(f"{peer.name} did not read the blocks it asked for") from None
        await asyncio.sleep(peer.upload.wait(peer.clock(), 1))

    # --- out ----------------------------------------------------------------------------------

    def _relay_blocks(self, event: BlocksAdopted) -> None:
        if len(event.blocks) == 1:
            # Not to a peer that sent it to us: about half the copies in a dense mesh.
            this = event.tip_hash
            data = P.frame(P.NewBlock(encode(event.blocks[-1])))
            for peer in list(self.peers.peers):
                if peer.hello is not None and this not in peer.known_blocks:
                    peer.known_blocks.append(this)
                    self.peers.send_frame(peer, data)
        else:
            self._announce_tip(event.blocks[-1])

    def _announce_tip(self, tip: Block) -> None:
        """A batch moved our tip: its header to peers of version 4 (it proves our height to
        them), a Tip to older ones."""
        proof = P.frame(P.tip_header(tip))
        plain = P.frame(P.Tip(tip.header.height, block_hash(tip.header)))
        for peer in list(self.peers.peers):
            if peer.hello is not None:
                self.peers.send_frame(peer, proof if peer.hello.version >= P.TIP_HEADER_VERSION else plain)

    def _relay_transaction(self, event: TransactionAdmitted) -> None:
        self._remember_tx(event.txid)
        self.peers.broadcast(P.NewTransaction(encode(event.tx)), skip=event.source)

    def _relay_proof(self, event: ProofAccepted) -> None:
        """Our own proof goes in full to every peer at once, straight from its signer; another's
        is announced to version-3 peers at the next `_announce_proofs` and pushed in full to
        older peers now, to each peer not known to have it."""
        proof, source, gossip = event.proof, event.source, self.gossip
        gossip.accepted(proof, source)
        relayed = source is not None
        candidates = self._pushed_to if relayed else self.peers.peers
        targets = [p for p in candidates if p.hello is not None and p is not source]
        if not targets:
            return  # the usual case for another's proof: nothing framed
        data = P.frame(P.Proof(proof=proof, relayed=relayed))
        for peer in targets:
            state = gossip.state(peer)
            if state is not None:
                if relayed and state.has(proof.pubkey, proof.timestamp):
                    continue
                state.learn(proof.pubkey, proof.timestamp)
            self.peers.send_frame(peer, data)


class BlockHead(msgspec.Struct, frozen=True, array_like=True):
    """A block's header and producer signature, its transactions skipped unread."""

    header: Header
    transactions: msgspec.Raw
    producer_signature: Signature


_peek = msgspec.msgpack.Decoder(BlockHead)


def peek_block(raw: bytes) -> BlockHead:
    """A peer's block, refused on its length, then read as far as its producer signature."""
    _check_size(raw)
    try:
        return _peek.decode(raw)
    except msgspec.MsgspecError as err:
        _refuse_undecodable(raw, str(err))
    except RecursionError:  # arrays nested past msgspec's depth in a field it skips (`Raw`)
        _refuse_undecodable(raw, "nested too deep")


def decode_block(raw: bytes) -> Block:
    """A peer's block: refused on its length before any decoding, then decoded
    (ProtocolViolation either way: no honest peer sends either)."""
    _check_size(raw)
    try:
        return decode(raw, Block)
    except DecodeError as err:
        _refuse_undecodable(raw, err.reason)


_items: Final = msgspec.msgpack.Decoder(list[msgspec.Raw])
"""An array's items, each left unread."""


def _header_version(raw: bytes) -> int:
    """The first item of a block's header, its version; 0 if the bytes do not say."""
    try:
        first = _items.decode(_items.decode(raw)[0])[0]
        return msgspec.msgpack.decode(first, type=int)
    except (msgspec.MsgspecError, IndexError, RecursionError):  # RecursionError: nested past msgspec's depth
        return 0


def _refuse_undecodable(raw: bytes, reason: str) -> NoReturn:
    """A block that does not decode is the sender's fault (ProtocolViolation), unless its header
    names a block version above every one this snoded knows: a later fork's block, which no
    header record here can read (`core.blocks.HEADER_CLASSES`); that is CannotValidateYet, never
    a ban (issue #34 item 4: the node learns the fork from its peers' ForkStatus)."""
    version = _header_version(raw)
    if version > max(HEADER_CLASSES):
        raise CannotValidateYet(f"a block of version {version}, which this snoded does not know: "
                                f"a later fork's (upgrade snoded)")
    raise ProtocolViolation(f"sent a block that does not decode: {reason}")


def _check_size(raw: bytes) -> None:
    if len(raw) > MAX_BLOCK_BYTES:
        raise ProtocolViolation(f"sent a block of {len(raw)} bytes; the limit is {MAX_BLOCK_BYTES}")


ALTERED_OLD_BLOCK: Final = 2
"""The height whose block `alter-old-block` serves altered."""
SLOW_OLD_BLOCKS_S: Final = 3.0
"""How late `slow-old-blocks` answers a GetBlocks: a backfill of four batches takes 12 s, long
enough for a test on a loaded machine to see it under way and kill it (well under REQUEST_TIMEOUT)."""


async def misbehave_old_blocks(misbehave: str, blocks: list[bytes]) -> list[bytes]:
    """Test only (`SNODE_TEST_MISBEHAVE`, devnet and regtest): `alter-old-block` serves the block
    of height ALTERED_OLD_BLOCK with its timestamp moved by a second (off the header chain: a
    backfilling node bans it); `slow-old-blocks` answers every GetBlocks SLOW_OLD_BLOCKS_S late (a
    backfill a test can kill half-way). Any other value: the blocks as they are."""
    if misbehave == "slow-old-blocks":
        await asyncio.sleep(SLOW_OLD_BLOCKS_S)
    if misbehave != "alter-old-block":
        return blocks
    out = []
    for raw in blocks:
        block = decode(raw, Block)
        if block.header.height == ALTERED_OLD_BLOCK:
            header = msgspec.structs.replace(block.header, timestamp=block.header.timestamp + 1)
            raw = encode(msgspec.structs.replace(block, header=header))
        out.append(raw)
    return out

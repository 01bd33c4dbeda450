"""The sync service: the asyncio adapter around `sync_machine.SyncMachine`.

It picks the peer to sync from (`sync_peers.choose`: the highest proven height, else the highest
hint, never a peer backed off), runs one machine against it, and does what the machine says:
send GetBlocks, stage and store batches through the node's ChainWriter (off the event loop),
switch to a longer fork, score, back off or ban a peer. It keeps the node's sync target at the
best proven height (`sync_peers.target`: a height a peer only announced never shows) and logs
progress (height / target, blocks per second, ETA).

It checks the tip headers peers send (`TipHeader`, `sync_peers.check_tip`) and sends its own to
each new peer of version 4. It wakes when a peer connects or announces a higher tip, when the
relay saw a block it cannot connect yet (`BlocksAhead`), and when a backed-off peer that claims
more is free again. A sync waiting on a peer that has sent nothing yet and has proved nothing
moves to a peer that proves a height above ours as soon as one does (a liar that claims a
height and never answers holds the sync only until an honest peer shows its tip).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from snode.core.blocks import Block, block_hash
from snode.core.errors import BlockFromFuture, SnodeError
from snode.core.genesis import Consensus
from snode.core.transition import check_block_stateless
from snode.net import protocol as P
from snode.net.admission import limited
from snode.net.events import BlocksAhead, PeerConnected
from snode.net.limits import (
    DEFAULT_SYNC_LIMITS,
    HEADERS_FIRST_MIN,
    SCORE_PROTOCOL,
    SCORE_SYNC_STALL,
    SCORE_SYNC_TIMEOUT,
    SyncLimits,
)
from snode.net.peer import Peer, PeerGone, RequestTimeout
from snode.net.peers import PeerManager
from snode.net.protocol import ProtocolViolation
from snode.net.relay import Relay, decode_block
from snode.node.batches import StagedBatch, StaleBatch
from snode.node.events import BlocksAdopted
from snode.node.upgrade import CannotValidateYet
from snode.node.writer import ChainWriter
from snode.params import MAX_BLOCK_BYTES
from snode.services import sync_machine as S
from snode.services.sync_headers import Contradicts, HeaderChain, Misled, download
from snode.services.sync_peers import Backoffs, Claim, check_tip, choose, target
from snode.services.sync_ranges import Sources, hedge_wait
from snode.store.errors import StoreError

log = logging.getLogger(__name__)

PROGRESS_EVERY: Final = 5.0
TIP_HEADER_WAIT_S: Final = 1.0
"""How long a sync that starts on a version-5 peer's Hello waits for its tip header (it comes
one round trip after the handshake)."""
SYNC_STORE_BLOCKS: Final = 2 * P.MAX_BLOCKS_PER_BATCH
"""Blocks a syncing node stores per transaction: two downloads. A sync commit rewrites most
pages of the state and transaction tables whatever its size, so 1,000 blocks cost about a
fifth less CPU per block than 500; a crash loses at most that many to download again."""
WHOLE_DOWNLOAD_BYTES: Final = P.MAX_BATCH_BYTES - MAX_BLOCK_BYTES
"""A download of fewer than MAX_BLOCKS_PER_BATCH blocks is whole only if the sender's next block
could not fit its byte limit: it has at least this many bytes (`Node.blocks_after`)."""


class Preempted(Exception):
    """A peer proved a height while the sync waited on one that has proved and sent nothing."""


class Blamed(ProtocolViolation):
    """A ProtocolViolation of one of a sync's sources (not necessarily the one it started with)."""

    def __init__(self, peer: Peer, reason: str) -> None:
        super().__init__(reason)
        self.peer = peer


@dataclass(slots=True, eq=False)
class _Ask:
    """One request of the machine's, as asked of one of the sync's sources or more."""

    locator: list[bytes]
    top: bytes | None
    """The block the range must follow (None: a request with the whole locator, which may
    bring a fork)."""
    sent: float
    """When the machine asked it."""
    tries: dict[Peer, tuple[asyncio.Future[P.Blocks], float]] = field(default_factory=dict)
    """Peer -> its answer, and when it was asked."""


class Syncer:
    """Keeps the node's chain up with the best peer's."""

    def __init__(self, peers: PeerManager, relay: Relay, writer: ChainWriter,
                 limits: SyncLimits = DEFAULT_SYNC_LIMITS) -> None:
        self.peers = peers
        self.relay = relay
        self.writer = writer
        self.node = writer.node
        self.limits = limits
        """The sync's bounds (`net.limits`), handed to its machine, sources and backoffs."""
        self.backoffs = Backoffs(time.monotonic, limits)
        self._wanted = asyncio.Event()
        self._run: _Run | None = None
        self._tip: Block | None = None
        """Our tip block, for the TipHeader a new peer gets (the last adopted, or read once)."""
        self._arrived = 0.0
        """When the last answer to a sync request came (before we got round to it)."""
        peers.on(P.Tip, self._on_tip)
        peers.on(P.TipHeader, self._on_tip_header)
        peers.on(P.Blocks, self._on_blocks)
        peers.on(P.Headers, self._on_headers)
        self._chain: HeaderChain | None = None
        """The last header chain downloaded (reused while it still leads above our height)."""
        self._tip_arrived = asyncio.Event()
        """Set whenever a peer's tip header comes (`_await_tip_header`)."""
        self._contradicting: dict[str, None] = {}
        """Addresses whose header chain contradicts the trusted checkpoint: never synced from
        (bounded: MAX_SYNC_BACKOFFS, the oldest out)."""
        hub = self.node.hub
        hub.subscribe(PeerConnected, self._on_peer_connected)
        hub.subscribe(BlocksAhead, self._on_blocks_ahead)
        hub.subscribe(BlocksAdopted, self._on_adopted)

    @property
    def running(self) -> bool:
        """A sync from a peer is under way (`services.backfill` waits while one is)."""
        return self._run is not None

    def start(self) -> None:
        """Run the sync loop until the peer manager stops."""
        self.peers.spawn(self._loop(), "sync")

    # --- what peers claim and prove -----------------------------------------------------------

    async def _on_tip(self, peer: Peer, message: P.Tip) -> None:
        peer.height = message.height  # a hint (a peer older than version 4 proves nothing)
        if message.height > self.node.height:
            self._wanted.set()

    async def _on_tip_header(self, peer: Peer, message: P.TipHeader) -> None:
        height = message.header.height
        peer.height = height
        if height <= max(self.node.height, peer.proven):
            return  # nothing it could prove is new to us
        forged = self._check_claim(peer, message)
        if forged:
            raise ProtocolViolation(forged)
        self._tip_arrived.set()
        self._wanted.set()

    def _check_claim(self, peer: Peer, tip: P.TipHeader) -> str:
        """Check the tip header `peer` sent: its height proven, or kept to check again once we
        know more; why it is a forgery, or ''."""
        node = self.node
        verdict = check_tip(tip, node.state, node.consensus, node.now(), self.relay.could_produce)
        if verdict.forged:
            peer.tip_header = None
            return verdict.forged
        if not verdict.proven:
            peer.tip_header = tip
            return ""
        peer.tip_header = None
        if tip.header.height >= peer.proven:
            peer.proven, peer.proven_tip = tip.header.height, (tip.header.height, block_hash(tip.header))
        self._proved(peer)
        return ""

    def _recheck_claims(self) -> None:
        """Our chain moved: the tip headers that proved nothing may now (their producer is
        registered by the blocks we stored)."""
        for peer in list(self.peers.peers):
            tip = peer.tip_header
            if tip is not None and tip.header.height > max(self.node.height, peer.proven):
                forged = self._check_claim(peer, tip)
                if forged:
                    self.peers.misbehaving(peer, SCORE_PROTOCOL, forged)

    def _proved(self, peer: Peer) -> None:
        """`peer` proved a height: the target may rise, and a sync stuck on a mere hint moves."""
        self._update_target()
        run, height = self._run, self.node.height
        if (run is not None and run.peer is not peer and run.machine.delivered == 0
                and run.peer.proven <= height < peer.proven):
            run.preempt.set()

    async def _on_blocks(self, peer: Peer, message: P.Blocks) -> None:
        if peer.blocks_owed:
            peer.blocks_owed -= 1  # the late answer to a request we gave up on
            return
        if peer.pending is not None and not peer.pending.done():
            self._arrived = time.monotonic()
            peer.pending.set_result(message)

    async def _on_headers(self, peer: Peer, message: P.Headers) -> None:
        """The answer to our GetHeaders (a sync that gives up on one closes the peer, so no
        late answer is owed)."""
        request = peer.headers_pending
        if request is None or request.done():
            raise ProtocolViolation("sent Headers it was not asked for")
        request.set_result(message)

    def _on_peer_connected(self, event: PeerConnected) -> None:
        peer = event.peer
        assert isinstance(peer, Peer)
        if event.height > self.node.height:
            self._wanted.set()
        if peer.hello is not None and peer.hello.version >= P.TIP_HEADER_VERSION and self.node.height > 0:
            self.peers.spawn(self._send_tip(peer), f"tip header to {peer.name}")

    def _on_blocks_ahead(self, event: BlocksAhead) -> None:
        if event.height > self.node.height:
            self._wanted.set()
            assert isinstance(event.peer, Peer)
            self._proved(event.peer)  # the relay checked the block's producer and signature

    def _on_adopted(self, event: BlocksAdopted) -> None:
        self._tip = event.blocks[-1]

    async def _send_tip(self, peer: Peer) -> None:
        """Our tip header to a new peer, so that it can believe our height."""
        node, tip = self.node, self._tip
        if tip is None or block_hash(tip.header) != node.state.tip_hash:
            tip = await self.writer.call(node.block_at, node.height)
            if tip is None:
                return
            self._tip = tip
        if not peer.writer.is_closing():
            self.peers.send(peer, P.tip_header(tip))

    def _claims(self) -> list[Claim]:
        return [Claim(p, p.key, p.height, p.proven) for p in self.peers.peers
                if p.hello is not None and not p.writer.is_closing() and p.key not in self._contradicting]

    def _update_target(self) -> None:
        self.node.note_sync_target(target(self._claims(), self.backoffs))

    # --- the loop -----------------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            await self._wait()
            while True:
                self._update_target()
                best = choose(self._claims(), self.node.height, self.backoffs)
                if best is None:
                    break
                assert isinstance(best.peer, Peer)
                await self._sync_guarded(best.peer)
            self._update_target()

    async def _wait(self) -> None:
        """Until a peer may have something for us: a wake-up, or the end of the backoff of a
        peer that claims more than we have."""
        height = self.node.height
        behind = [c.key for c in self._claims() if max(c.claimed, c.proven) > height]
        try:
            async with asyncio.timeout(self.backoffs.next_end(behind)):
                await self._wanted.wait()
        except TimeoutError:
            pass
        self._wanted.clear()

    async def _sync_guarded(self, best: Peer) -> None:
        """One sync from `best`; what goes wrong costs that peer, never the loop."""
        try:
            await self.sync_from(best)
        except BlockFromFuture as err:
            log.warning("sync from %s paused: %s (check both clocks)", best.name, err.reason)
            _believe_no_more(best, self.node.height)
        except ProtocolViolation as err:
            self.peers.misbehaving(err.peer if isinstance(err, Blamed) else best, SCORE_PROTOCOL, str(err))
        except CannotValidateYet as err:
            # A fork this node does not know: it stops here; the peer did nothing wrong.
            log.info("sync from %s stops at %d: %s", best.name, self.node.height, err.reason, extra=limited(best))
            _believe_no_more(best, self.node.height)
        except StaleBatch as err:
            log.debug("sync from %s: %s; asking again from the new tip", best.name, err)
        except StoreError as err:  # our disk, not the peer (a damaged database stops the daemon)
            log.error("sync from %s: could not store the blocks: %s", best.name, err.reason)
            await asyncio.sleep(1)
        except Exception:  # a bug must not end syncing for the life of the process
            log.exception("sync from %s failed", best.name)
            _believe_no_more(best, self.node.height)
            await asyncio.sleep(1)

    async def sync_from(self, peer: Peer) -> None:
        """Sync from one peer until we have its chain (or it fails us)."""
        node = self.node
        await self._await_tip_header(peer)
        chain = await self._header_chain(peer) if self._wants_headers(peer) else self._chain
        if chain is False:
            return
        if peer.height - node.height >= P.MAX_BLOCKS_PER_BATCH:
            node.verifier.start()  # a sync of whole downloads: its workers come up now
        run = self._run = _Run(self, peer)
        node.assumed_ancestors = chain.assumed if isinstance(chain, HeaderChain) else None
        assumed = chain.assumed_blocks if isinstance(chain, HeaderChain) else 0
        try:
            await run.drive()
        finally:
            self._run = None
            node.assumed_ancestors = None
            if isinstance(chain, HeaderChain) and chain.assumed_blocks > assumed:
                log.info("sync: %d blocks below the assume-valid block %d skipped their input signature checks",
                         chain.assumed_blocks - assumed, chain.assumed_height)
            await run.close()
            await self.writer.flush_state()  # whatever deferred state a sync that ended early left

    async def _await_tip_header(self, peer: Peer) -> None:
        """A sync that starts on the height a peer of version 5 hinted at in its Hello, far above
        ours, waits for the tip header it sends right after the handshake (TIP_HEADER_WAIT_S at
        most), so that it can download the header chain up to it; a peer that sends none (a liar
        that only claims) is synced from by blocks, as before."""
        node = self.node
        if (peer.hello is None or peer.hello.version < P.HEADERS_VERSION or peer.tip_header is not None
                or peer.proven > node.height or peer.height - node.height < HEADERS_FIRST_MIN):
            return
        deadline = time.monotonic() + TIP_HEADER_WAIT_S
        while peer.tip_header is None and peer.proven <= node.height and not peer.writer.is_closing():
            self._tip_arrived.clear()
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                    await self._tip_arrived.wait()
            except TimeoutError:
                return

    def _wants_headers(self, peer: Peer) -> bool:
        """Whether a sync from `peer` downloads its header chain first: a peer of version 5, a
        trusted checkpoint above our height, or an assume-valid block and HEADERS_FIRST_MIN
        blocks proven above us, and no header chain kept that leads as far (and passed the
        checkpoint). With neither anchor a header chain checks nothing the blocks do not (each is
        validated in full as it comes), and downloading it first cost a 20,000-block sync a
        tenth of its time (`python -m bench sync`): such a sync goes by blocks alone."""
        node, chain = self.node, self._chain
        if peer.hello is None or peer.hello.version < P.HEADERS_VERSION:
            return False
        checkpoint = node.trusted_checkpoint
        below = checkpoint is not None and checkpoint[0] > node.height
        ahead = _tip_to_hold(peer)[0]
        if not below and (node.assume_valid is None or ahead - node.height < HEADERS_FIRST_MIN):
            return False
        return not (chain is not None and chain.passed_checkpoint
                    and chain.base_height <= node.height < chain.tip_height and chain.tip_height >= ahead)

    async def _header_chain(self, peer: Peer) -> HeaderChain | bool:
        """`peer`'s header chain (`sync_headers.download`), kept; False when not to sync from
        it (it contradicts the trusted checkpoint, fell short of it or of what it proved, or
        failed the request: scored and backed off as a block request's failure is)."""
        node = self.node
        checkpoint = node.trusted_checkpoint
        limit = max(_tip_to_hold(peer)[0], checkpoint[0] if checkpoint is not None else 0)
        started = time.monotonic()
        try:
            chain = await download(peer, self.writer, limit, self._new_chain(peer), node.now)
        except Contradicts as err:
            self._refuse(peer, str(err))
            return False
        except Misled as err:
            self._stalled(peer, str(err), SCORE_SYNC_STALL)
            return False
        except RequestTimeout:
            self._stalled(peer, "did not answer a header request in time", SCORE_SYNC_TIMEOUT)
            peer.close()  # a late answer must not pass for another's
            return False
        except PeerGone:
            self._stalled(peer, "disconnected during a header request", 0)
            return False
        if chain.proven is not None and chain.tip_height < chain.proven[0] and not chain.ended:
            self._stalled(peer, f"sent a header chain that ends at {chain.tip_height}, below the "
                                f"tip {chain.proven[0]} it proved", SCORE_SYNC_STALL)
            return False
        if not chain.passed_checkpoint:
            assert checkpoint is not None
            self._stalled(peer, f"has a header chain only to {chain.tip_height}, below the trusted "
                                f"checkpoint's height {checkpoint[0]}", 0)
            return False
        log.info("sync: the header chain of %s leads from %d to %d%s (%.1f s)", peer.name, chain.base_height,
                 chain.tip_height, f", through the assume-valid block {chain.assumed_height}"
                 if chain.assumed_height else "", time.monotonic() - started, extra=limited(peer))
        self._chain = chain
        return chain

    def _new_chain(self, peer: Peer) -> Callable[[int, bytes, int | None], HeaderChain]:
        node = self.node

        def make(height: int, hash_: bytes, timestamp: int | None) -> HeaderChain:
            tip = _tip_to_hold(peer)
            return HeaderChain(height, hash_, timestamp, node.params, assume_valid=node.assume_valid,
                               checkpoint=node.trusted_checkpoint, proven=tip if tip[1] else None)
        return make

    def _refuse(self, peer: Peer, reason: str) -> None:
        """`peer`'s chain contradicts the trusted checkpoint: one line, never synced from again."""
        log.warning("sync: peer %s %s; not syncing from it", peer.name, reason, extra=limited(peer))
        if len(self._contradicting) >= self.limits.max_sync_backoffs:
            del self._contradicting[next(iter(self._contradicting))]
        self._contradicting[peer.key] = None
        self._update_target()

    def _stalled(self, peer: Peer, reason: str, points: int) -> None:
        """`peer` failed its header chain: scored (`points`), backed off, believed no higher than us."""
        if points:
            self.peers.misbehaving(peer, points, reason)
        self.backoff(reason, peer)
        _believe_no_more(peer, self.node.height)

    def backoff(self, reason: str, peer: Peer) -> None:
        """`peer` did not deliver: not synced from, nor its height believed, for a while."""
        seconds = self.backoffs.fail(peer.key)
        log.info("sync: peer %s %s; syncing from others, not from its address for %.0f s",
                 peer.name, reason, seconds, extra=limited(peer))
        self._update_target()


def _tip_to_hold(peer: Peer) -> tuple[int, bytes]:
    """The tip `peer`'s header chain must reach and hold: the tip header it sent that we could
    not check yet (its producer unknown to our chain: a fresh node far behind a network of
    service nodes), when higher than what it proved; else the last tip header that proved its
    height (hash b'' when none did)."""
    hinted = peer.tip_header
    if hinted is not None and hinted.header.height > peer.proven:
        return hinted.header.height, block_hash(hinted.header)
    if peer.proven_tip is not None and peer.proven_tip[0] == peer.proven:
        return peer.proven_tip
    return peer.proven, b""


def _believe_no_more(peer: Peer, height: int) -> None:
    """Take `peer` for no higher than `height` (until it shows more), so that a sync it failed
    is not tried again at once."""
    peer.height = min(peer.height, height)
    peer.proven = min(peer.proven, height)


def signed_check(consensus: Consensus) -> Callable[[Block], str]:
    """`SyncMachine.check_signed` for a chain: a block's transaction root and producer signature."""
    def check(block: Block) -> str:
        try:
            check_block_stateless(block, consensus)
        except SnodeError as err:
            return err.reason
        return ""
    return check


class _Run:
    """One machine, the peers it downloads from (`sync_ranges.Sources`: `peer`, the one whose
    answer it handles now, is one of them), and the batch it has staged."""

    def __init__(self, syncer: Syncer, peer: Peer) -> None:
        self.syncer = syncer
        self.peer = peer
        self.writer = syncer.writer
        node = syncer.node
        self.machine = S.SyncMachine(
            peer_height=peer.height, node_height=node.height, node_tip=node.state.tip_hash,
            store_blocks=SYNC_STORE_BLOCKS, batch_blocks=P.MAX_BLOCKS_PER_BATCH,
            could_produce=syncer.relay.could_produce, check_signed=signed_check(node.consensus),
            clock=time.monotonic, whole_bytes=WHOLE_DOWNLOAD_BYTES, limits=syncer.limits,
        )
        self.held: StagedBatch | None = None
        self.held_by = peer
        """The source of the staged batch's blocks (a batch is joined only from one source)."""
        self.sources = Sources([Claim(peer, peer.key, peer.height, peer.proven)],
                               limit=syncer.limits.max_sync_sources)
        self.last_height = node.height
        """The height of the last block downloaded."""
        self.requests: list[_Ask] = []
        self.preempt = asyncio.Event()
        """Set when another peer proves a height while this one has sent nothing (`Syncer._proved`)."""
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
                self.peer, reply, blocks, arrived = await self._answer(self.requests.pop(0))
            except RequestTimeout:
                await self.execute(machine.on_timeout())
                self.peer.close()  # a late answer must not pass for another's
                return
            except PeerGone:
                await self.execute(machine.on_gone())
                return
            except Preempted:
                log.debug("sync: leaving %s, which sent nothing yet, for a peer that proved its height",
                          self.peer.name, extra=limited(self.peer))
                await self.execute(machine.on_preempted())
                return
            if blocks:
                self.last_height = blocks[-1].header.height
            actions = machine.on_blocks(reply.height, blocks, sum(len(b) for b in reply.blocks), arrived)
            self.peer.height = machine.peer_height
            self._progress()

    async def _answer(self, ask: _Ask) -> tuple[Peer, P.Blocks, list[Block], float]:
        """The first good answer to `ask` from any peer it was asked of, decoded, and when it
        came (on the machine's clock: as if asked when the machine asked it); asked of another
        source as well after SYNC_HEDGE_S, or again when one fails. Preempted, or the failure
        of the last source that could answer (then `peer` is that one)."""
        waits: dict[asyncio.Future[P.Blocks], Peer] = {}
        preempt: asyncio.Future[Any] = asyncio.ensure_future(self.preempt.wait())
        try:
            while True:
                for peer, (request, _) in ask.tries.items():
                    if peer not in waits.values():
                        waits[asyncio.ensure_future(peer.answer(request))] = peer
                pending: list[asyncio.Future[Any]] = [*waits, preempt]
                done, _ = await asyncio.wait(pending, timeout=self._hedge_in(ask),
                                             return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    self._hedge(ask)
                for task in [t for t in waits if t in done]:
                    peer = waits.pop(task)
                    got = self._took(ask, peer, task)
                    if got is not None:
                        self._settle(ask, peer)
                        return got
                if preempt.done():
                    raise Preempted
        finally:
            self._settle(ask, None)  # whatever is still out is owed
            preempt.cancel()
            for task in waits:
                task.cancel()

    def _took(self, ask: _Ask, peer: Peer,
              task: asyncio.Future[P.Blocks]) -> tuple[Peer, P.Blocks, list[Block], float] | None:
        """`peer`'s answer to `ask`, decoded, or None when it failed and another source has the
        request now (the failure is scored and backed off as ever, the peer left)."""
        asked = ask.tries[peer][1]
        try:
            reply = task.result()
            blocks = _decode(reply.blocks)
        except ProtocolViolation as err:
            raise Blamed(peer, str(err)) from None
        except (RequestTimeout, PeerGone) as err:
            del ask.tries[peer]
            if not (ask.tries or self._again(ask, peer)):
                self.peer = peer
                raise
            self._failed(peer, "did not answer a sync request in time" if isinstance(err, RequestTimeout)
                         else "disconnected during a sync request", timeout=isinstance(err, RequestTimeout))
            return None
        if (ask.top is not None and blocks and blocks[0].header.prev_hash != ask.top
                and (len(ask.tries) > 1 or self._again(ask, peer))):
            del ask.tries[peer]
            self._failed(peer, "sent blocks that do not follow the block they were asked after", stall=True)
            return None
        return peer, reply, blocks, self.syncer._arrived - (asked - ask.sent)

    def _fill(self) -> None:
        """Take on the peers that proved the next range (`Sources.fill`)."""
        need = min(self.last_height + P.MAX_BLOCKS_PER_BATCH, self.machine.peer_height)
        for taken in self.sources.fill(self.syncer._claims(), need, self.syncer.backoffs):
            log.debug("sync: downloading from %s too (proven %d)", getattr(taken.peer, "name", "?"), taken.proven)

    def _hedge_in(self, ask: _Ask) -> float:
        """Seconds until `ask` is to be asked of another source too (or, with none to ask,
        until we look for one again: a peer may prove the range meanwhile)."""
        self._fill()
        if self.sources.spare(ask.tries) is None:
            return self.syncer.limits.sync_hedge_s
        return hedge_wait(max(asked for _, asked in ask.tries.values()), time.monotonic(),
                          self.syncer.limits.sync_hedge_s)

    def _hedge(self, ask: _Ask) -> None:
        spare = self.sources.spare(ask.tries)
        if spare is not None:
            assert isinstance(spare.peer, Peer)
            log.debug("sync: asking %s too, %s has not answered in %.0f s", spare.peer.name,
                      ", ".join(p.name for p in ask.tries), time.monotonic() - ask.sent)
            self._send(ask, spare.peer)

    def _again(self, ask: _Ask, failed: Peer) -> bool:
        """Ask `ask` of another source than `failed`; whether one could be asked."""
        other = self.sources.spare({*ask.tries, failed})
        if other is None:
            return False
        assert isinstance(other.peer, Peer)
        self._send(ask, other.peer)
        return True

    def _settle(self, ask: _Ask, winner: Peer | None) -> None:
        """The answer to `ask` came from `winner`: the other peers asked owe theirs (dropped when
        it comes); one asked before the winner was slower than it, and is left."""
        won = ask.tries.pop(winner)[1] if winner is not None else 0.0
        for peer, (request, asked) in ask.tries.items():
            if not request.done():
                request.cancel()
                peer.blocks_owed += 1
            if winner is not None and asked < won:
                self._failed(peer, f"answered a sync request slower than {winner.name}", scored=False)
        ask.tries.clear()

    def _failed(self, peer: Peer, reason: str, *, timeout: bool = False, stall: bool = False,
                scored: bool = True) -> None:
        """A source failed a request another source took over: scored (a timeout as ever, a
        wrong range as a stall), backed off and left; a timed-out one is closed (a late answer
        must not pass for another's)."""
        if scored:
            points = SCORE_SYNC_TIMEOUT if timeout else SCORE_SYNC_STALL if stall else 0
            if points:
                self.syncer.peers.misbehaving(peer, points, reason)
        self._backoff(reason, peer)
        self.sources.drop(peer)
        if timeout:
            peer.close()

    def _send(self, ask: _Ask, peer: Peer) -> None:
        ask.tries[peer] = (peer.ask_blocks(ask.locator, P.MAX_BLOCKS_PER_BATCH), time.monotonic())

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
                case S.Backoff():
                    self._backoff(action.reason, self.peer)
                case S.Ban():
                    raise Blamed(self.peer, action.reason)
                case S.Done():
                    self.peer.height = action.peer_height
                    self.peer.proven = min(self.peer.proven, action.peer_height)

    def _backoff(self, reason: str, peer: Peer) -> None:
        self.syncer.backoff(reason, peer)

    async def _request(self, action: S.Request) -> None:
        """Ask the machine's request: one with the whole locator (which may bring a fork) of the
        first source, a pipelined range of the source whose turn it is."""
        locator = [action.top] if action.top is not None else []
        if action.with_locator and self.machine.delivered:
            first: object = self.peer  # the rest of the fork it showed
        else:
            self._fill()
            turn = self.sources.next()
            first = turn.peer if turn is not None else self.peer
        if action.with_locator:
            locator += await self.writer.call(self.syncer.node.locator)
        assert isinstance(first, Peer)
        ask = _Ask(locator, None if action.with_locator else action.top, time.monotonic())
        self._send(ask, first)
        self.requests.append(ask)

    async def _stage(self, action: S.Stage) -> list[S.Action]:
        held, held_by = self.held, self.held_by
        if action.join and held_by is self.peer:  # one source per batch: its bad block is that source's
            batch = await self.writer.stage_batch(action.blocks, extending=held)
        else:
            # On the tip (nothing held): the machine found these blocks to follow it; relayed
            # blocks adopted meanwhile make them stale (StaleBatch: asked again from the new
            # tip), never an invalid block of this honest source's.
            batch = await self.writer.stage_batch(action.blocks, after=held,
                                                  on_tip=action.blocks[0].header.prev_hash if held is None else None)
            if held is not None:
                self.held = None
                await self._store(held, held_by, more=batch.failure is None)
        self.held, self.held_by = batch, self.peer
        self.sources.credit(self.peer, len(action.blocks))
        if batch.failure is None:
            self.peer.proven = max(self.peer.proven, batch.height)  # it delivered them
        more = self.machine.peer_height > action.blocks[-1].header.height
        staged = S.Staged(batch.height, batch.state.tip_hash, len(batch.commits), batch.failure is not None)
        return self.machine.on_staged(staged, more)

    async def _finish(self) -> None:
        batch, self.held = self.held, None
        if batch is not None:
            await self._store(batch, self.held_by, more=False)

    async def _store(self, batch: StagedBatch, by: Peer, *, more: bool) -> None:
        """Store and adopt a staged batch; an invalid block in it is the fault of `by`, its
        source. `more`: another batch is staged after it, so the store may defer its state rows."""
        try:
            await self.writer.finish_batch(batch, defer_state=more)
        except (BlockFromFuture, StaleBatch, StoreError):
            raise
        except SnodeError as err:
            raise Blamed(by, f"sent an invalid block during sync: {err.reason}") from None
        self._delivered(by)

    def _delivered(self, by: Peer) -> None:
        """`by`'s blocks are on our chain: it is a good source, and what other peers
        claimed may be provable now."""
        self.syncer.backoffs.succeeded(by.key)
        by.proven = max(by.proven, self.syncer.node.height)
        self.syncer._recheck_claims()

    async def _reorganize(self, branch: list[Block]) -> None:
        try:
            await self.writer.reorganize(branch)
        except (BlockFromFuture, StoreError):
            raise
        except SnodeError as err:
            raise Blamed(self.peer, f"sent an invalid fork: {err.reason}") from None
        self._delivered(self.peer)

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
        for ask in self.requests:
            for peer, (request, _) in ask.tries.items():
                if request.done() and not request.cancelled():
                    request.exception()
                else:
                    request.cancel()
                    peer.blocks_owed += 1
        self.requests.clear()
        self._summary()
        if self.held is None:
            return
        batch, self.held = self.held, None
        try:
            await self._store(batch, self.held_by, more=False)
            await self.syncer.relay.apply_orphans()
        except StaleBatch:
            pass
        except BlockFromFuture as err:
            log.warning("sync from %s paused: %s (check both clocks)", self.peer.name, err.reason)
        except CannotValidateYet as err:  # a fork this node does not know: the peer did nothing wrong
            log.info("sync from %s stops at %d: %s", self.peer.name, self.syncer.node.height, err.reason)
        except ProtocolViolation as err:
            self.syncer.peers.misbehaving(err.peer if isinstance(err, Blamed) else self.held_by, SCORE_PROTOCOL,
                                          str(err))

    def _summary(self) -> None:
        """How many blocks each source sent (INFO for a sync of more than one source or download)."""
        got = self.sources.delivered
        total = sum(got.values())
        if total:
            log.log(logging.INFO if len(got) > 1 or total >= P.MAX_BLOCKS_PER_BATCH else logging.DEBUG,
                    "sync: %d blocks from %d peers (%s)", total, len(got),
                    ", ".join(f"{getattr(p, 'name', '?')} {n}" for p, n in got.items()))


def _decode(raws: list[bytes]) -> list[Block]:
    """A download's blocks, decoded (ProtocolViolation for a block over MAX_BLOCK_BYTES or bytes
    that are not a block)."""
    return [decode_block(raw) for raw in raws]

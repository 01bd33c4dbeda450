"""The peer manager: the asyncio adapter around the sans-IO protocol.

It accepts and dials peers, runs the handshake, keeps `--add-priority-node` peers connected with
backoff, syncs the chain from the best peer in batches, relays transactions and blocks, and cuts
off and bans any peer that breaks the protocol (oversized frame, undecodable bytes, invalid
block or signature, flooding). Per-peer buffers are bounded, so no peer can grow our memory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from snode import __version__
from snode.core.blocks import Block, block_hash
from snode.core.encoding import decode, encode
from snode.core.errors import BadSignature, BlockFromFuture, DecodeError, SnodeError
from snode.core.transactions import Transaction, txid
from snode.core.transition import check_block_stateless
from snode.common.endpoints import ip_endpoint
from snode.net import protocol as P
from snode.net.events import PeerBanned, ProofMessage
from snode.net.protocol import FrameDecoder, ProtocolViolation
from snode.node.events import BlocksAdopted, ProofAccepted, TransactionAdmitted
from snode.node.node import Node, StagedBatch, StaleBatch

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT: Final = 10.0
IDLE_TIMEOUT: Final = 90.0
PING_INTERVAL: Final = 30.0
REQUEST_TIMEOUT: Final = 30.0
BAN_SECONDS: Final = 600
MAX_INBOUND: Final = 32
MAX_OUTBOUND: Final = 8
MAX_WRITE_BUFFER: Final = 32 * 1024 * 1024
FLOOD_RATE: Final = 500.0
"""Messages per second a peer may send on average..."""
FLOOD_BURST: Final = 2_000.0
"""...and in one burst."""
MAX_KNOWN_ADDRESSES: Final = 1_000
MAX_ORPHANS: Final = 100
MAX_BRANCH_BLOCKS: Final = 20_000
MAX_BRANCH_BYTES: Final = 64 * 1024 * 1024
"""A fork offered by a peer is held in memory until it is longer than ours: bounded."""
MAX_PER_IP: Final = 8
HELLO_MAX_FRAME: Final = 4_096
"""Until the handshake is done a peer may send only small frames."""
SEEN_TX_CACHE: Final = 50_000
PROGRESS_EVERY: Final = 5.0
SYNC_STORE_BLOCKS: Final = 2 * P.MAX_BLOCKS_PER_BATCH
"""Blocks a syncing node stores per transaction: two downloads. A sync commit rewrites most
pages of the state and transaction tables whatever its size, so 1,000 blocks cost about a
fifth less CPU per block than 500; a crash loses at most that many to download again."""
BACKOFF_MAX: Final = 30.0


@dataclass
class _Staging:
    """The sync batch staged and not yet finished, if any."""

    batch: StagedBatch | None = None


class PeerGone(Exception):
    """The peer disconnected or did not answer in time."""


@dataclass
class TokenBucket:
    """Allows `rate` events per second with bursts up to `burst`."""

    rate: float
    burst: float
    tokens: float
    stamp: float

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


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
        self.hello: P.Hello | None = None
        self.height = 0
        self.decoder = FrameDecoder(max_frame=HELLO_MAX_FRAME)
        self.inbox: deque[bytes] = deque()
        """Frames read but not handled yet: at most one read's worth (bounded by MAX_FRAME)."""
        self.bucket = TokenBucket(FLOOD_RATE, FLOOD_BURST, FLOOD_BURST, time.monotonic())
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
        self.send(P.GetBlocks(locator=locator[:P.MAX_LOCATOR], max_count=max_count))
        self._flush()
        return self.pending

    async def answer(self, request: asyncio.Future[P.Blocks]) -> P.Blocks:
        """Wait for the answer to `ask_blocks`; PeerGone on disconnect or timeout."""
        try:
            return await asyncio.wait_for(request, REQUEST_TIMEOUT)
        except (asyncio.TimeoutError, ConnectionError) as err:
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


class PeerManager:
    """All peers of one node."""

    def __init__(self, node: Node, *, bind_ip: str, listen_port: int, priority: list[str],
                 saved_peers: Sequence[str] = (),
                 save_peers: Callable[[list[str]], None] | None = None) -> None:
        self.node = node
        self.save_peers = save_peers
        self.bind_ip = bind_ip
        self.listen_port = listen_port
        self.nonce = int.from_bytes(os.urandom(8), "big") >> 1
        self.peers: set[Peer] = set()
        self.bans: dict[str, tuple[float, str]] = {}
        self.known: OrderedDict[str, None] = OrderedDict()
        self.priority: list[str] = list(priority)
        self._dialling: set[str] = set()
        self._connections: set[Peer] = set()
        """Every open connection, handshake done or not."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.base_events.Server | None = None
        self._sync_wanted = asyncio.Event()
        self._orphans: OrderedDict[bytes, Block] = OrderedDict()
        self._seen_txs: OrderedDict[bytes, None] = OrderedDict()
        for address in saved_peers:
            self._learn(address)
        node.hub.subscribe(BlocksAdopted, self._on_new_blocks)
        node.hub.subscribe(TransactionAdmitted, self._on_new_transaction)
        node.hub.subscribe(ProofAccepted, self._on_proof_accepted)

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self, sock: Any) -> None:
        self._server = await asyncio.start_server(self._inbound, sock=sock, limit=2**16)
        self._spawn(self._sync_loop(), "sync")
        self._spawn(self._maintain(), "maintain")
        for address in self.priority:
            self._spawn(self._keep_connected(address), f"priority {address}")

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for peer in list(self.peers):
            peer.close()
        self._save_peers()

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- operator-facing ----------------------------------------------------------------------

    def add_peer(self, address: str) -> None:
        """Connect to `address` and keep it connected (like --add-priority-node)."""
        if address not in self.priority:
            self.priority.append(address)
            self._spawn(self._keep_connected(address), f"priority {address}")

    def peer_list(self) -> list[dict[str, Any]]:
        return [
            {"address": p.name, "listen_address": p.listen_address,
             "direction": "outbound" if p.outbound else "inbound", "height": p.height,
             "agent": p.hello.agent if p.hello else "", "connected_since": int(p.connected_at)}
            for p in sorted(self.peers, key=lambda p: p.name) if p.hello is not None
        ]

    def ban_list(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [{"ip": ip, "seconds_left": int(until - now), "reason": reason}
                for ip, (until, reason) in self.bans.items() if until > now]

    def is_banned(self, ip: str) -> bool:
        entry = self.bans.get(ip)
        if entry is None:
            return False
        if entry[0] <= time.monotonic():
            del self.bans[ip]
            return False
        return True

    def ban(self, peer: Peer, reason: str) -> None:
        self.bans[peer.ip] = (time.monotonic() + BAN_SECONDS, reason)
        log.warning("banned peer %s for %d s: %s", peer.name, BAN_SECONDS, reason)
        peer.close()
        self.node.hub.publish(PeerBanned(peer.ip, reason, BAN_SECONDS))

    # --- connections --------------------------------------------------------------------------

    async def _inbound(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(reader, writer, outbound=False, dialled=None)
        if self.is_banned(peer.ip):
            log.debug("refused banned peer %s", peer.name)
            writer.close()
            return
        # Connections still in their handshake count too: each may hold a buffer.
        inbound = [p for p in self._connections if not p.outbound]
        if len(inbound) >= MAX_INBOUND:
            log.info("refused peer %s: %d inbound connections already", peer.name, MAX_INBOUND)
            writer.close()
            return
        if sum(1 for p in self._connections if p.ip == peer.ip) >= MAX_PER_IP:
            log.info("refused peer %s: %d connections from that address already", peer.name, MAX_PER_IP)
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._run(peer)
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def _dial(self, address: str) -> bool:
        """Connect to address and serve the peer until it goes; whether the handshake worked."""
        parsed = await self._resolve(address)
        if parsed is None or self.is_banned(parsed[0]) or address in self._dialling:
            return False
        self._dialling.add(address)
        try:
            local = (self.bind_ip, 0) if self.bind_ip not in ("0.0.0.0", "::") else None
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(parsed[0], parsed[1], local_addr=local, limit=2**16), 5
            )
        except (OSError, asyncio.TimeoutError) as err:
            log.debug("cannot connect to %s: %s", address, err)
            self._dialling.discard(address)
            return False
        peer = Peer(reader, writer, outbound=True, dialled=address)
        try:
            return await self._run(peer)
        finally:
            self._dialling.discard(address)

    async def _resolve(self, address: str) -> tuple[str, int] | None:
        """`ip:port` as is, `host:port` through the resolver; None (logged) if neither works."""
        parsed = ip_endpoint(address)
        if parsed is not None:
            return parsed.host, parsed.port
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            return None
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as err:
            log.info("cannot resolve peer %s: %s", address, err)
            return None
        return (str(infos[0][4][0]), int(port)) if infos else None

    async def _keep_connected(self, address: str) -> None:
        delay = 1.0
        while True:
            started = time.monotonic()
            handshook = await self._dial(address)
            if handshook and time.monotonic() - started > BACKOFF_MAX:
                delay = 1.0
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def _maintain(self) -> None:
        """Fill outbound slots from known addresses; save them now and then."""
        last_save = time.monotonic()
        while True:
            await asyncio.sleep(2)
            connected = {p.dialled for p in self.peers} | {p.listen_address for p in self.peers}
            outbound = sum(1 for p in self.peers if p.outbound) + len(self._dialling)
            for address in list(self.known):
                if outbound >= MAX_OUTBOUND:
                    break
                if address in connected or address in self._dialling or address in self.priority:
                    continue
                if address == f"{self.bind_ip}:{self.listen_port}":
                    continue
                self._spawn(self._dial(address), f"dial {address}")
                outbound += 1
            for peer in list(self.peers):
                if peer.hello is not None:
                    try:
                        peer.send(P.Ping(self.nonce))
                    except ProtocolViolation as err:
                        self.ban(peer, str(err))
            if time.monotonic() - last_save > 60:
                self._save_peers()
                last_save = time.monotonic()

    def _save_peers(self) -> None:
        if self.save_peers is None:
            return
        try:
            self.save_peers(list(self.known)[-MAX_KNOWN_ADDRESSES:])
        except SnodeError as err:
            log.warning("could not save peers: %s", err)

    def _learn(self, address: str) -> None:
        if ip_endpoint(address) is None:
            return
        self.known[address] = None
        self.known.move_to_end(address)
        while len(self.known) > MAX_KNOWN_ADDRESSES:
            self.known.popitem(last=False)

    async def _run(self, peer: Peer) -> bool:
        """Handshake, then read messages until the peer goes or breaks the rules."""
        handshook = False
        self._connections.add(peer)
        try:
            peer.send(self._hello())
            first = await self._next_message(peer, HANDSHAKE_TIMEOUT)
            if not isinstance(first, P.Hello):
                raise ProtocolViolation(f"first message was {type(first).__name__}, not Hello")
            if not self._accept_hello(peer, first):
                return False
            handshook = True
            peer.decoder.max_frame = P.MAX_FRAME
            self.peers.add(peer)
            log.info("connected to peer %s (%s, height %d)", peer.name,
                     "outbound" if peer.outbound else "inbound", peer.height)
            if peer.listen_address and peer.outbound:
                self._learn(peer.listen_address)
            peer.send(P.GetPeers())
            if peer.height > self.node.height:
                self._sync_wanted.set()
            while True:
                message = await self._next_message(peer)
                await self._handle(peer, message)
        except ProtocolViolation as err:
            self.ban(peer, str(err))
        except asyncio.TimeoutError:
            log.info("dropping peer %s: silent for too long", peer.name)
        except (ConnectionError, asyncio.IncompleteReadError, PeerGone, OSError):
            pass
        except Exception:  # a bug must cost one connection, never the node
            log.exception("error serving peer %s", peer.name)
        finally:
            self._connections.discard(peer)
            peer.close()
            if peer in self.peers:
                self.peers.discard(peer)
                log.info("peer %s disconnected", peer.name)
        return handshook

    async def _next_message(self, peer: Peer, timeout: float = IDLE_TIMEOUT) -> P.Message:
        if not peer.inbox:
            async with asyncio.timeout(timeout):
                while not peer.inbox:
                    data = await peer.reader.read(min(max(peer.decoder.needed(), 4096), 2**20))
                    if not data:
                        raise ConnectionError("closed")
                    peer.inbox.extend(peer.decoder.feed(data))
        message = P.parse(peer.inbox.popleft())
        # Uptime proofs are exempt: a busy network relays more of them than the flood rate
        # (2,000 SNs proving every 2 s on devnet), a duplicate is rejected by one lookup, and a
        # forged one gets its sender banned.
        if not isinstance(message, P.Proof) and not peer.bucket.take(time.monotonic()):
            raise ProtocolViolation(f"flooding: more than {FLOOD_RATE:.0f} messages per second")
        return message

    def _hello(self) -> P.Hello:
        node = self.node
        return P.Hello(
            network_id=node.params.network_id, genesis_hash=node.consensus.genesis_hash,
            version=P.PROTOCOL_VERSION, agent=f"snoded/{__version__}", height=node.height,
            top_hash=node.state.tip_hash, listen_port=self.listen_port, nonce=self.nonce,
        )

    def _accept_hello(self, peer: Peer, hello: P.Hello) -> bool:
        node = self.node
        if hello.nonce == self.nonce:
            log.debug("dropping connection to myself at %s", peer.name)
            return False
        if hello.network_id != node.params.network_id:
            log.warning("dropping peer %s: it is on another network (id %#x, we are %s)",
                        peer.name, hello.network_id, node.params.name)
            return False
        if hello.genesis_hash != node.consensus.genesis_hash:
            log.warning("dropping peer %s: its genesis %s is not ours (%s)", peer.name,
                        hello.genesis_hash.hex()[:16], node.consensus.genesis_hash.hex()[:16])
            return False
        if any(p.hello is not None and p.hello.nonce == hello.nonce for p in self.peers):
            log.debug("dropping duplicate connection to %s", peer.name)
            return False
        peer.hello = hello
        peer.height = hello.height
        return True

    # --- messages -----------------------------------------------------------------------------

    async def _handle(self, peer: Peer, message: P.Message) -> None:
        node = self.node
        if isinstance(message, P.Ping):
            peer.send(P.Pong(message.nonce))
        elif isinstance(message, P.Pong):
            pass
        elif isinstance(message, P.Hello):
            raise ProtocolViolation("sent Hello twice")
        elif isinstance(message, P.Tip):
            peer.height = message.height
            if message.height > node.height:
                self._sync_wanted.set()
        elif isinstance(message, P.GetBlocks):
            blocks = node.blocks_after(message.locator, message.max_count, P.MAX_BATCH_BYTES)
            peer.send(P.Blocks(blocks=blocks, height=node.height))
        elif isinstance(message, P.Blocks):
            if peer.pending is not None and not peer.pending.done():
                peer.pending.set_result(message)
        elif isinstance(message, P.NewBlock):
            self._on_peer_block(peer, message.block)
        elif isinstance(message, P.NewTransaction):
            self._on_peer_transaction(peer, message.tx)
        elif isinstance(message, P.GetPeers):
            addresses = [p.listen_address for p in self.peers if p.listen_address and p is not peer]
            peer.send(P.Peers(addresses=addresses[:P.MAX_PEER_ADDRESSES]))
        elif isinstance(message, P.Peers):
            for address in message.addresses:
                self._learn(address)
        elif isinstance(message, (P.Proof, P.ProofRejected)):
            self._on_proof_message(peer, message)

    def _on_peer_block(self, peer: Peer, raw: bytes) -> None:
        node = self.node
        try:
            block = decode(raw, Block)
        except DecodeError as err:
            raise ProtocolViolation(f"sent a block that does not decode: {err.reason}") from None
        h = block.header
        if h.height <= node.height and node.main_chain_hash(h.height) == block_hash(h):
            return
        if h.prev_hash != node.state.tip_hash:
            # Kept in memory until its parent comes: refuse a forgery before keeping it. (A block
            # on the tip gets every check, its signature once, from accept_block.)
            try:
                check_block_stateless(block, node.consensus)
            except SnodeError as err:
                raise ProtocolViolation(f"sent an invalid block {h.height}: {err.reason}") from None
            peer.height = max(peer.height, h.height)
            self._keep_orphan(block)
            self._sync_wanted.set()
            return
        try:
            node.accept_block(block, node.now())
        except BlockFromFuture as err:
            log.warning("ignored block %d from %s: %s (check both clocks)", h.height, peer.name, err.reason)
            return
        except SnodeError as err:
            raise ProtocolViolation(f"sent an invalid block {h.height}: {err.reason}") from None
        peer.height = max(peer.height, h.height)
        self._apply_orphans()

    def _keep_orphan(self, block: Block) -> None:
        self._orphans[block.header.prev_hash] = block
        while len(self._orphans) > MAX_ORPHANS:
            self._orphans.popitem(last=False)

    def _apply_orphans(self) -> None:
        node = self.node
        while True:
            child = self._orphans.pop(node.state.tip_hash, None)
            if child is None:
                return
            try:
                node.accept_block(child, node.now())
            except SnodeError as err:
                log.info("dropped a waiting block %d: %s", child.header.height, err)
                return

    def _on_peer_transaction(self, peer: Peer, raw: bytes) -> None:
        try:
            tx = decode(raw, Transaction)
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
        while len(self._seen_txs) > SEEN_TX_CACHE:
            self._seen_txs.popitem(last=False)

    def _on_proof_message(self, peer: Peer, message: P.Proof | P.ProofRejected) -> None:
        """Uptime proofs are judged by the service-node duties (`services.sn_duties`)."""
        self.node.hub.publish(ProofMessage(peer, peer.ip, peer.name, message))

    def send(self, peer: object, message: P.Message) -> None:
        """Send one message to a peer named in an event; a peer that no longer reads is banned."""
        assert isinstance(peer, Peer)
        try:
            peer.send(message)
        except ProtocolViolation as err:
            self.ban(peer, str(err))

    def ban_peer(self, peer: object, reason: str) -> None:
        """Ban a peer named in an event (`ban`)."""
        assert isinstance(peer, Peer)
        self.ban(peer, reason)

    # --- relay --------------------------------------------------------------------------------

    def broadcast(self, message: P.Message, *, skip: Peer | None = None) -> None:
        data = P.frame(message)
        for peer in list(self.peers):
            if peer is skip or peer.hello is None:
                continue
            try:
                peer.send_frame(data)
            except ProtocolViolation as err:
                self.ban(peer, str(err))

    def _on_new_blocks(self, event: BlocksAdopted) -> None:
        if len(event.blocks) == 1:
            self.broadcast(P.NewBlock(encode(event.blocks[-1])))
        else:
            self.broadcast(P.Tip(event.height, event.tip_hash))

    def _on_new_transaction(self, event: TransactionAdmitted) -> None:
        self._remember_tx(event.txid)
        source = event.source
        self.broadcast(P.NewTransaction(encode(event.tx)), skip=source if isinstance(source, Peer) else None)

    def _on_proof_accepted(self, event: ProofAccepted) -> None:
        """Every accepted proof goes to every other peer once: our own as sent straight from
        its signer, others' as relayed."""
        source = event.source
        self.broadcast(P.Proof(proof=event.proof, relayed=source is not None),
                       skip=source if isinstance(source, Peer) else None)

    # --- sync ---------------------------------------------------------------------------------

    def _best_peer(self) -> Peer | None:
        candidates = [p for p in self.peers if p.hello is not None]
        return max(candidates, key=lambda p: p.height, default=None)

    def _update_target(self) -> None:
        best = self._best_peer()
        self.node.note_sync_target(best.height if best is not None else 0)

    async def _sync_loop(self) -> None:
        while True:
            await self._sync_wanted.wait()
            self._sync_wanted.clear()
            while True:
                self._update_target()
                best = self._best_peer()
                if best is None or best.height <= self.node.height:
                    break
                try:
                    await self._sync_from(best)
                except PeerGone as err:
                    log.info("sync: %s; trying another peer", err)
                    best.height = min(best.height, self.node.height)
                    best.close()
                except BlockFromFuture as err:
                    log.warning("sync from %s paused: %s (check both clocks)", best.name, err.reason)
                    best.height = min(best.height, self.node.height)
                except ProtocolViolation as err:
                    self.ban(best, str(err))
                except StaleBatch as err:
                    log.debug("sync from %s: %s; asking again from the new tip", best.name, err)
                except Exception:  # a bug must not end syncing for the life of the process
                    log.exception("sync from %s failed", best.name)
                    best.height = min(best.height, self.node.height)
                    await asyncio.sleep(1)
            self._update_target()

    async def _sync_from(self, peer: Peer) -> None:
        """Sync from one peer until we have its chain; a request sent ahead and left unanswered
        (the batch before it failed) is dropped quietly."""
        ahead: list[asyncio.Future[P.Blocks]] = []
        staging = _Staging()
        if peer.height - self.node.height >= P.MAX_BLOCKS_PER_BATCH:
            self.node.verifier.start()  # a sync of whole downloads: its workers come up now
        try:
            await self._sync_batches(peer, ahead, staging)
        finally:
            for request in ahead:
                if request.done() and not request.cancelled():
                    request.exception()
                else:
                    request.cancel()
            if staging.batch is not None:
                # The peer went away (or failed) after this batch was staged: its blocks are
                # still good to keep once their signatures check out.
                batch, staging.batch = staging.batch, None
                try:
                    self._finish(batch)
                    self._apply_orphans()
                except StaleBatch:
                    pass
                except BlockFromFuture as err:
                    log.warning("sync from %s paused: %s (check both clocks)", peer.name, err.reason)
                except ProtocolViolation as err:
                    self.ban(peer, str(err))
            self.node.flush_state()  # whatever deferred state a sync that ended early left

    def _finish(self, batch: StagedBatch, *, more: bool = False) -> None:
        """Store and adopt a staged sync batch (Node.finish_batch); an invalid block in it is
        the peer's fault. `more`: another batch is staged after it, so the store may defer its
        state rows (written with a later batch, at the latest with the sync's last)."""
        try:
            self.node.finish_batch(batch, self.node.now(), defer_state=more)
        except (BlockFromFuture, StaleBatch):
            raise
        except SnodeError as err:
            raise ProtocolViolation(f"sent an invalid block during sync: {err.reason}") from None

    async def _sync_batches(
        self, peer: Peer, ahead: list[asyncio.Future[P.Blocks]], staging: _Staging
    ) -> None:
        """Download and apply batches until the node has the peer's chain. Batches that extend
        the tip are pipelined: batch N+1 is applied in memory, its signatures handed to the
        verifier, before batch N is written to the store, so the verifier works on N+1 while
        the store writes N (`Node.stage_batch`)."""
        node = self.node
        branch: list[Block] = []
        branch_bytes = 0
        started, start_height, last_report = time.monotonic(), node.height, time.monotonic()
        while True:
            staged = staging.batch
            tip_hash = staged.state.tip_hash if staged is not None else node.state.tip_hash
            if not ahead:
                top = [block_hash(branch[-1].header)] if branch else [tip_hash] if staged else []
                locator = top + node.locator()
                ahead.append(peer.ask_blocks(locator, P.MAX_BLOCKS_PER_BATCH))
            reply = await peer.answer(ahead.pop())
            if not reply.blocks:
                if staged is not None:
                    staging.batch = None
                    self._finish(staged)
                    self._apply_orphans()
                if reply.height > node.height and not branch:
                    raise ProtocolViolation(
                        f"claims height {reply.height} but has no blocks after this node's {node.height}"
                    )
                peer.height = min(reply.height, node.height)
                return
            peer.height = reply.height
            blocks = self._decode_batch(reply.blocks)
            first = blocks[0].header
            if branch and first.prev_hash != block_hash(branch[-1].header):
                branch = []  # the peer's chain moved under us; start over from our tip
                continue
            if not branch and first.prev_hash == tip_hash:
                more = reply.height > blocks[-1].header.height
                if more:
                    # Ask for the next batch before applying this one: the peer reads and
                    # sends it while we validate.
                    ahead.append(peer.ask_blocks([block_hash(blocks[-1].header)], P.MAX_BLOCKS_PER_BATCH))
                if (staged is not None and staged.failure is None
                        and len(staged.commits) + len(blocks) <= SYNC_STORE_BLOCKS):
                    # Joined to the staged batch, to be stored with it.
                    batch = node.stage_batch(blocks, node.now(), extending=staged)
                    staging.batch = None
                else:
                    batch = node.stage_batch(blocks, node.now(), after=staged)
                    staging.batch = None
                    if staged is not None:
                        self._finish(staged, more=batch.failure is None)
                if more and batch.failure is None:
                    staging.batch = batch
                else:
                    self._finish(batch)
                    # Blocks relayed to us while we synced wait for the chain to reach them
                    # (not earlier: one applied now would move the tip under a staged batch).
                    self._apply_orphans()
            else:
                if staged is not None:
                    # A fork: the blocks staged on the tip go to the store first.
                    staging.batch = None
                    self._finish(staged)
                for block in blocks:
                    try:
                        check_block_stateless(block, node.consensus)
                    except SnodeError as err:
                        raise ProtocolViolation(f"sent an invalid fork block: {err.reason}") from None
                branch.extend(blocks)
                branch_bytes += sum(len(raw) for raw in reply.blocks)
                if len(branch) > MAX_BRANCH_BLOCKS or branch_bytes > MAX_BRANCH_BYTES:
                    raise ProtocolViolation(
                        f"offers a fork of more than {MAX_BRANCH_BLOCKS} blocks or {MAX_BRANCH_BYTES} bytes"
                    )
                if branch[-1].header.height > node.height:
                    try:
                        node.reorganize(branch, node.now())
                    except BlockFromFuture:
                        raise
                    except SnodeError as err:
                        raise ProtocolViolation(f"sent an invalid fork: {err.reason}") from None
                    branch, branch_bytes = [], 0
            self._update_target()
            now = time.monotonic()
            if now - last_report >= PROGRESS_EVERY:
                last_report = now
                self._report_progress(start_height, started, now)
            top_height = staging.batch.height if staging.batch is not None else node.height
            if top_height >= peer.height and not branch:
                if staging.batch is not None:
                    batch, staging.batch = staging.batch, None
                    self._finish(batch)
                    self._apply_orphans()
                return

    def _decode_batch(self, raws: list[bytes]) -> list[Block]:
        """Decode a batch and check that it is a chain: heights consecutive, each block the
        child of the one before. (Blocks that extend the tip are then fully validated, their
        signatures in one batch; blocks of a fork pass `check_block_stateless` before they are
        held in memory.)"""
        blocks = []
        for raw in raws:
            try:
                blocks.append(decode(raw, Block))
            except SnodeError as err:
                raise ProtocolViolation(f"sent a block that does not decode: {err.reason}") from None
        for parent, child in zip(blocks, blocks[1:]):
            if (child.header.prev_hash != block_hash(parent.header)
                    or child.header.height != parent.header.height + 1):
                raise ProtocolViolation("sent blocks that do not form a chain")
        return blocks

    def _report_progress(self, start_height: int, started: float, now: float) -> None:
        node = self.node
        target = node.target_height or node.height
        rate = (node.height - start_height) / max(now - started, 1e-9)
        eta = (target - node.height) / rate if rate > 0 else float("inf")
        log.info("sync: height %d / %d (%.1f%%), %.0f blocks/s, ETA %s", node.height, target,
                 100.0 * node.height / max(target, 1), rate,
                 f"{eta:.0f} s" if eta != float("inf") else "unknown")

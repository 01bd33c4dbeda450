"""The peer manager: connections, bans and the address book.

It accepts and dials peers, runs the handshake, keeps `--add-priority-node` peers connected with
backoff, learns and saves addresses, and cuts off and bans any peer that breaks the protocol
(oversized frame, undecodable bytes, flooding, or what a handler above reports). Per-peer
buffers are bounded, so no peer can grow our memory.

It knows nothing of blocks, transactions or proofs: the relay (`net.relay`) and the sync
service (`services.sync`) register handlers for the messages they take (`on`), and hear of new
peers through the event hub (`PeerConnected`). A handler that raises ProtocolViolation gets its
peer banned with that reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from snode import __version__
from snode.common.endpoints import ip_endpoint
from snode.common.text import printable
from snode.core.errors import SnodeError
from snode.net import address_file
from snode.net import limits as L
from snode.net import protocol as P
from snode.net.addrman import AddressBook, network_group
from snode.net.admission import admit, limited
from snode.net.bans import Bans, Scores, address_key
from snode.net.dialer import Dialer
from snode.net.events import PeerBanned, PeerConnected, PeerDisconnected
from snode.net.fork_id import ForkId, compatibility, fork_id
from snode.net.limits import DEFAULT_LIMITS, PeerLimits
from snode.net.peer import Peer, PeerGone, PeerProtocol
from snode.net.protocol import ProtocolViolation
from snode.node.views import NetNode

log = logging.getLogger(__name__)

M = TypeVar("M")
YIELD_AFTER_S: Final = 0.010
"""CPU seconds one connection's task may hold the event loop for its queued messages before it
lets the others (and the RPC) have it: an inbox holds up to 8 MiB of frames, read without an
await between them. By CPU, not by count: a burst of proofs that arrive in one read must stay
one batch, for the signature workers (`verifier.INLINE_BELOW`), and a loaded machine's waits
must not split it."""
Handler = Callable[[Peer, Any], Awaitable[None]]


class PeerManager:
    """All peers of one node."""

    def __init__(self, node: NetNode, *, bind_ip: str, listen_port: int, priority: list[str],
                 saved_peers: Sequence[str] = (),
                 save_peers: Callable[[list[str]], Awaitable[None]] | None = None,
                 book_file: Path | None = None, limits: PeerLimits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.node = node
        self.limits, self.clock = limits, clock
        """Every connection's bounds (`limits.PeerLimits`), and the monotonic clock that its
        silence, its bans and its scores are judged by (the address book keeps wall time)."""
        self.save_peers = save_peers
        self.book_file = book_file
        """The address book's file (`net.address_file`, the data dir's peers.dat): read here,
        written with the saved peers (every minute and at the stop)."""
        self.bind_ip = bind_ip
        self.listen_port = listen_port
        self.nonce = int.from_bytes(os.urandom(8), "big") >> 1
        self.peers: set[Peer] = set()
        self.bans = Bans()
        self.scores = Scores()
        self.denied: frozenset[str] = frozenset()
        """Addresses this node is cut off from (`deny`: a fault test's partition)."""
        self.known = AddressBook(global_only=not node.params.private_public_ip_allowed)
        self.dialer = Dialer(self.known)
        self.priority: list[str] = list(priority)
        self._dialling: set[str] = set()
        self._dial_errors: dict[str, str] = {}
        """Why the last dial of an address could not connect (read by `_keep_connected`)."""
        self._unreachable: set[str] = set()
        """Priority addresses the log has said cannot be reached, until they can again."""
        self._connections: set[Peer] = set()
        """Every open connection, handshake done or not."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.base_events.Server | None = None
        self._handlers: dict[type, Handler] = {}
        if book_file is not None:
            taken = address_file.load(book_file, self.known, time.time())
            log.info("address book: %d entries from %s", taken, book_file)
        refused = self.dialer.load(saved_peers, time.time())
        if refused:
            log.warning("dropped %d saved peer addresses that this network does not dial (the first: %s); "
                        "the others are kept", len(refused), printable(refused[0]))

    def on(self, kind: type[M], handler: Callable[[Peer, M], Awaitable[None]]) -> None:
        """Pass every message of type `kind` to `handler(peer, message)` (one handler per type)."""
        if kind in self._handlers:
            raise ValueError(f"{kind.__name__} already has a handler")
        self._handlers[kind] = handler

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self, sock: Any) -> None:
        self._server = await asyncio.get_running_loop().create_server(
            lambda: PeerProtocol(outbound=False, connected=self._inbound, limits=self.limits, clock=self.clock),
            sock=sock)
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
        await self._save_peers()

    def spawn(self, coro: Any, name: str) -> None:
        """Run a task that `stop` cancels (the relay's and the sync service's too)."""
        self._spawn(coro, name)

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
             "agent": printable(p.hello.agent) if p.hello else "", "connected_since": int(p.connected_at)}
            for p in sorted(self.peers, key=lambda p: p.name) if p.hello is not None
        ]

    def ban_list(self) -> list[dict[str, Any]]:
        return [{"ip": key, "seconds_left": int(left), "reason": reason}
                for key, left, reason in self.bans.items(self.clock())]

    def deny(self, ips: frozenset[str]) -> None:
        """Cut this node off from `ips`, and only those (empty: from none): close the connections
        with them and make or take no new ones. Devnet and regtest fault tests make a network
        partition with it (`snoded` on SIGUSR1)."""
        self.denied = ips
        for peer in [p for p in self._connections if p.ip in ips]:
            peer.close()

    def is_banned(self, ip: str) -> bool:
        return ip in self.denied or self.bans.banned(address_key(ip), self.clock())

    def ban(self, peer: Peer, reason: str) -> None:
        """Ban the peer's address (`bans.address_key`: an IPv6 /64) and close every connection
        from it."""
        reason = printable(reason)  # it may quote the peer (a decode error): shown by get_peers and watch
        self.bans.ban(peer.key, reason, self.clock())
        self.scores.forget(peer.key)
        log.warning("banned peer %s for %d s: %s", peer.name, L.BAN_SECONDS, reason)
        for other in [p for p in self._connections if p.key == peer.key] + [peer]:
            other.close()
        self.node.publish(PeerBanned(peer.key, reason, L.BAN_SECONDS))

    def misbehaving(self, peer: object, points: int, reason: str) -> None:
        """Add `points` to the score of the peer's address (Bitcoin Core's Misbehaving; kept
        across reconnects, decaying: `bans.Scores`); at BAN_THRESHOLD the address is banned
        with `reason` (`limits` holds each offence's points)."""
        assert isinstance(peer, Peer)
        now = self.clock()
        if self.bans.banned(peer.key, now):
            return  # banned once already: one ban, one reason
        score = self.scores.add(peer.key, points, now)
        if score >= L.BAN_THRESHOLD:
            self.ban(peer, reason)
        else:
            log.debug("peer %s misbehaved (+%d, %.0f of %d): %s", peer.name, points, score,
                      L.BAN_THRESHOLD, reason)

    # --- connections --------------------------------------------------------------------------

    def _inbound(self, peer: Peer) -> None:
        """A peer connected to us: refused, or served by a task that `stop` cancels."""
        if self.is_banned(peer.ip):
            log.debug("refused banned peer %s", peer.name)
            peer.writer.close()
        elif not admit(peer, self._connections):
            peer.writer.close()
        else:
            self._spawn(self._run(peer), f"peer {peer.name}")

    async def _dial(self, address: str, *, feeler: bool = False) -> bool:
        """Connect to address and serve the peer until it goes (a feeler: until its handshake);
        whether the handshake worked."""
        if address in self._dialling:
            return False
        self._dialling.add(address)  # before the first await: one dial of an address at a time
        parsed = await self._resolve(address)
        if parsed is None or self.is_banned(parsed[0]):
            self._dialling.discard(address)
            return False
        try:
            local = (self.bind_ip, 0) if self.bind_ip not in ("0.0.0.0", "::") else None
            async with asyncio.timeout(5):
                _, protocol = await asyncio.get_running_loop().create_connection(
                    lambda: PeerProtocol(outbound=True, dialled=address, limits=self.limits, clock=self.clock),
                    parsed[0], parsed[1], local_addr=local)
        except (OSError, TimeoutError) as err:
            log.debug("cannot connect to %s: %s", address, err)
            self._dial_errors[address] = str(err) or "timed out"
            self._dialling.discard(address)
            return False
        assert protocol.peer is not None  # made when it connected
        try:
            return await self._run(protocol.peer, feeler=feeler)
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
        """Dial a priority address again and again, backing off; the default log says once that
        it cannot be reached (and `_run` once that it can again), not at every try."""
        delay = 1.0
        while True:
            started = time.monotonic()
            handshook = await self._dial(address)
            error = self._dial_errors.pop(address, None)
            if not handshook and error is not None and address not in self._unreachable:
                self._unreachable.add(address)
                log.warning("priority node %s cannot be reached (%s); trying again, backing off to every %d s",
                            address, error, L.BACKOFF_MAX)
            if handshook and time.monotonic() - started > L.BACKOFF_MAX:
                delay = 1.0
            await asyncio.sleep(delay)
            delay = min(delay * 2, L.BACKOFF_MAX)

    async def _maintain(self) -> None:
        """Fill outbound slots from the address book; save it now and then."""
        last_save = time.monotonic()
        while True:
            await asyncio.sleep(2)
            self._dial_more(time.time())
            self._ping_or_drop()
            if time.monotonic() - last_save > 60:
                await self._save_peers()
                last_save = time.monotonic()

    def _dial_more(self, now: float) -> None:
        """Dial what the dialer draws for the free outbound slots, or a feeler when none is free.
        Never an address we are connected to or dialling (`_dial` also refuses a second dial of
        one), a priority one (`_keep_connected` dials those), our own, or a banned one."""
        busy = {p.dialled for p in self._connections} | {p.listen_address for p in self.peers}
        busy |= self._dialling | set(self.priority) | {f"{self.bind_ip}:{self.listen_port}"}

        def skip(address: str) -> bool:
            return address in busy or self.is_banned(address.rpartition(":")[0].strip("[]"))

        outbound = [p for p in self._connections if p.outbound]
        groups = {network_group(p.ip) for p in outbound}
        groups |= {network_group(a.rpartition(":")[0].strip("[]")) for a in self._dialling}  # still connecting
        free = L.MAX_OUTBOUND - len(outbound) - len(self._dialling - {p.dialled for p in outbound})
        for address in self.dialer.outbound(now, free, skip=skip, groups=groups):
            log.debug("dialling %s", address)
            self._spawn(self._dial(address), f"dial {address}")
        alive = {p.dialled for p in self.peers if p.outbound and p.dialled is not None}
        if free <= 0 and (feeler := self.dialer.feeler(now, skip=skip, connected=alive)) is not None:
            log.debug("feeler to %s", feeler)
            self._spawn(self._dial(feeler, feeler=True), f"feeler {feeler}")

    def _ping_or_drop(self) -> None:
        """Ping a peer silent for PING_INTERVAL, drop one silent for IDLE_TIMEOUT (no timer a read)."""
        now = self.clock()
        for peer in list(self.peers):
            if peer.silent_since(now - self.limits.idle_timeout):
                log.info("dropping peer %s: silent for too long", peer.name, extra=limited(peer))
                peer.close()
            elif peer.hello is not None and peer.silent_since(now - self.limits.ping_interval):
                self.send(peer, P.Ping(self.nonce))

    async def _save_peers(self) -> None:
        if self.book_file is not None:
            try:
                data = address_file.encode(self.known, time.time())  # on the loop, which owns the book
                await asyncio.to_thread(address_file.write, self.book_file, data)
            except OSError as err:
                log.warning("could not save the address book to %s: %s", self.book_file, err.strerror or err)
        if self.save_peers is None:
            return
        try:
            await self.save_peers(self.known.to_save(time.time()))
        except SnodeError as err:
            log.warning("could not save peers: %s", err)

    async def _run(self, peer: Peer, *, feeler: bool = False) -> bool:
        """Handshake, then read messages until the peer goes or breaks the rules (a feeler's
        peer: until its handshake)."""
        handshook = False
        self._connections.add(peer)
        try:
            peer.send(self._hello())
            async with asyncio.timeout(self.limits.handshake_timeout):
                first = await self._next_message(peer)
            if not isinstance(first, P.Hello):
                raise ProtocolViolation(f"first message was {type(first).__name__}, not Hello")
            if not self._accept_hello(peer, first):
                return False
            handshook = True
            if peer.outbound:
                self._reached(peer)
            if feeler:
                return True
            peer.open_up(P.MAX_FRAME)  # what followed its Hello is framed now
            self.peers.add(peer)
            log.info("connected to peer %s (%s, height %d)", peer.name,
                     "outbound" if peer.outbound else "inbound", peer.height, extra=limited(peer))
            if peer.dialled in self._unreachable:
                self._unreachable.discard(peer.dialled)
                log.warning("priority node %s can be reached again", peer.dialled)
            if first.version >= P.FORK_ID_VERSION:
                peer.send(self._fork_status())
            peer.send(P.GetPeers())
            peer.addr_bucket.grant(P.MAX_PEER_ADDRESSES)  # its answer is read whole
            self.node.publish(PeerConnected(peer, peer.height))
            held = time.thread_time()
            while not peer.writer.is_closing():
                message = await self._next_message(peer)
                if message is not None:
                    await self._handle(peer, message)
                if time.thread_time() - held >= YIELD_AFTER_S:
                    await asyncio.sleep(0)  # a full inbox of cheap messages never holds the loop
                    held = time.thread_time()
        except P.HttpRequest:
            log.info("%s sent an HTTP request to the P2P port (a client meant for the admin RPC?): answered "
                     "in HTTP, not scored", peer.ip, extra=limited(peer))
            with contextlib.suppress(ProtocolViolation, ConnectionError):
                peer.send_frame(P.HTTP_ANSWER)
        except ProtocolViolation as err:
            self.misbehaving(peer, L.SCORE_PROTOCOL, str(err))
        except asyncio.TimeoutError:
            log.info("dropping peer %s: silent for too long", peer.name, extra=limited(peer))
        except (ConnectionError, asyncio.IncompleteReadError, PeerGone, OSError):
            pass
        except Exception:  # a bug must cost one connection, never the node
            log.exception("error serving peer %s", peer.name)
        finally:
            self._connections.discard(peer)
            peer.close()
            if peer in self.peers:
                self.peers.discard(peer)
                log.info("peer %s disconnected", peer.name, extra=limited(peer))
                self.node.publish(PeerDisconnected(peer))
        return handshook

    def _reached(self, peer: Peer) -> None:
        """An outbound peer shook hands: its address (as dialled, or a priority host's address
        as it told us) goes to the book's "tried" table."""
        address = peer.dialled if peer.dialled and ip_endpoint(peer.dialled) else peer.listen_address
        if address is not None:
            self.known.good(address, time.time())

    async def _next_message(self, peer: Peer) -> P.Message | None:
        """The peer's next message; None for one dropped unread (proofs over their rate). No
        deadline here: `_ping_or_drop` drops a silent peer, the handshake has its own."""
        while not peer.inbox:
            await peer.readable()
        message = P.parse(peer.take())
        now = peer.last_heard  # stamped by `take`
        # Uptime proofs have a rate of their own: a busy network relays more of them than the
        # flood rate (2,000 SNs proving every 2 s on devnet); one over it is dropped and scored.
        # An announced proof id costs what a proof does.
        proofs = 1 if isinstance(message, P.Proof) else len(message.ids) if isinstance(message, P.ProofInv) else 0
        if proofs:
            if peer.proof_bucket.take(now, proofs):
                return message
            self.misbehaving(peer, L.SCORE_PROOF_FLOOD,
                             f"proof flooding: more than {L.PROOF_RATE:.0f} uptime proofs per second")
            return None
        if not peer.bucket.take(now):
            raise ProtocolViolation(f"flooding: more than {self.limits.flood_rate:.0f} messages per second")
        return message

    def _hello(self) -> P.Hello:
        node = self.node
        return P.Hello(
            network_id=node.params.network_id, genesis_hash=node.consensus.genesis_hash,
            version=P.PROTOCOL_VERSION, agent=f"snoded/{__version__}", height=node.height,
            top_hash=node.state.tip_hash, listen_port=self.listen_port, nonce=self.nonce,
        )

    def _fork_status(self) -> P.ForkStatus:
        node = self.node
        mine = fork_id(node.consensus.genesis_hash, node.upgrade.schedule(), node.height)
        return P.ForkStatus(fork_hash=mine.hash, next_fork=mine.next)

    def _check_fork(self, peer: Peer, status: P.ForkStatus) -> None:
        """EIP-2124: a peer on another branch is dropped with one line, not banned (it is not
        misbehaving: one of the two nodes missed an upgrade)."""
        node = self.node
        if status.next_fork and peer.hello is not None and not peer.next_fork:
            # a fork this schedule may lack (`node.upgrade`): one height a connection, so that a
            # stream of ForkStatus of new heights is not a stream of learnt forks and file writes
            peer.next_fork = status.next_fork
            node.upgrade.learn_announcement(status.next_fork, node.height, agent=peer.hello.agent,
                                            address=peer.key)
        refusal = compatibility(node.consensus.genesis_hash, node.upgrade.schedule(), node.height,
                                ForkId(status.fork_hash, status.next_fork))
        if refusal is not None:
            log.warning("dropping peer %s: %s", peer.name, refusal, extra=limited(peer))
            peer.close()

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
        if hello.version < P.MIN_PROTOCOL_VERSION:
            log.warning("dropping peer %s: it speaks peer protocol %d, this node needs %d or later "
                        "(an older snoded: upgrade it)", peer.name, hello.version, P.MIN_PROTOCOL_VERSION)
            return False
        if any(p.hello is not None and p.hello.nonce == hello.nonce for p in self.peers):
            log.debug("dropping duplicate connection to %s", peer.name)
            return False
        peer.hello = hello
        peer.height = hello.height
        return True

    # --- messages -----------------------------------------------------------------------------

    async def _handle(self, peer: Peer, message: P.Message) -> None:
        match message:
            case P.Ping():
                peer.send(P.Pong(message.nonce))
            case P.Pong():
                pass
            case P.Hello():
                raise ProtocolViolation("sent Hello twice")
            case P.ForkStatus():
                self._check_fork(peer, message)
            case P.GetPeers():
                if peer.addresses_given:
                    return  # one answer a connection: asked again and again, it was 75x its bytes back
                peer.addresses_given = True
                addresses = [p.listen_address for p in self.peers if p.listen_address and p is not peer]
                peer.send(P.Peers(addresses=addresses[:P.MAX_PEER_ADDRESSES]))
            case P.Peers():
                read = peer.addr_bucket.take_up_to(peer.last_heard, len(message.addresses))
                now = time.time()
                for address in message.addresses[:read]:  # the rest skipped unread (limits.ADDR_RATE)
                    self.known.add(address, source_ip=peer.ip, now=now)
            case _:
                handler = self._handlers.get(type(message))
                if handler is not None:
                    await handler(peer, message)

    # --- relay helpers for the layers above ---------------------------------------------------

    def broadcast(self, message: P.Message, *, skip: object | None = None) -> None:
        """Send a message to every handshaken peer but `skip`."""
        data = P.frame(message)
        for peer in list(self.peers):
            if peer is skip or peer.hello is None:
                continue
            try:
                peer.send_frame(data)
            except ProtocolViolation as err:
                self.ban(peer, str(err))

    def send(self, peer: object, message: P.Message) -> None:
        """Send one message to a peer named in an event; a peer that no longer reads is banned."""
        self.send_frame(peer, P.frame(message))

    def send_frame(self, peer: object, data: bytes) -> None:
        """`send` for a message already framed (one frame for many peers)."""
        assert isinstance(peer, Peer)
        try:
            peer.send_frame(data)
        except ProtocolViolation as err:
            self.ban(peer, str(err))

    def ban_peer(self, peer: object, reason: str) -> None:
        """Ban a peer named in an event (`ban`)."""
        assert isinstance(peer, Peer)
        self.ban(peer, reason)

